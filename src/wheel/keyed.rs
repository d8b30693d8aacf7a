//! What a keyed queue (`crate::DelayQueue`) needs from the wheel beyond
//! what the driver uses.
//!
//! The driver never stores an entry whose tick has passed: `try_insert` hands
//! the value back and the `Sleep` completes at once. A queue must keep such
//! an entry until `poll_expired` yields it, and must let it be removed or
//! reset by key meanwhile, so here an insert or reset into the past links the
//! entry into the due list, which `pop_expired` empties first. Everything
//! else (capacity, clearing, peeking) is bookkeeping on the slab and lists.
//!
//! Kept in its own file so the driver's operations in `mod.rs` stay as they
//! are.

use super::entry::{Entry, NIL};
use super::level::{slot_for, Level};
use super::list::List;
use super::slots::Slots;
use super::{Key, Wheel};

impl<T> Wheel<T> {
    /// A queue's wheel: like [`Wheel::new`], but its slab has room for
    /// `capacity` entries before it reallocates, and it never trims itself
    /// (see `memory.rs`). A queue's owner asked for that capacity, with
    /// `with_capacity` or `reserve`, and gives it back with
    /// [`shrink_to_fit`](Wheel::shrink_to_fit), as with any collection.
    pub(crate) fn with_capacity(slots_per_level: usize, capacity: usize) -> Wheel<T> {
        let mut entries = Slots::new(false);
        entries.reserve(capacity);
        Wheel::with_slots(slots_per_level, entries)
    }

    /// Makes every key this wheel hands out carry a generation below
    /// `2^bits`, for owners that keep keys in fewer bits (a `Sleep` keeps
    /// 24 beside its deadline). A stale key then matches a newer entry in
    /// its slot only if a multiple of `2^bits` insertions came between,
    /// rather than of `2^32 - 1`. Only on a fresh wheel.
    pub(crate) fn limit_generations(&mut self, bits: u32) {
        assert!((1..32).contains(&bits), "{bits} generation bits");
        assert!(
            self.next_generation == 0 && self.entries.is_empty(),
            "a used wheel"
        );
        self.generations = 1 << bits;
    }

    /// Entries the slab holds before it reallocates.
    pub(crate) fn capacity(&self) -> usize {
        self.entries.capacity()
    }

    /// Makes room for at least `additional` more entries.
    pub(crate) fn reserve(&mut self, additional: usize) {
        self.entries.reserve(additional);
    }

    /// Frees the slab's empty chunks (keys stay valid: entries never move)
    /// and levels above the highest occupied one.
    pub(crate) fn shrink_to_fit(&mut self) {
        self.entries.shrink_to_fit();
        let needed = (64 - self.occupied_levels.leading_zeros() as usize).max(1);
        self.levels.truncate(needed);
        self.levels.shrink_to_fit();
    }

    /// Moves the entries at the top of the slab into its free slots below,
    /// relinking their lists, and releases what is left above: capacity
    /// comes down to `len` (as far as the allocator lets it), and the levels
    /// as in [`shrink_to_fit`](Wheel::shrink_to_fit). Returns each moved
    /// entry's key before the move and its index after: every key the owner
    /// holds for one of those entries must be translated from now on.
    ///
    /// O(capacity): one pass over the slab and the levels' slots.
    pub(crate) fn compact(&mut self) -> Vec<(Key, u32)> {
        self.flush_discarded();
        let mut moved = Vec::new();
        self.entries.compact(|entry, from, to| {
            let from = Key {
                index: from as u32,
                generation: entry.generation,
            };
            moved.push((from, to as u32));
        });
        if !moved.is_empty() {
            // The links and list ends still name the old indices.
            let renamed: std::collections::HashMap<u32, u32> =
                moved.iter().map(|&(from, to)| (from.index, to)).collect();
            let rename = |index: u32| renamed.get(&index).copied().unwrap_or(index);
            for (_, entry) in self.entries.iter_mut() {
                entry.prev = rename(entry.prev);
                entry.next = rename(entry.next);
            }
            for level in &mut self.levels {
                level.lists_mut().for_each(|list| list.rename(rename));
            }
            self.due.rename(rename);
        }
        self.shrink_to_fit();
        #[cfg(test)]
        self.assert_invariants();
        moved
    }

