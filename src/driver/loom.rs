//! Loom models of the driver's races, run by
//! `RUSTFLAGS="--cfg loom" cargo test --release --lib loom`.
//!
//! Under `cfg(loom)` the driver's mutex, atomics and thread-local come from
//! loom (see `crate::sync`), so each model explores every interleaving of
//! the real `register`/`cancel`/`reset`/`notify`/`process`/`shut_down`
//! code. The models use manual timers, which share the runner protocol with
//! runtime timers but need no tokio runtime (loom cannot run one): the
//! "alarm" is the `alarm_at`/`wake_at` bookkeeping the runtime alarm follows.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use loom::sync::atomic::{AtomicBool, AtomicUsize};
use loom::thread;

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
    flag.0.load(Ordering::SeqCst) > 0
}

fn poll(sleep: &mut Sleep, waker: &Waker) -> Poll<()> {
    Pin::new(sleep).poll(&mut Context::from_waker(waker))
}

/// A manual timer with a tiny wheel (4 slots), and its start.
fn manual() -> (Timer, Instant) {
    let timer = Timer::builder()
        .manual()
        .slots_per_level(4)
        .build()
        .expect("valid geometry");
    let start = timer.now();
    (timer, start)
}

/// Like [`manual`], split into two shards: the model's main thread
/// registers in shard 0, its first spawned thread in shard 1.
fn sharded() -> (Timer, Instant) {
    let timer = Timer::builder()
        .manual()
        .slots_per_level(4)
        .shards(2)
        .build()
        .expect("valid geometry");
    let start = timer.now();
    (timer, start)
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn assert_empty(timer: &Timer) {
    let stats = timer.stats();
    assert_eq!((stats.pending, stats.entries), (0, 0), "{stats:?}");
}

/// Once every thread is done, the driver is armed for the wheel's next
/// expiration (the earliest deadline, or the cascade before it), which is no
/// later than `earliest`.
fn assert_armed_for_earliest(timer: &Timer, earliest: Instant) {
    let earliest = timer.shared().clock().deadline_tick(earliest);
    let (next, wake_at, alarm_at) = timer.shared().armed();
    assert_eq!(Some(wake_at), next, "the runner promised the wrong wake-up");
    assert_eq!(alarm_at, wake_at, "the alarm is armed for another tick");
    assert!(
        wake_at <= earliest,
        "armed for {wake_at}, after the earliest deadline {earliest}"
    );
}

/// A `Sleep` registers while another thread advances past its deadline:
/// either the first poll sees the deadline passed, or the advance wakes it.
#[test]
fn loom_register_vs_advance() {
    loom::model(|| {
        let (timer, start) = manual();
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
        assert_empty(&timer);
    });
}

/// A pending `Sleep` polled again while another thread fires it: a poll
/// that skips the lock (same waker, `published` not yet past the deadline)
/// must never be the last word. If it says `Pending`, the firing wakes that
/// waker; if the poll brings a new waker, the new one is woken.
#[test]
fn loom_repoll_without_lock_vs_fire() {
    for same_waker in [true, false] {
        loom::model(move || {
            let (timer, start) = manual();
            let mut sleep = timer.sleep_until(start + ms(10));
            let (first_flag, first) = flag();
            assert!(poll(&mut sleep, &first).is_pending());
            let advancer = timer.clone();
            let advance = thread::spawn(move || advancer.advance_to(start + ms(10)));

            let (second_flag, second) = flag();
            let (flag, waker) = if same_waker {
                (&first_flag, &first)
            } else {
                (&second_flag, &second)
            };
            let again = poll(&mut sleep, waker);
            advance.join().unwrap();

            if again.is_pending() {
                assert!(woken(flag), "a poll that said Pending was never woken");
                assert!(poll(&mut sleep, waker).is_ready());
            }
            assert_empty(&timer);
        });
    }
}

/// Dropping a registered `Sleep` while the driver fires it: the entry is
/// freed exactly once, counted as fired or cancelled, never both.
#[test]
fn loom_cancel_vs_fire() {
    loom::model(|| {
        let (timer, start) = manual();
        let mut sleep = timer.sleep_until(start + ms(10));
        let (_flag, waker) = flag();
        assert!(poll(&mut sleep, &waker).is_pending());

        let advancer = timer.clone();
        let advance = thread::spawn(move || advancer.advance_to(start + ms(10)));
        drop(sleep);
        advance.join().unwrap();

        let stats = timer.stats();
        assert_eq!(stats.fired + stats.cancelled, 1, "{stats:?}");
        assert_empty(&timer);
    });
}

/// Resetting a `Sleep` to a later deadline while the driver fires the old
/// one: it must not complete before the new deadline, and must complete
/// (and wake) at it.
#[test]
fn loom_reset_vs_fire() {
    loom::model(|| {
        let (timer, start) = manual();
        let mut sleep = timer.sleep_until(start + ms(10));
        let (flag, waker) = flag();
        assert!(poll(&mut sleep, &waker).is_pending());

        let advancer = timer.clone();
        let advance = thread::spawn(move || advancer.advance_to(start + ms(10)));
        Pin::new(&mut sleep).reset(start + ms(20));
        advance.join().unwrap();

        assert!(
            poll(&mut sleep, &waker).is_pending(),
            "completed before its new deadline"
        );
        let before = flag.0.load(Ordering::SeqCst);
        timer.advance_to(start + ms(20));
        assert!(
            flag.0.load(Ordering::SeqCst) > before,
            "reset lost the wake-up"
        );
        assert!(poll(&mut sleep, &waker).is_ready());
        assert_empty(&timer);
    });
}

/// A registration earlier than the driver's promised wake-up, racing a
/// runner that is processing: when everything settles, the driver is armed
/// for the earliest deadline, not the later one it was armed for.
#[test]
fn loom_earlier_registration_reschedules() {
    loom::model(|| {
        let (timer, start) = manual();
        let mut late = timer.sleep_until(start + ms(30));
        let (_flag, waker) = flag();
        assert!(poll(&mut late, &waker).is_pending());

        let advancer = timer.clone();
        let advance = thread::spawn(move || advancer.advance_to(start + ms(5)));
        let mut early = timer.sleep_until(start + ms(10));
        assert!(poll(&mut early, &waker).is_pending());
        advance.join().unwrap();

        assert_armed_for_earliest(&timer, start + ms(10));
    });
}

/// Two registrations racing each other's `notify`: whichever thread ends up
/// the runner, the alarm is armed for the earlier one. Also on two shards,
/// where each thread registers in its own.
#[test]
fn loom_concurrent_registrations_arm_the_earliest() {
    for make in [manual, sharded] {
        loom::model(move || {
            let (timer, start) = make();
            let other = timer.clone();
            let late = thread::spawn(move || {
                let mut sleep = other.sleep_until(start + ms(20));
                let (_flag, waker) = flag();
                assert!(poll(&mut sleep, &waker).is_pending());
                sleep
            });
            let mut early = timer.sleep_until(start + ms(10));
            let (_flag, waker) = flag();
            assert!(poll(&mut early, &waker).is_pending());
            let _late = late.join().unwrap();

            assert_armed_for_earliest(&timer, start + ms(10));
            assert_eq!(timer.stats().pending, 2);
        });
    }
}

/// Cancelling a callback while the driver fires it: it runs, or `cancel`
/// returns true, never both and never neither. The cancel may come while
/// the callback is in the wheel, in the runner's batch (taken out, not yet
/// claimed) or after it ran; it is counted fired or cancelled exactly once,
/// and no longer counted pending either way.
#[test]
fn loom_callback_cancel_vs_fire() {
    loom::model(|| {
        let (timer, start) = manual();
        let ran = Arc::new(AtomicBool::new(false));
        let flag = ran.clone();
        let handle = timer.schedule_at(start + ms(10), move || flag.store(true, Ordering::SeqCst));

        let advancer = timer.clone();
        let advance = thread::spawn(move || advancer.advance_to(start + ms(10)));
        let cancelled = handle.cancel();
        advance.join().unwrap();

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

/// Scheduling a callback on a manual timer while another thread advances
/// past its deadline: it runs once, on the advancing thread or at the
/// next advance, never on the scheduling thread inside `schedule` (where
/// the caller may hold a lock the callback takes).
#[test]
fn loom_schedule_vs_advance_never_runs_inline() {
    loom::model(|| {
        let (timer, start) = manual();
        let advancer = timer.clone();
        let advance = thread::spawn(move || advancer.advance_to(start + ms(10)));
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
        advance.join().unwrap();
        assert!(!inline.load(Ordering::SeqCst), "ran inside schedule");
        // Scheduled after the advance processed its tick: due at the next.
        timer.advance_to(start + ms(11));
        assert!(handle.is_expired());
        assert_eq!(timer.stats().callbacks, 0);
    });
}

/// Shutdown racing a registration: the callback is either refused or handed
/// back by the shutdown, never lost and never run; the same for a sleep.
#[test]
fn loom_shutdown_vs_registration() {
    loom::model(|| {
        let (timer, start) = manual();
        let other = timer.clone();
        let register = thread::spawn(move || {
            let callback = other.try_schedule_at(start + ms(10), || {
                panic!("a shut-down timer ran a callback")
            });
            (callback, other.try_sleep_until(start + ms(10)))
        });
        let unfired = timer.shutdown();
        let (callback, sleep) = register.join().unwrap();

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
        match sleep {
            Ok(_) => assert_eq!(unfired.sleeps, 1, "an accepted sleep was not counted"),
            Err(e) => assert!(e.is_shutdown() && unfired.sleeps == 0),
        }
        timer.advance_to(start + ms(10));
    });
}

/// Shutdown racing the registration of a timer's first (so earliest)
/// sleep, which releases the shard's lock to notify the runner and takes
/// it again: the sleep is refused and not counted, or accepted and counted
/// as never run, and then woken so that its task learns of the shutdown.
#[test]
fn loom_shutdown_vs_first_registration() {
    loom::model(|| {
        let (timer, start) = manual();
        let other = timer.clone();
        let register = thread::spawn(move || {
            let (flag, waker) = flag();
            let mut sleep = other.sleep_until(start + ms(10));
            let registered =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| poll(&mut sleep, &waker)));
            // Returned, so that dropping it does not cancel its entry
            // before the shutdown looks.
            (registered.is_ok(), flag, sleep)
        });
        let unfired = timer.shutdown();
        let (accepted, flag, sleep) = register.join().unwrap();
        if accepted {
            assert_eq!(unfired.sleeps, 1, "an accepted sleep was not counted");
            assert!(
                woken(&flag),
                "an accepted sleep was left waiting on a shut-down timer"
            );
        } else {
            assert_eq!(unfired.sleeps, 0, "a refused sleep was counted");
        }
        drop(sleep);
    });
}

/// Shards: a registration in one shard racing a runner that is processing
/// the other (or has just looked at this one). Whatever the order, the
/// runner ends armed for the registration, and firing it wakes the task.
#[test]
fn loom_sharded_registration_vs_runner() {
    // Bounded: unbounded, `advance_to`'s spin-wait for the other runner
    // makes the search take over a minute; the race needs one preemption
    // (without the runner's `wake_at` reset this fails at a bound of 2).
    let mut model = loom::model::Builder::new();
    model.preemption_bound = Some(3);
    model.check(|| {
        let (timer, start) = sharded();
        // The runner will fire `first` (5 ms) and then look for the next
        // tick: before this pass, a registration at 10 ms need not notify.
        let mut first = timer.sleep_until(start + ms(5));
        let mut late = timer.sleep_until(start + ms(30));
        let (_late_flag, late_waker) = flag();
        assert!(poll(&mut first, &late_waker).is_pending());
        assert!(poll(&mut late, &late_waker).is_pending());

        let other = timer.clone();
        let register = thread::spawn(move || {
            let mut sleep = other.sleep_until(start + ms(10));
            let (flag, waker) = flag();
            assert!(poll(&mut sleep, &waker).is_pending());
            (sleep, flag, waker)
        });
        timer.advance_to(start + ms(5));
        let (mut early, early_flag, early_waker) = register.join().unwrap();

        assert_armed_for_earliest(&timer, start + ms(10));
        timer.advance_to(start + ms(10));
        assert!(woken(&early_flag), "the other shard's sleep was not fired");
        assert!(poll(&mut early, &early_waker).is_ready());
        assert!(poll(&mut first, &late_waker).is_ready());
        assert!(poll(&mut late, &late_waker).is_pending());
    });
}

/// Shutdown's `publish(u64::MAX)` racing a runner's `publish(now)`: found
/// by review (a load-then-store could lower the watermark again). The
/// sleep, pending at shutdown and its deadline not passed, must then panic
/// when polled; with the watermark lowered, it took the lock-free path,
/// returned `Pending` with its waker unchanged, and hung.
#[test]
fn loom_shutdown_vs_runner_publish() {
    let mut model = loom::model::Builder::new();
    model.preemption_bound = Some(3);
    model.check(|| {
        let (timer, start) = manual();
        let mut sleep = timer.sleep_until(start + ms(20));
        let (_flag, waker) = flag();
        assert!(poll(&mut sleep, &waker).is_pending());
        let advancer = timer.clone();
        let advance = thread::spawn(move || advancer.advance_to(start + ms(5)));
        drop(timer.shutdown());
        advance.join().unwrap();
        let polled =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| poll(&mut sleep, &waker)));
        assert!(polled.is_err(), "pending after shutdown: it would hang");
    });
}

