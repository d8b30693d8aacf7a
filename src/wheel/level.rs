//! One level of the wheel, and the bit arithmetic that maps ticks to levels
//! and slots.
//!
//! Time is a `u64` count of ticks since the timer's origin. With
//! `slots = 2^bits` slots per level, level `l` looks at bits
//! `[l*bits, (l+1)*bits)` of a deadline: its slot index is those bits, each of
//! its slots spans `2^(l*bits)` ticks, and one turn of it spans
//! `2^((l+1)*bits)` ticks. An entry lives at the level of the highest bit in
//! which its deadline differs from the wheel's `elapsed` tick, so it shares
//! every higher bit with `elapsed`: it is in the current turn of its level and
//! its slot is at or after the slot `elapsed` is in. That is why a slot's
//! start time is `elapsed` with the level's bits replaced, and why searching
//! a level never has to wrap around.

use super::list::List;

/// Number of levels needed to cover every `u64` tick with `bits` per level.
pub(crate) fn max_levels(bits: u32) -> usize {
    debug_assert!((1..64).contains(&bits));
    (63 / bits + 1) as usize
}

/// The level an entry with `deadline` belongs at when the wheel is at `elapsed`.
///
/// `deadline` must be after `elapsed`. OR-ing the slot mask in makes the
/// "highest differing bit" at least in level 0's range.
pub(crate) fn level_for(elapsed: u64, deadline: u64, bits: u32) -> usize {
    debug_assert!(deadline > elapsed, "level_for({elapsed}, {deadline})");
    let mask = (1u64 << bits) - 1;
    let masked = (elapsed ^ deadline) | mask;
    let significant = 63 - masked.leading_zeros();
    bit_level(significant, bits)
}

/// The most bits per level a wheel has.
const MAX_BITS: u32 = super::MAX_SLOTS.trailing_zeros();

/// `ceil(2^16 / bits)` for every `bits` a wheel can have (index 0 unused).
const RECIPROCALS: [u32; MAX_BITS as usize + 1] = {
    let mut table = [0; MAX_BITS as usize + 1];
    let mut bits = 1;
    while bits <= MAX_BITS {
        table[bits as usize] = (1u32 << 16).div_ceil(bits);
        bits += 1;
    }
    table
};

/// `bit / bits`: the level whose range holds bit `bit` (0..=63).
///
/// Every insertion asks this with `bits` known only at run time, and a
/// divide is the slowest instruction on that path (its result picks the
/// level, whose slot list is the next thing loaded). A multiply by the
/// rounded-up reciprocal and a shift give the same quotient: the product
/// overshoots `bit * 2^16 / bits` by less than `bit < 2^6`, i.e. by less
/// than `2^-10` after the shift, and the fraction it is added to is at most
/// `(bits - 1) / bits`, which is at least `1 / 12` short of the next
/// integer. `bit_level_is_division` checks every case.
#[inline(always)]
fn bit_level(bit: u32, bits: u32) -> usize {
    debug_assert!(bit < 64 && (1..=MAX_BITS).contains(&bits));
    ((bit * RECIPROCALS[bits as usize]) >> 16) as usize
}

/// The slot of `level` that `tick` maps to.
pub(crate) fn slot_for(tick: u64, level: usize, bits: u32) -> usize {
    let shift = level as u32 * bits;
    debug_assert!(shift < 64);
    let mask = (1u64 << bits) - 1;
    ((tick >> shift) & mask) as usize
}

/// The first tick covered by `slot` of `level`, in the turn `elapsed` is in.
pub(crate) fn slot_start(elapsed: u64, level: usize, slot: usize, bits: u32) -> u64 {
    let shift = level as u32 * bits;
    let turn_shift = shift + bits;
    let turn_start = if turn_shift >= 64 {
        0
    } else {
        elapsed & !((1u64 << turn_shift) - 1)
    };
    let offset = (slot as u128) << shift;
    debug_assert!(
        turn_start as u128 + offset <= u64::MAX as u128,
        "slot {slot} of level {level} starts beyond u64"
    );
    turn_start + offset as u64
}

/// A level: its slots, and a bitmap of which slots hold entries.
#[derive(Debug)]
pub(crate) struct Level {
    slots: Box<[List]>,
    /// Bit `i % 64` of word `i / 64` is set iff `slots[i]` is non-empty.
    occupied: Box<[u64]>,
}

