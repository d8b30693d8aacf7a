//! `cargo bench --bench server`: what the timer costs a service, end to end.
//!
//! A server on a multi-thread runtime with W workers (`enable_all`, the
//! number of cores by default) and a load generator in the same process,
//! on its own thread, over TCP on 127.0.0.1 (see `serve.rs` and `load.rs`).
//! Each scenario runs every column (`tokio`, `tokio-alt`, `wheel`, `timer`;
//! see `../compare/side.rs`) on a fresh server runtime, columns rotating
//! run by run, and reports the medians over runs of: requests per second,
//! latency percentiles, the server threads' CPU time per request and their
//! context switches per request (from /proc, `../support/proc.rs`).
//!
//! ```text
//! cargo bench --bench server --features hyper              # full: about 3 minutes
//! cargo bench --bench server --features hyper -- quick     # about 20 s
//! cargo bench --bench server -- --only tcp-50k+handler --runs 5
//! RUSTFLAGS="--cfg tokio_unstable" CARGO_TARGET_DIR=target/unstable \
//!     cargo bench --bench server --features hyper          # adds tokio-alt
//! ```
//!
//! Without `--features hyper` the `http` scenarios run only the tokio
//! columns (hyper on a wheel timer is that feature's `impl`).

#[path = "../support/mod.rs"]
#[allow(dead_code)] // shared with the other benches, which use all of it
mod support;

#[path = "../support/proc.rs"]
mod proc_stats;

#[path = "../compare/side.rs"]
#[allow(dead_code)] // shared with `compare`, which uses all of it
mod side;

mod load;
mod serve;

use std::time::Duration;

use side::{alt_timer, columns_named, print_header, Column, Side, RATIO, RATIOS, VALUE};
use support::median;

/// The raw-TCP protocol's message sizes.
pub(crate) const REQUEST_LEN: usize = 64;
pub(crate) const RESPONSE_LEN: usize = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Proto {
    Tcp,
    Http,
}

/// How the load generator sends.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Shape {
    /// `conns` connections, each sending as soon as its last response came.
    Closed { conns: usize },
    /// `per_sec` requests a second in all, over `conns` connections.
    Rate { per_sec: u64, conns: usize },
}

impl Shape {
    pub(crate) fn conns(self) -> usize {
        match self {
            Shape::Closed { conns } | Shape::Rate { conns, .. } => conns,
        }
    }
}

/// One scenario: a protocol, a load shape, and for `tcp` whether each
/// request's handler runs under `timeout(5 s, ..)`.
#[derive(Debug, Clone, Copy)]
struct Scenario {
    name: &'static str,
    proto: Proto,
    shape: Shape,
    handler: bool,
    /// Diagnostic: each request also registers and drops a 1 ms
    /// `tokio::time` sleep, which makes tokio unpark its driver (an eventfd
    /// write) once per request. Runs only when named with `--only`.
    unpark: bool,
}

const SCENARIOS: [Scenario; 8] = [
    Scenario {
        name: "tcp closed 64",
        proto: Proto::Tcp,
        shape: Shape::Closed { conns: 64 },
        handler: false,
        unpark: false,
    },
    Scenario {
        name: "tcp+handler closed 64",
        proto: Proto::Tcp,
        shape: Shape::Closed { conns: 64 },
        handler: true,
        unpark: false,
    },
    Scenario {
        name: "tcp 50k/s",
        proto: Proto::Tcp,
        shape: Shape::Rate {
            per_sec: 50_000,
            conns: 50,
        },
        handler: false,
        unpark: false,
    },
    Scenario {
        name: "tcp+handler 50k/s",
        proto: Proto::Tcp,
        shape: Shape::Rate {
            per_sec: 50_000,
            conns: 50,
        },
        handler: true,
        unpark: false,
    },
    Scenario {
        name: "tcp+handler 20k/s",
        proto: Proto::Tcp,
        shape: Shape::Rate {
            per_sec: 20_000,
            conns: 50,
        },
        handler: true,
        unpark: false,
    },
    Scenario {
        name: "tcp+handler+unpark 50k/s",
        proto: Proto::Tcp,
        shape: Shape::Rate {
            per_sec: 50_000,
            conns: 50,
        },
        handler: true,
        unpark: true,
    },
    Scenario {
        name: "http closed 64",
        proto: Proto::Http,
        shape: Shape::Closed { conns: 64 },
        handler: false,
        unpark: false,
    },
    Scenario {
        name: "http 30k/s",
        proto: Proto::Http,
        shape: Shape::Rate {
            per_sec: 30_000,
            conns: 50,
        },
        handler: false,
        unpark: false,
    },
];

