//! `cargo bench --bench compare`: `tokio::time` against `wheel`, side by
//! side, in one process, on the runtimes users build.
//!
//! Every workload is one function generic over [`side::Side`], so every
//! column (`tokio`, `tokio-alt`, `wheel`, `timer`) runs exactly the same
//! code. Each workload runs in row groups (`measure::Group`): `ct`, a
//! current-thread runtime with `enable_all()` (what `#[tokio::main(flavor =
//! "current_thread")]` and `#[tokio::test]` build); `mt`, a multi-thread
//! runtime with W workers and `enable_all()`, the work split over tasks on
//! every worker; and `ct, time only`, the `enable_time()` runtime the bench
//! used to measure, kept for comparison. Each row gives wall ns per
//! operation and CPU ns per operation (all the process's threads, from
//! /proc). Each measurement builds a fresh runtime and warms up (except
//! `fire_200k`, a cold start on every column); columns rotate run by run
//! and each figure is the median of its runs.
//!
//! ```text
//! cargo bench --bench compare                     # full size (about 4-5 minutes on 2 cores)
//! cargo bench --bench compare -- quick            # a quarter (or WHEEL_BENCH_SIZE=quick)
//! cargo bench --bench compare -- --only churn,reset --runs 7
//! cargo bench --bench compare --features tower -- --only tower_ready,tower_yield
//! cargo bench --bench compare -- --workers 4 --groups mt
//! cargo bench --bench compare -- --only churn --columns wheel --scale 0.01 --runs 1   # for a profiler
//! RUSTFLAGS="--cfg tokio_unstable" CARGO_TARGET_DIR=target/unstable \
//!     cargo bench --bench compare                 # adds the tokio-alt column
//! ```

#[path = "../support/mod.rs"]
mod support;

#[path = "../support/proc.rs"]
mod proc_stats;

mod delay_queue;
mod fire;
mod floor;
mod measure;
mod micro;
mod pending;
mod queue;
mod report;
mod session;
mod side;
mod tower_row;
mod worst;

use measure::Group;
use side::Column;
use support::Size;

/// A workload: runs every column and prints its rows.
type Workload = fn(&Config);

/// The workloads, in the order they run.
const WORKLOADS: [(&str, Workload); 15] = [
    ("timeout_ready", micro::timeout_ready),
    ("churn", micro::churn),
    ("timeout_yield", micro::timeout_yield),
    ("pending_1m", pending::pending_1m),
    ("worst_drop", worst::worst_drop),
    ("steady_100k", pending::steady_100k),
    ("reset", micro::reset),
    ("repoll", micro::repoll),
    ("fire_200k", fire::fire_200k),
    ("crowded", pending::crowded),
    ("floor", floor::floor),
    // With `--features tower` only: tower's `Timeout` against wheel::tower's.
    ("tower_ready", tower_row::tower_ready),
    ("tower_yield", tower_row::tower_yield),
    // Last: the rows on a paused clock (see `delay_queue::PAUSED_ONCE`).
    ("delay_queue", delay_queue::delay_queue),
    ("delay_queue_session", session::delay_queue_session),
];

/// Runs of the cheap workloads, and of those that take seconds per run.
const MICRO_RUNS: usize = 9;
const HEAVY_RUNS: usize = 5;
/// Tasks per worker in the multi-thread group: more tasks than workers, so
/// that a worker whose task yields always finds another to run or steal.
const TASKS_PER_WORKER: usize = 4;

/// What the command line asked for.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub(crate) size: Size,
    pub(crate) micro_runs: usize,
    pub(crate) heavy_runs: usize,
    pub(crate) columns: Vec<Column>,
    pub(crate) groups: Vec<Group>,
    pub(crate) tasks_per_worker: usize,
    only: Vec<String>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            size: Size::from_env(),
            micro_runs: MICRO_RUNS,
            heavy_runs: HEAVY_RUNS,
            columns: Column::ALL.to_vec(),
            groups: groups("ct,mt,time", cores()),
            tasks_per_worker: TASKS_PER_WORKER,
            only: Vec::new(),
        }
    }
}

