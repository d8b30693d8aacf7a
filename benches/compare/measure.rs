//! How things are measured: the runtimes of each row group, the alternation
//! of columns, and the harness that spreads a workload over tasks and reads
//! the clocks around it.

use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::runtime::Runtime;
use tokio::sync::Barrier;

use crate::proc_stats;
use crate::side::{alt_timer, Column, Side};
use crate::support::Rng;
use crate::Config;

/// A row group: the runtime a workload runs on, and how its work is spread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Group {
    /// `new_current_thread().enable_all()`: one task does all the work.
    Ct,
    /// `new_multi_thread().worker_threads(w).enable_all()`: the work is split
    /// over `tasks_per_worker * w` tasks, which yield every
    /// [`CHUNK`] operations so that every worker stays busy.
    Mt(usize),
    /// `new_current_thread().enable_time()`: the configuration the bench used
    /// to measure, kept as an extra group (no IO driver, so tokio's
    /// re-registrations wake nothing).
    CtTime,
}

/// Operations a task does between two yields in the multi-thread groups.
pub(crate) const CHUNK: usize = 1024;

impl Group {
    /// The group's label in the table.
    pub(crate) fn label(self) -> String {
        match self {
            Group::Ct => "ct".to_owned(),
            Group::Mt(w) => format!("mt, {w}w"),
            Group::CtTime => "ct, time only".to_owned(),
        }
    }

    /// Whether `column` runs in this group: tokio's alternative timer exists
    /// only on multi-thread runtimes.
    pub(crate) fn has(self, column: Column) -> bool {
        column.built() && (column != Column::TokioAlt || matches!(self, Group::Mt(_)))
    }

    /// Tasks the work is split over.
    pub(crate) fn tasks(self, cfg: &Config) -> usize {
        match self {
            Group::Mt(w) => w * cfg.tasks_per_worker,
            Group::Ct | Group::CtTime => 1,
        }
    }

    /// A fresh runtime of this group for `T`'s column.
    pub(crate) fn runtime<T: Side>(self) -> Runtime {
        assert!(
            !crate::delay_queue::PAUSED_ONCE.load(std::sync::atomic::Ordering::Relaxed),
            "a real-clock row after a paused one: tokio would read every Instant::now \
             through the runtime's handle and the clock's mutex from here on, which no \
             release build does (see delay_queue::PAUSED_ONCE); run it first"
        );
        let mut builder = match self {
            Group::Ct | Group::CtTime => tokio::runtime::Builder::new_current_thread(),
            Group::Mt(w) => {
                let mut b = tokio::runtime::Builder::new_multi_thread();
                b.worker_threads(w);
                b
            }
        };
        match self {
            Group::CtTime => builder.enable_time(),
            Group::Ct | Group::Mt(_) => builder.enable_all(),
        };
        if T::COLUMN == Column::TokioAlt {
            alt_timer(&mut builder);
        }
        builder.build().expect("a runtime")
    }
}

/// One value per column; a column that did not run stays empty.
#[derive(Debug)]
pub(crate) struct PerColumn<T>(pub(crate) [Vec<T>; 4]);

impl<T> PerColumn<T> {
    pub(crate) fn of(&self, column: Column) -> &[T] {
        &self.0[column as usize]
    }
}

/// Runs each column of `group` `runs` times, in an order that rotates run
/// by run (T A W X, A W X T, ...), so no column systematically runs first
/// in a warm or cold machine. `run` is called with each column's index; the
/// [`columns!`] macro turns that into a call generic over the column's
/// [`Side`].
pub(crate) fn alternate<R>(
    cfg: &Config,
    runs: usize,
    group: Group,
    mut run: impl FnMut(Column) -> R,
) -> PerColumn<R> {
    let mut out = PerColumn(Default::default());
    let columns: Vec<Column> = Column::ALL
        .into_iter()
        .filter(|&c| group.has(c) && cfg.columns.contains(&c))
        .collect();
    for r in 0..runs {
        for i in 0..columns.len() {
            let column = columns[(i + r) % columns.len()];
            out.0[column as usize].push(undisturbed(|| run(column)));
        }
    }
    out
}

/// The machine is shared (builds and tests of other work run on it too): a
/// run during which other processes used more than this much of a core on
/// average is done again (see `proc_stats::undisturbed`).
pub(crate) const OTHERS_LIMIT: f64 = 0.25;

fn undisturbed<R>(run: impl FnMut() -> R) -> R {
    proc_stats::undisturbed(OTHERS_LIMIT, run)
}

