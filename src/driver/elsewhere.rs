//! What a big wheel lets go of is freed on a thread of the crate's own, so
//! that glibc handing tens of megabytes back to the system (`brk`,
//! milliseconds of kernel time) delays neither the call that let it go nor
//! anything waiting on the shard's lock. Why a `free` can cost that, and
//! which wheels hand memory off, is in `wheel/slots/hand_off.rs`.
//!
//! One thread for the process, `wheel-free`, started by the first
//! hand-off, which only frees (nothing handed to it is live, so no
//! destructor of the user's runs there) and otherwise sleeps on a queue of
//! [`ROOM`] preallocated places. A hand-off is a push: no allocation, and
//! a wake-up of the thread by the first of a batch (it then waits up to
//! [`LINGER`] for more) and by the one that makes it ready ([`WAKE_AT`]
//! waiting, or a whole slab). Where the thread cannot be started, the queue
//! is full, or the process was forked since the thread started (the child
//! has no such thread), the memory is freed where it was let go of, as
//! before.
//!
//! Not tokio's blocking pool: a manual timer hands off too, a
//! `TestRuntime`'s clock would count its threads as running, and starting
//! one, or failing to, would come once a batch instead of once.
//!
//! What this does not remove: while the thread hands memory back, it holds
//! the allocator's lock of the arena the memory came from, so a `malloc`
//! elsewhere that misses its thread's cache on that arena waits for it:
//! a timer call that allocates a chunk, too. The cost has left the calls
//! that free, not the process.

use std::sync::{Condvar, Mutex, OnceLock};
use std::time::Duration;

use super::job::Job;
use crate::wheel::Freed;

/// Hand-offs that may wait for the thread; one more is freed in place.
/// A wheel's chunks can empty faster than the thread frees them (in a
/// random order the last thousandth of a burst empties most of them) while
/// a `free` hands memory back: room for 4,096 (a wheel of 4 Mi entries
/// emptying at once), 40 bytes each (a chunk's header), allocated with the
/// thread, twice.
const ROOM: usize = 4096;

/// Hand-offs that wake the thread: fewer wait for it, at most [`LINGER`].
const WAKE_AT: usize = 16;

/// How long a hand-off may wait for the thread without waking it.
const LINGER: Duration = Duration::from_millis(100);

/// What waits for the thread, and the thread's bell.
struct Queue {
    waiting: Mutex<Vec<Freed<Job>>>,
    bell: Condvar,
}

/// The queue and the process whose thread serves it, once the thread has
/// started; `None` if it could not.
static QUEUE: OnceLock<Option<(&'static Queue, u32)>> = OnceLock::new();

/// Frees `freed` on the `wheel-free` thread, or here if it cannot.
#[cold]
#[inline(never)]
pub(super) fn free_elsewhere(freed: Freed<Job>) {
    let Some((queue, pid)) = *QUEUE.get_or_init(start) else {
        return;
    };
    // A child forked since has no such thread: what it queued would wait
    // for ever (and a fork during the thread's swap left the lock held).
    if std::process::id() != pid {
        return;
    }
    // Poisoned (nothing panics while holding it) or full: freed here.
    let Ok(mut waiting) = queue.waiting.lock() else {
        return;
    };
    if waiting.len() == ROOM {
        return;
    }
    let whole = matches!(freed, Freed::Slab(_));
    waiting.push(freed);
    // The first wakes the thread to wait for the rest; a batch, to free.
    // Only as it becomes ready: past that the thread takes them without
    // another (a `notify_one` is a `futex` call, waiter or not), whether it
    // waits, and checks, or is freeing, and checks when done.
    let len = waiting.len();
    if len == 1 || len == WAKE_AT || whole {
        #[cfg(test)]
        tests::RINGS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        queue.bell.notify_one();
    }
}

/// Whether what waits is worth waking the thread at once: a batch, or a
/// whole wheel's.
fn ready(waiting: &[Freed<Job>]) -> bool {
    waiting.len() >= WAKE_AT || waiting.iter().any(|f| matches!(f, Freed::Slab(_)))
}

/// Starts the thread; `None` if the system would not.
fn start() -> Option<(&'static Queue, u32)> {
    let queue: &'static Queue = Box::leak(Box::new(Queue {
        waiting: Mutex::new(Vec::with_capacity(ROOM)),
        bell: Condvar::new(),
    }));
    std::thread::Builder::new()
        .name("wheel-free".into())
        // Freeing needs little stack.
        .stack_size(64 * 1024)
        .spawn(move || free_forever(queue))
        .ok()?;
    Some((queue, std::process::id()))
}

