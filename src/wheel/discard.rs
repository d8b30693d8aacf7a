//! Cancelling in batches: [`Wheel::discard`] and [`Wheel::flush_discarded`].
//!
//! Cancelling an entry reads it (its links) and writes its two neighbours.
//! In a big wheel each of those lines is a cache miss anywhere in the slab,
//! and the driver cancels under a lock, whose atomic instructions (on x86)
//! wait for every earlier memory access: cancel after cancel, the misses
//! are paid one after the other. `discard` therefore does not touch the
//! entry at all. Its caller promises that the key is current and the entry
//! scheduled (the driver knows it without looking: see `Shard::cancel`), so
//! `discard` only puts the index on a short list and counts it in its
//! chunk (`Slots::mark`). Once [`BATCH`] have gathered they are read,
//! unlinked and freed together, with no atomic instruction between them,
//! after a first pass that only reads them and their neighbours, so that
//! the processor has many of those misses in flight at once. An entry
//! inserted within the last [`RECENT`] insertions is removed at once: a
//! timer created and cancelled straight away (a timeout around a future
//! that was nearly ready) finds itself and its neighbours in cache, written
//! by its own insertion, and batching would only add work.
//!
//! A discarded entry is left as it was: linked, holding its value, its
//! slot's occupancy bit and its place in the raw `scheduled` count, which
//! [`Wheel::scheduled`] corrects for. No one looks it up by key again (its
//! owner gave the key up), and nothing may walk a list while one is there,
//! so [`Wheel::pop_expired`] flushes first, and so do shutdown's
//! `take_scheduled_values` and `compact`; `DelayQueue`'s wheel never
//! discards. A flush is at most `BATCH` unlinks, so it never holds the lock
//! for long and never lets discarded entries pile up in the slab.
//!
//! # The values: dropped by the owner, after its lock
//!
//! A flush takes the discarded entries' values out into
//! [`dead`](Wheel::move_dead_into), and leaves them there: the driver's are
//! wakers, and dropping the last clone of a waker may drop a task, and in
//! it another sleep of the same shard, whose drop takes the shard's lock.
//! So the shard takes them out under its lock and drops them after
//! (`Shard::unlock`, `driver/cancel.rs`), as it did when a cancel took the
//! value out on the spot.
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

use super::entry::{Place, NIL};
use super::{Key, Wheel};

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

/// How many generations a wheel hands out unless
/// [`limit_generations`](Wheel::limit_generations) says fewer: `0..u32::MAX`.
pub(super) const GENERATIONS: u32 = u32::MAX;

impl<T> Wheel<T> {
    /// Cancels a scheduled entry (in a slot or the due list: the caller
    /// knows it is, and that the key is current). Returns its value if it
    /// was removed at once (one of the last few inserted); otherwise the
    /// entry waits, untouched, for a flush, which leaves its value for
    /// [`move_dead_into`](Wheel::move_dead_into). The key is the caller's
    /// no more.
    #[inline(always)]
    pub fn discard(&mut self, key: Key) -> Option<T> {
        debug_assert_eq!(
            self.is_scheduled(key),
            Some(true),
            "discarding {key:?}, which is not scheduled"
        );
        // Inserted in the last few insertions: it and its neighbours were
        // written then and are still in cache.
        if self.insertions_since(key.generation) <= RECENT {
            return self.remove(key);
        }
        self.discarded.push(key.index);
        // Flushed when the batch is full, and when its chunk holds
        // discarded entries only (see the module docs). So is a wheel
        // holding nothing else: an empty wheel gives its slab back (see
        // `memory.rs`), which these entries would otherwise hold until a
        // driver pass that may be decades away.
        if self.entries.mark(key.index as usize) || self.discarded.len() >= BATCH {
            self.flush_discarded();
        }
        None
    }

    /// How many insertions ago `generation` was handed out (modulo the
    /// wheel's generations): 1 for the latest.
    #[inline(always)]
    fn insertions_since(&self, generation: u32) -> u32 {
        let next = self.next_generation;
        if generation < next {
            next - generation
        } else {
            // The count came round to 0 since, at `generations`.
            next + (self.generations - generation)
        }
    }

    /// Unlinks and frees every discarded entry, its value going to
    /// [`move_dead_into`](Wheel::move_dead_into)'s list.
    #[inline(never)]
    pub(crate) fn flush_discarded(&mut self) {
        let discarded = std::mem::take(&mut self.discarded);
        // Read every entry and its neighbours first, in a loop short enough
        // that many of these independent misses are in flight at once;
        // unlinking below then finds them in cache.
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
        self.dead.reserve(discarded.len());
        for &index in &discarded {
            // Freed first: `delist` touches only the neighbours and ends,
            // and the entry is read once.
            let entry = self.entries.remove_marked(index as usize);
            debug_assert_ne!(entry.place, Place::Unlinked, "entry {index}");
            self.delist(index, entry.place, entry.prev, entry.next);
            self.dead.push(entry.value);
        }
        self.note_removal();
        // Keep the allocation for the next batch.
        self.discarded = discarded;
        self.discarded.clear();
    }

    /// Whether a flush has left values for
    /// [`move_dead_into`](Wheel::move_dead_into).
    #[inline]
    pub(crate) fn has_dead(&self) -> bool {
        !self.dead.is_empty()
    }

    /// Moves the values of the entries flushed since the last call into
    /// `into`, for the owner to drop where it likes (the driver: after its
    /// lock); the wheel keeps its buffer's room for the next flush.
    #[inline]
    pub fn move_dead_into(&mut self, into: &mut Vec<T>) {
        into.append(&mut self.dead);
    }

