//! Bounded work per call: a poll, reset, drop or schedule does its own work
//! and returns. It never wakes another task or runs a callback; the timer's
//! alarm (where tokio fires its timers) does that, and a registration whose
//! own deadline has passed completes itself, as tokio's does.
//!
//! To make the wheel lag tokio's clock, so that timers are overdue when a
//! registration comes, the tests move the paused clock with one poll of
//! `tokio::time::advance` inside `rt.enter()`, which runs no task and fires
//! no tokio timer: the state of a runtime busy past its timers' deadlines.

mod common;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use common::paused_rt;
use tokio::runtime::Runtime;
use wheel::Timer;

fn us(n: u64) -> Duration {
    Duration::from_micros(n)
}

/// Moves `rt`'s paused clock by `by` without driving the runtime: the first
/// poll of `tokio::time::advance` moves the clock at once.
fn move_clock(rt: &Runtime, by: Duration) {
    let _in_rt = rt.enter();
    let mut advance = Box::pin(tokio::time::advance(by));
    let _ = advance
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()));
}

/// Lets the runtime park once, which fires its due timers (the alarm).
fn run_timers(rt: &Runtime) {
    rt.block_on(async { tokio::time::sleep(Duration::from_millis(1)).await });
}

fn poll_once<F: Future + Unpin>(future: &mut F, waker: &Waker) -> Poll<F::Output> {
    Pin::new(future).poll(&mut Context::from_waker(waker))
}

/// Counts the wakes of every sleep polled with it.
struct Wakes(AtomicUsize);

