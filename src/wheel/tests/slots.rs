//! The chunked slab (`slots/`): finding room, freeing chunks, a queue's
//! reserve, shrink and compact.

use super::hand_off::HAND_OFF;
use super::*;
use crate::wheel::entry::Entry;

fn filled(n: usize) -> Slots<usize> {
    let mut slots = Slots::new(true);
    for i in 0..n {
        assert_eq!(slots.vacant_key(), i);
        assert_eq!(slots.insert(i), i);
    }
    slots.assert_invariants();
    slots
}

#[test]
fn next_open_finds_the_lowest_chunk_with_room_across_words() {
    let mut slots = filled(200 * CHUNK);
    assert_eq!(slots.first_open, 200);
    for c in [199, 130, 64, 63] {
        slots.remove(c * CHUNK + 1);
    }
    assert_eq!(slots.first_open, 63);
    assert_eq!(slots.next_open(64), 64);
    assert_eq!(slots.next_open(65), 130);
    assert_eq!(slots.next_open(131), 199);
    assert_eq!(slots.next_open(200), 200);
    // Filling 63 (the last freed) moves `first_open` to the next one.
    assert_eq!(slots.insert(0), 63 * CHUNK + 1);
    assert_eq!(slots.first_open, 64);
    slots.assert_invariants();
}

#[test]
fn an_insert_takes_the_last_freed_slot_then_the_lowest_chunks() {
    let mut slots = filled(3 * CHUNK);
    slots.remove(CHUNK + 2);
    slots.remove(CHUNK + 3);
    slots.remove(2 * CHUNK + 1);
    // The slot just freed, still in cache.
    assert_eq!(slots.vacant_key(), 2 * CHUNK + 1);
    assert_eq!(slots.insert(7), 2 * CHUNK + 1);
    // Then the lowest chunk with room, its last freed slot first.
    assert_eq!(slots.vacant_key(), CHUNK + 3);
    assert_eq!(slots.insert(8), CHUNK + 3);
    assert_eq!(slots.insert(9), CHUNK + 2);
    assert_eq!(slots.insert(10), 3 * CHUNK);
    assert_eq!(slots[2 * CHUNK + 1], 7);
    slots.assert_invariants();
    // A chunk filled through the last freed slot, above the lowest with
    // room, leaves `first_open` where it was.
    slots.remove(0);
    slots.remove(CHUNK);
    assert_eq!(slots.insert(11), CHUNK);
    assert_eq!(slots.first_open, 0);
    slots.assert_invariants();
}

#[test]
fn emptied_chunks_are_freed_one_removal_late_and_all_when_empty() {
    let mut slots = filled(4 * CHUNK);
    let full = slots.capacity();
    for i in (CHUNK..2 * CHUNK).rev() {
        slots.remove(i);
    }
    // The spare: kept.
    assert_eq!(slots.capacity(), full);
    for i in 2 * CHUNK..3 * CHUNK {
        slots.remove(i);
    }
    // The old spare freed, the new one kept.
    assert_eq!(slots.capacity(), full - CHUNK);
    slots.assert_invariants();
    for i in (0..CHUNK).chain(3 * CHUNK..4 * CHUNK) {
        slots.remove(i);
    }
    assert!(slots.can_release());
    slots.release_all();
    assert_eq!((slots.capacity(), slots.len()), (0, 0));
    slots.assert_invariants();
    // Used again from chunk 0.
    assert_eq!(slots.insert(1), 0);
}

#[test]
fn a_queues_slab_keeps_its_chunks_until_shrunk() {
    let mut slots: Slots<usize> = Slots::new(false);
    slots.reserve(3 * CHUNK + 1);
    let reserved = slots.capacity();
    assert!(reserved > 3 * CHUNK);
    let keys: Vec<usize> = (0..3 * CHUNK + 1).map(|i| slots.insert(i)).collect();
    assert_eq!(slots.capacity(), reserved, "an insert allocated");
    for &key in &keys[CHUNK..] {
        slots.remove(key);
    }
    assert_eq!(slots.capacity(), reserved);
    slots.shrink_to_fit();
    assert_eq!(slots.capacity(), CHUNK);
    slots.assert_invariants();
    for &key in &keys[..CHUNK] {
        assert_eq!(slots[key], key);
    }
    // A chunk's vacant tail goes too; a hole below its last entry stays,
    // on a free list rebuilt without the tail.
    slots.remove(CHUNK - 1);
    slots.remove(1);
    slots.shrink_to_fit();
    assert_eq!(slots.capacity(), CHUNK - 1);
    slots.assert_invariants();
    assert_eq!(slots.insert(10), 1);
    assert_eq!(slots.insert(11), CHUNK - 1);
    slots.assert_invariants();
}

