//! What the wheel stores per timer, and the key that names it.

/// The "no entry" link value. Slab keys are checked to stay below it.
pub(crate) const NIL: u32 = u32::MAX;

/// Where an entry is linked right now.
///
/// `Level` names the slot its deadline mapped to when it was linked. The slot
/// could be recomputed from the deadline, but storing it (in what would
/// otherwise be padding: `Entry` is no larger) saves unlinking the shift and
/// mask.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Place {
    /// In slot `slot` of level `level`.
    Level { level: u8, slot: u16 },
    /// Expired, waiting in the due list to be handed out by `pop_expired`.
    Due,
    /// In no list: expired and handed out, or never scheduled.
    Unlinked,
}

/// One timer in the wheel's slab.
///
/// `prev`/`next` are slab keys of the neighbours in whatever list `place`
/// names, so unlinking is O(1) without searching the slot.
#[derive(Debug)]
pub(crate) struct Entry<T> {
    /// Deadline in ticks since the timer's origin; never rounded down.
    pub(crate) deadline: u64,
    pub(crate) prev: u32,
    pub(crate) next: u32,
    /// Copied into the [`Key`] handed out, so that a stale key does not
    /// match a later entry in the same slot (for 2^32 - 1 insertions: one
    /// value marks a discarded entry).
    pub(crate) generation: u32,
    pub(crate) place: Place,
    pub(crate) value: T,
}

/// A handle to an entry: its slab index plus the generation it was given.
///
/// Slab indices are reused; the generation is what makes a key that outlived
/// its entry harmless: every lookup compares it and treats a mismatch as
/// "no such entry".
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key {
    pub(crate) index: u32,
    pub(crate) generation: u32,
}
