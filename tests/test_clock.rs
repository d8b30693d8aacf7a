//! `TestClock`: a runtime's default timer under the test's control, on
//! runtimes of 1, 2 and 4 workers, by hand and auto-advanced. No test here
//! waits on real time: they wait for the runtime to report, and check
//! instants on the test clock.

mod common;

use std::sync::mpsc;
use std::time::Duration;

use common::{ms, secs};
use futures::StreamExt;
use tokio::runtime::Builder;
use wheel::{DelayQueue, Instant, TestClock, TestRuntime, Timer};

fn multi_thread(workers: usize, auto_advance: bool) -> TestRuntime {
    TestClock::new()
        .auto_advance(auto_advance)
        .build(
            Builder::new_multi_thread()
                .worker_threads(workers)
                .enable_all(),
        )
        .unwrap()
}

/// A current-thread test runtime without auto-advance, its clock moved an
/// hour ahead of tokio's.
fn an_hour_ahead() -> TestRuntime {
    let rt = TestClock::new()
        .auto_advance(false)
        .build(Builder::new_current_thread().enable_time())
        .unwrap();
    rt.advance(secs(3600));
    rt
}

/// Spins (yielding the thread) until `done`: the runtime's workers report
/// through the timer's counters, with no real-time bound to guess.
fn until(done: impl Fn() -> bool) {
    while !done() {
        std::thread::yield_now();
    }
}

/// Each of eight tasks sleeps, times out and ticks an interval, yielding
/// in between so that tasks move between workers. The test moves the clock
/// one second at a time, and each task reports the test clock's time when
/// it woke: exactly its deadlines, on every worker count.
#[test]
fn advanced_by_hand_every_task_wakes_at_its_deadlines() {
    let _guard = common::guard();
    for workers in [1, 2, 4] {
        let rt = multi_thread(workers, false);
        let start = rt.now();
        let (report, reports) = mpsc::channel();
        for task in 1..=8u64 {
            let report = report.clone();
            rt.handle().spawn(async move {
                wheel::sleep(secs(task)).await;
                report
                    .send((task, "sleep", Timer::current().now()))
                    .unwrap();
                tokio::task::yield_now().await;
                let timed_out = wheel::timeout(secs(2), std::future::pending::<()>()).await;
                assert!(timed_out.is_err());
                report
                    .send((task, "timeout", Timer::current().now()))
                    .unwrap();
                tokio::task::yield_now().await;
                let mut every = wheel::interval(secs(3));
                every.tick().await;
                every.tick().await;
                report
                    .send((task, "interval", Timer::current().now()))
                    .unwrap();
            });
        }
        until(|| rt.timer().stats().pending == 8);
        let mut seen = Vec::new();
        // 1..=8 s the sleeps, +2 s the timeouts, +3 s the intervals' ticks.
        for second in 1..=13 {
            rt.advance(secs(1));
            let due = (1..=8)
                .filter(|task| [*task, task + 2, task + 5].contains(&second))
                .count();
            for _ in 0..due {
                seen.push(reports.recv().unwrap());
            }
            // Every task still going has registered its next timer.
            let going = (1..=8).filter(|task| second < task + 5).count();
            until(|| rt.timer().stats().pending == going);
        }
        assert_eq!(seen.len(), 24, "{workers} workers");
        for (task, what, woke) in seen {
            let due = match what {
                "sleep" => task,
                "timeout" => task + 2,
                _ => task + 5,
            };
            assert_eq!(
                woke - start,
                secs(due),
                "{workers} workers: task {task} {what}"
            );
        }
    }
}

/// With auto-advance, an hour of sleeps, timeouts, intervals and a
/// `DelayQueue` across tasks that move between workers passes at once, and
/// every task finishes at the instant its own timers add up to.
#[test]
fn auto_advanced_every_task_finishes_at_its_own_deadlines() {
    let _guard = common::guard();
    for workers in [1, 2, 4] {
        let rt = multi_thread(workers, true);
        let start = rt.now();
        let finished = rt.block_on(async move {
            let tasks: Vec<_> = (1..=8u64)
                .map(|task| {
                    tokio::spawn(async move {
                        for _ in 0..5 {
                            wheel::sleep(secs(60 * task)).await;
                            tokio::task::yield_now().await;
                        }
                        let timed_out = wheel::timeout(secs(10), std::future::pending::<()>());
                        assert!(timed_out.await.is_err());
                        let mut queue = DelayQueue::new();
                        queue.insert(task, secs(5));
                        assert_eq!(queue.next().await.unwrap().into_inner(), task);
                        let mut every = wheel::interval(ms(500));
                        every.tick().await;
                        every.tick().await;
                        (task, Timer::current().now())
                    })
                })
                .collect();
            let mut finished = Vec::new();
            for task in tasks {
                finished.push(task.await.unwrap());
            }
            finished
        });
        for (task, at) in finished {
            let due = secs(300 * task + 15) + ms(500);
            assert_eq!(at - start, due, "{workers} workers: task {task}");
        }
        assert_eq!(rt.timer().stats().pending, 0);
    }
}

