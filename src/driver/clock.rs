//! Conversions between `Instant`s and wheel ticks.

use std::time::Duration;

use tokio::time::Instant;

/// A timer's time base: tick 0 starts at `origin`, each tick lasts `tick`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock {
    origin: Instant,
    tick: Duration,
    tick_nanos: Divisor,
}

/// Division by a number fixed at run time, without the divide instruction.
///
/// Every registration and reset converts a deadline to a tick, dividing by
/// the tick's length in nanoseconds, and a 64-bit `div` is the slowest
/// instruction on that path (tens of cycles). With `m = ceil(2^128 / d)`,
/// `n / d` is the top 64 bits of the 192-bit product `m * n`, for every
/// 64-bit `n` (Lemire, Kaser and Kurz, "Faster remainder by direct
/// computation", 2019, theorem 1, with 128 fractional bits for 64-bit
/// operands): two 64-bit multiplications.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Divisor {
    d: u64,
    /// `ceil(2^128 / d)`, or 0 for `d == 1` (2^128 does not fit).
    magic: u128,
}

impl Divisor {
    /// `d` must not be zero.
    pub(crate) fn new(d: u64) -> Divisor {
        assert!(d > 0, "division by zero");
        let magic = if d == 1 {
            0
        } else {
            u128::MAX / u128::from(d) + 1
        };
        Divisor { d, magic }
    }

    pub(crate) fn get(&self) -> u64 {
        self.d
    }

    /// `n / self`, rounded down.
    #[inline]
    pub(crate) fn div(&self, n: u64) -> u64 {
        if self.magic == 0 {
            return n;
        }
        let n = u128::from(n);
        let low = (self.magic as u64 as u128) * n;
        let high = (self.magic >> 64) * n;
        // `high + low / 2^64` < 2^128: both factors are below 2^64.
        ((high + (low >> 64)) >> 64) as u64
    }

    /// `n / self`, rounded up.
    #[inline]
    pub(crate) fn div_ceil(&self, n: u64) -> u64 {
        let q = self.div(n);
        // `q * d <= n`, so this cannot overflow.
        q + u64::from(q * self.d != n)
    }
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
            tick_nanos: Divisor::new(tick_nanos),
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
            Ok(nanos) => self.tick_nanos.div_ceil(nanos),
            Err(_) => {
                u64::try_from(nanos.div_ceil(u128::from(self.tick_nanos.get()))).unwrap_or(u64::MAX)
            }
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
            Ok(nanos) => self.tick_nanos.div(nanos),
            Err(_) => u64::try_from(nanos / u128::from(self.tick_nanos.get())).unwrap_or(u64::MAX),
        };
        tick.min(u64::MAX - 1)
    }

    /// When `tick` begins, or `None` if that is beyond what `Instant` holds.
    pub(crate) fn instant_at(&self, tick: u64) -> Option<Instant> {
        let nanos = u128::from(tick) * u128::from(self.tick_nanos.get());
        let secs = u64::try_from(nanos / 1_000_000_000).ok()?;
        let offset = Duration::new(secs, (nanos % 1_000_000_000) as u32);
        self.origin.checked_add(offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Checks both divisions of `n` by `d` against the divide instruction.
    fn check(d: u64, n: u64) {
        let divisor = Divisor::new(d);
        assert_eq!(
            divisor.div(n),
            n / d,
            "{n} / {d}\n  n = {n:#066b}\n  d = {d:#066b}"
        );
        assert_eq!(
            divisor.div_ceil(n),
            n.div_ceil(d),
            "ceil({n} / {d})\n  n = {n:#066b}\n  d = {d:#066b}"
        );
    }

    #[test]
    fn division_by_a_divisor_matches_the_divide_instruction_at_every_edge() {
        let mut divisors = vec![1, 2, 3, 5, 7, 10, 125_000, 1_000_000, 1_000_000_007];
        divisors.extend([1_000_000_000, u64::MAX, u64::MAX - 1, u64::MAX / 2 + 1]);
        // Every power of two and its neighbours.
        for bit in 1..64 {
            let p = 1u64 << bit;
            divisors.extend([p - 1, p, p + 1]);
        }
        for &d in &divisors {
            let mut numerators = vec![0, 1, 2, d - 1, d, u64::MAX, u64::MAX - 1];
            numerators.extend([u64::MAX - d, u64::MAX / d * d, (u64::MAX / d) * d - 1]);
            for k in [2u64, 3, 1_000, 1 << 20, 1 << 40] {
                if let Some(m) = d.checked_mul(k) {
                    numerators.extend([m - 1, m, m.saturating_add(1)]);
                }
            }
            for bit in 0..64 {
                let p = 1u64 << bit;
                numerators.extend([p - 1, p, p.saturating_add(1)]);
            }
            for &n in &numerators {
                check(d, n);
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 4096, ..ProptestConfig::default() })]

        #[test]
        fn division_by_a_divisor_matches_the_divide_instruction(
            d in 1u64..,
            n in any::<u64>(),
            small in 1u64..1_000_000,
        ) {
            check(d, n);
            check(small, n);
            check(d, n % (small * 1_000));
        }
    }

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
