//! Conversions between `Instant`s and wheel ticks, and [`Deadline`], the
//! eight-byte form of an `Instant` that a `Sleep` keeps.

use std::sync::OnceLock;
use std::time::Duration;

use tokio::time::Instant;

use super::divisor::Divisor;

/// A deadline as signed nanoseconds from [`base`], the instant the process
/// first made one, in 72 bits.
///
/// A `Sleep` keeps its deadline in this form, packed with its entry's key
/// into sixteen bytes (see `sleep/state.rs`), rather than as an `Instant`
/// (sixteen bytes on its own), and derives the deadline's tick from it
/// rather than keeping that too. That takes a boxed `Sleep` from a 64-byte
/// allocation to a 48-byte one. Converting back is exact for every instant
/// within about 74,800 years of the base (2^71 nanoseconds), which no
/// paused clock is advanced past in practice. Later instants become
/// [`NEVER`](Deadline::NEVER), whose tick is `u64::MAX` on every timer,
/// which never comes; earlier ones clamp to the earliest value, long past.
/// Neither clamp can make a timer fire early.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Deadline(i128);

/// The instant [`Deadline`]s count from: the first time one was made.
fn base() -> std::time::Instant {
    static BASE: OnceLock<std::time::Instant> = OnceLock::new();
    *BASE.get_or_init(std::time::Instant::now)
}

impl Deadline {
    /// How many bits a deadline takes, sign included.
    pub(crate) const BITS: u32 = 72;
    const MAX: i128 = (1 << (Deadline::BITS - 1)) - 1;
    const MIN: i128 = -(1 << (Deadline::BITS - 1));

    /// More than about 74,800 years after the base: never comes.
    pub(crate) const NEVER: Deadline = Deadline(Deadline::MAX);

    /// `instant`, clamped as the type's docs say.
    #[inline]
    pub(crate) fn from_instant(instant: Instant) -> Deadline {
        let instant = instant.into_std();
        let base = base();
        Deadline(match instant.checked_duration_since(base) {
            Some(after) => {
                i128::try_from(after.as_nanos()).map_or(Deadline::MAX, |n| n.min(Deadline::MAX))
            }
            None => i128::try_from(base.duration_since(instant).as_nanos())
                .map_or(Deadline::MIN, |n| (-n).max(Deadline::MIN)),
        })
    }

    /// [`from_instant`](Deadline::from_instant) of
    /// `crate::deadline_after(now, crate::capped(duration))`, as `sleep`
    /// makes its deadline, with one `Instant` subtraction and one clamp
    /// rather than an `Instant` sum and a conversion.
    #[inline]
    pub(crate) fn after_capped(now: Instant, duration: Duration) -> Deadline {
        const MAX_NANOS: u128 = crate::MAX_DELAY.as_nanos();
        let wait = if duration.as_secs() < crate::MAX_DELAY.as_secs() {
            duration.as_nanos()
        } else {
            MAX_NANOS
        };
        match now.into_std().checked_duration_since(base()) {
            // Below 2^64 seconds plus 30 years: no `u128` overflow.
            Some(since) => Deadline(
                i128::try_from(since.as_nanos() + wait)
                    .map_or(Deadline::MAX, |n| n.min(Deadline::MAX)),
            ),
            None => Deadline::before_base_after(now, duration),
        }
    }

    /// [`after_capped`](Deadline::after_capped) from a `now` before the
    /// base.
    #[cold]
    #[inline(never)]
    fn before_base_after(now: Instant, duration: Duration) -> Deadline {
        Deadline::from_instant(crate::deadline_after(now, crate::capped(duration)))
    }

    /// This deadline moved from one clock to another: as far after `to` as
    /// it is after `from` (at `to`, if it is before `from`).
    /// [`NEVER`](Deadline::NEVER) stays.
    pub(crate) fn moved(self, from: Instant, to: Instant) -> Deadline {
        if self == Deadline::NEVER {
            return self;
        }
        // Each term within 2^71 in magnitude: no `i128` overflow.
        let remaining = (self.0 - Deadline::from_instant(from).0).max(0);
        Deadline((Deadline::from_instant(to).0 + remaining).min(Deadline::MAX))
    }

    /// The deadline whose two's complement, in [`BITS`](Deadline::BITS)
    /// bits, is the low bits of `bits` (the rest are ignored).
    #[inline]
    pub(crate) fn from_bits(bits: u128) -> Deadline {
        let unused = 128 - Deadline::BITS;
        Deadline(((bits << unused) as i128) >> unused)
    }

    /// This deadline's two's complement in the low [`BITS`](Deadline::BITS)
    /// bits; the rest are zero.
    #[inline]
    pub(crate) fn to_bits(self) -> u128 {
        (self.0 as u128) & ((1 << Deadline::BITS) - 1)
    }

    /// This deadline in an `i64`, if it fits strictly above `i64::MIN` (the
    /// watermark of `Shard::surely_pending` saturates there).
    #[inline]
    pub(crate) fn to_i64(self) -> Option<i64> {
        i64::try_from(self.0).ok().filter(|&d| d != i64::MIN)
    }