/// `block_on`'s own future waits on the test clock too, and while it is
/// busy the clock stays put; a current-thread runtime works the same way.
#[test]
fn block_on_and_a_current_thread_runtime_are_driven_too() {
    let _guard = common::guard();
    let runtimes = [
        multi_thread(2, true),
        TestClock::new()
            .auto_advance(true)
            .build(Builder::new_current_thread().enable_all())
            .unwrap(),
    ];
    for rt in runtimes {
        let start = rt.now();
        let elapsed = rt.block_on(async {
            let before = Timer::current().now();
            wheel::sleep(Duration::from_secs(3600)).await;
            Timer::current().now() - before
        });
        assert_eq!(elapsed, secs(3600));
        assert_eq!(rt.now() - start, secs(3600));
    }
}

/// Without auto-advance nothing moves the clock but the test: a task's
/// sleep stays pending however long the runtime idles, until advanced.
#[test]
fn without_auto_advance_only_the_test_moves_the_clock() {
    let _guard = common::guard();
    let rt = multi_thread(2, false);
    let task = rt.handle().spawn(async { wheel::sleep(secs(1)).await });
    until(|| rt.timer().stats().pending == 1);
    // The workers park and unpark (a task that only yields runs between
    // them): still pending.
    for _ in 0..100 {
        rt.block_on(tokio::task::yield_now());
    }
    assert!(!task.is_finished());
    assert_eq!(rt.timer().stats().pending, 1);
    rt.advance(secs(1));
    rt.block_on(task).unwrap();
}

/// Dropping the test runtime takes its timer with it: another runtime's
/// default timer is its own, and a test runtime's clock is not tokio's.
#[test]
fn the_test_clock_is_its_runtimes_alone() {
    let _guard = common::guard();
    let rt = multi_thread(1, true);
    let ours = rt.block_on(async { Timer::current() });
    assert!(ours.is_manual());
    let other = common::paused_rt();
    let theirs = other.block_on(async { Timer::current() });
    assert!(!theirs.is_manual());
    // The test clock starts where it was made and moves only as told.
    let start = rt.now();
    rt.block_on(async { wheel::sleep(secs(5)).await });
    assert_eq!(rt.now() - start, secs(5));
    assert!(
        Instant::now() - start < secs(5),
        "real time is not the test clock's"
    );
    drop(rt);
    assert!(ours.is_shut_down());
}

/// The test clock's tick is the one asked for: a sleep rounds up to it,
/// and advancing to it lands at its end.
#[test]
fn the_test_clock_has_the_tick_it_was_given() {
    let _guard = common::guard();
    let rt = TestClock::new()
        .tick(ms(10))
        .auto_advance(true)
        .build(Builder::new_multi_thread().worker_threads(1).enable_all())
        .unwrap();
    let start = rt.now();
    rt.block_on(wheel::sleep(ms(15)));
    assert_eq!(rt.now() - start, ms(20));
}

/// A test runtime shows its flavour, auto-advance and timer.
#[test]
fn a_test_runtime_is_readably_debug() {
    let rt = TestClock::new()
        .auto_advance(true)
        .build(Builder::new_current_thread().enable_all())
        .unwrap();
    let shown = format!("{rt:?}");
    for part in [
        "TestRuntime",
        "CurrentThread",
        "auto_advance: true",
        "timer",
    ] {
        assert!(shown.contains(part), "{shown}");
    }
}

/// A test runtime whose default timer is shut down keeps that timer as its
/// default: a sleep made afterwards panics that its timer has shut down,
/// as any sleep of a shut-down timer does. (A new default timer took its
/// place, on tokio's clock, which keeps real time in a test runtime: an
/// hour's sleep, auto-advance on, waited an hour of real time.)
#[test]
fn a_test_runtimes_timer_shut_down_stays_its_default() {
    let _guard = common::guard();
    let rt = TestClock::new()
        .auto_advance(true)
        .build(Builder::new_current_thread().enable_time())
        .unwrap();
    let message = common::panic_of(|| {
        rt.block_on(async {
            Timer::current().shutdown();
            let timer = Timer::current();
            assert!(timer.is_manual() && timer.is_shut_down(), "{timer:?}");
            tokio_test::task::spawn(wheel::sleep(secs(3600))).poll()
        })
    });
    assert!(message.contains("shut down"), "{message}");
}

