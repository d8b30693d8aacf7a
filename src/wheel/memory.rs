//! Giving memory back without a call that pays for the whole wheel.
//!
//! The slab (`slots/`) keeps entries in chunks of 1024 slots, each a
//! fixed-capacity `slab::Slab` (its own allocation with its own free
//! list), and inserts into the lowest chunk with room. So:
//!
//! - a chunk other than chunk 0 that empties is freed by the removal that
//!   empties the next one (one empty chunk is kept as a spare, so a timer
//!   started and cancelled in a loop at a chunk's edge does not allocate
//!   and free a chunk each time);
//! - the removal that empties a wheel that grew past chunk 0 frees the
//!   spare, chunk 0 and the chunk directory, and trailing empty levels:
//!   after a burst, an empty wheel holds nothing but one level. A wheel
//!   that never grew past chunk 0 keeps it and its levels (at most 1024
//!   entries' worth), so a lone far timer started and cancelled in a loop
//!   does not allocate and free them every time;
//! - while entries are live, the wheel holds the chunks that have one, plus
//!   the spare and chunk 0. Entries never move (their keys are held
//!   outside), so one long-lived entry holds its chunk (40 KiB), not the
//!   slab up to it.
//!
//! No call frees more than one chunk (three, and the directory, if it
//! empties the wheel; past 64 chunks, none: see below), and no insert
//! allocates more than one chunk or a doubling of chunk 0 or of the chunk
//! directory (40 bytes and a bit per chunk); nothing is walked. A flush of discarded entries (`discard.rs`) is up to
//! `BATCH` removals but empties at most one chunk, and dropping the
//! directory when the wheel empties visits one 40-byte header per chunk (a
//! microsecond at a million timers).
//!
//! What no count here bounds is the allocator. glibc's `free` returns the
//! top of its heap with `brk` only once the top chunk is free, and then all
//! the free memory below it at once: chunks freed oldest first leave a free
//! stretch below the newest, which the free of the newest returned whole,
//! 16-21 MB in one `brk`, 1-3 ms in one drop at a million sleeps. So a
//! wheel past 64 chunks frees none itself: what it lets go of goes to the
//! function its owner set (`Wheel::free_with`), and the driver's frees it
//! on a thread of the crate's (`slots/hand_off.rs`, `driver/elsewhere.rs`).
//!
//! # Generations survive
//!
//! A freed chunk forgets its vacant slots, which is harmless because an
//! entry's generation comes from the wheel-wide `next_generation` counter,
//! not from the slot: an index that is freed and later handed out again
//! gets a generation that no key from the last 2^32 - 1 insertions carried
//! (one value marks discarded entries; 2^24 insertions in a timer's
//! wheels, see `Wheel::limit_generations`), so a stale key never matches
//! the new entry. (A per-slot generation, kept in the vacant slot, would be
//! lost with the chunk and restart, and a stale key could then match.)

use super::entry::Entry;
use super::level::Level;
#[cfg(test)]
use super::slots::CHUNK;
use super::Wheel;

/// What a big wheel lets go of ([`Wheel::free_with`]).
#[cfg_attr(loom, allow(dead_code))]
pub(crate) type Freed<T> = super::slots::Freed<Entry<T>>;

/// Slots per chunk of the slab, and what an empty wheel keeps (4 in
/// tests, 1024 otherwise).
#[cfg(test)]
pub(crate) const TRIM_FLOOR: usize = CHUNK;

impl<T> Wheel<T> {
    /// Entries the slab has room for without allocating: its capacity.
    /// O(chunks).
    pub(crate) fn allocated_entries(&self) -> usize {
        self.entries.capacity()
    }

    /// Heap bytes held by the levels: their slots, occupancy bitmaps and
    /// the vector holding them.
    pub(crate) fn level_bytes(&self) -> usize {
        self.levels.capacity() * std::mem::size_of::<Level>()
            + self.levels.iter().map(Level::heap_bytes).sum::<usize>()
    }

    /// Called after every removal from the slab: two comparisons, and the
    /// rest of the policy in [`Wheel::emptied`] when the wheel has emptied
    /// and has something to give back. Both inline: a lone timer started
    /// and cancelled in a loop (a churn, a timeout whose future is soon
    /// ready) empties its wheel at every cancel, and a call to find nothing
    /// to free cost it 27 instructions (callgrind).
    #[inline]
    pub(super) fn note_removal(&mut self) {
        if self.entries.is_empty() && self.entries.can_release() {
            self.emptied();
        }
    }

    /// Sets what frees the slab's chunks once it has grown big, from now on
    /// (`slots/hand_off.rs`): the driver's frees them on another thread
    /// (not under loom).
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) fn free_with(&mut self, free: fn(Freed<T>)) {
        self.entries.free_with(free);
    }

    /// The wheel has just emptied and grew past chunk 0: give back what a
    /// burst grew.
    #[cold]
    #[inline(never)]
    fn emptied(&mut self) {
        // Levels first: a big slab hands them off too, until it is released.
        while self.levels.len() > 1 && self.levels.last().is_some_and(Level::is_empty) {
            if let Some(level) = self.levels.pop() {
                self.entries.let_go_level(level);
            }
        }
        self.levels.shrink_to_fit();
        self.entries.release_all();
    }
}
