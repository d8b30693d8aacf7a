//! A registration's inline pass (a sleep whose deadline is the new earliest
//! runs the driver on its caller's stack, deferring due callbacks to a task)
//! racing the runner proper, the runtime's shutdown and `stats()` readers.
//! Each was found by review and fails without its fix.
//!
//! To make the wheel lag tokio's clock, so that a registration's inline pass
//! finds something due, the tests move the paused clock with one poll of
//! `tokio::time::advance` inside `rt.enter()`, which runs no task and fires
//! no tokio timer. A [`gate`] waker holds a pass open (its `RUNNING` bit
//! set) where a busy thread would be, while the test drives the runtime or
//! drops it. No wall-clock waits: the threads hand over through channels.

mod common;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
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

fn poll_once<F: Future + Unpin>(future: &mut F, waker: &Waker) -> Poll<F::Output> {
    Pin::new(future).poll(&mut Context::from_waker(waker))
}

/// A waker that, the first time it is woken, says so and then waits to be
/// let go: woken by a driver pass, it holds that pass open.
struct Gate {
    armed: AtomicBool,
    inside: Mutex<Sender<()>>,
    go: Mutex<Receiver<()>>,
}

impl Wake for Gate {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if self.armed.swap(false, Ordering::SeqCst) {
            self.inside.lock().unwrap().send(()).unwrap();
            self.go.lock().unwrap().recv().unwrap();
        }
    }
}

/// A [`Gate`]: its waker, the receiver told when a pass is inside it, and
/// the sender that lets the pass go on.
fn gate() -> (Waker, Receiver<()>, Sender<()>) {
    let (inside_tx, inside_rx) = channel();
    let (go_tx, go_rx) = channel();
    let gate = Arc::new(Gate {
        armed: AtomicBool::new(true),
        inside: Mutex::new(inside_tx),
        go: Mutex::new(go_rx),
    });
    (Waker::from(gate), inside_rx, go_tx)
}

/// The task spawned to run a deferred callback calls `notify`; if another
/// thread's inline pass holds `RUNNING` then, the notify only marks it, and
/// that runner went round again inline, which does not run deferred
/// callbacks. With the wheel then empty and the alarm fired, nothing ran
/// the callback, ever.
#[test]
fn a_deferred_callback_runs_though_its_task_meets_an_inline_pass() {
    let rt = paused_rt();
    let ran = Arc::new(AtomicBool::new(false));
    let (timer, start, handle) = rt.block_on(async {
        let timer = Timer::builder().build().unwrap();
        let start = timer.now();
        let ran = ran.clone();
        // Tick 2 (125 µs ticks); the alarm for it waits for tokio's 1 ms.
        let handle = timer.schedule_at(start + us(250), move || ran.store(true, Ordering::SeqCst));
        tokio::task::yield_now().await;
        (timer, start, handle)
    });
    move_clock(&rt, us(500));
    // A registration's inline pass takes the due callback and defers it to
    // a task, which has not run yet.
    let mut first = timer.sleep_until(start + us(125));
    assert!(poll_once(&mut first, Waker::noop()).is_ready());
    assert!(!ran.load(Ordering::SeqCst), "never run inline");
    assert_eq!(timer.stats().callbacks, 1, "deferred, still counted");
    // A sleep due at 750 µs holding the gate.
    let (gate_waker, inside, go) = gate();
    let mut gated = timer.sleep_until(start + us(750));
    assert!(poll_once(&mut gated, Waker::noop()).is_pending());
    assert!(poll_once(&mut gated, &gate_waker).is_pending());
    move_clock(&rt, us(750));
    // Another thread's registration pulls the promise in: its inline pass
    // fires the gate and holds `RUNNING` while the runtime runs the
    // callback's task (and fires the alarm).
    let other_timer = timer.clone();
    let other = std::thread::spawn(move || {
        let mut second = other_timer.sleep_until(start + us(625));
        let _ = poll_once(&mut second, Waker::noop());
    });
    inside.recv().unwrap();
    rt.block_on(async {
        for _ in 0..4 {
            tokio::task::yield_now().await;
        }
    });
    go.send(()).unwrap();
    other.join().unwrap();
    rt.block_on(async { tokio::time::sleep(Duration::from_secs(10)).await });
    assert!(
        ran.load(Ordering::SeqCst) && handle.is_expired(),
        "a callback due 10 s ago has not run: {:?}",
        timer.stats()
    );
    assert_eq!(timer.stats().callbacks, 0);
    drop(gated);
}