    /// [`move_dead_into`](Wheel::move_dead_into) a new `Vec`.
    #[cfg(test)]
    pub(crate) fn take_dead(&mut self) -> Vec<T> {
        std::mem::take(&mut self.dead)
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

    /// Sorted: what `take_dead` handed back.
    fn dead(wheel: &mut Wheel<u64>) -> Vec<u64> {
        let mut dead = wheel.take_dead();
        dead.sort_unstable();
        dead
    }

    #[test]
    fn a_discarded_entry_waits_untouched_and_never_fires() {
        let (mut wheel, [a, b, c]) = three_in_one_slot(10);
        assert_eq!(wheel.discard(b), None, "batched");
        assert_eq!(
            (wheel.scheduled(), wheel.len(), wheel.discarded()),
            (2, 3, 1)
        );
        // Left as it was until the flush: the caller gave its key up.
        assert_eq!(wheel.value(b), Some(&2));
        assert_eq!(dead(&mut wheel), []);
        wheel.assert_invariants();
        let mut fired = Vec::new();
        while let Some(key) = wheel.pop_expired(10) {
            fired.push(wheel.remove(key).unwrap());
        }
        assert_eq!(fired, [1, 3]);
        assert_eq!((wheel.len(), wheel.discarded()), (0, 0));
        assert_eq!(dead(&mut wheel), [2], "the flush's value, handed back");
        assert_eq!(dead(&mut wheel), [], "once");
        for key in [a, b, c] {
            assert_eq!(wheel.value_mut(key), None);
        }
    }

    #[test]
    #[should_panic(expected = "not scheduled")]
    #[cfg(debug_assertions)]
    fn discarding_a_fired_entry_is_the_callers_bug() {
        let (mut wheel, [a, ..]) = three_in_one_slot(10);
        assert_eq!(wheel.pop_expired(10), Some(a));
        wheel.discard(a);
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
        let mut values: Vec<u64> = rest.iter().filter_map(|&key| wheel.discard(key)).collect();
        assert!(wheel.discarded() > 0, "a partial batch waits");
        assert_eq!(wheel.remove(*last), Some(n - 1));
        assert_eq!(
            (wheel.len(), wheel.discarded()),
            (0, 0),
            "discarded entries still held (capacity {})",
            wheel.allocated_entries()
        );
        assert!(wheel.allocated_entries() <= TRIM_FLOOR);
        values.extend(dead(&mut wheel));
        values.sort_unstable();
        assert_eq!(values, (0..n - 1).collect::<Vec<_>>(), "every value back");
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
            assert_eq!(wheel.discard(keys[i]), None, "batched");
            wheel.assert_invariants();
            let left = n + 1 < BATCH;
            assert_eq!(
                (wheel.len(), wheel.discarded()),
                if left { (BATCH + 1, n + 1) } else { (1, 0) },
                "after {} discards",
                n + 1
            );
        }
        assert_eq!(dead(&mut wheel), (0..BATCH as u64).collect::<Vec<_>>());
        assert_eq!(wheel.scheduled(), 1);
        assert_eq!(wheel.pop_expired(100), Some(keys[BATCH]));
    }

    #[test]
    fn shutdown_takes_only_what_was_not_discarded() {
        let (mut wheel, [_, b, _]) = three_in_one_slot(10);
        assert_eq!(wheel.discard(b), None);
        let mut left = wheel.take_scheduled_values(|_| true);
        left.sort_unstable();
        assert_eq!(left, [1, 3]);
        assert_eq!(dead(&mut wheel), [2]);
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
        let n = 3 * TRIM_FLOOR as u64;
        let keys: Vec<_> = (0..n)
            .map(|i| wheel.try_insert(1_000_000, i).unwrap())
            .collect();
        assert!(wheel.allocated_entries() >= 3 * TRIM_FLOOR);
        let mut values: Vec<u64> = keys
            .into_iter()
            .filter_map(|key| wheel.discard(key))
            .collect();
        assert_eq!((wheel.discarded(), wheel.len()), (0, 0));
        assert!(
            wheel.allocated_entries() <= TRIM_FLOOR,
            "{} entries' room kept",
            wheel.allocated_entries()
        );
        values.extend(dead(&mut wheel));
        assert_eq!(values.len() as u64, n);
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
        unlimited.next_generation = GENERATIONS - 1;
        let earlier = unlimited.try_insert(10, 0).unwrap();
        let latest = unlimited.try_insert(10, 1).unwrap();
        assert_eq!(
            (earlier.generation, latest.generation),
            (GENERATIONS - 1, 0)
        );
        assert_eq!(unlimited.discard(earlier), None);
        assert_eq!(unlimited.discarded(), 1, "two insertions ago: batched");
        let earlier = unlimited.try_insert(10, 2).unwrap();
        assert_eq!(unlimited.insertions_since(GENERATIONS - 1), 3);
        assert_eq!(unlimited.discard(earlier), Some(2));
        assert_eq!(unlimited.discarded(), 1, "the latest: at once");
    }

    #[test]
    fn an_unlimited_wheel_never_hands_out_generation_u32_max() {
        let mut wheel: Wheel<u64> = Wheel::new(64);
        wheel.next_generation = GENERATIONS - 1;
        let a = wheel.try_insert(10, 1).unwrap();
        let b = wheel.try_insert(10, 2).unwrap();
        assert_eq!(
            (a.generation, b.generation),
            (GENERATIONS - 1, 0),
            "generations {:#b} then {:#b}",
            a.generation,
            b.generation
        );
    }
}
