//! Memory: the trim policy of `wheel/memory.rs`.

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
fn capacity_is_bounded_by_the_peak_while_a_survivor_holds_the_top() {
    let mut wheel: Wheel<u64> = Wheel::new(64);
    let keys: Vec<Key> = (0..10_000)
        .map(|i| wheel.try_insert(5 + i, i).unwrap())
        .collect();
    let peak = wheel.allocated_entries();
    let (&survivor, rest) = keys.split_last().unwrap();
    for &key in rest {
        wheel.remove(key).unwrap();
    }
    // Nothing can move, so the entry at the top holds the slab up to it
    // (the trims only dropped the `Vec`'s slack above it).
    assert_eq!(wheel.len(), 1);
    let held = wheel.allocated_entries();
    assert!(
        held <= peak && held > survivor.index as usize,
        "{held} of {peak}"
    );
    // New timers reuse the free slots below it: no growth.
    let fresh: Vec<Key> = (0..5_000)
        .map(|i| wheel.try_insert(7, i).unwrap())
        .collect();
    assert_eq!(wheel.allocated_entries(), held);
    // Once the survivor goes, the slab shrinks to what is live.
    wheel.remove(survivor).unwrap();
    for key in fresh {
        wheel.remove(key).unwrap();
    }
    assert_eq!(wheel.allocated_entries(), 0);
    wheel.assert_invariants();
}

#[test]
fn low_occupancy_releases_the_vacant_tail_while_timers_are_live() {
    let mut wheel: Wheel<u64> = Wheel::new(64);
    let keys: Vec<Key> = (0..8_192)
        .map(|i| wheel.try_insert(5 + i, i).unwrap())
        .collect();
    let peak = wheel.allocated_entries();
    // Free from the top down, keeping the lowest 1000.
    for &key in keys[1000..].iter().rev() {
        wheel.remove(key).unwrap();
    }
    assert_eq!(wheel.len(), 1000);
    let cap = wheel.allocated_entries();
    assert!(
        cap < peak / 2,
        "{cap} of {peak} still allocated for 1000 entries"
    );
    assert!(cap >= 1000);
    // The live entries are untouched.
    for (i, &key) in keys[..1000].iter().enumerate() {
        assert_eq!(wheel.deadline(key), Some(5 + i as u64));
    }
    wheel.assert_invariants();
}

#[test]
#[cfg_attr(miri, ignore = "100,000 removals take hours under Miri")]
fn trimming_is_amortised_over_a_quarter_of_the_capacity() {
    let mut wheel: Wheel<u64> = Wheel::new(64);
    // Hold the top slot so no trim can shrink, then churn below a quarter
    // occupancy: every removal meets the occupancy rule, so only the
    // removal count keeps the trims apart.
    let keys: Vec<Key> = (0..4_096)
        .map(|i| wheel.try_insert(5 + i, i).unwrap())
        .collect();
    let capacity = wheel.allocated_entries();
    for &key in &keys[..keys.len() - 1] {
        wheel.remove(key).unwrap();
    }
    let (trims_before, checks_before) = (wheel.trims, wheel.trim_checks);
    let removals = 100_000u64;
    for i in 0..removals {
        let key = wheel.try_insert(10 + i % 50, i).unwrap();
        wheel.remove(key).unwrap();
    }
    let checks = wheel.trim_checks - checks_before;
    assert_eq!(wheel.allocated_entries(), capacity);
    assert!(
        checks <= removals / (capacity as u64 / 4) + 1,
        "{checks} checks in {removals} removals at capacity {capacity}"
    );
    assert!(checks > 0, "the policy never ran");
    // The live top entry leaves nothing to release: no O(capacity) walk.
    assert_eq!(wheel.trims, trims_before);
}

#[test]
fn a_wheel_below_the_floor_never_trims() {
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
    }
    assert_eq!(wheel.trims, 0);
    assert!(wheel.allocated_entries() <= TRIM_FLOOR);
}

#[test]
fn empty_upper_levels_are_freed_at_the_next_trim() {
    let mut wheel: Wheel<u64> = Wheel::with_trim_floor(4, 0);
    let one_level = wheel.level_bytes();
    let low = wheel.try_insert(2, 0).unwrap();
    let far: Vec<Key> = (0..100)
        .map(|i| wheel.try_insert(u64::MAX - i, i).unwrap())
        .collect();
    assert_eq!(wheel.levels(), max_levels(2));
    assert!(wheel.level_bytes() > one_level);
    let trims = wheel.trims;
    // Newest first, so the slab's tail empties and a trim can release it.
    for key in far.into_iter().rev() {
        wheel.remove(key).unwrap();
    }
    assert!(wheel.trims > trims, "no trim in 100 removals");
    // Levels are freed lazily, by a trim, not by the removal that empties
    // them (a far timer started and cancelled in a loop must not allocate
    // and free levels every time). Churn bursts at level 0 until the next
    // trim.
    let trims = wheel.trims;
    for i in 0..1_000 {
        let burst: Vec<Key> = (0..8)
            .map(|j| wheel.try_insert(3, i + j).unwrap())
            .collect();
        for key in burst.into_iter().rev() {
            wheel.remove(key).unwrap();
        }
        if wheel.trims > trims {
            break;
        }
    }
    assert!(wheel.trims > trims, "no trim in 1000 removals");
    assert_eq!(wheel.levels(), 1);
    assert_eq!(wheel.level_bytes(), one_level);
    assert_eq!(drain(&mut wheel, 2), vec![(2, 0)]);
    assert_eq!(wheel.remove(low), None);
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
