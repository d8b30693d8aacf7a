//! [`Timer`]: an explicit timer instance.

mod manual;
mod schedule;

use std::future::IntoFuture;
use std::time::Duration;

use tokio::time::Instant;

use crate::driver::{registry, Deadline, Driver, Registrant, Registration};
use crate::error::{BuildError, Error};
use crate::sync::Arc;
use crate::{Builder, Interval, Sleep, Stats, Timeout, Unfired};

/// A hierarchical timing wheel running on a tokio runtime.
///
/// A `Timer` is a cheap handle (one `Arc`): clone it freely. Every tokio
/// runtime has a default timer, used by the free functions ([`sleep`],
/// [`timeout`], [`interval`], ...) and returned by [`Timer::current`]; build
/// your own with [`Timer::builder`] to choose the tick and the geometry, or to
/// keep one subsystem's timers apart from the rest.
///
/// The timer runs on the runtime it was built on: its tokio timers (one
/// alarm per shard) are registered there, and when that runtime shuts down
/// the timer shuts down too (see [`Sleep`] for what a pending sleep does then). It keeps
/// working while any handle, any of its futures or any pending callback is
/// alive, and frees everything when the last one is gone. A
/// [`manual`](Builder::manual) timer needs no runtime: its clock moves only
/// when told to, so it shuts down when its last `Timer` (or
/// [`TimerHandle`](crate::TimerHandle)) goes, its futures alive or not.
///
/// Besides futures, a timer runs callbacks ([`schedule`](Timer::schedule)),
/// can refuse work past a limit ([`Builder::max_pending`]) and can be shut
/// down by hand ([`shutdown`](Timer::shutdown)), handing back what never ran.
///
/// [`sleep`]: crate::sleep
/// [`timeout`]: crate::timeout
/// [`interval`]: crate::interval
///
/// # Examples
///
/// ```
/// use std::time::Duration;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let timer = wheel::Timer::builder()
///     .tick(Duration::from_millis(10))
///     .slots_per_level(256)
///     .build()
///     .expect("valid geometry");
///
/// let start = wheel::Instant::now();
/// timer.sleep(Duration::from_millis(25)).await;
/// // Rounded up to the next 10 ms tick, never down.
/// assert_eq!(start.elapsed(), Duration::from_millis(30));
/// assert_eq!(timer.stats().pending, 0);
/// # }
/// ```
#[derive(Clone)]
pub struct Timer {
    driver: Arc<Driver>,
}

impl Timer {
    /// A builder for a timer with its own tick and geometry.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let timer = wheel::Timer::builder().build().unwrap();
    /// assert_eq!(timer.tick(), std::time::Duration::from_micros(125));
    /// # }
    /// ```
    pub fn builder() -> Builder {
        Builder::new()
    }

    /// The current runtime's default timer (125 µs tick, 64 slots per level),
    /// created on first use. The free functions use this timer.
    ///
    /// # Panics
    ///
    /// Panics outside a tokio runtime, or if the runtime has timers disabled.
    /// [`Timer::try_current`] returns the error instead.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let stats = wheel::Timer::current().stats();
    /// assert_eq!(stats.pending, 0);
    /// # }
    /// ```
    #[track_caller]
    pub fn current() -> Timer {
        match Timer::try_current() {
            Ok(timer) => timer,
            Err(e) => panic!("{e}"),
        }
    }

    /// The current runtime's default timer, or why there is none.
    ///
    /// # Examples
    ///
    /// ```
    /// let err = wheel::Timer::try_current().unwrap_err();
    /// assert!(err.is_no_runtime());
    /// ```
    pub fn try_current() -> Result<Timer, BuildError> {
        registry::current()
    }

    /// A future that completes `duration` from now (a duration over 30 years
    /// counts as 30 years, as with [`sleep`](crate::sleep())).
    ///
    /// Like tokio's, the sleep registers when first polled: until then it
    /// does not count against [`Builder::max_pending`], and a timer that
    /// refuses it (shut down, or at that limit) says so at that poll, with
    /// a panic, or an error through [`Sleep::checked`].
    /// [`try_sleep`](Timer::try_sleep) registers at once instead.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let timer = wheel::Timer::builder().build().unwrap();
    /// timer.sleep(std::time::Duration::from_secs(1)).await;
    /// # }
    /// ```
    pub fn sleep(&self, duration: Duration) -> Sleep {
        Sleep::at(
            Some(self.driver.home().clone()),
            Deadline::after_capped(self.now(), duration),
        )
    }

