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
//! When the clock may move (auto-advance, or before and after
//! [`TestRuntime::advance`]) is `idle.rs`'s rule; `block_on.rs` counts
//! `block_on`'s future in it.

mod block_on;
mod idle;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::runtime::{Handle, Runtime, RuntimeFlavor};
use tokio::time::Instant;

use crate::driver::registry;
use crate::Timer;
use block_on::Busy;
use idle::Idle;

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
    /// It sets the builder's `on_thread_start`, `on_thread_stop`,
    /// `on_thread_park` and `on_thread_unpark` hooks (hooks set on it
    /// before are replaced), `thread_name_fn` (called before a thread is
    /// spawned, so that a `spawn_blocking` closure counts from then; its
    /// threads keep tokio's name, a name set before is replaced),
    /// `thread_keep_alive(0)` (so that a thread that ran `block_in_place`
    /// says when it leaves) and `enable_time`: they tell when the runtime
    /// is idle ([`TestRuntime`]'s docs). Fails as
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
        let idle = Arc::new(Idle::new(timer.clone(), self.auto_advance));
        let (spawning, start, stop) = (idle.clone(), idle.clone(), idle.clone());
        let (park, unpark) = (idle.clone(), idle.clone());
        let runtime = builder
            // The probe is a tokio timer.
            .enable_time()
            // A thread that leaves the blocking pool says so at once: one
            // that ran `block_in_place` is counted running until then.
            .thread_keep_alive(Duration::ZERO)
            // Called before a thread is spawned: named as tokio names it.
            .thread_name_fn(move || {
                spawning.thread_spawning();
                "tokio-rt-worker".into()
            })
            .on_thread_start(move || start.thread_started())
            .on_thread_stop(move || stop.parked())
            .on_thread_park(move || park.parked())
            .on_thread_unpark(move || unpark.unparked())
            .build()?;
        registry::install(runtime.handle().id(), timer);
        idle.start(runtime.handle());
        Ok(TestRuntime {
            runtime: Some(runtime),
            idle,
        })
    }
}

/// A tokio runtime whose default timer runs on a test clock; made by
/// [`TestClock::build`].
///
/// **Two clocks.** Every [`sleep`](crate::sleep), [`timeout`](crate::timeout),
/// [`interval`](crate::interval) and `DelayQueue::new()` made in its tasks
/// (or in `block_on`'s future) waits on the test clock, on whichever worker
/// it runs. [`Instant::now()`](crate::Instant), `Instant::elapsed()` and
/// everything in `tokio::time` (a dependency's `tokio::time::sleep`
/// included) keep tokio's time, real time unless the builder paused it
/// (`start_paused`): read the test clock with [`wheel::now()`](crate::now),
/// which reads the current runtime's default timer's clock here and
/// tokio's everywhere else, and count deadlines from it
/// (`wheel::sleep_until(wheel::now() + d)`). A deadline read from the real
/// clock is in the test clock's past once the test clock has moved, and
/// completes at once. A [`Timer`] built there ([`Timer::builder`], with or
/// without [`runtime`](crate::Builder::runtime)) runs on tokio's clock too,
/// in real time: the test clock's timer is [`TestRuntime::timer`], which
/// [`Timer::current`] returns inside the runtime (pass it to hyper, or to
/// `DelayQueue::with_timer`). A `sleep` or `timeout` made outside any
/// runtime and first polled inside keeps the time it had left, counted
/// from then on the test clock; one made in another runtime keeps that
/// runtime's clock.
///
/// **When the clock moves.** With [auto-advance](TestClock::auto_advance),
/// the clock jumps to the next deadline when the runtime is idle: no
/// thread of the runtime is running (a worker running tasks, a task inside
/// `block_in_place`, a `spawn_blocking` closure), no
/// [`block_on`](TestRuntime::block_on) future is being polled or has been
/// woken, no task waits in tokio's queue, and tokio has polled its I/O
/// driver since all that became true, delivering the I/O that was ready,
/// as tokio's paused clock does before it auto-advances. That check costs
/// each step a millisecond or two of real time. What it cannot see: a
/// thread outside the runtime about to wake a task or write to a socket,
/// and tokio's own timers, which run in real time (auto-advance may jump
/// the test clock past them). A test waiting on those advances by hand.
/// A callback that fires and wakes no task does not stop auto-advance.
///
/// **By hand**, [`advance`](TestRuntime::advance) waits for the runtime to
/// be idle by the same rule, moves the clock, and waits again, so tasks
/// spawned or woken before it have registered their timers, and those it
/// woke their next ones, when it returns; inside the runtime,
/// [`advance_async`](TestRuntime::advance_async) does the same. With
/// auto-advance off, a `timeout` on the test clock is no safety net: it
/// fires only when the test moves the clock.
///
/// The builder's thread hooks (`on_thread_start`, `on_thread_stop`,
/// `on_thread_park`, `on_thread_unpark`), `thread_name_fn` and
/// `thread_keep_alive` are the test clock's: [`TestClock::build`] replaces them. Use
/// [`TestRuntime::block_on`], not the handle's: only its future counts.
///
/// Dropping it shuts the runtime down, then the timer, and lets go of
/// everything the runtime held.
pub struct TestRuntime {
    runtime: Option<Runtime>,
    idle: Arc<Idle>,
}

