//! Helpers shared by the integration tests (each test file is its own crate
//! and uses only some of them).
#![allow(dead_code)]

use std::any::Any;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::runtime::{Builder, Runtime};
use tokio_test::task::Spawn;
use tokio_test::{assert_pending, assert_ready_eq, task};
use wheel::delay_queue::{DelayQueue, Expired};
use wheel::{Instant, Interval, Timer};

pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

pub fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// A `TestRuntime` on a current-thread runtime (`None`) or one of
/// `workers` workers, `enable_all`, auto-advancing or not.
pub fn test_rt(workers: Option<usize>, auto_advance: bool) -> wheel::TestRuntime {
    let clock = wheel::TestClock::new().auto_advance(auto_advance);
    match workers {
        Some(workers) => clock.build(
            Builder::new_multi_thread()
                .worker_threads(workers)
                .enable_all(),
        ),
        None => clock.build(Builder::new_current_thread().enable_all()),
    }
    .unwrap()
}

/// Runs `f` on a [`paused_rt`].
pub fn paused<F: Future>(f: F) -> F::Output {
    paused_rt().block_on(f)
}

/// A test named `$name` that runs `$body` once with `$t` = `tokio::time`
/// and once with `$t` = `wheel`, each on a [`paused`] runtime, and asserts
/// that what the two return is equal.
#[allow(unused_macros)]
macro_rules! differential {
    ($name:ident, |$t:ident| $body:block) => {
        #[test]
        fn $name() {
            let tokio_obs = common::paused(async {
                #[allow(unused_imports)]
                use tokio::time as $t;
                $body
            });
            let wheel_obs = common::paused(async {
                #[allow(unused_imports)]
                use wheel as $t;
                $body
            });
            assert_eq!(wheel_obs, tokio_obs, "left: wheel, right: tokio::time");
        }
    };
}
#[allow(unused_imports)]
pub(crate) use differential;

/// A current-thread runtime with timers and a paused clock, [`guard`]ed.
pub fn paused_rt() -> Runtime {
    guarded(paused_unguarded())
}

/// [`paused_rt`], guarded by the watchdog alone: for a test that moves the
/// paused clock past [`PAUSED_LIMIT`] itself (the model's jumps of
/// centuries), polling its timers rather than awaiting them.
pub fn paused_rt_far() -> Runtime {
    let rt = paused_unguarded();
    let watchdog = watchdog(this_test(), WALL_LIMIT);
    rt.spawn(async move {
        let _watchdog = watchdog;
        std::future::pending::<()>().await
    });
    rt
}

/// [`paused_rt`] without the guard's task: a program whose clock must find
/// no timer but its own (auto-advance would jump to the guard's).
pub fn paused_unguarded() -> Runtime {
    Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap()
}

/// What `#[tokio::test(start_paused = true)]` builds: a current-thread
/// runtime with every driver (IO too) and a paused clock, unguarded.
pub fn paused_rt_all() -> Runtime {
    Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap()
}

/// A timer on a manual clock, with the default geometry.
pub fn manual() -> Timer {
    Timer::builder().manual().build().unwrap()
}

/// A timer on a manual clock whose tick is `tick`.
pub fn manual_ticking(tick: Duration) -> Timer {
    Timer::builder().manual().tick(tick).build().unwrap()
}

/// The message of a caught panic, whatever its payload type.
pub fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "<non-string panic payload>".to_owned()
    }
}

/// The message `run` panics with; a panic of its own, naming what `run`
/// returned, if it returns (a timer that should have reported its shutdown
/// and timed out or stayed pending instead, say).
pub fn panic_of<T: std::fmt::Debug>(run: impl FnOnce() -> T) -> String {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)) {
        Err(panic) => panic_message(&*panic),
        Ok(returned) => panic!("{returned:?}: no panic"),
    }
}

/// A current-thread runtime with timers, on real time, [`guard`]ed.
pub fn real_rt() -> Runtime {
    guarded(Builder::new_current_thread().enable_time().build().unwrap())
}

/// A multi-thread runtime with two workers and timers, on real time,
/// [`guard`]ed.
pub fn multi_rt() -> Runtime {
    guarded(
        Builder::new_multi_thread()
            .worker_threads(2)
            .enable_time()
            .build()
            .unwrap(),
    )
}

