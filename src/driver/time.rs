//! [`Time`]: a timer's time as its shards and alarms read it: where a
//! reading comes from ([`Source`]), the tick grid it falls on ([`Clock`]),
//! which tick it makes due, and whether tokio has come to a moment.
//!
//! Every question of "what time, or tick, is it" goes through here: a
//! registration that pulls the promise in, the pass, the alarms (the
//! precise one spaces its wake-ups from a reading) and the registry (a test
//! clock's reading for a sleep's deadline). A reading ([`Reading`]) says
//! whether the clock stood still, read twice where tokio can pause it: on
//! a paused clock tokio fires what its driver has *processed*, its last
//! millisecond, not the clock's instant, and the wheel follows it there.

use tokio::time::Instant;

use super::grid::processed;
use super::manual::ManualClock;
use super::{Clock, Deadline};
use crate::sync::Arc;

/// A timer's clock and tick grid: what its shards and alarms read.
#[derive(Debug, Clone)]
pub(crate) struct Time {
    grid: Clock,
    source: Source,
}

/// A reading of a [`Time`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Reading {
    pub(crate) now: Instant,
    /// Two readings in a row were equal, on a clock tokio can pause: it is
    /// paused (a running clock almost never reads the same nanosecond
    /// twice; if it does, a pass fires a millisecond's ticks later, never
    /// early). A manual or a multi-thread runtime's clock is never still.
    pub(crate) still: bool,
}

impl Time {
    pub(crate) fn new(grid: Clock, source: Source) -> Time {
        Time { grid, source }
    }

    /// The tick grid.
    pub(crate) fn clock(&self) -> &Clock {
        &self.grid
    }

    pub(crate) fn now(&self) -> Instant {
        self.source.now()
    }

    pub(crate) fn read(&self) -> Reading {
        // Unread, the clock is a pausable runtime's, from a thread-local's
        // destructor: tokio's own answer there, as `Source::now` gives.
        self.try_read().unwrap_or_else(|| Reading {
            now: Instant::now(),
            still: false,
        })
    }

    /// [`now`](Time::now), or `None` where the clock cannot be read
    /// ([`Source::try_now`]).
    #[cfg(all(feature = "precise", target_os = "linux"))]
    pub(crate) fn try_now(&self) -> Option<Instant> {
        self.source.try_now()
    }

    /// [`read`](Time::read), or `None` where the clock cannot be read
    /// ([`Source::try_now`]).
    pub(crate) fn try_read(&self) -> Option<Reading> {
        self.source.try_read()
    }

    /// The last tick due by `reading`: what a pass fires up to. On a still
    /// clock a timer on tokio's grid rounds it down to tokio's last
    /// millisecond, as tokio does (after an `advance` by a fraction of a
    /// millisecond, a deadline between that millisecond and the clock is
    /// due for neither until the next one).
    pub(crate) fn due_tick(&self, reading: Reading) -> u64 {
        let tick = self.grid.now_tick(reading.now);
        if reading.still {
            self.grid.tokio_ms_floor(tick)
        } else {
            tick
        }
    }

    /// Whether a tokio sleep until `at`, made at `reading`, completes at its
    /// first poll: `at` has passed and, on a still clock, tokio's driver has
    /// processed it, which it has not after an `advance` until the runtime
    /// parks (not asked once the timer has shut down: tokio's driver may be
    /// going too).
    pub(crate) fn come(&self, at: Instant, reading: Reading, shut_down: bool) -> bool {
        // Only a moment the clock has reached can have been processed
        // (tokio's driver processes whole milliseconds up to a reading of
        // its clock), so only then is tokio asked: a registration for a
        // later tick, the usual one, probes nothing.
        if at > reading.now {
            return false;
        }
        match self.source.handle() {
            Some(handle) if reading.still && !shut_down => processed(handle, at),
            _ => true,
        }
    }

    /// Whether a manual clock has reached `deadline` (a runtime's is not
    /// read): a sleep first polled, or reset, once a manual clock is at its
    /// deadline completes at once, exactly, not at the end of its tick (see
    /// `Builder::manual`).
    #[inline]
    pub(crate) fn reached(&self, deadline: Deadline) -> bool {
        self.source.is_manual() && self.manual_reached(deadline)
    }

    #[cold]
    #[inline(never)]
    fn manual_reached(&self, deadline: Deadline) -> bool {
        deadline.reached_by(self.now())
    }

    pub(crate) fn is_manual(&self) -> bool {
        self.source.is_manual()
    }

    /// A runtime whose clock tokio can pause (a current-thread one).
    pub(crate) fn is_pausable(&self) -> bool {
        self.source.is_pausable()
    }

    /// The runtime, for a runtime timer.
    pub(crate) fn handle(&self) -> Option<&tokio::runtime::Handle> {
        self.source.handle()
    }

