//! The driver: what a [`Timer`](crate::Timer) is made of, and what fires
//! its timers.
//!
//! # Who owns what
//!
//! A timer ([`Driver`]) is a set of *shards* ([`Shard`], `shard.rs`), each
//! a wheel behind its own mutex, with its own alarm and counters, on cache
//! lines of its own. A thread registers in one shard of each timer, dealt
//! to it the first time (`home.rs`), so a runtime's workers each work in a
//! shard of their own. A `Sleep` holds an `Arc` of the shard it registers
//! in, not of the timer: creating, polling, resetting and dropping a sleep
//! on its own thread touch that shard's lines alone (its lock, its count,
//! its watermark), and finding the default timer on a worker touches none
//! that other workers write (`registry.rs`). The exception is re-arming the
//! shard's tokio timer, for a sleep earlier than every other in its shard:
//! that costs what registering a tokio timer does.
//!
//! - A sleep's entry belongs to its `Sleep` from insert to remove. A pass
//!   *fires* it (unlinks it and takes its waker to wake) and leaves it in
//!   the slab; the `Sleep` frees it at its next poll, reset or drop. So a
//!   `Sleep`'s key always names its own entry, whatever the generations do.
//! - A callback's entry belongs to the shard: a pass removes it when it
//!   fires, its `TimerHandle` when it cancels. While a runtime shard has
//!   callbacks pending it holds an `Arc` of itself (`keep_alive`), so a
//!   callback with no handle left still runs.
//! - The `Driver` owns every shard. A `Sleep` that outlives every handle of
//!   its timer keeps its shard alive, and the shard keeps firing; a manual
//!   timer's, which nothing can advance then, shuts down with the `Driver`.
//!
//! # Promises and alarms
//!
//! Each shard has an *alarm* (`alarm.rs`): for a runtime timer, a tokio
//! `Sleep` whose waker runs the shard's pass where tokio fires its own
//! timers, inside the runtime's park, so `tokio::time::advance` has woken
//! the wheel's due timers when it returns; for a manual timer, nothing, as
//! `Timer::advance` runs the passes. `wake_at`, under the shard's lock, is
//! the shard's *promise*: a pass will look at this wheel by that tick. A
//! pass sets it to the wheel's next expiration and arms the alarm for it. A
//! registration due earlier pulls it in and re-arms. A cancel leaves it: the
//! alarm finds nothing then and re-arms for what is left, so a server
//! cancelling its timeouts does not re-arm tokio's timer for each. Where
//! tokio's clock can be paused (a current-thread runtime), a shard left with
//! nothing pending disarms its alarm there and then: auto-advance jumps to
//! every registered tokio timer, and must find none the wheel no longer
//! needs. A runtime timer's tick grid
//! starts on tokio's millisecond grid where tokio's driver shows where that
//! lies (`grid.rs`), so with a tick dividing a millisecond its alarm, at the
//! end of a tick, falls in the deadline's own millisecond.
//!
//! # The pass, and bounded work per call
//!
//! A *pass* (`pass.rs`) reads the clock, raises `published`, pops what is
//! due, wakes the wakers and runs the callbacks 32 at a time outside the
//! lock, then arms the alarm for the next expiration, going round again if
//! that moment has already come. Only the alarm, a task it spawns, and
//! `Timer::advance` run passes. A `poll`, `reset`, `drop`, `schedule` or
//! `cancel` does its own work and returns: it never wakes another task or
//! runs a callback. A registration that pulls the promise in reads the clock
//! first (a paused one's, asking tokio what it processed): a deadline
//! already passed completes there, touching neither the wheel nor the
//! alarm, as tokio's does. Should tokio's clock pass the tick between that
//! read and the arming (`Ready`), the registration *kicks* the shard once
//! it has let go of the lock: a task spawned on the runtime runs the pass.
//!
//! Two passes may run on one shard at once (tokio firing, on another thread,
//! an alarm re-armed while the first wakes its batch): each pops under the
//! lock, so each entry fires once, and the last to arm saw the wheel last.
//!
//! # Polling without the lock
//!
//! A pending `Sleep` is polled again and again (a `Timeout` polls its delay
//! whenever the inner future is pending), and almost always nothing has
//! changed. `published` is the tick up to which the pass may have fired
//! entries (also kept as the latest deadline due by it, `published_at`, in
//! the units a `Sleep` keeps its deadline in). The pass raises it, Release,
//! before it pops anything due by it; shutdown raises it to the end. A
//! `Sleep` whose deadline is later (Acquire) knows its entry has not fired,
//! and returns `Pending` without the lock if it is polled with the waker its
//! entry holds: the clone it stored, never the caller's, whose address may
//! be another task's by now (`WakerId` in `job.rs`). Should a pass fire it
//! just after that look, it wakes that very waker, and the next poll sees
//! the new watermark. Raising `published` early only sends polls to the
//! locked path.
//!
//! # Locks
//!
//! A shard's mutex guards its wheel, promise, alarm and counters; nothing
//! takes two shards' locks at once. Under it the code may read a manual
//! clock (its own mutex, held for the read alone), or reset and poll the
//! alarm's tokio `Sleep`; resetting it to a past moment calls its waker on
//! the spot, whose pass would take this very lock, so that wake is
//! recognised and runs nothing (`alarm.rs`). Nothing is woken or spawned
//! under it: wakers and callbacks run with no lock held, each inside
//! `catch_unwind` (a panic is counted, not spread), and a kick spawns its
//! task after the lock is dropped.
//!
//! # Shutdown
//!
//! `Timer::shutdown`, and the runtime through the timer's sentinel task
//! (`sentinel.rs`: tokio drops every task before it shuts its time driver
//! down), shut every shard down (`shutdown.rs`): callbacks are handed back,
//! pending sleeps woken to learn of it, and the alarm dropped under the
//! lock, so no pass arms one afterwards. A pass after shutdown reads
//! nothing, not even the clock: tokio may be tearing its runtime down on
//! that very thread.

