//! `Builder::precise`: a timerfd alarm per shard. tokio's paused clock still
//! drives a precise timer exactly as any other; in real time it fires never
//! early; with nothing due it makes no wake-ups; and it says why when it
//! cannot be had.
#![cfg(target_os = "linux")]

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Waker};
use std::time::Duration;

use tokio::runtime::Runtime;
use tokio_test::{assert_pending, assert_ready, task};
use wheel::{Instant, Timer};

mod common;
use common::{
    in_a_thread_locals_destructor_after_tokios, ms, paused_rt, paused_rt_all, splitmix, within,
};

fn precise(tick: Duration) -> Timer {
    Timer::builder().tick(tick).precise().build().unwrap()
}

fn precise_with_slack(slack: Duration) -> Timer {
    let builder = Timer::builder().tick(Duration::from_micros(50)).precise();
    builder.slack(slack).build().unwrap()
}

fn real_rt(workers: usize) -> Runtime {
    if workers == 0 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .enable_all()
            .build()
            .unwrap()
    }
}

/// Sleeps on `timer` until each of `deadlines`, each in a task (made, and
/// so registered, before any is awaited); asserts that none woke early and
/// returns the latest any woke. A guard on tokio's own timer makes a
/// timerfd that never fires fail the test instead of hanging it.
async fn latest_of(timer: &Timer, deadlines: Vec<Instant>) -> Duration {
    let tasks: Vec<_> = deadlines
        .into_iter()
        .map(|deadline| {
            let sleep = timer.sleep_until(deadline);
            tokio::spawn(async move {
                sleep.await;
                let woke = Instant::now();
                assert!(woke >= deadline, "woke {:?} early", deadline - woke);
                woke - deadline
            })
        })
        .collect();
    let mut latest = Duration::ZERO;
    for task in tasks {
        let woke = tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .expect("a sleep never woke");
        latest = latest.max(woke.unwrap());
    }
    latest
}

/// A paused clock moves only when tokio moves it; the precise timer keeps
/// its tokio alarm beside the timerfd, so `advance` wakes its sleeps before
/// it returns, exactly at their (50 µs-rounded) deadlines.
#[test]
fn advance_drives_a_precise_timer_on_a_paused_clock() {
    let _guard = common::guard();
    let rt = paused_rt_all();
    rt.block_on(async {
        let timer = precise(Duration::from_micros(50));
        let start = timer.now();
        let mut sleep = task::spawn(timer.sleep_until(start + ms(10)));
        assert_pending!(sleep.poll());
        tokio::time::advance(ms(9)).await;
        assert!(!sleep.is_woken());
        tokio::time::advance(ms(1)).await;
        assert!(sleep.is_woken());
        assert_ready!(sleep.poll());
        assert_eq!(timer.now() - start, ms(10));
    });
}

/// Auto-advance: with every task waiting on a precise timer, tokio jumps
/// its paused clock to the timer's alarm, an hour in a moment. (Without
/// that alarm the clock would jump to the guard's two hours instead.)
#[test]
fn auto_advance_drives_a_precise_timer() {
    let _guard = common::guard();
    paused_rt_all().block_on(async {
        let timer = precise(Duration::from_micros(50));
        let start = Instant::now();
        let slept = tokio::time::timeout(
            Duration::from_secs(7200),
            timer.sleep(Duration::from_secs(3600)),
        )
        .await;
        assert!(slept.is_ok(), "tokio's clock never moved to the timer");
        assert_eq!(start.elapsed(), Duration::from_secs(3600));
    });
}

/// A callback already due when scheduled runs at once, on a pass the
/// precise alarm kicks onto the runtime, not when the clock next moves; and
/// the timer goes on firing after it.
#[test]
fn a_callback_due_when_scheduled_runs_and_later_timers_still_fire() {
    let _guard = common::guard();
    paused_rt_all().block_on(async {
        let _guard = common::guard();
        let timer = precise(Duration::from_micros(50));
        tokio::time::advance(ms(10)).await;
        let (ran, runs) = tokio::sync::oneshot::channel();
        timer.schedule(Duration::ZERO, move || {
            let _ = ran.send(());
        });
        let start = Instant::now();
        within("a callback due when scheduled", ms(1), runs)
            .await
            .unwrap();
        assert_eq!(Instant::now(), start, "it waited for the clock");
        within("a sleep after it", ms(2), timer.sleep(ms(1))).await;
    });
}