impl Wake for Wakes {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// 100,000 sleeps overdue (the clock moved and the runtime has not parked
/// since); a new sleep, due earlier than all of them and passed too, is
/// polled: it waits, as tokio's does until tokio's driver has processed the
/// move, and its poll wakes no one else. (Before, it pulled the alarm in and
/// ran a whole pass on its caller's stack: 100,000 wakers.) A reset and a
/// callback scheduled then wake no one either; the runtime's next turn wakes
/// each overdue sleep once.
#[test]
fn a_poll_among_100_000_overdue_sleeps_wakes_no_one_else() {
    let _guard = common::guard();
    let rt = paused_rt();
    let timer = rt.block_on(async { Timer::builder().build().unwrap() });
    let start = timer.now();
    let wakes = Arc::new(Wakes(AtomicUsize::new(0)));
    let waker = Waker::from(wakes.clone());
    let mut overdue: Vec<_> = (0..100_000u64)
        .map(|i| timer.sleep_until(start + us(1_000 + i % 1_000)))
        .collect();
    for sleep in &mut overdue {
        assert!(poll_once(sleep, &waker).is_pending());
    }
    move_clock(&rt, Duration::from_millis(10));

    let mut new = timer.sleep_until(start + us(250));
    assert!(
        poll_once(&mut new, Waker::noop()).is_pending(),
        "tokio's driver has not processed its deadline"
    );
    let mut later = timer.sleep_until(start + Duration::from_millis(20));
    assert!(poll_once(&mut later, Waker::noop()).is_pending());
    Pin::new(&mut overdue[0]).reset(start + us(500));
    let ran = Arc::new(AtomicBool::new(false));
    let flag = ran.clone();
    timer.schedule_at(start + us(125), move || flag.store(true, Ordering::SeqCst));
    assert_eq!(wakes.0.load(Ordering::SeqCst), 0, "no one woken");
    assert!(
        !ran.load(Ordering::SeqCst),
        "a callback ran inside schedule"
    );

    run_timers(&rt);
    assert_eq!(wakes.0.load(Ordering::SeqCst), 100_000);
    assert!(ran.load(Ordering::SeqCst));
    assert!(overdue.iter().all(wheel::Sleep::is_elapsed));
}

/// A callback whose tick has passed when it is scheduled (the wheel lagging
/// tokio's clock) runs on the runtime, not inside `schedule`, and a sleep
/// registered then does not run it either.
#[test]
fn a_callback_due_at_once_runs_on_the_runtime_never_inline() {
    let _guard = common::guard();
    let rt = paused_rt();
    let timer = rt.block_on(async { Timer::builder().build().unwrap() });
    let start = timer.now();
    // A whole millisecond, which tokio's driver processes: on a paused clock
    // a tick is due, as tokio's are, once tokio has processed it.
    rt.block_on(tokio::time::advance(us(1_000)));
    let ran = Arc::new(AtomicBool::new(false));
    let flag = ran.clone();
    let handle = timer.schedule_at(start + us(250), move || flag.store(true, Ordering::SeqCst));
    let mut early = timer.sleep_until(start + us(125));
    assert!(poll_once(&mut early, Waker::noop()).is_ready());
    assert!(!ran.load(Ordering::SeqCst), "run inline");
    assert_eq!(timer.stats().callbacks, 1);
    // The runtime's next turn runs it, without time passing.
    rt.block_on(tokio::task::yield_now());
    assert!(ran.load(Ordering::SeqCst) && handle.is_expired());
    assert_eq!(timer.stats().callbacks, 0);
}

/// A runtime shutting down while callbacks are due and unrun leaks nothing:
/// the shutdown drops them (the runtime's own shutdown hands them back to
/// no one), and the timer holds itself no longer.
#[test]
fn a_runtime_shutting_down_with_callbacks_due_leaks_nothing() {
    let _guard = common::guard();
    let rt = paused_rt();
    let token = Arc::new(());
    let (timer, handle) = rt.block_on(async {
        let timer = Timer::builder().build().unwrap();
        let held = token.clone();
        let handle = timer.schedule(us(250), move || drop(held));
        (timer, handle)
    });
    move_clock(&rt, us(500));
    drop(rt);
    assert!(timer.is_shut_down() && handle.is_cancelled());
    assert_eq!(timer.stats().callbacks, 0);
    drop((timer, handle));
    assert_eq!(Arc::strong_count(&token), 1, "the closure was never freed");
}

/// `Stats::fired` counts since the timer was built, so it never goes down:
/// a sleep that completes at its first poll is no fire, and a reader inside
/// the pass (a waker the pass wakes) sees what a reader after it sees.
#[test]
fn stats_fired_never_goes_down() {
    let _guard = common::guard();
    struct Recorder(Timer, Mutex<Vec<u64>>);
    impl Wake for Recorder {
        fn wake(self: Arc<Self>) {
            let fired = self.0.stats().fired;
            self.1.lock().unwrap().push(fired);
        }
    }
    let rt = paused_rt();
    let timer = rt.block_on(async { Timer::builder().build().unwrap() });
    let start = timer.now();
    let recorder = Arc::new(Recorder(timer.clone(), Mutex::new(Vec::new())));
    let waker = Waker::from(recorder.clone());
    let mut watched = timer.sleep_until(start + us(375));
    assert!(poll_once(&mut watched, &waker).is_pending());
    move_clock(&rt, us(1_000));
    // Tick 0, which the wheel has processed: due at once.
    let mut early = timer.sleep_until(start);
    assert!(poll_once(&mut early, Waker::noop()).is_ready());
    assert_eq!(timer.stats().fired, 0, "a first poll completing is no fire");
    run_timers(&rt);
    let seen_in_the_pass = recorder.1.lock().unwrap()[0];
    assert_eq!((seen_in_the_pass, timer.stats().fired), (1, 1));
    drop(waker);
}

/// The runtime's shutdown drops the callbacks that never ran after waking
/// every pending sleep, each drop on its own: a closure whose drop panics
/// is counted and leaves no sleep unwoken.
#[test]
fn a_closure_panicking_on_drop_in_shutdown_leaves_no_sleep_unwoken() {
    let _guard = common::guard();
    struct Bomb;
    impl Drop for Bomb {
        fn drop(&mut self) {
            panic!("the closure's drop panics");
        }
    }
    let rt = paused_rt();
    let timer = rt.block_on(async { Timer::builder().build().unwrap() });
    let mut pending = tokio_test::task::spawn(timer.sleep(Duration::from_secs(3600)));
    assert!(pending.poll().is_pending());
    let bomb = Bomb;
    let _handle = timer.schedule(Duration::from_secs(60), move || drop(bomb));
    let kept = Arc::new(());
    let held = kept.clone();
    let _other = timer.schedule(Duration::from_secs(60), move || drop(held));
    drop(rt);
    assert!(
        pending.is_woken(),
        "a sleep pending at shutdown was not woken"
    );
    let stats = timer.stats();
    assert_eq!((stats.panicked, stats.callbacks), (1, 0), "{stats:?}");
    assert_eq!(
        Arc::strong_count(&kept),
        1,
        "the other closure was not dropped"
    );
}

/// A registration due at the very tick the shard has promised a pass for
/// reads no clock (only a new earliest deadline does, since it must re-arm
/// the alarm): overdue, it is registered, and completes with that pass,
/// counted fired like the sleep that set the promise. A server's many
/// timeouts due at the earliest tick so cost no clock read each.
#[test]
fn a_sleep_due_at_the_promised_tick_reads_no_clock_and_fires_with_the_pass() {
    let _guard = common::guard();
    let rt = paused_rt();
    let timer = rt.block_on(async { Timer::builder().build().unwrap() });
    let deadline = timer.now() + us(500);
    let mut first = timer.sleep_until(deadline);
    assert!(poll_once(&mut first, Waker::noop()).is_pending());
    move_clock(&rt, us(1000));
    let mut second = timer.sleep_until(deadline);
    assert!(
        poll_once(&mut second, Waker::noop()).is_pending(),
        "read the clock and completed at once"
    );
    run_timers(&rt);
    assert!(poll_once(&mut first, Waker::noop()).is_ready());
    assert!(poll_once(&mut second, Waker::noop()).is_ready());
    assert_eq!(timer.stats().fired, 2);
}

/// The same for a reset to the promised tick: it reads no clock, and the
/// sleep fires with the pass.
#[test]
fn a_sleep_reset_to_the_promised_tick_reads_no_clock_and_fires_with_the_pass() {
    let _guard = common::guard();
    let rt = paused_rt();
    let timer = rt.block_on(async { Timer::builder().build().unwrap() });
    let deadline = timer.now() + us(500);
    let mut first = timer.sleep_until(deadline);
    assert!(poll_once(&mut first, Waker::noop()).is_pending());
    let mut second = timer.sleep_until(deadline + us(5000));
    assert!(poll_once(&mut second, Waker::noop()).is_pending());
    move_clock(&rt, us(1000));
    Pin::new(&mut second).reset(deadline);
    assert!(!second.is_elapsed(), "read the clock and fired at once");
    run_timers(&rt);
    assert!(poll_once(&mut first, Waker::noop()).is_ready());
    assert!(poll_once(&mut second, Waker::noop()).is_ready());
    assert_eq!(timer.stats().fired, 2);
}

/// Holds a sleep of the same timer, which goes when the last clone of the
/// waker does: the drop of a task (holding a sleep) whose last waker the
/// timer let go of.
struct HoldsASleep {
    _sleep: wheel::Sleep,
}

impl Wake for HoldsASleep {
    fn wake(self: Arc<Self>) {}
}

/// A cancel leaves a sleep's entry (and the waker it holds) for a batch
/// (`wheel/discard.rs`); the flush that frees it hands the waker back, and
/// the shard drops it only once its lock is released. Dropped under the
/// lock, this waker's drop, cancelling another sleep of the same shard,
/// would take that lock again: a deadlock (the watchdog's panic).
#[test]
fn a_waker_let_go_by_a_batched_cancel_is_dropped_after_the_lock() {
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let timer = common::manual();
        let inner = common::registered(timer.sleep(Duration::from_secs(2)));
        let holder = Arc::new(HoldsASleep { _sleep: inner });
        let waker = Waker::from(holder.clone());
        let mut outer = timer.sleep(Duration::from_secs(1));
        assert!(poll_once(&mut outer, &waker).is_pending());
        drop(waker);
        // Registered after it, so that its cancel is not one of the last
        // few (removed at once) but batched.
        let later: Vec<_> = (0..100)
            .map(|_| common::registered(timer.sleep(Duration::from_secs(3))))
            .collect();
        let weak = Arc::downgrade(&holder);
        drop(holder);
        drop(outer);
        assert!(
            weak.upgrade().is_some(),
            "the batched entry holds the waker"
        );
        // A stats read flushes the batch (counting the inner sleep, still
        // pending then); the waker's last clone goes after, and with it the
        // inner sleep.
        assert_eq!(timer.stats().pending, 101);
        assert!(weak.upgrade().is_none(), "the flush let go of the waker");
        assert_eq!(timer.stats().pending, 100);
        drop(later);
        assert_eq!(timer.stats().pending, 0);
        done.send(()).unwrap();
    });
    finished
        .recv_timeout(Duration::from_secs(30))
        .expect("deadlocked: a waker dropped under the shard's lock");
}

