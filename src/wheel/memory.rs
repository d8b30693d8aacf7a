//! Giving memory back: when and how the wheel trims its slab and levels.
//!
//! # Why only the tail
//!
//! The slab grows like a `Vec` (doubling) and a burst of timers leaves it at
//! the burst's size. Its entries cannot be moved to compact it: every key is
//! held outside the wheel (by a `Sleep`), and a key is an index. So the wheel
//! can only release the vacant *tail* of the slab, the slots past the highest
//! live entry. Each trim also rebuilds the slab's free list in ascending
//! index order (that is what `Slab::compact` does when it is refused every
//! move), so the timers started after it fill the lowest free slots rather
//! than those around a live entry near the top; once that entry goes, the
//! next trim can cut deeper.
//!
//! # When
//!
//! After a removal (after the last of a flush of discarded entries, which
//! counts them all), if the slab holds more than `trim_floor` entries
//! ([`TRIM_FLOOR`] outside tests) and either
//!
//! - the wheel is now empty, or
//! - fewer than a quarter of its slots are live, at least a quarter of its
//!   capacity has been removed since the last trim, and no live entry sits
//!   in the top half of the slab (found by walking back over the vacant
//!   tail only). With one there (timers cancelled oldest first), a trim
//!   would walk the whole slab to free little, so the wheel waits another
//!   quarter of its capacity in removals before it looks again.
//!
//! A trim costs O(capacity) (the slab rebuilds its free list, and the `Vec`
//! reallocates); the second rule pays for it with capacity / 4 removals, so
//! removal stays O(1) amortised and a half-full wheel never trims. An empty
//! wheel's trim is paid for by the inserts that grew it beyond the floor
//! (it goes back to zero, so growing past the floor again takes as many).
//! A steady population never trims, so it pays only a comparison or two
//! (see `note_removal`).
//! The price of giving memory back falls on a workload that bursts far above
//! the floor and drains to empty over and over: each burst regrows the slab
//! (`Vec` doubling onto fresh pages), which a wheel that kept its peak would
//! not.
//!
//! # What it guarantees
//!
//! - The slab's capacity never exceeds what the peak number of live entries
//!   made it (`Vec` growth, so below twice the peak).
//! - When the wheel becomes empty its capacity is at most [`TRIM_FLOOR`]
//!   entries: back to zero after any burst above the floor.
//! - While entries are live and fewer than a quarter of the slots are in
//!   use, a trim runs every capacity / 4 removals if the highest live slot
//!   is in the bottom half, and cuts the slab to it: capacity follows that
//!   slot to within a factor of two, lagging by up to capacity / 4
//!   removals. So timers cancelled newest first take the slab
//!   down with them, while after a burst cancelled oldest first the
//!   burst's newest survivor holds it up until it goes, and then until
//!   the next trim (a wheel that goes quiet keeps that much until it
//!   empties).
//! - Trailing levels that have become empty are freed at each trim, so level
//!   storage also returns to one level when a wheel above the floor
//!   empties. Below the floor levels stay: freeing them when the wheel
//!   empties would make a lone far timer, started and cancelled in a loop,
//!   allocate and free them every time, to save a few KiB.
//!
//! # Generations survive
//!
//! Truncating the slab forgets its vacant slots, which is harmless because
//! an entry's generation comes from the wheel-wide `next_generation`
//! counter, not from the slot: an index that is truncated and later handed
//! out again gets a generation that no key from the last 2^32 - 1
//! insertions carried (one value marks discarded entries; 2^24 insertions
//! in a timer's wheels, see `Wheel::limit_generations`), so a stale key
//! never matches the new entry. (A per-slot
//! generation, kept in the vacant slot, would be lost with the tail and
//! restart, and a stale key could then match.)

use slab::Slab;

use super::level::Level;
use super::Wheel;

/// Slab capacity (in entries) up to which the wheel never trims: small
/// wheels keep their slots, and a wheel that comes back to empty holds at
/// most this many.
pub(crate) const TRIM_FLOOR: usize = 1024;

impl<T> Wheel<T> {
    /// Entries the slab can hold without allocating: its capacity.
    pub(crate) fn allocated_entries(&self) -> usize {
        self.entries.capacity()
    }

    /// Heap bytes held by the levels: their slots, occupancy bitmaps and
    /// the vector holding them.
    pub(crate) fn level_bytes(&self) -> usize {
        self.levels.capacity() * std::mem::size_of::<Level>()
            + self.levels.iter().map(Level::heap_bytes).sum::<usize>()
    }

    /// Called after every removal from the slab; trims when the policy in
    /// the module docs says so. Inlined into every removal, so it holds only
    /// the test that nothing can be due: one comparison below the floor, two
    /// above it; the rest of the policy is in [`Wheel::consider_trim`].
    #[inline]
    pub(super) fn note_removal(&mut self) {
        self.note_removals(1);
    }

    /// [`note_removal`](Wheel::note_removal) for `n` removals at once, as a
    /// flush of discarded entries makes: looking once they are all gone
    /// sees the slab's top as it is, not held up by entries about to go.
    #[inline]
    pub(super) fn note_removals(&mut self, n: usize) {
        self.removals_since_trim += n;
        let capacity = self.entries.capacity();
        if capacity <= self.trim_floor {
            return;
        }
        // Both rules need `live < capacity / 4` or `live == 0`; this is the
        // negation of their union in one comparison (a quarter of 0 to 3
        // slots is 0, and then only `live == 0` is left).
        let live = self.entries.len();
        if live > (capacity / 4).saturating_sub(1) {
            return;
        }
        self.consider_trim(capacity, live);
    }

    /// The rest of `note_removal`'s rules, for a wheel above the floor that
    /// is empty or less than a quarter full.
    #[cold]
    #[inline(never)]
    fn consider_trim(&mut self, capacity: usize, live: usize) {
        if live == 0 {
            self.trim();
        } else if self.removals_since_trim >= capacity / 4 {
            // Only a vacant tail can be released. When a live entry sits in
            // the top half (timers cancelled oldest first), trimming would
            // walk the whole slab to free little: wait for the next round.
            // Finding the last live entry walks only the vacant tail.
            let end = self
                .entries
                .iter()
                .next_back()
                .map_or(0, |(index, _)| index + 1);
            #[cfg(test)]
            {
                self.trim_checks += 1;
            }
            if end <= capacity / 2 {
                self.trim();
            } else {
                self.removals_since_trim = 0;
            }
        }
    }

    /// Releases the slab's vacant tail, rebuilds its free list in ascending
    /// order, and frees trailing empty levels.
    fn trim(&mut self) {
        self.removals_since_trim = 0;
        #[cfg(test)]
        {
            self.trims += 1;
        }
        // Every move is refused (keys live outside the wheel), so this pops
        // the vacant tail, shrinks the `Vec`, and rebuilds the free list
        // lowest index first, and moves nothing.
        if self.entries.is_empty() {
            // Nothing to keep: drop the storage rather than walk it.
            self.entries = Slab::new();
        } else {
            self.entries.compact(|_, _, _| false);
        }
        while self.levels.len() > 1 && self.levels.last().is_some_and(Level::is_empty) {
            self.levels.pop();
        }
        self.levels.shrink_to_fit();
    }
}
