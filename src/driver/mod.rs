//! The driver: the shared state behind a [`Timer`](crate::Timer), and the
//! code that advances its wheel.
//!
//! # Who owns what
//!
//! A `Timer`, and every `Sleep` registered with it, holds an `Arc<Shared>`.
//! [`Shared`] owns the wheels (one per shard, see "Shards"), each behind its
//! own mutex. A wheel stores a [`Job`] per entry:
//!
//! - a `Sleep`'s entry holds its task's waker. The driver frees it when it
//!   fires it (taking the waker to wake); the `Sleep` cancels it when it is
//!   dropped or reset while still pending, taking the waker out at once and
//!   leaving the entry to be freed with a batch of others (at most 128, see
//!   `wheel/discard.rs`). So dropping a `Sleep` leaves nothing behind for
//!   long, and a fired one holds no slab slot while it waits to be polled.
//! - a callback's entry holds the closure. The driver owns it: it removes the
//!   entry when it fires (and runs the closure, unless its `TimerHandle`
//!   cancels it between) or when its `TimerHandle` cancels it. While a runtime timer has pending callbacks it holds a
//!   strong reference to itself (`keep_alive`), so a callback scheduled and
//!   forgotten still runs after every handle is dropped; the cycle is broken
//!   when the last callback fires or is cancelled, or at shutdown.
//!
//! # Where time comes from
//!
//! A runtime timer owns one tokio `Sleep` (the *alarm*) armed for the
//! wheel's next expiration, and reads `Instant::now()` inside its runtime's
//! context. A manual timer has no alarm and no runtime: its time is a value
//! in [`Control`] that only [`Shared::advance_to`] moves. Everything else, the
//! runner protocol included, is the same code for both, which is what lets
//! the loom models (`loom.rs`, on manual timers) check the real thing.
//!
//! # There is no driver task
//!
//! The alarm's waker *is* the driver: when tokio's time driver fires the
//! alarm, it calls [`Shared::notify`], which advances the wheel to now, wakes
//! the due wakers and runs the due callbacks (32 at a time, outside the
//! lock) and re-arms the alarm. This runs exactly where tokio fires its own
//! timers, inside the runtime's park step, so tokio's paused clock drives the
//! wheel with tokio's own semantics: after `tokio::time::advance(d).await`
//! every wheel timer due by then has already woken its task, just as a
//! `tokio::time::Sleep` would have (when the wheel's tick grid, which starts
//! where the timer was built, lines up with tokio's millisecond grid; if
//! not, the alarm's rounding to tokio's millisecond comes on top of the
//! tick's, up to 1 ms later). A driver *task* could not promise that,
//! because it would run only after the task that called `advance` had been
//! polled again.
//!
//! `notify` is also called by a registration whose deadline is earlier than
//! the tick the alarm is armed for (`wake_at`), so a new earliest timer makes
//! the alarm re-arm at once: no missed wake-up and no polling loop.
//!
//! # Callbacks never run inline
//!
//! That registration runs a pass on its caller's stack (`notify_inline`):
//! a `Sleep`'s poll or reset, on any thread, under any lock its caller
//! holds. The pass wakes what is due, which is what tokio does when a
//! registration finds its deadline passed, but a callback must not run
//! there: it could take a lock the caller holds, and `Timer::schedule`
//! promises it runs where the timer is driven. So an inline pass on a
//! runtime timer moves each due callback it takes to `Control::deferred`
//! (still counted in `callbacks`, so `keep_alive` holds), under the shard's
//! lock it took it under, so that a shutdown finds every callback in a
//! wheel or deferred, never in between, and then spawns a task on the
//! runtime that calls `notify`. The runner proper runs the deferred
//! callbacks first thing in its next pass, whoever's pass that is: they
//! were taken before anything it can take, so callbacks still run tick by
//! tick. Shutdown hands back those still deferred. That task's `notify`
//! may find another inline pass running and leave the work to it; the
//! inline runner, seeing the `CALLBACKS_ASKED` bit such a `notify` sets
//! (see below), spawns another rather than run them itself. A manual
//! timer's inline pass runs them: it has no runtime to hand them to, and it can only find
//! one due while an `advance` on another thread has moved the clock and not
//! yet processed it, the one case in which a callback runs on a thread
//! registering a sleep, at the moment the `advance` would have run it.
//!
//! # The runner state
//!
//! `notify` may be called from any thread, and from inside itself: polling
//! the alarm can call its waker synchronously (tokio's coop budget, or an
//! `AtomicWaker` racing a fire), and a callback may schedule or advance. So
//! `notify` never blocks. `run_state` holds `RUNNING` (one caller is
//! processing), `NOTIFIED` (something happened since it last looked) and
//! `CALLBACKS_ASKED` (a caller that may run callbacks, unlike an inline
//! pass, was among them). A caller sets them; if `RUNNING` was already set
//! it returns, and the runner, whose final `compare_exchange(RUNNING, 0)`
//! then fails, goes round again. AcqRel on both sides makes every
//! registration that set `NOTIFIED` visible to the runner's next pass (and the wheel itself is read under the
//! mutex anyway). `advance_to` must not return before its time has been
//! processed, so after notifying it waits for `RUNNING` to clear, unless the
//! runner is its own thread (a callback advancing the clock), which goes
//! round again once the callback returns.
//!
//! # Polling without the lock
//!
//! A pending `Sleep` is polled again and again (a `Timeout` polls its delay
//! whenever the inner future is pending), and almost always nothing has
//! changed. Two watermarks, in ticks, let such a poll skip the lock. The
//! runner also publishes each as the latest deadline due by it
//! (`published_at`, `completed_at`: nanoseconds from the base `Deadline`
//! counts from, saturated to `i64`), and a `Sleep`, which keeps its
//! deadline in those units rather than its tick, compares with those: a
//! load and a compare, no division. (A deadline's tick is at most `w` just
//! when the deadline is at most `origin + w * tick`, so the two compare
//! alike; the `Sleep`s beyond `i64` compute their tick and use the ticks.)
//! Each `_at` is stored just before its tick, by whoever raises the tick.
//!
//! `published`: no entry due after it has fired. The runner raises it
//! (outside the shards' locks, with `fetch_max`, since `shut_down` may
//! raise it at the same time) to the tick it is about to process *before*
//! popping
//! (hence before waking) anything due by then; `shut_down` raises it to
//! `u64::MAX`; an entry fired by `reset` is at or before the wheel's
//! `elapsed`, which never passes it. A `Sleep` whose tick is later
//! (Acquire, pairing with the runner's Release) knows its entry has not
//! fired; if the waker it last left in the entry also `will_wake` the one it
//! is polled with, it returns `Pending` untouched. A runner that has
//! already taken that waker and not yet woken it will wake it, so the task
//! is polled again and then sees the new value (the wake orders it).
//! Raising `published` early only sends polls to the locked path; it is
//! never lowered.
//!
//! `completed`: no entry due by it is still in the wheel. The runner raises
//! it (outside the locks) once it has popped, under each shard's lock, and
//! freed everything due by the tick it processed, and never at shutdown,
//! which leaves entries in place.
//! A `Sleep` whose tick is at or before it has fired: it completes, and on
//! drop or reset lets go of its key, without the lock. So a fired `Sleep`
//! never uses its key again once the batch that fired it is done. Between
//! the pop and the raise (one batch) a poll takes the lock and finds the
//! key gone, which also means fired: only the driver and the owning `Sleep`
//! free a `Sleep`'s entry. The key's generation (24 bits, so that a `Sleep`
//! keeps it and its deadline in sixteen bytes: [`KEY_GENERATION_BITS`])
//! matches a newer entry in the same slab slot if 2^24 insertions into that
//! shard come in between, which a callback looping within the pass can do
//! (and a thread stalled between its lock-free look and the lock could
//! see). So every use of a key under the lock checks that it still names
//! its own entry: a `Sleep`'s, and a registration's after it released the
//! lock to notify, by the watermark and the entry's tick
//! ([`Shared::owns`]: a newer entry in the slot is always due later); a
//! callback handle's by the callback's identity (`cancel_callback`).
//!
//! # Shards
//!
//! One lock for every timer would make a multi-thread runtime's workers,
//! each creating and cancelling timeouts, take turns on one cache line (the
//! contention tokio's single timer lock was known for). So a timer splits
//! into shards, each a wheel behind its own lock: a registration goes to
//! the calling thread's shard (each timer deals its shards out to threads
//! as they first register, see `home.rs`), and its key carries the shard in
//! the low `shard_bits` of its index, so polling, resetting and cancelling
//! find it from any thread. A current-thread runtime's timer has
//! one shard; a multi-thread runtime's has twice its workers, rounded up to
//! a power of two. Every shard's wheel advances to the same tick in each
//! runner pass, so `published` and `completed` hold for all of them.
//!
//! Each shard keeps its own `wake_at`, under its lock: the promise that
//! the runner will look at that wheel by then. A registration due before it
//! lowers it and notifies, exactly as with one wheel. The runner, looking
//! at each shard in turn, sets that shard's `wake_at` to the wheel's next
//! expiration and arms the alarm for the earliest over all shards, which is
//! no later than any shard's promise. A registration in a shard the pass
//! has already looked at sees the promise the pass just made and notifies
//! if it is earlier; one in a shard not yet looked at is seen by the pass.
//! So registrations notify only when they pull a promise in, and a runner
//! is not kept going round by registrations it has nothing to do for.
//! `loom_sharded_registration_vs_runner` fails if the pass does not renew
//! each shard's promise.
//!
//! A timer with a `max_pending` limit keeps one shard, so the limit is
//! counted exactly under one lock.
//!
//! # Locks
//!
//! A shard's lock guards its wheel and its counters. A callback's phase
//! leaves `PENDING` by compare-and-swap (see `job.rs`): a cancel swaps it
//! under the shard's lock, so it knows whether the callback is still in
//! the wheel; the runner swaps it outside any lock, just before running a
//! callback it took out earlier. `Shared::control` guards the alarm, the manual time, the
//! sentinel, the callback count with its keep-alive, and the deferred
//! callbacks. No code holds a shard's lock and then takes `control`, or the
//! other way round, except a registration on a manual timer, which reads
//! the manual time, and an inline pass deferring a callback (both shard,
//! then control), and nothing takes a shard's lock while holding `control`,
//! so there is no cycle. The alarm is polled with `control` held; that is
//! safe because its waker only touches `run_state` while a runner exists.
//! Wakers are woken and callbacks run only after every lock is released, so
//! a woken task that immediately polls its `Sleep`, or a callback that
//! schedules another, does not deadlock or contend with the batch. A
//! panicking waker or callback is caught and counted; the driver carries on
//! with the rest.
//!
//! # Shutdown
//!
//! [`Shared::shut_down`] marks the timer shut down, hands back the pending
//! callbacks, and wakes every pending `Sleep`, which then panics with a
//! message saying why rather than hanging (or completing early). New work is
//! refused. `Timer::shutdown` calls it; so does the runtime: tokio drops
//! every task before it shuts its time driver down, and each runtime timer
//! spawns a tiny [`Sentinel`] task whose drop calls it. The alarm is never
//! polled after that, so tokio's own "runtime is shutting down" assertion is
//! never reached: a pass checks for shutdown under `control` before it arms
//! the alarm, and `shut_down` takes `control` after setting its flag, so a
//! pass that missed the flag has armed the alarm before the shutdown ends
//! (and tokio shuts its time driver down only after that). A pass started
//! after shutdown does nothing at all, not even read the clock: tokio fires
//! the alarm as its driver shuts down, possibly in a thread-local's
//! destructor, where reading a paused clock would panic. A closure dropped
//! by the shutdown (a deferred callback whose handle cancelled it) is
//! dropped last, after every wake, its panic caught and counted.

