//! The workloads with many pending timers: `pending_1m` (insert, memory,
//! cancel), `steady_100k` (a server's timeouts, replaced at random) and
//! `scaling` (churn cost as the pending set grows).

use std::future::Future;
use std::pin::Pin;
use std::process::Command;
use std::task::Context;
use std::time::Duration;

use crate::measure::{
    alternate, block_on_unconstrained, current_thread, random_duration, rss_bytes, with_context,
    PerSide,
};
use crate::micro::{churn_durations, churn_loop};
use crate::report::{label, Row};
use crate::side::{Side, Tokio, Wheel};
use crate::support::Rng;
use crate::Config;

const PENDING_N: usize = 1_000_000;
/// `scaling` measures churn with this many other timers pending. The last
/// one only at full size (it takes ~1-2 GB and tens of seconds per side).
const SCALING_PENDING: [usize; 3] = [1_000, 100_000, 10_000_000];
const SCALING_CHURN_N: usize = 200_000;
/// `steady_100k`: timers kept pending, and how many are replaced.
const STEADY_LIVE: usize = 100_000;
const STEADY_OPS: usize = 1_000_000;

/// Pending timers spread over 1 s to 1 h: what a server's idle and request
/// timeouts look like, and enough to fill four levels of the wheel.
fn spread(rng: &mut Rng) -> Duration {
    random_duration(rng, Duration::from_secs(1), Duration::from_secs(3600))
}

/// What one `pending_1m` measurement reports.
#[derive(Debug)]
pub(crate) struct PendingOut {
    insert_ns: f64,
    bytes_per_timer: f64,
    cancel_ns: f64,
}

/// `n` pending sleeps, boxed and polled once: ns per insert, resident bytes
/// per timer, ns per cancel when all are dropped.
///
/// Each measurement runs in a fresh child process (this binary, re-executed
/// with `--child`). In one process the second side would allocate into the
/// heap pages the first side freed (glibc keeps them mapped), and its RSS
/// delta would read near zero; a fresh process gives both sides the same
/// empty heap, so the delta is what `n` timers really cost.
pub(crate) fn pending_1m(cfg: &Config) {
    let n = cfg.size.of(PENDING_N, 1000);
    let runs = alternate(
        cfg.heavy_runs,
        cfg.sides,
        || in_child(Tokio::NAME, n),
        || in_child(Wheel::NAME, n),
    );
    let name = label("pending_1m", n, PENDING_N);
    // For reading the resident figure: the part of it that is the future.
    let size_of = PerSide {
        tokio: vec![std::mem::size_of::<<Tokio as Side>::Sleep>()],
        wheel: vec![std::mem::size_of::<<Wheel as Side>::Sleep>()],
    };
    Row::median(
        "pending_1m: size_of the sleep future",
        "bytes",
        &size_of,
        |&b| b as f64,
    )
    .print();
    Row::median(format!("{name}: insert"), "ns/timer", &runs, |r| {
        r.insert_ns
    })
    .print();
    Row::median(format!("{name}: resident"), "bytes/timer", &runs, |r| {
        r.bytes_per_timer
    })
    .print();
    Row::median(
        format!("{name}: cancel (drop all)"),
        "ns/timer",
        &runs,
        |r| r.cancel_ns,
    )
    .print();
}

fn in_child(side: &str, n: usize) -> PendingOut {
    let exe = std::env::current_exe().expect("the bench binary's path");
    let out = Command::new(exe)
        .args(["--child", "pending_1m", side, &n.to_string()])
        .output()
        .expect("re-execute the bench binary");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "pending_1m child ({side}) failed: {}\n{stdout}{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let field = |key: &str| -> f64 {
        stdout
            .split_whitespace()
            .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("pending_1m child printed no {key}: {stdout}"))
    };
    PendingOut {
        insert_ns: field("insert_ns"),
        bytes_per_timer: field("bytes_per_timer"),
        cancel_ns: field("cancel_ns"),
    }
}

