//! How an entry keeps the deadline it was given: in 8 bytes rather than an
//! `Instant`'s 16, so that an entry of a `DelayQueue<u64>` takes 40 bytes
//! of the slab rather than 48 (tokio-util's takes 56).
//!
//! The deadline is kept as the driver's [`Deadline`] does, nanoseconds from
//! one process-wide base, in an `i64`: exact (it converts back to the very
//! `Instant`), and 64-bit arithmetic turns it into a tick. An `i64` spans
//! 292 years either side of the base; a deadline beyond that (an
//! `insert_at` centuries away) is kept as [`FAR`], its `Instant` in
//! [`Far`], a map beside the queue that is empty, and never looked at,
//! otherwise. A `BTreeMap`: it grows and shrinks a node at a time, where a
//! `HashMap` reallocated (and rehashed) all of itself in one insert, 6.6
//! MB at 115,000 far deadlines.

use std::collections::BTreeMap;

use tokio::time::Instant;

use crate::driver::Deadline;
use crate::wheel::Key;

/// "The deadline is in [`Far`]": never a [`Deadline::to_i64`] value.
pub(super) const FAR: i64 = i64::MIN;

/// `deadline` as an entry keeps it, or [`FAR`].
#[inline]
pub(super) fn encode(deadline: Instant) -> i64 {
    Deadline::from_instant(deadline).to_i64().unwrap_or(FAR)
}

/// The deadlines kept as [`FAR`], by the key handed out for the entry
/// (which stays the same through `compact`). Its room goes with them.
#[derive(Default)]
pub(super) struct Far(BTreeMap<Key, Instant>);

impl Far {
    /// Keeps the far `deadline` of the entry `key` names.
    pub(super) fn keep(&mut self, key: Key, deadline: Instant) {
        self.0.insert(key, deadline);
    }

    /// Forgets the far deadline of the entry `key` names (reset to a near one).
    pub(super) fn forget(&mut self, key: Key) {
        self.0.remove(&key);
    }

    /// The deadline of the entry `key` names, kept as `at`.
    #[inline]
    pub(super) fn get(&self, key: Key, at: i64) -> Instant {
        if at == FAR {
            return *self.0.get(&key).expect("a far deadline is kept");
        }
        decode(at)
    }

    /// [`get`](Far::get), for an entry leaving the queue: it is forgotten.
    #[inline]
    pub(super) fn take(&mut self, key: Key, at: i64) -> Instant {
        if at == FAR {
            return self.0.remove(&key).expect("a far deadline is kept");
        }
        decode(at)
    }

    pub(super) fn clear(&mut self) {
        *self = Far::default();
    }
}

/// The `Instant` an `i64` other than [`FAR`] stands for.
#[inline]
fn decode(at: i64) -> Instant {
    Deadline::from_bits(at as i128 as u128).instant()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_deadline_comes_back_exactly_near_or_far() {
        let now = Instant::now();
        let mut far = Far::default();
        let key = |index| Key {
            index,
            generation: 1,
        };
        for (i, deadline) in [
            now,
            now + Duration::from_nanos(1),
            now + Duration::from_secs(86_400 * 365 * 30),
            now + Duration::from_secs(86_400 * 365 * 1000),
            now.checked_sub(Duration::from_secs(1)).unwrap_or(now),
        ]
        .into_iter()
        .enumerate()
        {
            let at = encode(deadline);
            if at == FAR {
                far.keep(key(i as u32), deadline);
            }
            assert_eq!(far.get(key(i as u32), at), deadline);
            assert_eq!(at == FAR, i == 3, "only the millennium is far");
        }
        assert_eq!(far.0.len(), 1);
        assert_eq!(
            far.take(key(3), FAR),
            now + Duration::from_secs(86_400 * 365 * 1000)
        );
        assert!(far.0.is_empty());
        far.keep(key(5), now);
        far.forget(key(5));
        assert!(far.0.is_empty());
    }

    /// The far deadlines of entries gone are forgotten, and with them their
    /// room (a node at a time); a kept one survives `compact`.
    #[test]
    fn far_deadlines_go_with_their_entries_and_survive_compact() {
        let timer = crate::Timer::builder().manual().build().unwrap();
        let far = timer.now() + Duration::from_secs(86_400 * 365 * 1000);
        let mut queue = super::super::DelayQueue::with_timer(timer);
        let keys: Vec<_> = (0..1000).map(|i| queue.insert_at(i, far)).collect();
        let kept = queue.insert_at(1000, far);
        for key in &keys {
            queue.remove(key);
        }
        assert_eq!(queue.far.0.len(), 1);
        queue.compact();
        assert_eq!(queue.deadline(&kept), far);
        assert_eq!(queue.remove(&kept).into_inner(), 1000);
        assert!(queue.far.0.is_empty());
    }
}
