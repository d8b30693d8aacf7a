//! The timing wheel: a synchronous, single-owner data structure.
//!
//! Nothing here knows about clocks, wakers or threads. Time is a `u64` tick
//! count chosen by the caller; values are whatever the caller stores (the
//! driver stores wakers). The driver wraps a `Wheel` in its mutex.
//!
//! # Who owns what
//!
//! Every entry lives in the slab (`slots/`). Slots and the due list hold only keys
//! (a head and a tail per list, `prev`/`next` in the entries). `pop_expired`
//! leaves an expired entry in the slab, [`Place::Unlinked`], until its owner
//! removes it: a `DelayQueue` keeps it so that the key stays valid until the
//! value is taken, the driver so that a `Sleep`'s key names its own entry
//! until the `Sleep` frees it (a callback's it removes at once). The generation in [`Key`] guards the handles that outlive their
//! entries: a lookup with a stale key finds nothing, unless a multiple of
//! 2^32 - 1 insertions came between (see `memory.rs`). The driver cancels
//! with `discard`, which marks an entry and unlinks it later with a batch
//! of others (see `discard.rs`).
//!
//! # Advancing
//!
//! `elapsed` is the last tick the wheel has processed: every entry whose
//! deadline is `<= elapsed` has been handed out or sits in the due list, and
//! every scheduled entry has a deadline `> elapsed`. [`Wheel::pop_expired`]
//! moves `elapsed` forward one non-empty slot at a time, in time order. A
//! slot of level 0 holds entries of exactly one tick, so they go to the due
//! list; a slot of a higher level is emptied when `elapsed` reaches its start
//! and each entry cascades down to the level that now fits it (or to the due
//! list if its deadline is that very tick). Empty slots are never visited:
//! the occupancy bitmaps find the next one directly.

mod discard;
mod entry;
#[cfg(test)]
mod invariants;
mod keyed;
mod level;
mod list;
mod memory;
mod slots;

pub use entry::Key;
use entry::{Entry, Place, NIL};
use level::{level_for, max_levels, slot_for, slot_start, Level};
use list::List;
#[cfg_attr(loom, allow(unused_imports))]
pub(crate) use memory::Freed;
#[cfg(test)]
use memory::TRIM_FLOOR;
use slots::Slots;

/// The smallest and largest `slots_per_level` a wheel accepts.
pub(crate) const MIN_SLOTS: usize = 2;
/// See [`MIN_SLOTS`].
pub(crate) const MAX_SLOTS: usize = 4096;
// `Place::Level` stores a slot index in a `u16`.
const _: () = assert!(MAX_SLOTS <= 1 << 16);