/// Wakers whose drop panics, let go of by one flush of a batch of cancels:
/// each drop is contained on its own and counted, as the shutdown's
/// closures' are. Dropped together in one `contain`, the second drop
/// panics while the first is unwinding, and the process aborts (so the test
/// runs in a child process).
#[test]
fn wakers_panicking_on_drop_let_go_by_one_flush_are_each_contained() {
    if !common::in_a_child("WHEEL_PANICKING_WAKER_DROPS", &[]) {
        return;
    }
    struct Bomb;
    impl Wake for Bomb {
        fn wake(self: Arc<Self>) {}
    }
    impl Drop for Bomb {
        fn drop(&mut self) {
            panic!("the waker's drop panics");
        }
    }
    let timer = common::manual();
    let bombs: Vec<_> = (0..2)
        .map(|_| {
            let waker = Waker::from(Arc::new(Bomb));
            let mut sleep = timer.sleep(Duration::from_secs(1));
            assert!(poll_once(&mut sleep, &waker).is_pending());
            sleep
        })
        .collect();
    // Registered after them, so that their cancels are batched, not
    // removed at once as one of the last few.
    let later: Vec<_> = (0..100)
        .map(|_| common::registered(timer.sleep(Duration::from_secs(3))))
        .collect();
    drop(bombs);
    // A stats read flushes the batch; the two last clones go after the lock.
    let stats = timer.stats();
    assert_eq!((stats.pending, stats.cancelled), (100, 2));
    assert_eq!(timer.stats().panicked, 2, "each panicking drop counted");
    drop(later);
    assert_eq!(timer.stats().pending, 0);
}
