//! When an `Interval`'s ticks fall: each `MissedTickBehavior` after a
//! stall, ticks on a coarse timer. Under tokio's paused clock. (Random
//! programs against `tokio::time::Interval`, the oracle, are in
//! `parity_programs.rs`.)

use std::time::Duration;

use tokio::time;
use tokio_test::{assert_pending, assert_ready, assert_ready_eq, task};
use wheel::{Instant, Interval, MissedTickBehavior};

mod common;
use common::{expect_ticks, ms, poll_tick};

/// An interval on the current runtime's default timer, polled by hand, with
/// the given missed tick behaviour.
fn spawn_interval(
    start: Instant,
    period: Duration,
    behavior: MissedTickBehavior,
) -> task::Spawn<Interval> {
    let mut interval = wheel::interval_at(start, period);
    interval.set_missed_tick_behavior(behavior);
    task::spawn(interval)
}

// The table in `MissedTickBehavior`'s docs: ticks every 100 ms from 0, the
// tick due at 100 ms only taken at 350 ms.

#[tokio::test(start_paused = true)]
async fn burst_fires_missed_ticks_at_once_then_keeps_the_schedule() {
    let _guard = common::guard();
    let start = Instant::now();
    let mut every = spawn_interval(start, ms(100), MissedTickBehavior::Burst);
    expect_ticks(&mut every, start, &[0]);
    time::advance(ms(350)).await;
    expect_ticks(&mut every, start, &[100, 200, 300]);
    time::advance(ms(49)).await;
    expect_ticks(&mut every, start, &[]);
    time::advance(ms(1)).await;
    expect_ticks(&mut every, start, &[400]);
    time::advance(ms(100)).await;
    expect_ticks(&mut every, start, &[500]);
}

#[tokio::test(start_paused = true)]
async fn delay_restarts_the_schedule_from_the_late_tick() {
    let _guard = common::guard();
    let start = Instant::now();
    let mut every = spawn_interval(start, ms(100), MissedTickBehavior::Delay);
    expect_ticks(&mut every, start, &[0]);
    time::advance(ms(350)).await;
    expect_ticks(&mut every, start, &[100]);
    time::advance(ms(99)).await;
    expect_ticks(&mut every, start, &[]);
    time::advance(ms(1)).await;
    expect_ticks(&mut every, start, &[450]);
    time::advance(ms(100)).await;
    expect_ticks(&mut every, start, &[550]);
}

#[tokio::test(start_paused = true)]
async fn skip_drops_missed_ticks_and_keeps_the_phase() {
    let _guard = common::guard();
    let start = Instant::now();
    let mut every = spawn_interval(start, ms(100), MissedTickBehavior::Skip);
    expect_ticks(&mut every, start, &[0]);
    time::advance(ms(350)).await;
    expect_ticks(&mut every, start, &[100]);
    time::advance(ms(49)).await;
    expect_ticks(&mut every, start, &[]);
    time::advance(ms(1)).await;
    expect_ticks(&mut every, start, &[400]);
    time::advance(ms(100)).await;
    expect_ticks(&mut every, start, &[500]);
}

#[tokio::test(start_paused = true)]
async fn skip_when_exactly_whole_periods_late_waits_a_full_period() {
    let _guard = common::guard();
    // As in tokio: `now + (period - 0)`, so the tick due right now is skipped.
    let start = Instant::now();
    let mut every = spawn_interval(start, ms(100), MissedTickBehavior::Skip);
    expect_ticks(&mut every, start, &[0]);
    time::advance(ms(300)).await;
    expect_ticks(&mut every, start, &[100]);
    time::advance(ms(99)).await;
    expect_ticks(&mut every, start, &[]);
    time::advance(ms(1)).await;
    expect_ticks(&mut every, start, &[400]);
}

// tokio's own scenario (tests/time_interval.rs): period 300 ms, a stall
// from 300 to 950 ms. Without tokio's 1 ms granularity offset: the wheel
// fires exactly on time.

#[tokio::test(start_paused = true)]
async fn each_behavior_after_a_stall_of_several_periods() {
    let _guard = common::guard();
    let cases: [(MissedTickBehavior, &[u64], [u64; 3]); 3] = [
        (MissedTickBehavior::Burst, &[600, 900], [1200, 1500, 1800]),
        (MissedTickBehavior::Delay, &[600], [1250, 1550, 1850]),
        (MissedTickBehavior::Skip, &[600], [1200, 1500, 1800]),
    ];
    for (behavior, after_stall, then) in cases {
        let start = Instant::now();
        let mut every = spawn_interval(start, ms(300), behavior);
        expect_ticks(&mut every, start, &[0]);
        time::advance(ms(100)).await;
        expect_ticks(&mut every, start, &[]);
        time::advance(ms(200)).await;
        expect_ticks(&mut every, start, &[300]);
        time::advance(ms(650)).await;
        expect_ticks(&mut every, start, after_stall);
        let mut now = 950;
        for due in then {
            time::advance(ms(due - 1 - now)).await;
            assert!(!every.is_woken(), "{behavior:?}: woken before {due} ms");
            expect_ticks(&mut every, start, &[]);
            time::advance(ms(1)).await;
            assert!(every.is_woken(), "{behavior:?}: not woken at {due} ms");
            expect_ticks(&mut every, start, &[due]);
            now = due;
        }
    }
}