/// A hierarchical timing wheel over `u64` ticks.
///
/// # Geometry
///
/// With `S = 2^b` slots per level (default 64, so `b = 6`):
///
/// | level | slot spans      | one turn spans  | default 125 µs tick, S = 64 |
/// |-------|-----------------|-----------------|-----------------------------|
/// | 0     | 1 tick          | `S` ticks       | 125 µs / 8 ms               |
/// | 1     | `S` ticks       | `S^2` ticks     | 8 ms / 512 ms               |
/// | 2     | `S^2` ticks     | `S^3` ticks     | 512 ms / ~32.8 s            |
/// | 3     | `S^3` ticks     | `S^4` ticks     | ~32.8 s / ~35 min           |
/// | 4     | `S^4` ticks     | `S^5` ticks     | ~35 min / ~37.3 h           |
/// | `l`   | `S^l` ticks     | `S^(l+1)` ticks |                             |
///
/// Only level 0 exists at first; level `l` is allocated the first time an
/// entry needs it. `ceil(64 / b)` levels cover every `u64` tick (11 for
/// `S = 64`, 64 for `S = 2`), so any deadline fits; a caller clamps deadlines
/// beyond `u64::MAX` ticks to `u64::MAX`, which then never expires.
///
/// # Costs
///
/// Insert, remove and reset are O(1). Finding the next expiration is
/// O(words per level) via a per-wheel bitmap of non-empty levels and
/// per-level bitmaps of non-empty slots. Expiring `n` entries costs O(n) plus
/// at most one cascade per level per entry.
///
/// # Memory
///
/// The slab is in chunks of 1024 entries, each allocated when first used
/// and freed when it empties (one empty chunk is kept), so no single
/// insert or removal allocates or frees more than one chunk. Once the wheel
/// is empty it holds at most one chunk and one level; while entries are
/// live, it holds the chunks that have one. Entries are never moved (their
/// keys are held outside), so one long-lived entry holds its chunk until it
/// goes. Past 64 chunks the wheel frees none itself: its owner says
/// where they are freed (`free_with`). The policy and
/// its costs are in `memory.rs`.
#[derive(Debug)]
pub struct Wheel<T> {
    entries: Slots<Entry<T>>,
    levels: Vec<Level>,
    /// Bit `l` is set iff `levels[l]` has an entry.
    occupied_levels: u64,
    /// Expired entries not yet handed out, all with deadline `<= elapsed`.
    due: List,
    elapsed: u64,
    bits: u32,
    /// Entries in a slot or the due list, discarded ones included.
    scheduled: usize,
    /// Entries discarded and still linked; see `discard.rs`.
    discarded: Vec<u32>,
    /// The values of discarded entries flushed since the owner last took
    /// them ([`move_dead_into`](Wheel::move_dead_into)).
    dead: Vec<T>,
    /// Generations come from this wheel-wide counter, never from a slot, so
    /// trimming the slab's vacant tail cannot make a stale key valid again.
    next_generation: u32,
    /// How many generations there are: keys carry `0..generations`, then
    /// the counter starts again at 0. [`GENERATIONS`](discard::GENERATIONS)
    /// unless [`limit_generations`](Wheel::limit_generations) said fewer.
    generations: u32,
    /// How many slots `process_slot` has emptied; tests check idle skipping.
    #[cfg(test)]
    slots_processed: u64,
    /// Whether a reset has left an entry in a slot before its deadline's,
    /// which relaxes what `assert_invariants` can check.
    #[cfg(test)]
    lazy_resets: bool,
}

impl<T> Wheel<T> {
    /// A wheel with `slots_per_level` slots per level, at tick 0.
    ///
    /// The caller validates the geometry (`Builder` turns a bad one into a
    /// `BuildError`); here it is only asserted.
    pub fn new(slots_per_level: usize) -> Wheel<T> {
        Wheel::with_slots(slots_per_level, Slots::new(true))
    }

    /// A wheel whose slab is `entries`: one that gives memory back, or a
    /// queue's, which keeps what its owner reserved.
    fn with_slots(slots_per_level: usize, entries: Slots<Entry<T>>) -> Wheel<T> {
        assert!(
            slots_per_level.is_power_of_two() && (MIN_SLOTS..=MAX_SLOTS).contains(&slots_per_level),
            "slots_per_level must be a power of two in {MIN_SLOTS}..={MAX_SLOTS}, got {slots_per_level}"
        );
        Wheel {
            entries,
            levels: vec![Level::new(slots_per_level)],
            occupied_levels: 0,
            due: List::EMPTY,
            elapsed: 0,
            bits: slots_per_level.trailing_zeros(),
            scheduled: 0,
            discarded: Vec::new(),
            dead: Vec::new(),
            next_generation: 0,
            generations: discard::GENERATIONS,
            #[cfg(test)]
            slots_processed: 0,
            #[cfg(test)]
            lazy_resets: false,
        }
    }

    /// The last tick processed. Deadlines at or before it are already due.
    pub(crate) fn elapsed(&self) -> u64 {
        self.elapsed
    }

    /// Entries scheduled and not yet handed out by `pop_expired` (nor
    /// discarded).
    pub fn scheduled(&self) -> usize {
        self.scheduled - self.discarded.len()
    }

    /// Entries in the slab, including expired ones their owner has not freed
    /// and discarded ones not yet flushed.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Levels allocated so far.
    pub(crate) fn levels(&self) -> usize {
        self.levels.len()
    }

