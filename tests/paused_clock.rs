//! The same program on `tokio::time` and on `wheel`, each on a paused
//! current-thread runtime of its own: every step must end at the same
//! instant, with the same result. proptest writes the programs (a fixed
//! seed, so CI runs the same 512 every time).
//!
//! Advances by a fraction of a millisecond are the hard part: tokio's clock
//! then stands between two of its milliseconds, and tokio fires a timer
//! only once its millisecond has been processed.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{FileFailurePersistence, RngSeed};

#[path = "common/mod.rs"]
mod common;

/// One step of a program. Durations are in microseconds.
#[derive(Debug, Clone)]
enum Step {
    /// `sleep(d).await`
    Sleep(u64),
    /// `sleep_until(start + at).await`
    SleepUntil(u64),
    /// `timeout(d, sleep(inner)).await`, its result kept
    Timeout { limit: u64, inner: u64 },
    /// `timeout(d, yield_now()).await`: completes at once, cancelling
    TimeoutYield(u64),
    /// `sleep(first)`, polled once, reset to `now + then`, awaited
    Reset { first: u64, then: u64 },
    /// `interval(period)`, ticked `ticks` times
    Interval { period: u64, ticks: u8 },
    /// builds a `Timer` with this tick (a divisor of 1 ms) for the steps
    /// after it; nothing on tokio
    Build(u64),
    /// `Interval` on the last `Timer` built (`Timer::interval`), or
    /// `interval` if none; `tokio::time::interval` on tokio
    TimerInterval { period: u64, ticks: u8 },
    /// `tokio::time::advance(d).await`
    Advance(u64),
    /// awaits an event from a thread outside the runtime, with no timer
    /// of the program pending: the clock must not move. Skipped while a
    /// spawned task may hold a timer: whether the runtime idles (and the
    /// clock jumps to that timer) before the thread's event arrives would
    /// be a race with real time, on tokio as on the wheel
    External,
    /// spawns a task that does `sleep(d).await` and sends the clock's
    /// reading; its first poll comes after the step's own
    Spawn(u64),
    /// spawns a task that does `timeout(d, rx)` on the channel of the
    /// oldest `Spawn` not yet joined (nothing if none is left); its
    /// result, with the reading it received, is kept when the program ends
    Join(u64),
}

/// What a step ended with: the clock's reading since the program started,
/// and the timeout's outcome where there is one.
type Outcome = (Duration, Option<bool>);

/// The API under test, `tokio::time` or `wheel`.
trait Api {
    fn sleep(d: Duration) -> Pin<Box<dyn Future<Output = ()>>>;
    fn sleep_until(at: tokio::time::Instant) -> Pin<Box<dyn Future<Output = ()>>>;
    /// `timeout(limit, sleep(inner))`: `true` if it completed in time.
    fn timeout(limit: Duration, inner: Duration) -> Pin<Box<dyn Future<Output = bool>>>;
    fn timeout_yield(limit: Duration) -> Pin<Box<dyn Future<Output = bool>>>;
    fn reset(first: Duration, then: Duration) -> Pin<Box<dyn Future<Output = ()>>>;
    fn interval(period: Duration, ticks: u8) -> Pin<Box<dyn Future<Output = ()>>>;
    fn timer_interval(
        timer: &Option<wheel::Timer>,
        period: Duration,
        ticks: u8,
    ) -> Pin<Box<dyn Future<Output = ()>>>;
    fn spawned_sleep(d: Duration) -> Pin<Box<dyn Future<Output = ()> + Send>>;
    /// `timeout(limit, rx)`: what was received in time, if anything.
    fn join(
        limit: Duration,
        rx: Receiver,
    ) -> Pin<Box<dyn Future<Output = Option<Duration>> + Send>>;
}

type Receiver = tokio::sync::oneshot::Receiver<Duration>;

struct Tokio;
struct Wheel;