/// What the command line asked for.
#[derive(Debug)]
struct Config {
    quick: bool,
    runs: usize,
    workers: usize,
    warm: Duration,
    window: Duration,
    only: Vec<String>,
    columns: Vec<Column>,
    /// Print each run's figures too, not only the medians.
    per_run: bool,
}

const USAGE: &str = "usage: server [quick|full] [--runs N] [--workers W] [--window SECS]
              [--only scenario,...] [--columns tokio,tokio-alt,wheel,timer] [--per-run] [--list]";

fn fail(message: &str) -> ! {
    eprintln!("server: {message}\n{USAGE}");
    std::process::exit(2)
}

fn parse() -> Config {
    let mut cfg = Config {
        quick: std::env::var("WHEEL_BENCH_SIZE").is_ok_and(|s| s == "quick"),
        runs: 0,
        workers: std::thread::available_parallelism().map_or(2, |n| n.get()),
        warm: Duration::ZERO,
        window: Duration::ZERO,
        only: Vec::new(),
        columns: Column::ALL.to_vec(),
        per_run: false,
    };
    let mut runs = None;
    let mut window = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |flag: &str| {
            args.next()
                .unwrap_or_else(|| fail(&format!("{flag} needs a value")))
        };
        match arg.as_str() {
            "--bench" => {}
            "quick" => cfg.quick = true,
            "full" => cfg.quick = false,
            "--runs" => runs = Some(value("--runs").parse().unwrap_or_else(|_| fail("--runs N"))),
            "--workers" => {
                cfg.workers = value("--workers")
                    .parse()
                    .unwrap_or_else(|_| fail("--workers W"))
            }
            "--window" => {
                let secs: f64 = value("--window")
                    .parse()
                    .unwrap_or_else(|_| fail("--window SECS"));
                window = Some(Duration::from_secs_f64(secs));
            }
            "--only" => {
                for name in value("--only").split(',') {
                    if !SCENARIOS.iter().any(|s| s.name.replace(' ', "-") == name) {
                        fail(&format!("no scenario named {name:?} (see --list)"));
                    }
                    cfg.only.push(name.to_owned());
                }
            }
            "--columns" => {
                cfg.columns = columns_named(&value("--columns")).unwrap_or_else(|e| fail(&e));
            }
            "--per-run" => cfg.per_run = true,
            "--list" => {
                for s in SCENARIOS {
                    println!("{}", s.name.replace(' ', "-"));
                }
                std::process::exit(0);
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            other => fail(&format!("unknown argument {other:?}")),
        }
    }
    // Quick: one run of 0.6 s per column and scenario; full: three of 2 s.
    cfg.runs = runs.unwrap_or(if cfg.quick { 1 } else { 3 });
    cfg.window = window.unwrap_or(Duration::from_millis(if cfg.quick { 600 } else { 2000 }));
    cfg.warm = if cfg.quick {
        Duration::from_millis(300)
    } else {
        Duration::from_millis(500)
    };
    cfg
}

/// A row of the table: its name, its unit, and its figure from one run.
type Metric = (&'static str, &'static str, fn(&RunOut) -> Option<f64>);

/// What one run of a scenario on one column measured.
#[derive(Debug)]
struct RunOut {
    req_per_s: f64,
    p50_us: f64,
    p99_us: f64,
    p999_us: f64,
    cpu_us_per_req: f64,
    switches_per_req: f64,
    /// Timers the wheel cancelled per request (wheel columns only).
    cancels_per_req: Option<f64>,
}