    /// Stores `value` to expire at `deadline`, or hands it back if `deadline`
    /// is not after `elapsed` (it is already due: the caller completes it).
    pub fn try_insert(&mut self, deadline: u64, value: T) -> Result<Key, T> {
        if deadline <= self.elapsed {
            return Err(value);
        }
        Ok(self.insert(deadline, value))
    }

    /// Removes the entry, scheduled or expired, and returns its value.
    /// `None` if the key is stale.
    pub fn remove(&mut self, key: Key) -> Option<T> {
        self.remove_scheduled(key).map(|(value, _)| value)
    }

    /// [`remove`](Wheel::remove), also saying whether the entry was still
    /// scheduled (not handed out by `pop_expired`): one lookup for both.
    #[inline]
    pub(crate) fn remove_scheduled(&mut self, key: Key) -> Option<(T, bool)> {
        let entry = self.entry(key)?;
        let (place, prev, next) = (entry.place, entry.prev, entry.next);
        let value = self.take_out(key.index, place, prev, next);
        Some((value, place != Place::Unlinked))
    }

    /// Removes the entry if it is no longer scheduled (`pop_expired` handed
    /// it out, or `reset` found it due) and returns its value, `Some(None)`
    /// if the key is stale; `None`, leaving it, if it is still scheduled.
    /// One lookup, where asking [`is_scheduled`](Wheel::is_scheduled) and
    /// then [`remove`](Wheel::remove) took two (a fired sleep's last poll).
    pub(crate) fn remove_expired(&mut self, key: Key) -> Option<Option<T>> {
        let Some(entry) = self.entry(key) else {
            return Some(None);
        };
        if entry.place != Place::Unlinked {
            return None;
        }
        // In no list, so no links to mend.
        Some(Some(self.take_out(key.index, Place::Unlinked, NIL, NIL)))
    }

    /// Unlinks entry `index`, whose place and links the caller has read,
    /// and frees it: `remove` once the key is checked.
    #[inline(always)]
    fn take_out(&mut self, index: u32, place: Place, prev: u32, next: u32) -> T {
        // The entry leaves the slab, so only its neighbours need new links.
        self.delist(index, place, prev, next);
        let value = self.entries.remove(index as usize).value;
        if !self.discarded.is_empty() && self.entries.only_marked(index as usize) {
            // Its chunk holds discarded entries only (the wheel too, maybe:
            // a sleep reset into the past): flushed now, see `discard.rs`.
            self.flush_discarded();
        } else {
            self.note_removal();
        }
        value
    }

    /// Moves the entry to `deadline`, whether it was scheduled or expired.
    ///
    /// A scheduled entry moved later stays where it is linked, and only its
    /// deadline changes: its slot is processed no later than its old
    /// deadline, which is before the new one, and processing a slot relinks
    /// each entry by its deadline (a cascade does that anyway), so the entry
    /// moves on then, never fires early, and a heartbeat pushing a deadline
    /// along many times costs one relink, not one per reset. The price is
    /// that [`next_expiration`](Wheel::next_expiration) may name that
    /// earlier slot: one more wake-up of the driver with nothing to fire.
    ///
    /// Returns `Some(true)` if it is now scheduled, `Some(false)` if
    /// `deadline <= elapsed` (it is left unlinked, i.e. expired, and the
    /// caller completes it), `None` if the key is stale.
    pub fn reset(&mut self, key: Key, deadline: u64) -> Option<bool> {
        let (elapsed, bits) = (self.elapsed, self.bits);
        let entry = self.entry_mut(key)?;
        let place = entry.place;
        let later = matches!(place, Place::Level { .. }) && deadline >= entry.deadline;
        if later || stays_in_its_slot(place, elapsed, bits, deadline) {
            entry.deadline = deadline;
            #[cfg(test)]
            {
                self.lazy_resets |= !stays_in_its_slot(place, elapsed, bits, deadline);
            }
            return Some(true);
        }
        let (prev, next) = (entry.prev, entry.next);
        Some(self.relink(key.index, place, prev, next, deadline))
    }

