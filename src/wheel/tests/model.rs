//! A model test against a `BTreeMap`.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;

/// One step of the model test.
#[derive(Clone, Debug)]
enum Op {
    Insert(u64),
    /// Removes live entry `i % live`, scheduled or fired.
    Remove(usize),
    /// Cancels live entry `i % live` as the driver does: a scheduled one by
    /// `discard` (its unlinking, and its value, may wait for a flush), a
    /// fired one by `remove_scheduled`.
    Discard(usize),
    /// Moves live entry `i % live`, scheduled or fired, `d` ticks from now.
    Reset(usize, u64),
    /// Advances `d` ticks; fired entries are freed at once if `collect`,
    /// otherwise they stay in the slab until removed or reset.
    Advance(u64, bool),
    /// Advances `d` ticks but hands out at most `k` entries, as a pass does
    /// in batches with the lock released between them: the rest stay due
    /// (some maybe in the level-0 slot being handed out) while other
    /// operations run, and `elapsed` may stay behind `now`.
    PopSome(u64, usize),
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
        2 => (0u64..200, 1usize..4).prop_map(|(d, k)| Op::PopSome(d, k)),
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
/// more than a chunk of its slab.
fn run_model(slots: usize, ops: &[Op]) {
    let mut wheel: Wheel<u64> = Wheel::new(slots);
    let mut reference: BTreeMap<(u64, u64), Key> = BTreeMap::new();
    let mut live: Vec<Live> = Vec::new();
    let mut dead: Vec<Key> = Vec::new();
    // Discarded and not yet flushed: their keys (stale once flushed), and
    // the values a flush owes `take_dead`.
    let mut limbo: Vec<Key> = Vec::new();
    let mut owed: Vec<u64> = Vec::new();
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
                // The driver's rule (`Shard::cancel`): by the deadline alone,
                // a deadline after `elapsed` is surely scheduled.
                if e.deadline > wheel.elapsed() {
                    assert!(!e.fired, "{e:?} fired, its deadline after elapsed");
                    assert_eq!(wheel.is_scheduled(e.key), Some(true));
                }
                if e.deadline <= wheel.elapsed() {
                    let scheduled = !e.fired;
                    assert_eq!(wheel.remove_scheduled(e.key), Some((e.id, scheduled)));
                    if scheduled {
                        assert!(reference.remove(&(e.deadline, e.id)).is_some());
                    }
                    dead.push(e.key);
                } else {
                    assert!(reference.remove(&(e.deadline, e.id)).is_some());
                    match wheel.discard(e.key) {
                        Some(value) => {
                            assert_eq!(value, e.id);
                            dead.push(e.key);
                        }
                        None => {
                            owed.push(e.id);
                            limbo.push(e.key);
                        }
                    }
                }
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
                        assert!(deadline > wheel.elapsed());
                        reference.insert((deadline, e.id), e.key);
                        live[i].fired = false;
                    }
                    Some(false) => {
                        // Due already: left fired, for its owner to free.
                        assert!(deadline <= wheel.elapsed());
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
            Op::PopSome(d, k) => {
                now = now.saturating_add(d);
                for _ in 0..k {
                    let Some(key) = wheel.pop_expired(now) else {
                        assert_eq!(wheel.elapsed(), now);
                        break;
                    };
                    let deadline = wheel.deadline(key).unwrap();
                    let id = *wheel.value_mut(key).unwrap();
                    // The earliest the model holds, or tied with it.
                    let &(earliest, _) = reference.keys().next().expect("fired nothing pending");
                    assert_eq!(deadline, earliest, "out of deadline order");
                    assert!(deadline <= now, "fired early");
                    assert!(
                        reference.remove(&(deadline, id)).is_some(),
                        "fired {id} twice"
                    );
                    let e = live.iter_mut().find(|e| e.id == id).unwrap();
                    assert_eq!(e.key, key);
                    e.fired = true;
                }
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
        for value in wheel.take_dead() {
            let at = owed.iter().position(|&o| o == value);
            owed.swap_remove(at.unwrap_or_else(|| panic!("{value} handed back, not owed")));
        }
        if wheel.discarded() == 0 {
            assert_eq!(owed, [], "flushed, not handed back");
            dead.append(&mut limbo);
        }
        assert_eq!(wheel.scheduled(), reference.len());
        assert_eq!(wheel.len(), live.len() + wheel.discarded());
        match reference.keys().next() {
            // Discarded entries still hold their slots until flushed: the
            // next expiration may name one (one early look, never a miss).
            None if wheel.discarded() > 0 => {}
            None => assert_eq!(wheel.next_expiration(), None),
            Some(&(earliest, _)) => {
                // After a `PopSome`, entries due by `elapsed` may be left:
                // then the next expiration is `elapsed` itself.
                let next = wheel.next_expiration().unwrap();
                let elapsed = wheel.elapsed();
                assert!(
                    next <= earliest.max(elapsed) && (next > elapsed || earliest <= elapsed),
                    "next expiration {next}, elapsed {elapsed}, earliest {earliest}"
                );
            }
        }
        if wheel.len() == 0 {
            assert!(wheel.allocated_entries() <= TRIM_FLOOR);
        }
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

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// Longer programs: in tests a chunk is 4 slots, so the slab allocates
    /// and frees chunks all the time, and nothing the model sees may change.
    #[test]
    fn model_longer_programs(
        slots in prop::sample::select(vec![2usize, 4, 64]),
        ops in prop::collection::vec(op(), 1..300),
    ) {
        run_model(slots, &ops);
    }
}
