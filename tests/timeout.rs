//! `wheel::timeout`, `timeout_at`, `Timeout` and `error::Elapsed` under tokio's paused clock.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use tokio::sync::oneshot;
use tokio::time;
use tokio_test::{assert_pending, assert_ready, assert_ready_eq, task};
use wheel::error::Elapsed;
use wheel::Instant;

mod common;
use common::{ms, paused_rt, within};

/// A future that counts its polls and is ready, with that count, once opened.
/// It arranges no wake-up of its own.
#[derive(Debug, Default)]
struct Gate {
    open: bool,
    polls: u32,
}

impl Future for Gate {
    type Output = u32;

    fn poll(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<u32> {
        self.polls += 1;
        if self.open {
            Poll::Ready(self.polls)
        } else {
            Poll::Pending
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_ready_future_wins_even_with_a_zero_duration() {
    let _guard = common::guard();
    let start = Instant::now();
    let mut zero = task::spawn(wheel::timeout(Duration::ZERO, async { 7 }));
    assert_ready_eq!(zero.poll(), Ok(7));
    let past = wheel::timeout_at(start - ms(1000), std::future::ready("late"));
    assert_eq!(past.await, Ok("late"));
    assert_eq!(Instant::now(), start);
    let stats = wheel::Timer::current().stats();
    assert_eq!((stats.pending, stats.entries, stats.fired), (0, 0, 0));
}

#[tokio::test(start_paused = true)]
async fn a_pending_future_with_a_zero_duration_times_out_at_once() {
    let _guard = common::guard();
    let start = Instant::now();
    let mut zero = task::spawn(wheel::timeout(Duration::ZERO, Gate::default()));
    assert!(assert_ready!(zero.poll()).is_err());
    assert_eq!(zero.get_ref().polls, 1, "the inner future is polled first");
    assert_eq!(Instant::now(), start);
}

#[tokio::test(start_paused = true)]
async fn finishing_before_the_deadline_returns_ok_and_leaves_nothing_pending() {
    let _guard = common::guard();
    let start = Instant::now();
    let timer = wheel::Timer::current();
    let mut t = task::spawn(wheel::timeout(ms(100), time::sleep(ms(30))));
    assert_pending!(t.poll());
    assert_eq!(timer.stats().pending, 1);
    time::advance(ms(29)).await;
    assert!(!t.is_woken());
    time::advance(ms(1)).await;
    assert!(t.is_woken());
    assert_ready_eq!(t.poll(), Ok(()));
    assert_eq!(start.elapsed(), ms(30));
    drop(t);
    let stats = timer.stats();
    assert_eq!((stats.pending, stats.entries, stats.fired), (0, 0, 0));

    // Awaited, with the inner future on the wheel too.
    let out = wheel::timeout(ms(100), async {
        wheel::sleep(ms(10)).await;
        "done"
    })
    .await;
    assert_eq!(out, Ok("done"));
    assert_eq!(start.elapsed(), ms(40));
    let stats = timer.stats();
    assert_eq!((stats.pending, stats.entries, stats.fired), (0, 0, 1));
}

#[tokio::test(start_paused = true)]
async fn a_pending_future_errs_exactly_at_the_deadline() {
    let _guard = common::guard();
    let start = Instant::now();
    let deadline = start + ms(50);
    let out = wheel::timeout(ms(50), std::future::pending::<()>()).await;
    assert!(out.is_err());
    assert_eq!(Instant::now(), deadline);
    assert_eq!(wheel::Timer::current().stats().pending, 0);
}

#[tokio::test(start_paused = true)]
async fn a_pending_future_is_woken_at_the_deadline_and_not_before() {
    let _guard = common::guard();
    let start = Instant::now();
    let mut t = task::spawn(wheel::timeout(ms(50), Gate::default()));
    assert_pending!(t.poll());
    time::advance(ms(49)).await;
    assert!(!t.is_woken());
    assert_pending!(t.poll());
    time::advance(ms(1)).await;
    assert!(t.is_woken());
    assert!(assert_ready!(t.poll()).is_err());
    assert_eq!(start.elapsed(), ms(50));
}

/// The deadline counts from when the timeout was made, as tokio's does,
/// however long before its first poll: `timeout`'s, `timeout_at`'s and an
/// explicit timer's on its manual clock.
#[tokio::test(start_paused = true)]
async fn the_deadline_counts_from_the_making_not_the_first_poll() {
    let _guard = common::guard();
    let start = Instant::now();
    let mut wheel_made = task::spawn(wheel::timeout(ms(50), Gate::default()));
    let mut wheel_at = task::spawn(wheel::timeout_at(start + ms(50), Gate::default()));
    let mut tokio_made = task::spawn(time::timeout(ms(50), Gate::default()));
    time::advance(ms(30)).await;
    assert_pending!(wheel_made.poll());
    assert_pending!(wheel_at.poll());
    assert_pending!(tokio_made.poll());
    time::advance(ms(19)).await;
    assert!(!wheel_made.is_woken() && !wheel_at.is_woken() && !tokio_made.is_woken());
    time::advance(ms(1)).await;
    assert!(wheel_made.is_woken() && wheel_at.is_woken() && tokio_made.is_woken());
    assert!(assert_ready!(wheel_made.poll()).is_err());
    assert!(assert_ready!(wheel_at.poll()).is_err());
    assert!(assert_ready!(tokio_made.poll()).is_err());
    assert_eq!(start.elapsed(), ms(50));

    let timer = wheel::Timer::builder().manual().build().unwrap();
    let mut manual = task::spawn(timer.timeout(ms(50), Gate::default()));
    timer.advance(ms(30));
    assert_pending!(manual.poll());
    timer.advance(ms(19));
    assert!(!manual.is_woken());
    timer.advance(ms(1));
    assert!(manual.is_woken());
    assert!(assert_ready!(manual.poll()).is_err());
}

/// A future made by `IntoFuture` that moves a manual clock as it is made.
struct AdvancesAsMade(wheel::Timer, Duration);

impl std::future::IntoFuture for AdvancesAsMade {
    type Output = u32;
    type IntoFuture = Gate;

    fn into_future(self) -> Gate {
        self.0.advance(self.1);
        Gate::default()
    }
}

/// An explicit timer's timeout reads its clock before it makes the future
/// (as tokio's `timeout` does): time the future's making takes counts.
#[test]
fn an_explicit_timeout_reads_the_clock_before_making_its_future() {
    let timer = wheel::Timer::builder().manual().build().unwrap();
    let made = AdvancesAsMade(timer.clone(), ms(10));
    let mut t = task::spawn(timer.timeout(ms(50), made));
    assert_pending!(t.poll());
    timer.advance(ms(39));
    assert!(!t.is_woken());
    timer.advance(ms(1));
    assert!(
        t.is_woken(),
        "due 50 ms after the clock was read, before the making"
    );
    assert!(assert_ready!(t.poll()).is_err());
}

#[tokio::test(start_paused = true)]
async fn elapsed_displays_like_tokio_and_converts_to_io_timed_out() {
    let _guard = common::guard();
    let err: Elapsed = wheel::timeout(ms(1), std::future::pending::<()>())
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "deadline has elapsed");
    let tokio_err = time::timeout(ms(1), std::future::pending::<()>())
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), tokio_err.to_string());
    let boxed: Box<dyn std::error::Error + Send + Sync> = Box::new(err);
    assert!(boxed.source().is_none());
    let io: std::io::Error = err.into();
    assert_eq!(io.kind(), std::io::ErrorKind::TimedOut);
    fn io_fn(result: Result<(), Elapsed>) -> std::io::Result<()> {
        result?;
        Ok(())
    }
    assert_eq!(
        io_fn(Err(err)).unwrap_err().kind(),
        std::io::ErrorKind::TimedOut
    );
    assert!(io_fn(Ok(())).is_ok());
}

#[tokio::test(start_paused = true)]
async fn timeout_at_uses_the_given_deadline() {
    let _guard = common::guard();
    let start = Instant::now();
    let deadline = start + ms(75);
    let out = wheel::timeout_at(deadline, std::future::pending::<()>()).await;
    assert!(out.is_err());
    assert_eq!(Instant::now(), deadline);

    let deadline = Instant::now() + ms(75);
    let out = wheel::timeout_at(deadline, async {
        wheel::sleep(ms(74)).await;
        1
    })
    .await;
    assert_eq!(out, Ok(1));
    assert_eq!(start.elapsed(), ms(149));
}

#[tokio::test(start_paused = true)]
async fn timeout_at_is_woken_by_the_inner_future() {
    let _guard = common::guard();
    let (tx, rx) = oneshot::channel();
    let mut t = task::spawn(wheel::timeout_at(Instant::now() + ms(100), rx));
    assert_pending!(t.poll());
    time::advance(ms(90)).await;
    assert!(!t.is_woken());
    assert_pending!(t.poll());
    tx.send(5).unwrap();
    assert!(t.is_woken());
    assert_ready_eq!(t.poll(), Ok(Ok(5)));
    drop(t);
    let stats = wheel::Timer::current().stats();
    assert_eq!((stats.pending, stats.cancelled), (0, 1));
}

#[tokio::test(start_paused = true)]
async fn get_ref_get_mut_and_into_inner() {
    let _guard = common::guard();
    let timer = wheel::Timer::current();
    let mut t = task::spawn(wheel::timeout(ms(100), Gate::default()));
    assert_eq!(t.get_ref().polls, 0);
    assert_pending!(t.poll());
    assert_pending!(t.poll());
    assert_eq!(t.get_ref().polls, 2);
    t.get_mut().open = true;
    assert_ready_eq!(t.poll(), Ok(3));
    drop(t);
    assert_eq!(timer.stats().cancelled, 1);

    let mut t = task::spawn(wheel::timeout(ms(100), Gate::default()));
    assert_pending!(t.poll());
    assert_eq!(timer.stats().pending, 1);
    let mut gate = t.into_inner().into_inner();
    assert_eq!(gate.polls, 1);
    let stats = timer.stats();
    assert_eq!(
        (stats.pending, stats.cancelled),
        (0, 2),
        "into_inner gave up the deadline"
    );
    gate.open = true;
    assert_eq!(gate.await, 2);
}

#[tokio::test(start_paused = true)]
async fn inner_ready_at_the_deadline_wins() {
    let _guard = common::guard();
    let start = Instant::now();
    // Both on the wheel, due at the same tick.
    let out = wheel::timeout(ms(20), wheel::sleep(ms(20))).await;
    assert_eq!(out, Ok(()));
    assert_eq!(start.elapsed(), ms(20));
    // The inner future on tokio's timer.
    let out = wheel::timeout(ms(20), time::sleep(ms(20))).await;
    assert_eq!(out, Ok(()));
    assert_eq!(start.elapsed(), ms(40));
    // Polled by hand: both have fired by the time the task is polled.
    let mut t = task::spawn(wheel::timeout_at(
        start + ms(60),
        wheel::sleep_until(start + ms(60)),
    ));
    assert_pending!(t.poll());
    time::advance(ms(20)).await;
    assert!(t.is_woken());
    assert_ready_eq!(t.poll(), Ok(()));
    // And an inner future that is ready only when polled at the deadline.
    let deadline = start + ms(80);
    let mut t = task::spawn(wheel::timeout_at(
        deadline,
        std::future::poll_fn(|_| {
            if Instant::now() >= deadline {
                Poll::Ready("inner")
            } else {
                Poll::Pending
            }
        }),
    ));
    assert_pending!(t.poll());
    time::advance(ms(20)).await;
    assert!(t.is_woken());
    assert_ready_eq!(t.poll(), Ok("inner"));
}

#[tokio::test(start_paused = true)]
async fn duration_max_does_not_panic() {
    let _guard = common::guard();
    assert_eq!(wheel::timeout(Duration::MAX, async { 3 }).await, Ok(3));
    let start = Instant::now();
    assert_eq!(
        wheel::timeout(Duration::MAX, wheel::sleep(ms(10))).await,
        Ok(())
    );
    assert_eq!(start.elapsed(), ms(10));
    let mut forever = task::spawn(wheel::timeout(Duration::MAX, Gate::default()));
    assert_pending!(forever.poll());
    time::advance(Duration::from_secs(86_400 * 365)).await;
    assert!(!forever.is_woken());
    assert_pending!(forever.poll());
    let mut at_max = task::spawn(wheel::timeout_at(
        start + Duration::from_secs(300 * 365 * 86_400),
        Gate::default(),
    ));
    assert_pending!(at_max.poll());
}

#[tokio::test(start_paused = true)]
async fn nested_timeouts_the_shorter_one_fires() {
    let _guard = common::guard();
    let start = Instant::now();
    let inner_first =
        wheel::timeout(ms(50), wheel::timeout(ms(10), std::future::pending::<()>())).await;
    assert!(matches!(inner_first, Ok(Err(_))), "{inner_first:?}");
    assert_eq!(start.elapsed(), ms(10));

    let start = Instant::now();
    let outer_first =
        wheel::timeout(ms(10), wheel::timeout(ms(50), std::future::pending::<()>())).await;
    assert!(outer_first.is_err(), "{outer_first:?}");
    assert_eq!(start.elapsed(), ms(10));

    let start = Instant::now();
    let neither = wheel::timeout(ms(30), wheel::timeout(ms(20), wheel::sleep(ms(10)))).await;
    assert_eq!(neither, Ok(Ok(())));
    assert_eq!(start.elapsed(), ms(10));
    assert_eq!(wheel::Timer::current().stats().pending, 0);
}

#[tokio::test(start_paused = true)]
async fn explicit_timer_timeouts_round_up_to_its_tick() {
    let _guard = common::guard();
    let origin = Instant::now();
    let timer = wheel::Timer::builder().tick(ms(10)).build().unwrap();
    let mut t = task::spawn(timer.timeout(ms(25), Gate::default()));
    assert_pending!(t.poll());
    assert_eq!(timer.stats().pending, 1);
    time::advance(ms(29)).await;
    assert!(!t.is_woken(), "a 25 ms timeout fired before the 30 ms tick");
    time::advance(ms(1)).await;
    assert!(t.is_woken());
    assert!(assert_ready!(t.poll()).is_err());
    assert_eq!(origin.elapsed(), ms(30));

    let ok = timer.timeout(ms(100), async { "fast" }).await;
    assert_eq!(ok, Ok("fast"));

    let deadline = Instant::now() + ms(40);
    let out = timer
        .timeout_at(deadline, std::future::pending::<()>())
        .await;
    assert!(out.is_err());
    assert_eq!(Instant::now(), deadline);

    drop(t);
    let stats = timer.stats();
    assert_eq!((stats.pending, stats.entries, stats.fired), (0, 0, 2));
    assert_eq!(
        wheel::Timer::current().stats().fired,
        0,
        "the default timer was not used"
    );
}

#[tokio::test(start_paused = true)]
async fn dropping_a_pending_timeout_cancels_its_entry() {
    let _guard = common::guard();
    let timer = wheel::Timer::current();
    let mut t = task::spawn(wheel::timeout(ms(100), Gate::default()));
    assert_pending!(t.poll());
    assert_eq!(timer.stats().pending, 1);
    drop(t);
    let stats = timer.stats();
    assert_eq!((stats.pending, stats.entries, stats.cancelled), (0, 0, 1));

    let explicit = wheel::Timer::builder().build().unwrap();
    let mut many: Vec<_> = (1..=500)
        .map(|i| task::spawn(explicit.timeout(ms(i), Gate::default())))
        .collect();
    for t in &mut many {
        assert_pending!(t.poll());
    }
    assert_eq!(explicit.stats().pending, 500);
    drop(many);
    let stats = explicit.stats();
    assert_eq!(
        (stats.pending, stats.entries, stats.cancelled, stats.fired),
        (0, 0, 500, 0)
    );
}

#[tokio::test(start_paused = true)]
async fn an_unpolled_timeout_registers_nothing() {
    let _guard = common::guard();
    let timer = wheel::Timer::current();
    let t = wheel::timeout(ms(100), Gate::default());
    assert_eq!(timer.stats().entries, 0);
    drop(t);
    assert_eq!(timer.stats().cancelled, 0);
}

#[tokio::test(start_paused = true)]
async fn many_concurrent_timeouts_half_complete_half_time_out() {
    let _guard = common::guard();
    let start = Instant::now();
    let mut handles = Vec::new();
    for i in 0..200u64 {
        handles.push(tokio::spawn(async move {
            // Even tasks finish 1 ms before their deadline, odd ones 1 ms after.
            let deadline = ms(10 + i);
            let work = if i % 2 == 0 {
                deadline - ms(1)
            } else {
                deadline + ms(1)
            };
            let out = wheel::timeout(deadline, wheel::sleep(work)).await;
            (i, out, start.elapsed())
        }));
    }
    let (mut ok, mut timed_out) = (0, 0);
    for handle in handles {
        let (i, out, at) = handle.await.unwrap();
        match out {
            Ok(()) => {
                assert_eq!(i % 2, 0, "task {i} should have timed out");
                assert_eq!(at, ms(9 + i));
                ok += 1;
            }
            Err(_) => {
                assert_eq!(i % 2, 1, "task {i} should have completed");
                assert_eq!(at, ms(10 + i));
                timed_out += 1;
            }
        }
    }
    assert_eq!((ok, timed_out), (100, 100));
    let stats = wheel::Timer::current().stats();
    assert_eq!((stats.pending, stats.entries), (0, 0));
    assert_eq!(stats.fired, 200);
    assert_eq!(stats.cancelled, 200);
}

proptest! {
    #![proptest_config(ProptestConfig {
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "proptest-regressions/tests/timeout.txt"
        ))),
        ..ProptestConfig::default()
    })]

    /// `tokio::time::timeout` is the oracle: for any deadline and any time
    /// the inner future takes (whole milliseconds, where tokio's timer is
    /// exact), both give the same outcome at the same instant.
    #[test]
    fn matches_tokio_timeout(deadline in 0..300u64, work in 0..300u64, inner_on_wheel: bool) {
        let rt = paused_rt();
        rt.block_on(async move {
            let start = Instant::now();
            let inner = || async move {
                if inner_on_wheel {
                    wheel::sleep(ms(work)).await;
                } else {
                    time::sleep(ms(work)).await;
                }
                work
            };
            let (ours, theirs) = tokio::join!(
                async { (wheel::timeout(ms(deadline), inner()).await.ok(), start.elapsed()) },
                async { (time::timeout(ms(deadline), inner()).await.ok(), start.elapsed()) },
            );
            assert_eq!(ours, theirs, "deadline {deadline} ms, work {work} ms");
            let want = if work <= deadline { Some(work) } else { None };
            assert_eq!(ours, (want, ms(work.min(deadline))));
            assert_eq!(wheel::Timer::current().stats().pending, 0);
        });
    }
}

