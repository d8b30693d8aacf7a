//! A manual clock ([`ManualClock`]) and [`Driver::advance_to`], which moves
//! it and drives the timer's shards: a manual timer's only driver.

use tokio::time::Instant;

use super::{Driver, NEVER};
use crate::sync::{current_thread, Mutex, ThreadId};

/// The time of a manual timer, which only `advance_to` moves.
#[derive(Debug)]
pub(crate) struct ManualClock {
    state: Mutex<State>,
    /// Held through a whole `advance_to`: advances on two threads take
    /// turns, so that each returns only once its own time is processed.
    turn: Mutex<()>,
}

#[derive(Debug)]
struct State {
    now: Instant,
    /// The thread inside `advance_to`, if any: a callback that advances
    /// the clock from within it must not wait for its own turn.
    advancing: Option<ThreadId>,
}

impl ManualClock {
    pub(crate) fn new(now: Instant) -> ManualClock {
        ManualClock {
            state: Mutex::new(State {
                now,
                advancing: None,
            }),
            turn: Mutex::new(()),
        }
    }

    pub(crate) fn now(&self) -> Instant {
        self.state.lock().now
    }

    /// Moves the clock to `to`, never back.
    pub(super) fn set(&self, to: Instant) {
        let mut state = self.state.lock();
        state.now = state.now.max(to);
    }
}

/// Clears the advancing thread when `advance_to` returns, or unwinds.
struct Advancing<'a>(&'a ManualClock);

impl Drop for Advancing<'_> {
    fn drop(&mut self) {
        self.0.state.lock().advancing = None;
    }
}

impl Driver {
    /// Moves a manual timer's clock to `target` (never backwards) and fires
    /// everything due by then before returning. It steps from one expiration
    /// to the next, so a callback (or a task polled on another thread
    /// meanwhile) sees the time it was due at, not `target`.
    ///
    /// Called from inside one of this timer's callbacks, it moves the clock
    /// in one step and returns: the `advance_to` whose pass runs the
    /// callback carries on to the later of the two targets.
    ///
    /// # Panics
    ///
    /// Panics on a runtime timer.
    #[track_caller]
    pub(crate) fn advance_to(&self, target: Instant) {
        let Some(clock) = self.time.manual() else {
            panic!(
                "wheel: advance needs a manual timer (Timer::builder().manual()); \
                 this one follows its runtime's clock"
            );
        };
        let me = current_thread();
        {
            let mut state = clock.state.lock();
            if state.advancing == Some(me) {
                state.now = state.now.max(target);
                return;
            }
        }
        let _turn = clock.turn.lock();
        clock.state.lock().advancing = Some(me);
        let _advancing = Advancing(clock);
        loop {
            // A re-entrant advance may have moved the clock past `target`.
            let target = target.max(clock.now());
            // A shut-down timer fires nothing more: one step to the target.
            // Never a step to `NEVER`, where deadlines beyond the clock's
            // range are clamped: that tick never comes, so stepping there
            // would fire nothing and find it next again, for ever.
            let next = (!self.is_shut_down())
                .then(|| self.next_expiration())
                .flatten()
                .filter(|&tick| tick != NEVER)
                .and_then(|tick| self.clock().instant_at(tick))
                .filter(|&at| at < target);
            clock.set(next.unwrap_or(target));
            for shard in self.shards.iter() {
                shard.pass();
            }
            if next.is_none() && clock.now() <= target {
                return;
            }
        }
    }

    /// When some shard next has work, if any: a manual clock advanced
    /// there fires it, or (for a deadline in a higher level of the wheel)
    /// brings it closer.
    #[cfg(not(loom))]
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.next_expiration()
            .filter(|&tick| tick != NEVER)
            .and_then(|tick| self.clock().instant_at(tick))
    }

    /// The earliest tick at which some shard has work, if any.
    fn next_expiration(&self) -> Option<u64> {
        self.shards
            .iter()
            .filter_map(|shard| shard.lock().wheel.next_expiration())
            .min()
    }
}
