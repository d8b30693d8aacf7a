//! [`Builder`]: configures and builds a [`Timer`].

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::time::Instant;

use crate::driver::{grid_point, Clock, Driver, Geometry, Sentinel, MAX_SHARDS};
use crate::error::BuildError;
use crate::sync::Arc;
use crate::wheel::{MAX_SLOTS, MIN_SLOTS};
use crate::Timer;

/// Configures and builds a [`Timer`].
///
/// Defaults: a 125 µs tick (finer than tokio's 1 ms timer, which the alarm
/// waits on, so that the wheel's rounding seldom adds to tokio's), 64 slots
/// per level, no limit on pending timers, the current runtime.
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
    max_pending: usize,
    /// `None`: one per worker thread, rounded (see `shards`).
    shards: Option<usize>,
    clock: ClockSource,
    /// `Builder::precise`.
    precise: bool,
    /// `Builder::slack`; `None`: [`DEFAULT_SLACK`].
    slack: Option<Duration>,
}

/// A precise timer's slack unless [`Builder::slack`] says otherwise.
const DEFAULT_SLACK: Duration = Duration::from_micros(100);

/// The most slack [`Builder::slack`] takes: beyond it, a multiple of the
/// spacing could lie past what an `Instant` holds, and a multi-thread
/// runtime's precise timer, whose only alarm is the `timerfd`, would never
/// fire.
const MAX_SLACK: Duration = Duration::from_secs(1);

#[derive(Debug, Clone)]
enum ClockSource {
    /// The current runtime's clock, or this runtime's.
    Runtime(Option<Handle>),
    Manual,
}