/// A clock paused mid-run, after the timer was built on the real clock:
/// the timerfd, on real time, fires nothing early, and `advance` still
/// drives the timer. (The timer's 50 µs grid started before the pause, off
/// the paused clock's millisecond: the deadline's tick ends up to 50 µs
/// after it, and tokio's alarm rounds that up to its next millisecond.)
#[test]
fn a_clock_paused_mid_run_still_drives_a_precise_timer() {
    let _guard = common::guard();
    real_rt(0).block_on(async {
        let timer = precise(Duration::from_micros(50));
        timer.sleep(ms(1)).await;
        tokio::time::pause();
        let start = Instant::now();
        let mut sleep = task::spawn(timer.sleep_until(start + ms(20)));
        assert_pending!(sleep.poll());
        // Real time passes; the paused clock does not: nothing fires.
        std::thread::sleep(ms(30));
        tokio::task::yield_now().await;
        assert!(!sleep.is_woken(), "woken on real time, before its deadline");
        tokio::time::advance(ms(20)).await;
        tokio::time::advance(ms(1)).await;
        assert!(sleep.is_woken());
        assert_ready!(sleep.poll());
    });
}

/// A precise timer's sleeps on a paused clock, dropped (the last of its
/// shard) and first polled by a thread-local's destructor after tokio's
/// own thread-local context is gone there. Arming the alarm (to disarm it,
/// or for the new sleep) read the clock, which entered the runtime: that
/// panicked in the destructor, and the process aborted. Run in a child
/// process, which the abort would end. Back in the runtime, the sleep
/// polled there completes on time.
#[test]
fn a_precise_timers_sleeps_dropped_and_polled_by_a_thread_locals_destructor_do_not_abort() {
    let _guard = common::guard();
    const CHILD: &str = "WHEEL_PRECISE_TLS_CHILD";
    if !common::in_a_child(CHILD, &[]) {
        return;
    }
    let rt = paused_rt_all();
    let (start, last, sleep) = rt.block_on(async {
        let timer = precise(Duration::from_micros(50));
        let mut last = task::spawn(timer.sleep(Duration::from_secs(3600)));
        assert_pending!(last.poll());
        (Instant::now(), last.into_inner(), timer.sleep(ms(10)))
    });
    let sleep = in_a_thread_locals_destructor_after_tokios(move || {
        drop(last);
        let mut sleep = sleep;
        let mut cx = Context::from_waker(Waker::noop());
        assert!(Pin::new(&mut sleep).poll(&mut cx).is_pending());
        sleep
    });
    rt.block_on(async move {
        sleep.await;
        assert_eq!(start.elapsed(), ms(10));
    });
}

/// In real time, on both flavours: 300 sleeps of 0.1-20 ms (a fixed
/// seed), none woken before its deadline, all within a generous bound.
#[test]
fn real_time_sleeps_are_never_early() {
    let _guard = common::guard();
    for workers in [0, 2] {
        let late = real_rt(workers).block_on(async {
            let timer = precise(Duration::from_micros(50));
            let mut seed = 0x9e37_79b9_u64;
            let deadlines: Vec<_> = (0..300)
                .map(|_| Instant::now() + Duration::from_micros(100 + splitmix(&mut seed) % 19_900))
                .collect();
            latest_of(&timer, deadlines).await
        });
        assert!(
            late < Duration::from_secs(2),
            "{workers} workers: {late:?} late"
        );
    }
}

/// With one sleep an hour out and nothing else, a precise timer makes no
/// wake-ups: its driver runs no pass in a second of real time.
#[test]
fn with_nothing_due_a_precise_timer_makes_no_wake_ups() {
    let _guard = common::guard();
    for workers in [0, 2] {
        real_rt(workers).block_on(async {
            let timer = precise(Duration::from_micros(50));
            let mut far = task::spawn(timer.sleep(Duration::from_secs(3600)));
            assert_pending!(far.poll());
            let before = timer.stats().passes;
            tokio::time::sleep(Duration::from_secs(1)).await;
            let stats = timer.stats();
            assert_eq!(stats.passes, before, "{workers} workers: {stats}");
            assert_eq!(stats.pending, 1);
        });
    }
}

