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
//!   the part of a timer's scaling row that sharing a count causes;
//! - registering and cancelling a timer each take a lock (the `Mutex` row:
//!   the task's own, as a shard's is its thread's), and the registration
//!   keeps a clone of the task's waker, which the cancel drops (the
//!   `waker` row).
//!
//! So on one thread a churned `wheel::sleep` pays at least one of each row
//! but `yield_now`, and the lock twice: `benches/README.md` ("What the
//! floor rows add up to") sums them.

use std::hint::black_box;
use std::sync::{Arc, Mutex, Weak};
use std::task::{Poll, Waker};
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
    for (what, name) in [
        (PerCall::SharedArc, "floor: shared Arc clone+drop, no timer"),
        (PerCall::Handle, "floor: Handle::try_current, no timer"),
        (
            PerCall::OwnMutex,
            "floor: Mutex lock+unlock, the task's own, no timer",
        ),
        (
            PerCall::OwnWaker,
            "floor: the task's waker clone+drop, no timer",
        ),
    ] {
        let name = label(name, n, NOW_N);
        per_op_rows!(cfg, name, "ns/call", |T, group| per_call_run::<T>(
            cfg, group, n, what
        ));
    }
    // Current-thread groups only: on several workers the wheel asks tokio
    // nothing (see `registry.rs`), and the question's shared count would
    // be most of the row. Only the groups differ from `cfg`.
    let current_thread = Config {
        groups: cfg
            .groups
            .iter()
            .copied()
            .filter(|group| !matches!(group, Group::Mt(_)))
            .collect(),
        ..cfg.clone()
    };
    let name = label("floor: a churn's steps together, no timer", n, NOW_N);
    per_op_rows!(
        &current_thread,
        name,
        "ns/call",
        |T, group| per_call_run::<T>(cfg, group, n, PerCall::ChurnSteps)
    );
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

/// What [`per_call_run`] does per call.
#[derive(Debug, Clone, Copy)]
enum PerCall {
    /// Clones and drops one `Arc` all tasks share.
    SharedArc,
    /// `tokio::runtime::Handle::try_current()`, dropped.
    Handle,
    /// Locks and unlocks a `Mutex` of the task's own: uncontended.
    OwnMutex,
    /// Clones and drops the task's waker.
    OwnWaker,
    /// What a churned `wheel::sleep` cannot do without on a current-thread
    /// runtime, in the wheel's order (`driver/registry.rs`,
    /// `Shard::register`, `Shard::cancel`): ask which runtime is current,
    /// upgrade a `Weak` (the thread's cached hold on its shard), read the
    /// clock, lock to register a clone of the waker, lock to cancel, then
    /// drop the waker and the `Arc`.
    ChurnSteps,
}

fn per_call_run<T: Side>(cfg: &Config, group: Group, n: usize, what: PerCall) -> PerOp {
    let shared = Arc::new(0u64);
    let (snaps, _) = run_tasks::<T, _, _>(cfg, group, 1, |ctx| {
        let shared = Arc::clone(&shared);
        async move {
            let waker = std::future::poll_fn(|cx| Poll::Ready(cx.waker().clone())).await;
            let own_lock = Mutex::new(0u64);
            // Alive while the task runs, as a timer keeps its shards: the
            // churn steps upgrade a `Weak` to it, as a thread's cache does.
            let own_arc = Arc::new(0u64);
            let operands = Operands {
                shared: &shared,
                own_weak: Arc::downgrade(&own_arc),
                own_lock: &own_lock,
                waker: &waker,
            };
            let share = ctx.share(n);
            per_call_loop(&operands, what, share.len() / 10);
            ctx.lines.cross().await;
            chunked(ctx.tasks, share, |_, r| {
                per_call_loop(&operands, what, r.len())
            })
            .await;
        }
    });
    PerOp::between(&snaps[0], &snaps[1], n)
}

/// What a task's [`per_call_loop`] works on: one `Arc` every task shares,
/// and the rest its own.
struct Operands<'a> {
    shared: &'a Arc<u64>,
    own_weak: Weak<u64>,
    own_lock: &'a Mutex<u64>,
    waker: &'a Waker,
}

#[inline(never)]
fn per_call_loop(operands: &Operands<'_>, what: PerCall, n: usize) {
    for _ in 0..n {
        match what {
            PerCall::SharedArc => drop(black_box(Arc::clone(operands.shared))),
            PerCall::Handle => drop(black_box(tokio::runtime::Handle::try_current())),
            PerCall::OwnMutex => *black_box(operands.own_lock).lock().unwrap() += 1,
            PerCall::OwnWaker => drop(black_box(operands.waker.clone())),
            PerCall::ChurnSteps => churn_steps(operands),
        }
    }
}

/// [`PerCall::ChurnSteps`], once. `black_box` keeps each step.
#[inline(always)]
fn churn_steps(operands: &Operands<'_>) {
    drop(black_box(tokio::runtime::Handle::try_current()));
    let hold = black_box(operands.own_weak.upgrade());
    black_box(Instant::now());
    let held = {
        let _registered = black_box(operands.own_lock).lock().unwrap();
        black_box(operands.waker.clone())
    };
    drop(black_box(operands.own_lock).lock().unwrap());
    drop(black_box(held));
    drop(hold);
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