    /// `reset`'s slow path, out of line so the fast one above saves no
    /// registers for it: moves entry `index` (at `place` with links `prev`
    /// and `next`) to `deadline`, or leaves it unlinked if that is not after
    /// `elapsed`. Returns whether it is scheduled.
    #[inline(never)]
    fn relink(&mut self, index: u32, place: Place, prev: u32, next: u32, deadline: u64) -> bool {
        self.delist(index, place, prev, next);
        if deadline <= self.elapsed {
            let entry = &mut self.entries[index as usize];
            entry.deadline = deadline;
            entry.place = Place::Unlinked;
            entry.prev = NIL;
            entry.next = NIL;
            return false;
        }
        self.link(index, deadline);
        true
    }

    /// The entry's value, if the key is current.
    pub(crate) fn value_mut(&mut self, key: Key) -> Option<&mut T> {
        self.entry_mut(key).map(|entry| &mut entry.value)
    }

    /// Whether the entry is still waiting for its deadline (`Some(false)`
    /// once `pop_expired` has handed it out or `reset` found it due).
    pub(crate) fn is_scheduled(&self, key: Key) -> Option<bool> {
        self.entry(key).map(|entry| entry.place != Place::Unlinked)
    }

    /// The earliest deadline of a scheduled entry: O(entries), for the
    /// loom models.
    #[cfg(all(test, loom))]
    pub(crate) fn earliest_deadline(&self) -> Option<u64> {
        self.entries
            .iter()
            .filter(|(_, entry)| entry.place != Place::Unlinked)
            .filter(|(index, _)| !self.discarded.contains(&(*index as u32)))
            .map(|(_, entry)| entry.deadline)
            .min()
    }

    /// The entry's deadline in ticks.
    #[cfg(test)]
    pub(crate) fn deadline(&self, key: Key) -> Option<u64> {
        self.entry(key).map(|entry| entry.deadline)
    }

    /// Takes the values of all scheduled entries, for shutdown. An entry
    /// whose value `keep` accepts stays where it is, holding a default, so
    /// its key still finds it (a `Sleep` told of the shutdown when it next
    /// polls); every other is freed. O(entries).
    pub(crate) fn take_scheduled_values(&mut self, keep: impl Fn(&T) -> bool) -> Vec<T>
    where
        T: Default,
    {
        self.flush_discarded();
        let mut values = Vec::new();
        let mut freed = Vec::new();
        for (index, entry) in self.entries.iter_mut() {
            if entry.place == Place::Unlinked {
                continue;
            }
            if keep(&entry.value) {
                values.push(std::mem::take(&mut entry.value));
            } else {
                freed.push(Key {
                    index: index as u32,
                    generation: entry.generation,
                });
            }
        }
        values.extend(freed.into_iter().filter_map(|key| self.remove(key)));
        values
    }

    /// The earliest tick at which `pop_expired` has work: an entry's deadline,
    /// or the start of a higher-level slot whose entries must cascade.
    /// `None` when nothing is scheduled. Discarded entries not yet flushed
    /// still hold their slots, so it may name one of theirs: a look too
    /// early, never one too late.
    pub fn next_expiration(&self) -> Option<u64> {
        if !self.due.is_empty() {
            return Some(self.elapsed);
        }
        // Entries at a lower level all expire before the next slot of any
        // higher level starts, so the lowest non-empty level decides.
        let (level, slot) = self.next_slot()?;
        Some(slot_start(self.elapsed, level, slot, self.bits))
    }

    /// Hands out the next entry whose deadline is `<= now`, in deadline
    /// order, unlinking it (it stays in the slab, [`Place::Unlinked`]).
    /// When none is left, moves `elapsed` to `now` and returns `None`.
    pub fn pop_expired(&mut self, now: u64) -> Option<Key> {
        self.pop_expired_with(now, |_| ()).map(|(key, ())| key)
    }