impl TestRuntime {
    /// Runs `future` to completion on the runtime, as `Runtime::block_on`
    /// does.
    ///
    /// While the future is being polled, or woken and waiting to be, the
    /// runtime is not idle.
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
        let current_thread = self.handle().runtime_flavor() == RuntimeFlavor::CurrentThread;
        self.runtime()
            .block_on(Busy::new(self.idle.clone(), current_thread, future))
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

    /// The time on the test clock; inside the runtime,
    /// [`wheel::now()`](crate::now) reads the same.
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
    /// assert_eq!(rt.block_on(async { wheel::now() }), rt.now());
    /// ```
    pub fn now(&self) -> Instant {
        self.idle.timer.now()
    }

    /// Moves the test clock forward by `duration`, firing what is due, with
    /// the runtime idle before and after.
    ///
    /// On a multi-thread runtime it first waits until the runtime is idle
    /// (see the type's docs), so the tasks spawned or woken before the call
    /// have registered their timers; then it moves the clock (see
    /// [`Timer::advance`]); then it waits until the runtime is idle again,
    /// so the tasks it woke have run up to their next timer. It does not
    /// return while a task keeps running. On a current-thread runtime,
    /// whose tasks run only inside `block_on`, it moves the clock and
    /// returns: the woken tasks run in the next `block_on`. With
    /// auto-advance on, the clock moves by `duration`, no further: auto-advance
    /// resumes once `advance` has returned.
    ///
    /// # Panics
    ///
    /// Panics if called inside the runtime (a task, or `block_on`'s
    /// future), where waiting for the runtime to be idle would wait for
    /// ever: await [`advance_async`](TestRuntime::advance_async) there.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let rt = wheel::TestClock::new()
    ///     .build(tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all())
    ///     .unwrap();
    /// // Made inside the runtime, the sleep reads the test clock; the
    /// // advance waits for the task to register it.
    /// let task = rt.handle().spawn(async { wheel::sleep(Duration::from_secs(60)).await });
    /// rt.advance(Duration::from_secs(60));
    /// assert!(task.is_finished());
    /// ```
    #[track_caller]
    pub fn advance(&self, duration: Duration) {
        if crate::driver::in_runtime(self.handle().id()) {
            panic!(
                "wheel: TestRuntime::advance was called inside its own runtime, where \
                 waiting for the runtime to be idle would wait for ever: \
                 `.await` TestRuntime::advance_async there"
            );
        }
        if self.handle().runtime_flavor() == RuntimeFlavor::CurrentThread {
            self.idle.timer.advance(duration);
            return;
        }
        let _advancing = self.idle.advancing();
        self.idle.wait_idle();
        self.idle.timer.advance(duration);
        self.idle.wait_idle();
    }

    /// [`advance`](TestRuntime::advance), awaited inside the runtime, as
    /// `tokio::time::advance(duration).await` is: the awaiting task counts
    /// as idle while it waits, and auto-advance, if on, does not move the
    /// clock meanwhile: it moves by `duration`, no further. On a
    /// multi-thread runtime it may be awaited outside it too (in another
    /// runtime's task); a current-thread runtime, whose tasks run only
    /// inside `block_on`, settles only there.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let rt = wheel::TestClock::new()
    ///     .build(tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all())
    ///     .unwrap();
    /// rt.block_on(async {
    ///     let task = tokio::spawn(wheel::sleep(Duration::from_secs(5)));
    ///     rt.advance_async(Duration::from_secs(5)).await;
    ///     assert!(task.is_finished());
    /// });
    /// ```
    pub async fn advance_async(&self, duration: Duration) {
        self.idle.settled().await;
        self.idle.timer.advance(duration);
        self.idle.settled().await;
    }

    fn runtime(&self) -> &Runtime {
        self.runtime.as_ref().expect("only taken by drop")
    }
}

impl Drop for TestRuntime {
    fn drop(&mut self) {
        let id = self.runtime().handle().id();
        // The runtime's hooks hold the `Idle`: it lets go of the runtime
        // first, or neither would be freed.
        self.idle.stop();
        drop(self.runtime.take());
        registry::uninstall(id, &self.idle.timer);
        drop(self.idle.timer.shutdown());
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
