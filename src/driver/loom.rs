//! Loom models of the driver's races, run by
//! `RUSTFLAGS="--cfg loom" cargo test --release --lib loom`.
//!
//! Under `cfg(loom)` the driver's mutexes and atomics come from loom (see
//! `crate::sync`), so each model explores the interleavings of the real
//! `register`/`poll`/`reset`/`cancel`/`schedule`/`pass`/`shut_down` code.
//! Loom cannot run tokio, so the timers are manual ones, and most models
//! play tokio's part with [`tokio_turn`]: the clock moves on its own, as
//! real time does, and then each shard whose promise has come, or whose
//! alarm a registration kicked, runs its pass, as tokio's driver calls the
//! alarm's waker or runs the kicked task. A manual shard's alarm answers
//! as a tokio one does (`Ready` once the clock has reached the tick), so
//! these are the runtime timer's own paths; the rest model `advance`.
//!
//! Every model explores every interleaving but one, with three threads,
//! whose preemptions are bounded at 3, more than its race needs. A pass
//! fires in batches of two under loom, so that a model with a few timers
//! sees it release the lock mid-pass. CI runs the models with debug
//! assertions on, so the wheel's and the driver's checks run too.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use loom::sync::atomic::{AtomicBool, AtomicUsize};
use loom::thread;

use super::alarm::Alarm;
use super::NEVER;
use crate::sync::{Arc, Ordering};
use crate::{Instant, Sleep, Timer};

/// A waker that counts its wakes.
struct Flag(AtomicUsize);

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn flag() -> (Arc<Flag>, Waker) {
    let flag = Arc::new(Flag(AtomicUsize::new(0)));
    (flag.clone(), Waker::from(flag))
}

fn woken(flag: &Flag) -> bool {
    wakes(flag) > 0
}

fn wakes(flag: &Flag) -> usize {
    flag.0.load(Ordering::SeqCst)
}

fn poll(sleep: &mut Sleep, waker: &Waker) -> Poll<()> {
    Pin::new(sleep).poll(&mut Context::from_waker(waker))
}