/// A future that keeps the task's budget spent and never completes still
/// times out: once the inner future has spent the last unit, the delay is
/// looked at without one, as tokio's `Timeout` does.
#[tokio::test(start_paused = true)]
async fn a_future_that_spends_the_whole_budget_still_times_out() {
    let _guard = common::guard();
    let past = Instant::now();
    wheel::sleep(ms(1)).await;
    let mut polls = 0;
    let busy = std::future::poll_fn(|cx| {
        polls += 1;
        assert!(polls < 10, "polled {polls} times and never timed out");
        loop {
            let coop = std::task::ready!(tokio::task::coop::poll_proceed(cx));
            coop.made_progress();
        }
    });
    let out: Result<(), Elapsed> = wheel::timeout_at(past, busy).await;
    assert!(out.is_err());
}

/// A loop over timeouts that elapse at once spends tokio's budget through
/// their delays, as tokio's `Timeout` does, so it yields to the runtime's
/// other tasks. (The delay goes unbudgeted only when the inner future spent
/// the last unit, which `pending` never does.)
#[tokio::test(start_paused = true)]
async fn a_loop_of_elapsed_timeouts_lets_other_tasks_run() {
    let _guard = common::guard();
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    let _guard = common::guard();
    let past = Instant::now();
    within("a 1 ms sleep", ms(2), wheel::sleep(ms(1))).await;
    let ran = Arc::new(AtomicBool::new(false));
    let flag = ran.clone();
    tokio::spawn(async move { flag.store(true, Ordering::SeqCst) });
    let mut timeouts = 0;
    while !ran.load(Ordering::SeqCst) {
        let out = wheel::timeout_at(past, std::future::pending::<()>()).await;
        assert!(out.is_err());
        timeouts += 1;
        assert!(timeouts <= 1000, "{timeouts} elapsed timeouts and no yield");
    }
}

