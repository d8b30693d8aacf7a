//! `cargo bench --bench lateness --features precise`: how late timers fire,
//! in real time, on `tokio::time`, the wheel's default timer, and a precise
//! wheel timer (`Builder::precise`, 50 µs tick) with its default slack
//! (100 µs) and with none (`slack(Duration::ZERO)`: a wake-up for every
//! tick with a timer due).
//!
//! Each run spawns N tasks (20,000; `quick`: 5,000), each sleeping a
//! duration drawn uniformly from 1 to 50 ms (the same durations for every
//! column, from a fixed seed) until a deadline taken when it starts, and
//! records how late it woke: the clock after the sleep completes, less the
//! deadline (negative: early). Rows give p50, p99 and max lateness, the
//! p99 of the sleeps due after the last of them started (spawning 20,000
//! tasks takes milliseconds, and a timer due meanwhile waits behind the
//! tasks not yet polled, on every column: this row leaves that backlog
//! out), the early count, and the process's CPU time per fired timer, on a
//! current-thread and a 2-worker runtime, both `enable_all` as
//! `#[tokio::main]` builds them. Columns alternate run by run; each figure is
//! the median of the runs.
//!
//! ```text
//! cargo bench --bench lateness --features precise             # 20,000 sleeps, 5 runs a column
//! cargo bench --bench lateness --features precise -- quick    # 5,000 sleeps, 3 runs
//! ```

#[path = "support/mod.rs"]
mod support;

#[allow(dead_code)]
#[path = "support/proc.rs"]
mod proc_stats;

use std::time::Duration;

use support::{median, Rng, Size};
use tokio::runtime::Runtime;
use tokio::time::Instant;

/// The tick of the precise column's timer.
const PRECISE_TICK: Duration = Duration::from_micros(50);

/// Which timer a column sleeps on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Column {
    Tokio,
    Wheel,
    Precise,
    NoSlack,
}

const COLUMNS: [Column; 4] = [
    Column::Tokio,
    Column::Wheel,
    Column::Precise,
    Column::NoSlack,
];

impl Column {
    fn name(self) -> &'static str {
        match self {
            Column::Tokio => "tokio",
            Column::Wheel => "wheel",
            Column::Precise => "precise",
            Column::NoSlack => "precise, no slack",
        }
    }
}

/// One sleep: when its task started, its deadline, and how late it woke
/// (nanoseconds; negative: early).
#[derive(Debug)]
struct Slept {
    start: Instant,
    deadline: Instant,
    late: i64,
}

/// What one run measured.
#[derive(Debug)]
struct Run {
    p50_us: f64,
    p99_us: f64,
    /// p99 of the sleeps due after every sleep had started.
    settled_p99_us: f64,
    max_us: f64,
    early: usize,
    cpu_us_per_timer: f64,
}

fn runtime(workers: usize) -> Runtime {
    if workers == 0 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .enable_all()
            .build()
    }
    .expect("a runtime")
}