/// A timer with a tiny wheel (4 slots), and its start.
fn timer(shards: usize) -> (Timer, Instant) {
    let timer = Timer::builder()
        .manual()
        .slots_per_level(4)
        .shards(shards)
        .build()
        .expect("valid geometry");
    let start = timer.now();
    (timer, start)
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// What tokio does for a runtime timer when its driver turns at `to`: the
/// clock is at `to`, and each shard whose alarm is armed for a tick that
/// has come, or was kicked, runs its pass.
fn tokio_turn(timer: &Timer, to: Instant) {
    let driver = timer.driver();
    let Some(clock) = driver.time.manual() else {
        unreachable!("the models' timers are manual");
    };
    clock.set(to);
    let now = driver.clock().now_tick(to);
    for shard in driver.shards() {
        let due = match &mut shard.lock().alarm {
            // Fired once, as a tokio timer is; a kick's task runs once.
            Alarm::Model { armed, kicked, .. } => {
                let fires = *armed != NEVER && *armed <= now;
                if fires {
                    *armed = NEVER;
                }
                std::mem::take(kicked) || fires
            }
            // Shut down: tokio holds no timer of this shard any more.
            _ => false,
        };
        // The pass runs with no lock of the caller's held, as the alarm's
        // waker's does.
        if due {
            shard.pass();
        }
    }
}

/// Once every thread is done: each shard's alarm is armed (or a pass
/// kicked) no later than its earliest entry's tick, and its promise says
/// so.
fn assert_promised_in_time(timer: &Timer) {
    for (i, shard) in timer.driver().shards().iter().enumerate() {
        let (armed, kicked, wake_at, earliest) = {
            let inner = shard.lock();
            let Alarm::Model { armed, kicked, .. } = inner.alarm else {
                unreachable!("the models' timers are manual");
            };
            (
                armed,
                kicked,
                inner.wake_at,
                inner.wheel.earliest_deadline(),
            )
        };
        if let Some(earliest) = earliest {
            assert!(
                kicked || armed <= earliest,
                "shard {i}: armed for {armed} (promise {wake_at}), an entry at {earliest}"
            );
            assert!(
                wake_at <= earliest,
                "shard {i}: promised {wake_at}, an entry at {earliest}"
            );
        }
    }
}

fn assert_empty(timer: &Timer) {
    let stats = timer.stats();
    assert_eq!((stats.pending, stats.entries), (0, 0), "{stats:?}");
}

/// A registration that re-arms the alarm (the timer's earliest sleep)
/// racing time passing and tokio firing: its first poll completes only if
/// its tick has come, and otherwise it is fired, and woken, by the turn
/// that reaches its tick. Also with the promise already held by a later
/// sleep.
#[test]
fn loom_registration_rearming_the_alarm_vs_a_fire() {
    for with_later in [false, true] {
        loom::model(move || {
            let (timer, start) = timer(1);
            let mut later = timer.sleep_until(start + ms(30));
            if with_later {
                assert!(poll(&mut later, &flag().1).is_pending());
            }
            let turner = timer.clone();
            let turn = thread::spawn(move || tokio_turn(&turner, start + ms(10)));
            let (flag, waker) = flag();
            let mut sleep = timer.sleep_until(start + ms(10));
            let first = poll(&mut sleep, &waker);
            turn.join().unwrap();
            if first.is_pending() {
                tokio_turn(&timer, start + ms(10));
                assert!(woken(&flag), "the registration's wake-up was lost");
            }
            assert!(poll(&mut sleep, &waker).is_ready());
            assert_promised_in_time(&timer);
        });
    }
}

/// A pending `Sleep` polled again while a turn fires it: a poll that skips
/// the lock (its entry holds that very waker, `published` not yet past the
/// deadline) must never be the last word. If it says `Pending`, that waker
/// is woken after the poll began (a wake before it, which the poll then
/// ignored, would leave the task waiting for ever); a poll with a new
/// waker gets the new one woken.
#[test]
fn loom_repoll_without_lock_vs_fire() {
    for same_waker in [true, false] {
        loom::model(move || {
            let (timer, start) = timer(1);
            let mut sleep = timer.sleep_until(start + ms(10));
            let (first_flag, first) = flag();
            assert!(poll(&mut sleep, &first).is_pending());
            let turner = timer.clone();
            let turn = thread::spawn(move || tokio_turn(&turner, start + ms(10)));

            let (second_flag, second) = flag();
            let (flag, waker) = if same_waker {
                (&first_flag, &first)
            } else {
                (&second_flag, &second)
            };
            let before = wakes(flag);
            let again = poll(&mut sleep, waker);
            turn.join().unwrap();

            if again.is_pending() {
                assert!(
                    wakes(flag) > before,
                    "a poll that said Pending was not woken after it"
                );
                assert!(poll(&mut sleep, waker).is_ready());
            }
            drop(sleep);
            assert_empty(&timer);
        });
    }
}

/// Dropping a registered `Sleep` while a turn fires it: the entry is freed
/// exactly once, counted fired or cancelled, never both.
#[test]
fn loom_cancel_vs_fire() {
    loom::model(|| {
        let (timer, start) = timer(1);
        let mut sleep = timer.sleep_until(start + ms(10));
        assert!(poll(&mut sleep, &flag().1).is_pending());
        let turner = timer.clone();
        let turn = thread::spawn(move || tokio_turn(&turner, start + ms(10)));
        drop(sleep);
        turn.join().unwrap();
        let stats = timer.stats();
        assert_eq!(stats.fired + stats.cancelled, 1, "{stats:?}");
        assert_empty(&timer);
    });
}

/// Resetting a `Sleep` to a later deadline while a turn fires the old one:
/// it never completes before the new deadline, and completes (and wakes) at
/// it.
#[test]
fn loom_reset_vs_fire() {
    loom::model(|| {
        let (timer, start) = timer(1);
        let mut sleep = timer.sleep_until(start + ms(10));
        let (flag, waker) = flag();
        assert!(poll(&mut sleep, &waker).is_pending());
        let turner = timer.clone();
        let turn = thread::spawn(move || tokio_turn(&turner, start + ms(10)));
        Pin::new(&mut sleep).reset(start + ms(20));
        turn.join().unwrap();
        assert!(
            poll(&mut sleep, &waker).is_pending(),
            "completed before its new deadline"
        );
        assert_promised_in_time(&timer);
        let before = flag.0.load(Ordering::SeqCst);
        tokio_turn(&timer, start + ms(20));
        assert!(
            flag.0.load(Ordering::SeqCst) > before,
            "the reset lost the wake-up"
        );
        assert!(poll(&mut sleep, &waker).is_ready());
        drop(sleep);
        assert_empty(&timer);
    });
}

/// A cross-thread cancel racing the owner: a sleep registered in the main
/// thread's shard is dropped on another thread while the main thread
/// registers an earlier sleep there and a turn fires. The dropped one is
/// counted cancelled (or fired) once; the earlier one fires at its tick.
#[test]
fn loom_cross_thread_cancel_vs_the_owner() {
    let mut model = loom::model::Builder::new();
    // The race needs one preemption inside a shard's critical sections.
    model.preemption_bound = Some(3);
    model.check(|| {
        let (timer, start) = timer(2);
        let mut moved = timer.sleep_until(start + ms(10));
        assert!(poll(&mut moved, &flag().1).is_pending());
        let canceller = thread::spawn(move || drop(moved));
        let turner = timer.clone();
        let turn = thread::spawn(move || tokio_turn(&turner, start + ms(5)));
        let (flag, waker) = flag();
        let mut early = timer.sleep_until(start + ms(5));
        let first = poll(&mut early, &waker);
        canceller.join().unwrap();
        turn.join().unwrap();
        if first.is_pending() {
            tokio_turn(&timer, start + ms(5));
            assert!(woken(&flag), "the owner's registration lost its wake-up");
        }
        assert!(poll(&mut early, &waker).is_ready());
        drop(early);
        let stats = timer.stats();
        assert_eq!((stats.cancelled, stats.pending), (1, 0), "{stats:?}");
        assert_empty(&timer);
    });
}

/// Two registrations in one shard, or one in each of two, racing: each
/// shard ends up promising a pass by its earliest entry.
#[test]
fn loom_concurrent_registrations_promise_the_earliest() {
    for shards in [1, 2] {
        loom::model(move || {
            let (timer, start) = timer(shards);
            let other = timer.clone();
            let late = thread::spawn(move || {
                let mut sleep = other.sleep_until(start + ms(20));
                assert!(poll(&mut sleep, &flag().1).is_pending());
                sleep
            });
            let mut early = timer.sleep_until(start + ms(10));
            assert!(poll(&mut early, &flag().1).is_pending());
            let _late = late.join().unwrap();
            assert_promised_in_time(&timer);
            assert_eq!(timer.stats().pending, 2);
        });
    }
}

/// Cancelling a callback while a turn fires it: it runs, or `cancel`
/// returns true, never both and never neither, whether the cancel comes
/// while it is in the wheel, in the pass's batch, or after it ran; it is
/// counted fired or cancelled exactly once.
#[test]
fn loom_callback_cancel_vs_fire() {
    loom::model(|| {
        let (timer, start) = timer(1);
        let ran = Arc::new(AtomicBool::new(false));
        let flag = ran.clone();
        let handle = timer.schedule_at(start + ms(10), move || flag.store(true, Ordering::SeqCst));
        let turner = timer.clone();
        let turn = thread::spawn(move || tokio_turn(&turner, start + ms(10)));
        let cancelled = handle.cancel();
        turn.join().unwrap();
        assert_ne!(cancelled, ran.load(Ordering::SeqCst));
        assert_eq!(handle.is_cancelled(), cancelled);
        assert_eq!(handle.is_expired(), !cancelled);
        assert_empty(&timer);
        let stats = timer.stats();
        let counted = (stats.fired, stats.cancelled, stats.callbacks);
        let expected = if cancelled { (0, 1, 0) } else { (1, 0, 0) };
        assert_eq!(counted, expected, "{stats:?}");
    });
}

/// Scheduling a callback while time passes its deadline: it never runs on
/// the scheduling thread inside `schedule` (where the caller may hold a lock
/// the callback takes), and it runs at a turn: the next at the latest.
#[test]
fn loom_schedule_vs_fire_never_runs_inline() {
    loom::model(|| {
        let (timer, start) = timer(1);
        let turner = timer.clone();
        let turn = thread::spawn(move || tokio_turn(&turner, start + ms(10)));
        let scheduler = thread::current().id();
        let scheduling = Arc::new(AtomicBool::new(true));
        let inline = Arc::new(AtomicBool::new(false));
        let (during, seen) = (scheduling.clone(), inline.clone());
        let handle = timer.schedule_at(start + ms(10), move || {
            if during.load(Ordering::SeqCst) && thread::current().id() == scheduler {
                seen.store(true, Ordering::SeqCst);
            }
        });
        scheduling.store(false, Ordering::SeqCst);
        turn.join().unwrap();
        assert!(!inline.load(Ordering::SeqCst), "ran inside schedule");
        tokio_turn(&timer, start + ms(11));
        assert!(handle.is_expired());
        assert_eq!(timer.stats().callbacks, 0);
    });
}

/// Shutdown racing a registration: a callback is refused or handed back,
/// never lost and never run; a sleep is refused, or counted as never run
/// and woken so that its task learns of the shutdown.
#[test]
fn loom_shutdown_vs_registration() {
    loom::model(|| {
        let (timer, start) = timer(1);
        let other = timer.clone();
        let register = thread::spawn(move || {
            let callback = other.try_schedule_at(start + ms(10), || {
                panic!("a shut-down timer ran a callback")
            });
            let (flag, waker) = flag();
            let mut sleep = other.sleep_until(start + ms(10));
            let registered =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| poll(&mut sleep, &waker)));
            (callback, registered.is_ok(), flag, sleep)
        });
        let unfired = timer.shutdown();
        let (callback, accepted, flag, sleep) = register.join().unwrap();
        match callback {
            Ok(handle) => {
                assert_eq!(unfired.callbacks.len(), 1, "an accepted callback was lost");
                assert!(handle.is_cancelled());
            }
            Err(e) => {
                assert!(e.is_shutdown());
                assert!(unfired.callbacks.is_empty());
            }
        }
        if accepted {
            assert_eq!(unfired.sleeps, 1, "an accepted sleep was not counted");
            assert!(woken(&flag), "left waiting on a shut-down timer");
        } else {
            assert_eq!(unfired.sleeps, 0, "a refused sleep was counted");
        }
        drop(sleep);
        tokio_turn(&timer, start + ms(10));
    });
}