    /// A future that completes at `deadline`.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let timer = wheel::Timer::builder().build().unwrap();
    /// let deadline = wheel::Instant::now() + std::time::Duration::from_secs(1);
    /// timer.sleep_until(deadline).await;
    /// assert!(wheel::Instant::now() >= deadline);
    /// # }
    /// ```
    pub fn sleep_until(&self, deadline: Instant) -> Sleep {
        Sleep::new(Some(self.driver.home().clone()), deadline)
    }

    /// Requires `future` to complete within `duration`; a `duration` too long
    /// for the deadline to exist (`Duration::MAX`) means none, as with
    /// [`timeout`](crate::timeout()).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let timer = wheel::Timer::builder().build().unwrap();
    /// let out = timer.timeout(std::time::Duration::from_secs(1), async { 7 }).await;
    /// assert_eq!(out, Ok(7));
    /// # }
    /// ```
    pub fn timeout<F: IntoFuture>(&self, duration: Duration, future: F) -> Timeout<F::IntoFuture> {
        // The clock first, as `wheel::timeout` and tokio's read it.
        let until = self.now().checked_add(duration);
        Timeout::made_in(
            future.into_future(),
            None,
            Some(self.driver.home().clone()),
            until,
        )
    }

    /// Requires `future` to complete before `deadline`.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let timer = wheel::Timer::builder().build().unwrap();
    /// let deadline = wheel::Instant::now() + std::time::Duration::from_millis(10);
    /// let out = timer.timeout_at(deadline, std::future::pending::<()>()).await;
    /// assert!(out.is_err());
    /// # }
    /// ```
    pub fn timeout_at<F: IntoFuture>(
        &self,
        deadline: Instant,
        future: F,
    ) -> Timeout<F::IntoFuture> {
        Timeout::new(future.into_future(), self.sleep_until(deadline))
    }

    /// An [`Interval`] on this timer whose first tick is due now: at once, as
    /// tokio's is.
    ///
    /// On a paused clock, at once once tokio has processed the clock; on a
    /// timer whose tick is over a millisecond, at once there too.
    ///
    /// # Panics
    ///
    /// Panics if `period` is zero. Polling a tick not yet due panics after
    /// the timer has shut down, or at its
    /// [`max_pending`](crate::Builder::max_pending) limit, as its
    /// [`Sleep`]s do.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let timer = wheel::Timer::builder().build().unwrap();
    /// let mut every = timer.interval(std::time::Duration::from_millis(10));
    /// let first = every.tick().await;
    /// let second = every.tick().await;
    /// assert_eq!(second - first, std::time::Duration::from_millis(10));
    /// # }
    /// ```
    #[track_caller]
    pub fn interval(&self, period: Duration) -> Interval {
        self.interval_at(self.now(), period)
    }

    /// An [`Interval`] on this timer whose first tick completes at `start`.
    ///
    /// # Panics
    ///
    /// Panics if `period` is zero. Polling a tick not yet due panics after
    /// the timer has shut down, or at its
    /// [`max_pending`](crate::Builder::max_pending) limit, as its
    /// [`Sleep`]s do.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let timer = wheel::Timer::builder().build().unwrap();
    /// let start = wheel::Instant::now() + std::time::Duration::from_secs(1);
    /// let mut every = timer.interval_at(start, std::time::Duration::from_secs(1));
    /// assert_eq!(every.tick().await, start);
    /// # }
    /// ```
    #[track_caller]
    pub fn interval_at(&self, start: Instant, period: Duration) -> Interval {
        // A start already passed is due at once, as tokio's first tick is
        // (on a paused clock once tokio has processed it), not at the end of
        // the tick it rounds up to; on a coarse timer, at once whenever the
        // clock has reached it, as a reset into the past ticks there.
        let home = self.driver.home();
        let passed = crate::interval::passed_on_a_coarse_timer(start, home.now(), self.tick());
        let first = if passed || home.come(start) {
            Sleep::elapsed_at(Some(home.clone()), start)
        } else {
            self.sleep_until(start)
        };
        Interval::new(first, period)
    }

    /// The current time on this timer's clock.
    ///
    /// `Instant::now()` for a timer driven by a runtime (tokio's paused clock
    /// included), the manual clock's time for a [`manual`](Builder::manual)
    /// timer.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let timer = wheel::Timer::builder().build().unwrap();
    /// let before = timer.now();
    /// timer.sleep(std::time::Duration::from_secs(1)).await;
    /// assert_eq!(timer.now() - before, std::time::Duration::from_secs(1));
    /// # }
    /// ```
    pub fn now(&self) -> Instant {
        self.driver.now()
    }