#[test]
fn a_manual_timer_cannot_be_precise() {
    let _guard = common::guard();
    let error = Timer::builder().manual().precise().build().unwrap_err();
    assert!(error.is_precise_unsupported(), "{error}");
    assert!(error.to_string().contains("manual"), "{error}");
}

/// The timerfd is registered with the runtime's IO driver: a runtime
/// without one is refused, saying how to fix it.
#[test]
fn a_runtime_without_io_is_refused() {
    let _guard = common::guard();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let error = Timer::builder()
        .runtime(rt.handle().clone())
        .precise()
        .build()
        .unwrap_err();
    assert!(error.is_io_disabled(), "{error}");
    assert!(error.to_string().contains("enable_io"), "{error}");
    // The paused-clock helper's runtime has no IO either.
    let error = paused_rt()
        .block_on(async { Timer::builder().precise().build() })
        .unwrap_err();
    assert!(error.is_io_disabled(), "{error}");
}

/// A handle that outlived its runtime: the timerfd's registration is
/// refused because the runtime has shut down, and the error says that, as
/// it does for a timer that is not precise.
#[test]
fn building_on_a_runtime_that_has_shut_down_says_so() {
    let _guard = common::guard();
    for workers in [0, 2] {
        let rt = real_rt(workers);
        let handle = rt.handle().clone();
        drop(rt);
        let error = Timer::builder()
            .runtime(handle)
            .precise()
            .build()
            .unwrap_err();
        assert!(error.is_no_runtime(), "{workers} workers: {error}");
        assert!(
            !error.is_precise_unsupported(),
            "{workers} workers: {error}"
        );
        assert!(error.to_string().contains("shut down"), "{error}");
    }
}

/// A task that has spent its coop budget on sleeps already due, then
/// registers one that arms the `timerfd`: the arming looks at the fd
/// outside the budget. (A budget refusal there woke the alarm's waker on
/// the spot, which ran a pass and waited for the shard lock its own caller
/// held: `examples/pacing.rs` hung on a loaded machine, falling behind its
/// slots.) Run on a thread of its own, so that a deadlock fails the test.
#[test]
fn arming_with_the_coop_budget_spent_does_not_deadlock() {
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        // `block_on`'s own future: outside a worker, tokio wakes a waker
        // the budget refuses at once, rather than deferring it.
        real_rt(1).block_on(async {
            let timer = precise(Duration::from_micros(50));
            let past = Instant::now();
            // Each completes at once and spends one unit of the 128.
            for _ in 0..128 {
                timer.sleep_until(past).await;
            }
            assert!(!tokio::task::coop::has_budget_remaining());
            timer.sleep(ms(1)).await;
        });
        let _ = done.send(());
    });
    finished
        .recv_timeout(Duration::from_secs(30))
        .expect("the task hung arming the timerfd with its budget spent");
}

/// Slack: 100 sleeps due 100 µs apart share the wake-ups of a 50 ms slack.
/// After the pass that fires the first, the timerfd is armed no sooner than
/// the next multiple of the slack (in ticks), which every later one is
/// due by: a handful of passes, where one a deadline would make about 100.
/// A current-thread runtime's tokio alarm (kept for a paused clock) still
/// calls on tokio's millisecond grid: up to one more pass for each of the
/// 10 ms the deadlines span. None early, none later than the slack allows
/// (plus a generous bound).
#[test]
fn timers_within_the_slack_of_a_pass_share_its_next_wake_up() {
    let _guard = common::guard();
    let slack = Duration::from_millis(50);
    for workers in [0, 2] {
        let (passes, latest) = real_rt(workers).block_on(async {
            let timer = precise_with_slack(slack);
            let start = Instant::now();
            let deadlines = (0..100u64)
                .map(|i| start + ms(60) + Duration::from_micros(100 * i))
                .collect();
            let latest = latest_of(&timer, deadlines).await;
            (timer.stats().passes, latest)
        });
        let bound = if workers == 0 { 20 } else { 8 };
        assert!(passes <= bound, "{workers} workers: {passes} passes");
        assert!(
            latest < slack + Duration::from_secs(2),
            "{workers} workers: {latest:?} late"
        );
    }
}