    /// Whether a clock reading `now` has reached this deadline; never for
    /// [`NEVER`](Deadline::NEVER), even a clock past the range.
    pub(crate) fn reached_by(self, now: Instant) -> bool {
        self != Deadline::NEVER && self <= Deadline::from_instant(now)
    }

    /// The instant this stands for (`NEVER`'s is about 74,800 years after
    /// the base).
    pub(crate) fn instant(self) -> Instant {
        let base = base();
        let nanos = self.0.unsigned_abs();
        let offset = match u64::try_from(nanos) {
            Ok(nanos) => Duration::from_nanos(nanos),
            // Below 2^71 nanoseconds: the seconds fit in a `u64`.
            Err(_) => Duration::new(
                (nanos / 1_000_000_000) as u64,
                (nanos % 1_000_000_000) as u32,
            ),
        };
        let instant = if self.0 >= 0 {
            base.checked_add(offset)
        } else {
            base.checked_sub(offset)
        };
        // Both fit: `Instant` spans far more than 2^71 nanoseconds.
        Instant::from_std(instant.unwrap_or(base))
    }
}

/// A timer's time base: tick 0 starts at `origin`, each tick lasts `tick`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock {
    origin: Instant,
    /// `origin` as a [`Deadline`], for [`tick_of`](Clock::tick_of).
    origin_deadline: Deadline,
    tick: Duration,
    tick_nanos: Divisor,
    /// Ticks in one of tokio's milliseconds, when `origin` is on tokio's
    /// millisecond grid and the tick divides a millisecond (see `grid.rs`);
    /// otherwise 1.
    per_tokio_ms: u64,
}

impl Clock {
    /// `tick` must be non-zero and at most `u64::MAX` nanoseconds (the
    /// builder checks).
    pub(crate) fn new(origin: Instant, tick: Duration) -> Clock {
        let tick_nanos = u64::try_from(tick.as_nanos()).expect("tick checked by the builder");
        assert!(tick_nanos > 0, "tick checked by the builder");
        Clock {
            origin,
            origin_deadline: Deadline::from_instant(origin),
            tick,
            tick_nanos: Divisor::new(tick_nanos),
            per_tokio_ms: 1,
        }
    }

    /// This clock, whose origin is a point of tokio's millisecond grid: it
    /// learns how many of its ticks make one of tokio's milliseconds, if a
    /// whole number do.
    pub(crate) fn on_tokio_grid(mut self) -> Clock {
        const MS: u64 = 1_000_000;
        let tick = self.tick_nanos.get();
        if MS % tick == 0 {
            self.per_tokio_ms = MS / tick;
        }
        self
    }