    /// [`pop_expired`](Wheel::pop_expired), also handing out what `take`
    /// makes of the entry's value, from the same lookup (the driver takes a
    /// sleep's waker out this way).
    pub(crate) fn pop_expired_with<R>(
        &mut self,
        now: u64,
        mut take: impl FnMut(&mut T) -> R,
    ) -> Option<(Key, R)> {
        if !self.discarded.is_empty() {
            self.flush_discarded();
        }
        loop {
            if let Some((index, generation, taken)) =
                self.due.pop_front(&mut self.entries, &mut take)
            {
                self.scheduled -= 1;
                debug_assert!({
                    let deadline = self.entries[index as usize].deadline;
                    deadline <= self.elapsed && deadline <= now
                });
                return Some((Key { index, generation }, taken));
            }
            match self.next_slot() {
                Some((level, slot)) if slot_start(self.elapsed, level, slot, self.bits) <= now => {
                    self.process_slot(level, slot);
                }
                _ => {
                    self.elapsed = self.elapsed.max(now);
                    return None;
                }
            }
        }
    }

    /// The lowest non-empty level and its first non-empty slot.
    fn next_slot(&self) -> Option<(usize, usize)> {
        if self.occupied_levels == 0 {
            return None;
        }
        let level = self.occupied_levels.trailing_zeros() as usize;
        let from = slot_for(self.elapsed, level, self.bits);
        let slot = self.levels[level].next_occupied(from);
        debug_assert!(
            slot.is_some() && !self.levels[level].occupied_before(from),
            "level {level} is marked occupied but has no slot at or after {from} (elapsed {:#b})",
            self.elapsed
        );
        slot.map(|slot| (level, slot))
    }

    /// Advances `elapsed` to the start of `slot` and empties it: due entries
    /// go to the due list, the rest cascade to lower levels.
    fn process_slot(&mut self, level: usize, slot: usize) {
        let start = slot_start(self.elapsed, level, slot, self.bits);
        debug_assert!(
            start >= self.elapsed,
            "slot start {start} is behind elapsed {}",
            self.elapsed
        );
        self.elapsed = start;
        #[cfg(test)]
        {
            self.slots_processed += 1;
        }
        let lvl = &mut self.levels[level];
        let list = lvl.slot_mut(slot).take();
        if lvl.clear_occupied(slot) {
            self.occupied_levels &= !(1 << level);
        }
        if level == 0 {
            self.make_due(list, start);
            return;
        }
        // The slot's list is detached whole, so each entry is simply linked
        // anew; its old links are read before `link` overwrites them.
        let mut at = list.head();
        while let Some(index) = at {
            let entry = &self.entries[index as usize];
            at = Some(entry.next).filter(|&next| next != NIL);
            let deadline = entry.deadline;
            // Still counted in `scheduled`; `link` counts it again.
            self.scheduled -= 1;
            self.link(index, deadline);
        }
    }

    /// Makes the list of a level-0 slot starting at `start`, just taken out
    /// and now `elapsed`, the due list, whole: its entries are due at that
    /// very tick, so each only changes its place. The exception is one a
    /// later reset left there (see [`reset`](Wheel::reset)): it is linked
    /// again by its deadline. (A slot is processed only once the due list
    /// is empty.) Saves a fire two slab lookups, the old tail's and the
    /// entry's own.
    fn make_due(&mut self, list: List, start: u64) {
        debug_assert!(
            self.due.is_empty(),
            "a slot processed before the due list emptied"
        );
        let mut at = list.head();
        self.due = list;
        while let Some(index) = at {
            let entry = &mut self.entries[index as usize];
            at = Some(entry.next).filter(|&next| next != NIL);
            if entry.deadline <= start {
                entry.place = Place::Due;
            } else {
                let (prev, next, deadline) = (entry.prev, entry.next, entry.deadline);
                self.due.detach(&mut self.entries, index, prev, next);
                // Still counted in `scheduled`; `link` counts it again.
                self.scheduled -= 1;
                self.link(index, deadline);
            }
        }
    }

