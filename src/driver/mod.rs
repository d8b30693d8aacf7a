//! The driver: the shared state behind a [`Timer`](crate::Timer), and the
//! code that advances its wheel.
//!
//! # Who owns what
//!
//! A `Timer`, and every `Sleep` registered with it, holds an `Arc<Shared>`.
//! [`Shared`] owns the wheel, behind one mutex, and one tokio `Sleep` (the
//! *alarm*) armed for the wheel's next expiration. The wheel stores each
//! registered `Sleep`'s waker; the `Sleep` owns its entry and frees it when it
//! completes or is dropped, so dropping a pending `Sleep` leaves nothing
//! behind.
//!
//! # There is no driver task
//!
//! The alarm's waker *is* the driver: when tokio's time driver fires the
//! alarm, it calls [`Shared::notify`], which advances the wheel to now, wakes
//! the due wakers (32 at a time, outside the lock) and re-arms the alarm.
//! This runs exactly where tokio fires its own timers, inside the runtime's
//! park step, so tokio's paused clock drives the wheel with tokio's own
//! semantics: after `tokio::time::advance(d).await` every wheel timer due by
//! then has already woken its task, just as a `tokio::time::Sleep` would have.
//! A driver *task* could not promise that, because it would run only after
//! the task that called `advance` had been polled again.
//!
//! `notify` is also called by a registration whose deadline is earlier than
//! the tick the alarm is armed for (`wake_at`), so a new earliest timer makes
//! the alarm re-arm at once: no missed wake-up and no polling loop.
//!
//! # The runner state
//!
//! `notify` may be called from any thread, and from inside itself: polling
//! the alarm can call its waker synchronously (tokio's coop budget, or an
//! `AtomicWaker` racing a fire). So `notify` never blocks. `run_state` holds
//! two bits: `RUNNING` (one caller is processing) and `NOTIFIED` (something
//! happened since it last looked). A caller sets both; if `RUNNING` was
//! already set it returns, and the runner, whose final
//! `compare_exchange(RUNNING, 0)` then fails, goes round again. AcqRel on
//! both sides makes every registration that set `NOTIFIED` visible to the
//! runner's next pass (and the wheel itself is read under the mutex anyway).
//!
//! # Locks
//!
//! `Shared::inner` guards the wheel, the alarm and the counters. The alarm is
//! polled with that lock held; that is safe because its waker only touches
//! `run_state` while a runner exists. Wakers are woken only after the lock is
//! released, so a woken task that immediately polls its `Sleep` does not
//! contend with the batch.
//!
//! # Shutdown
//!
//! When the timer's runtime shuts down, tokio drops every task before it shuts
//! its time driver down. Each timer spawns a tiny [`Sentinel`] task whose drop
//! marks the timer shut down (under the lock, so no alarm poll can be in
//! flight), and wakes every pending `Sleep`, which then panics with a message
//! saying why rather than hanging. The alarm is never polled after that, so
//! tokio's own "runtime is shutting down" assertion is never reached.

mod clock;
pub(crate) mod registry;
mod sentinel;

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::task::{Context, Poll, Wake, Waker};

use tokio::time::Instant;

pub(crate) use clock::Clock;
pub(crate) use sentinel::Sentinel;

use crate::sync::{Arc, AtomicBool, AtomicU8, Mutex, Ordering, Weak};
use crate::wheel::{Key, Wheel};
use crate::Stats;

const RUNNING: u8 = 0b01;
const NOTIFIED: u8 = 0b10;
/// Wakers collected before the lock is released to wake them.
const WAKE_BATCH: usize = 32;
/// "No tick": the alarm is not armed, or nothing is promised.
const NEVER: u64 = u64::MAX;

