//! [`Shard`]: one wheel behind its own lock, with its own alarm; and what a
//! `Sleep` or a callback does to it. See the driver's design notes.

use std::task::{Poll, Waker};

use tokio::time::Instant;

use super::alarm::Alarm;
use super::job::{held_waker, Callback, CallbackState, Job, WakerId};
use super::time::{Reading, Time};
use super::{Clock, Deadline, Geometry, KEY_GENERATION_BITS, NEVER};
use crate::error::Error;
use crate::sync::{Arc, AtomicBool, AtomicI64, AtomicU64, Mutex, MutexGuard, Ordering};
use crate::wheel::{Key, Wheel};
use crate::Stats;

/// A wheel, its promise and its alarm, behind one lock, on cache lines of
/// its own: the part of a timer that one thread (its home) works on.
#[repr(align(128))]
pub(crate) struct Shard {
    inner: Mutex<Inner>,
    /// No entry due after this deadline has fired: see "Polling without the
    /// lock". As [`Clock::deadline_at`] of [`published`](Shard::published),
    /// so that a `Sleep`, which keeps its deadline, compares without
    /// dividing.
    pub(super) published_at: AtomicI64,
    /// `published_at`'s tick, for the deadlines beyond `i64` nanoseconds.
    pub(super) published: AtomicU64,
    /// Set once, under the lock, by shutdown; read under it, and without it
    /// by the default timer's cache.
    pub(super) shut_down: AtomicBool,
    /// Wakers and callbacks that panicked when fired.
    pub(super) panicked: AtomicU64,
    /// Callbacks claimed to run, counted where they run, outside the lock
    /// (until then a cancel can still stop them).
    pub(super) callbacks_fired: AtomicU64,
    /// The timer's time, which this shard's alarm has a copy of.
    pub(super) time: Time,
    max_pending: usize,
    /// Entries the shard may hold: a key's index is 32 bits.
    pub(super) capacity: usize,
}

/// A shard's state, under its lock.
pub(super) struct Inner {
    pub(super) wheel: Wheel<Job>,
    /// The promise: a pass will look at this wheel by this tick (`NEVER`:
    /// nothing is asked for). The alarm is armed for it, or a pass is under
    /// way that will arm it.
    pub(super) wake_at: u64,
    pub(super) alarm: Alarm,
    pub(super) fired: u64,
    pub(super) cancelled: u64,
    /// Passes run: `Stats::passes`.
    pub(super) passes: u64,
    /// The clock stood still at its last reading ([`Shard::read`]): a
    /// paused clock, which auto-advance may move to the alarm.
    pub(super) clock_still: bool,
    /// Callbacks pending, and the shard's hold on itself while there are
    /// any on a runtime (a callback with no handle left still runs).
    pub(super) callbacks: usize,
    pub(super) keep_alive: Option<Arc<Shard>>,
    /// Callbacks ever scheduled here: see `CallbackState::run_order`.
    callbacks_scheduled: u64,
    /// The waker of the timer's sentinel task, woken when the shard goes.
    pub(super) sentinel: Option<Waker>,
}

/// What registering a deadline led to.
#[derive(Debug)]
pub(crate) enum Registration {
    /// In the wheel, under this key, its entry holding a clone of the
    /// registering waker with this identity (`None`: no waker was given).
    Pending(Key, Option<WakerId>),
    /// Due already: complete now.
    Elapsed,
    /// The timer refused it.
    Refused(Error),
}

/// Who registers a deadline ([`Shard::register`]), which says what the
/// entry holds and what completing at once counts as.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Registrant<'a> {
    /// A `Sleep`'s poll: the entry holds a clone of this waker.
    Poll(&'a Waker),
    /// An eager registration (`Timer::try_sleep`): no waker yet.
    Eager,
    /// A reset of a sleep not registered, no waker yet: completing at once
    /// counts as a fire, as a reset of a pending one into the past does.
    /// `passed`: the caller read the clock and found the deadline passed.
    Reset { passed: bool },
}

/// What [`Shard::poll`] found.
#[derive(Debug)]
pub(crate) enum Polled {
    /// Still pending; the entry holds the waker with this identity.
    Pending(WakerId),
    /// Fired (or due by the clock on a timer shut down): complete.
    Ready,
    /// Not due, on a timer that has shut down: it can never complete.
    Refused(Error),
}

