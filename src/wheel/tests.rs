use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;

fn drain(wheel: &mut Wheel<u64>, now: u64) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    while let Some(key) = wheel.pop_expired(now) {
        let deadline = wheel.deadline(key).unwrap();
        let value = wheel.remove(key).unwrap();
        out.push((deadline, value));
    }
    wheel.assert_invariants();
    out
}

#[test]
fn fires_at_its_tick_not_before() {
    let mut wheel = Wheel::new(64);
    wheel.try_insert(10, 1).unwrap();
    assert!(drain(&mut wheel, 9).is_empty());
    assert_eq!(wheel.elapsed(), 9);
    assert_eq!(drain(&mut wheel, 10), vec![(10, 1)]);
    assert_eq!(wheel.scheduled(), 0);
}

#[test]
fn a_deadline_not_after_elapsed_is_handed_back() {
    let mut wheel = Wheel::new(64);
    drain(&mut wheel, 100);
    assert_eq!(wheel.try_insert(100, 7), Err(7));
    assert_eq!(wheel.try_insert(3, 8), Err(8));
    assert!(wheel.try_insert(101, 9).is_ok());
}

#[test]
fn an_hour_with_one_timer_costs_a_handful_of_steps() {
    // 1 ms ticks: an hour is 3.6 million ticks.
    let hour = 3_600_000;
    let mut wheel = Wheel::new(64);
    wheel.try_insert(hour, 1).unwrap();
    assert_eq!(drain(&mut wheel, hour), vec![(hour, 1)]);
    assert!(
        wheel.slots_processed <= 5,
        "took {} steps",
        wheel.slots_processed
    );
}

#[test]
fn overflow_levels_appear_on_demand() {
    let mut wheel = Wheel::new(64);
    assert_eq!(wheel.levels(), 1);
    wheel.try_insert(63, 0).unwrap();
    assert_eq!(wheel.levels(), 1);
    wheel.try_insert(64, 0).unwrap();
    assert_eq!(wheel.levels(), 2);
    wheel.try_insert(u64::MAX, 0).unwrap();
    assert_eq!(wheel.levels(), max_levels(6));
    wheel.assert_invariants();
}

#[test]
fn u64_max_and_tiny_geometries() {
    for slots in [2, 4, 8, 64, 4096] {
        let mut wheel = Wheel::new(slots);
        wheel.try_insert(u64::MAX, 1).unwrap();
        wheel.try_insert(u64::MAX - 1, 2).unwrap();
        wheel.try_insert(1 << 63, 3).unwrap();
        assert!(drain(&mut wheel, (1 << 63) - 1).is_empty());
        assert_eq!(
            drain(&mut wheel, u64::MAX - 1),
            vec![(1 << 63, 3), (u64::MAX - 1, 2)]
        );
        assert_eq!(drain(&mut wheel, u64::MAX), vec![(u64::MAX, 1)]);
    }
}

#[test]
fn remove_and_reset_unlink_in_place() {
    let mut wheel = Wheel::new(4);
    let a = wheel.try_insert(5, 1).unwrap();
    let b = wheel.try_insert(5, 2).unwrap();
    let c = wheel.try_insert(500, 3).unwrap();
    assert_eq!(wheel.remove(b), Some(2));
    assert_eq!(wheel.remove(b), None, "second remove of a key");
    assert_eq!(wheel.reset(c, 6), Some(true));
    wheel.assert_invariants();
    assert_eq!(drain(&mut wheel, 10), vec![(5, 1), (6, 3)]);
    assert_eq!(wheel.remove(a), None, "stale key after the entry was freed");
}

#[test]
fn a_reset_within_its_slot_moves_the_deadline_without_relinking() {
    // 64 slots: ticks 1024..1087 share one level-1 slot while elapsed is 0.
    let mut wheel: Wheel<u64> = Wheel::new(64);
    let key = wheel.try_insert(1030, 7).unwrap();
    let other = wheel.try_insert(1030, 8).unwrap();
    let stays = |wheel: &Wheel<u64>, deadline| {
        let place = wheel.entries[key.index as usize].place;
        stays_in_its_slot(place, wheel.elapsed, wheel.bits, deadline)
    };
    assert!(stays(&wheel, 1080));
    assert!(!stays(&wheel, 1100), "the next slot");
    assert_eq!(wheel.reset(key, 1080), Some(true));
    wheel.assert_invariants();
    assert_eq!(drain(&mut wheel, 1079), [(1030, 8)]);
    assert_eq!(drain(&mut wheel, 1080), [(1080, 7)]);
    assert_eq!(wheel.remove(other), None, "drained");
}