mod clock;
mod home;
pub(crate) mod job;
#[cfg(all(test, loom))]
mod loom;
pub(crate) mod registry;
mod sentinel;

use std::cell::RefCell;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::task::{Context, Poll, Wake, Waker};

use tokio::time::Instant;

pub(crate) use clock::{Clock, Deadline};

/// The generations a timer's keys carry: what a `Sleep` has room for beside
/// its deadline and its key's 32-bit index, in sixteen bytes. A stale key
/// is used only between a batch's pop and its `completed` raise (see
/// "Polling without the lock"), and then checked ([`Shared::owns`]), so a
/// generation come round does not make it name a newer entry.
pub(crate) const KEY_GENERATION_BITS: u32 = 128 - Deadline::BITS - 32;
pub(crate) use job::WakerId;
use job::{
    held_waker, is_no_waker, is_registering, registering_waker, Batch, Callback, CallbackState,
    Fire, Job, RunOrder,
};
pub(crate) use sentinel::Sentinel;

use crate::error::Error;
use crate::sync::{
    yield_now, Arc, AtomicBool, AtomicI64, AtomicU64, AtomicU8, Mutex, Ordering, Weak,
};
use crate::wheel::{Key, Wheel};
use crate::Stats;

const RUNNING: u8 = 0b001;
const NOTIFIED: u8 = 0b010;
/// A caller that may run callbacks (not an inline pass) notified: see
/// "The runner state".
const CALLBACKS_ASKED: u8 = 0b100;
/// "No tick": the alarm is not armed, or nothing is promised.
const NEVER: u64 = u64::MAX;
/// The most shards a timer splits into: a key's index gives up
/// `log2(shards)` of its 32 bits to name the shard.
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

// The timers whose runners are on this thread's stack, innermost last (raw
// pointers used only for identity), so `advance_to` called from inside a
// callback does not wait for itself, even when another timer's runner
// (a callback advancing a second manual timer, whose callback advances the
// first) sits between. Loom's own thread-local under loom, whose threads are
// not OS threads.
#[cfg(not(loom))]
std::thread_local! {
    static RUNNERS_HERE: RefCell<Vec<*const Shared>> = const { RefCell::new(Vec::new()) };
}
#[cfg(loom)]
::loom::thread_local! {
    static RUNNERS_HERE: RefCell<Vec<*const Shared>> = RefCell::new(Vec::new());
}

/// State shared by a timer's handles, its `Sleep`s, its callbacks' handles
/// and its alarm.
pub(crate) struct Shared {
    /// The wheels; see "Shards".
    shards: Box<[Shard]>,
    /// `log2(shards.len())`: the low bits of a key's index name its shard.
    shard_bits: u32,
    /// `shards.len() - 1`: those bits.
    shard_mask: u32,
    /// Entries a shard may hold: its slab indices must leave room for the
    /// shard number in a key's 32-bit index.
    shard_capacity: usize,
    /// Deals shards to the threads that register (see `home.rs`). A std
    /// atomic even under loom, whose models use thread indices instead.
    dealer: std::sync::atomic::AtomicUsize,
    /// What only the runner (and shutdown) changes: the clock, the alarm.
    control: Mutex<Control>,
    run_state: AtomicU8,
    /// Set once by `shut_down` (before it takes the shards' entries).
    shut_down: AtomicBool,
    /// No entry due after this tick has fired: see "Polling without the
    /// lock".
    published: AtomicU64,
    /// Every entry due by this tick has fired and been freed.
    completed: AtomicU64,
    /// `published` as the latest deadline due by it ([`Clock::deadline_at`]),
    /// so that a `Sleep`, which keeps its deadline and not its tick, can
    /// compare without dividing.
    published_at: AtomicI64,
    /// `completed` likewise.
    completed_at: AtomicI64,
    /// Wakers and callbacks that panicked when fired.
    panicked: AtomicU64,
    /// Callbacks claimed to run: their part of `Stats::fired`, counted
    /// where they run, outside any lock, because until then a cancel can
    /// still stop them (a shard's `fired` counts its sleeps).
    callbacks_fired: AtomicU64,
    clock: Clock,
    slots_per_level: usize,
    max_pending: usize,
    /// `None` for a manual timer.
    runtime: Option<Runtime>,
}

/// A runtime timer's link to its runtime.
struct Runtime {
    /// The driver reads the clock inside this runtime's context: with
    /// tokio's paused clock, another runtime's (or the real) clock could be
    /// ahead of this one, and reading it would fire early.
    handle: tokio::runtime::Handle,
    /// Set for a runtime's default timer, so shutdown can unregister it.
    default_for: Option<tokio::runtime::Id>,
    /// The timer itself, for the task that runs deferred callbacks (see
    /// "Callbacks never run inline").
    me: Weak<Shared>,
}

/// One wheel behind its own lock, on cache lines of its own so that two
/// workers' shards never share one.
#[repr(align(128))]
struct Shard(Mutex<Inner>);

/// A shard's state.
struct Inner {
    wheel: Wheel<Job>,
    /// The runner will look at this wheel by this tick at the latest; a
    /// registration due before it must notify. See "Shards".
    wake_at: u64,
    shut_down: bool,
    fired: u64,
    cancelled: u64,
}

/// The runner's state, and the callbacks' keep-alive.
struct Control {
    time: Time,
    /// The tick the alarm is armed for, or `NEVER`.
    alarm_at: u64,
    sentinel: Option<Waker>,
    /// Pending callbacks, and the self-reference that keeps a runtime timer
    /// alive while there are any.
    callbacks: usize,
    keep_alive: Option<Arc<Shared>>,
    /// Callbacks ever scheduled: see [`CallbackState::run_order`].
    scheduled: u64,
    /// Due callbacks that a registration's inline pass took out of the
    /// wheel, in the order taken; still counted in `callbacks`. The next
    /// pass of the runner proper runs them first; shutdown hands them back.
    /// With each, the shard it was in, whose `cancelled` counts it if
    /// shutdown hands it back.
    deferred: Vec<(usize, Box<Callback>)>,
}