    /// `tick` rounded down to one that begins one of tokio's milliseconds,
    /// on a clock [`on_tokio_grid`](Clock::on_tokio_grid); `tick` itself on
    /// any other.
    pub(crate) fn tokio_ms_floor(&self, tick: u64) -> u64 {
        tick - tick % self.per_tokio_ms
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

    /// [`deadline_tick`](Clock::deadline_tick) of the instant `deadline`
    /// stands for, without converting it back: `u64::MAX` for
    /// [`Deadline::NEVER`].
    #[inline]
    pub(crate) fn tick_of(&self, deadline: Deadline) -> u64 {
        // Every deadline within 292 years of the base, from a timer whose
        // origin is too: 64-bit arithmetic only.
        if let (Ok(d), Ok(origin)) = (
            i64::try_from(deadline.0),
            i64::try_from(self.origin_deadline.0),
        ) {
            return if d <= origin {
                0
            } else {
                // The difference of two `i64`s, the first the larger, fits in `u64`.
                self.tick_nanos
                    .div_ceil((d as u64).wrapping_sub(origin as u64))
            };
        }
        self.far_tick_of(deadline)
    }

    /// The latest deadline whose tick is at most `tick` (`origin + tick *
    /// length`), as [`Deadline::to_i64`] has it, saturated at the ends of
    /// `i64`: `u64::MAX` (everything) is `i64::MAX`.
    pub(crate) fn deadline_at(&self, tick: u64) -> i64 {
        // The product overflows `i128` only when both factors are near
        // 2^64: far beyond `i64`, as saturated.
        let Some(at) = i128::from(tick)
            .checked_mul(i128::from(self.tick_nanos.get()))
            .map(|length| self.origin_deadline.0 + length)
        else {
            return i64::MAX;
        };
        i64::try_from(at).unwrap_or(if at < 0 { i64::MIN } else { i64::MAX })
    }

    /// [`tick_of`](Clock::tick_of) beyond `i64` nanoseconds.
    #[cold]
    #[inline(never)]
    fn far_tick_of(&self, deadline: Deadline) -> u64 {
        if deadline == Deadline::NEVER {
            return u64::MAX;
        }
        if deadline <= self.origin_deadline {
            return 0;
        }
        // Positive, and below 2^72.
        let nanos = (deadline.0 - self.origin_deadline.0) as u128;
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

    #[test]
    fn a_deadline_converts_back_exactly_and_to_the_same_tick() {
        let (o, c) = clock(Duration::from_micros(125));
        let year = Duration::from_secs(365 * 86_400);
        let mut instants = vec![o, o - Duration::from_secs(5), o - 100 * year];
        for ns in [1u64, 124_999, 125_000, 125_001, 1_000_000_007] {
            instants.extend([o + Duration::from_nanos(ns), o - Duration::from_nanos(ns)]);
        }
        instants.extend([o + year, o + 200 * year + Duration::from_nanos(3)]);
        instants.extend([o + 600 * year, o + 70_000 * year, o - 70_000 * year]);
        for instant in instants {
            let deadline = Deadline::from_instant(instant);
            assert_eq!(deadline.instant(), instant, "{deadline:?}");
            assert_eq!(Deadline::from_bits(deadline.to_bits()), deadline);
            assert_eq!(
                Deadline::from_bits(deadline.to_bits() | !((1 << Deadline::BITS) - 1)),
                deadline,
                "high bits are ignored"
            );
            assert_eq!(
                c.tick_of(deadline),
                c.deadline_tick(instant),
                "{deadline:?}"
            );
        }
    }

    #[test]
    fn a_deadline_past_its_range_never_comes_and_one_before_it_is_past() {
        let (o, c) = clock(Duration::from_nanos(1));
        let year = Duration::from_secs(365 * 86_400);
        let beyond = Deadline::from_instant(o + 80_000 * year);
        assert_eq!(beyond, Deadline::NEVER);
        assert_eq!(Deadline::from_bits(beyond.to_bits()), Deadline::NEVER);
        assert_eq!(c.tick_of(beyond), u64::MAX);
        assert!(beyond.instant() > o + 74_000 * year);
        assert!(!beyond.reached_by(o + 90_000 * year));
        let long_ago = Deadline::from_instant(o - 80_000 * year);
        assert_eq!(Deadline::from_bits(long_ago.to_bits()), long_ago);
        assert!(long_ago < Deadline::from_instant(o - 74_000 * year));
        assert_eq!(c.tick_of(long_ago), 0);
        assert!(long_ago.reached_by(o));
        assert!(long_ago.instant() < o - 74_000 * year);
    }

    #[test]
    fn a_deadline_after_a_duration_is_the_deadline_of_the_sum_at_every_edge() {
        let o = Instant::now();
        let year = Duration::from_secs(365 * 86_400);
        let nows = [
            o,
            o - Duration::from_nanos(1),
            o + 70_000 * year,
            o - 70_000 * year,
        ];
        let nows = nows
            .into_iter()
            .chain([o - 80_000 * year, o + 80_000 * year]);
        for now in nows {
            for duration in [
                Duration::ZERO,
                Duration::from_nanos(1),
                Duration::from_secs(5),
                Duration::new(1 << 40, 999_999_999),
                Duration::from_secs((1 << 40) + 1),
                10_000 * year,
                80_000 * year,
                Duration::from_secs(u64::MAX / 2),
                Duration::MAX,
            ] {
                assert_eq!(
                    Deadline::after_capped(now, duration),
                    Deadline::from_instant(crate::deadline_after(now, crate::capped(duration))),
                    "{now:?} + {duration:?}"
                );
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2048, ..ProptestConfig::default() })]

        #[test]
        fn a_deadline_after_a_duration_is_the_deadline_of_the_sum(
            back in any::<bool>(),
            offset_ns in any::<u64>(),
            secs in prop_oneof![0u64..10_000, 0u64..=1 << 41, any::<u64>()],
            nanos in 0u32..1_000_000_000,
        ) {
            let offset = Duration::from_nanos(offset_ns);
            let o = Instant::now();
            let now = if back { o - offset } else { o + offset };
            let duration = Duration::new(secs, nanos);
            prop_assert_eq!(
                Deadline::after_capped(now, duration),
                Deadline::from_instant(crate::deadline_after(now, crate::capped(duration)))
            );
        }

        /// What `Shard::surely_pending` relies on to compare deadlines, not
        /// ticks, with the watermarks: a deadline's tick is at most `w`
        /// just when the deadline is at most `deadline_at(w)`, saturation
        /// included.
        #[test]
        fn a_deadline_is_due_by_a_tick_just_when_it_is_at_most_deadline_at(
            origin_ns in any::<i64>(),
            tick_ns in prop_oneof![1u64..1_000, Just(125_000u64), 1u64..=u64::MAX],
            offset in any::<i64>(),
            watermark in prop_oneof![0u64..1_000_000, any::<u64>(), Just(u64::MAX)],
        ) {
            let c = Clock {
                origin_deadline: Deadline(i128::from(origin_ns)),
                ..Clock::new(Instant::now(), Duration::from_nanos(tick_ns))
            };
            let near = [offset, origin_ns.saturating_add(offset % 1_000_000_000)];
            for d in near.map(|n| Deadline(i128::from(n))) {
                let Some(at) = d.to_i64() else { continue };
                prop_assert_eq!(
                    c.tick_of(d) <= watermark,
                    at <= c.deadline_at(watermark),
                    "deadline {} tick {} watermark {} at {}",
                    at, c.tick_of(d), watermark, c.deadline_at(watermark)
                );
            }
        }
    }
}