/// What [`Shard::reset`] did with a `Sleep`'s entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reset {
    /// Moved; still pending. `holds_waker`: the entry still has the waker
    /// the `Sleep` last left in it.
    Pending { holds_waker: bool },
    /// The new deadline is due already: the entry is freed and its waker
    /// woken, and the sleep completes.
    Fired,
    /// The entry had fired, and the timer is at its `max_pending` limit
    /// (pending again it would go over) or has shut down (nothing would
    /// fire it), so it is freed instead, as a reset of a completed sleep is
    /// refused; the sleep is idle, and its next poll registers again and
    /// reports the refusal.
    Refused,
}

impl Shard {
    pub(super) fn new(geometry: &Geometry, time: Time, alarm: Alarm) -> Shard {
        let mut wheel = Wheel::new(geometry.slots_per_level);
        wheel.limit_generations(KEY_GENERATION_BITS);
        // Under loom there are no threads but the model's.
        #[cfg(not(loom))]
        wheel.free_with(super::elsewhere::free_elsewhere);
        Shard {
            inner: Mutex::new(Inner {
                wheel,
                wake_at: NEVER,
                alarm,
                fired: 0,
                cancelled: 0,
                passes: 0,
                clock_still: false,
                callbacks: 0,
                keep_alive: None,
                callbacks_scheduled: 0,
                sentinel: None,
            }),
            published_at: AtomicI64::new(geometry.clock.deadline_at(0)),
            published: AtomicU64::new(0),
            shut_down: AtomicBool::new(false),
            panicked: AtomicU64::new(0),
            callbacks_fired: AtomicU64::new(0),
            time,
            max_pending: geometry.max_pending,
            capacity: u32::MAX as usize,
        }
    }

