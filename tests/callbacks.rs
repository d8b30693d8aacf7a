//! Callback timers: `Timer::schedule` and `TimerHandle`.

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_test::{assert_pending, task};
use wheel::Timer;

mod common;
use common::{manual, manual_ticking};

fn counter() -> (Arc<AtomicU32>, impl Fn() -> Box<dyn FnOnce() + Send>) {
    let count = Arc::new(AtomicU32::new(0));
    let make = {
        let count = count.clone();
        move || -> Box<dyn FnOnce() + Send> {
            let count = count.clone();
            Box::new(move || {
                count.fetch_add(1, Ordering::SeqCst);
            })
        }
    };
    (count, make)
}

#[test]
fn a_callback_runs_at_its_deadline_not_before() {
    let _guard = common::guard();
    let timer = manual();
    let (runs, make) = counter();
    let handle = timer.schedule(Duration::from_millis(10), make());
    timer.advance(Duration::from_millis(9));
    assert_eq!(runs.load(Ordering::SeqCst), 0, "ran early");
    assert!(!handle.is_expired());
    timer.advance(Duration::from_millis(1));
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert!(handle.is_expired() && !handle.is_cancelled());
    assert_eq!(timer.stats().pending, 0);
    assert_eq!(timer.stats().callbacks, 0);
}

#[test]
fn callbacks_run_in_deadline_order() {
    let _guard = common::guard();
    let timer = manual();
    let order = Arc::new(Mutex::new(Vec::new()));
    for ms in [30u64, 10, 20, 10, 5000, 1] {
        let order = order.clone();
        timer.schedule(Duration::from_millis(ms), move || {
            order.lock().unwrap().push(ms);
        });
    }
    timer.advance(Duration::from_secs(10));
    assert_eq!(*order.lock().unwrap(), [1, 10, 10, 20, 30, 5000]);
}

#[test]
fn cancel_is_true_only_when_it_stopped_the_run() {
    let _guard = common::guard();
    let timer = manual();
    let (runs, make) = counter();
    let cancelled = timer.schedule(Duration::from_secs(1), make());
    let fired = timer.schedule(Duration::from_secs(1), make());
    assert!(cancelled.cancel());
    assert!(!cancelled.cancel(), "a second cancel stops nothing");
    assert_eq!(timer.stats().pending, 1);
    timer.advance(Duration::from_secs(1));
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert!(!fired.cancel(), "it has already run");
    assert!(cancelled.is_cancelled() && !cancelled.is_expired());
    assert!(fired.is_expired() && !fired.is_cancelled());
    let stats = timer.stats();
    assert_eq!((stats.fired, stats.cancelled), (1, 1));
}

#[test]
fn callbacks_cancelled_long_after_scheduling_never_run() {
    let _guard = common::guard();
    // One deadline, so each entry has neighbours, and the oldest cancelled
    // first: the wheel unlinks those in batches, after dropping the closure.
    let timer = manual();
    let (runs, make) = counter();
    let handles: Vec<_> = (0..300)
        .map(|_| timer.schedule(Duration::from_secs(1), make()))
        .collect();
    for handle in &handles[..200] {
        assert!(handle.cancel());
    }
    // No `stats()` before advancing: reading them frees what waits.
    timer.advance(Duration::from_secs(1));
    assert_eq!(runs.load(Ordering::SeqCst), 100);
    assert!(handles[..200].iter().all(|h| h.is_cancelled()));
    assert!(handles[200..].iter().all(|h| h.is_expired()));
    let stats = timer.stats();
    assert_eq!((stats.fired, stats.cancelled, stats.entries), (100, 200, 0));
}

#[test]
fn a_panicking_callback_is_contained_and_counted() {
    let _guard = common::guard();
    let timer = manual();
    let (runs, make) = counter();
    timer.schedule(Duration::from_millis(1), make());
    timer.schedule(Duration::from_millis(2), || {
        panic!("callback failure (expected by the test)")
    });
    timer.schedule(Duration::from_millis(3), make());
    timer.advance(Duration::from_millis(3));
    assert_eq!(
        runs.load(Ordering::SeqCst),
        2,
        "the callbacks around the panic ran"
    );
    assert_eq!(timer.stats().panicked, 1);
    // The timer keeps serving.
    timer.schedule(Duration::from_millis(1), make());
    timer.advance(Duration::from_millis(1));
    assert_eq!(runs.load(Ordering::SeqCst), 3);
}

