//! What a wheel entry does when it fires: wake a `Sleep`'s task, or run a
//! callback.

use std::cell::Cell;
use std::task::Waker;

use tokio::time::Instant;

use crate::sync::{Arc, AtomicU8, Ordering};

/// The value the driver stores in each wheel entry: 16 bytes, which makes
/// an entry 40. Also the work a pass takes out of the wheel under the lock
/// and does after releasing it (a [`Batch`]).
pub(crate) enum Job {
    /// A `Sleep`'s entry: it holds the waker of the task polling it, or
    /// [`no_waker`] before the first poll and once fired. (`Option<Waker>`
    /// would take the waker's one niche, a null vtable, which `Call` uses,
    /// and make every entry 8 bytes larger.) The entry belongs to the
    /// `Sleep`: the driver fires it (unlinks it and takes the waker) and
    /// leaves it in the slab; the `Sleep` frees it.
    Wake(Waker),
    /// A callback timer's entry, owned by the driver: removed from the wheel
    /// when it fires or is cancelled. Boxed to keep the job small; callbacks
    /// are rarer than sleeps.
    Call(Box<Callback>),
}

impl Job {
    /// For a pass firing this entry: a sleep's waker, taken out (the entry
    /// keeps [`no_waker`]); `None` for a callback.
    pub(crate) fn take_waker(&mut self) -> Option<Waker> {
        match self {
            Job::Wake(waker) => Some(std::mem::replace(waker, no_waker())),
            Job::Call(_) => None,
        }
    }
}

// A waker's size: see `Job::Wake`.
const _: () = assert!(std::mem::size_of::<Job>() == 2 * std::mem::size_of::<usize>());

impl Job {
    /// A `Sleep`'s job, with a clone of the waker of the task polling it, if
    /// any yet, and the identity of that clone (see [`WakerId`]).
    pub(crate) fn wake(waker: Option<&Waker>) -> (Job, Option<WakerId>) {
        match waker {
            Some(waker) => {
                let held = waker.clone();
                let id = WakerId::of(&held);
                (Job::Wake(held), Some(id))
            }
            None => (Job::Wake(no_waker()), None),
        }
    }
}

/// What [`Waker::will_wake`] compares, the data and vtable pointers, of the
/// waker a `Sleep`'s entry holds: kept by the `Sleep` as addresses (so that
/// it stays `Send` and `Sync`) to repoll without the lock.
///
/// Always the identity of the waker *in the entry*, never of the caller's:
/// `RawWakerVTable::clone` may return a waker with another data pointer (a
/// clone that boxes), and the caller's waker may be freed and its address
/// reused by another task's. The entry's clone stays alive, and its address
/// taken, until the `Sleep` replaces it (and records the new one), cancels
/// it, or the driver fires it (after publishing its tick, which sends the
/// `Sleep` to the locked path), so a waker matching this identity wakes the
/// task the entry would wake.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WakerId {
    pub(crate) data: usize,
    pub(crate) vtable: usize,
}

impl WakerId {
    pub(crate) fn of(waker: &Waker) -> WakerId {
        WakerId {
            data: waker.data() as usize,
            vtable: std::ptr::from_ref::<std::task::RawWakerVTable>(waker.vtable()) as usize,
        }
    }
}

impl Default for Job {
    fn default() -> Job {
        Job::Wake(no_waker())
    }
}

/// What a `Sleep`'s entry holds before its task has polled it: a waker
/// that does nothing.
pub(crate) fn no_waker() -> Waker {
    Waker::noop().clone()
}

/// Whether `waker` is [`no_waker`]: then there is nothing to wake. Only an
/// optimisation: should the comparison miss (`will_wake` may, for a vtable
/// duplicated across codegen units), waking it still does nothing.
fn is_no_waker(waker: &Waker) -> bool {
    waker.will_wake(Waker::noop())
}

/// The waker a `Sleep`'s job held, if it is one worth waking.
pub(crate) fn held_waker(waker: Waker) -> Option<Waker> {
    (!is_no_waker(&waker)).then_some(waker)
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Job::Wake(waker) => f.debug_tuple("Wake").field(waker).finish(),
            Job::Call(callback) => f.debug_tuple("Call").field(&callback.state).finish(),
        }
    }
}

/// A scheduled callback: the closure and the state its handle reads.
pub(crate) struct Callback {
    pub(crate) run: Box<dyn FnOnce() + Send>,
    pub(crate) state: Arc<CallbackState>,
}

/// What a `TimerHandle` sees of its callback.
///
/// `phase` leaves `PENDING` once, by compare-and-swap, so the driver's
/// [`claim`](CallbackState::claim) and the handle's
/// [`try_cancel`](CallbackState::try_cancel) cannot both win. A callback is
/// `PENDING` for as long as it sits in the wheel *and* while the driver
/// holds it in a batch, taken out but not yet run: the driver claims it
/// only just before running it, so a callback that cancels a sibling due
/// in the same pass still stops it.
#[derive(Debug)]
pub(crate) struct CallbackState {
    phase: AtomicU8,
    deadline: Instant,
    /// When it was scheduled, by the real clock (monotonic across threads),
    /// and its number among its shard's callbacks: what orders callbacks with
    /// one deadline when a shutdown hands them back, across shards.
    scheduled: (std::time::Instant, u64),
}

