//! `fire_200k`: timers that actually fire, on both runtime flavours.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::measure::{columns, percentile, random_duration, signed_nanos, Group};
use crate::proc_stats;
use crate::report::{label, Row};
use crate::side::Side;
use crate::support::Rng;
use crate::Config;

const FIRE_N: usize = 200_000;

/// What one run reports.
#[derive(Debug)]
struct FireOut {
    wall_s: f64,
    cpu_s: f64,
    p50_ms: f64,
    p99_ms: f64,
    max_ms: f64,
    /// From the first task's first poll to the last's: the sleeps due
    /// before it ends wait behind the first polls still queued (see
    /// `benches/README.md`, "What `fire_200k`'s tail measures").
    first_polls_ms: f64,
    early: usize,
}

/// 200,000 tasks, each sleeping a random 1-500 ms: wall and CPU time from
/// the first spawn to the last join, and each task's lateness (when it ran
/// again minus its deadline). A cold start on every column: the explicit
/// timer is built, and the default one created, inside the timed region.
pub(crate) fn fire_200k(cfg: &Config) {
    let n = cfg.size.of(FIRE_N, 1000);
    let mut rng = Rng::new(0xf1e);
    let durations: Arc<Vec<Duration>> = Arc::new(
        (0..n)
            .map(|_| {
                random_duration(
                    &mut rng,
                    Duration::from_millis(1),
                    Duration::from_millis(500),
                )
            })
            .collect(),
    );
    for &group in &cfg.groups {
        if group == Group::CtTime {
            continue;
        }
        let runs = columns!(cfg, cfg.heavy_runs, group, |T| fire_run::<T>(
            group, &durations
        ));
        let name = label("fire_200k", n, FIRE_N);
        Row::median(format!("{name}: wall"), group, "s", &runs, |r| r.wall_s).print();
        Row::median(format!("{name}: CPU"), group, "s", &runs, |r| r.cpu_s).print();
        Row::median(format!("{name}: late p50"), group, "ms", &runs, |r| {
            r.p50_ms
        })
        .print();
        Row::median(format!("{name}: late p99"), group, "ms", &runs, |r| {
            r.p99_ms
        })
        .print();
        Row::median(format!("{name}: late max"), group, "ms", &runs, |r| {
            r.max_ms
        })
        .print();
        Row::median(format!("{name}: first polls"), group, "ms", &runs, |r| {
            r.first_polls_ms
        })
        .print();
        Row::sum(
            format!("{name}: early"),
            group,
            "count, all runs",
            &runs,
            |r| r.early as f64,
        )
        .print();
    }
}

fn fire_run<T: Side>(group: Group, durations: &Arc<Vec<Duration>>) -> FireOut {
    let rt = group.runtime::<T>();
    let (wall, cpu_ns, done) = rt.block_on(async {
        let cpu_before = proc_stats::sampled(|_| true).cpu_ns;
        let start = std::time::Instant::now();
        let timer = T::timer();
        let tasks: Vec<_> = durations
            .iter()
            .map(|&d| tokio::spawn(sleeper::<T>(timer.clone(), d)))
            .collect();
        let mut done = Vec::with_capacity(tasks.len());
        for task in tasks {
            done.push(task.await.expect("a sleeper panicked"));
        }
        let wall = start.elapsed();
        // Time for the workers to park (see `measure::Snapshot::take`).
        std::thread::sleep(std::time::Duration::from_millis(3));
        let cpu = proc_stats::sampled(|_| true).cpu_ns - cpu_before;
        (wall, cpu, done)
    });
    drop(rt);
    let first = done.iter().map(|&(_, at)| at).min().expect("n > 0");
    let last = done.iter().map(|&(_, at)| at).max().expect("n > 0");
    let mut lateness: Vec<i64> = done.iter().map(|&(late, _)| late).collect();
    lateness.sort_unstable();
    let ms = |nanos: i64| nanos as f64 / 1e6;
    FireOut {
        wall_s: wall.as_secs_f64(),
        cpu_s: cpu_ns as f64 / 1e9,
        p50_ms: ms(percentile(&lateness, 50.0)),
        p99_ms: ms(percentile(&lateness, 99.0)),
        max_ms: ms(*lateness.last().expect("n > 0")),
        first_polls_ms: (last - first).as_secs_f64() * 1e3,
        early: lateness.iter().filter(|&&l| l < 0).count(),
    }
}

/// Sleeps `d` from its first poll; returns how late it woke, in signed ns
/// (negative: early), and when its first poll ran (the clock reading it
/// takes its deadline from anyway).
async fn sleeper<T: Side>(timer: T::Timer, d: Duration) -> (i64, Instant) {
    let polled = Instant::now();
    let deadline = polled + d;
    T::sleep_until(&timer, deadline).await;
    (signed_nanos(Instant::now(), deadline), polled)
}