/// Polls `f` once with a no-op context; for futures that must be polled
/// outside any runtime.
pub fn poll_once<F: Future + Unpin>(f: &mut F) -> Poll<F::Output> {
    let mut cx = Context::from_waker(std::task::Waker::noop());
    Pin::new(f).poll(&mut cx)
}

/// Polls `sleep` once, so that it registers, and returns it (pending).
pub fn registered(mut sleep: wheel::Sleep) -> wheel::Sleep {
    assert!(
        poll_once(&mut sleep).is_pending(),
        "expected a pending sleep"
    );
    sleep
}

/// Polls `interval`'s `poll_tick` once, in its mock task.
pub fn poll_tick(interval: &mut task::Spawn<Interval>) -> Poll<Instant> {
    interval.enter(|cx, mut interval| interval.poll_tick(cx))
}

/// Polls `interval` once per offset, expecting a tick scheduled at
/// `start + offset` each time, then expects it to be pending.
#[track_caller]
pub fn expect_ticks(interval: &mut task::Spawn<Interval>, start: Instant, offsets: &[u64]) {
    for &offset in offsets {
        assert_ready_eq!(
            poll_tick(interval),
            start + ms(offset),
            "tick at {offset} ms"
        );
    }
    assert_pending!(
        poll_tick(interval),
        "no tick after {offsets:?} at {:?}",
        start.elapsed()
    );
}

/// Polls a `DelayQueue` once in its task's context.
pub fn poll_queue<T>(queue: &mut Spawn<DelayQueue<T>>) -> Poll<Option<Expired<T>>> {
    queue.enter(|cx, mut q| q.poll_expired(cx))
}

/// Polls a `DelayQueue` until `Pending` or `Ready(None)`, returning what
/// was yielded.
pub fn drain_queue<T>(queue: &mut Spawn<DelayQueue<T>>) -> Vec<T> {
    let mut out = Vec::new();
    while let Poll::Ready(Some(expired)) = poll_queue(queue) {
        out.push(expired.into_inner());
    }
    out
}

/// Whether this is the child a test reruns itself in: if not (`false`),
/// runs the calling test again, alone ([`rerun_alone`], with `args`), in a
/// child process with `child` set in its environment, and checks that it
/// passed. For a case that would abort the process, or that needs the
/// process to itself (its panic hook).
pub fn in_a_child(child: &str, args: &[&str]) -> bool {
    if std::env::var_os(child).is_some() {
        return true;
    }
    let out = rerun_alone(&[(child, "1")], args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "child failed: {stderr}");
    false
}

/// Runs this test alone again in a child process of the same test binary,
/// with `envs` set, and returns its output once it has checked that the
/// child ran exactly this one test (a name that matched nothing would pass
/// with none run).
pub fn rerun_alone(envs: &[(&str, &str)], args: &[&str]) -> std::process::Output {
    let name = this_test();
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", name.as_str(), "--nocapture"])
        .args(args)
        .envs(envs.iter().copied())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        !out.status.success() || stdout.contains("running 1 test"),
        "the child did not run {name} alone: {stdout}"
    );
    out
}

/// A deterministic pseudo-random stream (splitmix64).
pub fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

// Guards: a broken driver must fail a test, naming what never completed,
// not hang the run until CI's time limit. A wheel timer that never fires
// leaves a paused-clock runtime with no tokio timer to auto-advance to, so
// it parks for good; a real-time test just waits.

/// Paused time a guarded test may take: far beyond any test's own waits
/// (the longest, a timeout 300 years out). When nothing else is left, the
/// paused clock jumps there at once.
pub const PAUSED_LIMIT: Duration = Duration::from_secs(1000 * 365 * 86_400);

/// Real time a guarded test may take before its watchdog fails it. The
/// slowest take about 2 s, and 15 s on a machine busy with other builds;
/// this leaves room for worse.
pub const WALL_LIMIT: Duration = Duration::from_secs(60);

/// Awaits `fut`, failing with "never completed: {what}" if `limit` of
/// tokio time passes first. On a paused clock, a wheel timer that never
/// fires lets auto-advance reach `limit` at once.
#[track_caller]
pub fn within<F: Future>(
    what: &str,
    limit: Duration,
    fut: F,
) -> impl Future<Output = F::Output> + use<F> {
    let caller = std::panic::Location::caller();
    let what = what.to_owned();
    async move {
        match tokio::time::timeout(limit, fut).await {
            Ok(out) => out,
            Err(_) => panic!("never completed: {what} (within {limit:?}, at {caller})"),
        }
    }
}

