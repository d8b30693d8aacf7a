//! `Timer::shutdown` and `Builder::max_pending`.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_test::{assert_pending, assert_ready, task};
use wheel::Timer;

mod common;
use common::{manual, manual_ticking, ms};

#[test]
fn shutdown_hands_back_the_callbacks_that_never_ran() {
    let _guard = common::guard();
    let timer = manual();
    let runs = Arc::new(AtomicU32::new(0));
    let mut handles = Vec::new();
    for secs in [3u64, 1, 2] {
        let runs = runs.clone();
        handles.push(timer.schedule(Duration::from_secs(secs), move || {
            runs.fetch_add(1, Ordering::SeqCst);
        }));
    }
    let ran = timer.schedule(Duration::from_millis(500), || {});
    let cancelled = timer.schedule(Duration::from_secs(1), || unreachable!());
    timer.advance(Duration::from_millis(500));
    assert!(cancelled.cancel());

    let unfired = timer.shutdown();
    assert_eq!(unfired.callbacks.len(), 3);
    assert_eq!(unfired.sleeps, 0);
    let deadlines: Vec<_> = unfired.callbacks.iter().map(|c| c.deadline()).collect();
    let mut sorted = deadlines.clone();
    sorted.sort();
    assert_eq!(deadlines, sorted, "not in deadline order");
    assert_eq!(runs.load(Ordering::SeqCst), 0, "shutdown ran them");
    for handle in &handles {
        assert!(handle.is_cancelled() && !handle.is_expired());
        assert!(!handle.cancel(), "nothing left to stop");
    }
    assert!(ran.is_expired());

    for callback in unfired.callbacks {
        callback.run();
    }
    assert_eq!(runs.load(Ordering::SeqCst), 3);
    // Advancing a shut-down timer fires nothing and does not panic.
    timer.advance(Duration::from_secs(10));
    assert_eq!(runs.load(Ordering::SeqCst), 3);
}

#[test]
fn shutdown_counts_pending_sleeps_and_wakes_them() {
    let _guard = common::guard();
    let timer = manual();
    let mut pending = task::spawn(timer.sleep(Duration::from_secs(1)));
    let mut eager = timer.try_sleep(Duration::from_secs(1)).unwrap();
    let mut done = task::spawn(timer.sleep(Duration::from_millis(1)));
    assert_pending!(pending.poll());
    assert_pending!(done.poll());
    timer.advance(Duration::from_millis(1));
    assert_ready!(done.poll());

    let unfired = timer.shutdown();
    assert_eq!(
        unfired.sleeps, 2,
        "the polled sleep and the eagerly registered one"
    );
    assert!(pending.is_woken(), "a pending sleep must not hang silently");
    // Dropping them is fine.
    drop(pending);
    drop(std::mem::replace(&mut eager, timer.sleep(Duration::ZERO)));
    assert!(
        timer.shutdown().callbacks.is_empty(),
        "a second shutdown finds nothing"
    );
}

#[test]
#[should_panic(expected = "this Sleep can never complete: the timer has shut down")]
fn polling_a_sleep_pending_at_shutdown_panics_with_a_clear_message() {
    let _guard = common::guard();
    let timer = manual();
    let mut sleep = task::spawn(timer.sleep(Duration::from_secs(1)));
    assert_pending!(sleep.poll());
    timer.shutdown();
    let _ = sleep.poll();
}

#[test]
#[should_panic(expected = "the timer has shut down")]
fn a_timeout_pending_at_shutdown_panics_rather_than_report_elapsed() {
    let _guard = common::guard();
    let timer = manual();
    let mut timeout =
        task::spawn(timer.timeout(Duration::from_secs(1), std::future::pending::<()>()));
    assert_pending!(timeout.poll());
    timer.shutdown();
    let _ = timeout.poll();
}

#[test]
fn new_work_after_shutdown_is_refused() {
    let _guard = common::guard();
    let timer = manual();
    timer.shutdown();
    assert!(timer.is_shut_down());
    assert!(timer
        .try_sleep(Duration::from_secs(1))
        .unwrap_err()
        .is_shutdown());
    assert!(timer
        .try_timeout(Duration::from_secs(1), std::future::ready(()))
        .unwrap_err()
        .is_shutdown());
    let err = timer
        .try_schedule(Duration::from_secs(1), || {})
        .unwrap_err();
    assert!(err.is_shutdown() && !err.is_at_capacity());
    assert!(err.to_string().contains("shut down"), "{err}");
    // A deadline already passed needs no timer.
    let mut due = task::spawn(timer.try_sleep(Duration::ZERO).unwrap());
    assert_ready!(due.poll());
}

