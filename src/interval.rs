//! [`Interval`], [`MissedTickBehavior`], and the [`interval`]/[`interval_at`]
//! constructors.

use std::future::poll_fn;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::Instant;

use crate::driver::Deadline;
use crate::{deadline_after, sleep_until, Sleep};

/// Tokio's threshold: a tick taken later than this after it was due counts
/// as missed. `poll_tick` uses the larger of this and [`ALARM_LATENESS`]
/// past the timer's tick, because a coarse-tick timer is routinely that
/// late by design, and that must not count as a miss (`Delay` would drift
/// on every tick).
const MISSED_THRESHOLD: Duration = Duration::from_millis(5);

/// How late, past its own tick, a timer may fire what is due by design: its
/// alarm waits on tokio's timer, which rounds up to tokio's millisecond
/// grid (a tick that does not nest in tokio's milliseconds, or a timer's
/// grid off tokio's where tokio's driver does not show where its grid
/// lies: see `driver/grid.rs`), and a paused clock off that grid
/// auto-advances by whole milliseconds, landing up to another one past the
/// alarm: under 2 ms in all.
const ALARM_LATENESS: Duration = Duration::from_millis(2);

/// tokio's timer resolution: a timer whose tick is no coarser completes a
/// reset into the past when tokio's would (see `Interval::reset_from`).
const TOKIO_TICK: Duration = Duration::from_millis(1);

/// Whether a tick due at `deadline` is due at once, the clock reading
/// `now`, on a timer whose tick is `tick`: passed, on a timer coarser than
/// tokio's millisecond, where a sleep until it would wait for the end of
/// the tick it rounds up to, most of a tick away (see
/// `Interval::reset_from`, `Timer::interval_at`).
pub(crate) fn passed_on_a_coarse_timer(deadline: Instant, now: Instant, tick: Duration) -> bool {
    deadline <= now && tick > TOKIO_TICK
}

/// An [`Interval`] on the current runtime's default timer whose first tick
/// completes at once and then every `period`.
///
/// The drop-in for `tokio::time::interval`. A period over 30 years counts
/// as 30 years, as tokio's does.
///
/// # Panics
///
/// Panics if `period` is zero. Polling a tick that is not yet due panics
/// outside a tokio runtime (with timers enabled), and after the timer has
/// shut down, as [`Sleep`] does; see [`sleep`](crate::sleep()) on where the
/// default timer comes from.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let start = wheel::Instant::now();
/// let mut every = wheel::interval(Duration::from_millis(10));
/// every.tick().await; // at once
/// every.tick().await;
/// every.tick().await;
/// assert_eq!(start.elapsed(), Duration::from_millis(20));
/// # }
/// ```
#[track_caller]
pub fn interval(period: Duration) -> Interval {
    // Now on the clock of the timer the interval belongs to.
    let (shard, now) = crate::sleep::bind();
    // Made outside any runtime, its first tick, due now by the real clock,
    // is due at once on the clock of the runtime that binds it.
    let first = Sleep::counted(shard, Deadline::from_instant(now));
    Interval::new(first, period)
}

/// An [`Interval`] on the current runtime's default timer whose first tick
/// completes at `start` and then every `period`.
///
/// # Panics
///
/// As [`interval`]'s.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let start = wheel::Instant::now() + Duration::from_secs(1);
/// let mut every = wheel::interval_at(start, Duration::from_secs(1));
/// assert_eq!(every.tick().await, start);
/// assert_eq!(every.tick().await, start + Duration::from_secs(1));
/// # }
/// ```
#[track_caller]
pub fn interval_at(start: Instant, period: Duration) -> Interval {
    // A sleep like any other, as tokio's first tick is: on a paused clock
    // that stands between two of tokio's milliseconds, a first tick due now
    // completes when tokio's would, at the next one.
    let first = sleep_until(start);
    Interval::new(first, period)
}

