//! [`TestClock`] and [`TestRuntime`]: a runtime whose default timer runs on
//! a clock the test moves, multi-thread runtimes included.
//!
//! tokio's paused clock works only on a current-thread runtime. A
//! `TestRuntime` instead makes a [`manual`](crate::Builder::manual) timer
//! its runtime's *default* timer before any task runs, so every
//! [`sleep`](crate::sleep), [`timeout`](crate::timeout),
//! [`interval`](crate::interval) and `DelayQueue::new()` in that runtime's
//! tasks waits on it, on whichever worker they run.
//!
//! With auto-advance on, the clock jumps to the next deadline when the
//! runtime is idle: every worker has parked (tokio's `on_thread_park` and
//! `on_thread_unpark` hooks count them) and [`TestRuntime::block_on`]'s
//! future is not being polled. What does not count as busy: a
//! `spawn_blocking` closure that is running, a thread outside the runtime
//! about to send to a task, and I/O in flight; as with tokio's
//! auto-advance, a test that waits on those should advance by hand.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::runtime::{Handle, Runtime};
use tokio::time::Instant;

use crate::driver::registry;
use crate::Timer;

/// How many test runtimes are alive in the process: while there are any, a
/// `timeout` reads its deadline from its runtime's timer's clock, which may
/// be a test clock, rather than from `Instant::now()`.
static LIVE: AtomicUsize = AtomicUsize::new(0);

/// Whether a test runtime is alive anywhere in the process.
#[inline]
pub(crate) fn any() -> bool {
    LIVE.load(Ordering::Relaxed) != 0
}

/// Builds a [`TestRuntime`]: a tokio runtime whose default timer runs on a
/// clock the test moves, on any runtime flavour.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
///
/// let rt = wheel::TestClock::new()
///     .auto_advance(true)
///     .build(tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all())
///     .unwrap();
/// let start = rt.now();
/// rt.block_on(async {
///     // A task on a worker, on the test clock: an hour passes at once.
///     tokio::spawn(wheel::sleep(Duration::from_secs(3600))).await.unwrap();
/// });
/// assert_eq!(rt.now() - start, Duration::from_secs(3600));
/// ```
#[derive(Debug, Clone)]
pub struct TestClock {
    tick: Duration,
    auto_advance: bool,
}

impl Default for TestClock {
    fn default() -> TestClock {
        TestClock::new()
    }
}

impl TestClock {
    /// A test clock with the default 125 µs tick, advanced by hand only.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = wheel::TestClock::new()
    ///     .build(tokio::runtime::Builder::new_current_thread().enable_all())
    ///     .unwrap();
    /// assert!(rt.timer().is_manual());
    /// ```
    pub fn new() -> TestClock {
        TestClock {
            tick: crate::DEFAULT_TICK,
            auto_advance: false,
        }
    }

    /// The timer's tick: deadlines round up to it, and the clock, advanced
    /// to a deadline, lands at the end of its tick.
    ///
    /// # Examples
    ///
    /// ```
    /// let clock = wheel::TestClock::new().tick(std::time::Duration::from_millis(1));
    /// # let _ = clock;
    /// ```
    pub fn tick(mut self, tick: Duration) -> TestClock {
        self.tick = tick;
        self
    }

    /// Moves the clock to the next deadline whenever the runtime is idle.
    ///
    /// As tokio's auto-advance does on a paused clock; what counts as idle
    /// is in [`TestRuntime`]'s docs. Off by default.
    ///
    /// # Examples
    ///
    /// ```
    /// let clock = wheel::TestClock::new().auto_advance(true);
    /// # let _ = clock;
    /// ```
    pub fn auto_advance(mut self, on: bool) -> TestClock {
        self.auto_advance = on;
        self
    }

