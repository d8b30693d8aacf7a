//! Cancelling in batches: [`Wheel::discard`] and [`Wheel::flush_discarded`].
//!
//! Unlinking an entry writes its two neighbours, which in a big wheel are
//! cache misses anywhere in the slab. The driver cancels under a lock, and
//! on x86 a lock's atomic instructions wait for every earlier memory access,
//! so cancelling one entry after another pays those misses one after the
//! other. `discard` therefore takes the value out and only *marks* the
//! entry: its generation becomes [`DISCARDED`], which no key carries, so
//! every lookup misses it from then on, and its index goes on a short list.
//! Once [`BATCH`] have gathered they are unlinked and freed together, with
//! no atomic instruction between them, after a first pass that only reads
//! their neighbours, so that the processor has many of those misses in
//! flight at once. An entry with no neighbour is removed at once: there is
//! nothing to miss on. So is one inserted within the last [`RECENT`]
//! insertions: a timer created and cancelled straight away (a timeout
//! around a future that was nearly ready) finds its neighbours in cache,
//! written by its own insertion, and batching would only add work.
//!
//! A discarded entry is still linked: it keeps its slot's occupancy bit
//! and its place in the raw `scheduled` count, which [`Wheel::scheduled`]
//! corrects for. Nothing may walk a list while one is there, so
//! [`Wheel::pop_expired`] flushes first, and so does shutdown's
//! `take_scheduled_values`; `DelayQueue`'s wheel never discards. A flush is
//! at most `BATCH` unlinks, so, unlike leaving dead entries until their slot
//! comes due (measured and not kept, see the README), it never holds the
//! lock for long and never lets them pile up in the slab.
//!
//! # At most one chunk emptied per call
//!
//! The slab counts the discarded entries of each chunk (`Slots::mark`). The
//! moment a chunk holds discarded entries only, whether by a discard or by
//! a removal of its last other entry, the batch is flushed at once. So no
//! chunk is ever left holding only discarded entries, and a flush empties
//! at most one chunk (the one that triggered it) and frees at most one
//! (the old spare, see `slots/`), or at most three and the directory if it
//! empties the wheel. Before, a wheel draining in random order emptied up
//! to a batch of chunks in one flush (111 chunks, 4.5 MB, in one drop of a
//! million sleeps). An early flush is one per chunk emptied, at most one in
//! 1024 removals; keeping the counts costs a cancel 26 instructions
//! (callgrind, the driver's `Shard::cancel`: 339 to 365).

use super::entry::NIL;
use super::{Key, Place, Wheel};

/// How many discarded entries wait for one flush: enough that their misses
/// overlap, few enough that a flush in which every neighbour misses stays
/// around 10 µs. Tests use a handful, so that flushes happen all the time.
#[cfg(not(test))]
pub(super) const BATCH: usize = 128;
#[cfg(test)]
pub(super) const BATCH: usize = 4;

/// An entry inserted within this many insertions is removed at once: what
/// its insertion touched is still in cache. (Generations count insertions.)
/// In tests only the very last one is, so most discards are batched.
#[cfg(not(test))]
const RECENT: u32 = 64;
#[cfg(test)]
const RECENT: u32 = 1;

/// The generation of a discarded entry. [`Wheel::insert`] never hands it
/// out, so no key matches it.
pub(super) const DISCARDED: u32 = u32::MAX;

impl<T: Default> Wheel<T> {
    /// Cancels the entry, scheduled or expired, and returns its value, as
    /// [`remove`] does, but may leave the unlinking for a later flush; `None`
    /// if the key is stale. The key is stale from here on.
    ///
    /// [`remove`]: Wheel::remove
    #[inline(always)]
    pub fn discard(&mut self, key: Key) -> Option<T> {
        self.discard_scheduled(key).map(|(value, _)| value)
    }