fn main() {
    let cfg = parse();
    println!("# tiered-wheel server: a service's timers, end to end");
    println!();
    println!("- machine: {}", support::machine());
    println!(
        "- server: multi-thread runtime, {} workers, enable_all; load generator: 1 thread, same process, 127.0.0.1",
        cfg.workers
    );
    println!(
        "- {}: {} run(s) per column, {:.1} s measured after {:.1} s of warm-up; medians over runs; columns rotate",
        if cfg.quick { "quick" } else { "full" },
        cfg.runs,
        cfg.window.as_secs_f64(),
        cfg.warm.as_secs_f64()
    );
    if !Column::TokioAlt.built() {
        println!("- tokio-alt: not built (needs RUSTFLAGS=\"--cfg tokio_unstable\"), shown as -");
    }
    if !cfg!(feature = "hyper") {
        println!("- http on the wheel columns needs --features hyper, shown as -");
    }
    println!();
    header();
    let start = std::time::Instant::now();
    let machine = proc_stats::Machine::now();
    for scenario in SCENARIOS {
        let named = cfg.only.contains(&scenario.name.replace(' ', "-"));
        if (!cfg.only.is_empty() || scenario.unpark) && !named {
            continue;
        }
        let runs = run_columns(&cfg, scenario);
        let rows: [Metric; 7] = [
            ("throughput", "req/s", |r| Some(r.req_per_s)),
            ("latency p50", "µs", |r| Some(r.p50_us)),
            ("latency p99", "µs", |r| Some(r.p99_us)),
            ("latency p99.9", "µs", |r| Some(r.p999_us)),
            ("server CPU", "µs/req", |r| Some(r.cpu_us_per_req)),
            ("server context switches", "per req", |r| {
                Some(r.switches_per_req)
            }),
            ("wheel cancels", "per req", |r| r.cancels_per_req),
        ];
        for (metric, unit, of) in rows {
            let values = runs.each_ref().map(|column_runs| {
                let v: Vec<f64> = column_runs.iter().filter_map(of).collect();
                (!v.is_empty()).then(|| median(v))
            });
            if values.iter().all(Option::is_none) {
                continue;
            }
            print_row(scenario.name, metric, unit, values);
        }
    }
    println!();
    println!(
        "took {:.1} s; other processes used {:.2} cores on average meanwhile; {}",
        start.elapsed().as_secs_f64(),
        proc_stats::Machine::now().others_since(&machine),
        proc_stats::disturbance_note(OTHERS_LIMIT),
    );
}

/// Runs `scenario` `cfg.runs` times on each column that can serve it,
/// rotating the order run by run.
fn run_columns(cfg: &Config, scenario: Scenario) -> [Vec<RunOut>; 4] {
    let mut out: [Vec<RunOut>; 4] = Default::default();
    let columns: Vec<Column> = Column::ALL
        .into_iter()
        .filter(|&c| c.built() && cfg.columns.contains(&c) && serve::can_serve(scenario.proto, c))
        .collect();
    for r in 0..cfg.runs {
        for i in 0..columns.len() {
            let column = columns[(i + r) % columns.len()];
            let once = || match column {
                Column::Tokio => run::<side::Tokio>(cfg, scenario),
                Column::TokioAlt => run::<side::TokioAlt>(cfg, scenario),
                Column::Wheel => run::<side::Wheel>(cfg, scenario),
                Column::Timer => run::<side::WheelTimer>(cfg, scenario),
            };
            let result = undisturbed(once);
            if cfg.per_run {
                eprintln!(
                    "run {r} {} {}: {:.0} req/s, p50 {:.1} p99 {:.1} p99.9 {:.1} µs, {:.2} µs CPU/req, {:.3} switches/req",
                    scenario.name,
                    column.name(),
                    result.req_per_s,
                    result.p50_us,
                    result.p99_us,
                    result.p999_us,
                    result.cpu_us_per_req,
                    result.switches_per_req
                );
            }
            out[column as usize].push(result);
        }
    }
    out
}

/// The machine is shared (builds and tests of other work run on it too): a
/// run during which other processes used more than this much of a core on
/// average is done again (see `proc_stats::undisturbed`).
const OTHERS_LIMIT: f64 = 0.15;