    /// Builds the runtime `builder` describes, with this clock as its
    /// default timer.
    ///
    /// It sets the builder's `on_thread_park` and `on_thread_unpark` hooks
    /// (hooks set on it before are replaced). Fails as
    /// [`Builder::build`](crate::Builder::build) does for the timer (a zero
    /// tick, say), or as tokio's `build` does.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = wheel::TestClock::new()
    ///     .build(tokio::runtime::Builder::new_multi_thread().worker_threads(4).enable_all())
    ///     .unwrap();
    /// assert_eq!(rt.handle().metrics().num_workers(), 4);
    /// ```
    pub fn build(self, builder: &mut tokio::runtime::Builder) -> std::io::Result<TestRuntime> {
        let timer = Timer::builder()
            .manual()
            .tick(self.tick)
            .build()
            .map_err(std::io::Error::other)?;
        let idle = Arc::new(Idle {
            timer: timer.clone(),
            auto_advance: self.auto_advance,
            parked: AtomicUsize::new(0),
            busy: AtomicUsize::new(0),
            // No advance before the runtime says how many workers it has.
            workers: AtomicUsize::new(usize::MAX),
            runtime: OnceLock::new(),
            advancing: Mutex::new(()),
        });
        let (park, unpark) = (idle.clone(), idle.clone());
        let runtime = builder
            .on_thread_park(move || park.parked())
            .on_thread_unpark(move || unpark.unparked())
            .build()?;
        let _ = idle.runtime.set(runtime.handle().clone());
        idle.workers
            .store(runtime.metrics().num_workers(), Ordering::SeqCst);
        registry::install(runtime.handle().id(), timer.clone());
        LIVE.fetch_add(1, Ordering::SeqCst);
        Ok(TestRuntime {
            runtime: Some(runtime),
            idle,
        })
    }
}

/// A tokio runtime whose default timer runs on a test clock; made by
/// [`TestClock::build`].
///
/// Every [`sleep`](crate::sleep), [`timeout`](crate::timeout),
/// [`interval`](crate::interval) and `DelayQueue::new()` made in its tasks
/// (or in `block_on`'s future) waits on the test clock, on whichever worker
/// it runs. One made outside the runtime and moved in reads the real clock
/// for its deadline: make them inside.
///
/// With [auto-advance](TestClock::auto_advance), the clock jumps to the
/// next deadline when the runtime is idle: every worker has parked (tokio's
/// `on_thread_park` and `on_thread_unpark` hooks count them), no task waits
/// in its global queue, and [`block_on`](TestRuntime::block_on)'s future
/// is not being polled. Not counted as busy: a running `spawn_blocking`
/// closure, a thread outside the runtime about to wake a task, I/O in
/// flight. As with tokio's auto-advance, a test waiting on those advances
/// by hand.
///
/// Dropping it shuts the runtime down, then the timer.
pub struct TestRuntime {
    runtime: Option<Runtime>,
    idle: Arc<Idle>,
}

impl TestRuntime {
    /// Runs `future` to completion on the runtime, as `Runtime::block_on`
    /// does; while it is being polled the runtime is not idle.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = wheel::TestClock::new()
    ///     .build(tokio::runtime::Builder::new_current_thread().enable_all())
    ///     .unwrap();
    /// assert_eq!(rt.block_on(async { 7 }), 7);
    /// ```
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        let idle = self.idle.clone();
        self.runtime().block_on(Busy {
            idle,
            future: Box::pin(future),
        })
    }

    /// The runtime's handle.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = wheel::TestClock::new()
    ///     .build(tokio::runtime::Builder::new_current_thread().enable_all())
    ///     .unwrap();
    /// let _in_rt = rt.handle().enter();
    /// assert!(wheel::Timer::current().is_manual());
    /// ```
    pub fn handle(&self) -> &Handle {
        self.runtime().handle()
    }

    /// The test clock's timer: the runtime's default timer.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = wheel::TestClock::new()
    ///     .build(tokio::runtime::Builder::new_current_thread().enable_all())
    ///     .unwrap();
    /// println!("{}", rt.timer().stats());
    /// ```
    pub fn timer(&self) -> &Timer {
        &self.idle.timer
    }

    /// The time on the test clock.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = wheel::TestClock::new()
    ///     .build(tokio::runtime::Builder::new_current_thread().enable_all())
    ///     .unwrap();
    /// let start = rt.now();
    /// rt.advance(std::time::Duration::from_secs(1));
    /// assert_eq!(rt.now() - start, std::time::Duration::from_secs(1));
    /// ```
    pub fn now(&self) -> Instant {
        self.idle.timer.now()
    }

    /// Moves the test clock forward by `duration`, firing what is due.
    ///
    /// What is due has fired before it returns (the woken tasks then run on
    /// the runtime's workers); see [`Timer::advance`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let rt = wheel::TestClock::new()
    ///     .build(tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all())
    ///     .unwrap();
    /// // Made inside the runtime, the sleep reads the test clock.
    /// let task = rt.handle().spawn(async { wheel::sleep(Duration::from_secs(60)).await });
    /// while rt.timer().stats().pending == 0 {
    ///     std::thread::yield_now(); // until the task has registered
    /// }
    /// rt.advance(Duration::from_secs(60));
    /// rt.block_on(task).unwrap();
    /// ```
    pub fn advance(&self, duration: Duration) {
        self.idle.timer.advance(duration);
    }

    fn runtime(&self) -> &Runtime {
        self.runtime.as_ref().expect("only taken by drop")
    }
}