#[test]
#[should_panic(expected = "cannot schedule a callback: the timer has shut down")]
fn schedule_after_shutdown_panics() {
    let _guard = common::guard();
    let timer = manual();
    timer.shutdown();
    timer.schedule(Duration::from_secs(1), || {});
}

#[test]
fn a_runtime_timer_shuts_down_by_hand_too() {
    let _guard = common::guard();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    let timer = rt.block_on(async { Timer::builder().build().unwrap() });
    let sleeper = timer.clone();
    let task = rt.spawn(async move { sleeper.sleep(Duration::from_secs(3600)).await });
    let registered = std::time::Instant::now();
    while timer.stats().pending == 0 {
        assert!(registered.elapsed() < Duration::from_secs(10));
        std::thread::sleep(Duration::from_millis(1));
    }
    let unfired = timer.shutdown();
    assert_eq!(unfired.sleeps, 1);
    let joined = rt.block_on(async { tokio::time::timeout(Duration::from_secs(10), task).await });
    let err = joined.expect("the pending sleep hung").unwrap_err();
    assert!(
        err.is_panic(),
        "the pending sleep must panic, not complete early"
    );
}

#[test]
fn max_pending_refuses_past_the_limit_and_recovers() {
    let _guard = common::guard();
    let timer = Timer::builder().manual().max_pending(3).build().unwrap();
    let a = timer.try_sleep(Duration::from_millis(1)).unwrap();
    let b = timer.try_schedule(Duration::from_millis(2), || {}).unwrap();
    let mut c = task::spawn(timer.sleep(Duration::from_millis(3)));
    assert_pending!(c.poll());
    assert_eq!(timer.stats().pending, 3);

    let err = timer.try_sleep(Duration::from_secs(1)).unwrap_err();
    assert!(err.is_at_capacity() && !err.is_shutdown());
    assert!(err.to_string().contains("3 pending"), "{err}");
    assert!(timer
        .try_schedule(Duration::from_secs(1), || {})
        .unwrap_err()
        .is_at_capacity());
    assert!(timer
        .try_timeout(Duration::from_secs(1), std::future::ready(()))
        .unwrap_err()
        .is_at_capacity());

    // Resetting an existing entry never counts against the limit.
    c.enter(|_, sleep| sleep.reset(wheel::Instant::now() + Duration::from_secs(5)));

    drop(a);
    let d = timer
        .try_sleep(Duration::from_secs(1))
        .expect("a cancel frees a place");
    timer.advance(Duration::from_millis(2));
    assert!(b.is_expired());
    let _e = timer
        .try_schedule(Duration::from_secs(1), || {})
        .expect("a fire frees a place");
    drop(d);
}

#[test]
#[should_panic(expected = "at capacity")]
fn an_infallible_sleep_past_the_limit_panics_when_polled() {
    let _guard = common::guard();
    let timer = Timer::builder().manual().max_pending(1).build().unwrap();
    let _first = timer.try_sleep(Duration::from_secs(1)).unwrap();
    let mut second = task::spawn(timer.sleep(Duration::from_secs(1)));
    let _ = second.poll();
}

/// At its limit a timer still makes a sleep that is already due: it
/// needs no entry. (A limit of zero is refused: see tests/max_pending.rs.)
#[test]
fn a_full_timer_refuses_everything_but_what_is_already_due() {
    let _guard = common::guard();
    let timer = Timer::builder().manual().max_pending(1).build().unwrap();
    let _first = timer.try_sleep(Duration::from_secs(1)).unwrap();
    assert!(timer
        .try_sleep(Duration::from_secs(1))
        .unwrap_err()
        .is_at_capacity());
    let mut due = task::spawn(timer.try_sleep(Duration::ZERO).unwrap());
    assert_ready!(due.poll());
}

/// A sleep pending in one shard when another thread shuts the timer down
/// is woken by the shutdown, and its next poll reports it: it never hangs.
/// (A registration never runs a pass, so a shutdown cannot come in the
/// middle of one on the registering thread; one from another thread takes
/// the shard's lock, which the registration holds throughout.)
#[test]
#[should_panic(expected = "the timer has shut down")]
fn a_shutdown_from_another_thread_wakes_a_pending_sleep_which_reports_it() {
    let _guard = common::guard();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let timer = rt.block_on(async { Timer::builder().shards(64).build().unwrap() });
    let _runtime = rt.enter();
    let mut sleep = task::spawn(timer.sleep(Duration::from_secs(10)));
    assert_pending!(sleep.poll());
    let remote = timer.clone();
    std::thread::spawn(move || drop(remote.shutdown()))
        .join()
        .unwrap();
    assert!(sleep.is_woken(), "left waiting on a shut-down timer");
    let _ = sleep.poll();
}

