//! `Interval` where the other tests do not look, against tokio's: ticks
//! awaited on tokio's auto-advancing paused clock with stalls between
//! them (every missed tick behaviour, periods off tokio's millisecond),
//! `wheel::interval` made between two of tokio's milliseconds, and
//! intervals on manual timers of any tick against a model of tokio's
//! schedule read on the timer's clock.

use std::task::Poll;
use std::time::Duration;

use proptest::prelude::*;
use tokio::time;
use tokio_test::task;
use wheel::Instant;

mod common;
use common::paused_unguarded;
// The parity programs' interval steps, drawn here in ticks.
use crate::parity_programs::IOp;

fn us(n: u64) -> Duration {
    Duration::from_micros(n)
}

const WHEEL_BEHAVIORS: [wheel::MissedTickBehavior; 3] = [
    wheel::MissedTickBehavior::Burst,
    wheel::MissedTickBehavior::Delay,
    wheel::MissedTickBehavior::Skip,
];
const TOKIO_BEHAVIORS: [time::MissedTickBehavior; 3] = [
    time::MissedTickBehavior::Burst,
    time::MissedTickBehavior::Delay,
    time::MissedTickBehavior::Skip,
];

/// `wheel::interval` (not `interval_at`) made with the paused clock between
/// two of tokio's milliseconds, polled by hand through sub-millisecond
/// advances: the same ticks, and the same wake-ups, as tokio's.
#[test]
fn an_interval_made_between_milliseconds_ticks_as_tokios() {
    let _guard = common::guard();
    for behavior in 0..3 {
        for offset in [0, 1, 400, 999] {
            for period in [us(100), us(1_500), us(5_000), us(250_000)] {
                paused_unguarded().block_on(tokio::task::unconstrained(async {
                    time::advance(us(offset)).await;
                    let mut w = wheel::interval(period);
                    w.set_missed_tick_behavior(WHEEL_BEHAVIORS[behavior]);
                    let mut t = time::interval(period);
                    t.set_missed_tick_behavior(TOKIO_BEHAVIORS[behavior]);
                    let (mut w, mut t) = (task::spawn(w), task::spawn(t));
                    for step in 0..100 {
                        let ctx = format!("{behavior} at {offset} µs, {period:?}, step {step}");
                        let got = w.enter(|cx, mut w| w.poll_tick(cx));
                        let want = t.enter(|cx, mut t| t.poll_tick(cx));
                        assert_eq!(got, want, "{ctx}");
                        time::advance(us(137 * (step % 7))).await;
                        assert_eq!(w.is_woken(), t.is_woken(), "woken: {ctx}");
                    }
                }));
            }
        }
    }
}

/// `tick().await` in a loop that stalls now and then, on an auto-advancing
/// paused clock, off tokio's grid: each tick's instant and when it came are
/// tokio's, for every missed tick behaviour.
#[test]
fn awaited_ticks_after_stalls_come_when_tokios_do() {
    let _guard = common::guard();
    for behavior in 0..3 {
        for period in [us(100), us(1_500), us(3_000), us(7_300)] {
            for stall in [us(0), us(2_500), us(9_000), us(31_700)] {
                let run = |on_wheel: bool| {
                    paused_unguarded().block_on(async move {
                        time::advance(us(300)).await;
                        let start = Instant::now();
                        let mut w = wheel::interval(period);
                        w.set_missed_tick_behavior(WHEEL_BEHAVIORS[behavior]);
                        let mut t = time::interval(period);
                        t.set_missed_tick_behavior(TOKIO_BEHAVIORS[behavior]);
                        let mut out = Vec::new();
                        for i in 0..30 {
                            let at = if on_wheel {
                                w.tick().await
                            } else {
                                t.tick().await
                            };
                            out.push((at - start, start.elapsed()));
                            if i % 5 == 2 {
                                if on_wheel {
                                    wheel::sleep(stall).await;
                                } else {
                                    time::sleep(stall).await;
                                }
                            }
                        }
                        out
                    })
                };
                let ctx = format!("{behavior}, {period:?}, stalls of {stall:?}");
                assert_eq!(run(true), run(false), "{ctx}");
            }
        }
    }
}

