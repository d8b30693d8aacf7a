//! [`Wheel::assert_invariants`]: every structural invariant of a wheel,
//! checked by the tests after each step.

use super::{discard, level_for, slot_for, slot_start, Place, Wheel};

impl<T> Wheel<T> {
    /// Checks every structural invariant; for tests.
    pub(crate) fn assert_invariants(&self) {
        self.entries.assert_invariants();
        let mut seen = 0;
        for (l, level) in self.levels.iter().enumerate() {
            assert_eq!(
                self.occupied_levels & (1 << l) != 0,
                !level.is_empty(),
                "level bitmap disagrees for level {l}"
            );
            for (s, list) in level.slots().iter().enumerate() {
                assert_eq!(
                    level.is_occupied(s),
                    !list.is_empty(),
                    "slot bitmap disagrees at level {l} slot {s}"
                );
                for index in list.keys(&self.entries) {
                    let e = &self.entries[index as usize];
                    assert_eq!(
                        e.place,
                        Place::Level {
                            level: l as u8,
                            slot: s as u16
                        }
                    );
                    assert!(
                        e.deadline > self.elapsed,
                        "scheduled entry at {} but elapsed is {}",
                        e.deadline,
                        self.elapsed
                    );
                    // Linked where its deadline belongs, or, after a reset
                    // to a later deadline, in an earlier slot that will
                    // relink it in time: never in a slot after it.
                    let start = slot_start(self.elapsed, l, s, self.bits);
                    assert!(
                        start <= e.deadline,
                        "entry {:#b} linked at level {l} slot {s}, which starts later at {start:#b}",
                        e.deadline
                    );
                    if !self.lazy_resets {
                        assert_eq!(
                            level_for(self.elapsed, e.deadline, self.bits),
                            l,
                            "entry {} at the wrong level",
                            e.deadline
                        );
                        assert_eq!(slot_for(e.deadline, l, self.bits), s);
                    }
                    seen += 1;
                }
            }
        }
        for index in self.due.keys(&self.entries) {
            let e = &self.entries[index as usize];
            assert_eq!(e.place, Place::Due);
            assert!(e.deadline <= self.elapsed);
            seen += 1;
        }
        assert_eq!(seen, self.scheduled, "scheduled count drifted");
        assert!(
            self.discarded.len() < discard::BATCH,
            "a full batch was not flushed"
        );
        let mut distinct = self.discarded.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), self.discarded.len(), "discarded twice");
        for &index in &self.discarded {
            let e = &self.entries[index as usize];
            assert_ne!(
                e.place,
                Place::Unlinked,
                "discarded entry {index} is unlinked"
            );
        }
    }
}
