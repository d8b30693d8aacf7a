//! How things are measured: runtimes, the alternation of sides, and the
//! process counters read from /proc (std only, no libc).

use std::future::Future;
use std::sync::OnceLock;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::runtime::Runtime;

use crate::support::Rng;

/// One value per side; a side that was filtered out (`--side`) stays empty.
#[derive(Debug)]
pub(crate) struct PerSide<T> {
    pub(crate) tokio: Vec<T>,
    pub(crate) wheel: Vec<T>,
}

/// Which sides to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sides {
    Both,
    TokioOnly,
    WheelOnly,
}

/// Runs each side `runs` times, alternating, and starting each run with the
/// side the previous run ended with (T W, W T, T W ...), so neither side
/// systematically runs first in a warm or cold machine.
pub(crate) fn alternate<R>(
    runs: usize,
    sides: Sides,
    mut tokio: impl FnMut() -> R,
    mut wheel: impl FnMut() -> R,
) -> PerSide<R> {
    let mut out = PerSide {
        tokio: Vec::with_capacity(runs),
        wheel: Vec::with_capacity(runs),
    };
    for run in 0..runs {
        let tokio_first = run % 2 == 0;
        for turn in 0..2 {
            let is_tokio = (turn == 0) == tokio_first;
            match (is_tokio, sides) {
                (true, Sides::Both | Sides::TokioOnly) => out.tokio.push(tokio()),
                (false, Sides::Both | Sides::WheelOnly) => out.wheel.push(wheel()),
                _ => {}
            }
        }
    }
    out
}

/// A current-thread runtime with timers, as an application would build it.
pub(crate) fn current_thread() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("current-thread runtime")
}

/// A multi-thread runtime with `workers` workers and timers.
pub(crate) fn multi_thread(workers: usize) -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_time()
        .build()
        .expect("multi-thread runtime")
}

/// Runs `f` with the calling task's context, within one poll.
///
/// The micro workloads poll futures by hand with the task's real waker (as
/// `.await` would): the registration clones that waker on both sides. They
/// run under `tokio::task::unconstrained`, because tokio's `Sleep::poll`
/// spends the task's coop budget and, once the 128 polls of a budget are
/// spent, returns `Pending` *without registering*; a loop of a million polls
/// in one task poll would then measure almost nothing on tokio's side.
pub(crate) async fn with_context<R>(f: impl FnOnce(&mut Context<'_>) -> R) -> R {
    let mut f = Some(f);
    std::future::poll_fn(move |cx| Poll::Ready(f.take().expect("polled once")(cx))).await
}

/// Runs `future` to completion on `rt` without tokio's coop budget (see
/// [`with_context`]).
pub(crate) fn block_on_unconstrained<F: Future>(rt: &Runtime, future: F) -> F::Output {
    rt.block_on(tokio::task::unconstrained(future))
}

/// `getconf NAME`, or `fallback` if that fails.
fn getconf(name: &str, fallback: u64) -> u64 {
    std::process::Command::new("getconf")
        .arg(name)
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(fallback)
}

fn page_size() -> u64 {
    static PAGE: OnceLock<u64> = OnceLock::new();
    *PAGE.get_or_init(|| getconf("PAGESIZE", 4096))
}

fn clock_ticks_per_second() -> u64 {
    static TCK: OnceLock<u64> = OnceLock::new();
    *TCK.get_or_init(|| getconf("CLK_TCK", 100))
}

/// Asks `getconf` for the page size and clock tick now, so that no later
/// measurement window includes spawning it.
pub(crate) fn prime_counters() {
    page_size();
    clock_ticks_per_second();
}

/// Resident set size in bytes: /proc/self/statm's second field, in pages.
pub(crate) fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("read /proc/self/statm");
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|f| f.parse().ok())
        .expect("statm has a resident field");
    pages * page_size()
}

/// User plus system CPU time of the whole process (every thread, live or
/// exited), from /proc/self/stat's `utime` and `stime`, in seconds. The
/// resolution is one clock tick (10 ms at CLK_TCK = 100).
pub(crate) fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("read /proc/self/stat");
    // The command name (field 2) may hold spaces; fields after it are plain.
    let after_name = &stat[stat.rfind(')').expect("stat has a command name") + 1..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    // Field 3 (state) is fields[0]; utime is field 14, stime field 15.
    let ticks: u64 =
        fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime");
    ticks as f64 / clock_ticks_per_second() as f64
}

/// A duration uniform in `lo..=hi` at nanosecond granularity, so deadlines
/// do not all sit on tick edges.
pub(crate) fn random_duration(rng: &mut Rng, lo: Duration, hi: Duration) -> Duration {
    Duration::from_nanos(rng.between(lo.as_nanos() as u64, hi.as_nanos() as u64))
}

/// `a - b` in signed nanoseconds.
pub(crate) fn signed_nanos(a: tokio::time::Instant, b: tokio::time::Instant) -> i64 {
    match a.checked_duration_since(b) {
        Some(d) => d.as_nanos() as i64,
        None => -((b - a).as_nanos() as i64),
    }
}

/// The nearest-rank `p`-th percentile of sorted `values`.
pub(crate) fn percentile(sorted: &[i64], p: f64) -> i64 {
    assert!(!sorted.is_empty());
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}
