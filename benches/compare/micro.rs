//! The per-call workloads: `timeout_ready`, `churn`, `timeout_yield`,
//! `reset`, `repoll` and `mt_churn`.
//!
//! Each run builds a fresh runtime (so each side starts with an empty timer),
//! warms up with a tenth of the work, then times the rest with
//! `std::time::Instant`. The timed loops are `#[inline(never)]` functions so
//! a profiler can collect exactly them (`callgrind --toggle-collect`).

use std::future::Future;
use std::hint::black_box;
use std::pin::{pin, Pin};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::Instant;

use crate::measure::{
    alternate, block_on_unconstrained, current_thread, multi_thread, random_duration, with_context,
};
use crate::report::{label, Row};
use crate::side::{Side, Tokio, Wheel};
use crate::support::Rng;
use crate::Config;

/// The timeout every `timeout_*` workload uses.
const TIMEOUT: Duration = Duration::from_secs(5);

const TIMEOUT_READY_N: usize = 2_000_000;
const CHURN_N: usize = 1_000_000;
const TIMEOUT_YIELD_N: usize = 200_000;
/// Sleeps kept registered by `reset` and `repoll`, and their timed rounds.
const REGISTERED_N: usize = 100_000;
const REGISTERED_ROUNDS: usize = 10;
const MT_CHURN_N: usize = 1_000_000;
const MT_TASKS: usize = 8;
const MT_WORKERS: usize = 2;
/// `mt_churn` tasks yield after this many timers, so the 8 tasks interleave
/// on the 2 workers instead of running one after another.
const MT_CHUNK: usize = 1024;

fn nanos_per(elapsed: std::time::Duration, n: usize) -> f64 {
    elapsed.as_nanos() as f64 / n as f64
}

/// `timeout(5 s, ready)`: creating, polling (the inner future wins) and
/// dropping a timeout that never touches the timer's state.
pub(crate) fn timeout_ready(cfg: &Config) {
    let n = cfg.size.of(TIMEOUT_READY_N, 1000);
    let runs = alternate(
        cfg.micro_runs,
        cfg.sides,
        || timeout_ready_run::<Tokio>(n),
        || timeout_ready_run::<Wheel>(n),
    );
    Row::median(
        label("timeout_ready", n, TIMEOUT_READY_N),
        "ns/call",
        &runs,
        |&ns| ns,
    )
    .print();
}

fn timeout_ready_run<T: Side>(n: usize) -> f64 {
    let rt = current_thread();
    block_on_unconstrained(&rt, async {
        with_context(|cx| timeout_ready_loop::<T>(cx, n / 10)).await;
        let start = std::time::Instant::now();
        with_context(|cx| timeout_ready_loop::<T>(cx, n)).await;
        nanos_per(start.elapsed(), n)
    })
}

/// What `.await` on the timeout does when the inner future is ready: one poll.
#[inline(never)]
pub(crate) fn timeout_ready_loop<T: Side>(cx: &mut Context<'_>, n: usize) {
    for i in 0..n {
        let call = pin!(T::timeout(TIMEOUT, std::future::ready(black_box(i))));
        match call.poll(cx) {
            Poll::Ready(Ok(v)) if v == i => {}
            other => panic!("{}: timeout of a ready future gave {other:?}", T::NAME),
        }
    }
}

/// Durations uniform in 1-5 s, the same for both sides.
pub(crate) fn churn_durations(n: usize) -> Vec<Duration> {
    let mut rng = Rng::new(0xc4u64);
    (0..n)
        .map(|_| random_duration(&mut rng, Duration::from_secs(1), Duration::from_secs(5)))
        .collect()
}

/// `sleep(1-5 s)`, polled once so it registers, then dropped (cancelled).
pub(crate) fn churn(cfg: &Config) {
    let n = cfg.size.of(CHURN_N, 1000);
    let durations = churn_durations(n);
    let runs = alternate(
        cfg.micro_runs,
        cfg.sides,
        || churn_run::<Tokio>(&durations),
        || churn_run::<Wheel>(&durations),
    );
    Row::median(label("churn", n, CHURN_N), "ns/timer", &runs, |&ns| ns).print();
}