    /// [`discard`](Wheel::discard), also saying whether the entry was still
    /// scheduled (not handed out by `pop_expired`): one lookup for both,
    /// where asking [`is_scheduled`](Wheel::is_scheduled) first cost a
    /// cancel a second (13 instructions, callgrind).
    #[inline(always)]
    pub fn discard_scheduled(&mut self, key: Key) -> Option<(T, bool)> {
        // Inserted in the last few insertions: its neighbours (and it) were
        // written then and are still in cache.
        let recent = self.insertions_since(key.generation) <= RECENT;
        let entry = self.entry_mut(key)?;
        let scheduled = entry.place != Place::Unlinked;
        // Both links NIL: alone in its list, or in none (unlinked).
        let value = if recent || entry.prev & entry.next == NIL {
            let (place, prev, next) = (entry.place, entry.prev, entry.next);
            self.take_out(key.index, place, prev, next)
        } else {
            entry.generation = DISCARDED;
            let value = std::mem::take(&mut entry.value);
            self.discarded.push(key.index);
            // Flushed when the batch is full, and when its chunk holds
            // discarded entries only (see the module docs). So is a wheel
            // holding nothing else: an empty wheel gives its slab back (see
            // `memory.rs`), which these entries would otherwise hold until a
            // driver pass that may be decades away.
            if self.entries.mark(key.index as usize) || self.discarded.len() >= BATCH {
                self.flush_discarded();
            }
            value
        };
        Some((value, scheduled))
    }
}

impl<T> Wheel<T> {
    /// How many insertions ago `generation` was handed out (modulo the
    /// wheel's generations): 1 for the latest.
    #[inline(always)]
    fn insertions_since(&self, generation: u32) -> u32 {
        let next = self.next_generation;
        if generation < next {
            next - generation
        } else {
            // The count came round to 0 since: a limited wheel's does at
            // `generations`; an unlimited one's skips `DISCARDED`.
            next + (self.generations - generation)
        }
    }

    /// Unlinks and frees every discarded entry.
    #[inline(never)]
    pub(crate) fn flush_discarded(&mut self) {
        let discarded = std::mem::take(&mut self.discarded);
        // Read every neighbour first, in a loop short enough that many of
        // these independent misses are in flight at once; unlinking below
        // then finds them in cache.
        let mut touched = 0u32;
        for &index in &discarded {
            let entry = &self.entries[index as usize];
            if entry.prev != NIL {
                touched ^= self.entries[entry.prev as usize].next;
            }
            if entry.next != NIL {
                touched ^= self.entries[entry.next as usize].prev;
            }
        }
        std::hint::black_box(touched);
        for &index in &discarded {
            // Freed first: `delist` touches only the neighbours and ends,
            // and the entry is read once.
            let entry = self.entries.remove_marked(index as usize);
            debug_assert_eq!(entry.generation, DISCARDED, "entry {index}");
            debug_assert_ne!(entry.place, Place::Unlinked, "entry {index}");
            self.delist(index, entry.place, entry.prev, entry.next);
        }
        self.note_removal();
        // Keep the allocation for the next batch.
        self.discarded = discarded;
        self.discarded.clear();
    }

