//! A timer whose runtime has shut down: what completes, what panics and
//! says why, what is handed back, and that nothing hangs.

use std::future::pending;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::thread;
use std::time::Duration;

use tokio::runtime::Builder as RtBuilder;
use tokio::time;
use tokio_test::{assert_pending, assert_ready, task};
use wheel::{Instant, Timer};

mod common;
use common::{
    ms, multi_rt, panic_message, panic_of, paused_rt, poll_once, real_rt, registered, secs,
};

// A timer whose runtime has shut down
// ---------------------------------------------------------------------------

#[test]
fn a_timer_reports_its_runtimes_shutdown() {
    let _guard = common::guard();
    let rt = paused_rt();
    let (default, explicit) = rt.block_on(async {
        (
            Timer::current(),
            Timer::builder().tick(ms(10)).build().unwrap(),
        )
    });
    let outside = Timer::builder()
        .runtime(rt.handle().clone())
        .build()
        .unwrap();
    assert!(!default.is_shut_down() && !explicit.is_shut_down() && !outside.is_shut_down());
    drop(rt);
    assert!(default.is_shut_down());
    assert!(explicit.is_shut_down());
    assert!(outside.is_shut_down());
    // Another runtime's default timer is a different, live one.
    let rt_other = paused_rt();
    let other = rt_other.block_on(async { Timer::current() });
    assert!(!other.is_shut_down());
    drop(rt_other);
    assert!(other.is_shut_down());
}

#[test]
fn a_pending_sleep_of_a_shut_down_timer_panics_when_polled_and_never_completes() {
    let _guard = common::guard();
    let rt_a = paused_rt();
    let (timer, mut pending_sleep, mut fired_sleep) = rt_a.block_on(async {
        let timer = Timer::builder().tick(ms(10)).build().unwrap();
        let mut pending_sleep = task::spawn(timer.sleep(secs(60)));
        let mut fired_sleep = task::spawn(timer.sleep(ms(10)));
        assert_pending!(pending_sleep.poll());
        assert_pending!(fired_sleep.poll());
        time::advance(ms(10)).await;
        assert!(fired_sleep.is_woken());
        assert!(!pending_sleep.is_woken());
        (timer, pending_sleep, fired_sleep)
    });
    drop(rt_a);
    assert!(timer.is_shut_down());
    assert!(
        pending_sleep.is_woken(),
        "shutdown wakes pending sleeps, so nothing hangs"
    );
    assert!(!pending_sleep.is_elapsed());
    assert!(fired_sleep.is_elapsed());

    let rt_b = paused_rt();
    rt_b.block_on(async {
        // Fired before the shutdown: still completes.
        assert_ready!(fired_sleep.poll());
        // Pending at the shutdown: panics, every time, and never completes.
        for _ in 0..2 {
            let err = catch_unwind(AssertUnwindSafe(|| {
                let _ = pending_sleep.poll();
            }))
            .unwrap_err();
            let msg = panic_message(&*err);
            assert!(msg.contains("shut down"), "{msg}");
            assert!(!pending_sleep.is_elapsed());
        }
    });
    drop(pending_sleep);
    let stats = timer.stats();
    assert_eq!((stats.pending, stats.entries), (0, 0), "{stats:?}");
    assert_eq!((stats.fired, stats.cancelled), (1, 1), "{stats:?}");
}

#[test]
fn a_sleep_that_fired_before_shutdown_completes_even_outside_a_runtime() {
    let _guard = common::guard();
    let rt = paused_rt();
    let (timer, mut sleep) = rt.block_on(async {
        let mut sleep = task::spawn(wheel::sleep(ms(5)));
        assert_pending!(sleep.poll());
        time::advance(ms(5)).await;
        assert!(sleep.is_woken());
        (Timer::current(), sleep)
    });
    drop(rt);
    assert!(timer.is_shut_down());
    assert_ready!(sleep.poll());
    assert!(sleep.is_elapsed());
    assert_eq!(timer.stats().entries, 0);
}