/// A callback's deadline, then when it was scheduled: see [`CallbackState`].
pub(crate) type RunOrder = (Instant, std::time::Instant, u64);

/// The callback phases.
pub(crate) const PENDING: u8 = 0;
/// The driver has claimed the callback to run it (it may still be running).
pub(crate) const EXPIRED: u8 = 1;
/// Cancelled by its handle, or dropped (or handed back) by a shutdown.
pub(crate) const CANCELLED: u8 = 2;

impl CallbackState {
    /// The state of the shard's `seq`-th callback, due at `deadline`.
    pub(crate) fn new(deadline: Instant, seq: u64) -> CallbackState {
        CallbackState {
            phase: AtomicU8::new(PENDING),
            deadline,
            scheduled: (std::time::Instant::now(), seq),
        }
    }

    pub(crate) fn phase(&self) -> u8 {
        self.phase.load(Ordering::Acquire)
    }

    /// `PENDING` to `phase`; `false` if it had already left `PENDING`.
    fn leave_pending(&self, phase: u8) -> bool {
        self.phase
            .compare_exchange(PENDING, phase, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// The driver, about to run the callback: `false` if it was cancelled
    /// first, and must not run.
    pub(crate) fn claim(&self) -> bool {
        self.leave_pending(EXPIRED)
    }

    /// Its handle, or a shutdown: `false` if the driver claimed it first
    /// (or it was already cancelled).
    pub(crate) fn try_cancel(&self) -> bool {
        self.leave_pending(CANCELLED)
    }

    pub(crate) fn deadline(&self) -> Instant {
        self.deadline
    }

    /// The order a shutdown hands callbacks back in: by deadline, and those
    /// with one deadline in the order they were scheduled. (The driver
    /// runs them tick by tick; within a tick the order is its lists'.)
    pub(crate) fn run_order(&self) -> RunOrder {
        (self.deadline, self.scheduled.0, self.scheduled.1)
    }
}

/// Wakers and callbacks collected before the lock is released to run them.
#[cfg(not(loom))]
const FIRE_BATCH: usize = 32;
/// Under loom, two: so that a model with a few timers sees a pass release
/// the lock between batches.
#[cfg(loom)]
const FIRE_BATCH: usize = 2;

/// Up to [`FIRE_BATCH`] fires taken out under the lock (a waker, or a
/// callback still `PENDING`, run only if [`CallbackState::claim`] wins),
/// in a buffer this thread keeps between passes ([`SPARE`]), so that firing
/// allocates only the first time a thread fires anything. A flush of
/// cancelled entries hands their values out in one too, to be dropped
/// (`cancel.rs`). (A buffer on the stack would
/// allocate nothing at all, but making and dropping one cost about 240
/// instructions a pass, a sixth of a pass that fires one timer: every one
/// of its slots was written, then checked for something to drop.)
pub(crate) struct Batch {
    fires: Vec<Job>,
}

std::thread_local! {
    /// The buffer of the last [`Batch`] dropped on this thread, empty. A
    /// pass that runs inside another's firing (a waker that runs a manual
    /// timer's `advance`) finds it taken and starts its own.
    static SPARE: Cell<Vec<Job>> = const { Cell::new(Vec::new()) };
}

impl Batch {
    pub(crate) fn new() -> Batch {
        Batch {
            fires: SPARE.try_with(Cell::take).unwrap_or_default(),
        }
    }

    /// Adds `fire`; `true` if the batch is now full and must be run.
    pub(crate) fn push(&mut self, fire: Job) -> bool {
        if self.fires.capacity() == 0 {
            self.fires.reserve_exact(FIRE_BATCH);
        }
        self.fires.push(fire);
        self.fires.len() == FIRE_BATCH
    }

    /// The buffer, for values moved in whole (`cancel.rs`).
    pub(crate) fn buffer(&mut self) -> &mut Vec<Job> {
        &mut self.fires
    }

    /// Takes the fires out, in the order they were pushed.
    pub(crate) fn drain(&mut self) -> impl Iterator<Item = Job> + '_ {
        self.fires.drain(..)
    }
}

impl Drop for Batch {
    fn drop(&mut self) {
        // Empty, but for a pass unwinding: its fires are dropped here.
        self.fires.clear();
        let fires = std::mem::take(&mut self.fires);
        let _ = SPARE.try_with(|spare| spare.set(fires));
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_batch_is_full_at_its_size_and_takes_room_for_one_once() {
        let mut batch = Batch::new();
        for round in 0..2 {
            for n in 1..=FIRE_BATCH {
                let full = batch.push(Job::Wake(Waker::noop().clone()));
                assert_eq!(full, n == FIRE_BATCH, "round {round}, push {n}");
            }
            assert_eq!(batch.drain().count(), FIRE_BATCH);
            assert_eq!(batch.fires.capacity(), FIRE_BATCH, "round {round}");
        }
    }
}