/// Where a timer's time comes from.
enum Time {
    /// Tokio's clock, and the one tokio timer armed for `alarm_at`.
    Alarm {
        alarm: Pin<Box<tokio::time::Sleep>>,
        waker: Waker,
    },
    /// A manual clock: only `advance_to` moves it.
    Manual { now: Instant },
}

impl Control {
    fn now(&self) -> Instant {
        match self.time {
            Time::Alarm { .. } => Instant::now(),
            Time::Manual { now } => now,
        }
    }

    /// `done` callbacks fewer: returns the self-reference to drop (outside
    /// the lock) when none is left.
    fn callbacks_done(&mut self, done: usize) -> Option<Arc<Shared>> {
        if done == 0 {
            return None;
        }
        self.callbacks -= done;
        if self.callbacks == 0 {
            self.keep_alive.take()
        } else {
            None
        }
    }

    /// The runner's [`callbacks_done`](Control::callbacks_done): uncounts
    /// the callbacks it has `taken` since it last did (zeroing `taken`), and
    /// keeps the self-reference to drop in `release` when none is left.
    fn uncount_taken(&mut self, taken: &mut usize, release: &mut Option<Arc<Shared>>) {
        if let Some(last) = self.callbacks_done(std::mem::take(taken)) {
            *release = Some(last);
        }
    }
}

impl Inner {
    /// Whether a deadline at `tick` comes before the runner's next look at
    /// this wheel. If so, moves that promise up; the caller must then
    /// `notify` (after releasing the lock) so the alarm is re-armed.
    fn pull_in(&mut self, tick: u64) -> bool {
        let earlier = tick < self.wake_at;
        if earlier {
            self.wake_at = tick;
        }
        earlier
    }

    /// Refuses new work on a shut-down or full timer (or shard).
    fn admit(&mut self, max_pending: usize, shard_capacity: usize) -> Result<(), Error> {
        if self.shut_down {
            Err(Error::shut_down())
        } else if self.wheel.scheduled() >= max_pending {
            Err(Error::at_capacity(max_pending))
        } else if self.wheel.len() >= shard_capacity && self.full_after_flush(shard_capacity) {
            Err(Error::shard_full(shard_capacity))
        } else {
            Ok(())
        }
    }

    /// Whether the slab is still full once discarded entries are freed:
    /// they hold slab indices until flushed, and must not make a shard
    /// refuse work it has room for.
    #[cold]
    fn full_after_flush(&mut self, shard_capacity: usize) -> bool {
        self.wheel.flush_discarded();
        self.wheel.len() >= shard_capacity
    }

    /// What a fired entry's job must do, counting a sleep's fired; `true`
    /// with a callback, which the caller then counts done (under `Control`).
    fn take_fire(&mut self, job: Job) -> (Option<Fire>, bool) {
        match job {
            // A sleep completing at its first poll: see `register`.
            Job::Wake(waker) if is_registering(&waker) => (None, false),
            Job::Wake(waker) => {
                self.fired += 1;
                (held_waker(waker).map(Fire::Wake), false)
            }
            // Left `PENDING`: claimed just before it runs, and counted fired
            // then (see `fire`), since a cancel can still stop it.
            Job::Call(callback) => (Some(Fire::Call(callback)), true),
        }
    }
}

/// What registering a deadline led to.
#[derive(Debug)]
pub(crate) enum Registration {
    /// In the wheel, under this key, its entry holding a clone of the
    /// registering waker with this identity (`None`: no waker was given).
    Pending(Key, Option<WakerId>),
    /// The deadline's tick has already been processed: complete now.
    Elapsed,
    /// The timer refused it.
    Refused(Error),
}

/// What [`Shared::poll_entry`] found.
#[derive(Debug)]
pub(crate) enum Polled {
    /// Still pending; the entry holds the waker with this identity.
    Pending(WakerId),
    /// Fired (or due by the clock on a timer shut down): complete.
    Ready,
    /// Not due, on a timer that has shut down: it can never complete.
    Refused(Error),
}

/// What [`Shared::progress`] can tell about a `Sleep`'s entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Progress {
    /// It has certainly not fired.
    NotFired,
    /// It may be firing right now: ask under the lock.
    Unknown,
    /// It has fired and been freed: its key must not be used again.
    Fired,
}

impl Progress {
    /// Where an entry due at `due` (a tick, or a deadline) stands against
    /// the `published` and `completed` watermarks, read in that order, the
    /// second only if needed.
    #[inline(always)]
    fn of<T: PartialOrd>(
        due: T,
        published: impl FnOnce() -> T,
        completed: impl FnOnce() -> T,
    ) -> Progress {
        if due > published() {
            Progress::NotFired
        } else if due <= completed() {
            Progress::Fired
        } else {
            Progress::Unknown
        }
    }
}

/// What [`Shared::reset`] did with a `Sleep`'s entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reset {
    /// Moved; still pending. `holds_waker`: the entry still has the waker
    /// the `Sleep` last left in it.
    Pending { holds_waker: bool },
    /// The new deadline's tick was already processed: fired, freed and woken.
    Fired,
    /// The driver had already fired and freed it.
    Gone,
}

/// The outcome of [`Shared::shut_down`]: what will never run.
pub(crate) struct Leftovers {
    /// By deadline, then as scheduled ([`CallbackState::run_order`]).
    pub(crate) callbacks: Vec<(RunOrder, Box<dyn FnOnce() + Send>)>,
    pub(crate) sleeps: usize,
}

impl Shared {
    /// A timer on a runtime; must run inside `handle`'s context (it creates
    /// the alarm), and the caller spawns the [`Sentinel`].
    pub(crate) fn new(
        handle: tokio::runtime::Handle,
        geometry: Geometry,
        default_for: Option<tokio::runtime::Id>,
    ) -> Arc<Shared> {
        Arc::new_cyclic(|weak: &Weak<Shared>| {
            let waker = Waker::from(Arc::new(AlarmWaker(weak.clone())));
            // Never polled until armed; creating it registers nothing.
            let alarm = Box::pin(tokio::time::sleep_until(Instant::now()));
            let runtime = Runtime {
                handle,
                default_for,
                me: weak.clone(),
            };
            Shared::with_time(Time::Alarm { alarm, waker }, geometry, Some(runtime))
        })
    }

    /// A manual timer, whose clock starts at `geometry.clock`'s origin.
    pub(crate) fn new_manual(geometry: Geometry) -> Shared {
        let now = geometry.clock.instant_at(0).expect("tick 0 is the origin");
        Shared::with_time(Time::Manual { now }, geometry, None)
    }

    fn with_time(time: Time, geometry: Geometry, runtime: Option<Runtime>) -> Shared {
        let Geometry {
            clock,
            slots_per_level,
            max_pending,
            shards,
        } = geometry;
        assert!(
            shards.is_power_of_two() && shards <= MAX_SHARDS,
            "shards checked by the builder"
        );
        Shared {
            shards: (0..shards)
                .map(|_| {
                    let mut wheel = Wheel::new(slots_per_level);
                    wheel.limit_generations(KEY_GENERATION_BITS);
                    Shard(Mutex::new(Inner {
                        wheel,
                        wake_at: NEVER,
                        shut_down: false,
                        fired: 0,
                        cancelled: 0,
                    }))
                })
                .collect(),
            shard_bits: shards.trailing_zeros(),
            shard_mask: (shards - 1) as u32,
            shard_capacity: if shards == 1 {
                usize::MAX
            } else {
                (1usize << (32 - shards.trailing_zeros())) - 1
            },
            dealer: std::sync::atomic::AtomicUsize::new(0),
            control: Mutex::new(Control {
                time,
                alarm_at: NEVER,
                sentinel: None,
                callbacks: 0,
                keep_alive: None,
                scheduled: 0,
                deferred: Vec::new(),
            }),
            run_state: AtomicU8::new(0),
            shut_down: AtomicBool::new(false),
            published: AtomicU64::new(0),
            completed: AtomicU64::new(0),
            published_at: AtomicI64::new(clock.deadline_at(0)),
            completed_at: AtomicI64::new(clock.deadline_at(0)),
            panicked: AtomicU64::new(0),
            callbacks_fired: AtomicU64::new(0),
            clock,
            slots_per_level,
            max_pending,
            runtime,
        }
    }

    pub(crate) fn clock(&self) -> &Clock {
        &self.clock
    }

    pub(crate) fn slots_per_level(&self) -> usize {
        self.slots_per_level
    }

    pub(crate) fn shards(&self) -> usize {
        self.shards.len()
    }

