//! `wheel::interval`, `interval_at` and `Interval` under tokio's paused
//! clock, against `tokio::time::Interval`'s semantics: ticks, resets,
//! wakers, streams, explicit timers. When ticks fall after a stall and on
//! a coarse timer is in `interval_schedule.rs`; random programs against
//! tokio's `Interval` as an oracle are in `parity_programs.rs`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::task::{waker, ArcWake};
use futures::{Stream, StreamExt};
use tokio::time;
use tokio_test::{assert_pending, assert_ready, assert_ready_eq, task};
use wheel::{Instant, MissedTickBehavior};

mod common;
use common::{expect_ticks, ms, poll_tick};

#[tokio::test(start_paused = true)]
async fn first_tick_completes_immediately() {
    let _guard = common::guard();
    let start = Instant::now();
    let mut every = task::spawn(wheel::interval(Duration::from_secs(3600)));
    assert_ready_eq!(poll_tick(&mut every), start);
    assert_eq!(Instant::now(), start);
    assert_pending!(poll_tick(&mut every));
}

#[tokio::test(start_paused = true)]
async fn ticks_are_one_period_apart() {
    let _guard = common::guard();
    let start = Instant::now();
    let mut every = wheel::interval(ms(30));
    for k in 0..10 {
        let at = every.tick().await;
        assert_eq!(at, start + ms(30 * k));
        assert_eq!(Instant::now(), at, "tick {k} completed late or early");
    }
}

#[tokio::test(start_paused = true)]
async fn ticks_stay_exact_across_wheel_levels() {
    let _guard = common::guard();
    // 64 slots per level with a 125 µs tick: these periods land in levels 0
    // to 3.
    for period in [1, 7, 64, 1_000, 65_536, 300_000] {
        let start = Instant::now();
        let mut every = wheel::interval(ms(period));
        for k in 0..40 {
            let at = every.tick().await;
            assert_eq!(at, start + ms(period * k), "period {period} ms, tick {k}");
            assert_eq!(Instant::now(), at, "period {period} ms, tick {k}");
        }
    }
    assert_eq!(wheel::Timer::current().stats().pending, 0);
}

#[tokio::test(start_paused = true)]
async fn tick_is_woken_exactly_at_the_period() {
    let _guard = common::guard();
    let start = Instant::now();
    let mut every = task::spawn(wheel::interval(ms(10)));
    assert_ready_eq!(poll_tick(&mut every), start);
    assert_pending!(poll_tick(&mut every));
    time::advance(ms(9)).await;
    assert!(!every.is_woken());
    assert_pending!(poll_tick(&mut every));
    time::advance(ms(1)).await;
    assert!(every.is_woken());
    assert_ready_eq!(poll_tick(&mut every), start + ms(10));
}

#[tokio::test(start_paused = true)]
async fn interval_at_a_future_start() {
    let _guard = common::guard();
    let start = Instant::now() + ms(50);
    let mut every = task::spawn(wheel::interval_at(start, ms(20)));
    assert_pending!(poll_tick(&mut every));
    time::advance(ms(49)).await;
    assert!(!every.is_woken());
    assert_pending!(poll_tick(&mut every));
    time::advance(ms(1)).await;
    assert!(every.is_woken());
    expect_ticks(&mut every, start, &[0]);
    time::advance(ms(20)).await;
    assert!(every.is_woken());
    expect_ticks(&mut every, start, &[20]);
    time::advance(ms(20)).await;
    expect_ticks(&mut every, start, &[40]);
}

#[tokio::test(start_paused = true)]
async fn interval_at_a_past_start_bursts_to_catch_up() {
    let _guard = common::guard();
    let now = Instant::now();
    let start = now - ms(250);
    let mut every = task::spawn(wheel::interval_at(start, ms(100)));
    // Due at -250, -150, -50 ms: all at once; the next at +50 ms.
    expect_ticks(&mut every, start, &[0, 100, 200]);
    time::advance(ms(50)).await;
    assert!(every.is_woken());
    expect_ticks(&mut every, start, &[300]);
}

#[tokio::test(start_paused = true)]
async fn reset_restarts_the_schedule_from_now() {
    let _guard = common::guard();
    let start = Instant::now();
    let mut every = task::spawn(wheel::interval_at(start, ms(300)));
    expect_ticks(&mut every, start, &[0]);
    time::advance(ms(300)).await;
    expect_ticks(&mut every, start, &[300]);
    time::advance(ms(100)).await;
    expect_ticks(&mut every, start, &[]);
    every.reset();
    // The old deadline (600 ms) must not fire.
    time::advance(ms(200)).await;
    assert!(!every.is_woken());
    expect_ticks(&mut every, start, &[]);
    time::advance(ms(99)).await;
    expect_ticks(&mut every, start, &[]);
    time::advance(ms(1)).await;
    assert!(every.is_woken(), "reset kept the waker");
    expect_ticks(&mut every, start, &[700]);
    time::advance(ms(300)).await;
    expect_ticks(&mut every, start, &[1000]);
}

