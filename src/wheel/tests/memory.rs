//! Memory: the policy of `wheel/memory.rs` and the chunked slab's cost per
//! call.

use super::*;

/// A deterministic shuffle (splitmix64), so removal order is not the
/// insertion order the slab would handle best.
fn shuffle<X>(items: &mut [X], mut seed: u64) {
    for i in (1..items.len()).rev() {
        seed = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = seed;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        items.swap(i, (z % (i as u64 + 1)) as usize);
    }
}

/// What must come back to baseline: slab capacity, levels, level storage.
fn footprint<T>(wheel: &Wheel<T>) -> (usize, usize, usize) {
    (
        wheel.allocated_entries(),
        wheel.levels(),
        wheel.level_bytes(),
    )
}

/// Deadlines spread over four levels of a 64-slot wheel.
fn spread(i: u64) -> u64 {
    1 + i.wrapping_mul(2_654_435_761) % 10_000_000
}

#[test]
#[cfg_attr(miri, ignore = "a million entries take hours under Miri")]
fn a_million_cancelled_timers_leave_the_wheel_at_its_baseline() {
    let mut wheel: Wheel<u64> = Wheel::new(64);
    let baseline = footprint(&wheel);
    assert_eq!(baseline.0, 0);
    let mut keys: Vec<Key> = (0..1_000_000)
        .map(|i| wheel.try_insert(spread(i), i).unwrap())
        .collect();
    assert!(wheel.allocated_entries() >= 1_000_000);
    assert!(wheel.levels() >= 4);
    let peak = wheel.allocated_entries();
    shuffle(&mut keys, 1);
    for key in keys {
        wheel.remove(key).unwrap();
        assert!(wheel.allocated_entries() <= peak, "grew while shrinking");
    }
    wheel.assert_invariants();
    let after = footprint(&wheel);
    assert_eq!(after, baseline);
}

#[test]
#[cfg_attr(miri, ignore = "a million entries take hours under Miri")]
fn a_million_fired_timers_leave_the_wheel_at_its_baseline() {
    let mut wheel: Wheel<u64> = Wheel::new(64);
    let baseline = footprint(&wheel);
    for i in 0..1_000_000 {
        wheel.try_insert(spread(i), i).unwrap();
    }
    let mut fired = 0;
    // Fired in several sweeps; each entry's owner frees it as it fires.
    for now in [1_000, 100_000, 5_000_000, 10_000_000] {
        while let Some(key) = wheel.pop_expired(now) {
            wheel.remove(key).unwrap();
            fired += 1;
        }
    }
    assert_eq!(fired, 1_000_000);
    wheel.assert_invariants();
    let after = footprint(&wheel);
    assert_eq!(after, baseline);
}

#[test]
fn a_survivor_holds_its_chunk_not_the_slab_below_it() {
    let mut wheel: Wheel<u64> = Wheel::new(64);
    let keys: Vec<Key> = (0..10_000)
        .map(|i| wheel.try_insert(5 + i, i).unwrap())
        .collect();
    let (&survivor, rest) = keys.split_last().unwrap();
    for &key in rest {
        wheel.remove(key).unwrap();
    }
    // Its own chunk, the spare and chunk 0 at most.
    assert_eq!(wheel.len(), 1);
    let held = wheel.allocated_entries();
    assert!(held <= 3 * TRIM_FLOOR, "{held} slots held for one entry");
    // New timers fill the lowest chunks again (after the first, which
    // takes the slot the last removal freed).
    let fresh: Vec<Key> = (0..5_000)
        .map(|i| wheel.try_insert(7, i).unwrap())
        .collect();
    assert!(fresh[1..].iter().all(|key| (key.index as usize) < 5_000));
    wheel.remove(survivor).unwrap();
    for key in fresh {
        wheel.remove(key).unwrap();
    }
    assert_eq!(wheel.allocated_entries(), 0);
    wheel.assert_invariants();
}

#[test]
fn entries_removed_from_the_top_give_their_chunks_back_as_they_go() {
    let mut wheel: Wheel<u64> = Wheel::new(64);
    let keys: Vec<Key> = (0..8_192)
        .map(|i| wheel.try_insert(5 + i, i).unwrap())
        .collect();
    // Free from the top down, keeping the lowest 1000.
    for &key in keys[1000..].iter().rev() {
        wheel.remove(key).unwrap();
        assert!(wheel.allocated_entries() <= wheel.len() + 2 * TRIM_FLOOR);
    }
    assert_eq!(wheel.len(), 1000);
    // The live entries are untouched.
    for (i, &key) in keys[..1000].iter().enumerate() {
        assert_eq!(wheel.deadline(key), Some(5 + i as u64));
    }
    wheel.assert_invariants();
}

