//! The per-call workloads: `timeout_ready`, `churn` (and its scaling row),
//! `timeout_yield`, `reset` and `repoll`.
//!
//! Each run builds a fresh runtime (so each column starts with an empty
//! timer), spreads the work over the group's tasks, warms up with a tenth of
//! it, then reads the wall clock and the process's CPU time around the rest
//! (see `measure::run_tasks`). The timed loops are `#[inline(never)]`
//! functions so a profiler can collect exactly them
//! (`callgrind --toggle-collect`).

use std::future::Future;
use std::hint::black_box;
use std::pin::{pin, Pin};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::Instant;

use crate::measure::{chunked, columns, random_duration, run_tasks, Group, PerColumn, PerOp};
use crate::report::{label, Row};
use crate::side::{Column, Side};
use crate::support::{median, Rng};
use crate::Config;

/// The timeout every `timeout_*` workload uses.
const TIMEOUT: Duration = Duration::from_secs(5);

const TIMEOUT_READY_N: usize = 2_000_000;
const CHURN_N: usize = 1_000_000;
const TIMEOUT_YIELD_N: usize = 200_000;
/// Sleeps kept registered by `reset` and `repoll`, and their timed rounds.
const REGISTERED_N: usize = 100_000;
const REGISTERED_ROUNDS: usize = 10;

/// Prints a workload's wall and CPU rows for one group.
pub(crate) fn print_per_op(name: &str, group: Group, unit: &'static str, runs: &PerColumn<PerOp>) {
    Row::median(format!("{name}: wall"), group, unit, runs, |r| r.wall_ns).print();
    Row::median(format!("{name}: CPU"), group, unit, runs, |r| r.cpu_ns).print();
}

/// Runs `body` (generic over the column's side `T`, for one `group`) for
/// every column of every configured group, `cfg.micro_runs` times each, and
/// prints the wall and CPU rows under `name`.
macro_rules! per_op_rows {
    ($cfg:expr, $name:expr, $unit:expr, |$t:ident, $group:ident| $body:expr) => {
        for &$group in &$cfg.groups {
            let runs = $crate::measure::columns!($cfg, $cfg.micro_runs, $group, |$t| $body);
            $crate::micro::print_per_op(&$name, $group, $unit, &runs);
        }
    };
}
pub(crate) use per_op_rows;

/// `timeout(5 s, ready)`: creating, polling (the inner future wins) and
/// dropping a timeout that never touches the timer's state.
pub(crate) fn timeout_ready(cfg: &Config) {
    let n = cfg.size.of(TIMEOUT_READY_N, 1000);
    let name = label("timeout_ready", n, TIMEOUT_READY_N);
    per_op_rows!(cfg, name, "ns/call", |T, group| timeout_ready_run::<T>(
        cfg, group, n
    ));
}

fn timeout_ready_run<T: Side>(cfg: &Config, group: Group, n: usize) -> PerOp {
    let (snaps, _) = run_tasks::<T, _, _>(cfg, group, 1, |ctx| async move {
        let share = ctx.share(n);
        let warm = share.start..share.start + share.len() / 10;
        chunked(ctx.tasks, warm, |cx, r| {
            timeout_ready_loop::<T>(cx, &ctx.timer, r)
        })
        .await;
        ctx.lines.cross().await;
        chunked(ctx.tasks, share, |cx, r| {
            timeout_ready_loop::<T>(cx, &ctx.timer, r)
        })
        .await;
    });
    PerOp::between(&snaps[0], &snaps[1], n)
}

/// What `.await` on the timeout does when the inner future is ready: one poll.
#[inline(never)]
pub(crate) fn timeout_ready_loop<T: Side>(
    cx: &mut Context<'_>,
    timer: &T::Timer,
    range: std::ops::Range<usize>,
) {
    for i in range {
        let call = pin!(T::timeout(timer, TIMEOUT, std::future::ready(black_box(i))));
        match call.poll(cx) {
            Poll::Ready(Ok(v)) if v == i => {}
            other => panic!(
                "{}: timeout of a ready future gave {other:?}",
                T::COLUMN.name()
            ),
        }
    }
}

/// Durations uniform in 1-5 s, the same for every column.
pub(crate) fn churn_durations(n: usize) -> Vec<Duration> {
    let mut rng = Rng::new(0xc4u64);
    (0..n)
        .map(|_| random_duration(&mut rng, Duration::from_secs(1), Duration::from_secs(5)))
        .collect()
}