/// A deadline more than 292 years out (past what a `Sleep` keeps in 64
/// bits) is still a deadline: the timeout registers, and expires when the
/// clock gets there. Only a deadline that overflows means none.
#[tokio::test(start_paused = true)]
async fn a_timeout_three_centuries_out_registers_and_expires() {
    let _guard = common::guard();
    let far = Duration::from_secs(300 * 365 * 86_400);
    let start = Instant::now();
    let mut timeout = task::spawn(wheel::timeout(far, std::future::pending::<()>()));
    assert_pending!(timeout.poll());
    assert_eq!(wheel::Timer::current().stats().pending, 1, "not registered");
    let out = within("a timeout 300 years out", far + ms(1), timeout).await;
    assert!(out.is_err());
    assert!(Instant::now() >= start + far);
}

/// `tokio::time::timeout_at` as the oracle below a millisecond, where
/// tokio rounds up to its millisecond and the wheel's default tick is
/// finer: the inner future a sleep (on the wheel or on tokio) ready at,
/// just before or just after the deadline, or at a deadline in the past.
#[test]
fn sub_millisecond_deadlines_and_inner_futures_match_tokio_timeout_at() {
    let _guard = common::guard();
    let offsets: [i64; 11] = [-1_500, -1, 0, 1, 124, 125, 126, 999, 1_000, 1_001, 2_400];
    for &deadline in &offsets {
        for &work in &offsets {
            for inner_on_wheel in [false, true] {
                for base in [0u64, 1, 500, 999] {
                    let rt = common::paused_unguarded();
                    rt.block_on(async move {
                        time::advance(Duration::from_micros(base + 2_000)).await;
                        let start = Instant::now();
                        let at = |us: i64| {
                            if us >= 0 {
                                start + Duration::from_micros(us as u64)
                            } else {
                                start - Duration::from_micros(us.unsigned_abs())
                            }
                        };
                        let inner = move || async move {
                            if inner_on_wheel {
                                wheel::sleep_until(at(work)).await;
                            } else {
                                time::sleep_until(at(work)).await;
                            }
                        };
                        let (ours, theirs) = tokio::join!(
                            async {
                                let out = wheel::timeout_at(at(deadline), inner()).await;
                                (out.is_ok(), Instant::now() - start)
                            },
                            async {
                                let out = time::timeout_at(at(deadline), inner()).await;
                                (out.is_ok(), Instant::now() - start)
                            },
                        );
                        assert_eq!(
                            ours, theirs,
                            "base {base} µs, deadline {deadline} µs, work {work} µs, \
                             inner on the wheel: {inner_on_wheel}"
                        );
                    });
                }
            }
        }
    }
}