/// Slack delays only what comes due soon after a pass: a lone sleep long
/// after the last pass, or before the first, fires at its own tick, not a
/// slack later. On 2 workers, where the `timerfd` is the only alarm (a
/// current-thread runtime's unspaced tokio alarm would fire it within a
/// millisecond whatever the slack).
#[test]
fn a_lone_timer_is_not_delayed_by_the_slack() {
    let _guard = common::guard();
    let slack = Duration::from_millis(200);
    let (first, lone) = real_rt(2).block_on(async {
        let timer = precise_with_slack(slack);
        let first = latest_of(&timer, vec![Instant::now() + ms(2)]).await;
        tokio::time::sleep(slack + ms(100)).await;
        let lone = latest_of(&timer, vec![Instant::now() + ms(2)]).await;
        (first, lone)
    });
    assert!(first < slack / 2, "before the first pass: {first:?} late");
    assert!(lone < slack / 2, "long after the last pass: {lone:?} late");
}

/// A clock paused mid-run, whose runtime then parks on real time (a
/// `spawn_blocking` task holds auto-advance off): the timerfd, armed within
/// a millisecond of the pause, fires on real time while the paused clock
/// has not moved. The sleep stays pending, as tokio's does, until the clock
/// reaches its deadline. (It completed there and then: the pass took the
/// fd's firing as the tick's having come.)
#[test]
fn a_paused_clock_parked_on_real_time_fires_nothing_early() {
    let _guard = common::guard();
    real_rt(0).block_on(async {
        let timer = precise(Duration::from_micros(50));
        timer.sleep(ms(1)).await;
        tokio::time::pause();
        let start = Instant::now();
        let deadline = start + Duration::from_micros(400);
        let mut sleep = task::spawn(timer.sleep_until(deadline));
        let mut tokios = task::spawn(tokio::time::sleep_until(deadline));
        assert_pending!(sleep.poll());
        assert_pending!(tokios.poll());
        tokio::task::spawn_blocking(|| std::thread::sleep(ms(3)))
            .await
            .unwrap();
        assert_eq!(Instant::now(), start, "the paused clock moved");
        assert!(!tokios.is_woken());
        assert_pending!(sleep.poll(), "completed before the paused clock moved");
        tokio::time::advance(ms(1)).await;
        assert_ready!(sleep.poll());
        assert_ready!(tokios.poll());
    });
}

/// A clock paused, a sleep registered within `REAL` of the pause (its
/// timerfd armed on real time), then resumed before the fd fires: the
/// resumed clock lags the real one by the pause. The fd's firing was taken
/// as the tick's having come, and the sleep completed that much early by
/// its clock; tokio's sleep, on the same clock, does not.
#[test]
fn a_clock_resumed_after_a_short_pause_fires_nothing_early() {
    let _guard = common::guard();
    real_rt(0).block_on(async {
        let timer = precise_with_slack(Duration::ZERO);
        timer.sleep(ms(1)).await;
        tokio::time::pause();
        let start = Instant::now();
        let deadline = start + Duration::from_micros(800);
        let mut sleep = timer.sleep_until(deadline);
        let mut tokios = Box::pin(tokio::time::sleep_until(deadline));
        std::future::poll_fn(|cx| {
            assert!(std::pin::Pin::new(&mut sleep).poll(cx).is_pending());
            assert!(tokios.as_mut().poll(cx).is_pending());
            std::task::Poll::Ready(())
        })
        .await;
        // The paused clock stands still while real time moves on.
        std::thread::sleep(Duration::from_micros(300));
        assert_eq!(Instant::now(), start, "the paused clock moved");
        tokio::time::resume();
        sleep.await;
        let woke = Instant::now();
        assert!(woke >= deadline, "woke {:?} early", deadline - woke);
        tokios.await;
    });
}