/// Polls `future` once, with a waker that does nothing.
fn poll_once<F: Future + Unpin>(future: &mut F) {
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    let _ = Pin::new(future).poll(&mut cx);
}

impl Api for Tokio {
    fn sleep(d: Duration) -> Pin<Box<dyn Future<Output = ()>>> {
        Box::pin(tokio::time::sleep(d))
    }
    fn sleep_until(at: tokio::time::Instant) -> Pin<Box<dyn Future<Output = ()>>> {
        Box::pin(tokio::time::sleep_until(at))
    }
    fn timeout(limit: Duration, inner: Duration) -> Pin<Box<dyn Future<Output = bool>>> {
        let timeout = tokio::time::timeout(limit, tokio::time::sleep(inner));
        Box::pin(async move { timeout.await.is_ok() })
    }
    fn timeout_yield(limit: Duration) -> Pin<Box<dyn Future<Output = bool>>> {
        let timeout = tokio::time::timeout(limit, tokio::task::yield_now());
        Box::pin(async move { timeout.await.is_ok() })
    }
    fn reset(first: Duration, then: Duration) -> Pin<Box<dyn Future<Output = ()>>> {
        let mut sleep = Box::pin(tokio::time::sleep(first));
        Box::pin(async move {
            poll_once(&mut sleep);
            sleep.as_mut().reset(tokio::time::Instant::now() + then);
            sleep.await;
        })
    }
    fn interval(period: Duration, ticks: u8) -> Pin<Box<dyn Future<Output = ()>>> {
        Box::pin(async move {
            let mut interval = tokio::time::interval(period);
            for _ in 0..ticks {
                interval.tick().await;
            }
        })
    }
    fn timer_interval(
        _: &Option<wheel::Timer>,
        period: Duration,
        ticks: u8,
    ) -> Pin<Box<dyn Future<Output = ()>>> {
        Self::interval(period, ticks)
    }
    fn spawned_sleep(d: Duration) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        Box::pin(tokio::time::sleep(d))
    }
    fn join(
        limit: Duration,
        rx: Receiver,
    ) -> Pin<Box<dyn Future<Output = Option<Duration>> + Send>> {
        let timeout = tokio::time::timeout(limit, rx);
        Box::pin(async move { timeout.await.ok().and_then(Result::ok) })
    }
}

impl Api for Wheel {
    fn sleep(d: Duration) -> Pin<Box<dyn Future<Output = ()>>> {
        Box::pin(wheel::sleep(d))
    }
    fn sleep_until(at: tokio::time::Instant) -> Pin<Box<dyn Future<Output = ()>>> {
        Box::pin(wheel::sleep_until(at))
    }
    fn timeout(limit: Duration, inner: Duration) -> Pin<Box<dyn Future<Output = bool>>> {
        let timeout = wheel::timeout(limit, wheel::sleep(inner));
        Box::pin(async move { timeout.await.is_ok() })
    }
    fn timeout_yield(limit: Duration) -> Pin<Box<dyn Future<Output = bool>>> {
        let timeout = wheel::timeout(limit, tokio::task::yield_now());
        Box::pin(async move { timeout.await.is_ok() })
    }
    fn reset(first: Duration, then: Duration) -> Pin<Box<dyn Future<Output = ()>>> {
        let mut sleep = wheel::sleep(first);
        Box::pin(async move {
            poll_once(&mut sleep);
            Pin::new(&mut sleep).reset(wheel::Instant::now() + then);
            sleep.await;
        })
    }
    fn interval(period: Duration, ticks: u8) -> Pin<Box<dyn Future<Output = ()>>> {
        Box::pin(async move {
            let mut interval = wheel::interval(period);
            for _ in 0..ticks {
                interval.tick().await;
            }
        })
    }
    fn timer_interval(
        timer: &Option<wheel::Timer>,
        period: Duration,
        ticks: u8,
    ) -> Pin<Box<dyn Future<Output = ()>>> {
        let mut interval = match timer {
            Some(timer) => timer.interval(period),
            None => wheel::interval(period),
        };
        Box::pin(async move {
            for _ in 0..ticks {
                interval.tick().await;
            }
        })
    }
    fn spawned_sleep(d: Duration) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        Box::pin(wheel::sleep(d))
    }
    fn join(
        limit: Duration,
        rx: Receiver,
    ) -> Pin<Box<dyn Future<Output = Option<Duration>> + Send>> {
        let timeout = wheel::timeout(limit, rx);
        Box::pin(async move { timeout.await.ok().and_then(Result::ok) })
    }
}