#[test]
fn after_a_shutdown_nothing_is_left_pending_once_the_sleeps_are_dropped() {
    let _guard = common::guard();
    let timer = manual();
    let _first = timer.schedule(Duration::from_secs(1), || {});
    let _second = timer.schedule(Duration::from_secs(2), || {});
    let mut sleep = task::spawn(timer.sleep(Duration::from_secs(3)));
    assert_pending!(sleep.poll());

    let unfired = timer.shutdown();
    assert_eq!((unfired.callbacks.len(), unfired.sleeps), (2, 1));
    let stats = timer.stats();
    assert_eq!(
        (stats.pending, stats.entries, stats.callbacks),
        (1, 1, 0),
        "the callbacks were handed back; the sleep's entry waits for its drop"
    );
    drop(sleep);
    let stats = timer.stats();
    assert_eq!((stats.pending, stats.entries), (0, 0), "{stats:?}");
}

#[test]
fn unfired_callbacks_with_one_deadline_come_back_in_the_order_they_were_scheduled() {
    let _guard = common::guard();
    let timer = manual();
    // Two slab slots freed, which the slab reuses last first.
    timer.schedule(Duration::from_secs(1), || {});
    timer.schedule(Duration::from_secs(2), || {});
    timer.advance(Duration::from_secs(2));
    let order = Arc::new(Mutex::new(Vec::new()));
    let at = timer.now() + Duration::from_secs(5);
    for name in ["first", "second", "third"] {
        let order = order.clone();
        timer.schedule_at(at, move || order.lock().unwrap().push(name));
    }
    for callback in timer.shutdown().callbacks {
        callback.run();
    }
    assert_eq!(*order.lock().unwrap(), ["first", "second", "third"]);
}

/// Found by review: the handles of handed-back callbacks said cancelled,
/// and the stats counted them nowhere.
#[test]
fn callbacks_handed_back_by_a_shutdown_count_as_cancelled() {
    let _guard = common::guard();
    let timer = manual();
    let a = timer.schedule(Duration::from_millis(10), || {});
    let _b = timer.schedule(Duration::from_millis(20), || {});
    assert_eq!(timer.shutdown().callbacks.len(), 2);
    assert!(a.is_cancelled());
    let stats = timer.stats();
    assert_eq!(
        (stats.pending, stats.callbacks, stats.fired, stats.cancelled),
        (0, 0, 0, 2),
        "{stats:?}"
    );
}

/// Found by review: a pending sleep reset after shutdown to a deadline that
/// had already passed panicked, where a fired one reset the same way, and a
/// new one, completed.
#[tokio::test(start_paused = true)]
async fn a_pending_sleep_reset_into_the_past_after_shutdown_completes() {
    let _guard = common::guard();
    let timer = Timer::builder().build().unwrap();
    let start = timer.now();
    let mut pending = task::spawn(timer.sleep(Duration::from_secs(10)));
    assert_pending!(pending.poll());
    tokio::time::advance(Duration::from_secs(5)).await;
    assert_eq!(timer.shutdown().sleeps, 1);
    assert!(pending.is_woken());
    pending.enter(|_, s| s.reset(start + Duration::from_secs(1)));
    assert!(pending.is_elapsed());
    assert_ready!(pending.poll());
    // Reset again to a deadline that has not passed: pending, so it panics.
    pending.enter(|_, s| s.reset(timer.now() + Duration::from_secs(1)));
    let polled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| pending.poll()));
    assert!(polled.is_err(), "completed early: {polled:?}");
}

/// Found by review: a sleep whose deadline had passed, but which the
/// driver had not fired yet when the timer shut down (here its runtime's
/// only thread was busy), panicked when polled instead of completing.
#[test]
fn a_sleep_due_but_not_yet_fired_at_shutdown_completes() {
    let _guard = common::guard();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async {
        let timer = Timer::builder().build().unwrap();
        let mut due = task::spawn(timer.sleep(Duration::from_millis(1)));
        let mut later = task::spawn(timer.sleep(Duration::from_secs(60)));
        assert_pending!(due.poll());
        assert_pending!(later.poll());
        // Blocks the runtime's only thread, so the driver cannot run.
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(timer.shutdown().sleeps, 2);
        assert_ready!(due.poll());
        let polled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| later.poll()));
        assert!(polled.is_err(), "completed 60 s early");
        let stats = timer.stats();
        assert_eq!((stats.fired, stats.entries), (1, 1), "{stats:?}");
    });
}