mod alarm;
mod cancel;
mod clock;
mod divisor;
#[cfg(not(loom))]
mod elsewhere;
mod grid;
mod home;
pub(crate) mod job;
#[cfg(all(test, loom))]
mod loom;
mod manual;
mod pass;
pub(crate) mod registry;
mod sentinel;
mod shard;
mod shutdown;
#[cfg(all(test, not(loom)))]
mod tests;
mod time;
#[cfg(all(feature = "precise", target_os = "linux"))]
mod timerfd;

use tokio::time::Instant;

use alarm::Alarm;
pub(crate) use clock::{Clock, Deadline};
pub(crate) use grid::grid_point;
pub(crate) use job::WakerId;
use manual::ManualClock;
pub(crate) use sentinel::Sentinel;
pub(crate) use shard::{Polled, Registrant, Registration, Reset, Shard};
pub(crate) use shutdown::Leftovers;
pub(crate) use time::{can_enter, in_runtime, real_now};
use time::{Source, Time};

use crate::sync::Arc;
use crate::Stats;

/// The generations a timer's keys carry: what a `Sleep` has room for beside
/// its deadline and its key's 32-bit index, in sixteen bytes. A `Sleep`'s
/// key never outlives its entry; a callback's handle checks the callback's
/// identity (`Shard::cancel_callback`).
pub(crate) const KEY_GENERATION_BITS: u32 = 128 - Deadline::BITS - 32;
/// "No tick": nothing is promised, or the alarm is not armed.
const NEVER: u64 = u64::MAX;
/// The most shards a timer splits into.
pub(crate) const MAX_SHARDS: usize = 64;

/// How a timer is laid out, as its builder decided.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Geometry {
    pub(crate) clock: Clock,
    pub(crate) slots_per_level: usize,
    pub(crate) max_pending: usize,
    /// A power of two, at most [`MAX_SHARDS`].
    pub(crate) shards: usize,
}

/// A timer: its shards, and what they share, which no operation on a
/// `Sleep` touches.
pub(crate) struct Driver {
    shards: Box<[Arc<Shard>]>,
    /// Deals shards to the threads that register (see `home.rs`). A std
    /// atomic even under loom, whose models use thread indices instead.
    dealer: std::sync::atomic::AtomicUsize,
    time: Time,
    slots_per_level: usize,
    /// Set for a runtime's default timer, so shutdown can unregister it.
    default_for: Option<tokio::runtime::Id>,
}

impl Driver {
    /// A timer on `handle`'s runtime, made inside its context. The caller
    /// checks that the runtime has timers, and spawns the [`Sentinel`].
    pub(crate) fn new(
        handle: tokio::runtime::Handle,
        geometry: Geometry,
        default_for: Option<tokio::runtime::Id>,
    ) -> Driver {
        let shards = (0..geometry.shards)
            .map(|_| {
                Arc::new_cyclic(|shard| {
                    let time = Time::new(geometry.clock, Source::runtime(handle.clone()));
                    Shard::new(&geometry, time.clone(), Alarm::tokio(shard.clone(), time))
                })
            })
            .collect();
        let time = Time::new(geometry.clock, Source::runtime(handle));
        Driver::with(shards, geometry, time, default_for)
    }