/// `sleep(1-5 s)`, polled once so it registers, then dropped (cancelled).
///
/// Besides each group's rows, when the multi-thread group has more than one
/// worker, churn also runs on a one-worker multi-thread runtime (same tasks,
/// same yields), and the scaling row divides the CPU per churned timer with
/// every worker churning by that: a timer with nothing shared on its hot
/// path reads about 1.0, and anything above is what the workers' sharing
/// (locks, shared counters, cache lines moving between cores, wake-ups of
/// the driver) costs per timer.
pub(crate) fn churn(cfg: &Config) {
    let n = cfg.size.of(CHURN_N, 1000);
    let durations = Arc::new(churn_durations(n));
    let name = label("churn", n, CHURN_N);
    let mut groups = cfg.groups.clone();
    let workers = cfg.groups.iter().find_map(|g| match g {
        Group::Mt(w) if *w > 1 => Some(*w),
        _ => None,
    });
    if workers.is_some() {
        groups.push(Group::Mt(1));
    }
    let mut cpu_at = Vec::new();
    for group in groups {
        let runs = columns!(cfg, cfg.micro_runs, group, |T| churn_run::<T>(
            cfg, group, &durations
        ));
        print_per_op(&name, group, "ns/timer", &runs);
        if let Group::Mt(_) = group {
            // The harness's own check: CPU over wall is how many threads
            // were busy; it should read about the worker count.
            Row::median(
                format!("{name}: busy threads"),
                group,
                "CPU/wall",
                &runs,
                |r| r.cpu_ns / r.wall_ns,
            )
            .without_ratio()
            .print();
        }
        cpu_at.push((group, Column::ALL.map(|c| cpu_median(&runs, c))));
    }
    if let Some(w) = workers {
        let of = |g: Group| {
            cpu_at
                .iter()
                .find(|(group, _)| *group == g)
                .map(|(_, v)| *v)
        };
        let (all, one) = (
            of(Group::Mt(w)).expect("ran"),
            of(Group::Mt(1)).expect("ran"),
        );
        let values = Column::ALL.map(|c| {
            let (a, o) = (all[c as usize]?, one[c as usize]?);
            Some(a / o)
        });
        Row {
            workload: format!("scaling: churn CPU, {w} workers / 1"),
            group: format!("mt, {w}w / 1w"),
            unit: "ratio",
            values,
            ratio: true,
        }
        .print();
    }
}

fn cpu_median(runs: &PerColumn<PerOp>, column: Column) -> Option<f64> {
    let of = runs.of(column);
    (!of.is_empty()).then(|| median(of.iter().map(|r| r.cpu_ns).collect()))
}

fn churn_run<T: Side>(cfg: &Config, group: Group, durations: &Arc<Vec<Duration>>) -> PerOp {
    let n = durations.len();
    let (snaps, _) = run_tasks::<T, _, _>(cfg, group, 1, |ctx| {
        let durations = Arc::clone(durations);
        async move {
            let share = ctx.share(n);
            let warm = share.start..share.start + share.len() / 10;
            chunked(ctx.tasks, warm, |cx, r| {
                churn_loop::<T>(cx, &ctx.timer, &durations[r])
            })
            .await;
            ctx.lines.cross().await;
            chunked(ctx.tasks, share, |cx, r| {
                churn_loop::<T>(cx, &ctx.timer, &durations[r])
            })
            .await;
        }
    });
    snaps[1].expect_pending(0, "churn left timers behind");
    PerOp::between(&snaps[0], &snaps[1], n)
}

/// One sleep per duration: created, polled once (it registers: the
/// deadline is seconds away), dropped (it cancels).
#[inline(never)]
pub(crate) fn churn_loop<T: Side>(cx: &mut Context<'_>, timer: &T::Timer, durations: &[Duration]) {
    for &d in durations {
        let sleep = pin!(T::sleep(timer, d));
        assert!(
            sleep.poll(cx).is_pending(),
            "{}: a 1-5 s sleep completed at once",
            T::COLUMN.name()
        );
    }
}

/// `timeout(5 s, yield_now())`: the first poll registers the timeout (the
/// inner future yields), the second completes and cancels it. Includes a
/// round trip through the scheduler, the same for every column.
pub(crate) fn timeout_yield(cfg: &Config) {
    let n = cfg.size.of(TIMEOUT_YIELD_N, 1000);
    let name = label("timeout_yield", n, TIMEOUT_YIELD_N);
    per_op_rows!(cfg, name, "ns/call", |T, group| timeout_yield_run::<T>(
        cfg, group, n
    ));
}

fn timeout_yield_run<T: Side>(cfg: &Config, group: Group, n: usize) -> PerOp {
    let (snaps, _) = run_tasks::<T, _, _>(cfg, group, 1, |ctx| async move {
        let share = ctx.share(n).len();
        timeout_yield_loop::<T>(&ctx.timer, share / 10).await;
        ctx.lines.cross().await;
        timeout_yield_loop::<T>(&ctx.timer, share).await;
    });
    snaps[1].expect_pending(0, "timeout_yield left timers behind");
    PerOp::between(&snaps[0], &snaps[1], n)
}

