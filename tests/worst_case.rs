//! Bounded work per call, in memory (issues 28 and 39): with a million
//! sleeps on one timer, no single registration allocates, and no single
//! drop frees, more than [`BOUND`] bytes, whether the sleeps are dropped in
//! creation order, newest first or shuffled. Before the chunked slab, the registration that
//! outgrew the slab copied all of it (up to 40 MB), and one drop freed it
//! all (the last, in creation order: 41.9 MB) or walked and shrank it
//! (newest first, drop #737,983: 31.5 MB), under the shard's lock:
//! milliseconds in one call. The same bound holds for callbacks, and for
//! a `DelayQueue`'s inserts and removals (its `compact`, `clear` and
//! `shrink_to_fit` are O(n) by nature).
//!
//! A counting allocator measures, per thread, the bytes each call
//! allocates (growth, for a `realloc`) and frees (shrinkage, for a
//! `realloc`). Bytes are the work units here: the time per call is the
//! `compare` bench's "worst single drop" row.
//!
//! Freeing even one chunk could take milliseconds: glibc hands the top of
//! its heap back to the system, tens of megabytes of chunks freed before
//! it, in the `free` that frees the top (`wheel/slots/hand_off.rs`). So a
//! big wheel frees no chunk on the caller's thread at all; its chunks are
//! freed on the crate's `wheel-free` thread, and the test checks that they
//! are (in a child process of its own, where every other thread's frees
//! are that thread's).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::task::{Context, Waker};
use std::time::{Duration, Instant};

use wheel::{Sleep, Timer};

mod common;

/// Counts the bytes each thread allocates and frees.
struct Counting;

thread_local! {
    static ALLOCATED: Cell<usize> = const { Cell::new(0) };
    static FREED: Cell<usize> = const { Cell::new(0) };
}

/// Bytes freed on every thread.
static FREED_ANYWHERE: AtomicUsize = AtomicUsize::new(0);

fn count(counter: &'static std::thread::LocalKey<Cell<usize>>, bytes: usize) {
    // `try_with`: the allocator also runs while a thread's locals go.
    let _ = counter.try_with(|c| c.set(c.get() + bytes));
}

thread_local! {
    /// An allocation of this many bytes, on a thread that set it, waits
    /// until [`RESUME`] (0: none): a test holds a thread there.
    static PAUSE_AT: Cell<usize> = const { Cell::new(0) };
}

/// Whether a thread waits in [`PAUSE_AT`]; and what lets it go on.
static PAUSED: AtomicBool = AtomicBool::new(false);
static RESUME: AtomicBool = AtomicBool::new(false);

fn pause_if_asked(bytes: usize) {
    let asked = |at: &Cell<usize>| at.get() == bytes && at.replace(0) == bytes;
    if PAUSE_AT.try_with(asked).unwrap_or(false) {
        PAUSED.store(true, Ordering::SeqCst);
        while !RESUME.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
    }
}

fn count_freed(bytes: usize) {
    count(&FREED, bytes);
    FREED_ANYWHERE.fetch_add(bytes, Ordering::Relaxed);
}

// SAFETY: every call is passed on to `System` unchanged; the counting
// touches only thread-locals of `Copy` cells, which do not allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(&ALLOCATED, layout.size());
        pause_if_asked(layout.size());
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count_freed(layout.size());
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(&ALLOCATED, new_size.saturating_sub(layout.size()));
        count_freed(layout.size().saturating_sub(new_size));
        // SAFETY: the caller's contract, passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The most one call may allocate or free. A chunk of the slab is 1024
/// entries of 40 bytes; the drop that empties the wheel frees at most three
/// (the spare, the last one emptied and chunk 0) and the chunk directory
/// (40 bytes per chunk: 39 KB at a million sleeps); a registration
/// allocates one chunk or doubles the directory. A million entries are
/// 40 MB.
const BOUND: usize = 256 * 1024;

const MILLION: u64 = 1_000_000;

/// A chunk of the slab: 1024 entries of 40 bytes.
const CHUNK_BYTES: usize = 1024 * 40;

/// Bytes freed on other threads than this one so far.
fn freed_elsewhere() -> usize {
    FREED_ANYWHERE.load(Ordering::Relaxed) - FREED.with(Cell::get)
}

