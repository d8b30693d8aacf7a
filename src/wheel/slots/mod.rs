//! The wheel's slab: entries by index in fixed-size chunks, each a
//! [`slab::Slab`], so that no single insert or removal grows, shrinks or
//! frees more than one chunk.
//!
//! # What is `slab`'s and what is the crate's own
//!
//! Each chunk is a `Slab` allocated once at `CHUNK` slots
//! ([`Slab::with_capacity`]) and never grown past it: within a chunk,
//! `slab` keeps the free list, the live count and the keys. What is the
//! crate's own is the directory of chunks around them (`directory.rs`,
//! chunk 0's header inline), which chunk an insert goes to, and when an
//! emptied chunk is freed. One growing `Slab` would be simpler, but it is
//! one `Vec`: growing it past its capacity copies (or remaps) every entry,
//! it gives memory back only by cutting its vacant tail (rebuilding its
//! whole free list), and freeing it whole after a burst unmaps tens of
//! megabytes. Each is O(timers) inside one `poll` or `drop`, under the
//! shard's lock: a latency spike of milliseconds at a million timers, on
//! the unlucky request that triggered it.
//!
//! # Layout
//!
//! Index `i` lives in chunk `i / CHUNK`, at key `i % CHUNK` of its `Slab`.
//! Chunk 0 grows like a `Vec` (a small wheel stays small), every other
//! chunk is allocated at `CHUNK` slots the first time it is used. An insert
//! takes the slot the last removal freed, if no insert has taken it since
//! (it is still in cache: a server's timeouts replace each other), and
//! otherwise a slot in the lowest chunk with room (`first_open`; a bitmap
//! says which have room), so a shrinking population empties the high
//! chunks.
//!
//! # Giving memory back
//!
//! When a chunk other than chunk 0 empties it becomes the *spare*, and the
//! previous spare, if still empty, is freed. One empty chunk is kept so
//! that a timer started and cancelled in a loop at a chunk's edge does not
//! allocate and free a chunk every time. When a wheel that grew past chunk
//! 0 empties, everything goes (at most three chunks: the spare, the one
//! just emptied and chunk 0); one that never did keeps chunk 0, at most
//! `CHUNK` slots. A queue's wheel (`gives_back` false) keeps what it has
//! until its owner calls [`Slots::shrink_to_fit`]. A slab past 64 chunks
//! frees nothing itself, but hands what it lets go of to its owner's
//! function (`hand_off.rs`).
//!
//! # Cost per call
//!
//! An insert may allocate one chunk, double chunk 0 (at most `CHUNK`
//! slots), or double the directory (a 40-byte `Slab` header and a bit per
//! `CHUNK` slots: 39 KiB at a million timers); a discard may grow the
//! count of marked entries (2 bytes a chunk). A removal may free one chunk.
//! When the chunk an insert filled was the lowest with room, finding the
//! next scans one bit per chunk. None of it touches the other entries.
//!
//! The price is on every access: an index goes through the chunk's header
//! (a branch, a bounds check and a load more than one `Slab`), and an
//! insert or removal keeps the open bitmap. Chunk 0's header is inline
//! (`Directory`), so a small wheel touches no line a lone `Slab` would
//! not; on a large one, bulk cancels and random replacements cost 10-20%
//! more than with one `Slab` (`benches/README.md`, "The chunked slab").
//! Against the hand-written chunks this replaced, an insert costs 27
//! instructions more (callgrind, `Wheel::insert`: 200 to 228; a
//! registration, 314 to 342): `Slab::insert`'s `insert_at` is not inlined.
//! A removal costs 8 fewer.

use std::ops::{Index, IndexMut};

use slab::Slab;

use super::entry::NIL;
use directory::Directory;
pub(crate) use hand_off::Freed;

mod directory;
mod hand_off;
mod resize;

/// Slots per chunk, as a shift. Tests use tiny chunks, so that small wheels
/// have many.
#[cfg(not(test))]
const CHUNK_SHIFT: u32 = 10;
#[cfg(test)]
const CHUNK_SHIFT: u32 = 2;
/// Slots per chunk; also what an empty wheel may keep (chunk 0).
pub(crate) const CHUNK: usize = 1 << CHUNK_SHIFT;
const MASK: usize = CHUNK - 1;