    pub(crate) fn is_shut_down(&self) -> bool {
        self.shut_down.load(Ordering::Acquire)
    }

    pub(crate) fn is_manual(&self) -> bool {
        self.runtime.is_none()
    }

    /// The timer's current time: a runtime timer's is read inside its
    /// runtime's context (see [`Runtime::handle`]), whatever context the
    /// caller is in.
    pub(crate) fn now(&self) -> Instant {
        match &self.runtime {
            Some(runtime) => {
                let _clock_of_this_runtime = runtime.handle.enter();
                Instant::now()
            }
            None => self.control.lock().now(),
        }
    }

    /// Whether a manual clock has reached `deadline`. A runtime timer's
    /// clock is not read here (see `register`), and no lock is taken for it.
    #[inline]
    fn reached(&self, deadline: Deadline) -> bool {
        self.runtime.is_none() && self.manual_reached(deadline)
    }

    /// [`reached`](Shared::reached) on a manual timer: out of line, so that
    /// a runtime timer's paths carry only the check above.
    #[cold]
    #[inline(never)]
    fn manual_reached(&self, deadline: Deadline) -> bool {
        deadline.reached_by(self.control.lock().now())
    }

    /// The shard this thread registers in: see `home.rs`.
    fn home(&self) -> usize {
        if self.shard_mask == 0 {
            0
        } else {
            let timer = std::ptr::from_ref(self) as usize;
            home::home(timer, &self.dealer, self.shard_mask as usize)
        }
    }

    /// The shard a key names, and the key within that shard's wheel.
    fn locate(&self, key: Key) -> (&Mutex<Inner>, Key) {
        let shard = &self.shards[(key.index & self.shard_mask) as usize].0;
        let local = Key {
            index: key.index >> self.shard_bits,
            generation: key.generation,
        };
        (shard, local)
    }

    /// The key handed out for `local` in shard `shard`: see [`locate`].
    ///
    /// [`locate`]: Shared::locate
    fn key(&self, shard: usize, local: Key) -> Key {
        Key {
            index: (local.index << self.shard_bits) | shard as u32,
            generation: local.generation,
        }
    }

    /// Puts a `Sleep`'s entry in this thread's shard for `deadline`, with
    /// the waker of the task polling it, if any yet.
    ///
    /// The caller does not read the clock first, and neither does this on
    /// the common path: a deadline whose tick the wheel has processed is
    /// `Elapsed` at once, and any other is inserted. One that has passed
    /// without the wheel knowing yet (its alarm idle, or asleep) is either
    /// the new earliest, so the runner is notified right here, reads the
    /// clock and fires it before this returns `Elapsed`; or it is behind an
    /// earlier pending tick, whose alarm is then already due and fires it
    /// with that tick: late by at most a tick, never early, as with
    /// `tokio::time`, which does not read the clock on registration either.
    ///
    /// `tick` is `deadline`'s ([`Clock::tick_of`]), which the caller
    /// keeps for [`progress`](Shared::progress).
    pub(crate) fn register(
        &self,
        deadline: Deadline,
        tick: u64,
        waker: Option<&Waker>,
    ) -> Registration {
        self.register_counting(deadline, tick, waker, false, false)
    }

    /// Registers a `Sleep` whose entry has fired and is being reset, with
    /// no waker (firing took it). Completing at once counts as firing
    /// again, as resetting a pending entry into the past does; `passed`
    /// (the caller found the deadline passed) completes it at once.
    pub(crate) fn rearm(&self, deadline: Deadline, tick: u64, passed: bool) -> Registration {
        self.register_counting(deadline, tick, None, true, passed)
    }

    /// [`register`](Shared::register); with `count_elapsed`, an `Elapsed`
    /// deadline counts as fired, and `passed` makes it `Elapsed`. An entry
    /// the runner fires while this has released the lock to notify it is
    /// counted here, by the same rule, not by the runner (see the
    /// registering waker below), so `Stats::fired` never has to go down.
    fn register_counting(
        &self,
        deadline: Deadline,
        tick: u64,
        waker: Option<&Waker>,
        count_elapsed: bool,
        passed: bool,
    ) -> Registration {
        debug_assert_eq!(tick, self.clock.tick_of(deadline));
        let home = self.home();
        let shard = &self.shards[home].0;
        let mut inner = shard.lock();
        if tick <= inner.wheel.elapsed() || passed || self.reached(deadline) {
            inner.fired += u64::from(count_elapsed);
            return Registration::Elapsed;
        }
        if let Err(refused) = inner.admit(self.max_pending, self.shard_capacity) {
            drop(inner);
            // Cold: a deadline already passed still completes on a timer
            // that can no longer fire anything.
            return if deadline.reached_by(self.now()) {
                shard.lock().fired += u64::from(count_elapsed);
                Registration::Elapsed
            } else {
                Registration::Refused(refused)
            };
        }
        if !inner.pull_in(tick) {
            let (job, held) = Job::wake(waker);
            let local = inner.wheel.insert(tick, job);
            return Registration::Pending(self.key(home, local), held);
        }
        // The new earliest deadline: notify the runner, which reads the
        // clock and fires the entry if the deadline has passed. The waker is
        // stored only if it has not, so a sleep that completes here leaves no
        // wake-up behind (only a `Pending` poll arranges one); both checks
        // are under the shard's lock, so no firing can slip between them.
        // Until then the entry holds the registering waker, so whichever
        // runner fires it knows this is a first poll completing, not a fire,
        // and does not count it: `Stats::fired` never has to go back down.
        let local = inner.wheel.insert(tick, Job::Wake(registering_waker()));
        drop(inner);
        self.notify_inline();
        let mut inner = shard.lock();
        if inner.shut_down {
            // Shut down while the lock was released (by a waker the inline
            // pass just woke, a manual timer's callback, or another thread). The shutdown found the
            // entry pending and counted it among the sleeps that never
            // completed, but woke only the no-op waker it held: so it stays
            // pending, as the shutdown reported, and its task is woken here
            // to learn of the shutdown, as the shutdown's own wake would
            // have had it.
            drop(inner);
            if let Some(waker) = waker {
                waker.wake_by_ref();
            }
            return Registration::Pending(self.key(home, local), None);
        }
        // The runner may have fired (uncounted) and freed the entry
        // meanwhile, and a callback refilled its slot: see `owns`.
        if !self.owns(&inner, local, deadline) {
            inner.fired += u64::from(count_elapsed);
            return Registration::Elapsed;
        }
        let held = match inner.wheel.value_mut(local) {
            Some(Job::Wake(slot)) => {
                // The marker's drop is a count decrement: never the last.
                let (Job::Wake(waker), held) = Job::wake(waker) else {
                    unreachable!("a sleep's job wakes")
                };
                *slot = waker;
                held
            }
            // Fired (uncounted) and freed by the runner: completed, to the
            // caller, for whom it never was pending.
            None => {
                inner.fired += u64::from(count_elapsed);
                return Registration::Elapsed;
            }
            Some(Job::Call(_)) => unreachable!("a Sleep's key names a callback"),
        };
        Registration::Pending(self.key(home, local), held)
    }

    /// Checks a `Sleep`'s entry: `Ready` once it has fired (the driver has
    /// freed it), otherwise stores a clone of `waker` unless the one held
    /// already `will_wake` it, and says which one the entry holds now.
    ///
    /// `deadline` is the sleep's, for [`owns`](Shared::owns) and after
    /// shutdown.
    pub(crate) fn poll_entry(&self, key: Key, deadline: Deadline, waker: &Waker) -> Polled {
        let (shard, key) = self.locate(key);
        let mut inner = shard.lock();
        let shut_down = inner.shut_down;
        if !self.owns(&inner, key, deadline) {
            return Polled::Ready;
        }
        match inner.wheel.value_mut(key) {
            Some(_) if shut_down => {
                // Cold. Due by the clock, though the driver never got to it
                // (the shutdown came first): it completes, as a sleep made
                // now with that deadline would, exactly (not by ticks).
                if !deadline.reached_by(self.now()) {
                    return Polled::Refused(Error::shut_down());
                }
                let job = inner.wheel.remove(key);
                inner.fired += 1;
                drop(inner);
                drop(job);
                Polled::Ready
            }
            Some(Job::Wake(slot)) => {
                let old = (!slot.will_wake(waker)).then(|| std::mem::replace(slot, waker.clone()));
                let held = WakerId::of(slot);
                drop(inner);
                drop(old);
                Polled::Pending(held)
            }
            Some(Job::Call(_)) => unreachable!("a Sleep's key names a callback"),
            // Only the driver (firing it) and the owning `Sleep` free the
            // entry, and shutdown leaves it in place: gone means fired.
            None => Polled::Ready,
        }
    }