#[test]
fn a_reset_later_stays_linked_early_and_moves_on_when_its_slot_comes() {
    // 64 slots: tick 30 is in level 0; 5000 and 9000 belong to level 2.
    let mut wheel: Wheel<u64> = Wheel::new(64);
    let key = wheel.try_insert(30, 7).unwrap();
    for deadline in [100, 5000, 9000] {
        assert_eq!(wheel.reset(key, deadline), Some(true));
    }
    assert!(wheel.lazy_resets, "left in the slot of tick 30");
    assert_eq!(
        wheel.entries[key.index as usize].place,
        Place::Level { level: 0, slot: 30 }
    );
    wheel.assert_invariants();
    // The driver may be woken for tick 30; nothing fires there.
    assert_eq!(wheel.next_expiration(), Some(30));
    assert_eq!(drain(&mut wheel, 30), []);
    wheel.assert_invariants();
    assert!(wheel.next_expiration().is_some_and(|next| next > 30));
    assert_eq!(drain(&mut wheel, 8999), []);
    assert_eq!(wheel.is_scheduled(key), Some(true));
    assert_eq!(drain(&mut wheel, 9000), [(9000, 7)]);
}

#[test]
fn a_reset_earlier_relinks_at_once() {
    let mut wheel: Wheel<u64> = Wheel::new(64);
    let key = wheel.try_insert(5000, 7).unwrap();
    assert_eq!(wheel.reset(key, 30), Some(true));
    assert!(!wheel.lazy_resets);
    wheel.assert_invariants();
    assert_eq!(wheel.next_expiration(), Some(30));
    assert_eq!(drain(&mut wheel, 30), [(30, 7)]);
}

#[test]
fn a_stale_key_never_touches_a_reused_slot() {
    let mut wheel = Wheel::new(64);
    let old = wheel.try_insert(5, 1).unwrap();
    wheel.remove(old).unwrap();
    let new = wheel.try_insert(7, 2).unwrap();
    assert_eq!(old.index, new.index, "slab reuses the index");
    assert_eq!(wheel.remove(old), None);
    assert_eq!(wheel.reset(old, 100), None);
    assert_eq!(wheel.value_mut(old), None);
    assert_eq!(wheel.is_scheduled(new), Some(true));
}

#[test]
fn reset_into_the_past_leaves_it_expired() {
    let mut wheel = Wheel::new(64);
    drain(&mut wheel, 50);
    let k = wheel.try_insert(80, 1).unwrap();
    assert_eq!(wheel.reset(k, 50), Some(false));
    assert_eq!(wheel.is_scheduled(k), Some(false));
    assert_eq!(wheel.scheduled(), 0);
    // An expired entry can be scheduled again.
    assert_eq!(wheel.reset(k, 60), Some(true));
    assert_eq!(drain(&mut wheel, 60), vec![(60, 1)]);
}

#[test]
fn expired_entries_stay_until_removed() {
    let mut wheel = Wheel::new(64);
    let k = wheel.try_insert(3, 1).unwrap();
    assert_eq!(wheel.pop_expired(3), Some(k));
    assert_eq!(wheel.is_scheduled(k), Some(false));
    assert_eq!(wheel.len(), 1);
    assert_eq!(wheel.scheduled(), 0);
    assert_eq!(wheel.remove(k), Some(1));
    assert_eq!(wheel.len(), 0);
}

#[test]
fn next_expiration_is_never_after_the_earliest_deadline() {
    let mut wheel = Wheel::new(8);
    assert_eq!(wheel.next_expiration(), None);
    wheel.try_insert(1000, 0).unwrap();
    let next = wheel.next_expiration().unwrap();
    assert!(next <= 1000 && next > 0);
    wheel.try_insert(3, 0).unwrap();
    assert_eq!(wheel.next_expiration(), Some(3));
}

// ---------------------------------------------------------------------------
// Memory: the trim policy of `memory.rs`
// ---------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------
// Model test against a `BTreeMap`
// ---------------------------------------------------------------------------