/// State shared by a timer's handles, its `Sleep`s and its alarm.
pub(crate) struct Shared {
    inner: Mutex<Inner>,
    run_state: AtomicU8,
    /// Mirrors `Inner::shut_down` for lock-free checks (the registry cache).
    shut_down: AtomicBool,
    clock: Clock,
    slots_per_level: usize,
    /// Set for a runtime's default timer, so shutdown can unregister it.
    default_for: Option<tokio::runtime::Id>,
    /// The runtime the timer runs on. The driver reads the clock inside its
    /// context: with tokio's paused clock, another runtime's (or the real)
    /// clock could be ahead of this one, and reading it would fire early.
    runtime: tokio::runtime::Handle,
}

struct Inner {
    wheel: Wheel<Option<Waker>>,
    /// The one tokio timer, armed for `alarm_at`.
    alarm: Pin<Box<tokio::time::Sleep>>,
    alarm_waker: Waker,
    /// The tick the alarm is registered with tokio for, or `NEVER`.
    alarm_at: u64,
    /// The runner will look at the wheel by this tick at the latest; a
    /// registration before it must notify.
    wake_at: u64,
    shut_down: bool,
    sentinel: Option<Waker>,
    fired: u64,
    cancelled: u64,
}

impl Inner {
    /// Whether a deadline at `tick` comes before the runner's next look at
    /// the wheel. If so, moves that promise up; the caller must then
    /// `notify` (after releasing the lock) so the alarm is re-armed.
    fn pull_in(&mut self, tick: u64) -> bool {
        let earlier = tick < self.wake_at;
        if earlier {
            self.wake_at = tick;
        }
        earlier
    }
}

/// What registering a deadline led to.
#[derive(Debug)]
pub(crate) enum Registration {
    /// In the wheel, under this key.
    Pending(Key),
    /// The deadline's tick has already been processed: complete now.
    Elapsed,
    /// The timer has shut down.
    ShutDown,
}

/// Marker error: the timer's runtime has shut down.
#[derive(Debug)]
pub(crate) struct ShutDown;

impl Shared {
    /// Creates the shared state; must run inside `handle`'s context (it
    /// creates the alarm), and the caller spawns the [`Sentinel`].
    pub(crate) fn new(
        runtime: tokio::runtime::Handle,
        clock: Clock,
        slots_per_level: usize,
        default_for: Option<tokio::runtime::Id>,
    ) -> Arc<Shared> {
        Arc::new_cyclic(|weak: &Weak<Shared>| {
            let alarm_waker = Waker::from(Arc::new(AlarmWaker(weak.clone())));
            // Never polled until armed; creating it registers nothing.
            let alarm = Box::pin(tokio::time::sleep_until(Instant::now()));
            Shared {
                inner: Mutex::new(Inner {
                    wheel: Wheel::new(slots_per_level),
                    alarm,
                    alarm_waker,
                    alarm_at: NEVER,
                    wake_at: NEVER,
                    shut_down: false,
                    sentinel: None,
                    fired: 0,
                    cancelled: 0,
                }),
                run_state: AtomicU8::new(0),
                shut_down: AtomicBool::new(false),
                clock,
                slots_per_level,
                default_for,
                runtime,
            }
        })
    }

    pub(crate) fn clock(&self) -> &Clock {
        &self.clock
    }

    pub(crate) fn slots_per_level(&self) -> usize {
        self.slots_per_level
    }

    pub(crate) fn is_shut_down(&self) -> bool {
        self.shut_down.load(Ordering::Acquire)
    }

    /// Puts a waker in the wheel for `deadline`.
    pub(crate) fn register(&self, deadline: Instant, waker: &Waker) -> Registration {
        let tick = self.clock.deadline_tick(deadline);
        let mut inner = self.inner.lock();
        if inner.shut_down {
            return Registration::ShutDown;
        }
        let inserted = inner.wheel.try_insert(tick, Some(waker.clone()));
        let notify = inserted.is_ok() && inner.pull_in(tick);
        drop(inner);
        if notify {
            self.notify();
        }
        match inserted {
            Ok(key) => Registration::Pending(key),
            // The waker clone is dropped here, outside the lock.
            Err(_) => Registration::Elapsed,
        }
    }