/// Bytes allocated and freed on this thread while `f` runs.
fn work_of(f: impl FnOnce()) -> (usize, usize) {
    let before = (ALLOCATED.with(Cell::get), FREED.with(Cell::get));
    f();
    (
        ALLOCATED.with(Cell::get) - before.0,
        FREED.with(Cell::get) - before.1,
    )
}

/// A million sleeps on `timer`, each registered by one poll (on a paused
/// clock, so none fires); returns them and the most one registration
/// allocated, with its number.
fn registered(timer: &Timer) -> (Vec<Sleep>, (usize, usize)) {
    let mut cx = Context::from_waker(Waker::noop());
    let mut sleeps: Vec<Sleep> = (0..MILLION)
        .map(|i| timer.sleep(Duration::from_secs(1 + i % 1000)))
        .collect();
    let (worst, _) = worst_each(sleeps.iter_mut(), |sleep| {
        assert!(Pin::new(sleep).poll(&mut cx).is_pending());
    });
    (sleeps, worst)
}

/// Runs `op` on each item in turn: the most bytes one call allocated and
/// the most one freed, each with the call's number.
fn worst_each<X>(
    items: impl IntoIterator<Item = X>,
    mut op: impl FnMut(X),
) -> ((usize, usize), (usize, usize)) {
    let (mut allocated, mut freed) = ((0, 0), (0, 0));
    for (n, item) in items.into_iter().enumerate() {
        let (a, f) = work_of(|| op(item));
        allocated = allocated.max((a, n));
        freed = freed.max((f, n));
    }
    (allocated, freed)
}

/// Drops the sleeps one by one, from the back; returns the most one drop
/// freed, and which drop that was.
fn worst_drop(mut sleeps: Vec<Sleep>) -> (usize, usize) {
    worst_each(std::iter::from_fn(|| sleeps.pop()), drop).1
}

/// A deterministic shuffle (xorshift64).
fn shuffle<X>(items: &mut [X]) {
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    for i in (1..items.len()).rev() {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        items.swap(i, (seed % (i as u64 + 1)) as usize);
    }
}

