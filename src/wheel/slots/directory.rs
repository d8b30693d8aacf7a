//! The chunk directory, the crate's own part of the slab: the chunks'
//! headers (each a `Slab`'s), chunk 0's inline.

use std::ops::{Index, IndexMut};

use slab::Slab;

use super::Chunk;

/// The chunks' headers, chunk 0's inline: a small wheel, the common case,
/// then touches no cache line outside its owner for them (the owner, a
/// shard, is on lines of its own; a heap block of headers may share a line
/// with anything, and moves between cores with every cross-thread cancel).
#[derive(Debug)]
pub(super) struct Directory<T> {
    first: Chunk<T>,
    rest: Vec<Chunk<T>>,
}

impl<T> Directory<T> {
    pub(super) fn new() -> Directory<T> {
        Directory {
            first: Slab::new(),
            rest: Vec::new(),
        }
    }

    /// Chunks, at least one.
    #[inline]
    pub(super) fn len(&self) -> usize {
        1 + self.rest.len()
    }

    #[inline]
    pub(super) fn get(&self, c: usize) -> Option<&Chunk<T>> {
        match c {
            0 => Some(&self.first),
            c => self.rest.get(c - 1),
        }
    }

    #[inline]
    pub(super) fn get_mut(&mut self, c: usize) -> Option<&mut Chunk<T>> {
        match c {
            0 => Some(&mut self.first),
            c => self.rest.get_mut(c - 1),
        }
    }

    pub(super) fn push(&mut self, chunk: Chunk<T>) {
        self.rest.push(chunk);
    }

    /// Keeps the first `n` chunks (chunk 0 always).
    pub(super) fn truncate(&mut self, n: usize) {
        self.rest.truncate(n.saturating_sub(1));
        self.rest.shrink_to_fit();
    }

    pub(super) fn last(&self) -> &Chunk<T> {
        self.rest.last().unwrap_or(&self.first)
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = &Chunk<T>> + '_ {
        std::iter::once(&self.first).chain(&self.rest)
    }

    pub(super) fn iter_mut(&mut self) -> impl Iterator<Item = &mut Chunk<T>> + '_ {
        std::iter::once(&mut self.first).chain(&mut self.rest)
    }
}

impl<T> Index<usize> for Directory<T> {
    type Output = Chunk<T>;

    #[inline]
    fn index(&self, c: usize) -> &Chunk<T> {
        match c {
            0 => &self.first,
            c => &self.rest[c - 1],
        }
    }
}

impl<T> IndexMut<usize> for Directory<T> {
    #[inline]
    fn index_mut(&mut self, c: usize) -> &mut Chunk<T> {
        match c {
            0 => &mut self.first,
            c => &mut self.rest[c - 1],
        }
    }
}