    /// Checks a registered entry: `Ready` (and frees it) once it has fired,
    /// otherwise stores `waker` if it differs from the one held.
    pub(crate) fn poll_entry(&self, key: Key, waker: &Waker) -> Poll<Result<(), ShutDown>> {
        let mut inner = self.inner.lock();
        match inner.wheel.is_scheduled(key) {
            Some(true) if inner.shut_down => Poll::Ready(Err(ShutDown)),
            Some(true) => {
                let slot = inner.wheel.value_mut(key).expect("checked above");
                let old = match slot {
                    Some(held) if held.will_wake(waker) => None,
                    _ => slot.replace(waker.clone()),
                };
                drop(inner);
                drop(old);
                Poll::Pending
            }
            Some(false) => {
                inner.wheel.remove(key);
                Poll::Ready(Ok(()))
            }
            // Only the owning `Sleep` frees its entry, so this cannot happen;
            // failing loudly beats completing a timer that may not be due.
            None => unreachable!("a Sleep's wheel entry vanished"),
        }
    }

    /// Whether a registered entry has fired (without freeing it).
    pub(crate) fn has_fired(&self, key: Key) -> bool {
        self.inner.lock().wheel.is_scheduled(key) == Some(false)
    }

    /// Frees an entry whose `Sleep` is dropped.
    pub(crate) fn cancel(&self, key: Key) {
        let mut inner = self.inner.lock();
        if inner.wheel.is_scheduled(key) == Some(true) {
            inner.cancelled += 1;
        }
        let value = inner.wheel.remove(key);
        drop(inner);
        drop(value);
    }

    /// Moves a registered entry to `deadline`, fired or not, keeping its
    /// waker. If the new deadline's tick is already processed the entry is
    /// fired now and its waker woken.
    ///
    /// After shutdown the entry is still moved, so that a sleep which had
    /// fired and is reset to a later deadline is pending again (and its
    /// next poll reports the shutdown) instead of completing early; only
    /// the alarm is left alone.
    pub(crate) fn reset(&self, key: Key, deadline: Instant) {
        let tick = self.clock.deadline_tick(deadline);
        let mut inner = self.inner.lock();
        let mut wake = None;
        let mut notify = false;
        match inner.wheel.reset(key, tick) {
            Some(true) => notify = !inner.shut_down && inner.pull_in(tick),
            Some(false) => {
                inner.fired += 1;
                wake = inner.wheel.value_mut(key).and_then(Option::take);
            }
            None => debug_assert!(false, "reset of a vanished entry"),
        }
        drop(inner);
        if notify {
            self.notify();
        }
        if let Some(waker) = wake {
            wake_contained(waker);
        }
    }

    pub(crate) fn stats(&self) -> Stats {
        let inner = self.inner.lock();
        Stats {
            pending: inner.wheel.scheduled(),
            entries: inner.wheel.len(),
            levels: inner.wheel.levels(),
            fired: inner.fired,
            cancelled: inner.cancelled,
            allocated_entries: inner.wheel.allocated_entries(),
            level_bytes: inner.wheel.level_bytes(),
        }
    }