    /// Stores `value` to expire at `deadline`. Unlike
    /// [`try_insert`](Wheel::try_insert), a deadline at or before `elapsed`
    /// is kept too: it goes to the due list, and the next `pop_expired`
    /// hands it out (after the entries already due).
    pub(crate) fn insert(&mut self, deadline: u64, value: T) -> Key {
        let generation = self.next_generation;
        debug_assert!(generation < self.generations);
        // No overflow: `generation < generations <= u32::MAX`.
        self.next_generation = match generation + 1 {
            next if next == self.generations => 0,
            next => next,
        };
        let index = u32::try_from(self.entries.vacant_key())
            .ok()
            .filter(|&i| i != NIL)
            .expect("a wheel holds at most u32::MAX - 1 entries");
        // Linked before it exists, so the entry is written once, complete:
        // `enlist` only touches the list and the old tail. Nothing between
        // here and the slab insert can fail (short of aborting on OOM).
        let (place, prev) = self.enlist(index, deadline);
        let at = self.entries.insert(Entry {
            deadline,
            prev,
            next: NIL,
            generation,
            place,
            value,
        });
        debug_assert_eq!(at, index as usize);
        Key { index, generation }
    }

    /// Moves a current entry to `deadline`; one at or before `elapsed` goes
    /// to the due list, as with [`insert`](Wheel::insert). `None` if the key
    /// is stale.
    pub(crate) fn reschedule(&mut self, key: Key, deadline: u64) -> Option<()> {
        let entry = self.entry(key)?;
        let (place, prev, next) = (entry.place, entry.prev, entry.next);
        self.delist(key.index, place, prev, next);
        self.link(key.index, deadline);
        Some(())
    }

    /// The entry's value, if the key is current.
    pub(crate) fn value(&self, key: Key) -> Option<&T> {
        self.entry(key).map(|entry| &entry.value)
    }

    /// Drops every entry. `elapsed` stays (time does not go back) and so
    /// does the generation counter, so every key handed out so far is stale.
    pub(crate) fn clear(&mut self) {
        self.entries.clear();
        let slots = 1 << self.bits;
        self.levels.clear();
        self.levels.push(Level::new(slots));
        self.occupied_levels = 0;
        self.due = List::EMPTY;
        self.scheduled = 0;
        self.discarded.clear();
    }