/// A timeout's `Debug` shows the deadline it will wait for, before its
/// first wait as after it (its delay's placeholder, a deadline ~74,800
/// years out, is not what it waits for): `timeout`'s, `timeout_at`'s, and
/// an explicit manual timer's.
#[tokio::test(start_paused = true)]
async fn debug_shows_the_deadline_before_the_first_wait() {
    let _guard = common::guard();
    let deadline = Instant::now() + ms(50);
    let timer = wheel::Timer::builder().manual().build().unwrap();
    let on_timer = timer.now() + ms(50);
    let made = wheel::timeout(ms(50), std::future::pending::<()>());
    let at = wheel::timeout_at(deadline, std::future::pending::<()>());
    let explicit = timer.timeout(ms(50), std::future::pending::<()>());
    let shows = |debug: String, deadline: Instant| {
        let want = format!("deadline: {deadline:?}");
        assert!(debug.contains(&want), "{debug} lacks {want}");
    };
    shows(format!("{made:?}"), deadline);
    shows(format!("{at:?}"), deadline);
    shows(format!("{explicit:?}"), on_timer);
    // After the first wait, the same.
    let mut made = Box::pin(made);
    assert!(common::poll_once(&mut made).is_pending());
    shows(format!("{made:?}"), deadline);
}