#[tokio::test(start_paused = true)]
async fn ticks_up_to_5ms_late_are_not_missed() {
    let _guard = common::guard();
    // tokio's threshold: a tick taken at most 5 ms late keeps the schedule,
    // even with `Delay`; one taken later restarts it.
    let start = Instant::now();
    let mut every = spawn_interval(start, ms(100), MissedTickBehavior::Delay);
    expect_ticks(&mut every, start, &[0]);
    time::advance(ms(105)).await;
    expect_ticks(&mut every, start, &[100]);
    time::advance(ms(95)).await;
    expect_ticks(&mut every, start, &[200]);
    time::advance(ms(106)).await;
    expect_ticks(&mut every, start, &[300]);
    time::advance(ms(99)).await;
    expect_ticks(&mut every, start, &[]);
    time::advance(ms(1)).await;
    expect_ticks(&mut every, start, &[406]);
}

#[tokio::test(start_paused = true)]
async fn delay_does_not_drift_on_a_coarse_tick() {
    let _guard = common::guard();
    // A 10 ms tick makes every deadline up to 10 ms late by design; that is
    // not a missed tick, so `Delay` must keep the 23 ms schedule.
    let timer = wheel::Timer::builder().tick(ms(10)).build().unwrap();
    let start = Instant::now();
    let mut every = timer.interval(ms(23));
    every.set_missed_tick_behavior(MissedTickBehavior::Delay);
    for k in 0..6u32 {
        assert_eq!(every.tick().await, start + ms(23) * k);
    }
}

#[tokio::test(start_paused = true)]
async fn delay_does_not_drift_on_a_coarse_tick_off_tokios_millisecond_grid() {
    let _guard = common::guard();
    // Built half a millisecond into tokio's grid, as any timer built under
    // the real clock is: its ticks then come up to a tick plus tokio's
    // rounding to its millisecond late, by design, which is not a miss.
    time::advance(Duration::from_micros(500)).await;
    let timer = wheel::Timer::builder().tick(ms(10)).build().unwrap();
    let start = Instant::now();
    let period = ms(10) + Duration::from_micros(100);
    let mut every = timer.interval(period);
    every.set_missed_tick_behavior(MissedTickBehavior::Delay);
    for k in 0..6u32 {
        assert_eq!(every.tick().await, start + period * k, "tick {k}");
    }
}

#[tokio::test(start_paused = true)]
async fn delay_does_not_drift_on_a_tick_that_does_not_nest_in_tokios_milliseconds() {
    let _guard = common::guard();
    // A 4.5 ms tick ends every other tick mid-millisecond: its alarm, a
    // tokio timer, rounds that up half a millisecond more; and the paused
    // clock, 0.9 ms off tokio's grid, auto-advances by whole milliseconds,
    // so it lands 0.9 ms past the alarm. The tick due at 9 ms + 1 ns is
    // taken at 14.9 ms: 5.9 ms late by design, more than the tick plus a
    // millisecond (5.5 ms), which `Delay` took for a miss (the next tick
    // came at 24.9 ms, not 19 ms + 1 ns).
    let t0 = Instant::now();
    time::advance(Duration::from_micros(900)).await;
    let timer = wheel::Timer::builder()
        .tick(Duration::from_micros(4_500))
        .build()
        .unwrap();
    let start = t0 + ms(9) + Duration::from_nanos(1);
    let mut every = timer.interval_at(start, ms(10));
    every.set_missed_tick_behavior(MissedTickBehavior::Delay);
    for k in 0..6u32 {
        assert_eq!(every.tick().await, start + ms(10) * k, "tick {k}");
    }
}

