//! The workloads with many pending timers: `pending_1m` (insert, memory,
//! cancel), `steady_100k` (a server's timeouts, replaced at random) and
//! `crowded` (churn cost as the pending set grows).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Context;
use std::time::Duration;

use crate::measure::{
    chunked, columns, random_duration, run_tasks, with_context, Group, PerColumn, PerOp,
};
use crate::micro::{churn_durations, churn_loop, print_per_op};
use crate::report::{label, Row};
use crate::side::{Column, Side, Tokio, TokioAlt, Wheel, WheelTimer};
use crate::support::Rng;
use crate::Config;

const PENDING_N: usize = 1_000_000;
/// `crowded` measures churn with this many other timers pending. The last
/// one only at full size (it takes ~1-2 GB and seconds per run).
const CROWDED_PENDING: [usize; 3] = [1_000, 100_000, 10_000_000];
const CROWDED_CHURN_N: usize = 200_000;
/// `steady_100k`: timers kept pending, and how many are replaced.
const STEADY_LIVE: usize = 100_000;
const STEADY_OPS: usize = 1_000_000;

/// Pending timers spread over 10 s to 1 h: what a server's idle and request
/// timeouts look like, and enough to fill four levels of the wheel. Not
/// from 1 s: building 10^7 of them (`crowded`) takes longer than that, and
/// the first would fire before the count is checked.
pub(crate) fn spread(rng: &mut Rng) -> Duration {
    random_duration(rng, Duration::from_secs(10), Duration::from_secs(3600))
}

/// What one `pending_1m` measurement reports.
#[derive(Debug)]
pub(crate) struct PendingOut {
    insert: PerOp,
    bytes_per_timer: f64,
    cancel: PerOp,
}

/// `n` pending sleeps, boxed and polled once (each task its share): ns per
/// insert, resident bytes per timer, ns per cancel when all are dropped.
///
/// Each measurement runs in a fresh child process (this binary, re-executed
/// with `--child`). In one process the second column would allocate into
/// the heap pages the first freed (glibc keeps them mapped), and its RSS
/// delta would read near zero; a fresh process gives every column the same
/// empty heap, so the delta is what `n` timers really cost.
pub(crate) fn pending_1m(cfg: &Config) {
    let n = cfg.size.of(PENDING_N, 1000);
    let name = label("pending_1m", n, PENDING_N);
    let size_of = PerColumn([
        vec![std::mem::size_of::<<Tokio as Side>::Sleep>()],
        vec![std::mem::size_of::<<TokioAlt as Side>::Sleep>()],
        vec![std::mem::size_of::<<Wheel as Side>::Sleep>()],
        vec![std::mem::size_of::<<WheelTimer as Side>::Sleep>()],
    ]);
    Row::of(
        "pending_1m: size_of the sleep future",
        "-".to_owned(),
        "bytes",
        &size_of,
        |b| b[0] as f64,
    )
    .print();
    for &group in &cfg.groups {
        let runs = crate::measure::alternate(cfg, cfg.heavy_runs, group, |column| {
            in_child(cfg, column, group, n)
        });
        let insert = runs_map(&runs, |r| r.insert);
        let cancel = runs_map(&runs, |r| r.cancel);
        print_per_op(&format!("{name}: insert"), group, "ns/timer", &insert);
        Row::median(
            format!("{name}: resident"),
            group,
            "bytes/timer",
            &runs,
            |r| r.bytes_per_timer,
        )
        .print();
        print_per_op(
            &format!("{name}: cancel (drop all)"),
            group,
            "ns/timer",
            &cancel,
        );
    }
}

fn runs_map<R, S>(runs: &PerColumn<R>, f: impl Fn(&R) -> S) -> PerColumn<S> {
    PerColumn(runs.0.each_ref().map(|v| v.iter().map(&f).collect()))
}

/// A group as the child's command line spells it.
fn group_arg(group: Group) -> String {
    match group {
        Group::Ct => "ct".to_owned(),
        Group::CtTime => "ct-time".to_owned(),
        Group::Mt(w) => format!("mt:{w}"),
    }
}