#[test]
fn a_past_deadline_runs_at_the_next_tick_not_inline() {
    let _guard = common::guard();
    let timer = manual();
    let (runs, make) = counter();
    let past = timer.now();
    timer.advance(Duration::from_millis(5));
    timer.schedule_at(past, make());
    assert_eq!(runs.load(Ordering::SeqCst), 0, "ran on the caller's stack");
    timer.advance(Duration::from_millis(1));
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

#[test]
fn a_callback_may_schedule_and_cancel_on_its_own_timer() {
    let _guard = common::guard();
    let timer = manual();
    let (runs, make) = counter();
    let victim = Arc::new(timer.schedule(Duration::from_millis(20), make()));
    let inner_timer = timer.clone();
    let inner_make = make();
    let to_cancel = victim.clone();
    timer.schedule(Duration::from_millis(10), move || {
        assert!(to_cancel.cancel());
        inner_timer.schedule(Duration::from_millis(5), inner_make);
    });
    timer.advance(Duration::from_millis(14));
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    timer.advance(Duration::from_millis(1));
    assert_eq!(
        runs.load(Ordering::SeqCst),
        1,
        "the rescheduled callback ran at 15 ms"
    );
    assert!(victim.is_cancelled());
}

#[test]
fn advancing_from_inside_a_callback_fires_what_becomes_due() {
    let _guard = common::guard();
    let timer = manual();
    let (runs, make) = counter();
    timer.schedule(Duration::from_millis(50), make());
    let clock = timer.clone();
    timer.schedule(Duration::from_millis(10), move || {
        clock.advance(Duration::from_millis(100))
    });
    timer.advance(Duration::from_millis(10));
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn callbacks_run_on_a_runtime_timer_without_any_handle_left() {
    let _guard = common::guard();
    let (runs, make) = counter();
    {
        let timer = Timer::builder().build().unwrap();
        timer.schedule(Duration::from_millis(100), make());
        // Timer and handle dropped here.
    }
    tokio::time::sleep(Duration::from_millis(99)).await;
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    tokio::time::sleep(Duration::from_millis(2)).await;
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn a_callback_timer_frees_itself_once_its_callbacks_are_done() {
    let _guard = common::guard();
    let timer = Timer::builder().build().unwrap();
    let weak = {
        let (runs, make) = counter();
        timer.schedule(Duration::from_millis(5), make());
        let handle = timer.schedule(Duration::from_millis(5), make());
        drop(timer);
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert_eq!(runs.load(Ordering::SeqCst), 2);
        handle
    };
    // Only the handle holds the timer now; stats are still readable.
    assert_eq!(weak.timer().stats().callbacks, 0);
}

#[test]
fn callbacks_from_many_threads_run_exactly_once() {
    let _guard = common::guard();
    let timer = manual();
    let (runs, make) = counter();
    let make = Arc::new(Mutex::new(make));
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let timer = timer.clone();
            let make = make.clone();
            std::thread::spawn(move || {
                let mut handles = Vec::new();
                for i in 0..500u64 {
                    let f = (make.lock().unwrap())();
                    handles.push(timer.schedule(Duration::from_millis(1 + (i * 7 + t) % 100), f));
                }
                // Cancel every third one.
                handles.iter().step_by(3).filter(|h| h.cancel()).count()
            })
        })
        .collect();
    let cancelled: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
    timer.advance(Duration::from_millis(100));
    assert_eq!(runs.load(Ordering::SeqCst) as usize + cancelled, 2000);
    assert_eq!(timer.stats().pending, 0);
}

#[test]
fn a_callback_sees_the_time_it_was_due_at() {
    let _guard = common::guard();
    let timer = manual_ticking(Duration::from_millis(10));
    let start = timer.now();
    let seen = Arc::new(Mutex::new(Vec::new()));
    for ms in [25u64, 10, 70] {
        let (clock, seen) = (timer.clone(), seen.clone());
        timer.schedule(Duration::from_millis(ms), move || {
            seen.lock().unwrap().push(clock.now() - start);
        });
    }
    timer.advance(Duration::from_secs(1));
    // Rounded up to the 10 ms tick, never down.
    let ms = |n| Duration::from_millis(n);
    assert_eq!(*seen.lock().unwrap(), [ms(10), ms(30), ms(70)]);
    assert_eq!(timer.now() - start, Duration::from_secs(1));
}

/// While nothing is pending, a runtime timer's wheel is not processed, so
/// it lags the clock; a callback whose deadline has passed must still run
/// where callbacks run, not inside `schedule` (where the caller may hold a
/// lock the callback takes, and has no handle yet).
#[tokio::test(start_paused = true)]
async fn a_due_callback_never_runs_inside_schedule() {
    let _guard = common::guard();
    let timer = Timer::builder().build().unwrap();
    tokio::time::advance(Duration::from_millis(10)).await;
    let ran = Arc::new(AtomicU32::new(0));
    let handle = {
        let ran = ran.clone();
        timer.schedule(Duration::ZERO, move || {
            ran.fetch_add(1, Ordering::SeqCst);
        })
    };
    assert_eq!(ran.load(Ordering::SeqCst), 0, "ran inside schedule");
    tokio::task::yield_now().await;
    tokio::time::advance(timer.tick()).await;
    assert_eq!(ran.load(Ordering::SeqCst), 1);
    assert!(handle.is_expired());
}

#[test]
fn a_running_callback_never_finds_more_callbacks_counted_than_pending() {
    let _guard = common::guard();
    // 40 due at once: a first batch of 32 runs mid-pass, then the rest.
    let timer = manual();
    let seen = Arc::new(Mutex::new(Vec::new()));
    for _ in 0..40 {
        let (t, seen) = (timer.clone(), seen.clone());
        timer.schedule(Duration::from_secs(1), move || {
            let stats = t.stats();
            seen.lock().unwrap().push((stats.callbacks, stats.pending));
        });
    }
    timer.advance(Duration::from_secs(1));
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 40);
    for &(callbacks, pending) in seen.iter() {
        assert!(
            callbacks <= pending,
            "callbacks {callbacks} > pending {pending}"
        );
    }
    assert_eq!(seen.last(), Some(&(0, 0)));
    assert_eq!(timer.stats().callbacks, 0);
}