#[derive(Debug, Clone)]
struct Program(Vec<Step>);

impl Program {
    /// Runs the program on `A`, on a paused runtime of its own.
    fn run<A: Api + 'static>(&self) -> Vec<Outcome> {
        // Watched by the watchdog alone: a guard's far tokio timer would be
        // somewhere for auto-advance to go while an outside event is awaited.
        common::paused_rt_far().block_on(async {
            let start = tokio::time::Instant::now();
            let mut outcomes = Vec::new();
            let mut spawned = std::collections::VecDeque::new();
            let mut joins = Vec::new();
            let mut timer = None;
            for step in &self.0 {
                let us = Duration::from_micros;
                let result = match *step {
                    Step::Sleep(d) => {
                        A::sleep(us(d)).await;
                        None
                    }
                    Step::SleepUntil(at) => {
                        A::sleep_until(start + us(at)).await;
                        None
                    }
                    Step::Timeout { limit, inner } => Some(A::timeout(us(limit), us(inner)).await),
                    Step::TimeoutYield(limit) => Some(A::timeout_yield(us(limit)).await),
                    Step::Reset { first, then } => {
                        A::reset(us(first), us(then)).await;
                        None
                    }
                    Step::Interval { period, ticks } => {
                        A::interval(us(period), ticks).await;
                        None
                    }
                    Step::Build(tick) => {
                        timer = Some(wheel::Timer::builder().tick(us(tick)).build().unwrap());
                        None
                    }
                    Step::TimerInterval { period, ticks } => {
                        A::timer_interval(&timer, us(period), ticks).await;
                        None
                    }
                    Step::Advance(d) => {
                        tokio::time::advance(us(d)).await;
                        None
                    }
                    Step::External if !spawned.is_empty() || !joins.is_empty() => None,
                    Step::External => {
                        let (send, receive) = tokio::sync::oneshot::channel();
                        std::thread::spawn(move || {
                            std::thread::sleep(Duration::from_millis(1));
                            let _ = send.send(());
                        });
                        receive.await.unwrap();
                        None
                    }
                    Step::Spawn(d) => {
                        let (send, receive) = tokio::sync::oneshot::channel();
                        tokio::spawn(async move {
                            A::spawned_sleep(us(d)).await;
                            let _ = send.send(start.elapsed());
                        });
                        spawned.push_back(receive);
                        None
                    }
                    Step::Join(limit) => {
                        if let Some(receive) = spawned.pop_front() {
                            joins.push(tokio::spawn(async move {
                                let sent = A::join(us(limit), receive).await;
                                (start.elapsed(), sent)
                            }));
                        }
                        None
                    }
                };
                outcomes.push((start.elapsed(), result));
            }
            // Each join's instant and result, and the reading it received.
            for join in joins {
                let (at, sent) = join.await.unwrap();
                outcomes.push((at, Some(sent.is_some())));
                outcomes.extend(sent.map(|sent| (sent, None)));
            }
            outcomes
        })
    }
}

/// Durations: whole milliseconds mostly, fractions too, zero sometimes.
fn micros() -> impl Strategy<Value = u64> {
    prop_oneof![
        3 => (0u64..40).prop_map(|ms| ms * 1000),
        2 => 0u64..40_000,
        1 => Just(0u64),
    ]
}