    /// How far the runner has got with the entry of a sleep due at `tick`,
    /// as far as can be told without the lock. See "Polling without the
    /// lock".
    ///
    /// `near` is the deadline's [`to_i64`](Deadline::to_i64), which the
    /// caller has at hand; `deadline` gives the whole, called only when that
    /// is `None` (and by a debug assertion).
    #[inline]
    pub(crate) fn progress(&self, near: Option<i64>, deadline: impl Fn() -> Deadline) -> Progress {
        debug_assert_eq!(near, deadline().to_i64());
        // Exact: a deadline's tick is at most `w` just when the deadline is
        // at most `deadline_at(w)`, and saturating at the ends of `i64`
        // keeps that for every deadline `to_i64` lets through.
        let Some(near) = near else {
            return self.progress_of_tick(self.clock.tick_of(deadline()));
        };
        Progress::of(
            near,
            || self.published_at.load(Ordering::Acquire),
            || self.completed_at.load(Ordering::Acquire),
        )
    }

    /// Whether `key` (local to `inner`, its shard, whose lock the caller
    /// holds) still names the entry of the `Sleep` due at `deadline`.
    ///
    /// A `Sleep` may use its key after the driver has fired and freed its
    /// entry (until `completed` tells it so), and the slot may by then hold
    /// a newer entry whose generation, come round (24 bits: a callback
    /// looping 2^24 times within one pass does it), matches the key. Under
    /// the lock, a `published` watermark still short of the deadline proves
    /// the entry unfired: the runner publishes before it pops, and pops
    /// under this lock. Otherwise the tick tells: an entry is only inserted
    /// or moved after the wheel's `elapsed`, which had reached the fired
    /// entry's tick when it was popped, so a newer entry in its slot is due
    /// later; and a `Sleep`'s own entry is always due at its deadline's tick.
    #[inline(always)]
    fn owns(&self, inner: &Inner, key: Key, deadline: Deadline) -> bool {
        self.progress(deadline.to_i64(), || deadline) == Progress::NotFired
            || self.owns_by_tick(inner, key, deadline)
    }

    /// [`owns`](Shared::owns) once the watermark cannot vouch for the entry.
    #[cold]
    #[inline(never)]
    fn owns_by_tick(&self, inner: &Inner, key: Key, deadline: Deadline) -> bool {
        inner.wheel.deadline(key) == Some(self.clock.tick_of(deadline))
    }

    /// [`progress`](Shared::progress) by the tick, for the deadlines more
    /// than 292 years from the base.
    #[cold]
    #[inline(never)]
    fn progress_of_tick(&self, tick: u64) -> Progress {
        Progress::of(
            tick,
            || self.published.load(Ordering::Acquire),
            || self.completed.load(Ordering::Acquire),
        )
    }

    /// Whether the entry of a `Sleep` due at `deadline` has fired (the
    /// driver has freed it), or is due on a timer that has shut down, so
    /// that its next poll completes it (see `poll_entry`).
    pub(crate) fn has_fired(&self, key: Key, deadline: Deadline) -> bool {
        let (shard, key) = self.locate(key);
        let inner = shard.lock();
        !self.owns(&inner, key, deadline) || (inner.shut_down && deadline.reached_by(self.now()))
    }

    /// Cancels the entry of a `Sleep` that is dropped or reset before it
    /// completed; nothing if the driver has fired (and freed) it meanwhile.
    /// The waker goes now; the entry is freed with a batch of others (see
    /// `wheel/discard.rs`).
    ///
    /// `deadline` is the sleep's, for [`owns`](Shared::owns).
    pub(crate) fn cancel(&self, key: Key, deadline: Deadline) {
        let (shard, key) = self.locate(key);
        let mut inner = shard.lock();
        if !self.owns(&inner, key, deadline) {
            return;
        }
        let taken = inner.wheel.discard(key);
        if taken.is_some() {
            inner.cancelled += 1;
        }
        drop(inner);
        drop(taken);
    }

    /// Moves a pending `Sleep`'s entry to `tick` (`deadline`'s), keeping its
    /// waker. If that tick is already processed, or a manual clock has
    /// reached `deadline`, or the caller has found it `passed`, the entry
    /// fires now: it is freed and its waker woken.
    ///
    /// After shutdown a pending entry is still moved (only the alarm is left
    /// alone), so its next poll reports the shutdown.
    ///
    /// `old` is the sleep's deadline before this reset, for
    /// [`owns`](Shared::owns).
    pub(crate) fn reset(
        &self,
        key: Key,
        old: Deadline,
        deadline: Deadline,
        tick: u64,
        passed: bool,
    ) -> Reset {
        debug_assert_eq!(tick, self.clock.tick_of(deadline));
        // Cold: after shutdown nothing will fire the entry, so a deadline
        // that has passed fires it here, as registering afresh would (see
        // `register`), rather than leave it to report the shutdown.
        let passed_after_shutdown = self.is_shut_down() && deadline.reached_by(self.now());
        let (shard, key) = self.locate(key);
        let mut inner = shard.lock();
        if !self.owns(&inner, key, old) {
            return Reset::Gone;
        }
        let moved = if passed || passed_after_shutdown || self.reached(deadline) {
            // A deadline already passed by the clock: due now, as a sleep
            // registered afresh would be (see `register`), not at the end of
            // the tick the deadline rounds up to.
            inner.wheel.value_mut(key).map(|_| false)
        } else {
            inner.wheel.reset(key, tick)
        };
        match moved {
            Some(true) => {
                let notify = !inner.shut_down && inner.pull_in(tick);
                let holds_waker =
                    matches!(inner.wheel.value_mut(key), Some(Job::Wake(w)) if !is_no_waker(w));
                drop(inner);
                if notify {
                    self.notify_inline();
                }
                Reset::Pending { holds_waker }
            }
            Some(false) => {
                let job = inner.wheel.remove(key).expect("reset found it");
                let (fire, callback) = inner.take_fire(job);
                debug_assert!(!callback, "a Sleep's key names a callback");
                drop(inner);
                if let Some(fire) = fire {
                    self.fire(fire);
                }
                Reset::Fired
            }
            None => Reset::Gone,
        }
    }

    /// Schedules `run` for `deadline`. A deadline whose tick has already
    /// been processed runs at the next tick: never early, never inline on
    /// the caller's stack.
    pub(crate) fn schedule(
        self: &Arc<Self>,
        deadline: Instant,
        run: Box<dyn FnOnce() + Send>,
    ) -> Result<(Key, Arc<CallbackState>), Error> {
        // Counted first, so the runner, which counts it done once it has
        // run, never sees the count short.
        let seq = {
            let mut control = self.control.lock();
            control.callbacks += 1;
            if self.runtime.is_some() && control.keep_alive.is_none() {
                control.keep_alive = Some(self.clone());
            }
            control.scheduled += 1;
            control.scheduled
        };
        let state = Arc::new(CallbackState::new(deadline, seq));
        let job = Job::Call(Box::new(Callback {
            run,
            state: state.clone(),
        }));
        let home = self.home();
        let mut inner = self.shards[home].0.lock();
        if let Err(refused) = inner.admit(self.max_pending, self.shard_capacity) {
            drop(inner);
            // Uncounted before the closure is dropped, which may panic.
            let keep_alive = self.control.lock().callbacks_done(1);
            drop(job);
            drop(keep_alive);
            return Err(refused);
        }
        let tick = self
            .clock
            .deadline_tick(deadline)
            .max(inner.wheel.elapsed().saturating_add(1));
        let local = inner.wheel.insert(tick, job);
        let notify = inner.pull_in(tick);
        drop(inner);
        // Never a runner started here: it could fire this very callback
        // before `schedule` has returned its handle, inside any lock the
        // caller holds. A runtime timer's wheel lags its clock while its
        // alarm is idle, so a task on the timer's runtime re-arms the alarm
        // instead, where callbacks run. A manual timer has no alarm to
        // re-arm: its next `advance` looks at the wheels itself, and an
        // `advance` under way on another thread either finds the entry or
        // has processed its tick already, which `elapsed` above then put
        // the callback after.
        if let (true, Some(runtime)) = (notify, &self.runtime) {
            let shared = Arc::clone(self);
            drop(runtime.handle.spawn(async move { shared.notify() }));
        }
        Ok((self.key(home, local), state))
    }

