//! Doubly linked lists threaded through the slab by key.
//!
//! A slot holds only a head and a tail; the links live in the entries. This
//! keeps a slot at 8 bytes and makes unlinking any entry O(1).

use super::slots::Slots;

use super::entry::{Entry, Place, NIL};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct List {
    head: u32,
    tail: u32,
}

impl Default for List {
    fn default() -> Self {
        List::EMPTY
    }
}

impl List {
    pub(super) const EMPTY: List = List {
        head: NIL,
        tail: NIL,
    };

    pub(super) fn is_empty(&self) -> bool {
        self.head == NIL
    }

    /// The first entry, if any.
    pub(super) fn head(&self) -> Option<u32> {
        (self.head != NIL).then_some(self.head)
    }

    /// Makes `key` the tail, pointing the old tail's `next` at it, and
    /// returns the old tail: the caller stores it as the entry's `prev`, with
    /// `next` = [`NIL`]. The entry itself is not touched, so it may be one
    /// that is about to be put in the slab at `key`.
    #[inline]
    pub(super) fn link_back<T>(&mut self, entries: &mut Slots<Entry<T>>, key: u32) -> u32 {
        let tail = std::mem::replace(&mut self.tail, key);
        if tail == NIL {
            self.head = key;
        } else {
            entries[tail as usize].next = key;
        }
        tail
    }

    /// Closes the gap left by `key`, whose links were `prev` and `next`;
    /// `key`'s own entry is not touched (the caller is about to remove or
    /// relink it).
    #[inline]
    pub(super) fn detach<T>(
        &mut self,
        entries: &mut Slots<Entry<T>>,
        key: u32,
        prev: u32,
        next: u32,
    ) {
        if prev == NIL {
            debug_assert_eq!(
                self.head, key,
                "entry {key} claims to head a list it does not"
            );
            self.head = next;
        } else {
            entries[prev as usize].next = next;
        }
        if next == NIL {
            debug_assert_eq!(
                self.tail, key,
                "entry {key} claims to end a list it does not"
            );
            self.tail = prev;
        } else {
            entries[next as usize].prev = prev;
        }
    }

    /// Takes the head out, leaving it in no list ([`Place::Unlinked`], its
    /// links cleared), and returns its index, its generation and what `take`
    /// made of its value: the entry is looked up once for all of it (a
    /// second lookup for the rest cost a fire 15 instructions, callgrind).
    pub(super) fn pop_front<T, R>(
        &mut self,
        entries: &mut Slots<Entry<T>>,
        take: impl FnOnce(&mut T) -> R,
    ) -> Option<(u32, u32, R)> {
        if self.head == NIL {
            return None;
        }
        let key = self.head;
        let entry = &mut entries[key as usize];
        debug_assert_eq!(entry.prev, NIL, "the head {key} has a predecessor");
        let next = std::mem::replace(&mut entry.next, NIL);
        entry.place = Place::Unlinked;
        let generation = entry.generation;
        let taken = take(&mut entry.value);
        self.detach(entries, key, NIL, next);
        Some((key, generation, taken))
    }

    /// Renames the ends after entries moved in the slab (`Wheel::compact`).
    pub(super) fn rename(&mut self, renamed: impl Fn(u32) -> u32) {
        self.head = renamed(self.head);
        self.tail = renamed(self.tail);
    }

    /// Detaches the whole list, leaving `self` empty.
    pub(super) fn take(&mut self) -> List {
        std::mem::replace(self, List::EMPTY)
    }

    #[cfg(test)]
    pub(super) fn keys<T>(&self, entries: &Slots<Entry<T>>) -> Vec<u32> {
        let mut out = Vec::new();
        let mut at = self.head;
        while at != NIL {
            out.push(at);
            at = entries[at as usize].next;
        }
        out
    }
}