    /// Like [`sleep`](Timer::sleep), but registers the sleep now, returning
    /// the timer's refusal as an error.
    ///
    /// Where [`sleep`](Timer::sleep) registers at its first poll (and
    /// panics there if refused), this sleep holds its place from now on:
    /// it counts against [`Builder::max_pending`] even before it is polled,
    /// and a later refusal (a shutdown) is reported by [`Sleep::checked`].
    ///
    /// # Errors
    ///
    /// The timer has shut down, or holds `max_pending` pending timers
    /// (unless the deadline has already passed: see
    /// [`shutdown`](Timer::shutdown)).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let timer = wheel::Timer::builder().build().unwrap();
    /// let sleep = timer.try_sleep(std::time::Duration::from_secs(1)).unwrap();
    /// assert_eq!(timer.stats().pending, 1);
    /// sleep.await;
    /// timer.shutdown();
    /// assert!(timer.try_sleep(std::time::Duration::from_secs(1)).unwrap_err().is_shutdown());
    /// # }
    /// ```
    pub fn try_sleep(&self, duration: Duration) -> Result<Sleep, Error> {
        self.try_sleep_until(self.deadline_after(duration))
    }

    /// Like [`sleep_until`](Timer::sleep_until), but registers the sleep now;
    /// see [`try_sleep`](Timer::try_sleep).
    ///
    /// # Errors
    ///
    /// The timer has shut down, or holds `max_pending` pending timers
    /// (unless the deadline has already passed: see
    /// [`shutdown`](Timer::shutdown)).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let timer = wheel::Timer::builder().build().unwrap();
    /// let deadline = timer.now() + std::time::Duration::from_millis(10);
    /// timer.try_sleep_until(deadline).unwrap().await;
    /// assert!(timer.now() >= deadline);
    /// # }
    /// ```
    pub fn try_sleep_until(&self, deadline: Instant) -> Result<Sleep, Error> {
        let deadline = Deadline::from_instant(deadline);
        let shard = self.driver.home().clone();
        let registration = if deadline.reached_by(self.now()) {
            Registration::Elapsed
        } else {
            let tick = shard.clock().tick_of(deadline);
            shard.register(deadline, tick, Registrant::Eager)
        };
        Sleep::registered(shard, deadline, registration)
    }

    /// Like [`timeout`](Timer::timeout), but registers its sleep now; see
    /// [`try_sleep`](Timer::try_sleep).
    ///
    /// # Errors
    ///
    /// The timer has shut down, or holds `max_pending` pending timers
    /// (unless the deadline has already passed: see
    /// [`shutdown`](Timer::shutdown)).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let timer = wheel::Timer::builder().max_pending(10).build().unwrap();
    /// let out = timer.try_timeout(std::time::Duration::from_secs(1), async { 7 }).unwrap();
    /// assert_eq!(out.await, Ok(7));
    /// # }
    /// ```
    pub fn try_timeout<F: IntoFuture>(
        &self,
        duration: Duration,
        future: F,
    ) -> Result<Timeout<F::IntoFuture>, Error> {
        match self.now().checked_add(duration) {
            Some(deadline) => self.try_timeout_at(deadline, future),
            // No deadline: nothing to register.
            None => Ok(Timeout::new(
                future.into_future(),
                Sleep::at(Some(self.driver.home().clone()), Deadline::NEVER),
            )),
        }
    }

    /// Like [`timeout_at`](Timer::timeout_at), but registers its sleep now;
    /// see [`try_sleep`](Timer::try_sleep).
    ///
    /// # Errors
    ///
    /// The timer has shut down, or holds `max_pending` pending timers
    /// (unless the deadline has already passed: see
    /// [`shutdown`](Timer::shutdown)).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let timer = wheel::Timer::builder().build().unwrap();
    /// let deadline = timer.now() + std::time::Duration::from_millis(10);
    /// let out = timer.try_timeout_at(deadline, std::future::pending::<()>()).unwrap();
    /// assert!(out.await.is_err());
    /// # }
    /// ```
    pub fn try_timeout_at<F: IntoFuture>(
        &self,
        deadline: Instant,
        future: F,
    ) -> Result<Timeout<F::IntoFuture>, Error> {
        let sleep = self.try_sleep_until(deadline)?;
        Ok(Timeout::new(future.into_future(), sleep))
    }