    /// Cancels a pending callback; `true` if that stopped it from running.
    ///
    /// A `PENDING` callback is in the wheel, or in a runner's batch (or
    /// deferred): taken out (no longer pending) but not yet claimed to run.
    /// Under the shard's lock, which the runner takes out entries under,
    /// the two cannot change places. Winning the phase stops it
    /// either way; only one still in the wheel is freed and uncounted here,
    /// since the runner has already uncounted one it took.
    pub(crate) fn cancel_callback(&self, key: Key, state: &CallbackState) -> bool {
        let (shard, key) = self.locate(key);
        let mut inner = shard.lock();
        // Run (or running), cancelled, or handed back by a shutdown: there
        // is nothing left to stop.
        if !state.try_cancel() {
            return false;
        }
        inner.cancelled += 1;
        // Still in the wheel only if its slot holds this very callback: once
        // the runner has taken it into a batch, the slot may hold a newer
        // entry whose generation has come round to the key's (see `owns`).
        let in_wheel = matches!(
            inner.wheel.value(key),
            Some(Job::Call(callback)) if std::ptr::eq(Arc::as_ptr(&callback.state), state)
        );
        if !in_wheel {
            // In a batch, or deferred: the runner drops it unrun (it counts
            // fired only the callbacks it claims).
            return true;
        }
        // As a `Sleep`'s: the closure goes now, the entry with a batch.
        let job = inner.wheel.discard(key).expect("found above");
        debug_assert!(matches!(job, Job::Call(_)));
        drop(inner);
        // Uncounted before the closure is dropped: a closure whose drop
        // panics must not leave the count, and the timer's hold on itself,
        // behind.
        let keep_alive = self.control.lock().callbacks_done(1);
        drop(job);
        drop(keep_alive);
        true
    }

    pub(crate) fn stats(&self) -> Stats {
        let mut stats = Stats::default();
        for shard in self.shards.iter() {
            let mut inner = shard.0.lock();
            // Entries discarded and not yet flushed are no longer in use:
            // free them, so that `entries` (and the slab) show it.
            inner.wheel.flush_discarded();
            stats.pending += inner.wheel.scheduled();
            stats.entries += inner.wheel.len();
            stats.levels = stats.levels.max(inner.wheel.levels());
            stats.fired += inner.fired;
            stats.cancelled += inner.cancelled;
            stats.allocated_entries += inner.wheel.allocated_entries();
            stats.level_bytes += inner.wheel.level_bytes();
        }
        stats.callbacks = self.control.lock().callbacks;
        stats.fired += self.callbacks_fired.load(Ordering::Relaxed);
        stats.panicked = self.panicked.load(Ordering::Relaxed);
        stats
    }

    /// The earliest tick at which some shard has work, if any.
    fn next_expiration(&self) -> Option<u64> {
        self.shards
            .iter()
            .filter_map(|shard| shard.0.lock().wheel.next_expiration())
            .min()
    }

    /// Moves a manual timer's clock to `target` (never backwards) and fires
    /// everything due by then before returning. It steps from one
    /// expiration to the next, so a callback (or a task polled on another
    /// thread meanwhile) sees the time it was due at, not `target`.
    ///
    /// # Panics
    ///
    /// Panics on a runtime timer.
    #[track_caller]
    pub(crate) fn advance_to(&self, target: Instant) {
        let this: *const Shared = self;
        let reentrant = RUNNERS_HERE
            .try_with(|runners| runners.borrow().contains(&this))
            .unwrap_or(false);
        loop {
            // A shut-down timer fires nothing more: one step to the target.
            let stepping = !reentrant && !self.is_shut_down();
            let next = if stepping {
                // Not to `NEVER`, where deadlines beyond the clock's range
                // are clamped: that tick never comes, so stepping there would
                // fire nothing and find it next again, for ever.
                self.next_expiration()
                    .filter(|&tick| tick != NEVER)
                    .and_then(|tick| self.clock.instant_at(tick))
                    .filter(|&at| at < target)
            } else {
                None
            };
            let mut control = self.control.lock();
            let Time::Manual { now } = &mut control.time else {
                drop(control);
                panic!(
                    "wheel: advance needs a manual timer (Timer::builder().manual()); \
                     this one follows its runtime's clock"
                );
            };
            let step = next.unwrap_or(target);
            *now = (*now).max(step);
            drop(control);
            self.notify();
            if reentrant {
                // A callback is advancing the clock: this thread's runner saw
                // `NOTIFIED` and goes round again when the callback returns.
                return;
            }
            // Another thread's runner saw `NOTIFIED`: it processes the new
            // time before it clears `RUNNING`.
            while self.run_state.load(Ordering::Acquire) & RUNNING != 0 {
                yield_now();
            }
            if next.is_none() {
                return;
            }
        }
    }

    /// Advances the wheel to now, fires what is due and re-arms the alarm;
    /// see "The runner state" above. Never blocks on another runner.
    pub(crate) fn notify(&self) {
        self.run(false);
    }

    /// [`notify`](Shared::notify) from a registration or a reset, on the
    /// caller's stack: a runtime timer's due callbacks are left to the
    /// runner proper, a manual timer's are not (see "Callbacks never run
    /// inline").
    fn notify_inline(&self) {
        self.run(self.runtime.is_some());
    }