    /// Puts entry `index`, which is in no list (never linked, handed out,
    /// or just delisted), where `deadline` belongs relative to `elapsed`,
    /// overwriting its deadline, place and links.
    #[inline]
    fn link(&mut self, index: u32, deadline: u64) {
        let (place, prev) = self.enlist(index, deadline);
        let entry = &mut self.entries[index as usize];
        entry.deadline = deadline;
        entry.place = place;
        entry.prev = prev;
        entry.next = NIL;
    }

    /// Appends `index` to the list `deadline` belongs in (the due list if it
    /// is not after `elapsed`) and counts it as scheduled. Returns the
    /// entry's new place and `prev` link (its `next` is [`NIL`]) without
    /// touching the entry, so `insert` can call it before the entry is in
    /// the slab and write the entry once.
    #[inline(always)]
    fn enlist(&mut self, index: u32, deadline: u64) -> (Place, u32) {
        self.scheduled += 1;
        if deadline <= self.elapsed {
            return (Place::Due, self.due.link_back(&mut self.entries, index));
        }
        let level = level_for(self.elapsed, deadline, self.bits);
        debug_assert!(level < max_levels(self.bits));
        if level >= self.levels.len() {
            self.add_levels(level);
        }
        let slot = slot_for(deadline, level, self.bits);
        debug_assert!(
            slot >= slot_for(self.elapsed, level, self.bits),
            "deadline {deadline:#b} maps behind elapsed {:#b} at level {level}",
            self.elapsed
        );
        let lvl = &mut self.levels[level];
        lvl.set_occupied(slot);
        let prev = lvl.slot_mut(slot).link_back(&mut self.entries, index);
        self.occupied_levels |= 1 << level;
        let place = Place::Level {
            level: level as u8,
            slot: slot as u16,
        };
        (place, prev)
    }

    /// Allocates levels up to `level`: rare (at most `max_levels` times in a
    /// wheel's life, plus after trims), so kept out of `enlist`.
    #[cold]
    #[inline(never)]
    fn add_levels(&mut self, level: usize) {
        while self.levels.len() <= level {
            self.levels.push(Level::new(1 << self.bits));
        }
    }

    /// Takes entry `index`, whose place and links are given, out of its list
    /// (a no-op if it is unlinked) and uncounts it. The entry itself is not
    /// written: the caller removes it or links it anew.
    #[inline(always)]
    fn delist(&mut self, index: u32, place: Place, prev: u32, next: u32) {
        match place {
            Place::Unlinked => return,
            Place::Due => self.due.detach(&mut self.entries, index, prev, next),
            Place::Level { level, slot } => {
                let lvl = &mut self.levels[usize::from(level)];
                let list = lvl.slot_mut(usize::from(slot));
                list.detach(&mut self.entries, index, prev, next);
                if list.is_empty() && lvl.clear_occupied(usize::from(slot)) {
                    self.occupied_levels &= !(1 << level);
                }
            }
        }
        self.scheduled -= 1;
    }

    /// The entry `key` names, if the key is current.
    #[inline]
    fn entry(&self, key: Key) -> Option<&Entry<T>> {
        self.entries
            .get(key.index as usize)
            .filter(|entry| entry.generation == key.generation)
    }

    /// See [`entry`](Wheel::entry).
    #[inline]
    fn entry_mut(&mut self, key: Key) -> Option<&mut Entry<T>> {
        self.entries
            .get_mut(key.index as usize)
            .filter(|entry| entry.generation == key.generation)
    }
}

/// Whether an entry at `place` would be linked into the very same slot with
/// `deadline` (only an entry in a level can stay).
#[inline]
fn stays_in_its_slot(place: Place, elapsed: u64, bits: u32, deadline: u64) -> bool {
    let Place::Level { level, slot } = place else {
        return false;
    };
    let level = usize::from(level);
    deadline > elapsed
        && level_for(elapsed, deadline, bits) == level
        && slot_for(deadline, level, bits) == usize::from(slot)
}

#[cfg(test)]
mod tests;