fn churn_run<T: Side>(durations: &[Duration]) -> f64 {
    let rt = current_thread();
    block_on_unconstrained(&rt, async {
        with_context(|cx| churn_loop::<T>(cx, &durations[..durations.len() / 10])).await;
        let start = std::time::Instant::now();
        with_context(|cx| churn_loop::<T>(cx, durations)).await;
        let ns = nanos_per(start.elapsed(), durations.len());
        assert_eq!(T::pending().unwrap_or(0), 0, "churn left timers behind");
        ns
    })
}

/// One sleep per duration: created, polled once (it registers: the
/// deadline is seconds away), dropped (it cancels).
#[inline(never)]
pub(crate) fn churn_loop<T: Side>(cx: &mut Context<'_>, durations: &[Duration]) {
    for &d in durations {
        let sleep = pin!(T::sleep(d));
        assert!(
            sleep.poll(cx).is_pending(),
            "{}: a 1-5 s sleep completed at once",
            T::NAME
        );
    }
}

/// `timeout(5 s, yield_now())`: the first poll registers the timeout (the
/// inner future yields), the second completes and cancels it. Includes a
/// round trip through the scheduler, the same for both sides.
pub(crate) fn timeout_yield(cfg: &Config) {
    let n = cfg.size.of(TIMEOUT_YIELD_N, 1000);
    let runs = alternate(
        cfg.micro_runs,
        cfg.sides,
        || timeout_yield_run::<Tokio>(n),
        || timeout_yield_run::<Wheel>(n),
    );
    Row::median(
        label("timeout_yield", n, TIMEOUT_YIELD_N),
        "ns/call",
        &runs,
        |&ns| ns,
    )
    .print();
}

fn timeout_yield_run<T: Side>(n: usize) -> f64 {
    let rt = current_thread();
    block_on_unconstrained(&rt, async {
        timeout_yield_loop::<T>(n / 10).await;
        let start = std::time::Instant::now();
        timeout_yield_loop::<T>(n).await;
        let ns = nanos_per(start.elapsed(), n);
        assert_eq!(
            T::pending().unwrap_or(0),
            0,
            "timeout_yield left timers behind"
        );
        ns
    })
}

async fn timeout_yield_loop<T: Side>(n: usize) {
    for _ in 0..n {
        let out = T::timeout(TIMEOUT, tokio::task::yield_now()).await;
        assert!(out.is_ok(), "{}: a yield outlasted 5 s", T::NAME);
    }
}

/// 100,000 registered sleeps, each moved to a later deadline and polled, 10
/// rounds.
pub(crate) fn reset(cfg: &Config) {
    registered(
        cfg,
        "reset",
        "ns/reset",
        reset_round::<Tokio>,
        reset_round::<Wheel>,
    );
}

/// 100,000 registered sleeps, each polled again by the same task (as a
/// `Timeout` polls its delay whenever the inner future is pending), 10
/// rounds.
pub(crate) fn repoll(cfg: &Config) {
    registered(
        cfg,
        "repoll",
        "ns/poll",
        repoll_round::<Tokio>,
        repoll_round::<Wheel>,
    );
}

/// Runs `registered_run` with each side's `round` and prints the row.
fn registered(
    cfg: &Config,
    name: &str,
    unit: &'static str,
    tokio: Round<<Tokio as Side>::Sleep>,
    wheel: Round<<Wheel as Side>::Sleep>,
) {
    let n = cfg.size.of(REGISTERED_N, 1000);
    let runs = alternate(
        cfg.micro_runs,
        cfg.sides,
        || registered_run::<Tokio>(n, REGISTERED_ROUNDS, tokio),
        || registered_run::<Wheel>(n, REGISTERED_ROUNDS, wheel),
    );
    Row::median(label(name, n, REGISTERED_N), unit, &runs, |&ns| ns).print();
}