#[test]
fn compact_moves_the_top_into_the_holes_and_frees_the_rest() {
    let mut slots = filled(5 * CHUNK);
    for i in (0..5 * CHUNK).filter(|i| i % 3 == 0) {
        slots.remove(i);
    }
    let len = slots.len();
    let mut moves = Vec::new();
    slots.compact(|&value, from, to| moves.push((value, from, to)));
    slots.assert_invariants();
    assert_eq!(slots.len(), len);
    assert!(slots.capacity() < len + CHUNK);
    for (value, from, to) in moves {
        assert_eq!(value, from);
        assert!(from >= len && to < len);
        assert_eq!(slots[to], value);
    }
    let mut values: Vec<usize> = slots.iter().map(|(_, &v)| v).collect();
    values.sort_unstable();
    let expected: Vec<usize> = (0..5 * CHUNK).filter(|i| i % 3 != 0).collect();
    assert_eq!(values, expected);
    // Every index below `len` is in use; the next insert goes after.
    assert_eq!(slots.vacant_key(), len);
}

#[test]
fn clear_keeps_a_queues_chunks_and_frees_a_grown_slab() {
    let mut queue = Slots::new(false);
    let mut timer = Slots::new(true);
    for i in 0..3 * CHUNK {
        queue.insert(i);
        timer.insert(i);
    }
    let held = queue.capacity();
    queue.clear();
    timer.clear();
    queue.assert_invariants();
    timer.assert_invariants();
    assert_eq!((queue.len(), queue.capacity()), (0, held));
    assert_eq!((timer.len(), timer.capacity()), (0, 0));
    assert_eq!(queue.insert(1), 0);
}

#[test]
fn a_slot_of_the_drivers_entry_is_40_bytes() {
    // The driver's value is two words (`driver::job::Job`). A `Slab`'s slot
    // is this enum (slab 0.4's `Entry`); its vacant variant hides in
    // `Place`'s niche.
    #[allow(dead_code)]
    enum SlabEntry<T> {
        Vacant(usize),
        Occupied(T),
    }
    let size = std::mem::size_of::<SlabEntry<super::super::entry::Entry<[usize; 2]>>>();
    assert_eq!(
        size,
        if cfg!(target_pointer_width = "64") {
            40
        } else {
            32
        }
    );
    // A chunk past 0 is allocated whole, at exactly `CHUNK` slots.
    let mut slots = filled(CHUNK + 1);
    assert_eq!(slots.chunks[1].capacity(), CHUNK);
    slots.remove(CHUNK);
    assert_eq!(slots.capacity(), 2 * CHUNK);
}

#[test]
fn chunk_0_is_kept_while_other_chunks_have_entries() {
    let mut slots = filled(3 * CHUNK);
    let full = slots.capacity();
    // Oldest first: chunk 0 empties, then chunk 1. Chunk 0 is never the
    // spare, so chunk 1's emptying frees nothing, and chunk 1 is kept as
    // the spare.
    for i in 0..2 * CHUNK {
        slots.remove(i);
    }
    assert_eq!(slots.capacity(), full);
    assert_eq!(slots.chunks[0].capacity(), CHUNK);
    slots.assert_invariants();
}

#[test]
fn reserve_counts_only_the_room_inserts_will_use() {
    // Found by review: after `shrink_to_fit` released chunk 0, free slots
    // higher up counted as room, and the next insert (into chunk 0)
    // allocated after `reserve` had said there was room.
    let mut slots: Slots<usize> = Slots::new(false);
    for i in 0..2 * CHUNK {
        slots.insert(i);
    }
    for i in (0..CHUNK).chain([CHUNK + 1]) {
        slots.remove(i);
    }
    slots.shrink_to_fit();
    slots.assert_invariants();
    // One slot is free in chunk 1, but the next insert goes to chunk 0.
    slots.reserve(1);
    let reserved = slots.capacity();
    slots.insert(0);
    assert_eq!(slots.capacity(), reserved, "the reserved insert allocated");
    slots.reserve(CHUNK);
    let reserved = slots.capacity();
    for i in 0..CHUNK {
        slots.insert(i);
        assert_eq!(slots.capacity(), reserved, "insert {i} allocated");
    }
    slots.assert_invariants();
}

#[test]
#[should_panic(expected = "at most u32::MAX - 1 entries")]
fn reserving_more_than_a_wheel_can_hold_panics_at_once() {
    let mut slots: Slots<usize> = Slots::new(false);
    slots.insert(0);
    slots.reserve(usize::MAX);
}

#[test]
fn reserve_is_exact_within_chunk_0_and_whole_chunks_beyond() {
    let mut small: Slots<usize> = Slots::new(false);
    small.reserve(3);
    assert_eq!(small.capacity(), 3);
    let mut large: Slots<usize> = Slots::new(false);
    large.reserve(CHUNK + 1);
    assert_eq!(large.capacity(), 2 * CHUNK);
    large.assert_invariants();
    // Room is what a chunk has beyond its live entries.
    let mut used: Slots<usize> = Slots::new(false);
    used.insert(0);
    used.insert(1);
    used.reserve(CHUNK);
    let reserved = used.capacity();
    for i in 0..CHUNK {
        used.insert(i);
        assert_eq!(used.capacity(), reserved, "insert {i} allocated");
    }
}