/// The work a call does with memory, in slots allocated or freed: no
/// insert or removal changes the capacity by more than a chunk, or (the
/// removal that empties the wheel) three, in creation order, newest first
/// and shuffled. (`tests/worst_case.rs` counts the bytes, directory
/// included, at a million sleeps.)
#[test]
fn no_insert_or_removal_allocates_or_frees_more_than_a_chunk_or_two() {
    for order in 0..3 {
        let mut wheel: Wheel<u64> = Wheel::new(64);
        let mut keys = Vec::new();
        let mut capacity = 0;
        for i in 0..4_000 {
            keys.push(wheel.try_insert(spread(i), i).unwrap());
            let now = wheel.allocated_entries();
            assert!(
                now - capacity <= TRIM_FLOOR,
                "insert {i} grew by {}",
                now - capacity
            );
            capacity = now;
        }
        match order {
            0 => {}
            1 => keys.reverse(),
            _ => shuffle(&mut keys, 7),
        }
        let n = keys.len();
        for (i, key) in keys.into_iter().enumerate() {
            wheel.remove(key).unwrap();
            let now = wheel.allocated_entries();
            let most = if i + 1 == n { 3 } else { 1 } * TRIM_FLOOR;
            assert!(now <= capacity, "removal {i} grew the slab");
            assert!(
                capacity - now <= most,
                "removal {i} freed {}",
                capacity - now
            );
            capacity = now;
        }
        assert_eq!(capacity, 0);
    }
}

/// As above, by `discard`, the driver's cancel: a flush of a batch used to
/// empty, and free, up to a batch of chunks (shuffled order). Now no call
/// frees more than one chunk, or three when it empties the wheel, in work
/// counted in slots, whichever order the entries go in.
#[test]
fn no_discard_frees_more_than_a_chunk_or_three_when_it_empties_the_wheel() {
    for order in 0..3 {
        let mut wheel: Wheel<u64> = Wheel::new(64);
        let mut keys: Vec<Key> = (0..4_000)
            .map(|i| wheel.try_insert(spread(i), i).unwrap())
            .collect();
        match order {
            0 => {}
            1 => keys.reverse(),
            _ => shuffle(&mut keys, 11),
        }
        let mut capacity = wheel.allocated_entries();
        let n = keys.len();
        for (i, key) in keys.into_iter().enumerate() {
            wheel.discard(key);
            let now = wheel.allocated_entries();
            let most = if i + 1 == n { 3 } else { 1 } * TRIM_FLOOR;
            assert!(
                capacity - now <= most,
                "order {order}: discard {i} freed {} slots",
                capacity - now
            );
            capacity = now;
            if i % 97 == 0 {
                wheel.assert_invariants();
            }
        }
        assert_eq!((capacity, wheel.len()), (0, 0), "order {order}");
    }
}

/// A removal that leaves a chunk holding discarded entries only flushes
/// them then, so that a later flush does not empty that chunk beside
/// another.
#[test]
fn a_removal_leaving_a_chunk_only_discarded_entries_flushes_them() {
    let mut wheel: Wheel<u64> = Wheel::new(64);
    // Chunks 0 and 1 full and one entry in chunk 2 (the latest, which a
    // discard would remove at once), all in one slot: each has neighbours.
    let keys: Vec<Key> = (0..2 * TRIM_FLOOR as u64 + 1)
        .map(|i| wheel.try_insert(100, i).unwrap())
        .collect();
    let (chunk1_first, chunk1_rest) = keys[TRIM_FLOOR..2 * TRIM_FLOOR].split_first().unwrap();
    for &key in chunk1_rest {
        assert_eq!(wheel.discard(key), None, "batched");
    }
    assert_eq!(wheel.discarded(), TRIM_FLOOR - 1, "batched");
    wheel.assert_invariants();
    // Emptying a chunk with no discarded entry (chunk 2) leaves the batch.
    let last = keys[2 * TRIM_FLOOR];
    assert_eq!(wheel.remove(last), Some(2 * TRIM_FLOOR as u64));
    assert_eq!(wheel.discarded(), TRIM_FLOOR - 1, "still batched");
    assert_eq!(wheel.remove(*chunk1_first), Some(TRIM_FLOOR as u64));
    assert_eq!(wheel.discarded(), 0, "flushed with the chunk's last entry");
    assert_eq!(wheel.len(), TRIM_FLOOR);
    wheel.assert_invariants();
}