impl Builder {
    pub(crate) fn new() -> Builder {
        Builder {
            tick: crate::DEFAULT_TICK,
            slots_per_level: 64,
            max_pending: usize::MAX,
            shards: None,
            clock: ClockSource::Runtime(None),
            precise: false,
            slack: None,
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
        self.clock = ClockSource::Runtime(Some(handle));
        self
    }

    /// At most `max` timers pending at once; more are refused.
    ///
    /// What counts is what holds an entry in the wheel: a callback from
    /// [`Timer::schedule`] until it fires (the driver takes it out of the
    /// wheel, in a batch of up to 32, to run it) or is cancelled, and a
    /// sleep from its registration until it fires or is dropped. A [`Sleep`](crate::Sleep)
    /// made by [`Timer::sleep`] (or `sleep_until`, `timeout`, `interval`)
    /// registers when first polled, as tokio's does, so one nobody polled
    /// does not count, and the refusal comes at that poll: a panic, or an
    /// error from [`Sleep::checked`](crate::Sleep::checked). The `try_*`
    /// constructors ([`Timer::try_sleep`], [`Timer::try_schedule`], ...)
    /// register at once, so their sleeps count from then on, and return an
    /// [`Error`](crate::error::Error) for which
    /// [`is_at_capacity`](crate::error::Error::is_at_capacity) is true. A
    /// [`DelayQueue`](crate::DelayQueue) keeps its entries in a wheel of its
    /// own: they do not count, only the one sleep it waits on while it has
    /// any. Resetting a timer that is pending never counts against the
    /// limit; one that has fired (its sleep not yet polled) asks for a
    /// place again, and is refused at the limit.
    ///
    /// Unlimited by default, apart from the cap on each shard of a timer
    /// split into shards (see [`shards`](Builder::shards)). Zero is refused
    /// by [`build`](Builder::build)
    /// ([`is_invalid_max_pending`](crate::error::BuildError::is_invalid_max_pending)).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let timer = wheel::Timer::builder().max_pending(2).build().unwrap();
    /// let a = timer.try_schedule(Duration::from_secs(1), || {}).unwrap();
    /// let _b = timer.try_sleep(Duration::from_secs(1)).unwrap();
    /// let _unpolled = timer.sleep(Duration::from_secs(1)); // not counted
    /// assert!(timer.try_schedule(Duration::from_secs(1), || {}).unwrap_err().is_at_capacity());
    /// a.cancel();
    /// assert!(timer.try_schedule(Duration::from_secs(1), || {}).is_ok());
    /// # }
    /// ```
    pub fn max_pending(mut self, max: usize) -> Builder {
        self.max_pending = max;
        self
    }

    /// How many wheels the timer splits its timers over: a power of two from 1 to 64.
    ///
    /// Each has its own lock and its own tokio timer. Each thread registers in
    /// one shard (the first threads to use a timer each get their own), so the
    /// workers of a multi-thread runtime create, poll and cancel timers without
    /// writing one another's memory. Any thread can poll or cancel any timer;
    /// one made on another thread costs a little more.
    ///
    /// By default: one on a current-thread runtime, on a manual clock, or
    /// with [`max_pending`](Builder::max_pending) (whose limit is exact
    /// only on one shard); otherwise twice the runtime's worker threads,
    /// rounded up to a power of two (so that two workers seldom land on one
    /// shard), at most 64.
    ///
    /// A shard holds at most `2^32 - 1` entries; a registration in a full
    /// shard is refused with an error for which
    /// [`is_at_capacity`](crate::error::Error::is_at_capacity) is true.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
    /// # async fn main() {
    /// assert_eq!(wheel::Timer::current().shards(), 4);
    /// let one = wheel::Timer::builder().shards(1).build().unwrap();
    /// assert_eq!(one.shards(), 1);
    /// assert!(wheel::Timer::builder().shards(3).build().unwrap_err().is_invalid_shards());
    /// # }
    /// ```
    pub fn shards(mut self, shards: usize) -> Builder {
        self.shards = Some(shards);
        self
    }

    /// A manual clock, which moves only when told to; no runtime needed.
    ///
    /// Its time moves only when [`Timer::advance`] or [`Timer::advance_to`] is
    /// called, which fire everything due before they return. It starts at
    /// `Instant::now()`.
    ///
    /// "Due" is by the tick, as on any timer: a deadline rounds up to the
    /// tick it falls in, so a sleep of 50 ms + 1 ns on the default 125 µs
    /// tick fires when the clock reaches 50.125 ms, not at 50 ms + 1 ns.
    /// Advance by whole ticks, or build with a 1 ns [`tick`](Builder::tick),
    /// for deadlines to fire exactly when the clock reaches them. (A sleep
    /// first polled, or reset, once the clock is at its deadline completes
    /// at once.)
    ///
    /// Dropping its last `Timer` (a [`TimerHandle`](crate::TimerHandle)
    /// holds one) shuts it down, as [`Timer::shutdown`] does: nothing could
    /// advance it any more, so a sleep still pending on it reports the
    /// shutdown rather than wait for ever, and its callbacks are dropped. A
    /// callback that holds its own timer (a `Timer` or its `TimerHandle`)
    /// keeps it alive, and itself with it, until [`Timer::shutdown`].
    ///
    /// Use it to test code that takes a `Timer` (inject one), on any runtime
    /// flavor or none: tokio's paused clock works only on a current-thread
    /// runtime, and it jumps ahead on its own whenever the runtime is idle
    /// (auto-advance), while a manual clock never moves by itself. When the
    /// code under test uses the free functions (`wheel::sleep`, ...) and a
    /// current-thread runtime, `#[tokio::test(start_paused = true)]` is
    /// enough.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tokio_test::{assert_pending, assert_ready, task};
    ///
    /// // No runtime at all.
    /// let timer = wheel::Timer::builder().manual().build().unwrap();
    /// let mut sleep = task::spawn(timer.sleep(Duration::from_secs(5)));
    /// assert_pending!(sleep.poll());
    /// timer.advance(Duration::from_secs(4));
    /// assert!(!sleep.is_woken());
    /// timer.advance(Duration::from_secs(1));
    /// assert!(sleep.is_woken());
    /// assert_ready!(sleep.poll());
    /// ```
    pub fn manual(mut self) -> Builder {
        self.clock = ClockSource::Manual;
        self
    }

    /// Fires timers within about a tick of their deadlines, below tokio's
    /// millisecond (cargo feature `precise`, Linux).
    ///
    /// Needs the cargo feature `precise` (`tiered-wheel = { ...,
    /// features = ["precise"] }`). The method exists without it, so that
    /// code falling back on another timer compiles either way, but then
    /// [`build`](Builder::build) returns an error for which
    /// [`is_precise_unsupported`](crate::error::BuildError::is_precise_unsupported)
    /// is true and whose message names the feature.
    ///
    /// However fine the tick, timers fire near it instead of on tokio's
    /// millisecond grid: each shard's alarm is a Linux `timerfd`
    /// (`CLOCK_MONOTONIC`, an absolute deadline) registered with the runtime's
    /// IO driver, whose wait in `epoll_wait` it ends at once. Pair it with a
    /// fine [`tick`](Builder::tick): `tick(Duration::from_micros(50))` makes
    /// timers late by about a tenth of a millisecond (tens of microseconds
    /// with no [`slack`](Builder::slack)) where the default timer is late by
    /// up to a millisecond or more.
    ///
    /// Never early: the driver reads the clock again when the `timerfd`
    /// fires. A runtime whose clock tokio can pause (current-thread) keeps
    /// its tokio alarm as well, so `tokio::time::pause`, `advance` and
    /// auto-advance drive a precise timer as they drive any other; the
    /// `timerfd` is armed only while that clock reads the real time.
    ///
    /// The cost: one `timerfd` per shard; a `timerfd_settime` system call
    /// each time a shard's alarm is re-armed (when its earliest timer
    /// changes), on a current-thread runtime a reset of its tokio alarm
    /// too, and a `read` each time the `timerfd` fires. With nothing due,
    /// no wake-ups (on a current-thread runtime, after the last timer
    /// fires, its tokio alarm calls once more, up to a millisecond later).
    /// With timers due, about a wake-up per [`slack`](Builder::slack)
    /// (default 100 µs), each a trip through the kernel's scheduler: with 5,000
    /// timers due within 50 ms, about twice tokio's CPU per fired timer
    /// (four times with no slack), and 1.3 times with 20,000, on the
    /// VM the benches ran on (`benches/README.md`, the lateness bench).
    ///
    /// Needs the feature, Linux, a runtime timer (not
    /// [`manual`](Builder::manual)), and a runtime with its IO driver
    /// (`enable_io()`, or `enable_all()` as `#[tokio::main]` builds it);
    /// otherwise `build` returns an error for which
    /// [`is_precise_unsupported`](crate::error::BuildError::is_precise_unsupported)
    /// or (with the feature) `is_io_disabled` is true.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// # #[tokio::main]
    /// # async fn main() {
    /// let timer = match wheel::Timer::builder()
    ///     .tick(Duration::from_micros(50))
    ///     .precise()
    ///     .build()
    /// {
    ///     Ok(precise) => precise,
    ///     // Not Linux, or no `precise` feature: the default timer, on
    ///     // tokio's millisecond grid.
    ///     Err(error) if error.is_precise_unsupported() => wheel::Timer::current(),
    ///     Err(error) => panic!("{error}"),
    /// };
    /// let deadline = wheel::Instant::now() + Duration::from_micros(300);
    /// timer.sleep_until(deadline).await;
    /// assert!(wheel::Instant::now() >= deadline);
    /// # }
    /// ```
    pub fn precise(mut self) -> Builder {
        self.precise = true;
        self
    }

    /// How much later than its tick a [`precise`](Builder::precise) timer
    /// may fire, so that timers close together share a wake-up.
    ///
    /// Default 100 µs; zero wakes for every tick with a timer due; at most
    /// one second (more is taken as one second). Never early either way.
    ///
    /// After a pass, a shard's `timerfd` is armed no sooner than the next
    /// point of a grid whose step is the slack rounded down to whole ticks,
    /// plus one tick (150 µs for the default slack and a 50 µs tick),
    /// counted from the timer's first tick: a timer due sooner waits for
    /// that point and fires with whatever else has come due, at most
    /// `slack` after its tick. The shards of a timer share the grid, so
    /// their wake-ups coincide. A lone timer, due after that point (or
    /// before the timer's first pass), fires at its own tick.
    ///
    /// Why: each wake-up costs the thread a trip through the kernel's
    /// scheduler whatever it does (22-29 µs of CPU on the 2-core VM the
    /// benches ran on, with no runtime at all), so with timers due at every
    /// tick of a fine grid, the wake-ups, not the timers, set the CPU. With
    /// 5,000 sleeps due within 50 ms, the default slack cut the CPU per
    /// fired timer about in half, for 55 µs more at the median on one
    /// thread and 31 µs on two workers (`benches/README.md`, the lateness
    /// bench).
    ///
    /// Only a precise timer's `timerfd` is spaced out. The default timer
    /// wakes on tokio's millisecond grid, which coalesces already, and
    /// ignores `slack`; so does the tokio alarm a precise timer keeps on a
    /// current-thread runtime (for a paused clock), so there a slack beyond
    /// a millisecond saves nothing more.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// # #[tokio::main]
    /// # async fn main() {
    /// // A pacer that wants every tick it can get, whatever the CPU.
    /// let builder = wheel::Timer::builder()
    ///     .tick(Duration::from_micros(50))
    ///     .precise()
    ///     .slack(Duration::ZERO);
    /// # if let Ok(pacer) = builder.build() {
    /// # pacer.sleep(Duration::from_micros(200)).await;
    /// # }
    /// # }
    /// ```
    pub fn slack(mut self, slack: Duration) -> Builder {
        self.slack = Some(slack);
        self
    }

    /// Builds the timer and starts it on the runtime.
    ///
    /// # Errors
    ///
    /// A zero tick, a tick over `u64::MAX` nanoseconds, `slots_per_level` not
    /// a power of two in `2..=4096`, `shards` not a power of two in `1..=64`
    /// or more than one with a [`max_pending`](Builder::max_pending) limit,
    /// a `max_pending` of zero, [`precise`](Builder::precise) where it
    /// cannot be had (without its cargo feature, off Linux, ...),
    /// or (unless the timer is [`manual`](Builder::manual)) no runtime, a
    /// runtime that has shut down (a [`runtime`](Builder::runtime) handle
    /// outliving it), or a runtime without timers. [`BuildError`](crate::error::BuildError)'s
    /// `is_*` predicates tell which.
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
        if self.max_pending == 0 {
            return Err(BuildError::zero_max_pending());
        }
        let limited = self.max_pending != usize::MAX;
        match self.shards {
            Some(n) if !n.is_power_of_two() || n > MAX_SHARDS => {
                return Err(BuildError::shards(n));
            }
            Some(n) if n > 1 && limited => return Err(BuildError::shards_with_limit(n)),
            _ => {}
        }
        let geometry = |shards, clock| Geometry {
            clock,
            slots_per_level: slots,
            max_pending: self.max_pending,
            shards: self.shards.unwrap_or(shards),
        };
        if self.precise {
            if cfg!(not(feature = "precise")) {
                return Err(BuildError::precise_unsupported(
                    "Builder::precise needs the cargo feature `precise`: \
                     tiered-wheel = { ..., features = [\"precise\"] }",
                ));
            }
            if matches!(self.clock, ClockSource::Manual) {
                return Err(BuildError::precise_unsupported(
                    "a manual timer's time moves only when told to, with no alarm to make precise",
                ));
            }
            if cfg!(not(target_os = "linux")) {
                return Err(BuildError::precise_unsupported(
                    "it needs Linux's timerfd; this is not Linux",
                ));
            }
        }
        let precise = self.precise;
        let handle = match self.clock {
            ClockSource::Manual => {
                let driver = Driver::new_manual(geometry(1, Clock::new(Instant::now(), self.tick)));
                return Ok(Timer::from_driver(Arc::new(driver)));
            }
            ClockSource::Runtime(Some(handle)) => handle,
            ClockSource::Runtime(None) => {
                Handle::try_current().map_err(|_| BuildError::no_runtime())?
            }
        };
        let _context = handle.enter();
        let workers = handle.metrics().num_workers();
        let shards = if workers <= 1 || limited {
            1
        } else {
            (2 * workers).next_power_of_two().min(MAX_SHARDS)
        };
        // Tokio panics (inside `sleep_until`) if the runtime has no timers;
        // the shards' alarms make theirs only when first armed.
        catch(|| drop(tokio::time::sleep_until(Instant::now())))
            .map_err(|_| BuildError::timers_disabled())?;
        // The tick grid starts on tokio's millisecond grid (see
        // `driver/grid.rs`): on a paused clock, so that a sleep completes at
        // tokio's instant; on a running one, so that tokio does not round
        // an alarm up to its next millisecond, a millisecond late at worst.
        // (Should tokio's driver move on during the search, on another
        // worker, the origin found may be off the grid: a timer as late as
        // one with no grid, never early.)
        let now = Instant::now();
        let clock = catch(|| grid_point(now))
            .ok()
            .flatten()
            .map_or(Clock::new(now, self.tick), |origin| {
                Clock::new(origin, self.tick).on_tokio_grid()
            });
        // After a pass in tick `t`, a precise alarm goes off no sooner than
        // the first multiple of `spacing` after `t` (see `alarm::spaced`):
        // a timer due at tick `d` (whose last pass ran in tick `d - 1` at
        // the latest) fires by the first multiple from `d` on, at most
        // `spacing - 1` ticks, the slack in whole ticks, after tick `d`.
        let slack = self.slack.unwrap_or(DEFAULT_SLACK).min(MAX_SLACK);
        let whole_ticks = slack.as_nanos() / self.tick.as_nanos();
        // At most 10^9 + 1 (a second of nanosecond ticks).
        let spacing = u64::try_from(whole_ticks).map_or(u64::MAX, |whole| whole + 1);
        let driver = Arc::new(driver(
            precise.then_some(spacing),
            &handle,
            geometry(shards, clock),
            default_for,
        )?);
        handle.spawn(Sentinel::new(&driver));
        // A runtime that has shut down drops the sentinel on the spot,
        // which shuts the timer down: a timer that could never fire.
        if driver.is_shut_down() {
            return Err(BuildError::runtime_shut_down());
        }
        Ok(Timer::from_driver(driver))
    }
}