    /// The manual clock, for a manual timer.
    pub(crate) fn manual(&self) -> Option<&Arc<ManualClock>> {
        match &self.source {
            Source::Manual(clock) => Some(clock),
            Source::Runtime { .. } => None,
        }
    }
}

/// A timer's clock: a tokio runtime's, or a manual one.
#[derive(Debug, Clone)]
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

    /// The time: [`try_now`](Source::try_now)'s, or where that cannot read
    /// the runtime's clock, tokio's own answer there, as
    /// `tokio::time::Instant::now()` gives it to tokio's own types: the
    /// real clock, which is the runtime's unless `test-util` has paused a
    /// clock, and then tokio panics.
    pub(crate) fn now(&self) -> Instant {
        self.try_now().unwrap_or_else(Instant::now)
    }

    /// The time, or `None` where a current-thread runtime's clock cannot
    /// be read: on a thread whose tokio context has been destroyed (in a
    /// thread-local's destructor), where only entering the runtime would
    /// read it, and `Handle::enter` panics (so would the destructor, and
    /// the process abort).
    pub(crate) fn try_now(&self) -> Option<Instant> {
        match self {
            Source::Runtime {
                handle,
                pausable: true,
            } => in_its_context(handle, Instant::now),
            Source::Runtime {
                pausable: false, ..
            } => Some(real_now()),
            Source::Manual(clock) => Some(clock.now()),
        }
    }

    /// [`try_now`](Source::try_now), and whether the clock stood still: on
    /// a pausable runtime's clock, a second reading in the same context
    /// equals the first (tokio asked once for both).
    fn try_read(&self) -> Option<Reading> {
        match self {
            Source::Runtime {
                handle,
                pausable: true,
            } => in_its_context(handle, || {
                let now = Instant::now();
                let still = Instant::now() == now;
                Reading { now, still }
            }),
            _ => self.try_now().map(|now| Reading { now, still: false }),
        }
    }

    pub(crate) fn is_manual(&self) -> bool {
        matches!(self, Source::Manual(_))
    }

    /// A runtime whose clock tokio can pause (a current-thread one).
    pub(crate) fn is_pausable(&self) -> bool {
        matches!(self, Source::Runtime { pausable: true, .. })
    }

    /// The runtime, for a runtime timer.
    pub(crate) fn handle(&self) -> Option<&tokio::runtime::Handle> {
        match self {
            Source::Runtime { handle, .. } => Some(handle),
            Source::Manual(_) => None,
        }
    }
}

/// `read`s tokio's clock inside `handle`'s runtime's context, where it is
/// that runtime's clock; `None` where it cannot be entered (in a
/// thread-local's destructor).
///
/// Most readings come from the runtime's own tasks and passes, already in
/// its context (otherwise, with another runtime or none current, it is
/// entered): asking tokio which runtime that is (a reference count up and
/// down) costs less than entering it again and leaving (a thread-local swap
/// each way as well): 33 ns against 41 a reading on the Xeon VM. Even a
/// pass asks: a task that holds another runtime's `EnterGuard` across an
/// await leaves that runtime current while its own parks and fires the
/// alarm.
#[inline]
fn in_its_context<R>(handle: &tokio::runtime::Handle, read: impl FnOnce() -> R) -> Option<R> {
    if in_runtime(handle.id()) {
        return Some(read());
    }
    entered(handle, read)
}

/// [`in_its_context`] from outside the runtime's context: entered, unless
/// it cannot be (`None`). Out of line, so that the reading from inside,
/// the common case, saves no registers for the entering and leaving.
#[cold]
#[inline(never)]
fn entered<R>(handle: &tokio::runtime::Handle, read: impl FnOnce() -> R) -> Option<R> {
    if !can_enter() {
        return None;
    }
    let _its_clock = handle.enter();
    Some(read())
}

/// The real clock, whatever tokio's reads in this context (a paused
/// runtime's, or a shut-down one's entered by a handle kept): a
/// multi-thread runtime's clock, and the one that a sleep or timeout made
/// outside any runtime counts its duration on until a runtime binds it.
#[inline]
pub(crate) fn real_now() -> Instant {
    Instant::from_std(std::time::Instant::now())
}

/// Whether this thread is inside runtime `id`'s context, where tokio's
/// clock is that runtime's: one question to tokio (`Handle::try_current`:
/// a reference count up and down).
#[inline]
pub(crate) fn in_runtime(id: tokio::runtime::Id) -> bool {
    matches!(tokio::runtime::Handle::try_current(), Ok(current) if current.id() == id)
}

/// Whether this thread can enter a runtime: not once tokio's thread-local
/// context has been destroyed (in a thread-local's destructor), where
/// `Handle::enter` panics.
pub(crate) fn can_enter() -> bool {
    !matches!(tokio::runtime::Handle::try_current(), Err(e) if e.is_thread_local_destroyed())
}