/// `alternate(cfg, runs, group, |column| body)`, with `$t` bound to the
/// column's [`Side`] type inside `body`.
macro_rules! columns {
    ($cfg:expr, $runs:expr, $group:expr, |$t:ident| $body:expr) => {
        $crate::measure::alternate($cfg, $runs, $group, |column| match column {
            $crate::side::Column::Tokio => {
                type $t = $crate::side::Tokio;
                $body
            }
            $crate::side::Column::TokioAlt => {
                type $t = $crate::side::TokioAlt;
                $body
            }
            $crate::side::Column::Wheel => {
                type $t = $crate::side::Wheel;
                $body
            }
            $crate::side::Column::Timer => {
                type $t = $crate::side::WheelTimer;
                $body
            }
        })
    };
}
pub(crate) use columns;

/// How long a snapshot waits for idle workers to park before it reads their
/// CPU time: tokio's workers search for work for a few µs before parking.
const SETTLE: Duration = Duration::from_millis(3);

/// What the harness read at one start line.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Snapshot {
    /// The wall clock just before, and just after, reading the CPU time: a
    /// phase starts at one snapshot's `after` and ends at the next one's
    /// `before`.
    pub(crate) before: std::time::Instant,
    pub(crate) after: std::time::Instant,
    /// CPU time of the whole process (every live thread), ns.
    pub(crate) cpu_ns: u64,
    pub(crate) rss: u64,
    /// Timers the column reports pending at the line, if it can tell.
    pub(crate) pending: Option<usize>,
}

impl Snapshot {
    fn take<T: Side>(timer: &T::Timer) -> Snapshot {
        // Outside the phases: the pending count (which may lock the timer)
        // and the resident size.
        let pending = T::pending(timer);
        let rss = rss_bytes();
        let before = std::time::Instant::now();
        // Every task has arrived at the line, or finished: give the workers
        // a moment to park, so none is on a CPU with its last few
        // milliseconds not yet counted (see `proc_stats`). The wall window
        // has already ended at `before`.
        std::thread::sleep(SETTLE);
        let cpu_ns = proc_stats::sampled(|_| true).cpu_ns;
        Snapshot {
            before,
            after: std::time::Instant::now(),
            cpu_ns,
            rss,
            pending,
        }
    }

    /// Checks (outside timing) that the column holds `expected` pending
    /// timers, if it can tell.
    pub(crate) fn expect_pending(&self, expected: usize, what: &str) {
        if let Some(pending) = self.pending {
            assert_eq!(pending, expected, "{what}: pending timers");
        }
    }
}

/// Wall and CPU time between two snapshots, per operation.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PerOp {
    pub(crate) wall_ns: f64,
    pub(crate) cpu_ns: f64,
}

impl PerOp {
    pub(crate) fn between(a: &Snapshot, b: &Snapshot, ops: usize) -> PerOp {
        PerOp {
            wall_ns: (b.before - a.after).as_nanos() as f64 / ops as f64,
            cpu_ns: b.cpu_ns.saturating_sub(a.cpu_ns) as f64 / ops as f64,
        }
    }
}

/// The start lines every task of a run meets at: each task calls
/// [`Lines::cross`] when it is ready for the next timed phase; the harness
/// takes a [`Snapshot`] once all have arrived, and only then lets them go.
#[derive(Clone)]
pub(crate) struct Lines {
    arrive: Arc<Barrier>,
    go: Arc<Barrier>,
}

impl Lines {
    pub(crate) async fn cross(&self) {
        self.arrive.wait().await;
        self.go.wait().await;
    }
}

/// What a task is told: its index, how many tasks share the work, the
/// timer to use and the lines to meet at.
#[derive(Clone)]
pub(crate) struct TaskCtx<T: Side> {
    pub(crate) index: usize,
    pub(crate) tasks: usize,
    pub(crate) timer: T::Timer,
    pub(crate) lines: Lines,
}

impl<T: Side> TaskCtx<T> {
    /// This task's part of `0..n` (the parts cover it exactly).
    pub(crate) fn share(&self, n: usize) -> std::ops::Range<usize> {
        n * self.index / self.tasks..n * (self.index + 1) / self.tasks
    }
}