impl Drop for TestRuntime {
    fn drop(&mut self) {
        let id = self.runtime().handle().id();
        drop(self.runtime.take());
        registry::uninstall(id, &self.idle.timer);
        drop(self.idle.timer.shutdown());
        LIVE.fetch_sub(1, Ordering::SeqCst);
    }
}

impl std::fmt::Debug for TestRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestRuntime")
            .field("flavor", &self.handle().runtime_flavor())
            .field("auto_advance", &self.idle.auto_advance)
            .field("timer", &self.idle.timer)
            .finish()
    }
}

/// What tells whether the runtime is idle, and advances the clock when it
/// is.
struct Idle {
    timer: Timer,
    auto_advance: bool,
    /// Workers parked, counted by tokio's park and unpark hooks.
    parked: AtomicUsize,
    /// `block_on` futures being polled.
    busy: AtomicUsize,
    workers: AtomicUsize,
    /// The runtime, once built: a task woken and not yet picked up waits in
    /// its global queue, with every worker still counted parked.
    runtime: OnceLock<Handle>,
    advancing: Mutex<()>,
}

impl Idle {
    fn parked(&self) {
        let parked = self.parked.fetch_add(1, Ordering::SeqCst) + 1;
        if parked >= self.workers.load(Ordering::SeqCst) {
            self.maybe_advance();
        }
    }

    fn unparked(&self) {
        self.parked.fetch_sub(1, Ordering::SeqCst);
    }

    /// With auto-advance on and nothing running, moves the clock to the
    /// next deadline, and on until something fires: a deadline in a higher
    /// level of the wheel first brings its entries down, firing nothing,
    /// and a runtime that stays idle would not ask again.
    fn maybe_advance(&self) {
        let idle = || {
            self.busy.load(Ordering::SeqCst) == 0
                && self.parked.load(Ordering::SeqCst) >= self.workers.load(Ordering::SeqCst)
                && self
                    .runtime
                    .get()
                    .is_some_and(|rt| rt.metrics().global_queue_depth() == 0)
        };
        if !self.auto_advance || !idle() {
            return;
        }
        // One thread at a time (a worker's park hook, `block_on`'s thread),
        // each looking again once it has the turn: a task the other's
        // advance woke is runnable, and the runtime no longer idle.
        let _turn = self
            .advancing
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let fired = self.timer.stats().fired;
        while idle() {
            let Some(next) = self.timer.driver().next_deadline() else {
                break;
            };
            self.timer.advance_to(next);
            if self.timer.stats().fired != fired {
                break;
            }
        }
    }
}

/// `block_on`'s future: counted busy while it is polled, and when it waits
/// with every worker parked, the runtime is idle (no park hook will say so).
struct Busy<F> {
    idle: Arc<Idle>,
    future: Pin<Box<F>>,
}

impl<F: Future> Future for Busy<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        self.idle.busy.fetch_add(1, Ordering::SeqCst);
        let polled = self.future.as_mut().poll(cx);
        self.idle.busy.fetch_sub(1, Ordering::SeqCst);
        if polled.is_pending() {
            self.idle.maybe_advance();
        }
        polled
    }
}