fn in_child(cfg: &Config, column: Column, group: Group, n: usize) -> PendingOut {
    let stdout = crate::measure::child_stdout(&[
        "pending_1m",
        column.name(),
        &group_arg(group),
        &n.to_string(),
        &cfg.tasks_per_worker.to_string(),
    ]);
    let field = |key: &str| -> f64 {
        stdout
            .split_whitespace()
            .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("pending_1m child printed no {key}: {stdout}"))
    };
    PendingOut {
        insert: PerOp {
            wall_ns: field("insert_wall"),
            cpu_ns: field("insert_cpu"),
        },
        bytes_per_timer: field("bytes_per_timer"),
        cancel: PerOp {
            wall_ns: field("cancel_wall"),
            cpu_ns: field("cancel_cpu"),
        },
    }
}

/// The child's side of [`pending_1m`]:
/// `--child pending_1m <column> <ct|ct-time|mt:W> <n> <tasks per worker>`.
pub(crate) fn child(args: &[String]) {
    let [column, group, n, per_worker] = args else {
        panic!("usage: --child pending_1m <column> <group> <n> <tasks per worker>");
    };
    let group = match group.as_str() {
        "ct" => Group::Ct,
        "ct-time" => Group::CtTime,
        mt => Group::Mt(
            mt.strip_prefix("mt:")
                .and_then(|w| w.parse().ok())
                .expect("a group"),
        ),
    };
    let n: usize = n.parse().expect("n");
    let cfg = Config {
        tasks_per_worker: per_worker.parse().expect("tasks per worker"),
        ..Config::default()
    };
    let column = crate::side::column_named(column).expect("a column");
    let out = columns!(&cfg, 1, group, |T| {
        if column == T::COLUMN {
            Some(pending_run::<T>(&cfg, group, n))
        } else {
            None
        }
    })
    .0
    .into_iter()
    .flatten()
    .flatten()
    .next()
    .expect("the column ran");
    println!(
        "insert_wall={} insert_cpu={} bytes_per_timer={} cancel_wall={} cancel_cpu={}",
        out.insert.wall_ns,
        out.insert.cpu_ns,
        out.bytes_per_timer,
        out.cancel.wall_ns,
        out.cancel.cpu_ns
    );
}

fn pending_run<T: Side>(cfg: &Config, group: Group, n: usize) -> PendingOut {
    let (snaps, _) = run_tasks::<T, _, _>(cfg, group, 2, |ctx| async move {
        let share = ctx.share(n);
        let mut rng = Rng::new(0x1e6 + ctx.index as u64);
        let durations: Vec<Duration> = share.clone().map(|_| spread(&mut rng)).collect();
        // Allocated and written before the baseline, so that the holder
        // itself (8 bytes a timer) is not counted as the timers' memory.
        let mut held: Vec<Option<Pin<Box<T::Sleep>>>> = share.map(|_| None).collect();
        // Warm-up outside the baseline: creates wheel's default timer and
        // touches tokio's time driver.
        with_context(|cx| churn_loop::<T>(cx, &ctx.timer, &churn_durations(100))).await;
        ctx.lines.cross().await;
        chunked(ctx.tasks, 0..held.len(), |cx, r| {
            insert_all::<T>(cx, &ctx.timer, &mut held[r.clone()], &durations[r])
        })
        .await;
        ctx.lines.cross().await;
        chunked(ctx.tasks, 0..held.len(), |_, r| {
            held[r].iter_mut().for_each(|sleep| *sleep = None)
        })
        .await;
    });
    snaps[1].expect_pending(n, "pending_1m: not every sleep registered");
    snaps[2].expect_pending(0, "pending_1m: cancelled sleeps left behind");
    PendingOut {
        insert: PerOp::between(&snaps[0], &snaps[1], n),
        bytes_per_timer: snaps[1].rss.saturating_sub(snaps[0].rss) as f64 / n as f64,
        cancel: PerOp::between(&snaps[1], &snaps[2], n),
    }
}