#[test]
fn a_callback_cancels_a_sibling_due_in_the_same_pass() {
    let _guard = common::guard();
    // Netty's "the success cancels its retry", both due in one pass: the
    // driver has taken the second out of the wheel with the first, in one
    // batch, but not yet run it.
    let timer = manual();
    let (ran, count) = counter();
    let second = Arc::new(Mutex::new(None::<wheel::TimerHandle>));
    let cancelled = Arc::new(Mutex::new(None));
    let first = {
        let (second, cancelled) = (second.clone(), cancelled.clone());
        timer.schedule(Duration::from_secs(1), move || {
            let handle = second.lock().unwrap().take().unwrap();
            *cancelled.lock().unwrap() = Some((handle.cancel(), handle.cancel(), handle));
        })
    };
    *second.lock().unwrap() = Some(timer.schedule(Duration::from_secs(1), count()));
    timer.advance(Duration::from_secs(1));
    let (stopped, again, handle) = cancelled.lock().unwrap().take().unwrap();
    assert!(stopped, "the sibling was still waiting to run");
    assert!(!again, "only the first cancel stops it");
    assert_eq!(ran.load(Ordering::SeqCst), 0, "a cancelled callback ran");
    assert!(handle.is_cancelled() && !handle.is_expired());
    assert!(first.is_expired() && !first.is_cancelled());
    let stats = timer.stats();
    assert_eq!(
        (stats.fired, stats.cancelled, stats.callbacks, stats.pending),
        (1, 1, 0, 0),
        "{stats:?}"
    );
}