    /// Takes the lock; let go of it by [`unlock`](Shard::unlock) after
    /// work that may flush discarded entries (see `cancel.rs`).
    #[inline(always)]
    pub(super) fn lock(&self) -> MutexGuard<'_, Inner> {
        let inner = self.inner.lock();
        debug_assert!(
            !inner.wheel.has_dead(),
            "a flush's values were left under the lock"
        );
        inner
    }

    pub(crate) fn clock(&self) -> &Clock {
        self.time.clock()
    }

    /// The shard's clock: its timer's (see [`Time`]).
    pub(crate) fn now(&self) -> Instant {
        self.time.now()
    }

    /// Whether the shard's clock is a manual one (a test clock's, say).
    pub(crate) fn is_manual(&self) -> bool {
        self.time.is_manual()
    }

    pub(crate) fn is_shut_down(&self) -> bool {
        self.shut_down.load(Ordering::Acquire)
    }

    /// Puts a `Sleep`'s entry in this wheel for `deadline` (whose tick is
    /// `tick`), for `by` ([`Registrant`]).
    ///
    /// The common path reads no clock: a tick the wheel has processed is
    /// `Elapsed` at once, any other is inserted. Only the new earliest
    /// deadline, which must re-arm the alarm, reads the clock first: if its
    /// tick has come, it completes here, touching neither the wheel nor the
    /// alarm, as tokio's does. One passed behind an earlier pending one
    /// fires with that one's alarm: late by at most a tick, never early.
    pub(crate) fn register(
        self: &Arc<Self>,
        deadline: Deadline,
        tick: u64,
        by: Registrant<'_>,
    ) -> Registration {
        debug_assert_eq!(tick, self.clock().tick_of(deadline));
        let (waker, count_elapsed, passed) = match by {
            Registrant::Poll(waker) => (Some(waker), false, false),
            Registrant::Eager => (None, false, false),
            Registrant::Reset { passed } => (None, true, passed),
        };
        let mut inner = self.lock();
        if passed || tick <= inner.wheel.elapsed() || self.time.reached(deadline) {
            inner.fired += u64::from(count_elapsed);
            return Registration::Elapsed;
        }
        if let Err(refused) = inner.admit(self.is_shut_down(), self.max_pending, self.capacity) {
            // Cold: a deadline already passed still completes on a timer
            // that can no longer fire anything.
            let elapsed = deadline.reached_by(self.now());
            inner.fired += u64::from(count_elapsed && elapsed);
            // `admit` may have flushed.
            self.unlock(inner);
            return if elapsed {
                Registration::Elapsed
            } else {
                Registration::Refused(refused)
            };
        }
        let pulls_in = tick < inner.wake_at;
        if pulls_in && self.has_come(tick, &mut inner) {
            inner.fired += u64::from(count_elapsed);
            // `admit` may have flushed.
            self.unlock(inner);
            return Registration::Elapsed;
        }
        let (job, held) = Job::wake(waker);
        let key = inner.wheel.insert(tick, job);
        let kick = pulls_in && inner.pull_in(tick, self);
        self.unlock(inner);
        if kick {
            self.kick();
        }
        Registration::Pending(key, held)
    }

    /// Whether `tick` is due, for a registration that pulls the promise in
    /// (the wheel may lag behind it): its end has come
    /// ([`Time::come`]). Where the clock cannot be read
    /// ([`Time::try_read`]: in a thread-local's destructor), it has not:
    /// the alarm, armed for it, says when.
    fn has_come(&self, tick: u64, inner: &mut Inner) -> bool {
        let Some(reading) = self.time.try_read() else {
            return false;
        };
        inner.clock_still = reading.still;
        let end = self.time.clock().instant_at(tick);
        end.is_some_and(|end| self.time.come(end, reading, self.is_shut_down()))
    }

    /// Whether a tokio sleep until `at` made now completes at its first
    /// poll ([`Time::come`]).
    pub(crate) fn come(&self, at: Instant) -> bool {
        self.time.come(at, self.time.read(), self.is_shut_down())
    }

    /// The last tick due by the clock: what a pass fires up to
    /// ([`Time::due_tick`]).
    pub(super) fn due_tick(&self, inner: &mut Inner) -> u64 {
        let reading = self.read(inner);
        self.time.due_tick(reading)
    }

    /// Reads the clock, noting whether it stood still: a shard left with
    /// nothing pending on a paused clock disarms its alarm
    /// ([`tidy`](Shard::tidy)).
    fn read(&self, inner: &mut Inner) -> Reading {
        let reading = self.time.read();
        inner.clock_still = reading.still;
        reading
    }

    /// Checks a `Sleep`'s entry: `Ready` once it has fired (and frees it),
    /// otherwise stores a clone of `waker` unless the one held already
    /// `will_wake` it, and says which one the entry holds now.
    pub(crate) fn poll(&self, key: Key, deadline: Deadline, waker: &Waker) -> Polled {
        let mut inner = self.lock();
        if let Some(job) = inner.wheel.remove_expired(key) {
            // Fired: the entry is the sleep's to free.
            self.unlock(inner);
            drop(job);
            return Polled::Ready;
        }
        if self.is_shut_down() {
            // Cold. Due by the clock, though no pass got to it (the shutdown
            // came first): it completes, as a sleep made now with that
            // deadline would, exactly (not by ticks).
            if !deadline.reached_by(self.now()) {
                return Polled::Refused(Error::shut_down());
            }
            let job = inner.wheel.remove(key);
            inner.fired += 1;
            self.unlock(inner);
            drop(job);
            return Polled::Ready;
        }
        let Some(Job::Wake(slot)) = inner.wheel.value_mut(key) else {
            unreachable!("a Sleep's key names its own entry")
        };
        let old = (!slot.will_wake(waker)).then(|| std::mem::replace(slot, waker.clone()));
        let held = WakerId::of(slot);
        self.unlock(inner);
        drop(old);
        Polled::Pending(held)
    }

    /// Whether a `Sleep`'s entry has fired, or is due by the clock on a
    /// timer that has shut down, so that its next poll completes it.
    pub(crate) fn has_fired(&self, key: Key, deadline: Deadline) -> bool {
        let inner = self.lock();
        inner.wheel.is_scheduled(key) != Some(true)
            || (self.is_shut_down() && deadline.reached_by(self.now()))
    }

    /// On a paused clock (as the last reading found it), a shard left with
    /// nothing pending disarms its alarm, there and then, so that
    /// auto-advance does not jump to a deadline nobody waits for: tokio's
    /// auto-advance looks at every registered tokio timer when the runtime
    /// parks. Disarming replaces the tokio timer with one never registered,
    /// and wakes no one. On a running clock nothing is done: there the
    /// alarm finds nothing and re-arms for what is left.
    ///
    /// Cancels still batched (`wheel/discard.rs`) are flushed then: only
    /// their slots kept the alarm armed no later than their deadlines, so
    /// with it disarmed no pass would come to let go of their wakers. The
    /// caller lets go of the lock by [`unlock`](Shard::unlock).
    pub(super) fn tidy(&self, inner: &mut Inner) {
        if inner.clock_still && inner.wheel.scheduled() == 0 {
            // A flush of none does nothing: the wheel gave its slab back,
            // if it could, when it emptied.
            inner.wheel.flush_discarded();
            if inner.wake_at != NEVER {
                inner.wake_at = NEVER;
                let _ = self.arm(inner, NEVER);
            }
        }
    }

    /// Moves a `Sleep`'s entry, pending or fired, to `deadline` (whose tick
    /// is `tick`), keeping the waker a pending one holds. A deadline already
    /// due (`passed`, a tick processed, or, as in `register`, the new
    /// earliest with its tick come) fires the entry now: it is freed and its
    /// waker woken. After shutdown a pending entry is still moved (only
    /// the alarm is left alone), so its next poll reports the shutdown,
    /// unless the new deadline has passed by the clock; a fired one is
    /// refused ([`Reset::Refused`]), as a completed sleep's reset is: made
    /// pending again it would count in `Stats::pending`, and against
    /// `max_pending`, on a timer that can never fire it.
    pub(crate) fn reset(
        self: &Arc<Self>,
        key: Key,
        deadline: Deadline,
        tick: u64,
        passed: bool,
    ) -> Reset {
        debug_assert_eq!(tick, self.clock().tick_of(deadline));
        let mut inner = self.lock();
        let pulls_in = tick < inner.wake_at && !self.is_shut_down();
        let due = passed
            || tick <= inner.wheel.elapsed()
            || self.time.reached(deadline)
            || (pulls_in && self.has_come(tick, &mut inner))
            || (self.is_shut_down() && deadline.reached_by(self.now()));
        if due {
            let job = inner.wheel.remove(key);
            inner.fired += 1;
            self.tidy(&mut inner);
            self.unlock(inner);
            if let Some(Job::Wake(waker)) = job {
                if let Some(waker) = held_waker(waker) {
                    self.fire(Job::Wake(waker));
                }
            }
            return Reset::Fired;
        }
        // A fired entry made pending again takes a place under
        // `max_pending`, as a new registration does: refused at the limit
        // (its slab slot it has already), and after a shutdown, which
        // refuses every registration.
        let was_scheduled = inner.wheel.is_scheduled(key);
        if was_scheduled == Some(false)
            && (self.is_shut_down() || inner.wheel.scheduled() >= self.max_pending)
        {
            let job = inner.wheel.remove(key);
            self.tidy(&mut inner);
            self.unlock(inner);
            // Dropped after the lock, as a cancel drops its entry's.
            drop(job);
            return Reset::Refused;
        }
        // A pending entry holds the waker its `Sleep` last left in it; a
        // fired one gave it up to be woken, and so did every entry at
        // shutdown.
        let holds_waker = was_scheduled == Some(true) && !self.is_shut_down();
        let scheduled = inner.wheel.reset(key, tick);
        debug_assert_eq!(scheduled, Some(true), "a Sleep's key names its own entry");
        let kick = pulls_in && inner.pull_in(tick, self);
        self.unlock(inner);
        if kick {
            self.kick();
        }
        Reset::Pending { holds_waker }
    }

    /// Schedules `run` for `deadline`. A deadline whose tick has already
    /// been processed runs at the next tick: never early, never on the
    /// caller's stack (a pass runs it: the alarm's, or one
    /// [`kick`](Shard::kick)ed).
    pub(crate) fn schedule(
        self: &Arc<Self>,
        deadline: Instant,
        run: Box<dyn FnOnce() + Send>,
    ) -> Result<(Key, Arc<CallbackState>), Error> {
        let mut inner = self.lock();
        if let Err(refused) = inner.admit(self.is_shut_down(), self.max_pending, self.capacity) {
            self.unlock(inner);
            drop(run);
            return Err(refused);
        }
        inner.callbacks += 1;
        if !self.time.is_manual() && inner.keep_alive.is_none() {
            inner.keep_alive = Some(Arc::clone(self));
        }
        inner.callbacks_scheduled += 1;
        let state = Arc::new(CallbackState::new(deadline, inner.callbacks_scheduled));
        let callback = Box::new(Callback {
            run,
            state: state.clone(),
        });
        let tick = self
            .clock()
            .deadline_tick(deadline)
            .max(inner.wheel.elapsed().saturating_add(1));
        let key = inner.wheel.insert(tick, Job::Call(callback));
        let mut kick = false;
        if tick < inner.wake_at {
            // Come already: run on the runtime at once, as a sleep completes.
            kick = self.has_come(tick, &mut inner);
            if kick {
                inner.wake_at = tick;
            } else {
                kick = inner.pull_in(tick, self);
            }
        }
        self.unlock(inner);
        if kick {
            self.kick();
        }
        Ok((key, state))
    }

    /// Adds this shard's counters to `stats`.
    pub(super) fn add_stats(&self, stats: &mut Stats) {
        let mut inner = self.lock();
        // Entries discarded and not yet flushed are no longer in use: free
        // them, so that `entries` (and the slab) show it.
        inner.wheel.flush_discarded();
        stats.pending += inner.wheel.scheduled();
        stats.entries += inner.wheel.len();
        stats.levels = stats.levels.max(inner.wheel.levels());
        stats.fired += inner.fired + self.callbacks_fired.load(Ordering::Relaxed);
        stats.cancelled += inner.cancelled;
        stats.passes += inner.passes;
        stats.callbacks += inner.callbacks;
        stats.panicked += self.panicked.load(Ordering::Relaxed);
        stats.allocated_entries += inner.wheel.allocated_entries();
        stats.level_bytes += inner.wheel.level_bytes();
        self.unlock(inner);
    }

    /// Arms the shard's alarm for `tick` ([`Alarm::arm`]), telling it the
    /// tick of the last pass, which a precise alarm spaces its wake-ups
    /// from (`Builder::slack`).
    pub(super) fn arm(&self, inner: &mut Inner, tick: u64) -> Poll<()> {
        let last_pass = self.published.load(Ordering::Relaxed);
        inner.alarm.arm(tick, last_pass)
    }

    /// Stores the sentinel's waker; `false` if the shard has shut down.
    pub(super) fn watch(&self, waker: &Waker) -> bool {
        let mut inner = self.lock();
        if self.is_shut_down() {
            return false;
        }
        match &inner.sentinel {
            Some(held) if held.will_wake(waker) => {}
            _ => inner.sentinel = Some(waker.clone()),
        }
        true
    }

    /// Asks for a pass soon, not on the caller's stack, once the caller has
    /// let go of the lock: what a registration does when the alarm answers
    /// `Ready` (tokio's clock moved on after the caller read it), or a
    /// callback is due at once. A runtime shard spawns a task that runs
    /// one; a manual shard's next `advance` runs one anyway. (Under loom
    /// the models run the pass the model alarm records.)
    fn kick(self: &Arc<Self>) {
        #[cfg(loom)]
        if let super::alarm::Alarm::Model { kicked, .. } = &mut self.lock().alarm {
            *kicked = true;
        }
        if let (Some(handle), false) = (self.time.handle(), self.is_shut_down()) {
            let shard = Arc::clone(self);
            drop(handle.spawn(async move { shard.pass() }));
        }
    }
}

