//! `floor`: what a timeout costs before any timer is involved, measured in
//! the same run as the timer workloads so the two can be compared.
//!
//! Every column runs the same code (in its turn, on its runtime), so the
//! figures differ only by noise (and, for `yield_now` on a multi-thread
//! runtime, by the runtime's timer flavour): their ratio columns show how
//! much the same code moves from run to run, nothing about the timers
//! (for one shared `Arc` on several workers, a lot: where its count's cache
//! line lands matters). They show how far a ratio target can go at all:
//!
//! - every `timeout(d, f)` and `sleep(d)` reads the clock once for its
//!   deadline (`tokio::time` documents the deadline as `now + d` at the
//!   call), so no timer's `timeout_ready` or `churn` can cost less than
//!   the `Instant::now` row;
//! - `timeout_yield`'s inner future yields once, so each call includes one
//!   round trip through the scheduler, the `yield_now` row, whatever the
//!   timer;
//! - a sleep that keeps its timer alive clones and drops one `Arc` that
//!   every worker shares (the `shared Arc` row: on several workers its
//!   count's cache line moves between cores on every operation), and
//!   `wheel::sleep` also asks tokio for the current runtime (the
//!   `Handle::try_current` row, which clones the runtime's handle, another
//!   `Arc` every worker shares). What those cost in `mt` against `ct` is
//!   the part of a timer's scaling row that sharing a count causes.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::measure::{chunked, run_tasks, Group, PerOp};
use crate::micro::per_op_rows;
use crate::report::label;
use crate::side::Side;
use crate::Config;

const NOW_N: usize = 2_000_000;
const YIELD_N: usize = 200_000;

pub(crate) fn floor(cfg: &Config) {
    let n = cfg.size.of(NOW_N, 1000);
    let name = label("floor: Instant::now, no timer", n, NOW_N);
    per_op_rows!(cfg, name, "ns/call", |T, group| now_run::<T>(cfg, group, n));
    let name = label("floor: shared Arc clone+drop, no timer", n, NOW_N);
    per_op_rows!(cfg, name, "ns/call", |T, group| shared_run::<T>(
        cfg,
        group,
        n,
        Shared::Arc
    ));
    let name = label("floor: Handle::try_current, no timer", n, NOW_N);
    per_op_rows!(cfg, name, "ns/call", |T, group| shared_run::<T>(
        cfg,
        group,
        n,
        Shared::Handle
    ));
    let n = cfg.size.of(YIELD_N, 1000);
    let name = label("floor: yield_now round trip, no timer", n, YIELD_N);
    per_op_rows!(cfg, name, "ns/call", |T, group| yield_run::<T>(
        cfg, group, n
    ));
}

/// `Instant::now()` inside a runtime, as `timeout` and `sleep` call it.
fn now_run<T: Side>(cfg: &Config, group: Group, n: usize) -> PerOp {
    let (snaps, _) = run_tasks::<T, _, _>(cfg, group, 1, |ctx| async move {
        let share = ctx.share(n);
        now_loop(share.len() / 10);
        ctx.lines.cross().await;
        chunked(ctx.tasks, share, |_, r| now_loop(r.len())).await;
    });
    PerOp::between(&snaps[0], &snaps[1], n)
}

#[inline(never)]
fn now_loop(n: usize) {
    let mut latest = Instant::now();
    for _ in 0..n {
        latest = latest.max(black_box(Instant::now()));
    }
    black_box(latest + Duration::from_secs(5));
}

/// What [`shared_run`] does per call.
#[derive(Debug, Clone, Copy)]
enum Shared {
    /// Clones and drops one `Arc` all tasks share.
    Arc,
    /// `tokio::runtime::Handle::try_current()`, dropped.
    Handle,
}

fn shared_run<T: Side>(cfg: &Config, group: Group, n: usize, what: Shared) -> PerOp {
    let one = Arc::new(0u64);
    let (snaps, _) = run_tasks::<T, _, _>(cfg, group, 1, |ctx| {
        let one = Arc::clone(&one);
        async move {
            let share = ctx.share(n);
            shared_loop(&one, what, share.len() / 10);
            ctx.lines.cross().await;
            chunked(ctx.tasks, share, |_, r| shared_loop(&one, what, r.len())).await;
        }
    });
    PerOp::between(&snaps[0], &snaps[1], n)
}

#[inline(never)]
fn shared_loop(one: &Arc<u64>, what: Shared, n: usize) {
    for _ in 0..n {
        match what {
            Shared::Arc => drop(black_box(Arc::clone(one))),
            Shared::Handle => drop(black_box(tokio::runtime::Handle::try_current())),
        }
    }
}

/// `yield_now().await` on the runtime `timeout_yield` uses.
fn yield_run<T: Side>(cfg: &Config, group: Group, n: usize) -> PerOp {
    let (snaps, _) = run_tasks::<T, _, _>(cfg, group, 1, |ctx| async move {
        let share = ctx.share(n).len();
        yield_loop(share / 10).await;
        ctx.lines.cross().await;
        yield_loop(share).await;
    });
    PerOp::between(&snaps[0], &snaps[1], n)
}

async fn yield_loop(n: usize) {
    for _ in 0..n {
        tokio::task::yield_now().await;
    }
}
