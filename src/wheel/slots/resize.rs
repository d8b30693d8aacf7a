//! What a queue's owner asks of its slab, O(capacity) each: clearing it,
//! reserving room, shrinking it and compacting it. The driver's wheels
//! call none of them.

use super::{Chunk, Slot, Slots, CHUNK, CHUNK_SHIFT, MASK};
use crate::wheel::entry::NIL;

impl<T> Slots<T> {
    /// Drops every value; keeps the chunks' allocations if the slab does
    /// not [`give back`](Slots::new), or if it has only chunk 0.
    ///
    /// [`gives_back`]: Slots::new
    pub(crate) fn clear(&mut self) {
        for chunk in self.chunks.iter_mut() {
            chunk.slots.clear();
            chunk.free = NIL;
            chunk.live = 0;
        }
        self.len = 0;
        for (word, bits) in self.open.iter_mut().enumerate() {
            let chunks = self.chunks.len() - word * 64;
            *bits = if chunks >= 64 { !0 } else { (1 << chunks) - 1 };
        }
        self.first_open = 0;
        self.hot = NIL;
        self.spare = NIL;
        self.release_all();
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
            let live = chunk.live as usize;
            if live < CHUNK {
                // Chunk 0 comes first if at all, with nothing counted yet.
                let want = match c {
                    0 => (live + additional).min(CHUNK),
                    _ => CHUNK,
                };
                if want > chunk.slots.capacity() {
                    chunk.slots.reserve_exact(want - chunk.slots.len());
                }
                room += chunk.slots.capacity() - live;
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
            if chunk.live == 0 {
                *chunk = Chunk::RELEASED;
                continue;
            }
            let end = chunk
                .slots
                .iter()
                .rposition(|slot| matches!(slot, Slot::Occupied(_)))
                .map_or(0, |last| last + 1);
            chunk.slots.truncate(end);
            chunk.slots.shrink_to_fit();
            // The free list named slots past the tail: rebuilt, lowest first.
            chunk.free = NIL;
            for (offset, slot) in chunk.slots.iter_mut().enumerate().rev() {
                if let Slot::Vacant(next) = slot {
                    *next = chunk.free;
                    chunk.free = offset as u32;
                }
            }
        }
        self.spare = NIL;
        // Chunk 0 stays in the directory (released if empty).
        let keep = (1..self.chunks.len())
            .rev()
            .find(|&c| self.chunks[c].live > 0)
            .map_or(1, |c| c + 1);
        self.chunks.truncate(keep);
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
    /// above `len` and rebuilds the chunks as full, with no free slots.
    /// O(capacity).
    pub(crate) fn compact(&mut self, mut moved: impl FnMut(&T, usize, usize)) {
        let len = self.len;
        // Every chunk below `len` gets its slots up to `len` pushed, vacant,
        // so that a hole there can be written.
        for c in 0..len.div_ceil(CHUNK) {
            let end = (len - c * CHUNK).min(CHUNK);
            let slots = &mut self.chunks[c].slots;
            if slots.len() < end {
                slots.reserve_exact(end - slots.len());
                slots.resize_with(end, || Slot::Vacant(NIL));
            }
        }
        let holes: Vec<usize> = (0..len).filter(|&i| self.get(i).is_none()).collect();
        let mut from = self.chunks.len() * CHUNK;
        for to in holes {
            from = (len..from)
                .rev()
                .find(|&i| self.get(i).is_some())
                .expect("as many entries above len as holes below");
            let slot = std::mem::replace(
                &mut self.chunks[from >> CHUNK_SHIFT].slots[from & MASK],
                Slot::Vacant(NIL),
            );
            let Slot::Occupied(value) = slot else {
                unreachable!()
            };
            moved(&value, from, to);
            self.chunks[to >> CHUNK_SHIFT].slots[to & MASK] = Slot::Occupied(value);
        }
        let keep = len.div_ceil(CHUNK).max(1);
        self.chunks.truncate(keep);
        for (c, chunk) in self.chunks.iter_mut().enumerate() {
            chunk.slots.truncate((len - c * CHUNK).min(CHUNK));
            chunk.slots.shrink_to_fit();
            chunk.free = NIL;
            chunk.live = chunk.slots.len() as u32;
        }
        self.open = vec![0; keep.div_ceil(64)];
        if (self.chunks.last().live as usize) < CHUNK {
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