/// Found by review: the check above compared ticks, the entry's rounded up
/// and the clock's rounded down, so a deadline passed by less than a tick
/// or two still panicked, where a new sleep with that deadline completed.
#[test]
fn a_sleep_whose_deadline_passed_within_the_tick_completes_after_shutdown() {
    let _guard = common::guard();
    let timer = manual_ticking(Duration::from_millis(10));
    let start = timer.now();
    let mut sleep = task::spawn(timer.sleep_until(start + Duration::from_millis(5)));
    assert_pending!(sleep.poll());
    timer.advance(Duration::from_millis(7));
    assert!(!sleep.is_woken(), "fired before its tick");
    drop(timer.shutdown());
    let mut fresh = task::spawn(
        timer
            .try_sleep_until(start + Duration::from_millis(5))
            .unwrap(),
    );
    assert_ready!(fresh.poll());
    // Found by review: `is_elapsed` said false here, though the next poll
    // completes the sleep.
    assert!(sleep.is_elapsed());
    assert_ready!(sleep.poll());
}

/// The counterpart of the test above: after shutdown, a sleep whose deadline
/// has not passed is not elapsed, however far the watermarks lag.
#[test]
fn a_sleep_not_yet_due_at_shutdown_is_not_elapsed() {
    let _guard = common::guard();
    let timer = manual_ticking(Duration::from_millis(10));
    let start = timer.now();
    let mut sleep = task::spawn(timer.sleep_until(start + Duration::from_millis(25)));
    assert_pending!(sleep.poll());
    timer.advance(Duration::from_millis(7));
    drop(timer.shutdown());
    assert!(!sleep.is_elapsed());
    timer.advance(Duration::from_millis(20));
    assert!(
        sleep.is_elapsed(),
        "due by the clock, so the next poll completes it"
    );
    assert_ready!(sleep.poll());
}

/// A sleep a full or shut-down timer refuses, whose deadline the clock has
/// passed though no pass has reached it yet, completes at once; and
/// `stats().fired` still counts what fired before (a completed sleep reset
/// into the past counts one more, as it does on a timer with room).
#[tokio::test(start_paused = true)]
async fn a_due_sleep_a_full_or_shut_down_timer_refuses_completes_and_keeps_the_count() {
    let _guard = common::guard();
    let timer = Timer::builder().max_pending(1).build().unwrap();
    let start = wheel::Instant::now();
    common::within("a 1 ms sleep", ms(2), timer.sleep(ms(1))).await;
    let mut far = task::spawn(timer.sleep(Duration::from_secs(3600)));
    assert_pending!(far.poll());
    let passes = timer.stats().passes;
    tokio::time::advance(ms(10)).await;
    assert_eq!(
        timer.stats().passes,
        passes,
        "no pass: the alarm is an hour out"
    );

    // Full: refused, but due by the clock.
    let mut due = task::spawn(timer.sleep_until(start + ms(5)));
    assert_ready!(due.poll());
    assert_eq!(timer.stats().fired, 1);
    due.enter(|_, sleep| sleep.reset(start + ms(6)));
    assert!(due.is_elapsed());
    assert_eq!(timer.stats().fired, 2);

    // Shut down: the same.
    let _ = timer.shutdown();
    let fired = timer.stats().fired;
    let mut due = task::spawn(timer.sleep_until(start + ms(7)));
    assert_ready!(due.poll());
    due.enter(|_, sleep| sleep.reset(start + ms(8)));
    assert!(due.is_elapsed());
    assert_eq!(timer.stats().fired, fired + 1);
}

/// Callbacks with one deadline are handed back in the order they were
/// scheduled, whatever order the wheel holds them in.
#[test]
fn shutdown_hands_back_callbacks_of_one_deadline_in_scheduling_order() {
    let _guard = common::guard();
    let timer = manual();
    let order = Arc::new(Mutex::new(Vec::new()));
    let _handles: Vec<_> = (0..4)
        .map(|n| {
            let order = order.clone();
            timer.schedule(Duration::from_secs(1), move || {
                order.lock().unwrap().push(n);
            })
        })
        .collect();
    for callback in timer.shutdown().callbacks {
        callback.run();
    }
    assert_eq!(*order.lock().unwrap(), [0, 1, 2, 3]);
}