impl Level {
    pub(super) fn new(slots: usize) -> Level {
        debug_assert!(slots.is_power_of_two() && slots >= 2);
        Level {
            slots: vec![List::EMPTY; slots].into_boxed_slice(),
            occupied: vec![0; slots.div_ceil(64)].into_boxed_slice(),
        }
    }

    /// Every slot's list, for renaming entries that moved.
    pub(super) fn lists_mut(&mut self) -> impl Iterator<Item = &mut List> {
        self.slots.iter_mut()
    }

    pub(super) fn slot_mut(&mut self, slot: usize) -> &mut List {
        &mut self.slots[slot]
    }

    pub(super) fn slot(&self, slot: usize) -> &List {
        &self.slots[slot]
    }

    pub(super) fn set_occupied(&mut self, slot: usize) {
        self.occupied[slot / 64] |= 1 << (slot % 64);
    }

    /// Marks `slot` empty and says whether the whole level now is. Only a
    /// level whose word for `slot` became zero is scanned: with up to 64
    /// slots that word is the level.
    #[inline]
    pub(super) fn clear_occupied(&mut self, slot: usize) -> bool {
        let word = &mut self.occupied[slot / 64];
        *word &= !(1 << (slot % 64));
        *word == 0 && self.is_empty()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.occupied.iter().all(|&w| w == 0)
    }