#[test]
fn new_futures_on_a_shut_down_timer() {
    let _guard = common::guard();
    let rt_a = paused_rt();
    let timer = rt_a.block_on(async { Timer::builder().build().unwrap() });
    drop(rt_a);
    assert!(timer.is_shut_down());
    paused_rt().block_on(async {
        // Nothing to wait for: complete without the timer.
        timer.sleep(Duration::ZERO).await;
        // Passed on the timer's own clock (its runtime's, paused when that
        // runtime was made: this one's may be more than 1 ms ahead).
        timer.sleep_until(timer.now() - ms(1)).await;
        assert_eq!(timer.timeout(secs(1), async { 7 }).await, Ok(7));
        // Something to wait for: panic at once rather than hang.
        let mut sleep = timer.sleep(ms(5));
        let err = catch_unwind(AssertUnwindSafe(|| poll_once(&mut sleep))).unwrap_err();
        assert!(panic_message(&*err).contains("shut down"));
        let mut timeout = Box::pin(timer.timeout(ms(5), pending::<()>()));
        let err = catch_unwind(AssertUnwindSafe(|| poll_once(&mut timeout))).unwrap_err();
        assert!(panic_message(&*err).contains("shut down"));
    });
    let stats = timer.stats();
    assert_eq!((stats.pending, stats.entries, stats.fired), (0, 0, 0));
}

#[test]
#[should_panic(expected = "shut down")]
fn awaiting_a_pending_sleep_of_a_shut_down_timer_panics() {
    let _guard = common::guard();
    let rt_a = paused_rt();
    let sleep = {
        let _context = rt_a.enter();
        registered(wheel::sleep(secs(60)))
    };
    drop(rt_a);
    // tokio's own (auto-advanced) timeout turns a hang into a failure.
    let out = paused_rt().block_on(async { time::timeout(secs(3600), sleep).await });
    panic!("the sleep returned {out:?} instead of panicking");
}

#[test]
fn a_task_waiting_on_a_timer_whose_runtime_shuts_down_is_woken_and_fails() {
    let _guard = common::guard();
    let rt_a = multi_rt();
    let timer = Timer::builder()
        .runtime(rt_a.handle().clone())
        .build()
        .unwrap();
    let rt_b = real_rt();
    let waiter = rt_b.spawn({
        let timer = timer.clone();
        async move { timer.sleep(secs(60)).await }
    });
    rt_b.block_on(async {
        let registered = async {
            while timer.stats().pending == 0 {
                tokio::task::yield_now().await;
            }
        };
        time::timeout(secs(10), registered)
            .await
            .expect("the waiter registers");
    });
    drop(rt_a);
    assert!(timer.is_shut_down());
    let joined = rt_b
        .block_on(async { time::timeout(secs(10), waiter).await })
        .expect("the waiter was woken by the shutdown, not left hanging");
    let err = joined.expect_err("the waiter must not complete");
    assert!(err.is_panic());
    let msg = panic_message(&*err.into_panic());
    assert!(msg.contains("shut down"), "{msg}");
}

#[test]
fn shutdown_racing_with_sleepers_on_another_runtime_fails_them_all_and_hangs_none() {
    let _guard = common::guard();
    let rt_a = multi_rt();
    let timer = Timer::builder()
        .tick(ms(1))
        .slots_per_level(4)
        .runtime(rt_a.handle().clone())
        .build()
        .unwrap();
    let rt_b = RtBuilder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    let handles: Vec<_> = (0..200u64)
        .map(|i| {
            let timer = timer.clone();
            rt_b.spawn(async move {
                // Sleeps until the timer's runtime goes away under it.
                let mut n = i;
                loop {
                    let deadline = Instant::now() + ms(1 + n % 5);
                    timer.sleep_until(deadline).await;
                    assert!(Instant::now() >= deadline, "early");
                    n += 1;
                }
            })
        })
        .collect();
    rt_b.block_on(async {
        let busy = async {
            while timer.stats().fired < 400 {
                time::sleep(ms(1)).await;
            }
        };
        time::timeout(secs(10), busy)
            .await
            .expect("the sleepers run");
    });
    drop(rt_a);
    assert!(timer.is_shut_down());
    rt_b.block_on(async {
        for h in handles {
            let joined = time::timeout(secs(10), h).await.expect("a sleeper hangs");
            let err = joined.expect_err("the loop only ends by panicking");
            let msg = panic_message(&*err.into_panic());
            assert!(msg.contains("shut down"), "{msg}");
        }
    });
}