    /// The scheduled entry `pop_expired` hands out first once its tick has
    /// come: the head of the due list, or else the earliest deadline in the
    /// next occupied slot (the lowest occupied level holds the earliest
    /// deadlines; among equal deadlines, the first in the slot). O(entries in
    /// that slot).
    pub(crate) fn peek(&self) -> Option<Key> {
        debug_assert!(
            self.discarded.is_empty(),
            "peek would walk discarded entries"
        );
        let index = match self.due.head() {
            Some(index) => index,
            None => {
                let (level, slot) = self.next_slot()?;
                let list = self.levels[level].slot(slot);
                let mut best = list.head()?;
                let mut at = self.entries[best as usize].next;
                while at != NIL {
                    let entry = &self.entries[at as usize];
                    if entry.deadline < self.entries[best as usize].deadline {
                        best = at;
                    }
                    at = entry.next;
                }
                debug_assert_eq!(
                    slot_for(self.entries[best as usize].deadline, level, self.bits),
                    slot
                );
                best
            }
        };
        Some(Key {
            index,
            generation: self.entries[index as usize].generation,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(wheel: &mut Wheel<u64>, now: u64) -> Vec<u64> {
        let mut out = Vec::new();
        while let Some(key) = wheel.pop_expired(now) {
            out.push(wheel.remove(key).unwrap());
        }
        wheel.assert_invariants();
        out
    }

    #[test]
    fn an_insert_into_the_past_is_kept_and_due_at_once() {
        let mut wheel = Wheel::new(64);
        drain(&mut wheel, 100);
        let past = wheel.insert(3, 1);
        let now = wheel.insert(100, 2);
        wheel.insert(101, 3);
        wheel.assert_invariants();
        assert_eq!(wheel.scheduled(), 3);
        assert_eq!(wheel.peek(), Some(past));
        assert_eq!(wheel.next_expiration(), Some(100));
        assert_eq!(wheel.remove(now), Some(2));
        assert_eq!(drain(&mut wheel, 100), vec![1]);
        assert_eq!(drain(&mut wheel, 101), vec![3]);
    }

    #[test]
    fn compact_moves_entries_down_and_keeps_every_list_in_order() {
        let mut wheel = Wheel::new(4);
        drain(&mut wheel, 50);
        // Slots 0..8 in the slab: due-list entries (inserted into the past),
        // entries of one slot, and one on a higher level.
        let keys: Vec<Key> = [10, 20, 60, 60, 60, 30, 5000, 60]
            .into_iter()
            .enumerate()
            .map(|(value, deadline)| wheel.insert(deadline, value as u64))
            .collect();
        for &hole in &[0, 2, 3] {
            wheel.remove(keys[hole]);
        }
        let moved = wheel.compact();
        wheel.assert_invariants();
        // The top three filled the three holes.
        let mut moved_indices: Vec<(u32, u32)> =
            moved.iter().map(|&(from, to)| (from.index, to)).collect();
        moved_indices.sort_unstable();
        assert_eq!(moved_indices, vec![(5, 3), (6, 2), (7, 0)]);
        assert_eq!((wheel.capacity(), wheel.len()), (5, 5));
        for (from, _) in &moved {
            assert_eq!(wheel.value(*from), None, "a moved entry's old key is stale");
        }
        let renamed = |key: Key| {
            moved
                .iter()
                .find(|(from, _)| *from == key)
                .map_or(key, |&(from, to)| Key {
                    index: to,
                    generation: from.generation,
                })
        };
        assert_eq!(wheel.value(renamed(keys[7])), Some(&7));
        // The due list (values 1 and 5, in the order inserted), then the slot
        // at 60 (4 and 7), then the far one.
        assert_eq!(drain(&mut wheel, 50), vec![1, 5]);
        assert_eq!(drain(&mut wheel, 60), vec![4, 7]);
        assert_eq!(wheel.reschedule(renamed(keys[6]), 70), Some(()));
        assert_eq!(drain(&mut wheel, 70), vec![6]);
        assert_eq!(wheel.len(), 0);
    }

    #[test]
    fn reschedule_moves_either_way_and_refuses_stale_keys() {
        let mut wheel = Wheel::new(4);
        drain(&mut wheel, 50);
        let a = wheel.insert(1000, 1);
        let b = wheel.insert(60, 2);
        assert_eq!(wheel.reschedule(a, 10), Some(()));
        assert_eq!(wheel.reschedule(b, 5000), Some(()));
        wheel.assert_invariants();
        assert_eq!(wheel.peek(), Some(a));
        assert_eq!(drain(&mut wheel, 50), vec![1]);
        assert_eq!(wheel.reschedule(a, 70), None);
        assert_eq!(wheel.peek(), Some(b));
        assert_eq!(drain(&mut wheel, 4999), Vec::<u64>::new());
        assert_eq!(drain(&mut wheel, 5000), vec![2]);
    }

    #[test]
    fn peek_finds_the_earliest_deadline_inside_a_coarse_slot() {
        let mut wheel = Wheel::new(64);
        // All in level 1's slot 1 (ticks 64..128), in no particular order.
        let keys: Vec<_> = [120, 100, 90, 100]
            .iter()
            .map(|&d| wheel.insert(d, d))
            .collect();
        assert_eq!(wheel.peek(), Some(keys[2]));
        wheel.remove(keys[2]);
        assert_eq!(wheel.peek(), Some(keys[1]), "first of equal deadlines");
        assert_eq!(drain(&mut wheel, 100), vec![100, 100]);
        assert_eq!(wheel.peek(), Some(keys[0]));
        drain(&mut wheel, 200);
        assert_eq!(wheel.peek(), None);
    }

    #[test]
    fn clear_makes_every_old_key_stale() {
        let mut wheel = Wheel::new(64);
        drain(&mut wheel, 7);
        let old: Vec<_> = (0..100).map(|i| wheel.insert(8 + i * 1000, i)).collect();
        wheel.clear();
        wheel.assert_invariants();
        assert_eq!((wheel.len(), wheel.scheduled(), wheel.levels()), (0, 0, 1));
        let new = wheel.insert(9, 42);
        assert_eq!(new.index, old[0].index, "the slab slot is reused");
        assert!(old.iter().all(|&k| wheel.value(k).is_none()));
        assert_eq!(wheel.remove(old[0]), None);
        assert_eq!(drain(&mut wheel, 9), vec![42]);
    }

    #[test]
    fn shrink_to_fit_keeps_live_keys_and_drops_empty_levels() {
        let mut wheel = Wheel::with_capacity(64, 1000);
        assert!(wheel.capacity() >= 1000);
        let keys: Vec<_> = (0..1000).map(|i| wheel.insert(1 + i, i)).collect();
        let far = wheel.insert(u64::MAX, 7);
        let levels = wheel.levels();
        for &key in &keys[1..] {
            wheel.remove(key);
        }
        wheel.remove(far);
        wheel.shrink_to_fit();
        wheel.assert_invariants();
        assert!(wheel.levels() < levels);
        assert!(wheel.capacity() < 1000);
        assert_eq!(wheel.value(keys[0]), Some(&0));
        wheel.insert(u64::MAX - 1, 8);
        wheel.assert_invariants();
        assert_eq!(drain(&mut wheel, 1), vec![0]);
    }
}