/// The driver, made inside `handle`'s context: a precise one if asked for
/// (see [`Builder::precise`]).
fn driver(
    precise: Option<u64>,
    handle: &Handle,
    geometry: Geometry,
    default_for: Option<tokio::runtime::Id>,
) -> Result<Driver, BuildError> {
    #[cfg(all(feature = "precise", target_os = "linux"))]
    if let Some(spacing) = precise {
        // tokio panics when an fd is registered on a runtime whose IO
        // driver is off.
        return match catch(|| Driver::new_precise(handle.clone(), geometry, spacing)) {
            Ok(made) => made,
            Err(_) => Err(BuildError::io_disabled()),
        };
    }
    #[cfg(not(all(feature = "precise", target_os = "linux")))]
    let _ = precise;
    Ok(Driver::new(handle.clone(), geometry, default_for))
}

/// Runs `f`, turning a panic into `Err`.
///
/// Tokio offers no way to ask whether a runtime has timers (or IO, for a
/// precise timer): making a tokio timer on one without them panics, and
/// `build` turns that panic into a [`BuildError`]. The process's panic hook
/// is left alone (a library must not replace it): it reports tokio's panic
/// as it reports any other, before `build` returns the error.
fn catch<R>(f: impl FnOnce() -> R) -> std::thread::Result<R> {
    catch_unwind(AssertUnwindSafe(f))
}
