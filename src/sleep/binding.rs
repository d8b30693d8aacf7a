//! How a default-timer [`Sleep`] finds its timer.
//!
//! Made inside a runtime's context, it is bound there and then (the
//! binding rule, in [`sleep`](crate::sleep())'s docs). Made outside any
//! runtime, it is bound by its first poll ([`Sleep::bind_late`]) or reset
//! ([`Sleep::reset_unbound`]) inside one, and a duration's end read then on
//! the real clock ([marked](Sleep::count_from_outside)) moves onto that
//! runtime's clock. A `Timeout` names its runtime when made and binds its
//! delay when it first waits ([`Sleep::bind_to`]).

use tokio::runtime::Id;
use tokio::time::Instant;

use super::state::State;
use super::{refused, Sleep};
use crate::driver::{in_runtime, real_now, registry, Deadline, Shard};
use crate::error::Error;
use crate::sync::Arc;

impl Sleep {
    /// [`reset`](Sleep::reset) of a default-timer sleep not yet bound to
    /// its timer (never polled, or reset): binds it if called inside a
    /// runtime, which registers the sleep, and otherwise leaves it to be
    /// registered by its first poll.
    #[cold]
    #[inline(never)]
    pub(super) fn reset_unbound(&mut self, deadline: Deadline, passed: bool) {
        // Registering needs the default timer, which belongs to the runtime
        // the caller is in; with none, the first poll binds it.
        match registry::default_shard() {
            Ok(shard) => {
                self.shard = Some(shard);
                self.reset_to(deadline, passed);
            }
            Err(_) => {
                // An instant given: it no longer counts from the clock it
                // was made on, if it was marked so.
                self.state.set_deadline(deadline);
                self.state.set(State::Idle);
            }
        }
    }

    /// A default-timer sleep until `deadline`, the end of a duration from
    /// the time [`bind`](super::bind) read with `shard`: with none (made
    /// outside any runtime), that time was the real clock's, and the sleep
    /// is [marked](Sleep::count_from_outside) so.
    pub(crate) fn counted(shard: Option<Arc<Shard>>, deadline: Deadline) -> Sleep {
        let mut sleep = Sleep::at(shard, deadline);
        if sleep.shard.is_none() {
            sleep.count_from_outside();
        }
        sleep
    }

    /// Marks this unbound sleep's deadline as counted from now on the clock
    /// outside any runtime (see [`bind_late`](Sleep::bind_late)).
    pub(crate) fn count_from_outside(&mut self) {
        debug_assert!(self.shard.is_none());
        self.state.count_from_outside();
    }

    /// Binds a default-timer sleep made outside any runtime to `shard`, the
    /// default timer's of the runtime it first registers in. The end of a
    /// duration ([marked](Sleep::count_from_outside)) was counted on the
    /// real clock: it moves to count the time it had left from `shard`'s
    /// clock, which may be hours from the real one (paused, or a
    /// `TestRuntime`'s). An instant given stays, being one moment on every
    /// tokio clock, except on a manual clock (a `TestRuntime`'s), whose
    /// instants are not tokio's: it counts the time it had left by tokio's.
    pub(super) fn bind_late(&mut self, shard: Arc<Shard>) {
        if self.state.counts_from_outside() || shard.is_manual() {
            let moved = self.state.deadline().moved(self.unbound_now(), shard.now());
            self.state.set_deadline(moved);
        }
        self.shard = Some(shard);
    }

    /// Whether this sleep, unbound and with no timer at hand to bind it
    /// (outside any runtime, or in one without timers or shut down), is
    /// due by the clock its deadline counts on ([`unbound_now`](Sleep::unbound_now)).
    pub(super) fn due_unbound(&self) -> bool {
        self.state.deadline().reached_by(self.unbound_now())
    }

    /// The time on the clock this unbound sleep's deadline counts on: the
    /// real one if [marked](Sleep::count_from_outside), whatever tokio's
    /// reads here (a `TestRuntime` may pause it too, `start_paused`); else
    /// tokio's here, as for an instant given.
    fn unbound_now(&self) -> Instant {
        if self.state.counts_from_outside() {
            real_now()
        } else {
            Instant::now()
        }
    }

    /// Binds a `Timeout`'s sleep, made in runtime `made_in`, to `shard` when
    /// it first waits (shut down or not: it then answers by that timer's
    /// clock). `None`, its timer is gone: inside `made_in`, tokio's clock
    /// there says whether the deadline has passed; elsewhere no clock at
    /// hand is surely the deadline's (another runtime's paused clock may be
    /// hours ahead), so it reports the shutdown, as tokio's timeout does.
    pub(crate) fn bind_to(&mut self, shard: Option<Arc<Shard>>, made_in: Id) {
        debug_assert!(self.shard.is_none() && !self.state.is_registered());
        match shard {
            Some(shard) => self.shard = Some(shard),
            None if in_runtime(made_in) && self.state.deadline().reached_by(Instant::now()) => {
                self.state.set(State::Elapsed);
            }
            None => refused(Error::shut_down()),
        }
    }
}
