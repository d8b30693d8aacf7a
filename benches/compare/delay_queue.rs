//! The `DelayQueue` group: tokio-util's `DelayQueue` (the `tokio` column)
//! against `wheel::DelayQueue` (`wheel`: on the default timer; `timer`: on
//! an explicit one), the same work in one process (`queue.rs` has the
//! columns).
//!
//! - `delay_queue`: 200,000 entries 1-60 s out on a paused clock (half by
//!   `insert`, half by `insert_at`), then half of them reset, a quarter
//!   removed, and the rest drained as the runtime advances the clock;
//!   resident bytes per entry in a fresh child process per measurement;
//!   and 20,000 entries 1-50 ms out drained in real time on both runtime
//!   flavours (lateness, CPU per entry).
//!
//! `session.rs` has the group's other workload, `delay_queue_session`.
//!
//! One queue is one task's (it is `&mut` to use), so every run has one
//! task; the multi-thread rows say what a runtime with idle workers costs
//! around it. The tasks run under `unconstrained`, as everywhere in this
//! bench (see `measure::with_context`).

use std::future::poll_fn;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::Poll;
use std::time::Duration;

use tokio::runtime::Runtime;
use tokio::time::Instant;

use crate::measure::{columns, percentile, random_duration, signed_nanos, Group, PerColumn, PerOp};
use crate::proc_stats;
use crate::queue::QueueSide;
use crate::report::{label, Row};
use crate::side::Column;
use crate::support::Rng;
use crate::Config;

/// Entries of the paused-clock workload and of the resident measurement.
const ENTRIES_N: usize = 200_000;
/// Entries drained in real time.
const REAL_N: usize = 20_000;
/// The paused-clock rows' group label.
pub(crate) const PAUSED: &str = "ct, paused";

/// Whether this process has built a paused runtime. From the first pause
/// on, tokio (with `test-util`, as the bench builds it) reads every
/// `tokio::time::Instant::now()` inside a runtime through
/// `Handle::try_current` (a count every worker shares) and the clock's
/// mutex, for good (`DID_PAUSE_CLOCK` in tokio's `time/clock.rs`): 23 ns
/// more a `tower_ready` call on one thread, 220 on two busy workers
/// (Xeon). A program without `test-util`, any user's release build, never
/// pays that; so every real-clock row runs before the first paused one
/// (the order of `WORKLOADS`, and of [`delay_queue`]'s own rows), and
/// `Group::runtime` refuses to build a real-clock runtime after one.
pub(crate) static PAUSED_ONCE: AtomicBool = AtomicBool::new(false);

/// A fresh current-thread runtime as `#[tokio::test(start_paused = true)]`
/// builds one (with every driver, as in the rest of the bench): the clock
/// stands still until every task is idle, then jumps to the next timer.
/// Only after every real-clock row: see [`PAUSED_ONCE`].
pub(crate) fn paused_runtime() -> Runtime {
    PAUSED_ONCE.store(true, Ordering::Relaxed);
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("a paused runtime")
}

/// The wall clock and the process's CPU time, read while only this thread
/// (a current-thread runtime's) runs: `sampled` reads from another thread
/// while this one blocks, so this one's time is exact.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Mark {
    wall: std::time::Instant,
    cpu_ns: u64,
}

impl Mark {
    pub(crate) fn now() -> Mark {
        let cpu_ns = proc_stats::sampled(|_| true).cpu_ns;
        Mark {
            wall: std::time::Instant::now(),
            cpu_ns,
        }
    }

    /// Per operation from `self` to `later` (which reads its CPU time
    /// before its wall clock, so the window holds neither reading).
    pub(crate) fn per_op(&self, later: &Mark, ops: usize) -> PerOp {
        PerOp {
            wall_ns: (later.wall - self.wall).as_nanos() as f64 / ops as f64,
            cpu_ns: later.cpu_ns.saturating_sub(self.cpu_ns) as f64 / ops as f64,
        }
    }
}

/// What one paused-clock run reports, per operation.
#[derive(Debug)]
struct PausedOut {
    insert: PerOp,
    insert_at: PerOp,
    reset: PerOp,
    remove: PerOp,
    drain: PerOp,
}

/// The work of one paused-clock run, the same for every column.
struct Plan {
    /// `insert` timeouts (the first half) and `insert_at` offsets from the
    /// start (the second half), 1-60 s.
    delays: Vec<Duration>,
    /// Entries reset (half, each to a new 1-60 s timeout) and removed (a
    /// quarter, drawn independently, so some were reset and some not).
    resets: Vec<(usize, Duration)>,
    removes: Vec<usize>,
}

