//! Conversions between `Instant`s and wheel ticks.

use std::time::Duration;

use tokio::time::Instant;

/// A timer's time base: tick 0 starts at `origin`, each tick lasts `tick`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock {
    origin: Instant,
    tick: Duration,
    tick_nanos: u64,
}

impl Clock {
    /// `tick` must be non-zero and at most `u64::MAX` nanoseconds (the
    /// builder checks).
    pub(crate) fn new(origin: Instant, tick: Duration) -> Clock {
        let tick_nanos = u64::try_from(tick.as_nanos()).expect("tick checked by the builder");
        assert!(tick_nanos > 0, "tick checked by the builder");
        Clock {
            origin,
            tick,
            tick_nanos,
        }
    }

    pub(crate) fn tick(&self) -> Duration {
        self.tick
    }

    /// The first tick at or after `deadline`: deadlines round up, so a timer
    /// never fires before its deadline. Saturates at `u64::MAX` (never fires).
    pub(crate) fn deadline_tick(&self, deadline: Instant) -> u64 {
        let nanos = deadline.saturating_duration_since(self.origin).as_nanos();
        match u64::try_from(nanos) {
            Ok(nanos) => nanos.div_ceil(self.tick_nanos),
            Err(_) => u64::try_from(nanos.div_ceil(self.tick_nanos as u128)).unwrap_or(u64::MAX),
        }
    }

    /// The last tick that has fully begun by `now` (rounds down), at most
    /// `u64::MAX - 1`: tick `u64::MAX` is where [`deadline_tick`] clamps
    /// deadlines beyond the wheel's range, so it must never come, or a
    /// clamped deadline centuries away would fire as soon as the clock
    /// passed the range (possible with a nanosecond tick and a paused clock).
    ///
    /// [`deadline_tick`]: Clock::deadline_tick
    pub(crate) fn now_tick(&self, now: Instant) -> u64 {
        let nanos = now.saturating_duration_since(self.origin).as_nanos();
        let tick = match u64::try_from(nanos) {
            Ok(nanos) => nanos / self.tick_nanos,
            Err(_) => u64::try_from(nanos / self.tick_nanos as u128).unwrap_or(u64::MAX),
        };
        tick.min(u64::MAX - 1)
    }

    /// When `tick` begins, or `None` if that is beyond what `Instant` holds.
    pub(crate) fn instant_at(&self, tick: u64) -> Option<Instant> {
        let nanos = u128::from(tick) * u128::from(self.tick_nanos);
        let secs = u64::try_from(nanos / 1_000_000_000).ok()?;
        let offset = Duration::new(secs, (nanos % 1_000_000_000) as u32);
        self.origin.checked_add(offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clock(tick: Duration) -> (Instant, Clock) {
        let origin = Instant::now();
        (origin, Clock::new(origin, tick))
    }

    #[test]
    fn deadlines_round_up_and_now_rounds_down() {
        let (o, c) = clock(Duration::from_millis(10));
        assert_eq!(c.deadline_tick(o), 0);
        assert_eq!(c.deadline_tick(o + Duration::from_nanos(1)), 1);
        assert_eq!(c.deadline_tick(o + Duration::from_millis(10)), 1);
        assert_eq!(c.deadline_tick(o + Duration::from_millis(25)), 3);
        assert_eq!(c.now_tick(o + Duration::from_millis(29)), 2);
        assert_eq!(c.now_tick(o + Duration::from_millis(30)), 3);
    }

    #[test]
    fn a_tick_never_begins_before_its_deadline() {
        let (o, c) = clock(Duration::from_micros(333));
        for ns in [
            1u64,
            332_999,
            333_000,
            333_001,
            1_000_000_007,
            86_400_000_000_000,
        ] {
            let deadline = o + Duration::from_nanos(ns);
            let tick = c.deadline_tick(deadline);
            let begins = c.instant_at(tick).unwrap();
            assert!(begins >= deadline, "{ns} ns: tick {tick} begins early");
            assert!(
                begins - deadline < c.tick(),
                "{ns} ns: more than a tick late"
            );
            assert!(c.now_tick(begins) >= tick);
        }
    }

    #[test]
    fn the_past_is_tick_zero_and_far_future_saturates() {
        let (o, c) = clock(Duration::from_nanos(1));
        assert_eq!(c.deadline_tick(o - Duration::from_secs(1)), 0);
        let far = o + Duration::from_secs(600 * 365 * 86_400);
        assert_eq!(c.deadline_tick(far), u64::MAX);
        assert_eq!(c.instant_at(u64::MAX).map(|i| i > o), Some(true));
    }

    #[test]
    fn the_clamped_tick_never_comes() {
        let (o, c) = clock(Duration::from_nanos(1));
        let beyond = o + Duration::from_secs(700 * 365 * 86_400);
        assert_eq!(c.deadline_tick(beyond), u64::MAX);
        for now in [
            c.instant_at(u64::MAX).unwrap(),
            beyond,
            beyond + Duration::from_secs(1),
        ] {
            assert_eq!(c.now_tick(now), u64::MAX - 1);
        }
        assert_eq!(
            c.now_tick(c.instant_at(u64::MAX - 1).unwrap()),
            u64::MAX - 1
        );
        assert_eq!(
            c.now_tick(c.instant_at(u64::MAX - 2).unwrap()),
            u64::MAX - 2
        );
    }
}
