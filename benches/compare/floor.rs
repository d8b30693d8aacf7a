//! `floor`: what a timeout costs before any timer is involved, measured in
//! the same run as the timer workloads so the two can be compared.
//!
//! Both columns run the same code (alternately, in each side's turn), so
//! the two figures differ only by noise and the rows carry no ratio. They
//! show how far a ratio target can go at all:
//!
//! - every `timeout(d, f)` and `sleep(d)` reads the clock once for its
//!   deadline (`tokio::time` documents the deadline as `now + d` at the
//!   call), so no timer's `timeout_ready` or `churn` can cost less than
//!   the `Instant::now` row;
//! - `timeout_yield`'s inner future yields once, so each call includes one
//!   round trip through the scheduler, the `yield_now` row, whatever the
//!   timer.

use std::hint::black_box;
use std::time::Duration;

use tokio::time::Instant;

use crate::measure::{alternate, block_on_unconstrained, current_thread};
use crate::report::{label, Row};
use crate::Config;

const NOW_N: usize = 2_000_000;
const YIELD_N: usize = 200_000;

/// A floor row: its name, its nominal size, and one run (ns per call).
type Floor = (&'static str, usize, fn(usize) -> f64);

pub(crate) fn floor(cfg: &Config) {
    let floors: [Floor; 2] = [
        ("floor: Instant::now, no timer", NOW_N, now_run),
        ("floor: yield_now round trip, no timer", YIELD_N, yield_run),
    ];
    for (name, nominal, run) in floors {
        let n = cfg.size.of(nominal, 1000);
        let runs = alternate(cfg.micro_runs, cfg.sides, || run(n), || run(n));
        Row::median(label(name, n, nominal), "ns/call", &runs, |&ns| ns)
            .without_ratio()
            .print();
    }
}

/// `Instant::now()` inside a runtime, as `timeout` and `sleep` call it.
fn now_run(n: usize) -> f64 {
    let rt = current_thread();
    block_on_unconstrained(&rt, async {
        now_loop(n / 10);
        let start = std::time::Instant::now();
        now_loop(n);
        start.elapsed().as_nanos() as f64 / n as f64
    })
}

#[inline(never)]
fn now_loop(n: usize) {
    let mut latest = Instant::now();
    for _ in 0..n {
        latest = latest.max(black_box(Instant::now()));
    }
    black_box(latest + Duration::from_secs(5));
}

/// `yield_now().await` on the runtime `timeout_yield` uses.
fn yield_run(n: usize) -> f64 {
    let rt = current_thread();
    block_on_unconstrained(&rt, async {
        yield_loop(n / 10).await;
        let start = std::time::Instant::now();
        yield_loop(n).await;
        start.elapsed().as_nanos() as f64 / n as f64
    })
}

async fn yield_loop(n: usize) {
    for _ in 0..n {
        tokio::task::yield_now().await;
    }
}