#[test]
fn cancelling_a_sibling_that_already_ran_in_the_same_pass_is_too_late() {
    let _guard = common::guard();
    // The other order: the sibling ran first, so there is nothing to stop.
    let timer = manual();
    let (ran, count) = counter();
    let earlier = timer.schedule(Duration::from_secs(1), count());
    let earlier = Arc::new(Mutex::new(Some(earlier)));
    let cancelled = Arc::new(Mutex::new(None));
    {
        let (earlier, cancelled) = (earlier.clone(), cancelled.clone());
        timer.schedule(Duration::from_secs(1), move || {
            let handle = earlier.lock().unwrap().take().unwrap();
            *cancelled.lock().unwrap() = Some(handle.cancel());
        });
    }
    timer.advance(Duration::from_secs(1));
    assert_eq!(*cancelled.lock().unwrap(), Some(false));
    assert_eq!(ran.load(Ordering::SeqCst), 1);
    let stats = timer.stats();
    assert_eq!((stats.fired, stats.cancelled, stats.callbacks), (2, 0, 0));
}

#[tokio::test(start_paused = true)]
async fn a_runtime_timers_callback_cancels_a_sibling_due_in_the_same_pass() {
    let _guard = common::guard();
    // Fired by the alarm, not by `advance`: the same batch, the same rule.
    let timer = Timer::builder().build().unwrap();
    let (ran, count) = counter();
    let second = Arc::new(Mutex::new(None::<wheel::TimerHandle>));
    let cancelled = Arc::new(Mutex::new(None));
    {
        let (second, cancelled) = (second.clone(), cancelled.clone());
        timer.schedule(Duration::from_millis(5), move || {
            *cancelled.lock().unwrap() = Some(second.lock().unwrap().take().unwrap().cancel());
        });
    }
    *second.lock().unwrap() = Some(timer.schedule(Duration::from_millis(5), count()));
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(*cancelled.lock().unwrap(), Some(true));
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    let stats = timer.stats();
    assert_eq!((stats.fired, stats.cancelled, stats.callbacks), (1, 1, 0));
}

/// Found by review: cancelling dropped the closure before uncounting it, so
/// a closure whose drop panicked left `Stats::callbacks` (and, on a runtime
/// timer, the timer's hold on itself) behind for good.
#[test]
fn a_closure_whose_drop_panics_is_still_uncounted_when_cancelled() {
    let _guard = common::guard();
    struct Bomb;
    impl Drop for Bomb {
        fn drop(&mut self) {
            panic!("boom");
        }
    }
    let timer = manual();
    let bomb = Bomb;
    let handle = timer.schedule(Duration::from_millis(10), move || drop(bomb));
    let cancelled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| handle.cancel()));
    assert!(cancelled.is_err(), "the drop panicked in cancel");
    let stats = timer.stats();
    assert_eq!(
        (stats.pending, stats.callbacks, stats.cancelled),
        (0, 0, 1),
        "{stats:?}"
    );
}

/// Found by review: a sleep's first poll that pulled in its shard's
/// wake-up ran the driver on the polling thread, and with it every due
/// callback of every shard, inside whatever lock the poller held. With two
/// shards, a thread's first registration always pulls in (its shard has no
/// wake-up yet). The runtime here is not driven while the poll happens, as
/// with a busy worker; the callback must wait for it.
#[test]
fn a_due_callback_never_runs_inside_an_unrelated_sleeps_poll() {
    let _guard = common::guard();
    use std::sync::atomic::AtomicBool;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let timer = rt.block_on(async { Timer::builder().shards(2).build().unwrap() });
    let start = timer.now();
    let lock = Arc::new(Mutex::new(()));
    let ran_under_the_pollers_lock = Arc::new(AtomicBool::new(false));
    let ran_on = Arc::new(Mutex::new(None::<String>));
    let (l, r, o) = (
        lock.clone(),
        ran_under_the_pollers_lock.clone(),
        ran_on.clone(),
    );
    let handle = timer.schedule_at(start + Duration::from_millis(5), move || {
        *o.lock().unwrap() = std::thread::current().name().map(str::to_owned);
        r.store(l.try_lock().is_err(), Ordering::SeqCst);
    });
    // Due by the clock, and nothing has driven the runtime since.
    std::thread::sleep(Duration::from_millis(20));
    let other = timer.clone();
    std::thread::Builder::new()
        .name("unrelated-poller".into())
        .spawn(move || {
            let _held = lock.lock().unwrap();
            let mut sleep = task::spawn(other.sleep(Duration::from_secs(3600)));
            assert_pending!(sleep.poll());
        })
        .unwrap()
        .join()
        .unwrap();
    assert_eq!(*ran_on.lock().unwrap(), None, "ran inside the poll");
    assert_eq!(timer.stats().callbacks, 1, "still counted until it runs");
    // Driving the runtime runs it there.
    rt.block_on(async {
        while !handle.is_expired() {
            tokio::task::yield_now().await;
        }
    });
    assert!(!ran_under_the_pollers_lock.load(Ordering::SeqCst));
    assert_ne!(
        ran_on.lock().unwrap().as_deref(),
        Some("unrelated-poller"),
        "ran on the polling thread"
    );
    let stats = timer.stats();
    assert_eq!((stats.callbacks, stats.fired), (0, 1), "{stats:?}");
}