    /// The runner protocol, for a pass that runs callbacks or (`inline`)
    /// defers them.
    fn run(&self, inline: bool) {
        let asks = if inline {
            RUNNING | NOTIFIED
        } else {
            RUNNING | NOTIFIED | CALLBACKS_ASKED
        };
        if self.run_state.fetch_or(asks, Ordering::AcqRel) & RUNNING != 0 {
            return;
        }
        // Takes this thread's runner mark off, and clears `run_state` if
        // `process` unwinds, so the timer is not wedged.
        struct Running<'a> {
            state: &'a AtomicU8,
            finished: bool,
        }
        impl Drop for Running<'_> {
            fn drop(&mut self) {
                let _ = RUNNERS_HERE.try_with(|runners| runners.borrow_mut().pop());
                if !self.finished {
                    self.state.store(0, Ordering::Release);
                }
            }
        }
        // Gone only in a thread-local destructor; then nothing can be
        // running on this thread's stack either.
        let _ = RUNNERS_HERE.try_with(|runners| runners.borrow_mut().push(self));
        let mut running = Running {
            state: &self.run_state,
            finished: false,
        };
        let mut callbacks_asked = false;
        loop {
            let seen = self
                .run_state
                .fetch_and(!(NOTIFIED | CALLBACKS_ASKED), Ordering::AcqRel);
            callbacks_asked |= seen & CALLBACKS_ASKED != 0;
            self.process(inline);
            if self
                .run_state
                .compare_exchange(RUNNING, 0, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                running.finished = true;
                break;
            }
        }
        // An inline runner absorbed a notify that would have run the
        // deferred callbacks (the task spawned for them, say): it must not
        // run them here, so it hands them to a task of their own.
        if inline && callbacks_asked && !self.control.lock().deferred.is_empty() {
            self.spawn_runner();
        }
    }

    /// One runner pass (repeated while the alarm is already due). An
    /// `inline` pass defers the callbacks it takes; any other first runs
    /// those deferred before.
    fn process(&self, inline: bool) {
        // Not after shutdown, which has handed back or woken everything:
        // tokio fires the alarm as its driver shuts down, possibly from a
        // thread-local's destructor, where entering the runtime, or reading
        // its paused clock, panics (and so aborts).
        if self.is_shut_down() {
            return;
        }
        let _clock_of_this_runtime = self.runtime.as_ref().map(|rt| rt.handle.enter());
        let mut batch = Batch::new();
        let mut callbacks_done = 0;
        let mut release = None;
        let mut deferred_any = false;
        let mut control = self.control.lock();
        let mut now = self.clock.now_tick(control.now());
        if !inline && !control.deferred.is_empty() {
            // Due before anything this pass can take: they run first.
            let deferred = std::mem::take(&mut control.deferred);
            let last = control.callbacks_done(deferred.len());
            drop(control);
            deferred
                .into_iter()
                .for_each(|(_, callback)| self.fire(Fire::Call(callback)));
            // The caller holds its own reference, so this is never the last.
            drop(last);
        } else {
            drop(control);
        }
        'pass: loop {
            if self.is_shut_down() {
                break;
            }
            self.publish(now);
            let mut next = NEVER;
            for (index, shard) in self.shards.iter().enumerate() {
                let mut inner = shard.0.lock();
                loop {
                    if inner.shut_down {
                        break 'pass;
                    }
                    let Some(job) = inner.wheel.pop_expired_value(now) else {
                        break;
                    };
                    let (fire, callback) = inner.take_fire(job);
                    let fire = match fire {
                        // Left counted: the runner proper counts it done.
                        // Deferred under the shard's lock, so that a
                        // shutdown finds it in the wheel or in `deferred`.
                        Some(Fire::Call(callback)) if inline => {
                            self.control.lock().deferred.push((index, callback));
                            deferred_any = true;
                            None
                        }
                        fire => {
                            callbacks_done += usize::from(callback);
                            fire
                        }
                    };
                    if fire.is_some_and(|fire| batch.push(fire)) {
                        drop(inner);
                        // Uncounted before any of them runs, so a callback
                        // reading `Stats::callbacks` does not find itself
                        // and its batch still counted (as `pending` does not).
                        let mut control = self.control.lock();
                        control.uncount_taken(&mut callbacks_done, &mut release);
                        drop(control);
                        batch.drain().for_each(|fire| self.fire(fire));
                        inner = shard.0.lock();
                    }
                }
                // This shard's promise: see "Shards".
                inner.wake_at = inner.wheel.next_expiration().unwrap_or(NEVER);
                next = next.min(inner.wake_at);
            }
            self.complete(now);
            let mut control = self.control.lock();
            control.uncount_taken(&mut callbacks_done, &mut release);
            // Not after a shutdown that came since the shards were looked
            // at: tokio's time driver may be shutting down too, and polling
            // the alarm would then panic. A shutdown takes `control` after
            // setting the flag, so either this sees it or the alarm is armed
            // before the shutdown completes.
            if next == NEVER || self.is_shut_down() {
                break;
            }
            if self.arm(&mut control, next).is_pending() {
                break;
            }
            // Already due (the clock moved on while we worked).
            now = self.clock.now_tick(control.now());
        }
        if callbacks_done > 0 {
            let mut control = self.control.lock();
            control.uncount_taken(&mut callbacks_done, &mut release);
        }
        batch.drain().for_each(|fire| self.fire(fire));
        if deferred_any {
            self.spawn_runner();
        }
        // The caller holds its own reference, so this is never the last.
        drop(release);
    }

    /// Starts a runner proper on the timer's runtime, for the callbacks an
    /// inline pass deferred.
    #[cold]
    fn spawn_runner(&self) {
        let runtime = self.runtime.as_ref().expect("only a runtime timer defers");
        // The caller holds a reference, so this upgrades. A runtime that is
        // shutting down drops the task unrun, and its sentinel's shutdown
        // hands the callbacks back.
        if let Some(me) = runtime.me.upgrade() {
            drop(runtime.handle.spawn(async move { me.notify() }));
        }
    }

    /// Announces that entries up to `tick` may fire from now on; called
    /// before any of them is popped.
    ///
    /// The runner and `shut_down` (with `u64::MAX`) may publish at once, so
    /// each watermark only ever rises (`fetch_max`): a load-then-store
    /// could let the runner's tick land after shutdown's `u64::MAX` and
    /// lower it, and a sleep the shutdown woke would then take the lock-free
    /// path, return `Pending`, and never be woken again.
    fn publish(&self, tick: u64) {
        if tick > self.published.load(Ordering::Relaxed) {
            self.published_at
                .fetch_max(self.clock.deadline_at(tick), Ordering::Release);
            self.published.fetch_max(tick, Ordering::Release);
        }
    }

    /// Announces that every entry due by `tick` has fired and been freed;
    /// called once no shard has any more up to `tick`. `now_tick` never
    /// reaches `u64::MAX`, the tick of deadlines beyond the clock's range,
    /// so those never look fired.
    fn complete(&self, tick: u64) {
        debug_assert!(tick < u64::MAX);
        if tick > self.completed.load(Ordering::Relaxed) {
            // Only ever raised, as `publish`'s.
            self.completed_at
                .fetch_max(self.clock.deadline_at(tick), Ordering::Release);
            self.completed.fetch_max(tick, Ordering::Release);
        }
    }

    /// Arms the alarm for `tick`; `Ready` if that moment has already come.
    fn arm(&self, control: &mut Control, tick: u64) -> Poll<()> {
        if control.alarm_at == tick {
            // Armed for this tick and not yet fired: firing would have let
            // the wheels move past it.
            return Poll::Pending;
        }
        let polled = match &mut control.time {
            Time::Manual { now } => {
                if tick <= self.clock.now_tick(*now) {
                    Poll::Ready(())
                } else {
                    Poll::Pending
                }
            }
            Time::Alarm { alarm, waker } => {
                let Some(when) = self.clock.instant_at(tick) else {
                    // Beyond what `Instant` can express: it never comes.
                    control.alarm_at = NEVER;
                    return Poll::Pending;
                };
                alarm.as_mut().reset(when);
                let mut cx = Context::from_waker(waker);
                // Unconstrained: the caller may be a task that has spent its
                // coop budget, and a budget refusal would not register it.
                Pin::new(&mut tokio::task::unconstrained(alarm.as_mut())).poll(&mut cx)
            }
        };
        control.alarm_at = if polled.is_ready() { NEVER } else { tick };
        polled
    }

    /// Wakes a waker or runs a callback, containing a panic so one bad
    /// waker or callback cannot stop the driver from serving everyone else.
    fn fire(&self, fire: Fire) {
        let panicked = match fire {
            Fire::Wake(waker) => catch_unwind(AssertUnwindSafe(|| waker.wake())).is_err(),
            // Dropped unrun if its handle cancelled it while it sat in the
            // batch (`cancel_callback`); a panicking drop is contained too.
            Fire::Call(callback) => catch_unwind(AssertUnwindSafe(|| {
                if callback.state.claim() {
                    self.callbacks_fired.fetch_add(1, Ordering::Relaxed);
                    (callback.run)();
                }
            }))
            .is_err(),
        };
        if panicked {
            self.panicked.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Marks the timer shut down, wakes every pending `Sleep` so that it
    /// observes it, and hands back the callbacks that never ran. Called by
    /// `Timer::shutdown` and when the runtime drops the sentinel; a second
    /// call finds nothing left.
    pub(crate) fn shut_down(&self) -> Leftovers {
        let mut leftovers = Leftovers {
            callbacks: Vec::new(),
            sleeps: 0,
        };
        if self.shut_down.swap(true, Ordering::AcqRel) {
            return leftovers;
        }
        // Every pending sleep must take the locked path, which reports it.
        self.publish(u64::MAX);
        let mut wakers = Vec::new();
        for shard in self.shards.iter() {
            let mut inner = shard.0.lock();
            inner.shut_down = true;
            // A sleep's entry stays, so the `Sleep` learns of the shutdown
            // when it polls; a callback's goes: it is handed back, and
            // nothing will ask for it by key again.
            let keep = |job: &Job| matches!(job, Job::Wake(_));
            for job in inner.wheel.take_scheduled_values(keep) {
                match job {
                    Job::Wake(waker) => {
                        leftovers.sleeps += 1;
                        wakers.extend(held_waker(waker));
                    }
                    Job::Call(callback) => {
                        // In the wheel, so `PENDING`: only this and
                        // `cancel_callback` (under this lock) leave it.
                        let handed_back = callback.state.try_cancel();
                        debug_assert!(handed_back, "a callback in the wheel is pending");
                        // Its handle says cancelled; so do the stats.
                        inner.cancelled += 1;
                        leftovers
                            .callbacks
                            .push((callback.state.run_order(), callback.run));
                    }
                }
            }
        }
        let from_wheels = leftovers.callbacks.len();
        // Those an inline pass took and deferred: still counted, and handed
        // back unless their handles cancelled them meanwhile (handed back,
        // they count as cancelled). An inline pass defers under the shard's
        // lock, which this has taken since marking the shard shut down, so
        // none can be deferred after this.
        let deferred = std::mem::take(&mut self.control.lock().deferred);
        let deferred_count = deferred.len();
        let mut cancelled_meanwhile = Vec::new();
        for (index, callback) in deferred {
            if callback.state.try_cancel() {
                self.shards[index].0.lock().cancelled += 1;
                leftovers
                    .callbacks
                    .push((callback.state.run_order(), callback.run));
            } else {
                cancelled_meanwhile.push(callback);
            }
        }
        // By deadline, then as scheduled: the slab's order is neither (it
        // reuses freed slots last first).
        leftovers.callbacks.sort_by_key(|(order, _)| *order);
        let (keep_alive, sentinel) = {
            let mut control = self.control.lock();
            let keep_alive = control.callbacks_done(from_wheels + deferred_count);
            (keep_alive, control.sentinel.take())
        };
        if let Some(Runtime {
            default_for: Some(id),
            ..
        }) = &self.runtime
        {
            registry::forget(*id, self);
        }
        wakers
            .into_iter()
            .for_each(|waker| self.fire(Fire::Wake(waker)));
        // Let the sentinel task finish: it has nothing left to watch.
        if let Some(sentinel) = sentinel {
            sentinel.wake();
        }
        drop(keep_alive);
        // Last, and each on its own: a closure whose drop panics must not
        // keep the sleeps above from being woken, nor the others from being
        // dropped. It is counted, as a panicking callback is.
        for callback in cancelled_meanwhile {
            if catch_unwind(AssertUnwindSafe(|| drop(callback))).is_err() {
                self.panicked.fetch_add(1, Ordering::Relaxed);
            }
        }
        leftovers
    }

    /// Stores the sentinel's waker; `false` if the timer has already shut down.
    pub(crate) fn set_sentinel(&self, waker: &Waker) -> bool {
        let mut control = self.control.lock();
        if self.is_shut_down() {
            return false;
        }
        match &control.sentinel {
            Some(held) if held.will_wake(waker) => {}
            _ => control.sentinel = Some(waker.clone()),
        }
        true
    }

    /// What the loom models check once every thread is done: the earliest
    /// tick any shard has work at, the earliest shard's `wake_at`, and the
    /// tick the alarm is armed for.
    #[cfg(all(test, loom))]
    fn armed(&self) -> (Option<u64>, u64, u64) {
        let next = self.next_expiration();
        let wake_at = self.shards.iter().map(|shard| shard.0.lock().wake_at).min();
        let alarm_at = self.control.lock().alarm_at;
        (next, wake_at.unwrap_or(NEVER), alarm_at)
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        // Every handle is gone: let the sentinel task finish.
        if let Some(waker) = self.control.get_mut().sentinel.take() {
            waker.wake();
        }
    }
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("tick", &self.clock.tick())
            .field("slots_per_level", &self.slots_per_level)
            .field("shards", &self.shards.len())
            .field("manual", &self.is_manual())
            .field("shut_down", &self.is_shut_down())
            .finish_non_exhaustive()
    }
}

