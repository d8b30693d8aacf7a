//! Where a timer's time comes from ([`Source`]), and how a shard asks to be
//! driven ([`Alarm`]).
//!
//! A runtime shard's alarm is a tokio `Sleep` armed for the shard's next
//! expiration; its waker runs the shard's pass where tokio fires its own
//! timers. A manual shard's alarm is nothing: `Timer::advance` runs the
//! passes. Under loom a manual timer's shards stand in for a runtime's
//! (tokio cannot run there), with the models playing tokio's part: they
//! fire a shard once the model clock reaches its promise, and run the pass a
//! [`kick`](Alarm::kick) asked for.
//!
//! The tokio `Sleep` is made afresh each time the alarm is armed, never
//! reset: resetting a registered tokio timer to a moment already past wakes
//! its waker on the spot, inside the shard's lock, and the waker's pass
//! would take that lock again. A fresh one just answers `Ready`.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Wake, Waker};

use tokio::time::Instant;

use super::manual::ManualClock;
use super::{Clock, Shard, NEVER};
use crate::sync::{Arc, Weak};

/// A timer's clock: a tokio runtime's, or a manual one.
#[derive(Debug)]
pub(crate) enum Source {
    /// A runtime's clock. `pausable`: a current-thread runtime, whose clock
    /// tokio's `test-util` can pause, so it is read inside that runtime's
    /// context (another runtime's paused clock, or the real one, could be
    /// ahead of it and fire early). A multi-thread runtime's clock cannot be
    /// paused: it is the real clock, read with no context and no shared
    /// reference count touched.
    Runtime {
        handle: tokio::runtime::Handle,
        pausable: bool,
    },
    /// A manual clock: only `Timer::advance` moves it.
    Manual(Arc<ManualClock>),
}

impl Source {
    /// A runtime's clock, as `handle`'s flavour lets it be read.
    pub(crate) fn runtime(handle: tokio::runtime::Handle) -> Source {
        let pausable = handle.runtime_flavor() != tokio::runtime::RuntimeFlavor::MultiThread;
        Source::Runtime { handle, pausable }
    }

    pub(crate) fn now(&self) -> Instant {
        match self {
            Source::Runtime {
                handle,
                pausable: true,
            } => {
                let _its_clock = handle.enter();
                Instant::now()
            }
            Source::Runtime {
                pausable: false, ..
            } => Instant::from_std(std::time::Instant::now()),
            Source::Manual(clock) => clock.now(),
        }
    }

    pub(crate) fn is_manual(&self) -> bool {
        matches!(self, Source::Manual(_))
    }

    /// The runtime, for a runtime timer.
    pub(crate) fn handle(&self) -> Option<&tokio::runtime::Handle> {
        match self {
            Source::Runtime { handle, .. } => Some(handle),
            Source::Manual(_) => None,
        }
    }
}

/// What calls a shard's pass when its promise comes due.
pub(crate) enum Alarm {
    /// A runtime shard's: the tokio timer armed for the promise, if any.
    Tokio {
        armed: Option<Pin<Box<tokio::time::Sleep>>>,
        /// Runs the shard's pass; weak, so an armed alarm does not keep the
        /// shard alive.
        waker: Waker,
    },
    /// A manual shard's: `Timer::advance` runs its passes. It keeps what a
    /// tokio alarm would be armed for, and whether a pass was kicked, which
    /// only the loom models read: they play tokio with it.
    Manual { armed: u64, kicked: bool },
    /// Shut down: never armed again.
    Off,
}

impl Alarm {
    /// A runtime shard's alarm, disarmed.
    pub(crate) fn tokio(shard: Weak<Shard>) -> Alarm {
        Alarm::Tokio {
            armed: None,
            waker: Waker::from(Arc::new(AlarmWaker(shard))),
        }
    }

    /// Arms the alarm for `tick` (`NEVER`: disarms it). `Ready` if that
    /// moment has already come by the clock the alarm waits on, and the
    /// alarm will not call: the caller runs a pass (a pass goes round
    /// again) or [`kick`](Alarm::kick)s one.
    pub(crate) fn arm(&mut self, tick: u64, clock: &Clock, source: &Source) -> Poll<()> {
        match self {
            Alarm::Tokio { armed, waker } => {
                *armed = None;
                let when = (tick != NEVER).then(|| clock.instant_at(tick)).flatten();
                let (Some(when), Some(handle)) = (when, source.handle()) else {
                    // `NEVER`, or beyond what `Instant` holds: it never comes.
                    return Poll::Pending;
                };
                let _its_runtime = handle.enter();
                let mut sleep = Box::pin(tokio::time::sleep_until(when));
                // Unconstrained: the caller may be a task that has spent its
                // coop budget, and a budget refusal would not register it.
                let polled = Pin::new(&mut tokio::task::unconstrained(sleep.as_mut()))
                    .poll(&mut Context::from_waker(waker));
                if polled.is_pending() {
                    *armed = Some(sleep);
                }
                polled
            }
            Alarm::Manual { armed, .. } => {
                if tick != NEVER && tick <= clock.now_tick(source.now()) {
                    *armed = NEVER;
                    Poll::Ready(())
                } else {
                    *armed = tick;
                    Poll::Pending
                }
            }
            Alarm::Off => Poll::Pending,
        }
    }

    /// Asks for a pass soon, not on the caller's stack: what a registration
    /// does when arming finds its tick already past by tokio's clock (a race
    /// with time, see `Shard::register`). A runtime shard spawns a task that
    /// runs one; a manual shard's next `advance` runs one anyway.
    pub(crate) fn kick(&mut self, shard: &Arc<Shard>, source: &Source) {
        match (self, source.handle()) {
            (Alarm::Tokio { .. }, Some(handle)) => {
                let shard = Arc::clone(shard);
                drop(handle.spawn(async move { shard.pass() }));
            }
            (Alarm::Manual { kicked, .. }, _) => *kicked = true,
            _ => {}
        }
    }
}

/// The tokio alarm's waker: runs the shard's pass.
struct AlarmWaker(Weak<Shard>);

impl Wake for AlarmWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if let Some(shard) = self.0.upgrade() {
            shard.pass();
        }
    }
}