/// A handle that outlived its runtime used to build a timer that was shut
/// down already, so every sleep on it panicked later: now `build` says so.
#[test]
fn building_on_a_runtime_that_has_shut_down_is_an_error() {
    let _guard = common::guard();
    let rt = real_rt();
    let handle = rt.handle().clone();
    drop(rt);
    let error = Timer::builder().runtime(handle).build().unwrap_err();
    assert!(error.is_no_runtime(), "{error}");
    assert!(error.to_string().contains("shut down"), "{error}");
}

#[test]
fn dropping_a_multi_thread_runtimes_timer_elsewhere_frees_it() {
    let _guard = common::guard();
    let rt = multi_rt();
    let metrics = rt.metrics();
    // The runtime's own tasks: the guard's.
    let base = metrics.num_alive_tasks();
    let timer = Timer::builder()
        .runtime(rt.handle().clone())
        .build()
        .unwrap();
    rt.block_on(timer.sleep(ms(2)));
    let sleeps = {
        let _context = rt.enter();
        registered(timer.sleep(secs(60)))
    };
    assert_eq!(metrics.num_alive_tasks(), base + 1, "the sentinel");
    // The last handles go on a thread outside the runtime.
    thread::spawn(move || drop((timer, sleeps))).join().unwrap();
    rt.block_on(async {
        let freed = async {
            while metrics.num_alive_tasks() != base {
                time::sleep(ms(1)).await;
            }
        };
        time::timeout(secs(10), freed)
            .await
            .expect("the timer is freed");
    });
}

// ---------------------------------------------------------------------------

/// A `wheel::timeout` made in a running runtime that then shuts down,
/// polled in a paused runtime an hour ahead: its deadline has not passed on
/// the clock it was read on (the real one), so it must not time out; it
/// panics as a `wheel::sleep` made the same way does (its timer has shut
/// down), and as tokio's timeout does. The timeout binds to its shard only
/// when it first waits and finds no timer: it asked the clock where it was
/// polled (`Sleep::bind_to`), 59 minutes ahead.
#[test]
fn a_timeout_of_a_shut_down_runtime_does_not_time_out_on_another_clock() {
    let _guard = common::guard();
    let made_in = real_rt();
    let timeout = {
        let _in_it = made_in.enter();
        wheel::timeout(secs(60), pending::<()>())
    };
    drop(made_in);
    let message = panic_of(|| {
        paused_rt().block_on(async move {
            time::advance(secs(3600)).await;
            task::spawn(timeout).poll()
        })
    });
    assert!(message.contains("shut down"), "{message}");
}

/// A `wheel::timeout` of a paused runtime whose clock is an hour ahead of
/// the real one, its default timer shut down before the timeout first
/// waits, polled in that runtime once that clock has passed its deadline:
/// it has timed out by the clock it was read on, as a `wheel::sleep` made
/// beside it has completed. (By the earlier of that clock and the real
/// one, an hour behind, it panicked.)
#[test]
fn a_timeout_whose_timer_shut_down_times_out_by_its_own_clock_ahead_of_the_real_one() {
    let _guard = common::guard();
    paused_rt().block_on(async {
        time::advance(secs(3600)).await;
        let timeout = wheel::timeout(secs(1), pending::<()>());
        let mut sleep = wheel::sleep(secs(1));
        Timer::current().shutdown();
        time::advance(secs(2)).await;
        assert_ready!(task::spawn(&mut sleep).poll());
        // Nothing holds the timer now.
        drop(sleep);
        let polled = catch_unwind(AssertUnwindSafe(|| task::spawn(timeout).poll()));
        let polled = polled.map_err(|panic| panic_message(&*panic));
        assert!(
            matches!(polled, Ok(std::task::Poll::Ready(Err(_)))),
            "{polled:?}"
        );
    });
}