const USAGE: &str = "usage: compare [quick|full|--scale X] [--only w1,w2] [--runs N]
               [--columns tokio,tokio-alt,wheel,timer] [--groups ct,mt,time]
               [--workers W] [--tasks-per-worker K] [--list]
  size also from WHEEL_BENCH_SIZE=quick|full|<scale>; --runs below 3 is for profiling only;
  W defaults to the number of cores; tokio-alt needs RUSTFLAGS=\"--cfg tokio_unstable\"";

fn fail(message: &str) -> ! {
    eprintln!("compare: {message}\n{USAGE}");
    std::process::exit(2)
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get())
}

/// `ct,mt,time` as groups, `mt` with `workers` workers.
fn groups(list: &str, workers: usize) -> Vec<Group> {
    list.split(',')
        .map(|g| match g {
            "ct" => Group::Ct,
            "mt" => Group::Mt(workers),
            "time" => Group::CtTime,
            other => fail(&format!("no group named {other:?}")),
        })
        .collect()
}

fn parse(args: &[String]) -> Config {
    let mut config = Config::default();
    let mut group_list = "ct,mt,time".to_owned();
    let mut workers = cores();
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let mut value = |flag: &str| {
            args.next()
                .cloned()
                .unwrap_or_else(|| fail(&format!("{flag} needs a value")))
        };
        let mut count = |flag: &str| {
            value(flag)
                .parse()
                .ok()
                .filter(|&r: &usize| r > 0)
                .unwrap_or_else(|| fail(&format!("{flag} needs a positive count")))
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
                let runs = count("--runs");
                config.micro_runs = runs;
                config.heavy_runs = runs;
            }
            "--columns" => {
                config.columns =
                    side::columns_named(&value("--columns")).unwrap_or_else(|e| fail(&e));
            }
            "--groups" => group_list = value("--groups"),
            "--workers" => workers = count("--workers"),
            "--tasks-per-worker" => config.tasks_per_worker = count("--tasks-per-worker"),
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
    config.groups = groups(&group_list, workers);
    config
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    measure::prime_counters();
    if let Some(("--child", rest)) = args.split_first().map(|(a, r)| (a.as_str(), r)) {
        match rest.split_first() {
            Some((workload, rest)) if workload == "pending_1m" => pending::child(rest),
            Some((workload, rest)) if workload == "delay_queue" => delay_queue::child(rest),
            Some((workload, rest)) if workload == "worst_drop" => worst::child(rest),
            _ => fail("--child takes pending_1m, delay_queue or worst_drop"),
        }
        return;
    }
    let config = parse(&args);
    println!("# tiered-wheel compare: tokio::time vs wheel");
    println!();
    println!("- machine: {}", support::machine());
    println!(
        "- size: {} (scale {}); runs per column: {} (micro) / {} (heavy), median; columns rotate",
        config.size.name, config.size.scale, config.micro_runs, config.heavy_runs
    );
    let groups: Vec<String> = config.groups.iter().map(|g| g.label()).collect();
    println!(
        "- groups: {} ({} tasks per worker in mt); CPU = all threads' run time (/proc/self/task/*/schedstat) per op",
        groups.join("; "),
        config.tasks_per_worker
    );
    if !Column::TokioAlt.built() {
        println!("- tokio-alt: not built (needs RUSTFLAGS=\"--cfg tokio_unstable\"), shown as -");
    }
    if config.micro_runs < 3 {
        println!("- fewer than 3 runs: a profiling run, not a measurement");
    }
    println!();
    report::header();
    let start = std::time::Instant::now();
    let machine = proc_stats::Machine::now();
    for (name, workload) in WORKLOADS {
        if config.only.is_empty() || config.only.iter().any(|w| w == name) {
            workload(&config);
        }
    }
    println!();
    println!(
        "took {:.1} s; other processes used {:.2} cores on average meanwhile; {}",
        start.elapsed().as_secs_f64(),
        proc_stats::Machine::now().others_since(&machine),
        proc_stats::disturbance_note(measure::OTHERS_LIMIT),
    );
}
