//! The wheel's unit tests: its basic promises here, the trim policy in
//! `memory.rs`, and a model test against a `BTreeMap` in `model.rs`.

use super::*;

mod memory;
mod model;

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
fn a_level_0_slot_becomes_due_whole_but_for_an_entry_reset_later() {
    // Tick 30, in level 0: the middle entry of its slot's list was reset
    // later and left there; the slot goes to the due list whole, less it.
    let mut wheel: Wheel<u64> = Wheel::new(64);
    let keys: Vec<Key> = (1..=3).map(|v| wheel.try_insert(30, v).unwrap()).collect();
    assert_eq!(wheel.reset(keys[1], 40), Some(true));
    assert_eq!(
        wheel.entries[keys[1].index as usize].place,
        Place::Level { level: 0, slot: 30 }
    );
    let a = wheel.pop_expired(30).expect("the first is due");
    wheel.assert_invariants();
    assert_eq!(wheel.entries[keys[2].index as usize].place, Place::Due);
    assert_eq!(
        wheel.entries[keys[1].index as usize].place,
        Place::Level { level: 0, slot: 40 }
    );
    assert_eq!(a, keys[0]);
    assert_eq!(wheel.pop_expired(30), Some(keys[2]));
    assert_eq!(wheel.pop_expired(39), None);
    wheel.assert_invariants();
    assert_eq!(wheel.pop_expired(40), Some(keys[1]));
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
