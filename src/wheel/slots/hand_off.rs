//! A big slab's chunks are freed by whatever its owner says, not by the
//! call that lets them go.
//!
//! # Why a free of 40 KiB can take milliseconds
//!
//! glibc's `free` returns memory to the system only from the top of its
//! heap, and then all the free memory that lies below the top at once:
//! where a slab's chunks were allocated one after another, as a burst of
//! timers grows the wheel, the chunks freed as the burst drains gather into
//! one free stretch below the newest, and the `free` that frees the newest
//! hands the whole stretch back. So does any `free` once the top has grown
//! past glibc's trim threshold, which glibc raises on its own (up to
//! 64 MiB) after a large block it had mapped is freed. Measured on the
//! `compare` bench's `worst_drop` (a million sleeps, Intel Xeon VM): the
//! drop that emptied the wheel, or one near the end, handed back 16-21 MB
//! with `brk`, 1.1-3.1 ms of kernel time, in every order. Freeing in
//! smaller pieces does not help: glibc joins adjacent pieces again. What
//! does is freeing on another thread.
//!
//! # The rule
//!
//! A slab that has grown past [`HAND_OFF`] chunks (65,536 entries, 2.5 MiB
//! of chunks; its directory only shrinks when the slab empties) frees no
//! chunk itself: a chunk it lets go of (the old spare, see the module
//! docs), and the whole slab once it empties (its directory and what
//! chunks it kept: the spare, the one just emptied and chunk 0), go to its
//! `free` function as a [`Freed`], and so do the wheel's levels that empty
//! with it. That is `drop` unless the owner set another
//! ([`Wheel::free_with`]); the driver's sends them to a thread that frees
//! them (`driver/elsewhere.rs`). A smaller slab frees in place, as it
//! always did: what its own frees leave free is at most `HAND_OFF` chunks. (A free at the top still hands back all that
//! lies free below it, whoever freed it: a small wheel's chunk allocated
//! above a big wheel's can hand back the big wheel's, as any other
//! allocation of the process can.)
//!
//! [`Wheel::free_with`]: crate::wheel::Wheel::free_with

use std::mem;

use super::{Chunk, Slots};
use crate::wheel::level::Level;

/// Chunks a slab may have before it stops freeing them itself. Tests use a
/// handful, so that small wheels hand off.
#[cfg(not(test))]
pub(super) const HAND_OFF: usize = 64;
#[cfg(test)]
pub(super) const HAND_OFF: usize = 4;

/// Memory a big slab has let go of: see the module docs. Dropping it frees
/// it; nothing in it is live (every value was removed before its chunk was
/// let go of), so dropping it runs no value's destructor.
#[derive(Debug)]
// Held only to be dropped (tests count the chunks it holds).
#[allow(dead_code)]
pub(crate) enum Freed<T> {
    /// An emptied chunk.
    Chunk(Chunk<T>),
    /// The slab itself, once it emptied: its directory, and what it held.
    Slab(Box<Slots<T>>),
    /// A level of the wheel, emptied with it: one first needed late in a
    /// burst lies above the burst's chunks, and its free would hand back
    /// what their frees left free below it.
    Level(Level),
}

impl<T> Freed<T> {
    /// A whole slab's hand-off, of an empty one.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn empty_slab() -> Freed<T> {
        Freed::Slab(Box::new(Slots::new(true)))
    }

    /// Chunks it holds memory for.
    #[cfg(test)]
    pub(crate) fn chunks(&self) -> usize {
        match self {
            Freed::Chunk(chunk) => usize::from(chunk.capacity() > 0),
            Freed::Slab(slab) => slab.chunks.iter().filter(|c| c.capacity() > 0).count(),
            Freed::Level(_) => 0,
        }
    }
}

impl<T> Slots<T> {
    /// Whether the slab hands what it lets go of to `free`: see the module
    /// docs.
    #[inline]
    fn hands_off(&self) -> bool {
        self.chunks.len() > HAND_OFF
    }

    /// Sets what frees what the slab lets go of, from now on.
    pub(crate) fn free_with(&mut self, free: fn(Freed<T>)) {
        self.free = free;
    }

    /// Frees `chunk`, which holds nothing live, here or through `free`.
    pub(super) fn let_go(&mut self, chunk: Chunk<T>) {
        debug_assert!(chunk.is_empty());
        if self.hands_off() {
            (self.free)(Freed::Chunk(chunk));
        }
    }

    /// Frees `level`, which the emptied wheel no longer needs, here or
    /// through `free`, as the slab's chunks.
    pub(crate) fn let_go_level(&self, level: Level) {
        if self.hands_off() {
            (self.free)(Freed::Level(level));
        }
    }

    /// The slab has emptied: starts afresh, and lets go of the old one
    /// whole, here or through `free`.
    pub(super) fn let_go_all(&mut self) {
        let fresh = Slots::new(self.gives_back);
        let old = mem::replace(self, fresh);
        self.free = old.free;
        if old.hands_off() {
            (old.free)(Freed::Slab(Box::new(old)));
        }
    }
}