/// One round over every registered sleep: its deadlines, and each sleep's
/// step for `reset`.
type Round<S> = fn(&mut Context<'_>, &mut [Pin<Box<S>>], &mut [Instant], &[Duration]);

/// Registers `n` sleeps 1-5 s out, runs one warm-up round, then times
/// `rounds` rounds; ns per sleep per round. Every sleep must stay registered.
fn registered_run<T: Side>(n: usize, rounds: usize, round: Round<T::Sleep>) -> f64 {
    let rt = current_thread();
    block_on_unconstrained(&rt, async {
        let mut rng = Rng::new(0x5e7);
        let now = Instant::now();
        let mut deadlines: Vec<Instant> = (0..n)
            .map(|_| {
                now + random_duration(&mut rng, Duration::from_secs(1), Duration::from_secs(5))
            })
            .collect();
        // Each sleep moves by its own step every round: 1 ms to 1 s later.
        let steps: Vec<Duration> = (0..n)
            .map(|_| random_duration(&mut rng, Duration::from_millis(1), Duration::from_secs(1)))
            .collect();
        let mut sleeps: Vec<Pin<Box<T::Sleep>>> = deadlines
            .iter()
            .map(|&d| Box::pin(T::sleep_until(d)))
            .collect();
        with_context(|cx| {
            for sleep in &mut sleeps {
                assert!(sleep.as_mut().poll(cx).is_pending());
            }
        })
        .await;
        assert_eq!(
            T::pending().unwrap_or(n),
            n,
            "{}: not every sleep registered",
            T::NAME
        );
        with_context(|cx| round(cx, &mut sleeps, &mut deadlines, &steps)).await;
        let start = std::time::Instant::now();
        for _ in 0..rounds {
            with_context(|cx| round(cx, &mut sleeps, &mut deadlines, &steps)).await;
        }
        let ns = nanos_per(start.elapsed(), n * rounds);
        assert_eq!(
            T::pending().unwrap_or(n),
            n,
            "{}: a sleep left the wheel",
            T::NAME
        );
        ns
    })
}

#[inline(never)]
fn reset_round<T: Side>(
    cx: &mut Context<'_>,
    sleeps: &mut [Pin<Box<T::Sleep>>],
    deadlines: &mut [Instant],
    steps: &[Duration],
) {
    for ((sleep, deadline), step) in sleeps.iter_mut().zip(deadlines).zip(steps) {
        *deadline += *step;
        T::reset(sleep.as_mut(), *deadline);
        assert!(
            sleep.as_mut().poll(cx).is_pending(),
            "{}: a reset sleep completed",
            T::NAME
        );
    }
}

#[inline(never)]
fn repoll_round<T: Side>(
    cx: &mut Context<'_>,
    sleeps: &mut [Pin<Box<T::Sleep>>],
    _: &mut [Instant],
    _: &[Duration],
) {
    for sleep in sleeps {
        assert!(
            sleep.as_mut().poll(cx).is_pending(),
            "{}: a sleep 1-5 s out completed",
            T::NAME
        );
    }
}

/// `churn` from 8 tasks on a 2-worker runtime: wall time over all timers.
pub(crate) fn mt_churn(cfg: &Config) {
    let n = cfg.size.of(MT_CHURN_N, MT_TASKS * MT_CHUNK);
    let n = n - n % MT_TASKS;
    let durations: Arc<Vec<Duration>> = Arc::new(churn_durations(n));
    let runs = alternate(
        cfg.micro_runs,
        cfg.sides,
        || mt_churn_run::<Tokio>(&durations),
        || mt_churn_run::<Wheel>(&durations),
    );
    Row::median(label("mt_churn", n, MT_CHURN_N), "ns/timer", &runs, |&ns| {
        ns
    })
    .print();
}

fn mt_churn_run<T: Side>(durations: &Arc<Vec<Duration>>) -> f64 {
    let rt = multi_thread(MT_WORKERS);
    rt.block_on(async {
        // Warm-up: every task (so both workers) churns a tenth of its share.
        churn_in_tasks::<T>(durations, 10).await;
        let start = std::time::Instant::now();
        churn_in_tasks::<T>(durations, 1).await;
        let ns = nanos_per(start.elapsed(), durations.len());
        assert_eq!(T::pending().unwrap_or(0), 0, "mt_churn left timers behind");
        ns
    })
}

/// Spawns `MT_TASKS` tasks, each churning `1 / divisor` of its share.
async fn churn_in_tasks<T: Side>(durations: &Arc<Vec<Duration>>, divisor: usize) {
    let share = durations.len() / MT_TASKS;
    let tasks: Vec<_> = (0..MT_TASKS)
        .map(|i| {
            let durations = Arc::clone(durations);
            let range = i * share..i * share + share / divisor;
            tokio::spawn(tokio::task::unconstrained(async move {
                for chunk in durations[range].chunks(MT_CHUNK) {
                    with_context(|cx| churn_loop::<T>(cx, chunk)).await;
                    tokio::task::yield_now().await;
                }
            }))
        })
        .collect();
    for task in tasks {
        task.await.expect("a churn task panicked");
    }
}