#[inline(never)]
fn insert_all<T: Side>(
    cx: &mut Context<'_>,
    timer: &T::Timer,
    held: &mut [Option<Pin<Box<T::Sleep>>>],
    durations: &[Duration],
) {
    for (slot, &d) in held.iter_mut().zip(durations) {
        *slot = Some(registered::<T>(cx, timer, d));
    }
}

/// What one `steady_100k` measurement reports.
#[derive(Debug)]
pub(crate) struct SteadyOut {
    replace: PerOp,
    longest_us: f64,
}

/// A server's timeouts in a steady state: 100,000 sleeps pending, 30 to 31 s
/// out (each task its share), and each operation registers a new one and
/// drops one of the pending ones at random (a request's timeout set,
/// another's dropped when its response came). Drops come from anywhere in
/// the wheel's lists, unlike `pending_1m`'s, which come in the order the
/// sleeps were made. Reports ns per operation, and the longest single
/// operation in a second pass that times each one: a timer that stops the
/// world now and then shows there.
pub(crate) fn steady_100k(cfg: &Config) {
    let live = cfg.size.of(STEADY_LIVE, 1000);
    let ops = cfg.size.of(STEADY_OPS, 1000);
    let name = label("steady_100k", live, STEADY_LIVE);
    for &group in &cfg.groups {
        if group == Group::CtTime {
            continue;
        }
        let runs = columns!(cfg, cfg.heavy_runs, group, |T| steady_run::<T>(
            cfg, group, live, ops
        ));
        print_per_op(
            &format!("{name}: replace one"),
            group,
            "ns/op",
            &runs_map(&runs, |r| r.replace),
        );
        Row::median(format!("{name}: longest op"), group, "µs", &runs, |r| {
            r.longest_us
        })
        .print();
    }
}

fn steady_run<T: Side>(cfg: &Config, group: Group, live: usize, ops: usize) -> SteadyOut {
    let (snaps, longest) = run_tasks::<T, _, _>(cfg, group, 2, |ctx| async move {
        let live = ctx.share(live).len();
        let ops = ctx.share(ops).len();
        let mut rng = Rng::new(0x57ead + ctx.index as u64);
        let mut picks = Rng::new(0x91c5 + ctx.index as u64);
        let mut held: Vec<Pin<Box<T::Sleep>>> = Vec::with_capacity(live);
        with_context(|cx| {
            while held.len() < live {
                held.push(registered::<T>(cx, &ctx.timer, steady_delay(&mut rng)));
            }
        })
        .await;
        let delays: Vec<Duration> = (0..ops).map(|_| steady_delay(&mut rng)).collect();
        let slots: Vec<usize> = (0..ops)
            .map(|_| picks.between(0, live as u64 - 1) as usize)
            .collect();
        // Warm-up, then the timed pass, then the pass that times each op.
        chunked(ctx.tasks, 0..ops / 10, |cx, r| {
            replace_loop::<T>(cx, &ctx.timer, &mut held, &delays[r.clone()], &slots[r])
        })
        .await;
        ctx.lines.cross().await;
        chunked(ctx.tasks, 0..ops, |cx, r| {
            replace_loop::<T>(cx, &ctx.timer, &mut held, &delays[r.clone()], &slots[r])
        })
        .await;
        ctx.lines.cross().await;
        let mut longest = std::time::Duration::ZERO;
        chunked(ctx.tasks, 0..ops, |cx, r| {
            for i in r {
                let start = std::time::Instant::now();
                held[slots[i]] = registered::<T>(cx, &ctx.timer, delays[i]);
                longest = longest.max(start.elapsed());
            }
        })
        .await;
        longest
    });
    snaps[1].expect_pending(live, "steady_100k: drifted");
    SteadyOut {
        replace: PerOp::between(&snaps[0], &snaps[1], ops),
        longest_us: longest.iter().max().expect("a task").as_secs_f64() * 1e6,
    }
}

fn steady_delay(rng: &mut Rng) -> Duration {
    random_duration(rng, Duration::from_secs(30), Duration::from_secs(31))
}