/// One run: every duration slept in a task of its own on `column`'s timer.
fn run(column: Column, workers: usize, durations: &[Duration]) -> Run {
    let rt = runtime(workers);
    let durations = durations.to_vec();
    let n = durations.len();
    let (slept, cpu_ns) = rt.block_on(async move {
        let precise = matches!(column, Column::Precise | Column::NoSlack).then(|| {
            let builder = wheel::Timer::builder().tick(PRECISE_TICK).precise();
            match column {
                Column::NoSlack => builder.slack(Duration::ZERO),
                _ => builder,
            }
            .build()
            .expect("a precise timer (Linux, IO driver on)")
        });
        // The default timer exists before the clock starts, as a server's
        // does.
        wheel::sleep(Duration::ZERO).await;
        let before = proc_stats::sampled(|_| true);
        let tasks: Vec<_> = durations
            .into_iter()
            .map(|wait| {
                let precise = precise.clone();
                tokio::spawn(async move {
                    let start = Instant::now();
                    let deadline = start + wait;
                    match (column, &precise) {
                        (Column::Tokio, _) => tokio::time::sleep_until(deadline).await,
                        (Column::Precise | Column::NoSlack, Some(timer)) => {
                            timer.sleep_until(deadline).await
                        }
                        _ => wheel::sleep_until(deadline).await,
                    }
                    let woke = Instant::now();
                    let late = match woke.checked_duration_since(deadline) {
                        Some(late) => late.as_nanos() as i64,
                        None => -((deadline - woke).as_nanos() as i64),
                    };
                    Slept {
                        start,
                        deadline,
                        late,
                    }
                })
            })
            .collect();
        let mut slept = Vec::with_capacity(tasks.len());
        for task in tasks {
            slept.push(task.await.expect("a sleeper panicked"));
        }
        let after = proc_stats::sampled(|_| true);
        (slept, (after - before).cpu_ns)
    });
    drop(rt);
    let last_start = slept.iter().map(|s| s.start).max().expect("n > 0");
    let mut settled: Vec<i64> = slept
        .iter()
        .filter(|s| s.deadline > last_start)
        .map(|s| s.late)
        .collect();
    settled.sort_unstable();
    let mut lateness: Vec<i64> = slept.iter().map(|s| s.late).collect();
    lateness.sort_unstable();
    let us = |nanos: i64| nanos as f64 / 1e3;
    let at = |sorted: &[i64], p: f64| {
        let len = sorted.len();
        sorted[((p / 100.0 * len as f64).ceil() as usize).clamp(1, len) - 1]
    };
    Run {
        p50_us: us(at(&lateness, 50.0)),
        p99_us: us(at(&lateness, 99.0)),
        settled_p99_us: if settled.is_empty() {
            f64::NAN
        } else {
            us(at(&settled, 99.0))
        },
        max_us: us(*lateness.last().expect("n > 0")),
        early: lateness.iter().filter(|&&late| late < 0).count(),
        cpu_us_per_timer: cpu_ns as f64 / 1e3 / n as f64,
    }
}

fn main() {
    let size = std::env::args()
        .skip(1)
        .find_map(|arg| Size::parse(&arg))
        .unwrap_or_else(Size::from_env);
    let n = size.of(20_000, 1_000);
    let runs = if size.scale < 1.0 { 3 } else { 5 };
    let mut rng = Rng::new(0x1a7e);
    let durations: Vec<Duration> = (0..n)
        .map(|_| Duration::from_micros(rng.between(1_000, 50_000)))
        .collect();
    println!("# tiered-wheel lateness: timers firing in real time");
    println!();
    println!("- machine: {}", support::machine());
    println!(
        "- size: {} ({n} sleeps of 1-50 ms, uniform, fixed seed, each in a task); {runs} runs a \
         column, columns alternating, medians; `precise`: a {} µs-tick `Builder::precise()` timer, \
         default slack (100 µs) and `slack(Duration::ZERO)`",
        size.name,
        PRECISE_TICK.as_micros()
    );
    println!("- runtimes: `enable_all`, as `#[tokio::main]` builds them");
    println!();
    println!("| runtime | measure | tokio | wheel | precise | precise, no slack |");
    println!("|---|---|--:|--:|--:|--:|");
    for (flavour, workers) in [("current_thread", 0), ("2 workers", 2)] {
        let mut results: Vec<Vec<Run>> = COLUMNS.iter().map(|_| Vec::new()).collect();
        for round in 0..runs {
            for turn in 0..COLUMNS.len() {
                let column = (round + turn) % COLUMNS.len();
                results[column].push(run(COLUMNS[column], workers, &durations));
            }
        }
        let row = |measure: &str, unit: &str, metric: &dyn Fn(&Run) -> f64| {
            let cells: Vec<String> = results
                .iter()
                .map(|runs| format!("{:.1}", median(runs.iter().map(metric).collect())))
                .collect();
            println!("| {flavour} | {measure} ({unit}) | {} |", cells.join(" | "));
        };
        row("late p50", "µs", &|r| r.p50_us);
        row("late p99", "µs", &|r| r.p99_us);
        row("late max", "µs", &|r| r.max_us);
        row("late p99, due after all had started", "µs", &|r| {
            r.settled_p99_us
        });
        let early: Vec<String> = results
            .iter()
            .map(|runs| runs.iter().map(|r| r.early).sum::<usize>().to_string())
            .collect();
        println!(
            "| {flavour} | early (count, all runs) | {} |",
            early.join(" | ")
        );
        row("CPU per fired timer", "µs", &|r| r.cpu_us_per_timer);
    }
    println!();
    println!("columns: {}", COLUMNS.map(Column::name).join(", "));
}
