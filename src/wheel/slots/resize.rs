//! What a queue's owner asks of its slab, O(capacity) each: clearing it,
//! reserving room, shrinking it and compacting it. The driver's wheels
//! call none of them.

use slab::Slab;

use super::{Slots, CHUNK, CHUNK_SHIFT};
use crate::wheel::entry::NIL;

impl<T> Slots<T> {
    /// Drops every value; keeps the chunks' allocations if the slab does
    /// not [`give back`](Slots::new), or if it has only chunk 0.
    pub(crate) fn clear(&mut self) {
        self.chunks.iter_mut().for_each(Slab::clear);
        self.marked.clear();
        self.len = 0;
        for (word, bits) in self.open.iter_mut().enumerate() {
            let chunks = self.chunks.len() - word * 64;
            *bits = if chunks >= 64 { !0 } else { (1 << chunks) - 1 };
        }
        self.first_open = 0;
        self.hot = NIL;
        self.spare = NIL;
        if self.can_release() {
            self.release_all();
        }
    }

    /// Makes room for `additional` more entries than are live, without
    /// allocating on insert. Inserts fill the chunks with room from the
    /// lowest up (the last freed slot is in one of them), so room is counted
    /// from `first_open` up, each such chunk made whole (chunk 0 only as far
    /// as needed), and new chunks added past the end.
    ///
    /// # Panics
    ///
    /// If more than `u32::MAX - 1` entries would be live.
    pub(crate) fn reserve(&mut self, additional: usize) {
        assert!(
            self.len
                .checked_add(additional)
                .is_some_and(|total| total < NIL as usize),
            "a wheel holds at most u32::MAX - 1 entries"
        );
        let mut room = 0;
        let mut c = self.first_open;
        while room < additional {
            if c == self.chunks.len() {
                self.push_chunk();
            }
            let chunk = &mut self.chunks[c];
            let live = chunk.len();
            if live < CHUNK {
                // Chunk 0 comes first if at all, with nothing counted yet.
                let want = match c {
                    0 => (live + additional).min(CHUNK),
                    _ => CHUNK,
                };
                chunk.reserve_exact(want - live);
                room += chunk.capacity() - live;
            }
            c += 1;
        }
        self.recount();
    }

    /// Frees every empty chunk and the vacant tail of the others, and cuts
    /// the directory after the last one with a live entry. Keys stay
    /// valid: nothing moves. O(capacity).
    pub(crate) fn shrink_to_fit(&mut self) {
        for chunk in self.chunks.iter_mut() {
            if chunk.is_empty() {
                *chunk = Slab::new();
            } else {
                // The vacant tail goes; the free list is rebuilt lowest first.
                chunk.shrink_to_fit();
            }
        }
        self.spare = NIL;
        // Chunk 0 stays in the directory (released if empty).
        let keep = (1..self.chunks.len())
            .rev()
            .find(|&c| !self.chunks[c].is_empty())
            .map_or(1, |c| c + 1);
        self.chunks.truncate(keep);
        self.marked.truncate(keep);
        self.open.truncate(keep.div_ceil(64));
        self.open.shrink_to_fit();
        if let Some(last) = self.open.last_mut() {
            if keep % 64 != 0 {
                *last &= (1 << (keep % 64)) - 1;
            }
        }
        self.first_open = self.next_open(0);
        self.hot = NIL;
        self.recount();
    }

    /// Moves the entries above index `len` into the vacant slots below it,
    /// calling `moved(value, from, to)` for each, then frees everything
    /// above `len` and leaves the chunks below it full, with no free slots.
    /// O(capacity).
    pub(crate) fn compact(&mut self, mut moved: impl FnMut(&T, usize, usize)) {
        let len = self.len;
        // Everything at or above `len`, taken out, highest last.
        let mut above = Vec::new();
        for c in len >> CHUNK_SHIFT..self.chunks.len() {
            let chunk = &mut self.chunks[c];
            let first = len.saturating_sub(c << CHUNK_SHIFT);
            let offsets: Vec<usize> = chunk
                .iter()
                .map(|(o, _)| o)
                .filter(|&o| o >= first)
                .collect();
            for offset in offsets {
                above.push(((c << CHUNK_SHIFT) | offset, chunk.remove(offset)));
            }
        }
        let keep = len.div_ceil(CHUNK).max(1);
        self.chunks.truncate(keep);
        // A queue's slab: it marks nothing.
        self.marked.clear();
        for c in 0..keep {
            let end = (len - (c << CHUNK_SHIFT)).min(CHUNK);
            let chunk = &mut self.chunks[c];
            // Its vacant tail cut, a chunk's free slots are all below `end`:
            // filling it to `end` entries fills exactly the slots below.
            chunk.shrink_to_fit();
            chunk.reserve_exact(end - chunk.len());
            while chunk.len() < end {
                let (from, value) = above.pop().expect("an entry above len per hole");
                moved(&value, from, (c << CHUNK_SHIFT) | chunk.vacant_key());
                chunk.insert(value);
            }
            chunk.shrink_to_fit();
        }
        debug_assert!(above.is_empty());
        self.open = vec![0; keep.div_ceil(64)];
        if self.chunks.last().len() < CHUNK {
            let c = keep - 1;
            self.open[c / 64] |= 1 << (c % 64);
        }
        self.open.shrink_to_fit();
        self.spare = NIL;
        self.first_open = self.next_open(0);
        self.hot = NIL;
        self.recount();
    }
}
