//! `cargo bench --bench compare`: `tokio::time` against `wheel`, side by
//! side, in one process.
//!
//! Every workload is one function generic over [`side::Side`], so both
//! timers run exactly the same code. Each measurement builds a fresh runtime,
//! warms up (except `fire_200k`, which measures a cold start on both sides,
//! the wheel building its timer inside the timed region), and times with
//! `std::time::Instant` (the real clock; tokio's
//! paused clock would make the timers do no work). The two sides alternate
//! run by run and each figure is the median of its runs.
//!
//! ```text
//! cargo bench --bench compare                     # full size, as the issue specifies
//! cargo bench --bench compare -- quick            # a quarter (or WHEEL_BENCH_SIZE=quick)
//! cargo bench --bench compare -- --only churn,reset --runs 7
//! cargo bench --bench compare -- --only churn --side wheel --scale 0.01 --runs 1   # for a profiler
//! ```

#[path = "../support/mod.rs"]
mod support;

mod fire;
mod floor;
mod measure;
mod micro;
mod pending;
mod report;
mod side;

use measure::Sides;
use support::Size;

/// A workload: runs both sides and prints its rows.
type Workload = fn(&Config);

/// The workloads, in the order they run.
const WORKLOADS: [(&str, Workload); 11] = [
    ("timeout_ready", micro::timeout_ready),
    ("churn", micro::churn),
    ("timeout_yield", micro::timeout_yield),
    ("pending_1m", pending::pending_1m),
    ("steady_100k", pending::steady_100k),
    ("reset", micro::reset),
    ("repoll", micro::repoll),
    ("fire_200k", fire::fire_200k),
    ("mt_churn", micro::mt_churn),
    ("scaling", pending::scaling),
    ("floor", floor::floor),
];

/// Runs of the cheap workloads, and of those that take seconds per run.
const MICRO_RUNS: usize = 5;
const HEAVY_RUNS: usize = 3;

/// What the command line asked for.
#[derive(Debug)]
pub(crate) struct Config {
    pub(crate) size: Size,
    pub(crate) micro_runs: usize,
    pub(crate) heavy_runs: usize,
    pub(crate) sides: Sides,
    only: Vec<String>,
}

const USAGE: &str =
    "usage: compare [quick|full|--scale X] [--only w1,w2] [--runs N] [--side tokio|wheel] [--list]
  size also from WHEEL_BENCH_SIZE=quick|full|<scale>; --runs below 3 is for profiling only";

fn fail(message: &str) -> ! {
    eprintln!("compare: {message}\n{USAGE}");
    std::process::exit(2)
}

fn parse(args: &[String]) -> Config {
    let mut config = Config {
        size: Size::from_env(),
        micro_runs: MICRO_RUNS,
        heavy_runs: HEAVY_RUNS,
        sides: Sides::Both,
        only: Vec::new(),
    };
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let mut value = |flag: &str| {
            args.next()
                .cloned()
                .unwrap_or_else(|| fail(&format!("{flag} needs a value")))
        };
        match arg.as_str() {
            // cargo bench passes --bench to every bench binary.
            "--bench" => {}
            "quick" | "full" => config.size = Size::parse(arg).expect("a size word"),
            "--scale" => {
                let v = value("--scale");
                config.size =
                    Size::parse(&v).unwrap_or_else(|| fail("--scale needs a positive number"));
            }
            "--only" => {
                for name in value("--only").split(',') {
                    if !WORKLOADS.iter().any(|(w, _)| *w == name) {
                        fail(&format!("no workload named {name:?}"));
                    }
                    config.only.push(name.to_owned());
                }
            }
            "--runs" => {
                let runs = value("--runs")
                    .parse()
                    .ok()
                    .filter(|&r: &usize| r > 0)
                    .unwrap_or_else(|| fail("--runs needs a positive count"));
                config.micro_runs = runs;
                config.heavy_runs = runs;
            }
            "--side" => {
                config.sides = match value("--side").as_str() {
                    "tokio" => Sides::TokioOnly,
                    "wheel" => Sides::WheelOnly,
                    other => fail(&format!("no side named {other:?}")),
                }
            }
            "--list" => {
                WORKLOADS.iter().for_each(|(name, _)| println!("{name}"));
                std::process::exit(0);
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            other => fail(&format!("unknown argument {other:?}")),
        }
    }
    config
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    measure::prime_counters();
    if let Some(("--child", rest)) = args.split_first().map(|(a, r)| (a.as_str(), r)) {
        match rest.split_first() {
            Some((workload, rest)) if workload == "pending_1m" => pending::child(rest),
            _ => fail("--child takes pending_1m"),
        }
        return;
    }
    let config = parse(&args);
    println!("# tiered-wheel compare: tokio::time vs wheel");
    println!();
    println!("- machine: {}", support::machine());
    println!(
        "- size: {} (scale {}); runs per side: {} (micro) / {} (heavy), median; sides alternate",
        config.size.name, config.size.scale, config.micro_runs, config.heavy_runs
    );
    if config.micro_runs < 3 {
        println!("- fewer than 3 runs: a profiling run, not a measurement");
    }
    println!();
    report::header();
    let start = std::time::Instant::now();
    for (name, workload) in WORKLOADS {
        if config.only.is_empty() || config.only.iter().any(|w| w == name) {
            workload(&config);
        }
    }
    println!();
    println!("took {:.1} s", start.elapsed().as_secs_f64());
}