/// Tick sizes, in microseconds, that divide tokio's millisecond.
const TICKS: [u64; 6] = [1, 8, 125, 200, 500, 1_000];

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => micros().prop_map(Step::Sleep),
        2 => micros().prop_map(Step::SleepUntil),
        2 => (micros(), micros()).prop_map(|(limit, inner)| Step::Timeout { limit, inner }),
        1 => prop_oneof![Just(3_600_000_000u64), micros()].prop_map(Step::TimeoutYield),
        2 => (micros(), micros()).prop_map(|(first, then)| Step::Reset { first, then }),
        1 => (1_000u64..20_000, 1u8..5).prop_map(|(period, ticks)| Step::Interval { period, ticks }),
        2 => micros().prop_map(Step::Advance),
        1 => Just(Step::External),
        2 => micros().prop_map(Step::Spawn),
        2 => micros().prop_map(Step::Join),
        1 => prop::sample::select(&TICKS[..]).prop_map(Step::Build),
        1 => (1_000u64..20_000, 1u8..5)
            .prop_map(|(period, ticks)| Step::TimerInterval { period, ticks }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 512,
        rng_seed: RngSeed::Fixed(0x7ee1_c10c),
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "proptest-regressions/tests/paused_clock.txt"
        ))),
        ..ProptestConfig::default()
    })]

    /// Every step ends at the same instant on both, with the same result.
    #[test]
    fn the_wheel_keeps_tokios_instants(steps in prop::collection::vec(step(), 1..12)) {
        let _guard = common::guard();
        let program = Program(steps);
        prop_assert_eq!(program.run::<Wheel>(), program.run::<Tokio>());
    }
}

/// The first scenario: a cancelled wheel timer leaves nothing for
/// auto-advance, so awaiting an outside event does not move the clock.
#[test]
fn a_cancelled_timeout_leaves_nothing_for_auto_advance() {
    let _guard = common::guard();
    let program = Program(vec![Step::TimeoutYield(3_600_000_000), Step::External]);
    let expected = vec![(Duration::ZERO, Some(true)), (Duration::ZERO, None)];
    assert_eq!(program.run::<Tokio>(), expected);
    assert_eq!(program.run::<Wheel>(), expected);
}

/// The second scenario: a sub-millisecond advance before the first
/// wheel timer does not shift its grid off tokio's.
#[test]
fn a_fraction_of_a_millisecond_before_the_first_timer_keeps_tokios_instants() {
    let _guard = common::guard();
    let program = Program(vec![Step::Advance(300), Step::SleepUntil(5_000)]);
    let expected = vec![
        (Duration::from_micros(300), None),
        (Duration::from_micros(5_300), None),
    ];
    assert_eq!(program.run::<Tokio>(), expected);
    assert_eq!(program.run::<Wheel>(), expected);
}

/// A zero sleep at 0.3 ms waits for tokio's next millisecond, as tokio's
/// does, and a timer first used off tokio's grid keeps tokio's instants
/// after whole-millisecond advances.
#[test]
fn a_timer_first_used_between_milliseconds_keeps_tokios_instants() {
    let _guard = common::guard();
    let program = Program(vec![
        Step::Advance(300),
        Step::Sleep(0),
        Step::Sleep(2_000),
        Step::Timeout {
            limit: 1_000,
            inner: 700,
        },
        Step::SleepUntil(10_000),
    ]);
    let tokio = program.run::<Tokio>();
    assert_eq!(tokio[1].0, Duration::from_micros(1_300));
    assert_eq!(program.run::<Wheel>(), tokio);
}

/// Off tokio's grid, a timer due between tokio's last millisecond and the
/// clock waits for the next, as tokio's does: here a timeout's inner
/// sleep, due 1 ms after the timeout (41.001 ms and 40.001 ms, the clock at
/// 41.262 ms when the timeout fires), has not completed.
#[test]
fn off_tokios_grid_a_timer_waits_for_tokios_next_millisecond() {
    let _guard = common::guard();
    let program = Program(vec![
        Step::Advance(13_262),
        Step::Timeout {
            limit: 26_739,
            inner: 27_739,
        },
    ]);
    let expected = vec![
        (Duration::from_micros(13_262), None),
        (Duration::from_micros(41_262), Some(false)),
    ];
    assert_eq!(program.run::<Tokio>(), expected);
    assert_eq!(program.run::<Wheel>(), expected);
}

