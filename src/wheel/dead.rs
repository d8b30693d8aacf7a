//! Cancelling without unlinking: dead entries, and the sweep that frees them.
//!
//! # Why
//!
//! Removing an entry from the middle of a slot's list rewrites its two
//! neighbours' links. With many timers pending those neighbours were written
//! long before, by other timers, and are cold: measured on a million pending
//! sleeps dropped in order, the two neighbour writes were half the cost of a
//! cancel (59 ns with them, 28 without). Most timers are cancelled (a
//! timeout per request, dropped when the response comes), so the driver
//! cancels a `Sleep`'s entry with [`Wheel::cancel`]: the value is taken, the
//! entry stays linked, marked [`Place::Dead`], and nothing else is touched.
//! (Netty's `HashedWheelTimer` defers a cancelled timeout's removal to its
//! worker's next tick in the same spirit.)
//!
//! # Who frees a dead entry
//!
//! - The wheel, when it processes the entry's slot (`process_slot`): every
//!   entry of that slot is visited anyway, and a dead one is freed instead of
//!   moved on. A dead entry is never handed out by `pop_expired`.
//! - A sweep ([`Wheel::sweep`]): it rebuilds every level's lists from the
//!   slab in index order, a sequential walk, leaving the dead entries out
//!   and freeing them. Walking the slab costs O(capacity), so a sweep runs
//!   only when it frees enough to pay for that:
//!   - after a cancel, once at least [`DEAD_FLOOR`] entries and at least
//!     half the slab's capacity are dead;
//!   - before an insert that would grow a full slab, if at least
//!     [`DEAD_FLOOR`] entries and a quarter of it are dead (the sweep makes
//!     room instead);
//!   - whenever the last scheduled entry goes (cancelled, removed or
//!     handed out): then every entry left is dead, and the sweep empties
//!     the wheel, so a wheel with nothing pending holds no entries, and
//!     is trimmed as an empty one (see `memory.rs`).
//!
//! An entry last in its slot is removed at once instead: only the entry
//! before it is written, and its slab slot is reused by the next insert.
//! That is the timer dropped soon after it was made (a timeout whose
//! response came), and the one a loop creates and drops.
//!
//! # What it costs and guarantees
//!
//! A sweep frees at least a quarter of the slab capacity it walks (and at
//! least [`DEAD_FLOOR`] entries, against a walk of the levels' occupied
//! slots), or empties a wheel with nothing else in it, so every cancel pays
//! O(1) amortised. Dead entries never outnumber the larger of
//! [`DEAD_FLOOR`] and half the slab's capacity, and a full slab with a
//! quarter of it dead is swept rather than grown, so they cost little
//! memory the slab would not hold for live entries. They are not counted as
//! scheduled; [`Wheel::dead`] counts them. A dead entry's key is stale at once: lookups
//! skip dead entries, so a key that outlives its cancel finds nothing, just
//! as after a removal.
//!
//! A sweep relinks each slot's live entries in slab order rather than the
//! order they were linked in, so entries due at the same tick may then be
//! handed out in another order. Nothing depends on that order (the driver
//! wakes a batch at once); a `DelayQueue` never cancels, so its order stays.

use super::entry::{Place, NIL};
use super::{Key, Wheel};

/// Dead entries a wheel may hold before a sweep: below this, a sweep would
/// walk more than it frees. 256 entries are 10 KiB.
pub(crate) const DEAD_FLOOR: usize = 256;

impl<T: Default> Wheel<T> {
    /// Cancels the entry: takes its value, and leaves it linked and dead if
    /// it is in a level with entries after it (see the module docs), or
    /// removes it outright if it is last in its slot, due or unlinked.
    /// `None` if the key is stale; the key is stale afterwards.
    pub fn cancel(&mut self, key: Key) -> Option<T> {
        let entry = self.entry_mut(key)?;
        let Place::Level { level, slot } = entry.place else {
            return self.remove(key);
        };
        if entry.next == NIL {
            // Last in its slot, as a timer dropped soon after it was made
            // is: unlinking touches at most the entry before it, and the
            // slab slot is reused at once, so a timer created and dropped in
            // a loop stays in one warm entry. Left dead instead, it would
            // take a fresh slab slot each time, and with many timers
            // pending, fresh memory (churn among ten million pending timers
            // measured 1.5 times slower).
            return self.remove(key);
        }
        entry.place = Place::Dead { level, slot };
        let value = std::mem::take(&mut entry.value);
        self.scheduled -= 1;
        self.dead += 1;
        // A removal as far as trimming is concerned (a trim frees the dead).
        self.note_removal();
        if self.dead >= DEAD_FLOOR && self.dead >= self.entries.capacity() / 2 {
            self.sweep();
        } else {
            self.sweep_if_only_dead();
        }
        Some(value)
    }
}