impl Plan {
    fn new(n: usize, seed: u64) -> Plan {
        let mut rng = Rng::new(seed);
        let minute =
            |rng: &mut Rng| random_duration(rng, Duration::from_secs(1), Duration::from_secs(60));
        let delays = (0..n).map(|_| minute(&mut rng)).collect();
        let resets = shuffled(n, &mut rng)[..n / 2]
            .iter()
            .map(|&i| (i, minute(&mut rng)))
            .collect();
        let removes = shuffled(n, &mut rng)[..n / 4].to_vec();
        Plan {
            delays,
            resets,
            removes,
        }
    }
}

/// `0..n` in a random order (Fisher-Yates).
fn shuffled(n: usize, rng: &mut Rng) -> Vec<usize> {
    let mut v: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        v.swap(i, rng.between(0, i as u64) as usize);
    }
    v
}

/// `delay_queue`: the real-time drains, then the paused-clock rows and the
/// resident bytes.
pub(crate) fn delay_queue(cfg: &Config) {
    let n = cfg.size.of(ENTRIES_N, 1000);
    let name = label("delay_queue", n, ENTRIES_N);
    // The real-clock rows first: see `PAUSED_ONCE`.
    let real_n = cfg.size.of(REAL_N, 1000);
    let real_name = label("delay_queue: real time", real_n, REAL_N);
    for &group in &cfg.groups {
        if group == Group::CtTime {
            continue;
        }
        let runs = columns!(cfg, cfg.micro_runs, group, |T| real_run::<T>(group, real_n));
        Row::median(format!("{real_name}: late p50"), group, "µs", &runs, |r| {
            r.p50_us
        })
        .print();
        Row::median(format!("{real_name}: late p99"), group, "µs", &runs, |r| {
            r.p99_us
        })
        .print();
        Row::median(format!("{real_name}: CPU"), group, "ns/entry", &runs, |r| {
            r.cpu_ns
        })
        .print();
        Row::sum(
            format!("{real_name}: early"),
            group,
            "count, all runs",
            &runs,
            |r| r.early as f64,
        )
        .print();
    }
    let plan = Plan::new(n, 0xd0e);
    // Paused rows: the same runtime for every column, so `Group::Ct` (which
    // also leaves out tokio-alt, a multi-thread timer).
    let runs = columns!(cfg, cfg.micro_runs, Group::Ct, |T| paused_run::<T>(&plan));
    let each = |f: fn(&PausedOut) -> PerOp| {
        PerColumn(runs.0.each_ref().map(|v| v.iter().map(f).collect()))
    };
    for (what, unit, rows) in [
        ("insert", "ns/entry", each(|r| r.insert)),
        ("insert_at", "ns/entry", each(|r| r.insert_at)),
        ("reset", "ns/reset", each(|r| r.reset)),
        ("remove", "ns/remove", each(|r| r.remove)),
        ("drain", "ns/entry", each(|r| r.drain)),
    ] {
        per_op(&format!("{name}: {what}"), PAUSED, unit, &rows);
    }
    let resident =
        crate::measure::alternate(cfg, cfg.heavy_runs, Group::Ct, |column| in_child(column, n));
    Row::of(
        format!("{name}: resident"),
        PAUSED.to_owned(),
        "bytes/entry",
        &resident,
        |v| crate::support::median(v.to_vec()),
    )
    .print();
}

/// A paused-clock pair of wall and CPU rows, with `group` as given.
pub(crate) fn per_op(name: &str, group: &str, unit: &'static str, runs: &PerColumn<PerOp>) {
    let median = |metric: fn(&PerOp) -> f64| {
        move |v: &[PerOp]| crate::support::median(v.iter().map(metric).collect())
    };
    Row::of(
        format!("{name}: wall"),
        group.to_owned(),
        unit,
        runs,
        median(|r| r.wall_ns),
    )
    .print();
    Row::of(
        format!("{name}: CPU"),
        group.to_owned(),
        unit,
        runs,
        median(|r| r.cpu_ns),
    )
    .print();
}

