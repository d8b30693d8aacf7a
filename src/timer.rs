//! [`Timer`]: an explicit timer instance, its [`Builder`] and its [`Stats`].

use std::future::IntoFuture;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::time::Instant;

use crate::driver::{registry, Clock, Sentinel, Shared};
use crate::error::BuildError;
use crate::sync::Arc;
use crate::wheel::{MAX_SLOTS, MIN_SLOTS};
use crate::{Interval, Sleep, Timeout};

/// A hierarchical timing wheel running on a tokio runtime.
///
/// A `Timer` is a cheap handle (one `Arc`): clone it freely. Every tokio
/// runtime has a default timer, used by the free functions ([`sleep`],
/// [`timeout`], [`interval`], ...) and returned by [`Timer::current`]; build
/// your own with [`Timer::builder`] to choose the tick and the geometry, or to
/// keep one subsystem's timers apart from the rest.
///
/// The timer runs on the runtime it was built on: its one tokio timer (the
/// alarm) is registered there, and when that runtime shuts down the timer
/// shuts down too (see [`Sleep`] for what a pending sleep does then). It keeps
/// working while any handle or any of its futures is alive, and frees
/// everything when the last one is dropped.
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
    shared: Arc<Shared>,
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
    /// assert_eq!(timer.tick(), std::time::Duration::from_millis(1));
    /// # }
    /// ```
    pub fn builder() -> Builder {
        Builder::new()
    }

    /// The current runtime's default timer (1 ms tick, 64 slots per level),
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

    /// A future that completes `duration` from now.
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
        Sleep::new(Some(self.clone()), crate::deadline_after(duration))
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
        Sleep::new(Some(self.clone()), deadline)
    }

    /// Requires `future` to complete within `duration`.
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
        Timeout::new(future.into_future(), self.sleep(duration))
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

    /// An [`Interval`] on this timer whose first tick completes at once.
    ///
    /// # Panics
    ///
    /// Panics if `period` is zero.
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
        self.interval_at(Instant::now(), period)
    }

    /// An [`Interval`] on this timer whose first tick completes at `start`.
    ///
    /// # Panics
    ///
    /// Panics if `period` is zero.
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
        Interval::new(self.sleep_until(start), period)
    }

    /// The current time on this timer's clock: `Instant::now()` for a timer
    /// driven by a runtime (tokio's paused clock included).
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
        Instant::now()
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
        self.shared.stats()
    }

    /// The length of one tick.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// assert_eq!(wheel::Timer::current().tick(), std::time::Duration::from_millis(1));
    /// # }
    /// ```
    pub fn tick(&self) -> Duration {
        self.shared.clock().tick()
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
        self.shared.slots_per_level()
    }

    /// Whether the timer's runtime has shut down. A shut-down timer fires
    /// nothing more.
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
        self.shared.is_shut_down()
    }

    pub(crate) fn shared(&self) -> &Shared {
        &self.shared
    }
}

impl std::fmt::Debug for Timer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Timer")
            .field("tick", &self.tick())
            .field("slots_per_level", &self.slots_per_level())
            .field("shut_down", &self.is_shut_down())
            .finish()
    }
}

/// Configures and builds a [`Timer`].
///
/// Defaults: a 1 ms tick, 64 slots per level, the current runtime.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// // Coarse timer for idle-connection timeouts: 100 ms ticks, 4 levels
/// // of 64 slots cover ~19 days before an overflow level is needed.
/// let idle = wheel::Timer::builder()
///     .tick(Duration::from_millis(100))
///     .build()
///     .unwrap();
/// assert!(wheel::Timer::builder().tick(Duration::ZERO).build().unwrap_err().is_invalid_tick());
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Builder {
    tick: Duration,
    slots_per_level: usize,
    runtime: Option<Handle>,
}

impl Builder {
    fn new() -> Builder {
        Builder {
            tick: crate::DEFAULT_TICK,
            slots_per_level: 64,
            runtime: None,
        }
    }

    /// The length of one tick: timers fire at most one tick (plus
    /// scheduling) after their deadline, never before. Must be non-zero.
    ///
    /// The alarm waits on tokio's timer, which has 1 ms resolution, so ticks
    /// under 1 ms bound the rounding but not the wake-up latency.
    ///
    /// The wheel counts `u64` ticks from the timer's start: 584 years at
    /// 1 ns, 584 million years at 1 ms. A deadline beyond that range is
    /// clamped to its last tick, which never comes: such a timer never
    /// fires (rather than firing early once the clock passes the range).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let t = wheel::Timer::builder().tick(std::time::Duration::from_millis(5)).build().unwrap();
    /// assert_eq!(t.tick(), std::time::Duration::from_millis(5));
    /// # }
    /// ```
    pub fn tick(mut self, tick: Duration) -> Builder {
        self.tick = tick;
        self
    }