/// A timeout made after its test runtime's timer was shut down by hand
/// counts its deadline on the test clock, which that timer answers by: an
/// hour ahead of tokio's clock, a 60 s timeout reports the shutdown, where
/// one counted on tokio's clock was already due there, and timed out at once.
#[test]
fn a_timeout_made_after_a_test_runtimes_timer_shut_down_counts_on_the_test_clock() {
    let _guard = common::guard();
    let rt = an_hour_ahead();
    let message = common::panic_of(|| {
        rt.block_on(async {
            Timer::current().shutdown();
            let timeout = wheel::timeout(secs(60), std::future::pending::<()>());
            tokio_test::task::spawn(timeout).poll()
        })
    });
    assert!(message.contains("shut down"), "{message}");
}

/// A timer the test builds inside a test runtime (`Timer::builder()`) runs
/// on tokio's clock, real time there, as the docs say: an advance of the
/// test clock moves `Timer::current()`'s time and not the built timer's.
#[test]
fn a_timer_built_inside_a_test_runtime_keeps_tokios_clock() {
    let _guard = common::guard();
    let rt = multi_thread(2, false);
    rt.advance(secs(3600));
    let (built, current) = rt.block_on(async {
        let built = Timer::builder().build().unwrap();
        (built, Timer::current())
    });
    assert!(!built.is_manual() && current.is_manual());
    assert_eq!(current.now(), rt.now());
    assert!(built.now() + secs(1800) < rt.now(), "{built:?}");
}

/// A `timeout` made on a thread that enters a test runtime counts from the
/// test clock (an hour ahead of tokio's here), whatever that thread's cache
/// held: nothing (a new thread), this runtime (its second timeout), or
/// another runtime's default timer.
#[test]
fn a_timeout_counts_on_the_test_clock_cold_warm_or_after_another_runtime() {
    let _guard = common::guard();
    let rt = an_hour_ahead();
    let handle = rt.handle().clone();
    let made = std::thread::spawn(move || {
        let other = common::paused_rt();
        let cold = {
            let _in = handle.enter();
            (
                wheel::timeout(secs(10), std::future::pending::<()>()),
                wheel::now(),
            )
        };
        let warm = {
            let _in = handle.enter();
            (
                wheel::timeout(secs(10), std::future::pending::<()>()),
                wheel::now(),
            )
        };
        other.block_on(async { wheel::sleep(ms(1)).await });
        let after_other = {
            let _in = handle.enter();
            (
                wheel::timeout(secs(10), std::future::pending::<()>()),
                wheel::now(),
            )
        };
        [cold, warm, after_other]
    })
    .join()
    .unwrap();
    let start = rt.now();
    let mut timeouts = Vec::new();
    for (timeout, made_at) in made {
        assert_eq!(made_at, start, "wheel::now() there");
        timeouts.push(tokio_test::task::spawn(timeout));
    }
    rt.block_on(async {
        for timeout in &mut timeouts {
            assert!(
                timeout.poll().is_pending(),
                "due at once: counted on tokio's clock"
            );
        }
    });
    rt.advance(secs(9));
    assert!(timeouts.iter().all(|t| !t.is_woken()));
    rt.advance(secs(1));
    rt.block_on(async {
        for timeout in &mut timeouts {
            assert!(timeout.is_woken());
            assert!(matches!(timeout.poll(), std::task::Poll::Ready(Err(_))));
        }
    });
}

/// A `timeout` made outside any runtime, first polled in a test runtime
/// whose clock is an hour ahead of tokio's, keeps the time it had left,
/// counted from then on the test clock (the docs' rule), as a `sleep` does.
#[test]
fn a_timeout_made_outside_any_runtime_keeps_its_time_left_on_the_test_clock() {
    let _guard = common::guard();
    let rt = an_hour_ahead();
    let mut timeout =
        tokio_test::task::spawn(wheel::timeout(secs(10), std::future::pending::<()>()));
    rt.block_on(async { assert!(timeout.poll().is_pending(), "due at once") });
    // Less the real time it took before its first poll: well under 5 s.
    rt.advance(secs(5));
    assert!(
        !timeout.is_woken(),
        "it lost more than the real time before its first poll"
    );
    rt.advance(secs(5));
    rt.block_on(async {
        assert!(timeout.is_woken());
        assert!(matches!(timeout.poll(), std::task::Poll::Ready(Err(_))));
    });
}