/// The alarm's waker: runs the driver. Weak, so an armed alarm does not keep
/// a dropped timer alive.
struct AlarmWaker(Weak<Shared>);

impl Wake for AlarmWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if let Some(shared) = self.0.upgrade() {
            shared.notify();
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::Timer;

    /// A manual timer of two shards whose shards each hold `capacity`
    /// entries: the real limit (2^31 - 1) is too large to reach in a test.
    fn two_shards_holding(capacity: usize) -> Shared {
        let mut shared = Shared::new_manual(Geometry {
            clock: Clock::new(Instant::now(), Duration::from_millis(1)),
            slots_per_level: 64,
            max_pending: usize::MAX,
            shards: 2,
        });
        shared.shard_capacity = capacity;
        shared
    }

    #[test]
    fn a_full_shard_refuses_with_an_error_that_names_the_shard() {
        let shared = two_shards_holding(2);
        let deadline = Deadline::from_instant(shared.now() + Duration::from_secs(1));
        let tick = shared.clock().tick_of(deadline);
        let keys: Vec<_> = (0..2)
            .map(|_| match shared.register(deadline, tick, None) {
                Registration::Pending(key, _) => key,
                other => panic!("refused below capacity: {other:?}"),
            })
            .collect();
        let Registration::Refused(error) = shared.register(deadline, tick, None) else {
            panic!("a full shard took a third entry");
        };
        assert!(error.is_at_capacity(), "{error}");
        let message = error.to_string();
        assert!(
            message.contains("shard") && message.contains("2 entries"),
            "{message}"
        );
        assert!(!message.contains("max_pending"), "{message}");
        // A cancelled entry, freed only with its batch, still makes room.
        shared.cancel(keys[0], deadline);
        assert!(matches!(
            shared.register(deadline, tick, None),
            Registration::Pending(..)
        ));
    }

    /// Found by review: with generations come round (a callback can insert
    /// 2^24 times within one batch), a fired sleep's key matched a newer
    /// entry in its slot; polling it replaced that entry's waker, and
    /// cancelling it would have cancelled it. The tick check of
    /// check of [`Shared::owns`] tells them apart; here the wheel has 4
    /// generations.
    #[test]
    fn a_fired_sleeps_key_never_names_a_newer_entry_in_its_slot() {
        let shared = Shared::new_manual(Geometry {
            clock: Clock::new(Instant::now(), Duration::from_millis(1)),
            slots_per_level: 64,
            max_pending: usize::MAX,
            shards: 1,
        });
        shared.shards[0].0.lock().wheel = {
            let mut wheel = Wheel::new(64);
            wheel.limit_generations(2);
            wheel
        };
        let shared = Arc::new(shared);
        let start = shared.now();
        let at = |ms| Deadline::from_instant(start + Duration::from_millis(ms));
        let register = |deadline: Deadline| match shared.register(
            deadline,
            shared.clock().tick_of(deadline),
            None,
        ) {
            Registration::Pending(key, _) => key,
            other => panic!("not registered: {other:?}"),
        };
        let fired = register(at(10));
        shared.advance_to(start + Duration::from_millis(10));
        // Register and cancel in the freed slot until the generation comes
        // round to the fired key's.
        let newer = (0..16)
            .map(|_| register(at(20)))
            .find(|&key| {
                key == fired || {
                    shared.cancel(key, at(20));
                    false
                }
            })
            .expect("the slot and its generation came round");
        let noop = Waker::noop();
        assert!(
            matches!(shared.poll_entry(fired, at(10), noop), Polled::Ready),
            "a fired sleep took the newer entry for its own"
        );
        assert!(shared.has_fired(fired, at(10)));
        let cancelled = shared.stats().cancelled;
        shared.cancel(fired, at(10));
        assert_eq!(
            shared.stats().cancelled,
            cancelled,
            "cancelled the newer entry"
        );
        assert!(!shared.has_fired(newer, at(20)));
    }

    /// Gives `timer`'s (fresh) single shard a wheel with `2^bits`
    /// generations, so that a test can make them come round quickly.
    fn limit_generations(timer: &Timer, bits: u32) {
        let shared = timer.shared();
        assert_eq!(shared.shards.len(), 1);
        let mut wheel = Wheel::new(shared.slots_per_level);
        wheel.limit_generations(bits);
        shared.shards[0].0.lock().wheel = wheel;
    }

    /// Found by review, like the test above but through the public API
    /// (there with 2^24 insertions): the registration of the earliest sleep
    /// releases the lock to notify the runner, which fires it and runs a
    /// callback that refills its slot until the generation comes round;
    /// the registration then took the newer entry for its own and returned
    /// `Pending` for a sleep 9 ms past its deadline.
    #[test]
    fn a_registration_never_takes_a_newer_entry_in_its_slot_for_its_own() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        rt.block_on(async {
            let timer = Timer::builder().build().unwrap();
            limit_generations(&timer, 2);
            let start = timer.now();
            tokio::time::advance(Duration::from_millis(10)).await;
            let kept = Arc::new(std::sync::Mutex::new(Vec::new()));
            let (t, k) = (timer.clone(), kept.clone());
            timer.schedule_at(start + Duration::from_millis(2), move || {
                let mut k = k.lock().unwrap();
                k.push(
                    t.try_sleep_until(start + Duration::from_millis(20))
                        .unwrap(),
                );
                for _ in 0..(1u32 << 2) - 2 {
                    drop(
                        t.try_sleep_until(start + Duration::from_secs(3600))
                            .unwrap(),
                    );
                }
                k.push(
                    t.try_sleep_until(start + Duration::from_secs(3600))
                        .unwrap(),
                );
            });
            let mut sleep = timer.sleep_until(start + Duration::from_millis(1));
            let polled = Pin::new(&mut sleep).poll(&mut Context::from_waker(Waker::noop()));
            assert!(polled.is_ready(), "9 ms past its deadline, yet pending");
        });
    }

    /// Found by review: cancelling a callback the runner had already taken
    /// into its batch discarded whatever entry its slot held by then (a
    /// callback had refilled it until the generation came round): here a
    /// sleep due in an hour, which then completed at once.
    #[test]
    fn cancelling_a_batched_callback_leaves_a_newer_entry_in_its_slot_alone() {
        let timer = Timer::builder().manual().build().unwrap();
        limit_generations(&timer, 2);
        let start = timer.now();
        let second = Arc::new(std::sync::Mutex::new(None::<crate::TimerHandle>));
        let kept = Arc::new(std::sync::Mutex::new(None::<crate::Sleep>));
        let (t, s, k) = (timer.clone(), second.clone(), kept.clone());
        let hour = start + Duration::from_secs(3600);
        timer.schedule_at(start + Duration::from_millis(10), move || {
            for _ in 0..(1u32 << 2) - 1 {
                drop(t.try_sleep_until(hour).unwrap());
            }
            *k.lock().unwrap() = Some(t.try_sleep_until(hour).unwrap());
            assert!(s.lock().unwrap().as_ref().unwrap().cancel());
        });
        *second.lock().unwrap() = Some(timer.schedule_at(start + Duration::from_millis(10), || {}));
        timer.advance_to(start + Duration::from_millis(10));
        let mut sleep = kept.lock().unwrap().take().unwrap();
        let polled = Pin::new(&mut sleep).poll(&mut Context::from_waker(Waker::noop()));
        assert!(polled.is_pending(), "due in an hour, completed now");
        let stats = timer.stats();
        assert_eq!((stats.callbacks, stats.pending), (0, 1), "{stats:?}");
    }
}