/// A chunk: at most `CHUNK` slots, never grown past them; one with no
/// allocation (`Slab::new()`) is *released*.
type Chunk<T> = Slab<T>;

/// A slab in chunks; see the module docs.
#[derive(Debug)]
pub(crate) struct Slots<T> {
    chunks: Directory<T>,
    /// Bit `c` is set iff chunk `c` has room (fewer than `CHUNK` live).
    open: Vec<u64>,
    /// The lowest chunk with room, or `chunks.len()` if none has.
    first_open: usize,
    /// The chunk of the last removal, until an insert takes its slot (the
    /// head of that chunk's free list, and still in cache), or [`NIL`].
    hot: u32,
    /// Occupied slots.
    len: usize,
    /// An empty chunk other than chunk 0 kept allocated, or [`NIL`]; it
    /// may have taken entries since it emptied, and is then no spare.
    spare: u32,
    /// Whether emptied chunks are freed (see the module docs).
    gives_back: bool,
    /// Slots allocated, in all chunks: kept, not summed, because stats and
    /// tests ask often.
    allocated: usize,
    /// Marked entries per chunk (see [`Slots::mark`]), as far as any were.
    marked: Vec<u16>,
    /// Frees what a big slab lets go of (`hand_off.rs`): `drop`, unless
    /// the owner said otherwise.
    free: fn(Freed<T>),
}