#[tokio::test(start_paused = true)]
async fn reset_immediately_ticks_now() {
    let _guard = common::guard();
    let start = Instant::now();
    let mut every = task::spawn(wheel::interval_at(start, ms(300)));
    expect_ticks(&mut every, start, &[0]);
    time::advance(ms(300)).await;
    expect_ticks(&mut every, start, &[300]);
    time::advance(ms(100)).await;
    expect_ticks(&mut every, start, &[]);
    every.reset_immediately();
    assert!(
        every.is_woken(),
        "a registered tick reset to now wakes its task"
    );
    expect_ticks(&mut every, start, &[400]);
    time::advance(ms(299)).await;
    expect_ticks(&mut every, start, &[]);
    time::advance(ms(1)).await;
    expect_ticks(&mut every, start, &[700]);
}

#[tokio::test(start_paused = true)]
async fn reset_immediately_after_a_tick_without_polling() {
    let _guard = common::guard();
    let start = Instant::now();
    let mut every = task::spawn(wheel::interval_at(start, ms(300)));
    expect_ticks(&mut every, start, &[0]);
    time::advance(ms(300)).await;
    assert_ready_eq!(poll_tick(&mut every), start + ms(300));
    time::advance(ms(10)).await;
    // Not registered since the tick: the reset applies on the next poll.
    every.reset_immediately();
    expect_ticks(&mut every, start, &[310]);
    time::advance(ms(300)).await;
    expect_ticks(&mut every, start, &[610]);
}

#[tokio::test(start_paused = true)]
async fn reset_after_moves_the_next_tick() {
    let _guard = common::guard();
    let start = Instant::now();
    let mut every = task::spawn(wheel::interval_at(start, ms(300)));
    expect_ticks(&mut every, start, &[0]);
    time::advance(ms(300)).await;
    expect_ticks(&mut every, start, &[300]);
    time::advance(ms(100)).await;
    expect_ticks(&mut every, start, &[]);
    every.reset_after(ms(20));
    time::advance(ms(19)).await;
    assert!(!every.is_woken());
    expect_ticks(&mut every, start, &[]);
    time::advance(ms(1)).await;
    assert!(every.is_woken());
    expect_ticks(&mut every, start, &[420]);
    time::advance(ms(300)).await;
    expect_ticks(&mut every, start, &[720]);
}

#[tokio::test(start_paused = true)]
async fn reset_after_duration_max_does_not_panic() {
    let _guard = common::guard();
    let mut every = task::spawn(wheel::interval(ms(1)));
    assert_ready!(poll_tick(&mut every));
    every.reset_after(Duration::MAX);
    assert_pending!(poll_tick(&mut every));
    time::advance(Duration::from_secs(86_400 * 365)).await;
    assert!(!every.is_woken());
    assert_pending!(poll_tick(&mut every));
}

#[tokio::test(start_paused = true)]
async fn reset_at_moves_the_next_tick_and_the_schedule() {
    let _guard = common::guard();
    let start = Instant::now();
    let mut every = task::spawn(wheel::interval_at(start, ms(300)));
    expect_ticks(&mut every, start, &[0]);
    time::advance(ms(300)).await;
    expect_ticks(&mut every, start, &[300]);
    time::advance(ms(100)).await;
    expect_ticks(&mut every, start, &[]);
    every.reset_at(Instant::now() + ms(40));
    time::advance(ms(39)).await;
    expect_ticks(&mut every, start, &[]);
    time::advance(ms(1)).await;
    expect_ticks(&mut every, start, &[440]);
    time::advance(ms(300)).await;
    expect_ticks(&mut every, start, &[740]);
}

#[tokio::test(start_paused = true)]
async fn reset_at_further_than_a_period_skips_the_ticks_between() {
    let _guard = common::guard();
    let start = Instant::now();
    let mut every = task::spawn(wheel::interval_at(start, ms(300)));
    expect_ticks(&mut every, start, &[0]);
    time::advance(ms(300)).await;
    expect_ticks(&mut every, start, &[300]);
    time::advance(ms(100)).await;
    expect_ticks(&mut every, start, &[]);
    every.reset_at(Instant::now() + ms(1000));
    for _ in 0..3 {
        time::advance(ms(300)).await;
        assert!(!every.is_woken());
        expect_ticks(&mut every, start, &[]);
    }
    time::advance(ms(100)).await;
    expect_ticks(&mut every, start, &[1400]);
    time::advance(ms(300)).await;
    expect_ticks(&mut every, start, &[1700]);
}

