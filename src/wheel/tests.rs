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

/// One step of the model test.
#[derive(Clone, Debug)]
enum Op {
    Insert(u64),
    Remove(usize),
    Reset(usize, u64),
    Advance(u64),
}

fn delay() -> impl Strategy<Value = u64> {
    prop_oneof![
        4 => 0u64..20,
        3 => 0u64..5_000,
        2 => 0u64..10_000_000,
        1 => Just(u64::MAX),
        1 => any::<u64>(),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => delay().prop_map(Op::Insert),
        2 => any::<usize>().prop_map(Op::Remove),
        2 => (any::<usize>(), delay()).prop_map(|(i, d)| Op::Reset(i, d)),
        3 => delay().prop_map(Op::Advance),
    ]
}

/// Runs `ops` on a wheel and on a `BTreeMap` of (deadline, id), checking that
/// the same entries expire, in deadline order, none before its deadline.
fn run_model(slots: usize, ops: &[Op]) {
    let mut wheel: Wheel<u64> = Wheel::new(slots);
    let mut reference: BTreeMap<(u64, u64), Key> = BTreeMap::new();
    let mut live: Vec<(u64, u64, Key)> = Vec::new(); // (id, deadline, key)
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
                        live.push((id, deadline, key));
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
                let (id, deadline, key) = live.swap_remove(i % live.len());
                assert_eq!(wheel.remove(key), Some(id));
                assert!(reference.remove(&(deadline, id)).is_some());
            }
            Op::Reset(i, d) if !live.is_empty() => {
                let i = i % live.len();
                let (id, old, key) = live[i];
                let deadline = now.saturating_add(d);
                reference.remove(&(old, id)).unwrap();
                match wheel.reset(key, deadline) {
                    Some(true) => {
                        reference.insert((deadline, id), key);
                        live[i].1 = deadline;
                    }
                    Some(false) => {
                        assert!(deadline <= now);
                        assert_eq!(wheel.remove(key), Some(id));
                        live.swap_remove(i);
                    }
                    None => panic!("live key went stale"),
                }
            }
            Op::Advance(d) => {
                now = now.saturating_add(d);
                let fired = drain(&mut wheel, now);
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
                live.retain(|(id, deadline, _)| reference.contains_key(&(*deadline, *id)));
                assert_eq!(wheel.elapsed(), now);
            }
            _ => {}
        }
        wheel.assert_invariants();
        assert_eq!(wheel.scheduled(), reference.len());
        assert_eq!(wheel.len(), reference.len());
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn model_2_slots(ops in prop::collection::vec(op(), 1..200)) {
        run_model(2, &ops);
    }

    #[test]
    fn model_4_slots(ops in prop::collection::vec(op(), 1..200)) {
        run_model(4, &ops);
    }

    #[test]
    fn model_64_slots(ops in prop::collection::vec(op(), 1..200)) {
        run_model(64, &ops);
    }
}