#[tokio::test(start_paused = true)]
async fn the_first_tick_is_at_once_even_between_a_coarse_timers_ticks() {
    let _guard = common::guard();
    let timer = wheel::Timer::builder().tick(ms(10)).build().unwrap();
    time::advance(ms(3)).await;
    let start = Instant::now();
    let mut every = task::spawn(timer.interval(ms(100)));
    assert_ready_eq!(poll_tick(&mut every), start);
    assert_pending!(poll_tick(&mut every));
    // The default timer's is tokio's: at 3.06 ms, between two of tokio's
    // milliseconds, it waits for the next one, as tokio's does.
    time::advance(Duration::from_micros(60)).await;
    let start = Instant::now();
    let mut every = task::spawn(wheel::interval(ms(100)));
    let mut tokios = task::spawn(async {
        let mut every = time::interval(ms(100));
        every.tick().await
    });
    assert_pending!(poll_tick(&mut every));
    assert_pending!(tokios.poll());
    time::advance(Duration::from_micros(940)).await;
    assert_ready_eq!(tokios.poll(), start);
    assert_ready_eq!(poll_tick(&mut every), start);
}

/// Between two of tokio's milliseconds on a paused clock (where a clock
/// moved by a fraction of one stays: auto-advance moves it by whole ones),
/// a coarse timer's `interval` made its first tick a sleep until now, due
/// at the end of the tick that rounds up to: at 20.06 ms for one made at
/// 10.06 ms on a 10 ms tick, where tokio's ticks by 11 ms. It ticks at
/// once, as a reset into the past does on such a timer; a start still
/// ahead is not early.
#[tokio::test(start_paused = true)]
async fn the_first_tick_is_at_once_on_a_coarse_timer_between_tokios_milliseconds() {
    let _guard = common::guard();
    let timer = wheel::Timer::builder().tick(ms(10)).build().unwrap();
    time::advance(Duration::from_micros(10_060)).await;
    let now = timer.now();
    let just_before = now - Duration::from_micros(10);
    let mut every = task::spawn(timer.interval(ms(100)));
    let mut from_before = task::spawn(timer.interval_at(just_before, ms(100)));
    assert_ready_eq!(poll_tick(&mut every), now);
    assert_ready_eq!(poll_tick(&mut from_before), just_before);
    let ahead = now + Duration::from_micros(1);
    let mut ahead = task::spawn(timer.interval_at(ahead, ms(100)));
    assert_pending!(poll_tick(&mut ahead));
}

/// Found by review: on a coarse timer a reset to a passed deadline waited
/// for the end of the tick it rounds up to, so `reset_immediately` was not
/// immediate (93 ms late here), though `Interval::reset_immediately`
/// promises it and a manual timer's was. A task already waiting on the tick
/// is woken.
#[tokio::test(start_paused = true)]
async fn reset_immediately_is_immediate_on_a_coarse_timer() {
    let _guard = common::guard();
    let timer = wheel::Timer::builder().tick(ms(100)).build().unwrap();
    time::advance(ms(7)).await;
    let mut every = task::spawn(timer.interval(Duration::from_secs(60)));
    assert_ready!(poll_tick(&mut every));
    assert_pending!(poll_tick(&mut every));
    every.reset_immediately();
    assert!(every.is_woken(), "the waiting task is told");
    assert_ready_eq!(poll_tick(&mut every), timer.now());
    // And the period counts from there.
    time::advance(Duration::from_secs(60) - ms(1)).await;
    assert_pending!(poll_tick(&mut every));
    time::advance(ms(101)).await;
    assert_ready!(poll_tick(&mut every));
    // Likewise a `reset_at` into the past, and a `reset_after(0)`.
    every.reset_at(timer.now() - ms(3));
    assert_ready!(poll_tick(&mut every));
    every.reset_after(Duration::ZERO);
    assert_ready!(poll_tick(&mut every));
}

/// tokio documents `interval(p)` as `interval_at(Instant::now(), p)`; on a
/// coarse timer the second waited for the end of the tick (review).
#[tokio::test(start_paused = true)]
async fn interval_at_a_passed_start_ticks_at_once_like_interval() {
    let _guard = common::guard();
    let timer = wheel::Timer::builder().tick(ms(100)).build().unwrap();
    time::advance(ms(7)).await;
    let now = timer.now();
    let mut from_interval = task::spawn(timer.interval(Duration::from_secs(60)));
    let mut from_now = task::spawn(timer.interval_at(now, Duration::from_secs(60)));
    let mut from_before = task::spawn(timer.interval_at(now - ms(5), Duration::from_secs(60)));
    assert_ready_eq!(poll_tick(&mut from_interval), now);
    assert_ready_eq!(poll_tick(&mut from_now), now);
    assert_ready_eq!(poll_tick(&mut from_before), now - ms(5));
    // A start still ahead is not early.
    let mut ahead = task::spawn(timer.interval_at(now + ms(1), Duration::from_secs(60)));
    assert_pending!(poll_tick(&mut ahead));
}