    /// Slots per level: a power of two from 2 to 4096. More slots mean fewer
    /// levels and fewer cascades, at 8 bytes per slot per level.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let t = wheel::Timer::builder().slots_per_level(512).build().unwrap();
    /// assert_eq!(t.slots_per_level(), 512);
    /// # }
    /// ```
    pub fn slots_per_level(mut self, slots: usize) -> Builder {
        self.slots_per_level = slots;
        self
    }

    /// The runtime to run the timer on, instead of the current one. Lets a
    /// timer be built outside any runtime.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    /// let timer = wheel::Timer::builder().runtime(rt.handle().clone()).build().unwrap();
    /// rt.block_on(timer.sleep(std::time::Duration::from_millis(1)));
    /// ```
    pub fn runtime(mut self, handle: Handle) -> Builder {
        self.runtime = Some(handle);
        self
    }

    /// Builds the timer and starts it on the runtime.
    ///
    /// # Errors
    ///
    /// A zero tick, a tick over `u64::MAX` nanoseconds, `slots_per_level` not
    /// a power of two in `2..=4096`, no runtime, or a runtime without timers.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let err = wheel::Timer::builder().slots_per_level(3).build().unwrap_err();
    /// assert!(err.is_invalid_slots());
    /// # }
    /// ```
    pub fn build(self) -> Result<Timer, BuildError> {
        self.build_inner(None)
    }

    pub(crate) fn build_default(self, runtime: tokio::runtime::Id) -> Result<Timer, BuildError> {
        self.build_inner(Some(runtime))
    }

    fn build_inner(self, default_for: Option<tokio::runtime::Id>) -> Result<Timer, BuildError> {
        if self.tick.is_zero() {
            return Err(BuildError::zero_tick());
        }
        if u64::try_from(self.tick.as_nanos()).is_err() {
            return Err(BuildError::tick_too_long(self.tick));
        }
        let slots = self.slots_per_level;
        if !slots.is_power_of_two() || !(MIN_SLOTS..=MAX_SLOTS).contains(&slots) {
            return Err(BuildError::slots(slots));
        }
        let handle = match self.runtime {
            Some(handle) => handle,
            None => Handle::try_current().map_err(|_| BuildError::no_runtime())?,
        };
        let _context = handle.enter();
        let tick = self.tick;
        // Tokio panics (inside `sleep_until`) if the runtime has no timers.
        let shared = catch_unwind(AssertUnwindSafe(|| {
            Shared::new(
                handle.clone(),
                Clock::new(Instant::now(), tick),
                slots,
                default_for,
            )
        }))
        .map_err(|_| BuildError::timers_disabled())?;
        handle.spawn(Sentinel::new(Arc::downgrade(&shared)));
        Ok(Timer { shared })
    }
}

/// A snapshot of a timer's counters, from [`Timer::stats`].
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let stats: wheel::Stats = wheel::Timer::current().stats();
/// println!("{} pending in {} levels", stats.pending, stats.levels);
/// # }
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Timers registered and waiting for their deadline.
    pub pending: usize,
    /// Wheel entries in use: the pending ones plus fired ones whose future
    /// has not yet been polled or dropped to collect the result.
    pub entries: usize,
    /// Levels the wheel has allocated (level 0 always; higher ones on demand).
    pub levels: usize,
    /// Timers fired since the timer was built.
    pub fired: u64,
    /// Registered timers dropped before they fired.
    pub cancelled: u64,
    /// Entries the wheel's slab has room for: its capacity, at about 40
    /// bytes each. It grows with the number of live entries (like a `Vec`,
    /// so it never exceeds twice the peak) and is given back as they go:
    /// when the timer has no entries left it is at most 1024, and zero after
    /// any burst larger than that. While entries are live and fewer than a
    /// quarter of the slots are in use, it is cut to the highest slot still
    /// in use, once every capacity / 4 removals (so removal stays O(1)
    /// amortised). Entries never move, so a live timer from the top of a
    /// burst holds the capacity up to it until it completes or is dropped.
    pub allocated_entries: usize,
    /// Heap bytes of the wheel's levels (8 bytes per slot per level, plus
    /// occupancy bitmaps). Levels are allocated when a deadline first needs
    /// them; empty ones are freed, from the top, when the slab is trimmed
    /// (see `allocated_entries`), so a timer that empties after a burst is
    /// back to one level. A timer that never grows past the trim floor
    /// keeps its levels: a few KiB at most with 64 slots per level.
    pub level_bytes: usize,
}