/// The thread: sleeps until something waits, gives it [`LINGER`] to make
/// a batch, frees it, and sleeps again. It swaps its empty vector for the
/// queue's, so that neither side allocates.
fn free_forever(queue: &Queue) -> Option<()> {
    let mut taken = Vec::with_capacity(ROOM);
    let mut waiting = queue.waiting.lock().ok()?;
    loop {
        waiting = queue.bell.wait_while(waiting, |w| w.is_empty()).ok()?;
        if !ready(&waiting) {
            let linger = queue
                .bell
                .wait_timeout_while(waiting, LINGER, |w| !ready(w));
            waiting = linger.ok()?.0;
        }
        std::mem::swap(&mut *waiting, &mut taken);
        drop(waiting);
        taken.clear();
        waiting = queue.waiting.lock().ok()?;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Mutex;
    use std::task::Waker;
    use std::time::{Duration, Instant};

    use super::super::job::Job;
    use super::{free_elsewhere, WAKE_AT};
    use crate::wheel::{freed_holding, Freed};

    /// Times a hand-off notified the thread.
    pub(super) static RINGS: AtomicUsize = AtomicUsize::new(0);

    /// Held by the test: the thread, freeing the waker below, waits for it.
    static GATE: Mutex<()> = Mutex::new(());
    /// The thread is inside that wait.
    static STUCK: AtomicBool = AtomicBool::new(false);

    /// A waker whose drop waits for [`GATE`].
    struct Stuck;

    impl std::task::Wake for Stuck {
        fn wake(self: std::sync::Arc<Self>) {}
    }

    impl Drop for Stuck {
        fn drop(&mut self) {
            STUCK.store(true, Ordering::SeqCst);
            drop(GATE.lock());
        }
    }

    fn empty_chunk() -> Freed<Job> {
        crate::wheel::Freed::<Job>::Chunk(slab::Slab::new())
    }

    /// While the thread frees a batch, hand-offs pile up: they notify it
    /// once (the first) and once 16 wait, not at every one past 16 (a
    /// `futex` call each, under the shard's lock).
    #[test]
    fn hand_offs_waiting_for_a_busy_thread_ring_for_it_twice() {
        // Alone in a process: other tests' big wheels hand off too.
        if std::env::var_os("WHEEL_ELSEWHERE_CHILD").is_none() {
            let out = std::process::Command::new(std::env::current_exe().unwrap())
                .args(["--exact", "driver::elsewhere::tests::hand_offs_waiting_for_a_busy_thread_ring_for_it_twice"])
                .env("WHEEL_ELSEWHERE_CHILD", "1")
                .output()
                .unwrap();
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                stdout.contains("1 passed"),
                "{stdout}{}",
                String::from_utf8_lossy(&out.stderr)
            );
            return;
        }
        let gate = GATE.lock().unwrap();
        // A live waker, as no wheel hands over, keeps the thread busy.
        free_elsewhere(freed_holding(Job::Wake(Waker::from(std::sync::Arc::new(
            Stuck,
        )))));
        for _ in 1..WAKE_AT {
            free_elsewhere(empty_chunk());
        }
        let start = Instant::now();
        while !STUCK.load(Ordering::SeqCst) {
            assert!(start.elapsed() < Duration::from_secs(10), "never freed");
            std::thread::sleep(Duration::from_millis(1));
        }
        let before = RINGS.load(Ordering::SeqCst);
        for _ in 0..100 {
            free_elsewhere(empty_chunk());
        }
        let rang = RINGS.load(Ordering::SeqCst) - before;
        drop(gate);
        assert_eq!(rang, 2, "100 hand-offs to a busy thread rang {rang} times");
    }
}