impl Drop for Shard {
    fn drop(&mut self) {
        // The sentinel finishes once every shard of its timer is gone.
        if let Some(waker) = self.inner.get_mut().sentinel.take() {
            waker.wake();
        }
    }
}

impl Inner {
    /// Refuses new work on a shut-down or full shard.
    fn admit(&mut self, shut_down: bool, max_pending: usize, capacity: usize) -> Result<(), Error> {
        if shut_down {
            Err(Error::shut_down())
        } else if self.wheel.scheduled() >= max_pending {
            Err(Error::at_capacity(max_pending))
        } else if self.wheel.len() >= capacity && self.full_after_flush(capacity) {
            Err(Error::shard_full(capacity))
        } else {
            Ok(())
        }
    }

    /// Whether the slab is still full once discarded entries are freed:
    /// they hold slab indices until flushed, and must not make a shard
    /// refuse work it has room for.
    #[cold]
    fn full_after_flush(&mut self, capacity: usize) -> bool {
        self.wheel.flush_discarded();
        self.wheel.len() >= capacity
    }

    /// Moves the promise up to `tick`, earlier than it was, and arms the
    /// alarm for it; `true` if the alarm found that moment already past
    /// (tokio's clock moved on after the caller read it): the caller then
    /// [`kick`](Shard::kick)s a pass once it has let go of the lock.
    #[must_use]
    fn pull_in(&mut self, tick: u64, shard: &Shard) -> bool {
        self.wake_at = tick;
        shard.arm(self, tick).is_ready()
    }

    /// One callback fewer; returns the shard's hold on itself, to drop
    /// outside the lock, when none is left.
    pub(super) fn callback_done(&mut self) -> Option<Arc<Shard>> {
        self.callbacks -= 1;
        if self.callbacks == 0 {
            self.keep_alive.take()
        } else {
            None
        }
    }
}