/// Durations and deadlines at the ends of the range, first polled late: a
/// deadline past the 72-bit range (but inside `Instant`'s) never fires and
/// never panics, one far before the process's clock base (clamped) is due
/// at once, as tokio's; a timeout first polled after its deadline is due at
/// once, for `timeout`, `timeout_at` and an explicit timer.
#[tokio::test(start_paused = true)]
async fn extreme_deadlines_first_polled_late() {
    let _guard = common::guard();
    let start = Instant::now();
    let year = Duration::from_secs(365 * 86_400);
    let mut beyond = task::spawn(wheel::timeout(
        Duration::from_secs(u64::MAX / 4),
        Gate::default(),
    ));
    let mut beyond_at = task::spawn(wheel::timeout_at(start + year * 100_000, Gate::default()));
    let mut long_ago = task::spawn(wheel::timeout_at(start - year * 100_000, Gate::default()));
    let mut tokio_long_ago = task::spawn(time::timeout_at(start - year * 100_000, Gate::default()));
    let mut late = task::spawn(wheel::timeout(ms(10), Gate::default()));
    let mut late_at = task::spawn(wheel::timeout_at(start + ms(10), Gate::default()));
    let mut tokio_late = task::spawn(time::timeout(ms(10), Gate::default()));
    let timer = wheel::Timer::builder().tick(ms(4)).build().unwrap();
    let mut late_explicit = task::spawn(timer.timeout(ms(10), Gate::default()));
    time::advance(ms(11)).await;
    assert!(assert_ready!(long_ago.poll()).is_err());
    assert!(assert_ready!(tokio_long_ago.poll()).is_err());
    assert!(assert_ready!(late.poll()).is_err());
    assert!(assert_ready!(late_at.poll()).is_err());
    assert!(assert_ready!(tokio_late.poll()).is_err());
    // The 4 ms tick rounds 10 ms up to 12: not yet due, due at 12.
    assert_pending!(late_explicit.poll());
    time::advance(ms(1)).await;
    assert!(late_explicit.is_woken());
    assert!(assert_ready!(late_explicit.poll()).is_err());
    assert_pending!(beyond.poll());
    assert_pending!(beyond_at.poll());
    time::advance(year).await;
    assert!(!beyond.is_woken() && !beyond_at.is_woken());
    assert_pending!(beyond.poll());
    assert_pending!(beyond_at.poll());
    assert_eq!(wheel::Timer::current().stats().pending, 0);
}