    /// Bytes this level holds on the heap: its slots and its bitmap.
    pub(super) fn heap_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.slots) + std::mem::size_of_val(&*self.occupied)
    }

    /// The first non-empty slot at or after `from`, without wrapping.
    pub(super) fn next_occupied(&self, from: usize) -> Option<usize> {
        let mut word_index = from / 64;
        let mut word = *self.occupied.get(word_index)? & (u64::MAX << (from % 64));
        loop {
            if word != 0 {
                return Some(word_index * 64 + word.trailing_zeros() as usize);
            }
            word_index += 1;
            word = *self.occupied.get(word_index)?;
        }
    }

    /// Whether any slot before `slot` is occupied (an invariant breach;
    /// only `debug_assert!`s call it).
    pub(super) fn occupied_before(&self, slot: usize) -> bool {
        (0..slot).any(|s| self.occupied[s / 64] & (1 << (s % 64)) != 0)
    }

    #[cfg(test)]
    pub(super) fn slots(&self) -> &[List] {
        &self.slots
    }

    #[cfg(test)]
    pub(super) fn is_occupied(&self, slot: usize) -> bool {
        self.occupied[slot / 64] & (1 << (slot % 64)) != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every supported width: 2 to 4096 slots per level.
    const BITS: std::ops::RangeInclusive<u32> = 1..=12;

    #[test]
    fn max_levels_cover_u64() {
        for bits in BITS {
            let levels = max_levels(bits) as u32;
            assert!(
                levels * bits >= 64,
                "bits={bits}: {levels} levels leave bits uncovered"
            );
            assert!(
                (levels - 1) * bits < 64,
                "bits={bits}: level {} is never used",
                levels - 1
            );
        }
        assert_eq!(max_levels(6), 11);
        assert_eq!(max_levels(1), 64);
    }

    #[test]
    fn level_for_every_boundary() {
        for bits in BITS {
            for elapsed in [0u64, 1, 5, (1 << bits) - 1, 1 << 40, u64::MAX - (1 << 20)] {
                for level in 0..max_levels(bits) {
                    let shift = level as u32 * bits;
                    // The first tick whose highest differing bit is at `shift`,
                    // and the last whose highest differing bit is below the next level.
                    let top = (shift + bits).min(64);
                    for bit in shift..top {
                        let deadline = elapsed ^ (1u64 << bit);
                        if deadline <= elapsed {
                            continue;
                        }
                        let got = level_for(elapsed, deadline, bits);
                        assert_eq!(
                            got, level,
                            "bits={bits} elapsed={elapsed:#066b} deadline={deadline:#066b}: level {got}, want {level}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn bit_level_is_division() {
        for bits in 1..=MAX_BITS {
            for bit in 0..64 {
                assert_eq!(
                    bit_level(bit, bits),
                    (bit / bits) as usize,
                    "bit {bit} ({:#066b}) with {bits} bits per level",
                    1u64 << bit
                );
            }
        }
    }

    #[test]
    fn level_zero_for_the_next_tick_and_top_level_for_max() {
        for bits in BITS {
            assert_eq!(level_for(0, 1, bits), 0);
            assert_eq!(level_for(0, (1 << bits) - 1, bits), 0, "bits={bits}");
            assert_eq!(level_for(0, 1 << bits, bits), 1, "bits={bits}");
            assert_eq!(
                level_for(0, u64::MAX, bits),
                max_levels(bits) - 1,
                "bits={bits}"
            );
        }
    }

    #[test]
    fn slot_for_every_level_and_slot() {
        for bits in BITS {
            let slots = 1usize << bits;
            for level in 0..max_levels(bits) {
                let shift = level as u32 * bits;
                for slot in [0, 1, slots / 2, slots - 1] {
                    let tick = (slot as u128) << shift;
                    if tick > u64::MAX as u128 {
                        continue;
                    }
                    let tick = tick as u64;
                    assert_eq!(
                        slot_for(tick, level, bits),
                        slot,
                        "bits={bits} level={level} tick={tick:#066b}"
                    );
                    // Bits below the level do not move the slot.
                    if shift > 0 {
                        let below = tick | ((1u64 << shift) - 1);
                        assert_eq!(
                            slot_for(below, level, bits),
                            slot,
                            "bits={bits} level={level} tick={below:#066b}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn slot_start_round_trips() {
        for bits in BITS {
            for elapsed in [0u64, 7, 1 << 33, u64::MAX / 3] {
                for level in 0..max_levels(bits) {
                    let here = slot_for(elapsed, level, bits);
                    let start = slot_start(elapsed, level, here, bits);
                    assert!(
                        start <= elapsed,
                        "bits={bits} level={level}: start {start:#066b} > elapsed {elapsed:#066b}"
                    );
                    assert_eq!(slot_for(start, level, bits), here);
                    // Everything below the level is cleared.
                    let shift = level as u32 * bits;
                    assert_eq!(start & ((1u64 << shift) - 1), 0, "start={start:#066b}");
                    // The next slot (if in this turn) starts one slot span later.
                    let slots = 1usize << bits;
                    if here + 1 < slots {
                        let next = slot_start(elapsed, level, here + 1, bits) as u128;
                        if next <= u64::MAX as u128 {
                            assert_eq!(
                                next - start as u128,
                                1u128 << shift,
                                "bits={bits} level={level}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn an_entry_maps_to_a_slot_at_or_after_elapsed() {
        for bits in BITS {
            for (elapsed, deadline) in [
                (0u64, 1u64),
                (5, 64),
                (63, 64),
                (1000, 1_000_000),
                (1, u64::MAX),
            ] {
                let level = level_for(elapsed, deadline, bits);
                let slot = slot_for(deadline, level, bits);
                assert!(
                    slot > slot_for(elapsed, level, bits),
                    "bits={bits} e={elapsed:#b} d={deadline:#b}"
                );
                let start = slot_start(elapsed, level, slot, bits);
                assert!(
                    start <= deadline && start > elapsed,
                    "bits={bits} e={elapsed} d={deadline} start={start}"
                );
            }
        }
    }

    #[test]
    fn bitmap_finds_next_without_wrapping() {
        for slots in [2usize, 4, 64, 128, 4096] {
            let mut level = Level::new(slots);
            assert!(level.is_empty());
            assert_eq!(level.next_occupied(0), None);
            for s in [0, 1, slots / 2, slots - 1] {
                level.set_occupied(s);
                assert!(level.is_occupied(s));
                assert_eq!(level.next_occupied(0), Some(s), "slots={slots}");
                assert_eq!(level.next_occupied(s), Some(s));
                assert_eq!(
                    level.next_occupied(s + 1),
                    None,
                    "slots={slots} s={s}: wrapped"
                );
                assert!(!level.occupied_before(s));
                assert!(level.clear_occupied(s), "slots={slots} s={s}: not empty");
                assert!(level.is_empty());
            }
            level.set_occupied(slots - 1);
            level.set_occupied(0);
            assert_eq!(level.next_occupied(1), Some(slots - 1));
            assert!(level.occupied_before(slots - 1));
            assert!(!level.occupied_before(0));
            assert!(
                !level.clear_occupied(0),
                "slots={slots}: {} left",
                slots - 1
            );
            assert!(level.clear_occupied(slots - 1));
        }
    }
}