fn paused_run<T: QueueSide>(plan: &Plan) -> PausedOut {
    let n = plan.delays.len();
    let half = n / 2;
    paused_runtime().block_on(tokio::task::unconstrained(async {
        let timer = T::timer();
        warm_up::<T>(&timer).await;
        let start = Instant::now();
        let deadlines: Vec<Instant> = plan.delays[half..].iter().map(|&d| start + d).collect();
        let mut keys = Vec::with_capacity(n);
        let mut queue = T::queue(&timer);
        let m0 = Mark::now();
        insert_loop::<T>(&mut queue, &plan.delays[..half], &mut keys);
        let m1 = Mark::now();
        insert_at_loop::<T>(&mut queue, half as u64, &deadlines, &mut keys);
        let m2 = Mark::now();
        reset_loop::<T>(&mut queue, &keys, &plan.resets);
        let m3 = Mark::now();
        remove_loop::<T>(&mut queue, &keys, &plan.removes);
        let m4 = Mark::now();
        let drained = drain::<T>(&mut queue, |v, _| {
            black_box(v);
        })
        .await;
        let m5 = Mark::now();
        assert_eq!(
            drained,
            n - plan.removes.len(),
            "{}: drained",
            T::COLUMN.name()
        );
        PausedOut {
            insert: m0.per_op(&m1, half),
            insert_at: m1.per_op(&m2, n - half),
            reset: m2.per_op(&m3, plan.resets.len()),
            remove: m3.per_op(&m4, plan.removes.len()),
            drain: m4.per_op(&m5, drained),
        }
    }))
}

/// Runs every call once on a small queue: the default timer is made, the
/// code paths are warm. The clock moves on (it is paused, so at no cost).
async fn warm_up<T: QueueSide>(timer: &T::Timer) {
    let plan = Plan::new(2000, 0x3a7);
    let mut queue = T::queue(timer);
    let mut keys = Vec::new();
    insert_loop::<T>(&mut queue, &plan.delays, &mut keys);
    reset_loop::<T>(&mut queue, &keys, &plan.resets);
    remove_loop::<T>(&mut queue, &keys, &plan.removes);
    drain::<T>(&mut queue, |_, _| {}).await;
}

#[inline(never)]
fn insert_loop<T: QueueSide>(queue: &mut T::Queue, delays: &[Duration], keys: &mut Vec<T::Key>) {
    for (i, &d) in delays.iter().enumerate() {
        keys.push(T::insert(queue, i as u64, d));
    }
}

#[inline(never)]
fn insert_at_loop<T: QueueSide>(
    queue: &mut T::Queue,
    first: u64,
    deadlines: &[Instant],
    keys: &mut Vec<T::Key>,
) {
    for (i, &at) in deadlines.iter().enumerate() {
        keys.push(T::insert_at(queue, first + i as u64, at));
    }
}

#[inline(never)]
fn reset_loop<T: QueueSide>(queue: &mut T::Queue, keys: &[T::Key], resets: &[(usize, Duration)]) {
    for &(i, d) in resets {
        T::reset_entry(queue, &keys[i], d);
    }
}

#[inline(never)]
fn remove_loop<T: QueueSide>(queue: &mut T::Queue, keys: &[T::Key], removes: &[usize]) {
    for &i in removes {
        assert_eq!(T::remove(queue, &keys[i]), i as u64);
    }
}

/// Takes every entry out as it expires, until the queue is empty: each poll
/// takes all that are ready, then waits. Returns how many came out.
#[inline(never)]
async fn drain<T: QueueSide>(queue: &mut T::Queue, mut each: impl FnMut(u64, Instant)) -> usize {
    let mut count = 0;
    poll_fn(|cx| loop {
        match T::poll_expired(queue, cx) {
            Poll::Ready(Some((value, deadline))) => {
                each(value, deadline);
                count += 1;
            }
            Poll::Ready(None) => return Poll::Ready(()),
            Poll::Pending => return Poll::Pending,
        }
    })
    .await;
    count
}

/// Resident bytes per entry: `n` entries 1-60 s out in a fresh child
/// process (see `pending::pending_1m` for why a fresh one).
fn in_child(column: Column, n: usize) -> f64 {
    let stdout = crate::measure::child_stdout(&["delay_queue", column.name(), &n.to_string()]);
    stdout
        .split_whitespace()
        .find_map(|kv| kv.strip_prefix("bytes_per_entry="))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("delay_queue child printed no bytes_per_entry: {stdout}"))
}

/// The child's side: `--child delay_queue <column> <n>`.
pub(crate) fn child(args: &[String]) {
    let (column, n) = crate::measure::column_and_n("delay_queue", args);
    // Not through `columns!`: that retries a disturbed run, and the parent
    // already does (a child that waited for a quiet machine too would wait
    // twice).
    let bytes = match column {
        Column::Tokio => resident::<crate::side::Tokio>(n),
        Column::TokioAlt => resident::<crate::side::TokioAlt>(n),
        Column::Wheel => resident::<crate::side::Wheel>(n),
        Column::Timer => resident::<crate::side::WheelTimer>(n),
    };
    println!("bytes_per_entry={bytes}");
}