/// The child's side of [`pending_1m`]: `--child pending_1m <side> <n>`.
pub(crate) fn child(args: &[String]) {
    let [side, n] = args else {
        panic!("usage: --child pending_1m <tokio|wheel> <n>");
    };
    let n: usize = n.parse().expect("n");
    let out = match side.as_str() {
        "tokio" => pending_run::<Tokio>(n),
        "wheel" => pending_run::<Wheel>(n),
        other => panic!("unknown side {other}"),
    };
    println!(
        "insert_ns={} bytes_per_timer={} cancel_ns={}",
        out.insert_ns, out.bytes_per_timer, out.cancel_ns
    );
}

fn pending_run<T: Side>(n: usize) -> PendingOut {
    let rt = current_thread();
    block_on_unconstrained(&rt, async {
        let mut rng = Rng::new(0x1e6);
        let durations: Vec<Duration> = (0..n).map(|_| spread(&mut rng)).collect();
        // Allocated and written before the baseline, so that the holder
        // itself (8 bytes a timer) is not counted as the timers' memory.
        let mut held: Vec<Option<Pin<Box<T::Sleep>>>> = (0..n).map(|_| None).collect();
        // Warm-up outside the baseline: creates wheel's default timer and
        // touches tokio's time driver.
        with_context(|cx| churn_loop::<T>(cx, &churn_durations(100))).await;
        let before = rss_bytes();
        let start = std::time::Instant::now();
        with_context(|cx| insert_all::<T>(cx, &mut held, &durations)).await;
        let insert = start.elapsed();
        let after = rss_bytes();
        assert_eq!(
            T::pending().unwrap_or(n),
            n,
            "pending_1m: not every sleep registered"
        );
        let start = std::time::Instant::now();
        held.iter_mut().for_each(|sleep| *sleep = None);
        let cancel = start.elapsed();
        assert_eq!(
            T::pending().unwrap_or(0),
            0,
            "pending_1m: cancelled sleeps left behind"
        );
        PendingOut {
            insert_ns: insert.as_nanos() as f64 / n as f64,
            bytes_per_timer: after.saturating_sub(before) as f64 / n as f64,
            cancel_ns: cancel.as_nanos() as f64 / n as f64,
        }
    })
}

#[inline(never)]
fn insert_all<T: Side>(
    cx: &mut Context<'_>,
    held: &mut [Option<Pin<Box<T::Sleep>>>],
    durations: &[Duration],
) {
    for (slot, &d) in held.iter_mut().zip(durations) {
        *slot = Some(registered::<T>(cx, d));
    }
}

/// What one `steady_100k` measurement reports.
#[derive(Debug)]
pub(crate) struct SteadyOut {
    replace_ns: f64,
    longest_us: f64,
}

/// A server's timeouts in a steady state: 100,000 sleeps pending, 30 to 31 s
/// out, and each operation registers a new one and drops one of the pending
/// ones at random (a request's timeout set, another's dropped when its
/// response came). Drops come from anywhere in the wheel's lists, unlike
/// `pending_1m`'s, which come in the order the sleeps were made. Reports ns
/// per operation, and the longest single operation in a second pass that
/// times each one: a timer that stops the world now and then shows there.
pub(crate) fn steady_100k(cfg: &Config) {
    let live = cfg.size.of(STEADY_LIVE, 1000);
    let ops = cfg.size.of(STEADY_OPS, 1000);
    let runs = alternate(
        cfg.heavy_runs,
        cfg.sides,
        || steady_run::<Tokio>(live, ops),
        || steady_run::<Wheel>(live, ops),
    );
    let name = label("steady_100k", live, STEADY_LIVE);
    Row::median(format!("{name}: replace one"), "ns/op", &runs, |r| {
        r.replace_ns
    })
    .print();
    Row::median(format!("{name}: longest op"), "µs", &runs, |r| {
        r.longest_us
    })
    .print();
}