/// Fails a hung test from outside it: it cannot be made to panic, so the
/// process exits, with the message naming it.
fn hung(what: &str, after: &str) -> ! {
    use std::io::Write;
    // Straight to stderr: libtest captures `eprintln!`, on the guard's
    // threads too, and the exit would lose it.
    let _ = writeln!(
        std::io::stderr(),
        "never completed: {what} (guard: {after}); a wheel timer never fired?"
    );
    std::process::exit(101)
}

/// The test this thread runs (libtest names the thread after it): its
/// full name in its binary, `explicit_timers::...` in `tests/suite.rs`.
pub fn this_test() -> String {
    std::thread::current()
        .name()
        .unwrap_or("a test on an unnamed thread")
        .to_owned()
}

/// Keeps a test from hanging while it lives: a watchdog thread that fails
/// the run after [`WALL_LIMIT`] of real time and, called inside a runtime,
/// a task that fails it after [`PAUSED_LIMIT`] of that runtime's time (on
/// a paused clock, the moment nothing else is left to run). Dropped, it
/// stands down. `let _guard = common::guard();` first thing in a test.
#[must_use = "the guard stands down when dropped"]
pub fn guard() -> Guard {
    let what = this_test();
    let task = tokio::runtime::Handle::try_current().ok().map(|rt| {
        let what = what.clone();
        // `sleep_until`: tokio's `sleep` would cap the limit at 30 years.
        let limit = tokio::time::Instant::now() + PAUSED_LIMIT;
        rt.spawn(async move {
            tokio::time::sleep_until(limit).await;
            hung(&what, "tokio's clock reached the paused limit")
        })
        .abort_handle()
    });
    Guard {
        _watchdog: watchdog(what, WALL_LIMIT),
        task,
    }
}

/// A thread that fails the run unless the returned sender is dropped
/// within `wall`.
fn watchdog(what: String, wall: Duration) -> std::sync::mpsc::Sender<()> {
    let (stand_down, told) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || {
        if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = told.recv_timeout(wall) {
            hung(&what, &format!("{wall:?} of real time"));
        }
    });
    stand_down
}

/// See [`guard`].
pub struct Guard {
    _watchdog: std::sync::mpsc::Sender<()>,
    task: Option<tokio::task::AbortHandle>,
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

/// Guards every `block_on` of `rt` for as long as it lives (see [`guard`]),
/// with one task, dropped with the runtime.
fn guarded(rt: Runtime) -> Runtime {
    let what = this_test();
    let limit = {
        let _in = rt.enter();
        tokio::time::Instant::now() + PAUSED_LIMIT
    };
    let watchdog = watchdog(what.clone(), WALL_LIMIT);
    rt.spawn(async move {
        let _watchdog = watchdog;
        tokio::time::sleep_until(limit).await;
        hung(&what, "tokio's clock reached the paused limit")
    });
    rt
}

thread_local! {
    static AT_EXIT: std::cell::RefCell<Option<AtExit>> = const { std::cell::RefCell::new(None) };
}

/// Runs its closure when dropped: by `AT_EXIT`'s destructor.
struct AtExit(Option<Box<dyn FnOnce()>>);

impl Drop for AtExit {
    fn drop(&mut self) {
        if let Some(run) = self.0.take() {
            run();
        }
    }
}

/// What `run` returns, run by a thread-local's destructor on a new thread
/// after tokio's own thread-local context is destroyed there (destructors
/// run in reverse order: tokio's, first used after `AT_EXIT`, goes first).
/// A panic there aborts the process: call it in a child process.
pub fn in_a_thread_locals_destructor_after_tokios<T: Send + 'static>(
    run: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let run = move || {
            let gone =
                tokio::runtime::Handle::try_current().is_err_and(|e| e.is_thread_local_destroyed());
            assert!(gone, "tokio's context is still there");
            sender.send(run()).unwrap();
        };
        AT_EXIT.with(|at_exit| *at_exit.borrow_mut() = Some(AtExit(Some(Box::new(run)))));
        assert!(tokio::runtime::Handle::try_current().is_err());
    })
    .join()
    .unwrap();
    receiver.recv().unwrap()
}