fn resident<T: QueueSide>(n: usize) -> f64 {
    // Only what stays allocated is made before the baseline: a large block
    // freed here would raise glibc's mmap threshold, and the slab's early
    // growth would then copy within the heap, leaving freed copies
    // resident and counted (which moved the wheel's figure by 8 bytes an
    // entry and tokio-util's by none).
    let mut rng = Rng::new(0x4e5);
    let delays: Vec<Duration> = (0..n)
        .map(|_| random_duration(&mut rng, Duration::from_secs(1), Duration::from_secs(60)))
        .collect();
    paused_runtime().block_on(async {
        let timer = T::timer();
        warm_up::<T>(&timer).await;
        // The keys' holder is written before the baseline, so that it is
        // not counted as the queue's memory.
        let mut keys: Vec<Option<T::Key>> = vec![None; n];
        let mut queue = T::queue(&timer);
        let before = crate::measure::rss_bytes();
        for (i, (&d, key)) in delays.iter().zip(&mut keys).enumerate() {
            *key = Some(T::insert(&mut queue, i as u64, d));
        }
        let after = crate::measure::rss_bytes();
        assert_eq!(T::len(&queue), n);
        black_box(&keys);
        after.saturating_sub(before) as f64 / n as f64
    })
}

/// What one real-time run reports.
#[derive(Debug)]
struct RealOut {
    p50_us: f64,
    p99_us: f64,
    cpu_ns: f64,
    early: usize,
}

/// `n` entries 1-50 ms out, inserted by one task and drained as they
/// expire, in real time: each entry's lateness (when the drain got it
/// minus the deadline asked for), and the process's CPU time from the first insert
/// to the last entry, per entry.
fn real_run<T: QueueSide>(group: Group, n: usize) -> RealOut {
    let mut rng = Rng::new(0x4ea1);
    let delays: Vec<Duration> = (0..n)
        .map(|_| {
            random_duration(
                &mut rng,
                Duration::from_millis(1),
                Duration::from_millis(50),
            )
        })
        .collect();
    let rt = group.runtime::<T>();
    let (cpu_ns, mut lateness) = rt.block_on(async move {
        let timer = T::timer();
        let task = tokio::spawn(tokio::task::unconstrained(async move {
            warm_up_real::<T>(&timer).await;
            let mut lateness = Vec::with_capacity(delays.len());
            let mut queue = T::queue(&timer);
            // Each entry's lateness is measured from the deadline asked
            // for, the clock read just before its insert plus its delay,
            // the same for every column: not from `Expired::deadline`,
            // which tokio-util's queue gives rounded up to its millisecond
            // (up to a millisecond after the one asked for) and the crate's
            // as asked. The reads cost every column alike.
            let mut asked = Vec::with_capacity(delays.len());
            let cpu_before = proc_stats::sampled(|_| true).cpu_ns;
            for (i, &d) in delays.iter().enumerate() {
                asked.push(Instant::now() + d);
                T::insert(&mut queue, i as u64, d);
            }
            drain::<T>(&mut queue, |i, _| {
                lateness.push(signed_nanos(Instant::now(), asked[i as usize]));
            })
            .await;
            (cpu_before, lateness)
        }));
        let (cpu_before, lateness) = task.await.expect("the drain task panicked");
        // Time for the workers to park (see `measure::Snapshot::take`).
        std::thread::sleep(Duration::from_millis(3));
        (proc_stats::sampled(|_| true).cpu_ns - cpu_before, lateness)
    });
    drop(rt);
    lateness.sort_unstable();
    RealOut {
        p50_us: percentile(&lateness, 50.0) as f64 / 1e3,
        p99_us: percentile(&lateness, 99.0) as f64 / 1e3,
        cpu_ns: cpu_ns as f64 / n as f64,
        early: lateness.iter().filter(|&&l| l < 0).count(),
    }
}

/// A few entries through the queue in real time, so that the default timer
/// exists and its driver runs before the measured drain.
async fn warm_up_real<T: QueueSide>(timer: &T::Timer) {
    let mut queue = T::queue(timer);
    for i in 0..100 {
        T::insert(&mut queue, i, Duration::from_micros(100 + 10 * i));
    }
    drain::<T>(&mut queue, |_, _| {}).await;
}