/// A `wheel::timeout` of a paused runtime that is then dropped, polled
/// outside any runtime once the real clock has passed its deadline: by its
/// own clock (paused, now gone) no time has passed, so it must not time
/// out; it panics as a `wheel::sleep` made beside it does, and as tokio's
/// timeout does. Neither clock at hand (the real one, twice) is the one its
/// deadline was read on.
#[test]
fn a_timeout_of_a_dropped_paused_runtime_does_not_time_out_by_the_real_clock() {
    let _guard = common::guard();
    let made_in = paused_rt();
    let (timeout, sleep) = made_in.block_on(async {
        (
            wheel::timeout(ms(20), pending::<()>()),
            wheel::sleep(ms(20)),
        )
    });
    drop(made_in);
    thread::sleep(ms(30));
    let mut sleep = sleep;
    let slept = panic_of(|| poll_once(&mut sleep));
    assert!(slept.contains("shut down"), "{slept}");
    // Nothing holds the timer now.
    drop(sleep);
    let mut timeout = Box::pin(timeout);
    let polled = panic_of(|| poll_once(&mut timeout));
    assert!(polled.contains("shut down"), "{polled}");
}

/// A `wheel::timeout` whose runtime's default timer shuts down before the
/// timeout first waits, polled there after the real clock has passed its
/// deadline but the runtime's own has not: a paused tokio clock, whose
/// timer is gone (tokio's clock there answers), and a test runtime's test
/// clock, whose timer it holds (tokio's clock there keeps real time; the
/// shut-down timer's clock answers). Neither has reached the deadline, so
/// each panics that its timer has shut down. (By the real clock both timed
/// out early, the test runtime's also by the clock where it was polled.)
#[test]
fn a_timeout_whose_timer_shut_down_answers_by_its_own_clock_not_the_real_one() {
    let _guard = common::guard();
    let shut_down_then_poll = || async {
        let timeout = wheel::timeout(ms(20), pending::<()>());
        Timer::current().shutdown();
        thread::sleep(ms(30));
        task::spawn(timeout).poll()
    };
    let paused = panic_of(|| paused_rt().block_on(shut_down_then_poll()));
    assert!(paused.contains("shut down"), "paused: {paused}");
    let test_rt = wheel::TestClock::new()
        .build(RtBuilder::new_current_thread().enable_time())
        .unwrap();
    let test = panic_of(|| test_rt.block_on(shut_down_then_poll()));
    assert!(test.contains("shut down"), "test clock: {test}");
    // First waited on a worker of a multi-thread test runtime that never
    // looked its timer up: found in the registry all the same.
    let test_rt = wheel::TestClock::new()
        .build(
            RtBuilder::new_multi_thread()
                .worker_threads(2)
                .enable_time(),
        )
        .unwrap();
    let on_a_worker = panic_of(|| {
        test_rt.block_on(async {
            let timeout = wheel::timeout(ms(20), pending::<()>());
            Timer::current().shutdown();
            thread::sleep(ms(30));
            let polled = tokio::spawn(async move { task::spawn(timeout).poll() }).await;
            polled.unwrap_or_else(|failed| std::panic::resume_unwind(failed.into_panic()))
        })
    });
    assert!(
        on_a_worker.contains("shut down"),
        "on a worker: {on_a_worker}"
    );
}

/// An ordinary runtime's default timer shut down by hand is replaced on the
/// next lookup: sleeps made afterwards run on a new default timer (a test
/// runtime's stays, `test_clock.rs`), while those of the old one report its
/// shutdown.
#[test]
fn a_default_timer_shut_down_by_hand_is_replaced() {
    let _guard = common::guard();
    paused_rt().block_on(async {
        let mut old = task::spawn(wheel::sleep(secs(10)));
        assert_pending!(old.poll());
        Timer::current().shutdown();
        assert!(!Timer::current().is_shut_down(), "not replaced");
        let start = time::Instant::now();
        wheel::sleep(secs(1)).await;
        assert_eq!(start.elapsed(), secs(1));
        let message = panic_of(|| old.poll());
        assert!(message.contains("shut down"), "{message}");
    });
}