async fn timeout_yield_loop<T: Side>(timer: &T::Timer, n: usize) {
    for _ in 0..n {
        let out = T::timeout(timer, TIMEOUT, tokio::task::yield_now()).await;
        assert!(out.is_ok(), "{}: a yield outlasted 5 s", T::COLUMN.name());
    }
}

/// 100,000 registered sleeps, each moved to a later deadline and polled, 10
/// rounds.
pub(crate) fn reset(cfg: &Config) {
    registered(cfg, "reset", "ns/reset", Step::Reset);
}

/// 100,000 registered sleeps, each polled again by the same task (as a
/// `Timeout` polls its delay whenever the inner future is pending), 10
/// rounds.
pub(crate) fn repoll(cfg: &Config) {
    registered(cfg, "repoll", "ns/poll", Step::Repoll);
}

/// What a round of [`registered`] does to each sleep.
#[derive(Debug, Clone, Copy)]
enum Step {
    Reset,
    Repoll,
}

fn registered(cfg: &Config, name: &str, unit: &'static str, step: Step) {
    let n = cfg.size.of(REGISTERED_N, 1000);
    let name = label(name, n, REGISTERED_N);
    per_op_rows!(cfg, name, unit, |T, group| registered_run::<T>(
        cfg, group, n, step
    ));
}

/// Each task registers its share of `n` sleeps 1-5 s out, runs one warm-up
/// round, then the timed rounds; ns per sleep per round. Every sleep must
/// stay registered.
fn registered_run<T: Side>(cfg: &Config, group: Group, n: usize, step: Step) -> PerOp {
    let (snaps, _) = run_tasks::<T, _, _>(cfg, group, 2, |ctx| async move {
        let share = ctx.share(n);
        let mut rng = Rng::new(0x5e7 + ctx.index as u64);
        let now = Instant::now();
        let deadlines: Vec<Instant> = share
            .clone()
            .map(|_| {
                now + random_duration(&mut rng, Duration::from_secs(1), Duration::from_secs(5))
            })
            .collect();
        // Each sleep moves by its own step every round: 1 ms to 1 s later.
        let steps: Vec<Duration> = share
            .clone()
            .map(|_| random_duration(&mut rng, Duration::from_millis(1), Duration::from_secs(1)))
            .collect();
        let mut sleeps: Vec<Pin<Box<T::Sleep>>> = deadlines
            .iter()
            .map(|&d| Box::pin(T::sleep_until(&ctx.timer, d)))
            .collect();
        chunked(ctx.tasks, 0..sleeps.len(), |cx, r| {
            for sleep in &mut sleeps[r] {
                assert!(sleep.as_mut().poll(cx).is_pending());
            }
        })
        .await;
        let mut state = (sleeps, deadlines);
        round::<T>(ctx.tasks, step, &mut state, &steps).await;
        ctx.lines.cross().await;
        for _ in 0..REGISTERED_ROUNDS {
            round::<T>(ctx.tasks, step, &mut state, &steps).await;
        }
        ctx.lines.cross().await;
    });
    snaps[0].expect_pending(n, "not every sleep registered");
    snaps[1].expect_pending(n, "a sleep left the wheel");
    PerOp::between(&snaps[0], &snaps[1], n * REGISTERED_ROUNDS)
}

/// A task's registered sleeps and their deadlines.
type Held<T> = (Vec<Pin<Box<<T as Side>::Sleep>>>, Vec<Instant>);

/// One round of `step` over a task's sleeps (and their deadlines).
async fn round<T: Side>(
    tasks: usize,
    step: Step,
    (sleeps, deadlines): &mut Held<T>,
    steps: &[Duration],
) {
    chunked(tasks, 0..sleeps.len(), |cx, r| match step {
        Step::Reset => reset_round::<T>(
            cx,
            &mut sleeps[r.clone()],
            &mut deadlines[r.clone()],
            &steps[r],
        ),
        Step::Repoll => repoll_round::<T>(cx, &mut sleeps[r]),
    })
    .await;
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
            T::COLUMN.name()
        );
    }
}

#[inline(never)]
fn repoll_round<T: Side>(cx: &mut Context<'_>, sleeps: &mut [Pin<Box<T::Sleep>>]) {
    for sleep in sleeps {
        assert!(
            sleep.as_mut().poll(cx).is_pending(),
            "{}: a sleep 1-5 s out completed",
            T::COLUMN.name()
        );
    }
}