/// One step of the model test.
#[derive(Clone, Debug)]
enum Op {
    Insert(u64),
    /// Removes live entry `i % live`, scheduled or fired.
    Remove(usize),
    /// Discards live entry `i % live`, scheduled or fired: as `Remove`, but
    /// the unlinking may wait for a flush.
    Discard(usize),
    /// Moves live entry `i % live`, scheduled or fired, `d` ticks from now.
    Reset(usize, u64),
    /// Advances `d` ticks; fired entries are freed at once if `collect`,
    /// otherwise they stay in the slab until removed or reset.
    Advance(u64, bool),
    /// Moves entries down the slab ([`Wheel::compact`]): the model's keys
    /// are translated as the owner's must be, and nothing else may change.
    Compact,
    /// Uses key `i % dead` of a removed entry: it must be stale.
    Stale(usize),
}

fn delay() -> impl Strategy<Value = u64> {
    prop_oneof![
        4 => 0u64..20,
        3 => 0u64..5_000,
        2 => 0u64..10_000_000,
        1 => Just(u64::MAX),
        1 => any::<u64>(),
        1 => (32u32..64).prop_map(|bit| 1u64 << bit),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => delay().prop_map(Op::Insert),
        2 => any::<usize>().prop_map(Op::Remove),
        2 => any::<usize>().prop_map(Op::Discard),
        2 => (any::<usize>(), delay()).prop_map(|(i, d)| Op::Reset(i, d)),
        3 => (delay(), prop::bool::weighted(0.7)).prop_map(|(d, c)| Op::Advance(d, c)),
        1 => any::<usize>().prop_map(Op::Stale),
        1 => Just(Op::Compact),
    ]
}

/// A live entry of the model: scheduled, or fired and not yet removed.
#[derive(Clone, Copy, Debug)]
struct Live {
    id: u64,
    deadline: u64,
    key: Key,
    fired: bool,
}