/// Shutdown racing a turn that is firing: a sleep pending at shutdown, its
/// deadline not passed, must panic when polled, not hang: the shutdown's
/// watermark sends it to the locked path, whatever the pass published.
#[test]
fn loom_shutdown_vs_a_pass() {
    loom::model(|| {
        let (timer, start) = timer(1);
        let mut early = timer.sleep_until(start + ms(5));
        let mut sleep = timer.sleep_until(start + ms(20));
        let (_flag, waker) = flag();
        assert!(poll(&mut early, &waker).is_pending());
        assert!(poll(&mut sleep, &waker).is_pending());
        let turner = timer.clone();
        let turn = thread::spawn(move || tokio_turn(&turner, start + ms(5)));
        drop(timer.shutdown());
        turn.join().unwrap();
        let polled =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| poll(&mut sleep, &waker)));
        assert!(polled.is_err(), "pending after shutdown: it would hang");
    });
}

/// Two passes on one shard at once (tokio firing an alarm re-armed by the
/// first while it wakes a batch, or a kicked pass): with batches of two, the
/// first releases the lock mid-pass and the second, with a later clock,
/// moves the later sleeps into the due list; the first then pops those too,
/// by the second's reading. Every sleep is fired once, none early, nothing
/// is left behind.
#[test]
fn loom_two_passes_at_once() {
    loom::model(|| {
        let (timer, start) = timer(1);
        let (flag, waker) = flag();
        let mut sleeps: Vec<_> = [1, 1, 1, 2, 2, 2]
            .into_iter()
            .map(|at| timer.sleep_until(start + ms(at)))
            .collect();
        for sleep in &mut sleeps {
            assert!(poll(sleep, &waker).is_pending());
        }
        let driver = timer.driver();
        let Some(clock) = driver.time.manual() else {
            unreachable!("the models' timers are manual");
        };
        let (first, shard) = (clock.clone(), driver.shards()[0].clone());
        let pass = thread::spawn(move || {
            first.set(start + ms(1));
            shard.pass();
        });
        clock.set(start + ms(2));
        driver.shards()[0].pass();
        pass.join().unwrap();
        assert_eq!(wakes(&flag), 6, "{:?}", timer.stats());
        for sleep in &mut sleeps {
            assert!(poll(sleep, &waker).is_ready());
        }
        drop(sleeps);
        assert_empty(&timer);
    });
}