fn undisturbed(run: impl FnMut() -> RunOut) -> RunOut {
    proc_stats::undisturbed(OTHERS_LIMIT, run)
}

/// One run: a fresh server runtime, the load, the figures.
fn run<T: Side>(cfg: &Config, scenario: Scenario) -> RunOut {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder
        .worker_threads(cfg.workers)
        .thread_name("srv")
        .enable_all();
    if T::COLUMN == Column::TokioAlt {
        alt_timer(&mut builder);
    }
    let rt = builder.build().expect("the server's runtime");
    let conns = scenario.shape.conns();
    let (addr, timer) = rt.block_on(async {
        let timer = T::timer();
        let (listener, addr) = serve::listen().await;
        tokio::spawn(serve::accept::<T>(
            listener,
            conns,
            scenario.proto,
            scenario.handler,
            scenario.unpark,
            timer.clone(),
        ));
        (addr, timer)
    });
    let cancelled = || wheel_cancelled::<T>(&rt, &timer);
    let cancelled_before = cancelled();
    let load = load::drive(addr, scenario.proto, scenario.shape, cfg.warm, cfg.window);
    let cancelled_after = cancelled();
    // The load generator has closed every connection; the server's tasks
    // end on their own, and the runtime drops what is left.
    rt.shutdown_timeout(Duration::from_secs(1));
    let mut latencies = load.latencies;
    latencies.sort_unstable();
    let pct = |p: f64| {
        let rank = ((p / 100.0) * latencies.len() as f64).ceil() as usize;
        latencies[rank.clamp(1, latencies.len()) - 1] as f64 / 1e3
    };
    let requests = load.completed.max(1) as f64;
    // Cancels over the whole load (warm-up included) per request answered
    // in it: the warm-up is at the same rate, so scale by the window share.
    let share = cfg.window.as_secs_f64() / (cfg.window + cfg.warm).as_secs_f64();
    RunOut {
        req_per_s: load.completed as f64 / load.window.as_secs_f64(),
        p50_us: pct(50.0),
        p99_us: pct(99.0),
        p999_us: pct(99.9),
        cpu_us_per_req: load.server.cpu_ns as f64 / 1e3 / requests,
        switches_per_req: load.server.switches as f64 / requests,
        cancels_per_req: cancelled_before
            .zip(cancelled_after)
            .map(|(b, a)| (a - b) as f64 * share / requests),
    }
}

/// The wheel's cancel count, for the wheel columns.
fn wheel_cancelled<T: Side>(rt: &tokio::runtime::Runtime, timer: &T::Timer) -> Option<u64> {
    let explicit = (timer as &dyn std::any::Any).downcast_ref::<wheel::Timer>();
    match T::COLUMN {
        Column::Wheel => {
            let _in = rt.enter();
            Some(wheel::Timer::current().stats().cancelled)
        }
        Column::Timer => explicit.map(|t| t.stats().cancelled),
        Column::Tokio | Column::TokioAlt => None,
    }
}

const SCENARIO: usize = 22;
const METRIC: usize = 23;
const UNIT: usize = 7;
fn header() {
    print_header([("scenario", SCENARIO), ("metric", METRIC), ("unit", UNIT)]);
}

fn print_row(scenario: &str, metric: &str, unit: &str, values: [Option<f64>; 4]) {
    print!("| {scenario:<SCENARIO$} | {metric:<METRIC$} | {unit:<UNIT$} |");
    for v in values {
        let text = match v {
            None => "-".to_owned(),
            Some(v) if v >= 100.0 => format!("{v:.0}"),
            Some(v) if v >= 10.0 => format!("{v:.1}"),
            Some(v) => format!("{v:.2}"),
        };
        print!(" {text:>VALUE$} |");
    }
    for (_, top, bottom) in RATIOS {
        let ratio = match (values[top as usize], values[bottom as usize]) {
            (Some(t), Some(b)) if b != 0.0 => format!("{:.2}", t / b),
            _ => "-".to_owned(),
        };
        print!(" {ratio:>RATIO$} |");
    }
    println!();
}