#[test]
fn a_timer_started_and_cancelled_at_a_chunks_edge_allocates_nothing() {
    let mut wheel: Wheel<u64> = Wheel::new(64);
    let full: Vec<Key> = (0..3 * TRIM_FLOOR as u64)
        .map(|i| wheel.try_insert(5 + i, i).unwrap())
        .collect();
    let first = wheel.try_insert(9, 0).unwrap();
    wheel.remove(first).unwrap();
    // The emptied chunk is kept as the spare: nothing more is allocated
    // or freed, however often it is used.
    let capacity = wheel.allocated_entries();
    for i in 0..1_000 {
        let key = wheel.try_insert(9, i).unwrap();
        assert_eq!(key.index, first.index);
        wheel.remove(key).unwrap();
        assert_eq!(wheel.allocated_entries(), capacity);
    }
    drop(full);
    wheel.assert_invariants();
}

#[test]
fn a_wheel_that_never_grew_past_a_chunk_keeps_it_and_its_levels() {
    let mut wheel: Wheel<u64> = Wheel::new(64);
    // Three rounds already show it; a hundred are too slow under Miri.
    let rounds = if cfg!(miri) { 3 } else { 100 };
    for round in 0..rounds {
        let keys: Vec<Key> = (0..TRIM_FLOOR as u64)
            .map(|i| wheel.try_insert(5 + i + round, i).unwrap())
            .collect();
        for key in keys {
            wheel.remove(key).unwrap();
        }
        assert_eq!(wheel.allocated_entries(), TRIM_FLOOR);
    }
    // A lone far timer started and cancelled in a loop keeps its levels.
    let far = wheel.try_insert(u64::MAX - 1, 0).unwrap();
    let levels = wheel.levels();
    assert!(levels > 1);
    wheel.remove(far).unwrap();
    assert_eq!(wheel.levels(), levels);
}

#[test]
fn empty_upper_levels_are_freed_when_a_grown_wheel_empties() {
    let mut wheel: Wheel<u64> = Wheel::new(4);
    let one_level = wheel.level_bytes();
    let low = wheel.try_insert(2, 0).unwrap();
    let far: Vec<Key> = (0..100)
        .map(|i| wheel.try_insert(u64::MAX - i, i).unwrap())
        .collect();
    assert_eq!(wheel.levels(), max_levels(2));
    assert!(wheel.level_bytes() > one_level);
    for key in far {
        wheel.remove(key).unwrap();
    }
    // Levels go when the wheel empties, not with the entries above them.
    assert_eq!(wheel.levels(), max_levels(2));
    // Fired and freed: the wheel empties.
    assert_eq!(drain(&mut wheel, 2), vec![(2, 0)]);
    assert_eq!(wheel.remove(low), None);
    assert_eq!(wheel.levels(), 1);
    assert_eq!(wheel.level_bytes(), one_level);
    assert_eq!(wheel.allocated_entries(), 0);
}

#[test]
fn a_stale_key_never_matches_an_entry_in_a_truncated_and_regrown_slab() {
    let mut wheel: Wheel<u64> = Wheel::new(64);
    let keys: Vec<Key> = (0..2_000)
        .map(|i| wheel.try_insert(5 + i, i).unwrap())
        .collect();
    let stale = *keys.last().unwrap();
    for key in keys {
        wheel.remove(key).unwrap();
    }
    // Emptied above the floor: the slab is gone, slots and all.
    assert_eq!(wheel.allocated_entries(), 0);
    let fresh: Vec<Key> = (0..2_000)
        .map(|i| wheel.try_insert(9, i).unwrap())
        .collect();
    let same_slot = fresh.iter().find(|k| k.index == stale.index).unwrap();
    assert_ne!(same_slot.generation, stale.generation);
    assert_eq!(wheel.remove(stale), None);
    assert_eq!(wheel.reset(stale, 100), None);
    assert_eq!(wheel.value_mut(stale), None);
    assert_eq!(wheel.is_scheduled(stale), None);
    assert_eq!(wheel.is_scheduled(*same_slot), Some(true));
}