/// Found by review: a `Sleep` dropped on one thread read "not fired"
/// without the lock, and the runner then fired its entry and a newer sleep
/// took the slot, its generation come round (the wheel here has two), so
/// the drop cancelled the newer sleep's entry and it completed at once,
/// 10 ms early. Under the lock, `owns` looks at the watermark again.
#[test]
fn loom_drop_vs_fire_and_reuse_of_the_slot() {
    let mut model = loom::model::Builder::new();
    model.preemption_bound = Some(2);
    model.check(|| {
        let (timer, start) = manual();
        timer.shared().shards[0].0.lock().wheel = {
            let mut wheel = crate::wheel::Wheel::new(4);
            wheel.limit_generations(1);
            wheel
        };
        let a = timer.try_sleep_until(start + ms(10)).unwrap();
        let dropper = thread::spawn(move || drop(a));
        timer.advance_to(start + ms(10));
        drop(timer.try_sleep_until(start + ms(50)).unwrap());
        let mut b = timer.try_sleep_until(start + ms(20)).unwrap();
        dropper.join().unwrap();
        let (_flag, waker) = flag();
        let at = timer.now() - start;
        assert!(
            poll(&mut b, &waker).is_pending(),
            "completed at {at:?}, deadline 20 ms"
        );
    });
}