impl<T> Slots<T> {
    /// An empty slab; `gives_back` says whether it frees emptied chunks.
    pub(crate) fn new(gives_back: bool) -> Slots<T> {
        Slots {
            chunks: Directory::new(),
            // Chunk 0 has room.
            open: vec![1],
            first_open: 0,
            hot: NIL,
            len: 0,
            spare: NIL,
            gives_back,
            allocated: 0,
            marked: Vec::new(),
            free: drop,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Slots allocated, occupied or not.
    pub(crate) fn capacity(&self) -> usize {
        self.allocated
    }

    /// Counts the allocated slots again, after an O(capacity) operation.
    fn recount(&mut self) {
        self.allocated = self.chunks.iter().map(Slab::capacity).sum();
    }

    #[inline]
    pub(crate) fn get(&self, index: usize) -> Option<&T> {
        self.chunks.get(index >> CHUNK_SHIFT)?.get(index & MASK)
    }

    #[inline]
    pub(crate) fn get_mut(&mut self, index: usize) -> Option<&mut T> {
        self.chunks
            .get_mut(index >> CHUNK_SHIFT)?
            .get_mut(index & MASK)
    }

    /// The chunk the next insert goes to: the last removal's while its slot
    /// is free, else the lowest with room.
    #[inline]
    fn next_chunk(&self) -> usize {
        if self.hot == NIL {
            self.first_open
        } else {
            self.hot as usize
        }
    }

    /// The index the next [`insert`](Slots::insert) uses.
    #[inline]
    pub(crate) fn vacant_key(&self) -> usize {
        let c = self.next_chunk();
        (c << CHUNK_SHIFT) | self.chunks.get(c).map_or(0, Slab::vacant_key)
    }

    /// Stores `value` at [`vacant_key`](Slots::vacant_key) and returns it.
    #[inline]
    pub(crate) fn insert(&mut self, value: T) -> usize {
        let c = self.next_chunk();
        self.hot = NIL;
        if c == self.chunks.len() {
            self.push_chunk();
        }
        let chunk = &mut self.chunks[c];
        let len = chunk.len();
        debug_assert!(len < CHUNK, "chunk {c} is full but marked open");
        if len == chunk.capacity() {
            // No vacant slot: `Slab` would push, and grow as a `Vec` does.
            // Chunk 0 doubles; the others are allocated whole, once.
            let want = if c == 0 {
                (2 * len).clamp(4, CHUNK)
            } else {
                CHUNK
            };
            chunk.reserve_exact(want - len);
            self.allocated += chunk.capacity() - len;
        }
        let offset = chunk.insert(value);
        self.len += 1;
        if len + 1 == CHUNK {
            self.open[c / 64] &= !(1 << (c % 64));
            if c == self.first_open {
                self.first_open = self.next_open(c + 1);
            }
        }
        (c << CHUNK_SHIFT) | offset
    }

    /// A released chunk at the end of the directory, marked open.
    #[cold]
    fn push_chunk(&mut self) {
        let c = self.chunks.len();
        assert!(
            ((c + 1) << CHUNK_SHIFT) - 1 <= NIL as usize,
            "a wheel holds at most u32::MAX - 1 entries"
        );
        self.chunks.push(Slab::new());
        if c % 64 == 0 {
            self.open.push(0);
        }
        self.open[c / 64] |= 1 << (c % 64);
    }

    /// The lowest chunk with room at or above `from`, or `chunks.len()`.
    fn next_open(&self, from: usize) -> usize {
        let mut word = from / 64;
        let Some(&first) = self.open.get(word) else {
            return self.chunks.len();
        };
        let mut bits = first & (!0 << (from % 64));
        loop {
            if bits != 0 {
                return word * 64 + bits.trailing_zeros() as usize;
            }
            word += 1;
            match self.open.get(word) {
                Some(&next) => bits = next,
                None => return self.chunks.len(),
            }
        }
    }

    /// Frees slot `index` and returns its value.
    ///
    /// # Panics
    ///
    /// If the slot is vacant.
    #[inline(always)]
    pub(crate) fn remove(&mut self, index: usize) -> T {
        let c = index >> CHUNK_SHIFT;
        let chunk = &mut self.chunks[c];
        let Some(value) = chunk.try_remove(index & MASK) else {
            vacant()
        };
        let live = chunk.len();
        self.len -= 1;
        if live == CHUNK - 1 {
            self.open[c / 64] |= 1 << (c % 64);
        }
        if c < self.first_open {
            self.first_open = c;
        }
        self.hot = c as u32;
        if live == 0 && c > 0 && self.gives_back && self.len > 0 {
            self.chunk_emptied(c);
        }
        value
    }

    /// Chunk `c` (not 0) has just emptied, and others have entries: it
    /// becomes the spare, and the old spare, if still empty, is freed.
    #[cold]
    fn chunk_emptied(&mut self, c: usize) {
        let old = std::mem::replace(&mut self.spare, c as u32) as usize;
        // The old spare may have taken entries since (it is then no spare).
        if old != NIL as usize && old != c && self.chunks[old].is_empty() {
            self.allocated -= self.chunks[old].capacity();
            let chunk = std::mem::take(&mut self.chunks[old]);
            self.let_go(chunk);
        }
    }

    /// Marks the entry at `index` (the wheel's discarded entries, removed
    /// later by [`remove_marked`](Slots::remove_marked)); whether its chunk
    /// now holds marked entries only, so that removing them would empty it.
    #[inline]
    pub(crate) fn mark(&mut self, index: usize) -> bool {
        let c = index >> CHUNK_SHIFT;
        if c >= self.marked.len() {
            self.marked.resize(self.chunks.len(), 0);
        }
        self.marked[c] += 1;
        usize::from(self.marked[c]) == self.chunks[c].len()
    }

    /// Whether the chunk of `index` holds marked entries and nothing else.
    #[inline]
    pub(crate) fn only_marked(&self, index: usize) -> bool {
        let c = index >> CHUNK_SHIFT;
        self.marked
            .get(c)
            .is_some_and(|&m| m > 0 && usize::from(m) == self.chunks[c].len())
    }

    /// Removes a [`mark`](Slots::mark)ed entry, as [`remove`](Slots::remove).
    #[inline]
    pub(crate) fn remove_marked(&mut self, index: usize) -> T {
        self.marked[index >> CHUNK_SHIFT] -= 1;
        self.remove(index)
    }

    /// Whether [`release_all`](Slots::release_all) has anything to free
    /// once the slab is empty: it gives memory back and grew past chunk 0.
    #[inline]
    pub(crate) fn can_release(&self) -> bool {
        self.gives_back && self.chunks.len() > 1
    }

    /// For an empty slab that [`can_release`](Slots::can_release): frees
    /// everything, or hands it off (`hand_off.rs`). Every chunk above 0 is
    /// already released but the spare and the one just emptied, so this
    /// frees at most three chunks and drops the directory (a header per
    /// chunk).
    pub(crate) fn release_all(&mut self) {
        debug_assert_eq!(self.len, 0);
        debug_assert!(self.can_release());
        self.let_go_all();
    }

    /// Occupied slots and their indices, lowest first.
    #[cfg(any(test, loom))]
    pub(crate) fn iter(&self) -> impl Iterator<Item = (usize, &T)> + '_ {
        self.chunks.iter().enumerate().flat_map(|(c, chunk)| {
            chunk
                .iter()
                .map(move |(offset, value)| ((c << CHUNK_SHIFT) | offset, value))
        })
    }

    /// As [`iter`](Slots::iter), mutably.
    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = (usize, &mut T)> + '_ {
        self.chunks.iter_mut().enumerate().flat_map(|(c, chunk)| {
            chunk
                .iter_mut()
                .map(move |(offset, value)| ((c << CHUNK_SHIFT) | offset, value))
        })
    }