    /// Stops the timer and returns what never ran.
    ///
    /// That is the pending callbacks, by deadline, and those with one deadline
    /// in the order they were scheduled (not run; run them yourself if you
    /// like), and how many sleeps were pending.
    ///
    /// Afterwards the timer refuses new work: the `try_*` constructors
    /// return an error for which [`is_shutdown`](Error::is_shutdown) is
    /// true; [`schedule`](Timer::schedule) panics, and the futures that
    /// [`sleep`](Timer::sleep), [`timeout`](Timer::timeout) and
    /// [`interval`](Timer::interval) make (they register when first
    /// polled) panic when polled. A sleep or timeout whose deadline has
    /// already passed is the exception: it needs no timer to complete, so
    /// it is made, and completes, as on a running timer. Every pending [`Sleep`] (and so every
    /// pending [`Timeout`] and [`Interval`]) is woken and, polled before its
    /// deadline, panics with a message saying the timer has shut down,
    /// rather than hang or complete early (polled after it, it completes); drop them instead of polling them,
    /// or wait on [`Sleep::checked`], which reports the shutdown as an
    /// error for which [`is_shutdown`](Error::is_shutdown) is true. The
    /// handles of the returned callbacks report
    /// [`is_cancelled`](crate::TimerHandle::is_cancelled). A second call returns
    /// nothing. A runtime's shutdown does the same to its timers, dropping
    /// the callbacks. It does not stop the callbacks the driver has already
    /// taken out of the wheel to run in its current pass (up to 32 at a
    /// time), whether it is called from one of them or from another thread
    /// while they run: they still run, and are not handed back. To stop one
    /// of those, [`cancel`](crate::TimerHandle::cancel) it.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let timer = wheel::Timer::builder().manual().build().unwrap();
    /// timer.schedule(Duration::from_secs(2), || println!("second"));
    /// let first = timer.schedule(Duration::from_secs(1), || println!("first"));
    /// let _sleep = timer.try_sleep(Duration::from_secs(3)).unwrap();
    ///
    /// let unfired = timer.shutdown();
    /// assert_eq!(unfired.sleeps, 1);
    /// assert_eq!(unfired.callbacks.len(), 2);
    /// assert_eq!(unfired.callbacks[0].deadline(), first.deadline());
    /// assert!(first.is_cancelled());
    /// assert!(timer.is_shut_down());
    /// assert!(timer.try_schedule(Duration::from_secs(1), || {}).unwrap_err().is_shutdown());
    /// ```
    pub fn shutdown(&self) -> Unfired {
        Unfired::new(self.driver.shut_down())
    }

    /// A snapshot of this timer's counters.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let timer = wheel::Timer::builder().build().unwrap();
    /// timer.sleep(std::time::Duration::from_millis(1)).await;
    /// let stats = timer.stats();
    /// assert_eq!((stats.pending, stats.fired), (0, 1));
    /// # }
    /// ```
    pub fn stats(&self) -> Stats {
        self.driver.stats()
    }

    /// The length of one tick.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// assert_eq!(wheel::Timer::current().tick(), std::time::Duration::from_micros(125));
    /// # }
    /// ```
    pub fn tick(&self) -> Duration {
        self.driver.clock().tick()
    }

    /// Slots in each level of the wheel.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// assert_eq!(wheel::Timer::current().slots_per_level(), 64);
    /// # }
    /// ```
    pub fn slots_per_level(&self) -> usize {
        self.driver.slots_per_level()
    }

    /// How many wheels the timer splits its timers over
    /// ([`Builder::shards`]).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// assert_eq!(wheel::Timer::current().shards(), 1);
    /// # }
    /// ```
    pub fn shards(&self) -> usize {
        self.driver.shards().len()
    }

    /// Whether the timer has shut down ([`shutdown`](Timer::shutdown) was
    /// called, or its runtime shut down).
    ///
    /// A shut-down timer fires nothing more, apart from the callbacks its
    /// driver had already taken to run when the shutdown came (see
    /// [`shutdown`](Timer::shutdown)).
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    /// let timer = rt.block_on(async { wheel::Timer::builder().build().unwrap() });
    /// assert!(!timer.is_shut_down());
    /// drop(rt);
    /// assert!(timer.is_shut_down());
    /// ```
    pub fn is_shut_down(&self) -> bool {
        self.driver.is_shut_down()
    }

    pub(crate) fn driver(&self) -> &Driver {
        &self.driver
    }

    pub(crate) fn driver_arc(&self) -> &Arc<Driver> {
        &self.driver
    }

    pub(crate) fn from_driver(driver: Arc<Driver>) -> Timer {
        Timer { driver }
    }

    /// `now + duration` on this timer's clock, `duration` cut to 30 years as
    /// `sleep` cuts it.
    fn deadline_after(&self, duration: Duration) -> Instant {
        crate::deadline_after(self.now(), crate::capped(duration))
    }
}

impl std::fmt::Debug for Timer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Timer")
            .field("tick", &self.tick())
            .field("slots_per_level", &self.slots_per_level())
            .field("shards", &self.shards())
            .field("manual", &self.is_manual())
            .field("shut_down", &self.is_shut_down())
            .finish()
    }
}