    /// A precise timer on `handle`'s runtime (`Builder::precise`), made
    /// inside its context: each shard's alarm a `timerfd`. Fails as
    /// `Timerfd::new` does; tokio panics if the runtime's IO driver is off.
    #[cfg(all(feature = "precise", target_os = "linux"))]
    pub(crate) fn new_precise(
        handle: tokio::runtime::Handle,
        geometry: Geometry,
        spacing: u64,
    ) -> Result<Driver, crate::error::BuildError> {
        let shards = (0..geometry.shards)
            .map(|_| {
                let fd = timerfd::Timerfd::new()?;
                Ok(Arc::new_cyclic(|shard| {
                    let time = Time::new(geometry.clock, Source::runtime(handle.clone()));
                    let alarm = Alarm::precise(fd, shard.clone(), time.clone(), spacing);
                    Shard::new(&geometry, time, alarm)
                }))
            })
            .collect::<Result<_, _>>()?;
        let time = Time::new(geometry.clock, Source::runtime(handle));
        Ok(Driver::with(shards, geometry, time, None))
    }

    /// A manual timer, whose clock starts at `geometry.clock`'s origin.
    pub(crate) fn new_manual(geometry: Geometry) -> Driver {
        let now = geometry.clock.instant_at(0).expect("tick 0 is the origin");
        let clock = Arc::new(ManualClock::new(now));
        let shards = (0..geometry.shards)
            .map(|_| {
                let time = Time::new(geometry.clock, Source::Manual(clock.clone()));
                Arc::new(Shard::new(&geometry, time.clone(), Alarm::manual(&time)))
            })
            .collect();
        let time = Time::new(geometry.clock, Source::Manual(clock));
        Driver::with(shards, geometry, time, None)
    }

    fn with(
        shards: Box<[Arc<Shard>]>,
        geometry: Geometry,
        time: Time,
        default_for: Option<tokio::runtime::Id>,
    ) -> Driver {
        assert!(
            shards.len().is_power_of_two() && shards.len() <= MAX_SHARDS,
            "shards checked by the builder"
        );
        Driver {
            shards,
            dealer: std::sync::atomic::AtomicUsize::new(0),
            time,
            slots_per_level: geometry.slots_per_level,
            default_for,
        }
    }

    pub(crate) fn clock(&self) -> &Clock {
        self.time.clock()
    }

    pub(crate) fn slots_per_level(&self) -> usize {
        self.slots_per_level
    }

    pub(crate) fn shards(&self) -> &[Arc<Shard>] {
        &self.shards
    }

    /// Whether `shard` is one of this timer's.
    #[cfg(feature = "hyper")]
    pub(crate) fn owns(&self, shard: &Arc<Shard>) -> bool {
        self.shards.iter().any(|mine| Arc::ptr_eq(mine, shard))
    }

    pub(crate) fn is_manual(&self) -> bool {
        self.time.is_manual()
    }

    pub(crate) fn time(&self) -> &Time {
        &self.time
    }

    /// Every shard shuts down together, so the first tells.
    pub(crate) fn is_shut_down(&self) -> bool {
        self.shards[0].is_shut_down()
    }

    /// The timer's current time: see [`Time`].
    pub(crate) fn now(&self) -> Instant {
        self.time.now()
    }

    /// The shard the calling thread registers in: see `home.rs`.
    #[inline]
    pub(crate) fn home(&self) -> &Arc<Shard> {
        let mask = self.shards.len() - 1;
        if mask == 0 {
            return &self.shards[0];
        }
        let timer = std::ptr::from_ref(self) as usize;
        &self.shards[home::home(timer, &self.dealer, mask)]
    }

    /// A snapshot of the counters, shard by shard.
    pub(crate) fn stats(&self) -> Stats {
        let mut stats = Stats::default();
        for shard in self.shards.iter() {
            shard.add_stats(&mut stats);
        }
        stats
    }

    /// Shuts every shard down (see `shutdown.rs`) and hands back what never
    /// ran: callbacks by deadline, then as scheduled. A second call finds
    /// nothing.
    pub(crate) fn shut_down(&self) -> Leftovers {
        let mut leftovers = Leftovers::default();
        for shard in self.shards.iter() {
            shard.shut_down(&mut leftovers);
        }
        leftovers.callbacks.sort_by_key(|(order, _)| *order);
        if let Some(id) = self.default_for {
            registry::forget(id, self);
        }
        leftovers
    }
}

impl Drop for Driver {
    /// Nothing advances a manual timer once its last handle is gone, so it
    /// shuts down: a `Sleep` still holding one of its shards is woken and
    /// reports it rather than wait for ever, and the callbacks go now (one
    /// owning such a sleep would otherwise keep its shard, and itself).
    fn drop(&mut self) {
        if self.is_manual() {
            drop(self.shut_down());
        }
    }
}