    /// Discarded entries not yet flushed.
    #[cfg(test)]
    pub(crate) fn discarded(&self) -> usize {
        self.discarded.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wheel::memory::TRIM_FLOOR;

    /// Three entries due at `tick`, so each has a neighbour in one slot.
    fn three_in_one_slot(tick: u64) -> (Wheel<u64>, [Key; 3]) {
        let mut wheel = Wheel::new(64);
        let keys = [1, 2, 3].map(|value| wheel.try_insert(tick, value).unwrap());
        (wheel, keys)
    }

    #[test]
    fn a_discarded_key_is_stale_at_once_and_its_entry_never_fires() {
        let (mut wheel, [a, b, c]) = three_in_one_slot(10);
        assert_eq!(wheel.discard(b), Some(2));
        assert_eq!(
            (wheel.scheduled(), wheel.len(), wheel.discarded()),
            (2, 3, 1)
        );
        assert_eq!(wheel.discard(b), None);
        assert_eq!(wheel.remove(b), None);
        assert_eq!(wheel.reset(b, 20), None);
        assert_eq!(wheel.value_mut(b), None);
        wheel.assert_invariants();
        let mut fired = Vec::new();
        while let Some(key) = wheel.pop_expired(10) {
            fired.push(wheel.remove(key).unwrap());
        }
        assert_eq!(fired, [1, 3]);
        assert_eq!((wheel.len(), wheel.discarded()), (0, 0));
        assert_eq!(wheel.value_mut(a), None);
        assert_eq!(wheel.value_mut(c), None);
    }

    #[test]
    fn an_entry_emptying_the_wheel_by_remove_flushes_the_batch_and_frees_the_slab() {
        // Found by review: only a discard that left nothing else flushed, so
        // a last entry removed (a sleep reset into the past) left a batch,
        // and with it the burst's slab, until the next driver pass.
        let mut wheel: Wheel<u64> = Wheel::new(64);
        let n = 3 * TRIM_FLOOR as u64;
        let keys: Vec<Key> = (0..n)
            .map(|i| wheel.try_insert(1_000_000, i).unwrap())
            .collect();
        let (last, rest) = keys.split_last().unwrap();
        for &key in rest {
            assert!(wheel.discard(key).is_some());
        }
        assert!(wheel.discarded() > 0, "a partial batch waits");
        assert_eq!(wheel.remove(*last), Some(n - 1));
        assert_eq!(
            (wheel.len(), wheel.discarded()),
            (0, 0),
            "discarded entries still held (capacity {})",
            wheel.allocated_entries()
        );
        assert!(wheel.allocated_entries() <= TRIM_FLOOR);
        wheel.assert_invariants();
    }

    #[test]
    fn an_entry_without_neighbours_is_removed_at_once() {
        let mut wheel = Wheel::new(64);
        let alone = wheel.try_insert(10, 1).unwrap();
        assert_eq!(wheel.discard(alone), Some(1));
        assert_eq!((wheel.len(), wheel.discarded()), (0, 0));
        // Expired and handed out: unlinked, so no neighbours either.
        let [a, b] = [2, 3].map(|value| wheel.try_insert(20, value).unwrap());
        assert_eq!(wheel.pop_expired(20), Some(a));
        assert_eq!(wheel.discard(a), Some(2));
        assert_eq!((wheel.len(), wheel.discarded()), (1, 0));
        assert_eq!(wheel.discard(b), Some(3));
        assert_eq!((wheel.len(), wheel.discarded()), (0, 0));
        wheel.assert_invariants();
    }

    #[test]
    fn a_full_batch_is_unlinked_and_freed_together() {
        let mut wheel = Wheel::new(64);
        let keys: Vec<Key> = (0..=BATCH as u64)
            .map(|value| wheel.try_insert(100, value).unwrap())
            .collect();
        // Every other one first, so that neighbours are discarded too.
        let order: Vec<usize> = (0..BATCH).step_by(2).chain((1..BATCH).step_by(2)).collect();
        for (n, &i) in order.iter().enumerate() {
            assert_eq!(wheel.discard(keys[i]), Some(i as u64));
            wheel.assert_invariants();
            let left = n + 1 < BATCH;
            assert_eq!(
                (wheel.len(), wheel.discarded()),
                if left { (BATCH + 1, n + 1) } else { (1, 0) },
                "after {} discards",
                n + 1
            );
        }
        assert_eq!(wheel.scheduled(), 1);
        assert_eq!(wheel.pop_expired(100), Some(keys[BATCH]));
    }

    #[test]
    fn shutdown_takes_only_what_was_not_discarded() {
        let (mut wheel, [_, b, _]) = three_in_one_slot(10);
        wheel.discard(b);
        let mut left = wheel.take_scheduled_values(|_| true);
        left.sort_unstable();
        assert_eq!(left, [1, 3]);
    }

    #[test]
    fn shutdown_frees_the_entries_it_is_not_told_to_keep() {
        let (mut wheel, [a, _, c]) = three_in_one_slot(10);
        let mut left = wheel.take_scheduled_values(|&value| value == 1);
        left.sort_unstable();
        assert_eq!(left, [1, 2, 3]);
        assert_eq!(wheel.value(a), Some(&0), "kept, holding a default");
        assert_eq!(wheel.value(c), None, "freed");
        assert_eq!((wheel.len(), wheel.scheduled()), (1, 1));
    }

    /// Found by review: the last entries discarded from a large wheel
    /// waited in the batch, holding the slab's top, until a flush that an
    /// idle timer might not make for decades.
    #[test]
    fn discarding_the_last_entries_flushes_them_and_gives_the_slab_back() {
        let mut wheel = Wheel::new(64);
        let keys: Vec<_> = (0..3 * TRIM_FLOOR as u64)
            .map(|i| wheel.try_insert(1_000_000, i).unwrap())
            .collect();
        assert!(wheel.allocated_entries() >= 3 * TRIM_FLOOR);
        for key in keys {
            assert!(wheel.discard(key).is_some());
        }
        assert_eq!((wheel.discarded(), wheel.len()), (0, 0));
        assert!(
            wheel.allocated_entries() <= TRIM_FLOOR,
            "{} entries' room kept",
            wheel.allocated_entries()
        );
        wheel.assert_invariants();
    }

    #[test]
    fn a_limited_wheels_generations_wrap_below_the_limit() {
        let mut wheel: Wheel<u64> = Wheel::new(64);
        wheel.limit_generations(3);
        let generations: Vec<u32> = (0..10)
            .map(|i| wheel.try_insert(10, i).unwrap().generation)
            .collect();
        assert_eq!(
            generations,
            [0, 1, 2, 3, 4, 5, 6, 7, 0, 1],
            "{generations:?}"
        );
    }

    /// The latest entry is removed at once (not batched) on either side of
    /// the generation count coming round; before, the wrap made it look
    /// four billion insertions old.
    #[test]
    fn the_latest_entry_is_recent_across_the_generations_wrap() {
        for bits in [2, 24] {
            let mut wheel: Wheel<u64> = Wheel::new(64);
            wheel.limit_generations(bits);
            for i in 0..8 {
                let earlier = wheel.try_insert(10, 0).unwrap();
                let latest = wheel.try_insert(10, i).unwrap();
                assert_eq!(wheel.discard(latest), Some(i));
                assert_eq!(
                    wheel.discarded(),
                    0,
                    "{bits} bits, generation {:#b} with next {:#b}",
                    latest.generation,
                    wheel.next_generation
                );
                assert_eq!(wheel.remove(earlier), Some(0));
                if bits > 2 && i == 2 {
                    // Skip to the wrap rather than insert 2^24 times.
                    wheel.next_generation = (1 << bits) - 3;
                }
            }
        }
        let mut unlimited: Wheel<u64> = Wheel::new(64);
        unlimited.next_generation = DISCARDED - 1;
        let earlier = unlimited.try_insert(10, 0).unwrap();
        let latest = unlimited.try_insert(10, 1).unwrap();
        assert_eq!((earlier.generation, latest.generation), (DISCARDED - 1, 0));
        assert_eq!(unlimited.discard(earlier), Some(0));
        assert_eq!(unlimited.discarded(), 1, "two insertions ago: batched");
        let earlier = unlimited.try_insert(10, 2).unwrap();
        assert_eq!(unlimited.insertions_since(DISCARDED - 1), 3);
        assert_eq!(unlimited.discard(earlier), Some(2));
        assert_eq!(unlimited.discarded(), 1, "the latest: at once");
    }

    #[test]
    fn no_key_is_ever_given_the_discarded_mark() {
        let mut wheel: Wheel<u64> = Wheel::new(64);
        wheel.next_generation = DISCARDED - 1;
        let a = wheel.try_insert(10, 1).unwrap();
        let b = wheel.try_insert(10, 2).unwrap();
        assert_eq!(
            (a.generation, b.generation),
            (DISCARDED - 1, 0),
            "generations {:#b} then {:#b}",
            a.generation,
            b.generation
        );
    }
}