/// What an [`Interval`] does when a tick is late, because the task was busy
/// or the runtime was blocked. Same meaning as tokio's.
///
/// A tick counts as missed when it is taken more than 5 ms after it was due
/// (tokio's threshold), or more than one tick of the interval's timer plus
/// 2 ms if that is longer: a coarse-tick timer is up to a tick late by
/// design, and the alarm it waits on (tokio's timer) up to a millisecond
/// more (two on a paused clock off tokio's millisecond grid), and that is
/// not a miss.
///
/// Suppose ticks are due every 100 ms from 0, and the tick due at 100 ms is
/// only taken at 350 ms:
///
/// | behaviour | following ticks at (ms) |
/// |-----------|-------------------------|
/// | `Burst` (default) | 200, 300 at once, then 400, 500 |
/// | `Delay` | 450, 550, ... (period counted from the late tick) |
/// | `Skip` | 400, 500, ... (missed ticks dropped, schedule kept) |
///
/// # Examples
///
/// ```
/// use wheel::MissedTickBehavior;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let mut every = wheel::interval(std::time::Duration::from_secs(1));
/// every.set_missed_tick_behavior(MissedTickBehavior::Skip);
/// assert_eq!(every.missed_tick_behavior(), MissedTickBehavior::Skip);
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MissedTickBehavior {
    /// Catch up: fire the missed ticks as fast as possible.
    #[default]
    Burst,
    /// Start the schedule over from the late tick.
    Delay,
    /// Drop the missed ticks and fire at the next multiple of the period.
    Skip,
}

impl MissedTickBehavior {
    /// When the tick after a late one (due `timeout`, taken `now`) is due.
    fn next_timeout(self, timeout: Instant, now: Instant, period: Duration) -> Instant {
        match self {
            MissedTickBehavior::Burst => deadline_after(timeout, period),
            MissedTickBehavior::Delay => deadline_after(now, period),
            MissedTickBehavior::Skip => {
                let behind = (now - timeout).as_nanos() % period.as_nanos();
                // `behind < period`, so it fits wherever `period` does.
                let offset = Duration::from_nanos(u64::try_from(behind).unwrap_or(u64::MAX));
                deadline_after(now, period.saturating_sub(offset))
            }
        }
    }
}

/// A stream of evenly spaced ticks; made by [`interval`], [`interval_at`] or
/// a [`Timer`](crate::Timer).
///
/// Each tick yields the instant it was scheduled for. It implements
/// `futures::Stream` (never ending), so stream combinators work on it.
///
/// # Examples
///
/// ```
/// use futures::StreamExt;
/// use std::time::Duration;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let ticks: Vec<_> = wheel::interval(Duration::from_millis(10)).take(3).collect().await;
/// assert_eq!(ticks[2] - ticks[0], Duration::from_millis(20));
/// # }
/// ```
#[derive(Debug)]
#[must_use = "an interval does nothing until its ticks are awaited"]
pub struct Interval {
    delay: Sleep,
    period: Duration,
    missed_tick_behavior: MissedTickBehavior,
}

impl Interval {
    #[track_caller]
    pub(crate) fn new(delay: Sleep, period: Duration) -> Interval {
        assert!(period > Duration::ZERO, "`period` must be non-zero.");
        Interval {
            delay,
            period: crate::capped(period),
            missed_tick_behavior: MissedTickBehavior::default(),
        }
    }

    /// Completes when the next tick is due, with the instant it was due at.
    /// Cancel safe: dropping the future loses no tick.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let mut every = wheel::interval(std::time::Duration::from_secs(1));
    /// let first = every.tick().await;
    /// assert_eq!(first, every.tick().await - std::time::Duration::from_secs(1));
    /// # }
    /// ```
    pub async fn tick(&mut self) -> Instant {
        poll_fn(|cx| self.poll_tick(cx)).await
    }

    /// Polls for the next tick; `Ready(instant it was due at)` when it has
    /// come. On `Pending`, the waker from the latest poll is woken.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::task::Poll;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let mut every = wheel::interval(std::time::Duration::from_secs(1));
    /// let first = std::future::poll_fn(|cx| every.poll_tick(cx)).await;
    /// std::future::poll_fn(|cx| {
    ///     assert!(every.poll_tick(cx).is_pending());
    ///     Poll::Ready(())
    /// })
    /// .await;
    /// # let _ = first;
    /// # }
    /// ```
    pub fn poll_tick(&mut self, cx: &mut Context<'_>) -> Poll<Instant> {
        if Pin::new(&mut self.delay).poll(cx).is_pending() {
            return Poll::Pending;
        }
        let timeout = self.delay.deadline();
        let now = self.delay.now();
        let threshold = MISSED_THRESHOLD.max(self.delay.tick() + ALARM_LATENESS);
        let next = if now > deadline_after(timeout, threshold) {
            self.missed_tick_behavior
                .next_timeout(timeout, now, self.period)
        } else {
            deadline_after(timeout, self.period)
        };
        self.delay.reset_unregistered(next);
        Poll::Ready(timeout)
    }

