//! [`Divisor`]: dividing by the tick's length in nanoseconds without the
//! divide instruction, and its tests against that instruction.

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
}