    /// Advances the wheel to now, wakes what is due and re-arms the alarm;
    /// see "The runner state" above. Never blocks on another runner.
    pub(crate) fn notify(&self) {
        if self
            .run_state
            .fetch_or(RUNNING | NOTIFIED, Ordering::AcqRel)
            & RUNNING
            != 0
        {
            return;
        }
        // Clears `run_state` if `process` unwinds, so the timer is not wedged.
        struct Running<'a>(&'a AtomicU8);
        impl Drop for Running<'_> {
            fn drop(&mut self) {
                self.0.store(0, Ordering::Release);
            }
        }
        let guard = Running(&self.run_state);
        loop {
            self.run_state.fetch_and(!NOTIFIED, Ordering::AcqRel);
            self.process();
            if self
                .run_state
                .compare_exchange(RUNNING, 0, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                std::mem::forget(guard);
                return;
            }
        }
    }

    fn process(&self) {
        let _clock_of_this_runtime = self.runtime.enter();
        let mut batch: Vec<Waker> = Vec::new();
        let mut now = self.clock.now_tick(Instant::now());
        let mut inner = self.inner.lock();
        loop {
            if inner.shut_down {
                break;
            }
            while let Some(key) = inner.wheel.pop_expired(now) {
                inner.fired += 1;
                if let Some(waker) = inner.wheel.value_mut(key).and_then(Option::take) {
                    batch.push(waker);
                }
                if batch.len() == WAKE_BATCH {
                    drop(inner);
                    batch.drain(..).for_each(wake_contained);
                    inner = self.inner.lock();
                }
            }
            if inner.shut_down {
                break;
            }
            match inner.wheel.next_expiration() {
                None => {
                    inner.wake_at = NEVER;
                    break;
                }
                Some(next) => {
                    inner.wake_at = next;
                    if self.arm(&mut inner, next).is_pending() {
                        break;
                    }
                    // Already due (the clock moved on while we worked).
                    now = self.clock.now_tick(Instant::now());
                }
            }
        }
        drop(inner);
        batch.into_iter().for_each(wake_contained);
    }

    /// Arms the alarm for `tick`; `Ready` if that moment has already come.
    fn arm(&self, inner: &mut Inner, tick: u64) -> Poll<()> {
        if inner.alarm_at == tick {
            // Armed for this tick and not yet fired: firing would have let
            // the wheel move past it.
            return Poll::Pending;
        }
        let Some(when) = self.clock.instant_at(tick) else {
            // Beyond what `Instant` can express: it never comes.
            inner.alarm_at = NEVER;
            return Poll::Pending;
        };
        let Inner {
            alarm, alarm_waker, ..
        } = inner;
        alarm.as_mut().reset(when);
        let mut cx = Context::from_waker(alarm_waker);
        // Unconstrained: the caller may be a task that has spent its coop
        // budget, and a budget refusal would not register the alarm.
        let polled = Pin::new(&mut tokio::task::unconstrained(alarm.as_mut())).poll(&mut cx);
        inner.alarm_at = if polled.is_ready() { NEVER } else { tick };
        polled
    }

    /// Marks the timer shut down and wakes every pending `Sleep` so that it
    /// observes it. Called when the runtime drops the sentinel.
    pub(crate) fn shut_down(&self) {
        let mut inner = self.inner.lock();
        if inner.shut_down {
            return;
        }
        inner.shut_down = true;
        self.shut_down.store(true, Ordering::Release);
        let wakers = inner.wheel.take_scheduled_values();
        drop(inner);
        if let Some(id) = self.default_for {
            registry::forget(id, self);
        }
        wakers.into_iter().flatten().for_each(wake_contained);
    }

    /// Stores the sentinel's waker; `false` if the timer has already shut down.
    pub(crate) fn set_sentinel(&self, waker: &Waker) -> bool {
        let mut inner = self.inner.lock();
        if inner.shut_down {
            return false;
        }
        match &inner.sentinel {
            Some(held) if held.will_wake(waker) => {}
            _ => inner.sentinel = Some(waker.clone()),
        }
        true
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        // Every handle is gone: let the sentinel task finish.
        if let Some(waker) = self.inner.get_mut().sentinel.take() {
            waker.wake();
        }
    }
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("tick", &self.clock.tick())
            .field("slots_per_level", &self.slots_per_level)
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

/// Wakes `waker`, containing a panic so one bad waker cannot stop the driver
/// from serving every other timer.
fn wake_contained(waker: Waker) {
    let _ = catch_unwind(AssertUnwindSafe(|| waker.wake()));
}