/// A callback deferred that way and still waiting when the timer shuts down
/// is handed back, as one still in the wheel is, and counts as cancelled.
#[test]
fn a_deferred_callback_is_handed_back_by_shutdown() {
    let _guard = common::guard();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let timer = rt.block_on(async { Timer::builder().shards(2).build().unwrap() });
    let runs = Arc::new(AtomicUsize::new(0));
    let counter = runs.clone();
    let handle = timer.schedule(Duration::from_millis(1), move || {
        counter.fetch_add(1, Ordering::SeqCst);
    });
    std::thread::sleep(Duration::from_millis(10));
    let other = timer.clone();
    let _sleep = std::thread::spawn(move || {
        let mut sleep = task::spawn(other.sleep(Duration::from_secs(3600)));
        assert_pending!(sleep.poll());
        sleep
    })
    .join()
    .unwrap();
    let unfired = timer.shutdown();
    assert_eq!((unfired.callbacks.len(), unfired.sleeps), (1, 1));
    assert!(handle.is_cancelled());
    let stats = timer.stats();
    assert_eq!(
        (stats.callbacks, stats.fired, stats.cancelled),
        (0, 0, 1),
        "{stats:?}"
    );
    // The task spawned to run it finds nothing left.
    rt.block_on(tokio::task::yield_now());
    for callback in unfired.callbacks {
        callback.run();
    }
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

/// A runtime timer with no handle left holds itself while callbacks are
/// pending, and lets go after the last: each runs, though they fire in
/// separate passes, and then the timer is freed (its sentinel task ends).
#[tokio::test(start_paused = true)]
async fn a_timer_with_no_handle_left_runs_each_callback_then_frees_itself() {
    let _guard = common::guard();
    let metrics = tokio::runtime::Handle::current().metrics();
    tokio::task::yield_now().await;
    let base = metrics.num_alive_tasks();
    let (runs, make) = counter();
    {
        let timer = Timer::builder().build().unwrap();
        timer.schedule(Duration::from_millis(5), make());
        timer.schedule(Duration::from_millis(10), make());
    }
    assert_eq!(metrics.num_alive_tasks(), base + 1, "the sentinel");
    tokio::time::sleep(Duration::from_millis(6)).await;
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    tokio::time::sleep(Duration::from_millis(5)).await;
    assert_eq!(
        runs.load(Ordering::SeqCst),
        2,
        "freed before its last callback"
    );
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert_eq!(
        metrics.num_alive_tasks(),
        base,
        "kept alive after its last callback"
    );
}

/// A manual timer never holds itself: dropped with callbacks pending (no
/// runtime will ever run them), it frees them.
#[test]
fn a_manual_timer_dropped_with_callbacks_pending_frees_them() {
    let _guard = common::guard();
    let held = Arc::new(());
    let timer = manual();
    let in_callback = held.clone();
    drop(timer.schedule(Duration::from_secs(1), move || drop(in_callback)));
    drop(timer);
    assert_eq!(Arc::strong_count(&held), 1, "the callback was kept");
}