/// A boxed sleep `delay` out, polled once so that it is registered.
fn registered<T: Side>(
    cx: &mut Context<'_>,
    timer: &T::Timer,
    delay: Duration,
) -> Pin<Box<T::Sleep>> {
    let mut sleep = Box::pin(T::sleep(timer, delay));
    assert!(sleep.as_mut().poll(cx).is_pending());
    sleep
}

/// Registers a sleep per delay, each replacing (and so dropping) the held
/// one at the matching slot.
#[inline(never)]
fn replace_loop<T: Side>(
    cx: &mut Context<'_>,
    timer: &T::Timer,
    held: &mut [Pin<Box<T::Sleep>>],
    delays: &[Duration],
    slots: &[usize],
) {
    for (&delay, &slot) in delays.iter().zip(slots) {
        held[slot] = registered::<T>(cx, timer, delay);
    }
}

/// `churn` with 10^3, 10^5 and 10^7 other timers pending (each task its
/// share of both). One run grows the pending set from one size to the next
/// and times churn at each, so it builds 10^7 timers once per run rather
/// than three times.
pub(crate) fn crowded(cfg: &Config) {
    let sizes: Vec<usize> = CROWDED_PENDING
        .into_iter()
        .filter(|&k| k < 10_000_000 || cfg.size.scale >= 1.0)
        .collect();
    let n = cfg.size.of(CROWDED_CHURN_N, 1000);
    let durations = Arc::new(churn_durations(n));
    for &group in &cfg.groups {
        if group == Group::CtTime {
            continue;
        }
        let runs = columns!(cfg, cfg.heavy_runs, group, |T| crowded_run::<T>(
            cfg, group, &sizes, &durations
        ));
        let name = label("crowded: churn", n, CROWDED_CHURN_N);
        for (i, &k) in sizes.iter().enumerate() {
            let at = runs_map(&runs, |r| r[i]);
            print_per_op(&format!("{name}, {k} pending"), group, "ns/timer", &at);
        }
        let last = sizes.len() - 1;
        Row::median(
            format!("crowded: CPU@{} / CPU@{}", sizes[last], sizes[0]),
            group,
            "ratio",
            &runs,
            |r| r[last].cpu_ns / r[0].cpu_ns,
        )
        .without_ratio()
        .print();
    }
}

fn crowded_run<T: Side>(
    cfg: &Config,
    group: Group,
    sizes: &[usize],
    durations: &Arc<Vec<Duration>>,
) -> Vec<PerOp> {
    let n = durations.len();
    let lines = 2 * sizes.len();
    let sizes_owned = sizes.to_vec();
    let (snaps, _) = run_tasks::<T, _, _>(cfg, group, lines, |ctx| {
        let durations = Arc::clone(durations);
        let sizes = sizes_owned.clone();
        async move {
            let mut rng = Rng::new(0x5ca1e + ctx.index as u64);
            let mut background: Vec<Pin<Box<T::Sleep>>> = Vec::new();
            let share = ctx.share(n);
            for k in sizes {
                let mine = ctx.share(k).len();
                chunked(ctx.tasks, background.len()..mine, |cx, r| {
                    for _ in r {
                        background.push(registered::<T>(cx, &ctx.timer, spread(&mut rng)));
                    }
                })
                .await;
                let warm = share.start..share.start + share.len() / 10;
                chunked(ctx.tasks, warm, |cx, r| {
                    churn_loop::<T>(cx, &ctx.timer, &durations[r])
                })
                .await;
                ctx.lines.cross().await;
                chunked(ctx.tasks, share.clone(), |cx, r| {
                    churn_loop::<T>(cx, &ctx.timer, &durations[r])
                })
                .await;
                ctx.lines.cross().await;
            }
        }
    });
    sizes
        .iter()
        .enumerate()
        .map(|(i, &k)| {
            snaps[2 * i + 1].expect_pending(k, "crowded: pending count drifted");
            PerOp::between(&snaps[2 * i], &snaps[2 * i + 1], n)
        })
        .collect()
}