/// In random order, before a flush of discarded sleeps emptied at most one
/// chunk, one drop freed 111 chunks (4.5 MB). Before chunks were freed on
/// the `wheel-free` thread, the drops that emptied one freed it here
/// (40 KiB, and the drop that emptied the wheel three and the directory),
/// and the `compare` bench's worst single drop was 1.1-3.1 ms.
#[tokio::test(start_paused = true)]
async fn no_call_on_a_million_sleeps_allocates_or_frees_more_than_a_few_chunks() {
    // Alone in a process, so that what other threads free is the
    // `wheel-free` thread's.
    if !common::in_a_child("WHEEL_WORST_CASE_CHILD", &[]) {
        return;
    }
    let _guard = common::guard();
    for order in ["oldest first", "newest first", "random"] {
        let timer = Timer::builder().build().unwrap();
        let (mut sleeps, (allocated, at)) = registered(&timer);
        let held = timer.stats().allocated_entries;
        assert!(held >= MILLION as usize);
        assert!(
            allocated <= BOUND,
            "registration #{at} allocated {allocated} bytes"
        );
        match order {
            // `worst_drop` drops from the back.
            "oldest first" => sleeps.reverse(),
            "random" => shuffle(&mut sleeps),
            _ => {}
        }
        let elsewhere = freed_elsewhere();
        let (freed, at) = worst_drop(sleeps);
        let after = timer.stats();
        assert_eq!((after.entries, after.allocated_entries), (0, 0));
        assert!(
            freed < CHUNK_BYTES,
            "{order}: drop #{at} freed {freed} bytes on its own thread"
        );
        // Every chunk's 40 bytes an entry, freed on the other thread soon
        // (it may wait 0.1 s for more to free).
        let chunks = held * 40;
        let start = Instant::now();
        while freed_elsewhere() - elsewhere < chunks {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "{order}: {} of {chunks} bytes of chunks freed elsewhere",
                freed_elsewhere() - elsewhere
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// `n` sleeps on `timer`, `after` from now, each registered by a poll.
fn pending(timer: &Timer, n: usize, after: Duration) -> Vec<Sleep> {
    let mut cx = Context::from_waker(Waker::noop());
    let mut sleeps: Vec<Sleep> = (0..n).map(|_| timer.sleep(after)).collect();
    for sleep in &mut sleeps {
        assert!(Pin::new(sleep).poll(&mut cx).is_pending());
    }
    sleeps
}

/// A pass hands its wakers out in batches kept in a buffer its thread
/// reuses: once a thread has fired timers, firing more allocates nothing.
#[test]
fn firing_again_on_a_thread_allocates_nothing() {
    let timer = Timer::builder().manual().build().unwrap();
    let mut cx = Context::from_waker(Waker::noop());
    let mut allocated = Vec::new();
    for _ in 0..3 {
        // More than a batch (32), so a pass hands out several.
        let mut sleeps = pending(&timer, 100, Duration::from_millis(5));
        allocated.push(work_of(|| timer.advance(Duration::from_millis(5))).0);
        for sleep in &mut sleeps {
            assert!(Pin::new(sleep).poll(&mut cx).is_ready());
        }
    }
    // The first may take the thread's buffer (unless an earlier test on
    // this thread did); the others find it.
    assert_eq!(allocated[1..], [0, 0], "later passes reuse the buffer");
}

/// A flush of batched cancels hands their wakers to a buffer of the
/// thread's, dropped after the lock. A new `Vec` a flush (2 KiB, past
/// glibc's per-thread cache) could wait for the allocator's lock that the
/// `wheel-free` thread holds while it hands memory back: `compare`'s worst
/// newest-first drop at a million read 0.6-1.8 ms with one.
#[test]
fn cancelling_again_on_a_thread_allocates_nothing() {
    let timer = Timer::builder().manual().build().unwrap();
    let mut allocated = Vec::new();
    for _ in 0..3 {
        // Several batches of 128; none of the last 64 made (freed at once).
        let mut sleeps = pending(&timer, 1000, Duration::from_secs(5));
        sleeps.truncate(900);
        let ((most, _), _) = worst_each(sleeps, drop);
        allocated.push(most);
    }
    assert_eq!(allocated[1..], [0, 0], "later flushes reuse the buffers");
}

/// After a `compact` that moved 100,000 entries, the removal of the last
/// of them freed the map of moved keys whole (2.9 MB): a queue keeps that
/// room, as it keeps its slab's, until `shrink_to_fit` or `compact`.
#[test]
fn no_queue_removal_after_a_compact_frees_more_than_a_few_chunks() {
    let timer = Timer::builder().manual().build().unwrap();
    let mut queue = wheel::DelayQueue::with_timer(timer);
    let n = 100_000;
    let keys: Vec<_> = (0..2 * n)
        .map(|i| queue.insert(i, Duration::from_secs(1 + i % 100)))
        .collect();
    for key in &keys[..n as usize] {
        queue.remove(key);
    }
    queue.compact();
    let (_, (freed, at)) = worst_each(&keys[n as usize..], |key| {
        queue.remove(key);
    });
    assert!(freed <= BOUND, "removal #{at} freed {freed} bytes");
}

/// A queue kept deadlines over 292 years away in a `HashMap`, which one
/// insert reallocated whole: 6.6 MB at the 114,689th.
#[test]
fn no_far_deadline_inserted_into_a_queue_allocates_more_than_a_few_chunks() {
    let timer = Timer::builder().manual().build().unwrap();
    let far = timer.now() + Duration::from_secs(86_400 * 365 * 1000);
    let mut queue = wheel::DelayQueue::with_timer(timer);
    let mut keys = Vec::with_capacity(200_000);
    let ((allocated, at), _) = worst_each(0..200_000, |i| keys.push(queue.insert_at(i, far)));
    assert!(
        allocated <= BOUND,
        "insert #{at} allocated {allocated} bytes"
    );
    let (_, (freed, at)) = worst_each(&keys, |key| {
        queue.remove(key);
    });
    assert!(freed <= BOUND, "removal #{at} freed {freed} bytes");
}

/// Callbacks as sleeps: no `schedule` of 300,000 allocates, and no cancel
/// in random order frees, more than a few chunks.
#[test]
fn no_schedule_or_cancel_of_300_000_callbacks_allocates_or_frees_more_than_a_few_chunks() {
    let timer = Timer::builder().manual().build().unwrap();
    let mut handles = Vec::with_capacity(300_000);
    let ((allocated, at), _) = worst_each(0..300_000, |i| {
        handles.push(timer.schedule(Duration::from_secs(1 + i % 1000), || {}));
    });
    assert!(
        allocated <= BOUND,
        "schedule #{at} allocated {allocated} bytes"
    );
    shuffle(&mut handles);
    let (_, (freed, at)) = worst_each(handles, |handle| assert!(handle.cancel()));
    assert!(freed <= BOUND, "cancel #{at} freed {freed} bytes");
    assert_eq!(timer.stats().allocated_entries, 0);
}

#[cfg(target_os = "linux")]
unsafe extern "C" {
    fn fork() -> i32;
    fn waitpid(pid: i32, status: *mut i32, options: i32) -> i32;
    fn _exit(status: i32) -> !;
    fn kill(pid: i32, signal: i32) -> i32;
}

/// A big wheel (past 64 chunks) of sleeps registered on a manual timer,
/// and the bytes of its chunks.
fn burst(timer: &Timer) -> (Vec<Sleep>, usize) {
    let mut cx = Context::from_waker(Waker::noop());
    let mut sleeps: Vec<Sleep> = (0..100_000)
        .map(|i| timer.sleep(Duration::from_secs(1 + i % 100)))
        .collect();
    for sleep in &mut sleeps {
        assert!(Pin::new(sleep).poll(&mut cx).is_pending());
    }
    (sleeps, timer.stats().allocated_entries * 40)
}

/// [`burst`], dropped: its chunks are let go of (hand-offs); their bytes.
fn burst_dropped(timer: &Timer) -> usize {
    burst(timer).1
}

/// A process forked after the `wheel-free` thread started has no such
/// thread: what its big wheels let go of waited in the queue for ever
/// (up to 4,096 chunks, 160 MiB), and was then freed in place.
#[cfg(target_os = "linux")]
#[test]
fn a_forked_childs_big_wheel_still_frees_its_chunks() {
    // Alone in a process, so that the fork copies no other test's state.
    if !common::in_a_child("WHEEL_FORKED_CHILD", &[]) {
        return;
    }
    // Starts the thread.
    burst_dropped(&Timer::builder().manual().build().unwrap());
    // SAFETY: the child only allocates, frees and exits; no other thread
    // of this process holds a lock it takes (the queue's is held only
    // for a swap, which a fork mid-swap would wedge: the fix avoids it).
    let pid = unsafe { fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let freed = FREED_ANYWHERE.load(Ordering::Relaxed);
        let chunks = burst_dropped(&Timer::builder().manual().build().unwrap());
        let start = Instant::now();
        let done = loop {
            if FREED_ANYWHERE.load(Ordering::Relaxed) - freed >= chunks {
                break true;
            }
            if start.elapsed() > Duration::from_secs(5) {
                break false;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        // SAFETY: ends the child at once, running nothing of the parent's.
        unsafe { _exit(if done { 0 } else { 1 }) }
    }
    let mut status = 0;
    // SAFETY: `pid` is this process's child; `status` is a valid place.
    assert_eq!(unsafe { waitpid(pid, &mut status, 0) }, pid);
    assert_eq!(status, 0, "the forked child's chunks were never freed");
}

/// A level first needed late in a burst (here by its last sleep) lies above
/// the burst's chunks; freed in the drop that empties the wheel, after the
/// `wheel-free` thread had freed the chunks below it, it handed them back
/// to the system itself (strace: a 1.3 MB `madvise` in that drop, at
/// 4,096 slots a level; up to the whole burst, in another order). So a big
/// wheel's emptied levels go the way of its chunks.
#[test]
fn the_drop_that_empties_a_big_wheel_frees_no_level_on_its_own_thread() {
    let timer = Timer::builder()
        .manual()
        .slots_per_level(4096)
        .build()
        .unwrap();
    let mut cx = Context::from_waker(Waker::noop());
    let mut sleeps: Vec<Sleep> = (0..100_000)
        .map(|i| timer.sleep(Duration::from_millis(1 + i % 4000)))
        .collect();
    // Ten hours: two more levels of 32 KiB each.
    sleeps.push(timer.sleep(Duration::from_secs(36_000)));
    for sleep in &mut sleeps {
        assert!(Pin::new(sleep).poll(&mut cx).is_pending());
    }
    assert_eq!(timer.stats().levels, 3);
    let last = sleeps.remove(0);
    drop(sleeps);
    let (_, freed) = work_of(|| drop(last));
    assert_eq!(timer.stats().levels, 1);
    assert!(
        freed < CHUNK_BYTES,
        "the last drop freed {freed} bytes on its own thread"
    );
}

thread_local! {
    static BURST: std::cell::RefCell<Vec<Sleep>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A big wheel's sleeps dropped by a thread-local's destructor as their
/// thread exits, in a process whose `wheel-free` thread has not started:
/// the hand-off starts it there.
#[test]
fn a_big_wheel_emptied_by_a_thread_locals_destructor_frees_its_chunks() {
    if !common::in_a_child("WHEEL_TLS_HAND_OFF_CHILD", &[]) {
        return;
    }
    let timer = Timer::builder().manual().build().unwrap();
    let (sleeps, chunks) = burst(&timer);
    let freed = FREED_ANYWHERE.load(Ordering::Relaxed);
    std::thread::spawn(move || {
        BURST.with(|b| *b.borrow_mut() = sleeps);
        // std's own thread-locals of a spawn, first used after `BURST`,
        // are destroyed before it.
        std::thread::spawn(|| {}).join().unwrap();
    })
    .join()
    .unwrap();
    assert_eq!(timer.stats().allocated_entries, 0);
    let start = Instant::now();
    while FREED_ANYWHERE.load(Ordering::Relaxed) - freed < chunks {
        assert!(start.elapsed() < Duration::from_secs(5), "never freed");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A process forked while another of its threads started the `wheel-free`
/// thread (here held in the allocation of its queue: 4,096 places of 40
/// bytes) has no such thread, and the start never ends there: the child's
/// first hand-off waited for ever for it, under its shard's lock.
#[cfg(target_os = "linux")]
#[test]
fn a_child_forked_while_the_wheel_free_thread_starts_still_frees_its_chunks() {
    const QUEUE_BYTES: usize = 4096 * 40;
    // Alone in a process, whose wheel-free thread has not started.
    if !common::in_a_child("WHEEL_FORKED_AT_START_CHILD", &[]) {
        return;
    }
    let starting = std::thread::spawn(|| {
        PAUSE_AT.with(|at| at.set(QUEUE_BYTES));
        burst_dropped(&Timer::builder().manual().build().unwrap());
    });
    while !PAUSED.load(Ordering::SeqCst) {
        assert!(!starting.is_finished(), "the queue was never allocated");
        std::thread::yield_now();
    }
    // SAFETY: the child only allocates, frees and exits; the thread held
    // in the allocator holds none of the system allocator's locks.
    let pid = unsafe { fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let freed = FREED_ANYWHERE.load(Ordering::Relaxed);
        let chunks = burst_dropped(&Timer::builder().manual().build().unwrap());
        let done = FREED_ANYWHERE.load(Ordering::Relaxed) - freed >= chunks;
        // SAFETY: ends the child at once, running nothing of the parent's.
        unsafe { _exit(if done { 0 } else { 1 }) }
    }
    let mut status = 0;
    let start = Instant::now();
    let exited = loop {
        // SAFETY: `pid` is this process's child; `status` is a valid place.
        if unsafe { waitpid(pid, &mut status, 1) } == pid {
            break true;
        }
        if start.elapsed() > Duration::from_secs(10) {
            // SAFETY: as above; SIGKILL ends the hung child.
            unsafe {
                kill(pid, 9);
                waitpid(pid, &mut status, 0);
            }
            break false;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    RESUME.store(true, Ordering::SeqCst);
    starting.join().unwrap();
    assert!(exited, "the forked child hung in its first hand-off");
    assert_eq!(
        status, 0,
        "the forked child's chunks were not freed in place"
    );
}