/// Nothing can advance a manual timer once its last `Timer` is gone: a
/// sleep still pending on it could never complete. Dropping the timer shuts
/// it down, so its pending sleeps are woken and report it rather than hang.
#[test]
fn dropping_a_manual_timer_shuts_it_down_so_its_pending_sleeps_do_not_hang() {
    let _guard = common::guard();
    let timer = manual();
    let mut pending = task::spawn(timer.sleep(Duration::from_secs(1)));
    let mut fired = task::spawn(timer.sleep(Duration::from_millis(1)));
    assert_pending!(pending.poll());
    assert_pending!(fired.poll());
    timer.advance(Duration::from_millis(1));
    drop(timer);
    assert!(pending.is_woken(), "a pending sleep hangs silently");
    let checked = pending.enter(|cx, mut sleep| sleep.as_mut().poll_checked(cx));
    assert!(
        matches!(checked, std::task::Poll::Ready(Err(ref e)) if e.is_shutdown()),
        "{checked:?}"
    );
    // The message names the cause: no `Timer::shutdown` was called and
    // there is no runtime (it named only those two).
    let message = common::panic_of(|| pending.poll());
    assert!(
        message.contains("manual timer whose last Timer was dropped"),
        "{message}"
    );
    assert_ready!(fired.poll(), "fired before the drop");
}

/// A callback that owns a sleep of its own manual timer (a connection with
/// its idle timeout, closed by the callback) is freed with the timer: the
/// sleep's hold on its shard, which holds the callback, is no cycle.
#[test]
fn a_manual_timer_dropped_with_a_callback_owning_one_of_its_sleeps_frees_both() {
    let _guard = common::guard();
    let held = Arc::new(());
    let timer = manual();
    let mut sleep = task::spawn(timer.sleep(Duration::from_secs(5)));
    assert_pending!(sleep.poll());
    let in_callback = held.clone();
    timer.schedule(Duration::from_secs(1), move || drop((sleep, in_callback)));
    drop(timer);
    assert_eq!(Arc::strong_count(&held), 1, "the callback was kept");
}

/// A timeout of a manual timer that shuts down (by hand, or with its last
/// `Timer`) before the timeout first waits answers by that timer's clock,
/// as a sleep does: due by it, it times out; not yet due, it panics that
/// the timer has shut down.
#[test]
fn a_timeout_whose_timer_shut_down_before_its_first_wait_answers_by_its_clock() {
    let _guard = common::guard();
    let timer = manual();
    let mut due = task::spawn(timer.timeout(ms(10), std::future::pending::<()>()));
    let not_due = timer.timeout(ms(30), std::future::pending::<()>());
    timer.advance(ms(20));
    drop(timer);
    assert!(assert_ready!(due.poll()).is_err());
    let message = common::panic_of(|| task::spawn(not_due).poll());
    assert!(message.contains("shut down"), "{message}");
}

/// Found by review (s9d): a sleep fired before a shutdown (not yet polled)
/// and reset after it became pending again, though nothing would ever fire
/// it: `Stats::pending` grew after the shutdown, past `max_pending`. Its
/// reset is now refused, as a completed sleep's is; its next poll still
/// reports the shutdown.
#[test]
fn a_fired_sleep_reset_after_shutdown_is_not_pending_again() {
    let timer = Timer::builder().manual().max_pending(2).build().unwrap();
    let mut fired: Vec<_> = (0..2)
        .map(|_| task::spawn(timer.try_sleep(Duration::from_secs(1)).unwrap()))
        .collect();
    timer.advance(Duration::from_secs(1));
    let _full = [
        timer.try_sleep(Duration::from_secs(10)).unwrap(),
        timer.try_sleep(Duration::from_secs(10)).unwrap(),
    ];
    assert_eq!(timer.stats().pending, 2);
    assert_eq!(timer.shutdown().sleeps, 2);

    for sleep in &mut fired {
        std::pin::Pin::new(&mut **sleep).reset(timer.now() + Duration::from_secs(5));
    }
    assert_eq!(
        timer.stats().pending,
        2,
        "only the two pending at the shutdown"
    );
    let mut sleep = fired.pop().unwrap().into_inner();
    let mut checked = task::spawn(sleep.checked());
    let error = assert_ready!(checked.poll()).unwrap_err();
    assert!(error.is_shutdown(), "{error}");
}