fn steady_run<T: Side>(live: usize, ops: usize) -> SteadyOut {
    let rt = current_thread();
    block_on_unconstrained(&rt, async {
        let mut rng = Rng::new(0x57ead);
        let mut picks = Rng::new(0x91c5);
        let mut held: Vec<Pin<Box<T::Sleep>>> = Vec::with_capacity(live);
        with_context(|cx| {
            while held.len() < live {
                held.push(registered::<T>(cx, steady_delay(&mut rng)));
            }
        })
        .await;
        let delays: Vec<Duration> = (0..ops).map(|_| steady_delay(&mut rng)).collect();
        let slots: Vec<usize> = (0..ops)
            .map(|_| picks.between(0, live as u64 - 1) as usize)
            .collect();
        // Warm-up, then the timed pass, then the pass that times each op.
        with_context(|cx| replace_loop::<T>(cx, &mut held, &delays[..ops / 10], &slots)).await;
        let start = std::time::Instant::now();
        with_context(|cx| replace_loop::<T>(cx, &mut held, &delays, &slots)).await;
        let replace_ns = start.elapsed().as_nanos() as f64 / ops as f64;
        let mut longest = std::time::Duration::ZERO;
        with_context(|cx| {
            for (&delay, &slot) in delays.iter().zip(&slots) {
                let start = std::time::Instant::now();
                held[slot] = registered::<T>(cx, delay);
                longest = longest.max(start.elapsed());
            }
        })
        .await;
        assert_eq!(T::pending().unwrap_or(live), live, "steady_100k: drifted");
        SteadyOut {
            replace_ns,
            longest_us: longest.as_secs_f64() * 1e6,
        }
    })
}

fn steady_delay(rng: &mut Rng) -> Duration {
    random_duration(rng, Duration::from_secs(30), Duration::from_secs(31))
}

/// A boxed sleep `delay` out, polled once so that it is registered.
fn registered<T: Side>(cx: &mut Context<'_>, delay: Duration) -> Pin<Box<T::Sleep>> {
    let mut sleep = Box::pin(T::sleep(delay));
    assert!(sleep.as_mut().poll(cx).is_pending());
    sleep
}

/// Registers a sleep per delay, each replacing (and so dropping) the held
/// one at the matching slot.
#[inline(never)]
fn replace_loop<T: Side>(
    cx: &mut Context<'_>,
    held: &mut [Pin<Box<T::Sleep>>],
    delays: &[Duration],
    slots: &[usize],
) {
    for (&delay, &slot) in delays.iter().zip(slots) {
        held[slot] = registered::<T>(cx, delay);
    }
}

/// `churn` with 10^3, 10^5 and 10^7 other timers pending. One run grows the
/// pending set from one size to the next and times churn at each, so it
/// builds 10^7 timers once per run rather than three times.
pub(crate) fn scaling(cfg: &Config) {
    let sizes: Vec<usize> = SCALING_PENDING
        .into_iter()
        .filter(|&k| k < 10_000_000 || cfg.size.scale >= 1.0)
        .collect();
    let n = cfg.size.of(SCALING_CHURN_N, 1000);
    let durations = churn_durations(n);
    let runs = alternate(
        cfg.heavy_runs,
        cfg.sides,
        || scaling_run::<Tokio>(&sizes, &durations),
        || scaling_run::<Wheel>(&sizes, &durations),
    );
    for (i, &k) in sizes.iter().enumerate() {
        let name = label("scaling: churn", n, SCALING_CHURN_N);
        Row::median(format!("{name}, {k} pending"), "ns/timer", &runs, |r| r[i]).print();
    }
    let last = sizes.len() - 1;
    Row::median(
        format!("scaling: churn@{} / churn@{}", sizes[last], sizes[0]),
        "ratio",
        &runs,
        |r| r[last] / r[0],
    )
    .without_ratio()
    .print();
}

fn scaling_run<T: Side>(sizes: &[usize], durations: &[Duration]) -> Vec<f64> {
    let rt = current_thread();
    block_on_unconstrained(&rt, async {
        let mut rng = Rng::new(0x5ca1e);
        let mut background: Vec<Pin<Box<T::Sleep>>> = Vec::new();
        let mut out = Vec::with_capacity(sizes.len());
        for &k in sizes {
            with_context(|cx| {
                while background.len() < k {
                    background.push(registered::<T>(cx, spread(&mut rng)));
                }
            })
            .await;
            with_context(|cx| churn_loop::<T>(cx, &durations[..durations.len() / 10])).await;
            let start = std::time::Instant::now();
            with_context(|cx| churn_loop::<T>(cx, durations)).await;
            out.push(start.elapsed().as_nanos() as f64 / durations.len() as f64);
            assert_eq!(
                T::pending().unwrap_or(k),
                k,
                "scaling: pending count drifted"
            );
        }
        out
    })
}
