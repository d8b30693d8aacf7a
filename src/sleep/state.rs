//! A `Sleep`'s deadline and registration state, packed into 32 bytes.
//!
//! Decoded, the state is the enum [`State`]: idle; registered, with the
//! entry's key and the identity of the waker the entry holds, if known;
//! fired; or elapsed. (The deadline's tick, which checking the timer's
//! progress needs, is derived from the deadline with two multiplications,
//! not kept.) The deadline, 72 bits (see `Deadline`), shares two words
//! with the key: its low 64 bits in one; its top 8, the key's 24-bit
//! generation (a timer's keys carry no more, see `KEY_GENERATION_BITS`)
//! and its 32-bit index in the other. The state's discriminant needs a
//! home too, and as a Rust enum it would take a word of its own, because nothing in
//! the registered variant leaves room for the discriminant. The waker's
//! vtable address does: a `&'static RawWakerVTable` is non-null and aligned
//! (checked below at compile time), so the values under its alignment are
//! never a vtable, and [`Packed`] uses them for the other states and for
//! "registered, waker unknown". Plain integers, no `unsafe`. An idle
//! state has no waker, so its data word is free: it marks a sleep made
//! outside any runtime whose deadline is a duration's end on the real
//! clock, which its first poll moves onto its runtime's clock.

use std::task::RawWakerVTable;

use crate::driver::{Deadline, WakerId, KEY_GENERATION_BITS};
use crate::wheel::Key;

/// A `Sleep`'s state, decoded from [`Packed`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum State {
    /// Not in the wheel: not yet polled, or reset after completing.
    Idle,
    /// In the wheel under `key`, due at its deadline's tick. `waker` is the identity of
    /// the waker the entry holds (its clone of the task's, not the task's own), if this sleep knows it: a poll with the
    /// same waker before the timer has reached `tick` needs no lock (see the
    /// driver's "Polling without the lock").
    Registered { key: Key, waker: Option<WakerId> },
    /// Fired and not yet polled, with no entry (the driver freed it): it
    /// completes at the next poll, and a reset arms it again, as it does a
    /// registered sleep whose entry has fired.
    Fired,
    /// Completed.
    Elapsed,
}

/// A state code in place of a waker's identity.
const fn code(vtable: usize) -> WakerId {
    WakerId { data: 0, vtable }
}

// Codes in `Packed::vtable` that no vtable address can take.
const IDLE: usize = 0;
const FIRED: usize = 1;
const ELAPSED: usize = 2;
const NO_WAKER: usize = 3;
const _: () = assert!(std::mem::align_of::<RawWakerVTable>() > NO_WAKER);

/// `data` of an idle state whose deadline counts from now on the clock
/// outside any runtime (see [`Packed::count_from_outside`]); any other
/// state, and a plain idle one, has 0 there.
const FROM_OUTSIDE: usize = 1;

// The second word: the deadline's top bits above the key's generation
// above its index.
const INDEX_BITS: u32 = 32;
const DEADLINE_SHIFT: u32 = INDEX_BITS + KEY_GENERATION_BITS;
const _: () = assert!(DEADLINE_SHIFT + (Deadline::BITS - 64) == 64);

/// A deadline and a [`State`] in 32 bytes; `vtable` says which state (see
/// the module docs).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) struct Packed {
    /// The deadline's low 64 bits.
    low: u64,
    /// The deadline's top bits, the key's generation and its index.
    high: u64,
    data: usize,
    vtable: usize,
}

impl Packed {
    /// Idle, at `deadline`.
    pub(super) fn idle(deadline: Deadline) -> Packed {
        let mut packed = Packed {
            low: 0,
            high: 0,
            data: 0,
            vtable: IDLE,
        };
        packed.set_deadline(deadline);
        packed
    }

    #[inline]
    pub(super) fn deadline(&self) -> Deadline {
        let top = u128::from(self.high >> DEADLINE_SHIFT);
        Deadline::from_bits(top << 64 | u128::from(self.low))
    }

    /// [`deadline`](Packed::deadline) as [`Deadline::to_i64`] has it,
    /// without assembling all 72 bits: what the hot paths compare.
    #[inline]
    pub(super) fn near_deadline(&self) -> Option<i64> {
        let low = self.low as i64;
        // In an `i64` just when the top bits only repeat the low word's sign.
        let top = (self.high >> DEADLINE_SHIFT) as u8 as i8;
        (i64::from(top) == low >> 63 && low != i64::MIN).then_some(low)
    }

    /// Changes the deadline and leaves the state as it is.
    #[inline]
    pub(super) fn set_deadline(&mut self, deadline: Deadline) {
        let bits = deadline.to_bits();
        self.low = bits as u64;
        let key = self.high & ((1 << DEADLINE_SHIFT) - 1);
        self.high = ((bits >> 64) as u64) << DEADLINE_SHIFT | key;
    }

    /// Whether the state is [`State::Registered`], without decoding it.
    #[inline]
    pub(super) fn is_registered(&self) -> bool {
        !matches!(self.vtable, IDLE | FIRED | ELAPSED)
    }