/// An inline pass kept the callbacks it took in a local list until it had
/// woken its wakers; a runtime shutting down meanwhile found them neither
/// in the wheel nor deferred, and they were then deferred after it: never
/// run, never handed back, still counted, and the timer (with the closure)
/// kept alive by its own reference for ever.
#[test]
fn a_callback_taken_inline_as_the_runtime_shuts_down_is_not_leaked() {
    let rt = paused_rt();
    let token = Arc::new(());
    let (timer, start, handle) = rt.block_on(async {
        let timer = Timer::builder().build().unwrap();
        let start = timer.now();
        let held = token.clone();
        let handle = timer.schedule_at(start + us(250), move || drop(held));
        tokio::task::yield_now().await;
        (timer, start, handle)
    });
    let (gate_waker, inside, go) = gate();
    let mut gated = timer.sleep_until(start + us(375));
    assert!(poll_once(&mut gated, &gate_waker).is_pending());
    move_clock(&rt, us(500));
    // The inline pass takes the callback and the gated sleep, and fires
    // the gate.
    let other_timer = timer.clone();
    let other = std::thread::spawn(move || {
        let mut early = other_timer.sleep_until(start + us(125));
        let _ = poll_once(&mut early, Waker::noop());
    });
    inside.recv().unwrap();
    drop(rt);
    go.send(()).unwrap();
    other.join().unwrap();
    assert!(timer.is_shut_down());
    let stats = timer.stats();
    assert_eq!(stats.callbacks, 0, "handed back or dropped: {stats:?}");
    drop((timer, handle, gated));
    assert_eq!(
        Arc::strong_count(&token),
        1,
        "the closure (and the timer holding it) was never freed"
    );
}

/// `Stats::fired` counts since the timer was built, so it must never go
/// down. A registration whose inline pass fired its own entry had the pass
/// count it, then uncounted it (a sleep completing at its first poll is no
/// fire); a reader in between (here a waker the same pass woke) saw a fire
/// that then vanished.
#[test]
fn stats_fired_never_goes_down() {
    struct Recorder(Timer, Mutex<Vec<u64>>);
    impl Wake for Recorder {
        fn wake(self: Arc<Self>) {
            self.wake_by_ref();
        }
        fn wake_by_ref(self: &Arc<Self>) {
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
    move_clock(&rt, us(500));
    // Pulls the promise in: the inline pass fires both entries.
    let mut early = timer.sleep_until(start + us(125));
    assert!(poll_once(&mut early, Waker::noop()).is_ready());
    let seen_in_the_pass = recorder.1.lock().unwrap()[0];
    let after = timer.stats().fired;
    assert!(
        after >= seen_in_the_pass,
        "fired went from {seen_in_the_pass} down to {after}"
    );
    // The registering sleep completed its first poll: no fire.
    assert_eq!((seen_in_the_pass, after), (1, 1));
    drop(waker);
}

/// Shutdown drops the deferred callbacks cancelled meanwhile. It did so
/// before waking the pending sleeps, so a closure whose drop panicked
/// unwound out of the shutdown and left every task waiting on a sleep
/// unwoken. The panic is now contained and counted, as a panicking
/// callback's is.
#[test]
fn a_closure_panicking_on_drop_in_shutdown_leaves_no_sleep_unwoken() {
    struct Bomb;
    impl Drop for Bomb {
        fn drop(&mut self) {
            panic!("the closure's drop panics");
        }
    }
    let rt = paused_rt();
    let timer = rt.block_on(async { Timer::builder().build().unwrap() });
    let start = timer.now();
    let mut pending = tokio_test::task::spawn(timer.sleep(Duration::from_secs(3600)));
    assert!(pending.poll().is_pending());
    let bomb = Bomb;
    let handle = timer.schedule_at(start + us(250), move || drop(bomb));
    rt.block_on(tokio::task::yield_now());
    move_clock(&rt, us(500));
    // An inline pass defers the callback; its handle then cancels it.
    let mut early = timer.sleep_until(start + us(125));
    assert!(poll_once(&mut early, Waker::noop()).is_ready());
    assert!(handle.cancel());
    let leftovers = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| timer.shutdown()));
    assert!(
        leftovers.is_ok(),
        "the closure's panic escaped the shutdown"
    );
    assert!(
        pending.is_woken(),
        "a sleep pending at shutdown was not woken"
    );
    let stats = timer.stats();
    assert_eq!((stats.panicked, stats.callbacks), (1, 0), "{stats:?}");
}
