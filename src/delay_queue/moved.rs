//! The keys of entries that [`DelayQueue::compact`](super::DelayQueue::compact)
//! moved.
//!
//! A key is an index into the queue's slab plus a generation. Compacting
//! moves entries from the top of the slab into its free slots below, so the
//! keys handed out for those entries no longer name them; the queue cannot
//! change keys its user holds (and keeps in maps). So it keeps both
//! directions here: a key handed out to the index its entry has now (every
//! operation on a key asks), and back (what `poll_expired` and `peek` hand
//! out). An entry is forgotten when it leaves the queue. Until a compaction
//! moves something this is empty, and each lookup costs one `is_empty`.
//!
//! Generations come from a queue-wide counter, so a key handed out never
//! equals another live entry's, moved or not: a new entry that lands on
//! the index a moved entry's key still carries has another generation.

use std::collections::HashMap;

use crate::wheel::Key;

#[derive(Default)]
pub(super) struct Moved {
    /// A key handed out, to the index its entry has now.
    to: HashMap<Key, u32>,
    /// A moved entry's index, to the index in the key handed out for it.
    from: HashMap<u32, u32>,
}

impl Moved {
    /// The wheel's key for the entry of a key handed out.
    #[inline]
    pub(super) fn inside(&self, key: Key) -> Key {
        if self.to.is_empty() {
            return key;
        }
        self.to.get(&key).map_or(key, |&index| Key {
            index,
            generation: key.generation,
        })
    }

    /// The key handed out for the entry the wheel names `key`.
    #[inline]
    pub(super) fn outside(&self, key: Key) -> Key {
        if self.from.is_empty() {
            return key;
        }
        self.from.get(&key.index).map_or(key, |&index| Key {
            index,
            generation: key.generation,
        })
    }

    /// [`outside`](Moved::outside), for an entry leaving the queue: it is
    /// forgotten.
    #[inline]
    pub(super) fn leave(&mut self, key: Key) -> Key {
        if self.from.is_empty() {
            return key;
        }
        let Some(index) = self.from.remove(&key.index) else {
            return key;
        };
        let handed_out = Key {
            index,
            generation: key.generation,
        };
        // The maps keep their room, as the slab does, until `shrink_to_fit`:
        // freeing them with the last moved entry freed megabytes in one
        // removal.
        self.to.remove(&handed_out);
        handed_out
    }

    /// Notes a compaction's moves: each entry's key before it, and its
    /// index after. An entry may move again, and keeps the key first
    /// handed out.
    pub(super) fn record(&mut self, moves: Vec<(Key, u32)>) {
        // A move's source was live and its destination free, so no
        // destination is a later move's source.
        for (before, after) in moves {
            let handed_out = Key {
                index: self.from.remove(&before.index).unwrap_or(before.index),
                generation: before.generation,
            };
            self.to.insert(handed_out, after);
            self.from.insert(after, handed_out.index);
        }
    }

    /// Gives back the room of moved entries gone (`shrink_to_fit`,
    /// `compact`).
    pub(super) fn shrink_to_fit(&mut self) {
        self.to.shrink_to_fit();
        self.from.shrink_to_fit();
    }

    /// Every entry left the queue.
    pub(super) fn clear(&mut self) {
        *self = Moved::default();
    }

    /// How many moved entries are still in the queue.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        debug_assert_eq!(self.to.len(), self.from.len());
        self.to.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(index: u32, generation: u32) -> Key {
        Key { index, generation }
    }

    #[test]
    fn a_key_follows_its_entry_through_two_moves_and_is_forgotten_when_it_leaves() {
        let mut moved = Moved::default();
        moved.record(vec![(key(9, 1), 2), (key(8, 5), 0)]);
        moved.record(vec![(key(2, 1), 1)]);
        assert_eq!(moved.len(), 2);
        // Handed out as (9, 1): now at 1.
        assert_eq!(moved.inside(key(9, 1)), key(1, 1));
        assert_eq!(moved.outside(key(1, 1)), key(9, 1));
        // Never moved: as handed out, both ways.
        assert_eq!(moved.inside(key(3, 7)), key(3, 7));
        assert_eq!(moved.outside(key(3, 7)), key(3, 7));
        // A newer entry on a moved one's old index has another generation.
        assert_eq!(moved.inside(key(9, 6)), key(9, 6));
        assert_eq!(moved.leave(key(1, 1)), key(9, 1));
        assert_eq!(moved.inside(key(9, 1)), key(9, 1), "forgotten");
        assert_eq!(moved.leave(key(0, 5)), key(8, 5));
        assert_eq!(moved.len(), 0);
        // The room stays until `shrink_to_fit` (see `leave`).
        assert!(moved.to.capacity() > 0 && moved.from.capacity() > 0);
        moved.shrink_to_fit();
        assert_eq!((moved.to.capacity(), moved.from.capacity()), (0, 0));
    }

    /// Once the generations wrap, the wheel may hand out for a new entry
    /// the very key a compacted entry, still in the queue, was handed out
    /// with (its old slot, its generation): the new key must not name the
    /// moved entry. Eight generations here, 2^32 - 1 in a queue.
    #[test]
    fn a_new_key_never_names_an_entry_compact_moved() {
        let timer = crate::Timer::builder().manual().build().unwrap();
        let mut queue = super::super::DelayQueue::with_timer(timer);
        queue.wheel.limit_generations(3);
        let second = std::time::Duration::from_secs(1);
        let gone = queue.insert(0, second);
        let kept = queue.insert(1, second);
        queue.remove(&gone);
        queue.compact();
        for value in 2..40 {
            let new = queue.insert(value, second);
            assert_ne!(new, kept, "a live entry's key handed out again");
            assert_eq!(queue.remove(&new).into_inner(), value);
        }
        assert_eq!(queue.remove(&kept).into_inner(), 1);
    }
}