/// Issue 38, part 2's second scenario: a first poll after an `advance`
/// tokio has not processed yet does not complete at once. A task spawned
/// to `sleep(0)` is first polled after `advance(20 ms)` has moved the clock
/// and before tokio's driver has processed it, and the main task advances
/// again first: tokio's sleep ends at 22 ms (the wheel's ended at 20).
#[test]
fn a_first_poll_after_an_unprocessed_advance_waits_as_tokios_does() {
    let _guard = common::guard();
    let program = Program(vec![
        Step::Spawn(0),
        Step::Join(3_600_000_000),
        Step::Advance(20_000),
        Step::Advance(2_000),
    ]);
    let tokio = program.run::<Tokio>();
    // The join's instant and result, then the reading the sleeper sent.
    let ended = &tokio[tokio.len() - 2..];
    assert_eq!(ended, [(ms(22), Some(true)), (ms(22), None)]);
    assert_eq!(program.run::<Wheel>(), tokio);
}

/// The same, through a timeout: a task awaits `timeout(2.999 ms, rx)`
/// whose sender does `sleep(0)`, both first polled after `advance(26
/// ms)`, which the main task follows with `advance(33 ms)`. tokio's
/// timeout is `Ok` at 59 ms, the sleep having waited for the driver (the
/// wheel's was `Ok` at 26 ms).
#[test]
fn a_timeout_whose_sender_sleeps_zero_ends_as_tokios_does() {
    let _guard = common::guard();
    let program = Program(vec![
        Step::Spawn(0),
        Step::Join(2_999),
        Step::Advance(26_000),
        Step::Advance(33_000),
    ]);
    let tokio = program.run::<Tokio>();
    let ended = &tokio[tokio.len() - 2..];
    assert_eq!(ended, [(ms(59), Some(true)), (ms(59), None)]);
    assert_eq!(program.run::<Wheel>(), tokio);
}

/// Issue 38, part 2's third scenario: after `advance(300 µs)` an explicit
/// `Timer::interval`'s first tick comes at 1.3 ms, as tokio's and
/// `wheel::interval`'s do, whatever tick (dividing a millisecond) the
/// timer has, built before the advance or after it (it came at 0.3 ms).
#[test]
fn an_explicit_timers_first_interval_tick_comes_at_tokios_instant() {
    let _guard = common::guard();
    let tick = Step::TimerInterval {
        period: 5_000,
        ticks: 1,
    };
    for us in TICKS {
        for program in [
            vec![Step::Build(us), Step::Advance(300), tick.clone()],
            vec![Step::Advance(300), Step::Build(us), tick.clone()],
        ] {
            let program = Program(program);
            let tokio = program.run::<Tokio>();
            assert_eq!(tokio.last(), Some(&(Duration::from_micros(1_300), None)));
            assert_eq!(program.run::<Wheel>(), tokio, "a {us} µs tick");
        }
    }
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A sleep shorter than one already pending in the same shard pulls the
/// alarm in: it completes at its own instant, not the longer one's.
#[test]
fn a_shorter_sleep_after_a_longer_one_pulls_the_alarm_in() {
    let _guard = common::guard();
    let elapsed = common::paused_rt().block_on(async {
        let start = tokio::time::Instant::now();
        let mut long = tokio_test::task::spawn(wheel::sleep(Duration::from_secs(10)));
        assert!(long.poll().is_pending());
        wheel::sleep(Duration::from_secs(1)).await;
        start.elapsed()
    });
    assert_eq!(elapsed, Duration::from_secs(1));
}