/// Runs `ops` on a wheel and on a `BTreeMap` of (deadline, id), checking that
/// the same entries expire, in deadline order, none before its deadline,
/// each exactly once; that removed keys stay stale; that `next_expiration`
/// never passes the earliest deadline; and that an empty wheel holds no
/// more than its trim floor.
fn run_model(slots: usize, trim_floor: usize, ops: &[Op]) {
    let mut wheel: Wheel<u64> = Wheel::with_trim_floor(slots, trim_floor);
    let mut reference: BTreeMap<(u64, u64), Key> = BTreeMap::new();
    let mut live: Vec<Live> = Vec::new();
    let mut dead: Vec<Key> = Vec::new();
    let mut now = 0u64;
    let mut next_id = 0u64;
    for op in ops {
        match *op {
            Op::Insert(d) => {
                let deadline = now.saturating_add(d);
                let id = next_id;
                next_id += 1;
                match wheel.try_insert(deadline, id) {
                    Ok(key) => {
                        assert!(deadline > wheel.elapsed());
                        reference.insert((deadline, id), key);
                        live.push(Live {
                            id,
                            deadline,
                            key,
                            fired: false,
                        });
                    }
                    Err(v) => {
                        assert_eq!(v, id);
                        assert!(
                            deadline <= now,
                            "refused a future deadline {deadline} at {now}"
                        );
                    }
                }
            }
            Op::Remove(i) if !live.is_empty() => {
                let e = live.swap_remove(i % live.len());
                assert_eq!(wheel.is_scheduled(e.key), Some(!e.fired));
                assert_eq!(wheel.remove(e.key), Some(e.id));
                assert_eq!(reference.remove(&(e.deadline, e.id)).is_some(), !e.fired);
                dead.push(e.key);
            }
            Op::Discard(i) if !live.is_empty() => {
                let e = live.swap_remove(i % live.len());
                assert_eq!(wheel.discard(e.key), Some(e.id));
                assert_eq!(reference.remove(&(e.deadline, e.id)).is_some(), !e.fired);
                dead.push(e.key);
            }
            Op::Reset(i, d) if !live.is_empty() => {
                let i = i % live.len();
                let e = live[i];
                let deadline = now.saturating_add(d);
                if !e.fired {
                    reference.remove(&(e.deadline, e.id)).unwrap();
                }
                live[i].deadline = deadline;
                match wheel.reset(e.key, deadline) {
                    Some(true) => {
                        assert!(deadline > now);
                        reference.insert((deadline, e.id), e.key);
                        live[i].fired = false;
                    }
                    Some(false) => {
                        // Due already: left fired, for its owner to free.
                        assert!(deadline <= now);
                        live[i].fired = true;
                    }
                    None => panic!("live key went stale"),
                }
            }
            Op::Advance(d, collect) => {
                now = now.saturating_add(d);
                let mut fired = Vec::new();
                while let Some(key) = wheel.pop_expired(now) {
                    let deadline = wheel.deadline(key).unwrap();
                    let id = *wheel.value_mut(key).unwrap();
                    fired.push((deadline, id));
                    let e = live.iter_mut().find(|e| e.id == id).expect("fired twice");
                    assert!(!e.fired, "entry {id} fired twice");
                    assert_eq!(e.key, key);
                    e.fired = true;
                }
                let want: Vec<(u64, u64)> = reference
                    .range(..=(now, u64::MAX))
                    .map(|(&k, _)| k)
                    .collect();
                let mut got_sorted = fired.clone();
                got_sorted.sort();
                assert_eq!(got_sorted, want, "at {now}: fired {fired:?}");
                for w in fired.windows(2) {
                    assert!(w[0].0 <= w[1].0, "out of deadline order: {fired:?}");
                }
                for (deadline, id) in &fired {
                    assert!(*deadline <= now, "fired early");
                    reference.remove(&(*deadline, *id));
                }
                if collect {
                    live.retain(|e| {
                        if e.fired {
                            assert_eq!(wheel.remove(e.key), Some(e.id));
                            dead.push(e.key);
                        }
                        !e.fired
                    });
                }
                assert_eq!(wheel.elapsed(), now);
            }
            Op::Compact => {
                let moved = wheel.compact();
                for (from, to) in moved {
                    assert!(to < from.index, "moved {from:?} up to {to}");
                    let renamed = Key {
                        index: to,
                        generation: from.generation,
                    };
                    let mut found = 0;
                    for entry in live.iter_mut().filter(|e| e.key == from) {
                        entry.key = renamed;
                        found += 1;
                    }
                    assert_eq!(found, 1, "moved {from:?}, which is not live");
                    for key in reference.values_mut().filter(|k| **k == from) {
                        *key = renamed;
                    }
                    assert_eq!(wheel.value_mut(from).copied(), None, "{from:?} moved");
                }
                assert_eq!(wheel.allocated_entries(), wheel.len(), "compacted");
                assert_eq!(wheel.discarded(), 0, "flushed first");
            }
            Op::Stale(i) if !dead.is_empty() => {
                let key = dead[i % dead.len()];
                assert_eq!(wheel.is_scheduled(key), None);
                assert_eq!(wheel.value_mut(key), None);
                assert_eq!(wheel.reset(key, now.saturating_add(1)), None);
                assert_eq!(wheel.remove(key), None);
            }
            _ => {}
        }
        wheel.assert_invariants();
        assert_eq!(wheel.scheduled(), reference.len());
        assert_eq!(wheel.len(), live.len() + wheel.discarded());
        match reference.keys().next() {
            // Discarded entries still hold their slots until flushed: the
            // next expiration may name one (one early look, never a miss).
            None if wheel.discarded() > 0 => {}
            None => assert_eq!(wheel.next_expiration(), None),
            Some(&(earliest, _)) => {
                let next = wheel.next_expiration().unwrap();
                assert!(
                    next > wheel.elapsed() && next <= earliest,
                    "next expiration {next}, elapsed {}, earliest {earliest}",
                    wheel.elapsed()
                );
            }
        }
        if wheel.len() == 0 {
            assert!(wheel.allocated_entries() <= trim_floor);
            if trim_floor == 0 {
                // Every removal that empties it trims: back to one level.
                assert_eq!((wheel.allocated_entries(), wheel.levels()), (0, 1));
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn model_2_slots(ops in prop::collection::vec(op(), 1..200)) {
        run_model(2, TRIM_FLOOR, &ops);
    }

    #[test]
    fn model_4_slots(ops in prop::collection::vec(op(), 1..200)) {
        run_model(4, TRIM_FLOOR, &ops);
    }

    #[test]
    fn model_64_slots(ops in prop::collection::vec(op(), 1..200)) {
        run_model(64, TRIM_FLOOR, &ops);
    }

}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// A floor of a few entries: the slab is trimmed every few removals, and
    /// nothing the model sees may change.
    #[test]
    fn model_trimming_all_the_time(
        slots in prop::sample::select(vec![2usize, 4, 64]),
        floor in 0usize..8,
        ops in prop::collection::vec(op(), 1..300),
    ) {
        run_model(slots, floor, &ops);
    }
}