    #[inline]
    pub(super) fn get(&self) -> State {
        match self.vtable {
            IDLE => State::Idle,
            FIRED => State::Fired,
            ELAPSED => State::Elapsed,
            vtable => State::Registered {
                key: Key {
                    index: self.high as u32,
                    generation: (self.high >> INDEX_BITS) as u32 & ((1 << KEY_GENERATION_BITS) - 1),
                },
                waker: (vtable != NO_WAKER).then_some(WakerId {
                    data: self.data,
                    vtable,
                }),
            },
        }
    }

    /// Marks an idle state's deadline as counted from now on the clock
    /// outside any runtime (the real one): a duration's end, which binding
    /// moves onto its runtime's clock (`Sleep::bind_late`). Any
    /// [`set`](Packed::set) clears the mark.
    pub(super) fn count_from_outside(&mut self) {
        debug_assert_eq!(self.vtable, IDLE, "only an idle sleep is unbound");
        self.data = FROM_OUTSIDE;
    }

    /// Whether the state is idle and [marked](Packed::count_from_outside).
    pub(super) fn counts_from_outside(&self) -> bool {
        self.vtable == IDLE && self.data == FROM_OUTSIDE
    }

    /// Idle, keeping the mark of a state idle already.
    #[inline]
    pub(super) fn set_idle(&mut self) {
        if self.vtable != IDLE {
            self.set(State::Idle);
        }
    }

    /// Changes the state and leaves the deadline as it is.
    #[inline]
    pub(super) fn set(&mut self, state: State) {
        let (key, WakerId { data, vtable }) = match state {
            State::Idle => (None, code(IDLE)),
            State::Fired => (None, code(FIRED)),
            State::Elapsed => (None, code(ELAPSED)),
            State::Registered { key, waker } => (Some(key), waker.unwrap_or(code(NO_WAKER))),
        };
        let key = key.map_or(0, |key| {
            debug_assert!(
                key.generation >> KEY_GENERATION_BITS == 0,
                "generation {:#x} does not fit",
                key.generation
            );
            u64::from(key.generation) << INDEX_BITS | u64::from(key.index)
        });
        self.high = self.high >> DEADLINE_SHIFT << DEADLINE_SHIFT | key;
        self.data = data;
        self.vtable = vtable;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_state_round_trips_with_every_deadline() {
        let waker = WakerId::of(std::task::Waker::noop());
        let top = (1 << KEY_GENERATION_BITS) - 1;
        let keys = [(0, 0), (7, 9), (u32::MAX - 1, top), (1 << 31, 1 << 23)];
        let mut states = vec![State::Idle, State::Fired, State::Elapsed];
        for (index, generation) in keys {
            let key = Key { index, generation };
            states.push(State::Registered { key, waker: None });
            states.push(State::Registered {
                key,
                waker: Some(waker),
            });
        }
        let year = std::time::Duration::from_secs(365 * 86_400);
        let now = tokio::time::Instant::now();
        let deadlines = [
            Deadline::from_instant(now),
            Deadline::from_instant(now + std::time::Duration::from_nanos(1)),
            Deadline::from_instant(now - year),
            Deadline::from_instant(now + 600 * year),
            Deadline::from_instant(now - 70_000 * year),
            Deadline::NEVER,
        ];
        for &deadline in &deadlines {
            for &state in &states {
                let mut packed = Packed::idle(Deadline::NEVER);
                packed.set(state);
                packed.set_deadline(deadline);
                assert_eq!(packed.near_deadline(), deadline.to_i64());
                assert_eq!(
                    (packed.get(), packed.deadline()),
                    (state, deadline),
                    "high {:#066b}",
                    packed.high
                );
                for &other in &states {
                    packed.set(other);
                    assert_eq!(packed.deadline(), deadline, "{other:?} kept it");
                    assert_eq!(packed.get(), other, "high {:#066b}", packed.high);
                }
            }
        }
        assert_eq!(std::mem::size_of::<Packed>(), 32);
    }

    #[test]
    fn the_outside_mark_is_idle_kept_by_set_idle_and_cleared_by_set() {
        let deadline = Deadline::from_instant(tokio::time::Instant::now());
        let mut packed = Packed::idle(deadline);
        assert!(!packed.counts_from_outside());
        packed.count_from_outside();
        assert!(packed.counts_from_outside());
        assert_eq!((packed.get(), packed.deadline()), (State::Idle, deadline));
        packed.set_idle();
        assert!(packed.counts_from_outside(), "set_idle cleared it");
        packed.set(State::Idle);
        assert!(!packed.counts_from_outside(), "set(Idle) kept it");
        for state in [State::Fired, State::Elapsed] {
            packed.count_from_outside();
            packed.set(state);
            assert!(!packed.counts_from_outside(), "{state:?} kept it");
            packed.set_idle();
            assert_eq!(packed.get(), State::Idle);
            assert!(!packed.counts_from_outside());
        }
    }
}