impl<T> Wheel<T> {
    /// Entries cancelled by [`cancel`](Wheel::cancel) and not yet freed.
    pub fn dead(&self) -> usize {
        self.dead
    }

    /// Frees the dead entries once nothing is scheduled, so that a wheel
    /// with nothing pending holds no entries (and is trimmed as an empty
    /// one). Called wherever `scheduled` falls.
    #[inline]
    pub(super) fn sweep_if_only_dead(&mut self) {
        if self.scheduled == 0 && self.dead > 0 {
            self.sweep();
        }
    }

    /// Whether an insert should sweep first: the slab is full, so it would
    /// grow, and a quarter of it is dead, so a sweep makes room instead.
    #[inline]
    pub(super) fn should_sweep_before_insert(&self) -> bool {
        self.dead >= DEAD_FLOOR
            && self.entries.len() == self.entries.capacity()
            && self.dead >= self.entries.capacity() / 4
    }

    /// Frees every dead entry: rebuilds each level's lists from the slab in
    /// index order without them. Due and unlinked entries are left as they
    /// are. O(slab capacity). Each was counted as a removal when it was
    /// cancelled, so this does not count them again.
    #[cold]
    #[inline(never)]
    pub(super) fn sweep(&mut self) {
        for level in &mut self.levels {
            level.clear();
        }
        self.occupied_levels = 0;
        #[cfg(test)]
        {
            self.sweeps += 1;
        }
        if self.dead == self.entries.len() {
            // Nothing but dead entries: no list to rebuild, no free list to
            // thread through them one by one.
            self.entries.clear();
            self.dead = 0;
            return;
        }
        let mut freed = 0;
        for index in 0..self.entries.capacity() {
            let Some(entry) = self.entries.get(index) else {
                continue;
            };
            match entry.place {
                Place::Dead { .. } => {
                    self.entries.remove(index);
                    freed += 1;
                }
                Place::Level { level, slot } => {
                    let (level, slot) = (usize::from(level), usize::from(slot));
                    let lvl = &mut self.levels[level];
                    lvl.set_occupied(slot);
                    let prev = lvl
                        .slot_mut(slot)
                        .link_back(&mut self.entries, index as u32);
                    self.occupied_levels |= 1 << level;
                    let entry = &mut self.entries[index];
                    entry.prev = prev;
                    entry.next = NIL;
                }
                Place::Due | Place::Unlinked => {}
            }
        }
        debug_assert_eq!(freed, self.dead, "dead entries miscounted");
        self.dead = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::super::memory::TRIM_FLOOR;
    use super::*;

    /// Pops and frees everything due by `now`: (deadline, value) pairs.
    fn drain(wheel: &mut Wheel<u64>, now: u64) -> Vec<u64> {
        let mut out = Vec::new();
        while let Some(value) = wheel.pop_expired_value(now) {
            out.push(value);
        }
        wheel.assert_invariants();
        out
    }

    #[test]
    fn a_cancelled_entry_sharing_its_slot_stays_dead_and_never_fires() {
        let mut wheel = Wheel::new(64);
        let a = wheel.insert(100, 1);
        let _b = wheel.insert(100, 2);
        let _c = wheel.insert(100, 3);
        assert_eq!(wheel.cancel(a), Some(1));
        assert_eq!((wheel.dead(), wheel.scheduled(), wheel.len()), (1, 2, 3));
        wheel.assert_invariants();
        // Its key is stale at once, though the entry is still in the slab.
        assert_eq!(wheel.value_mut(a), None);
        assert_eq!(wheel.reset(a, 200), None);
        assert_eq!(wheel.remove(a), None);
        assert_eq!(wheel.cancel(a), None);
        // Processing its slot frees it; only the live ones fire.
        assert!(drain(&mut wheel, 99).is_empty());
        assert_eq!(drain(&mut wheel, 100), vec![2, 3]);
        assert_eq!((wheel.dead(), wheel.len()), (0, 0));
        assert_eq!(wheel.sweeps, 0, "freed by its slot, not by a sweep");
    }

    #[test]
    fn an_entry_alone_in_its_slot_is_removed_at_once() {
        let mut wheel = Wheel::new(64);
        let _far = wheel.insert(5_000, 0);
        let a = wheel.insert(100, 1);
        assert_eq!(wheel.cancel(a), Some(1));
        assert_eq!((wheel.dead(), wheel.len()), (0, 1));
        // The same slab slot is reused.
        assert_eq!(wheel.insert(100, 2).index, a.index);
        wheel.assert_invariants();
    }

    #[test]
    fn due_and_fired_entries_are_removed_not_left_dead() {
        let mut wheel = Wheel::new(64);
        let _keep = wheel.insert(1_000, 0);
        let due = wheel.insert(5, 1);
        let due_too = wheel.insert(5, 2);
        let fired = wheel.insert(3, 3);
        assert_eq!(wheel.pop_expired(4), Some(fired));
        assert_eq!(wheel.cancel(fired), Some(3));
        // Both of tick 5 go to the due list when their slot is processed.
        assert_eq!(wheel.pop_expired(5), Some(due));
        assert_eq!(wheel.cancel(due_too), Some(2));
        assert_eq!(wheel.cancel(due), Some(1));
        assert_eq!((wheel.dead(), wheel.len()), (0, 1));
        wheel.assert_invariants();
    }

    #[test]
    fn once_nothing_is_scheduled_no_dead_entry_is_kept() {
        // The last live entry fires: the dead one beside it is swept.
        let mut wheel = Wheel::new(64);
        let a = wheel.insert(100, 1);
        let _b = wheel.insert(100, 2);
        let _far = wheel.insert(100_000, 3);
        wheel.cancel(a);
        assert_eq!(drain(&mut wheel, 100), vec![2]);
        assert_eq!(wheel.len(), 1);
        let mut wheel = Wheel::new(64);
        let a = wheel.insert(100, 1);
        let b = wheel.insert(100, 2);
        wheel.cancel(a);
        assert_eq!(wheel.dead(), 1);
        // The last one removed by its owner.
        wheel.remove(b);
        assert_eq!((wheel.dead(), wheel.len(), wheel.sweeps), (0, 0, 1));
        // The last one cancelled.
        let a = wheel.insert(100, 1);
        let b = wheel.insert(100, 2);
        wheel.cancel(a);
        wheel.cancel(b);
        assert_eq!((wheel.dead(), wheel.len(), wheel.sweeps), (0, 0, 2));
        wheel.assert_invariants();
    }

    #[test]
    fn dead_entries_never_pass_half_the_slab_and_a_sweep_keeps_the_live_ones() {
        let n = 4 * DEAD_FLOOR as u64;
        let mut wheel = Wheel::new(64);
        // Pairs of entries sharing a slot, a thousand ticks apart: one of
        // each pair is cancelled, the other lives on.
        let keys: Vec<Key> = (0..2 * n)
            .map(|i| wheel.insert(1_000 + i / 2 * 1_000, i))
            .collect();
        let capacity = wheel.allocated_entries();
        let mut most = 0;
        for pair in keys.chunks(2) {
            wheel.cancel(pair[0]);
            most = most.max(wheel.dead());
            assert!(
                wheel.dead() < DEAD_FLOOR.max(capacity / 2),
                "{} dead of {capacity}",
                wheel.dead()
            );
        }
        assert!(wheel.sweeps >= 1, "never swept");
        assert!(most >= DEAD_FLOOR - 1, "swept before the floor: {most}");
        wheel.assert_invariants();
        // Every live entry still fires at its own tick, in order.
        let mut fired = Vec::new();
        for tick in (1..=n).map(|i| i * 1_000) {
            fired.extend(drain(&mut wheel, tick));
            assert_eq!(
                fired.last(),
                Some(&(2 * (tick / 1_000 - 1) + 1)),
                "at {tick}"
            );
        }
        assert_eq!(fired.len() as u64, n);
        assert_eq!((wheel.dead(), wheel.len()), (0, 0));
    }

    #[test]
    fn an_insert_that_would_grow_a_full_slab_sweeps_instead() {
        let mut wheel = Wheel::new(64);
        let mut keys = Vec::new();
        while keys.len() < 2 * TRIM_FLOOR || wheel.len() < wheel.allocated_entries() {
            keys.push(wheel.insert(1_000, keys.len() as u64));
        }
        let capacity = wheel.allocated_entries();
        // A third dead: below half, so no sweep yet, but above a quarter.
        for &key in keys.iter().take(capacity / 3) {
            wheel.cancel(key);
        }
        assert_eq!((wheel.sweeps, wheel.dead()), (0, capacity / 3));
        wheel.insert(1_000, u64::MAX);
        assert_eq!(wheel.sweeps, 1);
        assert_eq!(wheel.allocated_entries(), capacity, "the slab grew");
        assert_eq!(wheel.len(), capacity - capacity / 3 + 1);
        wheel.assert_invariants();
    }
}