    /// Checks the bookkeeping against the chunks: sizes, the open bitmap,
    /// `first_open`, `hot` and the spare. O(capacity).
    #[cfg(test)]
    pub(crate) fn assert_invariants(&self) {
        let mut len = 0;
        for (c, chunk) in self.chunks.iter().enumerate() {
            let live = chunk.len();
            assert_eq!(chunk.iter().count(), live, "chunk {c}'s live count");
            assert!(chunk.capacity() <= CHUNK, "chunk {c} too big");
            let open = self.open[c / 64] >> (c % 64) & 1 == 1;
            assert_eq!(open, live < CHUNK, "chunk {c}'s open bit");
            assert!(
                c >= self.first_open || !open,
                "open chunk {c} below first_open"
            );
            let marked = self.marked.get(c).map_or(0, |&m| usize::from(m));
            assert!(
                marked == 0 || marked < live,
                "chunk {c}: {marked} marked of {live}: a flush would empty it"
            );
            len += live;
        }
        assert!(self.first_open <= self.chunks.len());
        assert_eq!(len, self.len);
        if self.hot != NIL {
            let c = &self.chunks[self.hot as usize];
            assert!(c.len() < c.capacity(), "hot chunk has no free slot");
        }
        let allocated: usize = self.chunks.iter().map(Slab::capacity).sum();
        assert_eq!(allocated, self.allocated, "allocated slots");
        assert!(self.marked.len() <= self.chunks.len());
        for c in self.chunks.len()..self.open.len() * 64 {
            assert_eq!(self.open[c / 64] >> (c % 64) & 1, 0, "bit {c} past the end");
        }
        if self.gives_back {
            let empty_held = (1..self.chunks.len())
                .filter(|&c| self.chunks[c].is_empty() && self.chunks[c].capacity() > 0)
                .count();
            assert!(empty_held <= 1, "{empty_held} empty chunks held");
        }
    }
}

/// A key naming a vacant slot: a bug in the wheel. Out of line, with no
/// arguments, so that the index paths carry nothing for it.
#[cold]
#[inline(never)]
#[track_caller]
fn vacant() -> ! {
    panic!("a wheel key names a vacant slot")
}

impl<T> Index<usize> for Slots<T> {
    type Output = T;

    #[inline]
    fn index(&self, index: usize) -> &T {
        match self.chunks[index >> CHUNK_SHIFT].get(index & MASK) {
            Some(value) => value,
            None => vacant(),
        }
    }
}

impl<T> IndexMut<usize> for Slots<T> {
    #[inline]
    fn index_mut(&mut self, index: usize) -> &mut T {
        match self.chunks[index >> CHUNK_SHIFT].get_mut(index & MASK) {
            Some(value) => value,
            None => vacant(),
        }
    }
}

#[cfg(test)]
#[path = "../tests/slots.rs"]
mod tests;