/// Runs `body` as `group.tasks()` tasks on a fresh runtime of `group` for
/// `T`, each wrapped in `unconstrained` (see [`with_context`]). Every task
/// must cross `lines` start lines; returns the snapshot taken at each, one
/// more taken once every task has finished, and the tasks' outputs.
///
/// The runtime is dropped after the last snapshot, so its threads' CPU time
/// is still counted.
pub(crate) fn run_tasks<T, F, R>(
    cfg: &Config,
    group: Group,
    lines: usize,
    body: impl Fn(TaskCtx<T>) -> F,
) -> (Vec<Snapshot>, Vec<R>)
where
    T: Side,
    F: Future<Output = R> + Send + 'static,
    R: Send + 'static,
{
    let tasks = group.tasks(cfg);
    let rt = group.runtime::<T>();
    let out = rt.block_on(async {
        let timer = T::timer();
        let shared = Lines {
            arrive: Arc::new(Barrier::new(tasks + 1)),
            go: Arc::new(Barrier::new(tasks + 1)),
        };
        let handles: Vec<_> = (0..tasks)
            .map(|index| {
                let ctx = TaskCtx {
                    index,
                    tasks,
                    timer: timer.clone(),
                    lines: shared.clone(),
                };
                tokio::spawn(tokio::task::unconstrained(body(ctx)))
            })
            .collect();
        let mut snapshots = Vec::with_capacity(lines + 1);
        for _ in 0..lines {
            shared.arrive.wait().await;
            snapshots.push(Snapshot::take::<T>(&timer));
            shared.go.wait().await;
        }
        let mut outs = Vec::with_capacity(tasks);
        for handle in handles {
            outs.push(handle.await.expect("a workload task panicked"));
        }
        snapshots.push(Snapshot::take::<T>(&timer));
        (snapshots, outs)
    });
    drop(rt);
    out
}

/// Runs `f` with the calling task's context, within one poll.
///
/// The micro workloads poll futures by hand with the task's real waker (as
/// `.await` would): the registration clones that waker on every side. They
/// run under `tokio::task::unconstrained`, because tokio's `Sleep::poll`
/// spends the task's coop budget and, once the 128 polls of a budget are
/// spent, returns `Pending` *without registering*; a loop of a million polls
/// in one task poll would then measure almost nothing on tokio's side.
pub(crate) async fn with_context<R>(f: impl FnOnce(&mut Context<'_>) -> R) -> R {
    let mut f = Some(f);
    std::future::poll_fn(move |cx| Poll::Ready(f.take().expect("polled once")(cx))).await
}

/// Runs `f` over `range` in chunks of [`CHUNK`], each within one poll,
/// requeueing the task between chunks when there is more than one task, so
/// that tasks interleave on the workers instead of running one after
/// another. One task (the current-thread groups) does it all in one poll,
/// as the bench always has.
pub(crate) async fn chunked(
    tasks: usize,
    range: std::ops::Range<usize>,
    mut f: impl FnMut(&mut Context<'_>, std::ops::Range<usize>),
) {
    if tasks == 1 {
        with_context(|cx| f(cx, range)).await;
        return;
    }
    let mut start = range.start;
    while start < range.end {
        let end = (start + CHUNK).min(range.end);
        with_context(|cx| f(cx, start..end)).await;
        requeue().await;
        start = end;
    }
}

/// Puts the task at the back of its worker's run queue: it wakes itself
/// and returns `Pending` once.
///
/// Not `tokio::task::yield_now`, which defers the wake until the worker
/// next polls its driver: a task rescheduled that way stays on its worker,
/// and on 2 workers the other was found parked half the time (CPU per op
/// equal to wall per op). A task that wakes itself is rescheduled as a
/// yield (`schedule_task(task, is_yield = true)`), which notifies a parked
/// worker, and that worker steals: every worker stays busy.
pub(crate) async fn requeue() {
    let mut woken = false;
    std::future::poll_fn(|cx| {
        if woken {
            Poll::Ready(())
        } else {
            woken = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    })
    .await
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

/// Asks `getconf` for the page size now, so that no later measurement
/// window includes spawning it.
pub(crate) fn prime_counters() {
    page_size();
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

/// Runs this bench binary again as `--child <args>`, a fresh process, and
/// gives back what it printed; panics, with its output, if it failed.
pub(crate) fn child_stdout(args: &[&str]) -> String {
    let exe = std::env::current_exe().expect("the bench binary's path");
    let out = std::process::Command::new(exe)
        .arg("--child")
        .args(args)
        .output()
        .expect("re-execute the bench binary");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "child {} failed: {}\n{stdout}{}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// A child's `<column> <n>` arguments (`--child <workload> <column> <n>`),
/// as [`child_stdout`] passes them.
pub(crate) fn column_and_n(workload: &str, args: &[String]) -> (Column, usize) {
    let [column, n] = args else {
        panic!("usage: --child {workload} <column> <n>");
    };
    let column = crate::side::column_named(column).expect("a column");
    (column, n.parse().expect("n"))
}