#[test]
fn clearing_a_queues_slab_of_more_than_64_chunks_keeps_them_all_open() {
    let mut slots: Slots<usize> = Slots::new(false);
    let n = 65 * CHUNK + 1;
    for i in 0..n {
        slots.insert(i);
    }
    let held = slots.capacity();
    slots.clear();
    slots.assert_invariants();
    for i in 0..n {
        assert_eq!(slots.insert(i), i);
    }
    assert_eq!(slots.capacity(), held);
    slots.assert_invariants();
}

#[test]
fn shrink_to_fit_cuts_the_directory_and_keeps_a_full_words_bits() {
    let mut slots: Slots<usize> = Slots::new(false);
    for i in 0..66 * CHUNK {
        slots.insert(i);
    }
    // Chunks 64 and 65 empty; chunk 63 keeps three entries and a hole.
    for i in 64 * CHUNK..66 * CHUNK {
        slots.remove(i);
    }
    slots.remove(63 * CHUNK);
    slots.shrink_to_fit();
    assert_eq!(slots.chunks.len(), 64);
    slots.assert_invariants();
    assert_eq!(slots.insert(7), 63 * CHUNK);
}

#[test]
fn iteration_yields_each_entry_with_its_own_index() {
    let mut slots = filled(3 * CHUNK);
    for i in [1, CHUNK + 2, 2 * CHUNK + 3] {
        slots.remove(i);
    }
    let seen: Vec<(usize, usize)> = slots.iter().map(|(i, &v)| (i, v)).collect();
    let expected: Vec<(usize, usize)> = (0..3 * CHUNK)
        .filter(|i| ![1, CHUNK + 2, 2 * CHUNK + 3].contains(i))
        .map(|i| (i, i))
        .collect();
    assert_eq!(seen, expected);
    let seen_mut: Vec<(usize, usize)> = slots.iter_mut().map(|(i, v)| (i, *v)).collect();
    assert_eq!(seen_mut, expected);
}

thread_local! {
    /// Chunks with memory that `count` was handed: one at a time, and in
    /// whole slabs.
    static HANDED: std::cell::Cell<(usize, usize)> = const { std::cell::Cell::new((0, 0)) };
}

fn count(freed: Freed<usize>) {
    let (one, whole) = HANDED.get();
    match freed {
        Freed::Chunk(_) => HANDED.set((one + freed.chunks(), whole)),
        Freed::Slab(_) => HANDED.set((one, whole + freed.chunks())),
        // Only a wheel has levels.
        Freed::Level(_) => unreachable!("a slab alone handed over a level"),
    }
}

/// Drains `slots` from the top down, releasing it once empty as the wheel
/// does; what `count` was handed.
fn drained(mut slots: Slots<usize>) -> (usize, usize) {
    HANDED.set((0, 0));
    slots.free_with(count);
    for i in (0..slots.chunks.len() * CHUNK).rev() {
        slots.remove(i);
        slots.assert_invariants();
    }
    assert!(slots.can_release());
    slots.release_all();
    assert_eq!((slots.capacity(), slots.chunks.len()), (0, 1));
    HANDED.get()
}

#[test]
fn a_big_slab_hands_what_it_lets_go_of_to_its_free_and_a_small_one_frees_it() {
    // At `HAND_OFF` chunks: every chunk freed in place.
    assert_eq!(drained(filled(HAND_OFF * CHUNK)), (0, 0));
    // One more: each old spare is handed over as it goes (all but the
    // last spare and chunk 0), then the slab with those two.
    assert_eq!(drained(filled((HAND_OFF + 1) * CHUNK)), (HAND_OFF - 1, 2));
    // The emptied slab keeps its `free`: grown big again, it hands over.
    let mut slots = filled((HAND_OFF + 1) * CHUNK);
    slots.free_with(count);
    for i in (0..slots.chunks.len() * CHUNK).rev() {
        slots.remove(i);
    }
    slots.release_all();
    HANDED.set((0, 0));
    for i in 0..(HAND_OFF + 1) * CHUNK {
        slots.insert(i);
    }
    for i in (0..(HAND_OFF + 1) * CHUNK).rev() {
        slots.remove(i);
    }
    slots.release_all();
    assert_eq!(HANDED.get(), (HAND_OFF - 1, 2));
}

#[test]
fn what_a_slab_hands_over_fits_in_a_chunks_header() {
    // The driver's queue of hand-offs holds 4,096 of them (`elsewhere.rs`).
    type Held = Entry<crate::driver::job::Job>;
    assert_eq!(
        std::mem::size_of::<Freed<Held>>(),
        std::mem::size_of::<Chunk<Held>>()
    );
}
