//! A `Sleep`'s registration state, packed into 32 bytes.
//!
//! Decoded, it is the enum [`State`]: idle; registered, with the entry's
//! key, the deadline's tick (so checking the timer's progress needs no clock
//! conversion) and the identity of the waker the entry holds, if known;
//! fired; or elapsed. As a Rust enum that is 40 bytes, because nothing in
//! the registered variant leaves room for the discriminant. The waker's
//! vtable address does: a `&'static RawWakerVTable` is non-null and aligned
//! (checked below at compile time), so the values under its alignment are
//! never a vtable, and [`Packed`] uses them for the other states and for
//! "registered, waker unknown". Plain integers, no `unsafe`.

use std::task::{RawWakerVTable, Waker};

use crate::wheel::Key;

/// A `Sleep`'s state, decoded from [`Packed`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum State {
    /// Not in the wheel: not yet polled, or reset after completing.
    Idle,
    /// In the wheel under `key`, due at `tick`. `waker` is the identity of
    /// the waker the entry holds, if this sleep knows it: a poll with the
    /// same waker before the timer has reached `tick` needs no lock (see the
    /// driver's "Polling without the lock").
    Registered {
        key: Key,
        tick: u64,
        waker: Option<WakerId>,
    },
    /// Fired and not yet polled, with no entry (the driver freed it): it
    /// completes at the next poll, and a reset arms it again, as it does a
    /// registered sleep whose entry has fired.
    Fired,
    /// Completed.
    Elapsed,
}

/// What [`Waker::will_wake`] compares: the data and vtable pointers, kept
/// as addresses so that `Sleep` stays `Send` and `Sync`. Sound to compare
/// while the entry holds the waker: that waker keeps its data alive, so the
/// address cannot be reused by another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct WakerId {
    data: usize,
    vtable: usize,
}

impl WakerId {
    pub(super) fn of(waker: &Waker) -> WakerId {
        WakerId {
            data: waker.data() as usize,
            vtable: std::ptr::from_ref::<RawWakerVTable>(waker.vtable()) as usize,
        }
    }
}

// Codes in `Packed::vtable` that no vtable address can take.
const IDLE: usize = 0;
const FIRED: usize = 1;
const ELAPSED: usize = 2;
const NO_WAKER: usize = 3;
const _: () = assert!(std::mem::align_of::<RawWakerVTable>() > NO_WAKER);

/// [`State`] in 32 bytes; `vtable` says which state (see the module docs).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) struct Packed {
    key: Key,
    tick: u64,
    data: usize,
    vtable: usize,
}

impl Packed {
    /// A key for the states that have none; never read.
    const NO_KEY: Key = Key {
        index: u32::MAX,
        generation: 0,
    };

    pub(super) const IDLE: Packed = Packed::code(IDLE);

    const fn code(vtable: usize) -> Packed {
        Packed {
            key: Packed::NO_KEY,
            tick: 0,
            data: 0,
            vtable,
        }
    }

    #[inline]
    pub(super) fn get(&self) -> State {
        match self.vtable {
            IDLE => State::Idle,
            FIRED => State::Fired,
            ELAPSED => State::Elapsed,
            vtable => State::Registered {
                key: self.key,
                tick: self.tick,
                waker: (vtable != NO_WAKER).then_some(WakerId {
                    data: self.data,
                    vtable,
                }),
            },
        }
    }

    #[inline]
    pub(super) fn set(&mut self, state: State) {
        *self = match state {
            State::Idle => Packed::code(IDLE),
            State::Fired => Packed::code(FIRED),
            State::Elapsed => Packed::code(ELAPSED),
            State::Registered { key, tick, waker } => {
                let WakerId { data, vtable } = waker.unwrap_or(WakerId {
                    data: 0,
                    vtable: NO_WAKER,
                });
                Packed {
                    key,
                    tick,
                    data,
                    vtable,
                }
            }
        };
    }
}

impl std::fmt::Debug for Packed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.get().fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_state_round_trips() {
        let key = Key {
            index: 7,
            generation: 9,
        };
        let waker = WakerId::of(std::task::Waker::noop());
        let states = [
            State::Idle,
            State::Fired,
            State::Elapsed,
            State::Registered {
                key,
                tick: 42,
                waker: None,
            },
            State::Registered {
                key,
                tick: u64::MAX,
                waker: Some(waker),
            },
        ];
        for state in states {
            let mut packed = Packed::IDLE;
            packed.set(state);
            assert_eq!(packed.get(), state, "{packed:?}");
        }
        assert_eq!(std::mem::size_of::<Packed>(), 32);
    }
}