    /// Restarts the schedule: the next tick is one period from now.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let mut every = wheel::interval(Duration::from_millis(100));
    /// every.tick().await;
    /// wheel::sleep(Duration::from_millis(50)).await;
    /// every.reset();
    /// let start = wheel::Instant::now();
    /// every.tick().await;
    /// assert_eq!(start.elapsed(), Duration::from_millis(100));
    /// # }
    /// ```
    pub fn reset(&mut self) {
        let now = self.delay.now();
        self.reset_from(deadline_after(now, self.period), now);
    }

    /// Makes the next tick due at once.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let mut every = wheel::interval(std::time::Duration::from_secs(60));
    /// every.tick().await;
    /// every.reset_immediately();
    /// let start = wheel::Instant::now();
    /// every.tick().await;
    /// assert_eq!(wheel::Instant::now(), start);
    /// # }
    /// ```
    pub fn reset_immediately(&mut self) {
        let now = self.delay.now();
        self.reset_from(now, now);
    }

    /// Makes the next tick due `after` from now (at most 30 years, as with
    /// tokio's).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let mut every = wheel::interval(std::time::Duration::from_secs(60));
    /// every.tick().await;
    /// every.reset_after(std::time::Duration::from_secs(1));
    /// let start = wheel::Instant::now();
    /// every.tick().await;
    /// assert_eq!(start.elapsed(), std::time::Duration::from_secs(1));
    /// # }
    /// ```
    pub fn reset_after(&mut self, after: Duration) {
        let now = self.delay.now();
        self.reset_from(deadline_after(now, crate::capped(after)), now);
    }

    /// Makes the next tick due at `deadline`; the period counts from there.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let mut every = wheel::interval(std::time::Duration::from_secs(60));
    /// let at = wheel::Instant::now() + std::time::Duration::from_secs(2);
    /// every.reset_at(at);
    /// assert_eq!(every.tick().await, at);
    /// # }
    /// ```
    pub fn reset_at(&mut self, deadline: Instant) {
        self.reset_from(deadline, self.delay.now());
    }

    /// The resets' common step, given the time they read: on a coarse
    /// timer (a tick over tokio's millisecond) a deadline already passed
    /// makes the next tick due at once (a waiting task is woken), rather
    /// than at the end of the timer's tick it rounds up to, which can be
    /// most of a tick away. On a finer one it is reset as any sleep is: on
    /// a paused clock it then completes when tokio's would (at tokio's
    /// next millisecond, if the clock stands between two), on a running one
    /// within a tick.
    fn reset_from(&mut self, deadline: Instant, now: Instant) {
        if passed_on_a_coarse_timer(deadline, now, self.delay.tick()) {
            self.delay.reset_passed(deadline);
        } else {
            Pin::new(&mut self.delay).reset(deadline);
        }
    }

    /// The period between ticks.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let every = wheel::interval(std::time::Duration::from_secs(3));
    /// assert_eq!(every.period(), std::time::Duration::from_secs(3));
    /// # }
    /// ```
    pub fn period(&self) -> Duration {
        self.period
    }

    /// What happens when ticks are missed.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let every = wheel::interval(std::time::Duration::from_secs(3));
    /// assert_eq!(every.missed_tick_behavior(), wheel::MissedTickBehavior::Burst);
    /// # }
    /// ```
    pub fn missed_tick_behavior(&self) -> MissedTickBehavior {
        self.missed_tick_behavior
    }

    /// Sets what happens when ticks are missed.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let mut every = wheel::interval(std::time::Duration::from_secs(3));
    /// every.set_missed_tick_behavior(wheel::MissedTickBehavior::Delay);
    /// # }
    /// ```
    pub fn set_missed_tick_behavior(&mut self, behavior: MissedTickBehavior) {
        self.missed_tick_behavior = behavior;
    }
}

impl futures_core::Stream for Interval {
    type Item = Instant;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Instant>> {
        self.get_mut().poll_tick(cx).map(Some)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (usize::MAX, None)
    }
}