/// In eighths of a millisecond (the default tick), so that a timer of that
/// tick rounds nothing.
fn iop() -> impl Strategy<Value = IOp> {
    prop_oneof![
        5 => (0u64..400).prop_map(|n| IOp::Advance(n * 125)),
        5 => Just(IOp::Poll),
        1 => Just(IOp::Reset),
        1 => Just(IOp::ResetImmediately),
        1 => (0u64..400).prop_map(|n| IOp::ResetAfter(n * 125)),
        1 => (-200i64..400).prop_map(|n| IOp::ResetAt(n * 125)),
        1 => (0..3usize).prop_map(IOp::Behavior),
    ]
}

fn at(now: Instant, us: i64) -> Instant {
    if us >= 0 {
        now + Duration::from_micros(us as u64)
    } else {
        now - Duration::from_micros(us.unsigned_abs())
    }
}

/// An interval on a manual timer of tick `tick_us` against a model of
/// tokio's schedule read on that timer's clock. A tick is never early and
/// must come once the clock reaches its deadline rounded up to the timer's
/// tick (at once for a passed start or reset on a timer coarser than a
/// millisecond); it yields its deadline; a tick taken more than 5 ms (or a
/// tick plus 2 ms) late is missed. A waiting task is woken when its tick
/// must come, and by a passed reset on a coarse timer.
fn run_manual_interval(tick_us: u64, period: u64, start: i64, ops: &[IOp]) {
    let tick = us(tick_us);
    let timer = common::manual_ticking(tick);
    let origin = timer.now();
    let coarse = tick > Duration::from_millis(1);
    let threshold = Duration::from_millis(5).max(tick + Duration::from_millis(2));
    // The end of the timer's tick `d` falls in (ticks count from `origin`).
    let rounded = |d: Instant| match d.checked_duration_since(origin) {
        Some(since) => {
            let ticks = since.as_nanos().div_ceil(tick.as_nanos());
            origin + Duration::from_nanos((ticks * tick.as_nanos()) as u64)
        }
        None => d,
    };
    let period = us(period * 125);
    let mut due = at(timer.now(), start * 125);
    let mut every = task::spawn(timer.interval_at(due, period));
    // Due at once rather than at the end of its tick.
    let mut at_once = due <= timer.now();
    let (mut behavior, mut waiting) = (0, false);
    for (n, op) in ops.iter().enumerate() {
        let ctx = format!("op {n} ({op:?}) of {tick_us} µs, {period:?}, {start}, {ops:?}");
        match *op {
            IOp::Advance(d) => {
                timer.advance(us(d));
                if waiting && timer.now() >= rounded(due) {
                    assert!(every.is_woken(), "not woken: {ctx}");
                    waiting = false;
                }
            }
            IOp::Poll => loop {
                let now = timer.now();
                let got = every.enter(|cx, mut w| w.poll_tick(cx));
                let must = now >= rounded(due) || (at_once && now >= due);
                if !(must || now >= due && got.is_ready()) {
                    assert_eq!(got, Poll::Pending, "{ctx}");
                    waiting = true;
                    break;
                }
                assert_eq!(got, Poll::Ready(due), "{ctx}");
                at_once = false;
                due = if now > due + threshold {
                    match behavior {
                        0 => due + period,
                        1 => now + period,
                        _ => {
                            let behind = (now - due).as_nanos() % period.as_nanos();
                            now + (period - Duration::from_nanos(behind as u64))
                        }
                    }
                } else {
                    due + period
                };
            },
            IOp::Reset => {
                every.reset();
                (due, at_once) = (timer.now() + period, false);
            }
            IOp::ResetImmediately => {
                every.reset_immediately();
                (due, at_once) = (timer.now(), coarse);
            }
            IOp::ResetAfter(d) => {
                every.reset_after(us(d));
                (due, at_once) = (timer.now() + us(d), coarse && d == 0);
            }
            IOp::ResetAt(d) => {
                due = at(timer.now(), d * 125);
                every.reset_at(due);
                at_once = coarse && due <= timer.now();
            }
            IOp::Behavior(b) => {
                behavior = b;
                every.set_missed_tick_behavior(WHEEL_BEHAVIORS[b]);
            }
        }
        if waiting && at_once {
            assert!(every.is_woken(), "a passed reset wakes: {ctx}");
            waiting = false;
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn manual_timer_intervals_keep_tokios_schedule(
        tick_us in prop_oneof![Just(125u64), Just(1_000), Just(1_250), Just(3_000), Just(10_000)],
        period in 1u64..200,
        start in -100i64..100,
        ops in prop::collection::vec(iop(), 1..60),
    ) {
        let _guard = common::guard();
        run_manual_interval(tick_us, period, start, &ops);
    }
}