/// Callbacks due at once kick a pass while the alarm is armed for a later
/// one, and tokio fires the alarm at the same time: two passes, each
/// callback run exactly once.
#[test]
fn loom_a_kicked_pass_and_the_alarm_at_once() {
    loom::model(|| {
        let (timer, start) = timer(1);
        let runs = Arc::new(AtomicUsize::new(0));
        let count = |runs: &Arc<AtomicUsize>| {
            let runs = runs.clone();
            move || {
                runs.fetch_add(1, Ordering::SeqCst);
            }
        };
        timer.schedule_at(start + ms(5), count(&runs));
        timer.schedule_at(start + ms(5), count(&runs));
        tokio_turn(&timer, start + ms(1));
        // Due at once: kicked (the alarm stays armed for 5 ms).
        timer.schedule_at(start, count(&runs));
        timer.schedule_at(start, count(&runs));
        let turner = timer.clone();
        let turn = thread::spawn(move || tokio_turn(&turner, start + ms(5)));
        tokio_turn(&timer, start + ms(5));
        turn.join().unwrap();
        assert_eq!(runs.load(Ordering::SeqCst), 4);
        let stats = timer.stats();
        assert_eq!((stats.fired, stats.callbacks, stats.entries), (4, 0, 0));
    });
}

/// `advance` (a manual timer's own driver) racing a registration on
/// another thread: either the first poll sees the deadline passed, or the
/// advance wakes it before it returns.
#[test]
fn loom_register_vs_advance() {
    loom::model(|| {
        let (timer, start) = timer(1);
        let mut sleep = timer.sleep_until(start + ms(10));
        let advancer = timer.clone();
        let advance = thread::spawn(move || advancer.advance_to(start + ms(10)));
        let (flag, waker) = flag();
        let first = poll(&mut sleep, &waker);
        advance.join().unwrap();
        if first.is_pending() {
            assert!(woken(&flag), "the advance lost the registration's wake-up");
        }
        assert!(poll(&mut sleep, &waker).is_ready());
        drop(sleep);
        assert_empty(&timer);
    });
}

/// Two `advance`s on two threads take turns: each returns only once the
/// sleeps due by its own target have been woken.
#[test]
fn loom_concurrent_advances_each_return_with_their_time_processed() {
    loom::model(|| {
        let (timer, start) = timer(1);
        let mut sleep = timer.sleep_until(start + ms(10));
        let (flag, waker) = flag();
        assert!(poll(&mut sleep, &waker).is_pending());
        let flag2 = flag.clone();
        let advancer = timer.clone();
        let advance = thread::spawn(move || {
            advancer.advance_to(start + ms(10));
            assert!(woken(&flag2), "returned before its time was processed");
        });
        timer.advance_to(start + ms(10));
        assert!(woken(&flag), "returned before its time was processed");
        advance.join().unwrap();
    });
}