#[tokio::test(start_paused = true)]
async fn reset_at_before_the_first_poll_replaces_the_first_tick() {
    let _guard = common::guard();
    let start = Instant::now();
    let mut every = task::spawn(wheel::interval(ms(100)));
    every.reset_at(start + ms(30));
    expect_ticks(&mut every, start, &[]);
    time::advance(ms(30)).await;
    expect_ticks(&mut every, start, &[30]);
    time::advance(ms(100)).await;
    expect_ticks(&mut every, start, &[130]);
}

#[tokio::test(start_paused = true)]
async fn period_and_missed_tick_behavior_getters() {
    let _guard = common::guard();
    assert_eq!(MissedTickBehavior::default(), MissedTickBehavior::Burst);
    let mut every = wheel::interval(ms(1234));
    assert_eq!(every.period(), ms(1234));
    assert_eq!(every.missed_tick_behavior(), MissedTickBehavior::Burst);
    every.set_missed_tick_behavior(MissedTickBehavior::Skip);
    assert_eq!(every.missed_tick_behavior(), MissedTickBehavior::Skip);
    every.set_missed_tick_behavior(MissedTickBehavior::Delay);
    assert_eq!(every.missed_tick_behavior(), MissedTickBehavior::Delay);
    let at = wheel::interval_at(Instant::now() + ms(5), Duration::from_nanos(1));
    assert_eq!(at.period(), Duration::from_nanos(1));
    let timer = wheel::Timer::builder().build().unwrap();
    assert_eq!(timer.interval(ms(77)).period(), ms(77));
    // Ticking and resetting leave the period alone.
    every.tick().await;
    every.reset_after(ms(5));
    assert_eq!(every.period(), ms(1234));
}

#[tokio::test]
#[should_panic(expected = "`period` must be non-zero.")]
async fn zero_period_panics() {
    let _guard = common::guard();
    let _ = wheel::interval(Duration::ZERO);
}

#[tokio::test]
#[should_panic(expected = "`period` must be non-zero.")]
async fn zero_period_panics_with_interval_at() {
    let _guard = common::guard();
    let _ = wheel::interval_at(Instant::now(), Duration::ZERO);
}

