//! The queue's timer and its tick grid on it ([`Bound`]), found on first
//! use for a queue made by `DelayQueue::new`, at once for one made
//! `with_timer`.

use std::time::Duration;

use tokio::time::Instant;

use super::DelayQueue;
use crate::driver::Clock;
use crate::error::BuildError;
use crate::Timer;

/// The timer a queue uses, and the queue's tick grid on it.
pub(super) struct Bound {
    pub(super) timer: Timer,
    pub(super) clock: Clock,
    /// For a queue made by `new` on a runtime's clock: that runtime, whose
    /// tokio timer the queue waits on (see `wait.rs`).
    pub(super) runtime: Option<tokio::runtime::Handle>,
    /// The clock's tick 0, and as `at.rs` keeps a deadline (`None` if it
    /// cannot), and the tick in nanoseconds: for [`DelayQueue::ahead`]'s
    /// 64-bit arithmetic.
    origin: Instant,
    origin_at: Option<i64>,
    tick_nanos: u64,
}

impl Bound {
    /// `start`: the queue was made by `DelayQueue::new` then, and counts
    /// whole milliseconds: from `start` on a paused clock, as tokio-util's
    /// does, tokio's own on a running one.
    pub(super) fn new(timer: Timer, start: Option<Instant>) -> Bound {
        let time = timer.driver().time();
        let now = timer.now();
        // Made where the clock was ahead of this timer's (on another
        // runtime's paused clock, or the real one beside a paused runtime):
        // counted from then, every deadline on this clock would fall before
        // the origin, at tick 0, and come out at once. The queue's time
        // starts no later than its timer's now.
        let start = start.map(|start| start.min(now));
        let grid = time.clock();
        // The last tick boundary at or before `at`, on the timer's grid.
        let floor = |at: Instant, tick: u64| grid.instant_at(tick).map_or(at, |s| s.min(at));
        // A queue made by `new` waits on a tokio timer of its runtime
        // (`wait.rs`).
        let runtime = start.and(time.handle().cloned());
        let (origin, tick) = match start {
            // With a timer of its own, tick 0 starts at the timer's last
            // tick boundary, so the queue's ticks are the timer's ticks and
            // a deadline is rounded up once, not once by the queue and again
            // by the timer. Never after `now`: a deadline before the origin
            // maps to tick 0.
            None => (floor(now, grid.now_tick(now)), timer.tick()),
            // Made by `new` on a runtime whose clock runs: it counts tokio's
            // own milliseconds (the default timer's grid is tokio's), from
            // the last one begun by now, so a deadline is rounded up once,
            // not again by tokio: up to a millisecond less late than
            // tokio-util's queue, never early. From now, not its creation:
            // made before the timer's grid begins (outside the runtime, or
            // before it), it would count from its creation, off that grid.
            Some(_) if runtime.is_some() && !time.read().still => {
                let tick = grid.tokio_ms_floor(grid.now_tick(now));
                (floor(now, tick), Duration::from_millis(1))
            }
            // On a paused clock (or a test clock), whole milliseconds from
            // its creation, as tokio-util's: entries come out at its
            // instants.
            Some(start) => (start, Duration::from_millis(1)),
        };
        let clock = Clock::new(origin, tick);
        let origin_at = Some(super::at::encode(origin)).filter(|&at| at != super::at::FAR);
        let tick_nanos = u64::try_from(tick.as_nanos()).expect("checked by the builder");
        Bound {
            timer,
            clock,
            runtime,
            origin,
            origin_at,
            tick_nanos,
        }
    }
}

impl<T> DelayQueue<T> {
    /// The queue's timer and tick grid, looked up on first use.
    #[track_caller]
    pub(super) fn bound(&mut self) -> &Bound {
        if self.bound.is_none() {
            let timer = match Timer::try_current() {
                Ok(timer) => timer,
                Err(e) => no_default_timer(&e),
            };
            self.bound = Some(Bound::new(timer, self.start));
        }
        self.bound.as_ref().expect("bound above")
    }

    /// The queue's timer's clock.
    #[track_caller]
    pub(super) fn now(&mut self) -> Instant {
        self.bound().timer.now()
    }

    /// The tick and the kept deadline (see `at.rs`) of `now + timeout`,
    /// when that is after `now` and the sum's nanoseconds from the origin
    /// fit a `u64`: the common case, in 64-bit arithmetic on nanoseconds
    /// rather than an `Instant` sum, compare and conversion. The tick is
    /// the clock's `deadline_tick` of `now + timeout`, which is `(now +
    /// timeout - origin)` in nanoseconds divided by the tick, rounded up;
    /// the kept deadline is `encode(now + timeout)`, which is the origin's
    /// plus those nanoseconds. `None` otherwise: the caller takes the
    /// general path, through the `Instant`.
    #[inline]
    pub(super) fn ahead(&mut self, now: Instant, timeout: Duration) -> Option<(u64, i64)> {
        if timeout.is_zero() {
            return None;
        }
        let bound = self.bound();
        let since = now.checked_duration_since(bound.origin)?;
        let nanos = nanos(since)?.checked_add(nanos(timeout)?)?;
        // Above `FAR` (`i64::MIN`): a non-negative sum of an `i64` above it.
        let at = bound.origin_at?.checked_add(i64::try_from(nanos).ok()?)?;
        Some((nanos.div_ceil(bound.tick_nanos), at))
    }

    /// The tick an entry due at `deadline` waits for: the deadline rounded
    /// up to the queue's tick (never early). With a timer of its own, one
    /// passed by now (`now`, or the clock read here if `None`) is due at
    /// the tick it fell in, whose start has come: rounding it up would hold
    /// a zero timeout back to the next tick. On the default timer it rounds
    /// up, as tokio-util's does, and the clock is not read.
    #[track_caller]
    pub(super) fn due_tick(&mut self, deadline: Instant, now: Option<Instant>) -> u64 {
        let own = self.start.is_none();
        let bound = self.bound();
        if own && deadline <= now.unwrap_or_else(|| bound.timer.now()) {
            bound.clock.now_tick(deadline)
        } else {
            bound.clock.deadline_tick(deadline)
        }
    }
}

/// `duration` in nanoseconds, if that fits a `u64`.
#[inline]
fn nanos(duration: Duration) -> Option<u64> {
    duration
        .as_secs()
        .checked_mul(1_000_000_000)?
        .checked_add(u64::from(duration.subsec_nanos()))
}

/// The panic of a queue made by [`DelayQueue::new`] (or `with_capacity`,
/// `default`) used where there is no default timer to bind it to.
/// `BuildError`'s own message suggests `Builder::runtime`, which a queue
/// does not take: its way to a timer of its choosing is `with_timer`.
#[cold]
#[track_caller]
fn no_default_timer(error: &BuildError) -> ! {
    if error.is_no_runtime() && !error.is_runtime_shut_down() {
        panic!(
            "wheel: a DelayQueue made by DelayQueue::new (or with_capacity, default) uses \
             the current tokio runtime's default timer, and there is no runtime here: use \
             the queue inside a runtime, or make it with DelayQueue::with_timer (a manual \
             Timer needs no runtime)"
        )
    }
    panic!(
        "wheel: a DelayQueue made by DelayQueue::new uses the current tokio runtime's \
         default timer, which it cannot get: {error}; or make the queue with \
         DelayQueue::with_timer"
    )
}