#[tokio::test]
#[should_panic(expected = "`period` must be non-zero.")]
async fn zero_period_panics_on_an_explicit_timer() {
    let _guard = common::guard();
    let timer = wheel::Timer::builder().tick(ms(10)).build().unwrap();
    let _ = timer.interval(Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn stream_yields_the_scheduled_instants() {
    let _guard = common::guard();
    let start = Instant::now();
    let every = wheel::interval(ms(10));
    assert_eq!(every.size_hint(), (usize::MAX, None));
    let ticks: Vec<Instant> = every.take(3).collect().await;
    assert_eq!(ticks, vec![start, start + ms(10), start + ms(20)]);
    assert_eq!(start.elapsed(), ms(20));
}

#[tokio::test(start_paused = true)]
async fn stream_poll_next_wakes_like_poll_tick() {
    let _guard = common::guard();
    let start = Instant::now();
    let mut every = task::spawn(wheel::interval(ms(10)));
    assert_ready_eq!(every.poll_next(), Some(start));
    assert_pending!(every.poll_next());
    time::advance(ms(10)).await;
    assert!(every.is_woken());
    assert_ready_eq!(every.poll_next(), Some(start + ms(10)));
}

#[tokio::test(start_paused = true)]
async fn poll_tick_registers_no_waker_when_ready() {
    let _guard = common::guard();
    // As in tokio: only a `Pending` poll_tick arranges a wake-up.
    let start = Instant::now();
    let mut every = task::spawn(wheel::interval(ms(10)));
    assert_ready_eq!(poll_tick(&mut every), start);
    time::advance(ms(10)).await;
    assert!(!every.is_woken());
    assert_eq!(wheel::Timer::current().stats().pending, 0);
    assert_ready_eq!(poll_tick(&mut every), start + ms(10));
    time::advance(ms(10)).await;
    assert!(!every.is_woken());
    assert_ready_eq!(poll_tick(&mut every), start + ms(20));
    assert_pending!(poll_tick(&mut every));
    time::advance(ms(10)).await;
    assert!(every.is_woken());
}

struct CountingWaker(AtomicUsize);

impl ArcWake for CountingWaker {
    fn wake_by_ref(arc_self: &Arc<Self>) {
        arc_self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[tokio::test(start_paused = true)]
async fn poll_tick_wakes_only_the_latest_waker() {
    let _guard = common::guard();
    let first = Arc::new(CountingWaker(AtomicUsize::new(0)));
    let second = Arc::new(CountingWaker(AtomicUsize::new(0)));
    let (first_waker, second_waker) = (waker(first.clone()), waker(second.clone()));
    let start = Instant::now();
    let mut every = wheel::interval(ms(10));
    assert_eq!(
        every.poll_tick(&mut Context::from_waker(&first_waker)),
        Poll::Ready(start)
    );
    assert!(every
        .poll_tick(&mut Context::from_waker(&first_waker))
        .is_pending());
    assert!(every
        .poll_tick(&mut Context::from_waker(&second_waker))
        .is_pending());
    time::advance(ms(10)).await;
    assert_eq!(first.0.load(Ordering::SeqCst), 0);
    assert_eq!(second.0.load(Ordering::SeqCst), 1);
    assert_eq!(
        every.poll_tick(&mut Context::from_waker(&second_waker)),
        Poll::Ready(start + ms(10))
    );
}

#[tokio::test(start_paused = true)]
async fn a_dropped_tick_future_loses_no_tick() {
    let _guard = common::guard();
    let start = Instant::now();
    let mut every = wheel::interval(ms(10));
    assert_eq!(every.tick().await, start);
    tokio::select! {
        _ = every.tick() => panic!("the 5 ms sleep is ready first"),
        _ = wheel::sleep(ms(5)) => {}
    }
    assert_eq!(every.tick().await, start + ms(10));
    assert_eq!(start.elapsed(), ms(10));
}

#[tokio::test(start_paused = true)]
async fn explicit_timer_ticks_land_on_its_tick_never_early() {
    let _guard = common::guard();
    let origin = Instant::now();
    let timer = wheel::Timer::builder()
        .tick(ms(10))
        .slots_per_level(64)
        .build()
        .unwrap();
    let start = Instant::now();
    assert_eq!(start, origin);
    let mut every = timer.interval(ms(25));
    for k in 0..12u32 {
        let at = every.tick().await;
        let now = Instant::now();
        assert_eq!(at, start + ms(25) * k, "tick {k}: scheduled instant");
        assert!(
            now >= at,
            "tick {k} early: at {:?}, due {:?}",
            now - origin,
            at - origin
        );
        assert!(now - at < ms(10), "tick {k} more than a tick late");
        assert_eq!(
            (now - origin).as_nanos() % ms(10).as_nanos(),
            0,
            "tick {k} off the timer's tick"
        );
    }
    assert_eq!(start.elapsed(), ms(280)); // 275 rounded up to the next 10 ms
    assert_eq!(timer.stats().pending, 0);
    assert_eq!(
        wheel::Timer::current().stats().fired,
        0,
        "the default timer was not used"
    );
}

#[tokio::test(start_paused = true)]
async fn explicit_timer_interval_at_polled_by_hand() {
    let _guard = common::guard();
    let origin = Instant::now();
    let timer = wheel::Timer::builder().tick(ms(10)).build().unwrap();
    let start = origin + ms(15);
    let mut every = task::spawn(timer.interval_at(start, ms(20)));
    assert_pending!(poll_tick(&mut every));
    time::advance(ms(15)).await;
    // Due at 15 ms, rounded up to the tick at 20 ms.
    assert!(!every.is_woken(), "fired before its tick");
    time::advance(ms(4)).await;
    assert!(!every.is_woken(), "fired before its tick");
    time::advance(ms(1)).await;
    assert!(every.is_woken());
    expect_ticks(&mut every, start, &[0]);
    time::advance(ms(20)).await;
    expect_ticks(&mut every, start, &[20]);
}

#[tokio::test(start_paused = true)]
async fn dropping_an_interval_leaves_nothing_pending() {
    let _guard = common::guard();
    let timer = wheel::Timer::builder().tick(ms(10)).build().unwrap();
    let mut every = task::spawn(timer.interval(ms(100)));
    assert_ready!(poll_tick(&mut every));
    assert_pending!(poll_tick(&mut every));
    assert_eq!(timer.stats().pending, 1);
    drop(every);
    let stats = timer.stats();
    assert_eq!((stats.pending, stats.entries, stats.cancelled), (0, 0, 1));

    // The same on the default timer, with many intervals.
    let default = wheel::Timer::current();
    let mut all: Vec<_> = (1..=100)
        .map(|i| task::spawn(wheel::interval(ms(i))))
        .collect();
    for every in &mut all {
        assert_ready!(poll_tick(every));
        assert_pending!(poll_tick(every));
    }
    assert_eq!(default.stats().pending, 100);
    drop(all);
    let stats = default.stats();
    assert_eq!((stats.pending, stats.entries, stats.cancelled), (0, 0, 100));
}

#[tokio::test(start_paused = true)]
async fn duration_max_period_does_not_panic() {
    let _guard = common::guard();
    let start = Instant::now();
    let mut every = task::spawn(wheel::interval(Duration::MAX));
    assert_ready_eq!(poll_tick(&mut every), start);
    assert_pending!(poll_tick(&mut every));
    every.reset();
    time::advance(Duration::from_secs(86_400 * 365)).await;
    assert!(!every.is_woken());
    assert_pending!(poll_tick(&mut every));
}
