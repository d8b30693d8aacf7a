//! When a test runtime is idle, and the probe that proves it before the
//! clock moves.
//!
//! # The rule
//!
//! The test clock moves only when nothing of its runtime can run: no thread
//! of the runtime is running (a worker between tokio's unpark and park
//! hooks, a thread inside `block_in_place`, a `spawn_blocking` closure), no
//! [`block_on`](super::TestRuntime::block_on) future is being polled or
//! has been woken and waits to be, no task waits in the global queue, and
//! the I/O that was ready has been delivered.
//!
//! # What counts, and who counts it
//!
//! - `running`: the runtime's own threads that are running. tokio's
//!   `thread_name_fn`, called on the spawning thread before it spawns one,
//!   counts a thread in (a `spawn_blocking` closure is queued then, its
//!   thread not yet started), `on_thread_park` out,
//!   `on_thread_unpark` in again, and `on_thread_stop` out if it was in. A
//!   thread-local remembers whether this thread is counted, and for which
//!   runtime. A worker that calls `block_in_place` stays counted (it never
//!   parks) until its thread leaves the blocking pool, which the builder
//!   makes it do at once (`thread_keep_alive(0)`): its `on_thread_stop`
//!   counts it out.
//! - `driving`: on a current-thread runtime the park hooks run on the thread
//!   inside `block_on`, which tokio never started: the flag says whether it
//!   is running tasks (set by its unpark hook and by `block_on`'s poll,
//!   cleared by its park hook and when `block_on` returns).
//! - `block_on`: `block_on` futures being polled, or woken and not yet
//!   polled (`block_on.rs`).
//! - tokio's global queue depth: a task woken from outside a worker waits
//!   there until a worker unparks for it.
//!
//! A task woken into a worker's own queue is only ever pushed there by that
//! worker while it runs (and so is counted), or while it dispatches I/O or
//! timers inside its park, which is what the probe is for.
//!
//! # The probe
//!
//! tokio polls its I/O driver before it fires its timers, in the park of
//! the worker that holds the driver. So when the runtime looks idle, the
//! clock does not move there and then: the *probe*, a tokio timer of the
//! runtime, is armed a millisecond ahead (tokio's timers have a millisecond
//! grid; an earlier one could fire on the spot, before any I/O poll). Its
//! waker runs in that park, after the I/O poll. Anything made runnable
//! since the probe was armed has unparked a worker, woken `block_on` or
//! queued a task, each of which bumps the *epoch* (or shows in the
//! checks), so a probe that fires with the epoch it was armed at, and the
//! runtime still looking idle, has seen nothing happen: a *proof*.
//!
//! Except for what the I/O poll of the very park it fires in delivered: on
//! a multi-thread runtime those tasks wait in the worker's own queue,
//! unseen, until the park returns. (They show only if the thread stalls
//! for a millisecond between the I/O poll and the timers; on a loaded
//! machine it does.) So there a first firing only arms the probe again,
//! *confirmed*: if that park delivered anything, the worker unparks and
//! bumps the epoch before the second firing; if not, it parks again
//! silently (tokio calls no hook when a worker wakes to nothing), and the
//! second firing is the proof. On a current-thread runtime tokio calls the
//! unpark hook after every park, so a confirmation could never hold: one
//! firing is the proof there, and the stall above is the one case it
//! misses.
//!
//! A proof moves the clock to the next deadline (with auto-advance, unless
//! an `advance` or `advance_async` under way moves it itself) and
//! arms the probe again, confirmed: what it fired wakes its tasks in the
//! worker's queue, which bumps the epoch when the park returns, and a
//! callback that woke no task leaves the runtime idle, so the next firing
//! moves the clock on. Each step so costs a few milliseconds of real time
//! and no more work than a tokio timer.
//!
//! What the probe cannot see: a thread outside the runtime about to wake a
//! task or write to a socket, and tokio's own timers, which run in real
//! time (auto-advance may jump the test clock past them).
//!
//! # Locks
//!
//! The probe's mutex guards the tokio timer and the epoch it was armed at.
//! Arming holds it while it resets the timer; the waker only tries it: a
//! waker that finds it held is superseded by the arming under way. The
//! proofs' mutex is taken alone. Every atomic is `SeqCst`: this is test
//! machinery, and the argument above reads them as one sequence.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, Weak};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use tokio::runtime::Handle;

use crate::Timer;

/// How far ahead the probe is armed: tokio's timer grid, so that it never
/// fires inside the arming, before the driver has polled for I/O.
const PROBE_AHEAD: Duration = Duration::from_millis(1);

thread_local! {
    /// The runtime (its `Idle`'s address) whose thread this is, and whether
    /// the thread is counted running.
    static THREAD: Cell<(usize, bool)> = const { Cell::new((0, false)) };
}

/// What tells whether a test runtime is idle, and moves its clock when it
/// is: see the module's docs.
pub(super) struct Idle {
    pub(super) timer: Timer,
    pub(super) auto_advance: bool,
    /// A firing needs a confirmation: on a multi-thread runtime (set once
    /// the runtime is built; nothing is armed before).
    confirm: AtomicBool,
    /// The runtime's own threads that are running.
    running: AtomicUsize,
    /// A current-thread runtime's `block_on` thread is running tasks.
    driving: AtomicBool,
    /// `block_on` futures being polled, or woken and not yet polled.
    pub(super) block_on: AtomicUsize,
    /// Bumped whenever something may have become runnable.
    pub(super) epoch: AtomicU64,
    /// The runtime, once built and until it is dropped (taken then, since
    /// it holds the hooks that hold this).
    runtime: Mutex<Option<Handle>>,
    /// The probe, from the runtime's start until it is dropped.
    probe: Mutex<Option<Probe>>,
    proofs: Mutex<Proofs>,
    proved: Condvar,
    /// Threads in `TestRuntime::advance` ([`Idle::advancing`]).
    waiting: AtomicUsize,
}

struct Probe {
    /// A tokio timer of the runtime.
    alarm: Pin<Box<tokio::time::Sleep>>,
    waker: Waker,
    /// How it was armed, until it fires.
    armed: Option<Armed>,
}

#[derive(Clone, Copy)]
struct Armed {
    epoch: u64,
    /// A firing proves the runtime idle (see the module's docs).
    confirmed: bool,
}

#[derive(Default)]
struct Proofs {
    /// How many times the probe proved the runtime idle.
    count: u64,
    /// Tasks waiting for the next proof ([`Idle::settled`]).
    waiters: Vec<Waker>,
}

impl Idle {
    pub(super) fn new(timer: Timer, auto_advance: bool) -> Idle {
        Idle {
            timer,
            auto_advance,
            confirm: AtomicBool::new(true),
            running: AtomicUsize::new(0),
            driving: AtomicBool::new(false),
            block_on: AtomicUsize::new(0),
            epoch: AtomicU64::new(0),
            runtime: Mutex::new(None),
            probe: Mutex::new(None),
            proofs: Mutex::new(Proofs::default()),
            proved: Condvar::new(),
            waiting: AtomicUsize::new(0),
        }
    }

    /// Starts watching `runtime`, just built: makes the probe in its
    /// context.
    pub(super) fn start(self: &Arc<Idle>, runtime: &Handle) {
        let alarm = {
            let _in_runtime = runtime.enter();
            Box::pin(tokio::time::sleep(Duration::from_secs(86_400)))
        };
        let multi_thread = runtime.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread;
        self.confirm.store(multi_thread, SeqCst);
        let waker = Waker::from(Arc::new(ProbeWaker(Arc::downgrade(self))));
        *lock(&self.probe) = Some(Probe {
            alarm,
            waker,
            armed: None,
        });
        *lock(&self.runtime) = Some(runtime.clone());
        self.quiet();
    }

    /// Lets go of the runtime before it is dropped: nothing is armed after.
    pub(super) fn stop(&self) {
        drop(lock(&self.runtime).take());
        drop(lock(&self.probe).take());
    }

    fn me(&self) -> usize {
        std::ptr::from_ref(self) as usize
    }

    /// tokio's `thread_name_fn`, which tokio calls on the thread that
    /// spawns one of the runtime's threads, before it spawns it: the thread
    /// is counted running from then, not from its `on_thread_start`, or a
    /// `spawn_blocking` closure whose thread had not started yet left the
    /// runtime looking idle.
    pub(super) fn thread_spawning(&self) {
        self.running.fetch_add(1, SeqCst);
        self.epoch.fetch_add(1, SeqCst);
    }

    /// tokio's `on_thread_start`: a thread of the runtime, counted running
    /// since it was spawned. (Its `on_thread_stop` is
    /// [`parked`](Idle::parked).)
    pub(super) fn thread_started(&self) {
        THREAD.with(|thread| thread.set((self.me(), true)));
    }

    /// tokio's `on_thread_park`, and `on_thread_stop`.
    pub(super) fn parked(&self) {
        self.count_running(false);
        self.quiet();
    }

    /// tokio's `on_thread_unpark`.
    pub(super) fn unparked(&self) {
        self.count_running(true);
        self.epoch.fetch_add(1, SeqCst);
    }

    /// Counts the calling thread in or out of `running` if it is one of the
    /// runtime's own; else it is a current-thread runtime's `block_on`
    /// thread, which is `driving` or not.
    fn count_running(&self, running: bool) {
        let (owner, counted) = THREAD.with(Cell::get);
        if owner != self.me() {
            self.driving.store(running, SeqCst);
        } else if counted != running {
            THREAD.with(|thread| thread.set((owner, running)));
            if running {
                self.running.fetch_add(1, SeqCst);
            } else {
                self.running.fetch_sub(1, SeqCst);
            }
        }
    }

    /// A current-thread runtime's `block_on` thread starts or stops running
    /// its tasks: see `block_on.rs`.
    pub(super) fn set_driving(&self, driving: bool) {
        self.driving.store(driving, SeqCst);
    }

    /// Whether nothing of the runtime can run, by what the counters show.
    fn looks_idle(&self) -> bool {
        self.running.load(SeqCst) == 0
            && self.block_on.load(SeqCst) == 0
            && !self.driving.load(SeqCst)
            && lock(&self.runtime)
                .as_ref()
                .is_some_and(|runtime| runtime.metrics().global_queue_depth() == 0)
    }

    /// Arms the probe if the runtime looks idle.
    pub(super) fn quiet(&self) {
        if self.looks_idle() {
            self.arm(!self.confirm.load(SeqCst));
        }
    }

    fn arm(&self, confirmed: bool) {
        let mut probe = lock(&self.probe);
        let Some(probe) = probe.as_mut() else {
            return;
        };
        probe.armed = Some(Armed {
            epoch: self.epoch.load(SeqCst),
            confirmed,
        });
        // A thread kept off the CPU for the millisecond between the reset
        // and the poll finds the probe fired already: its waker found this
        // lock held and did nothing, as it should (the probe was armed just
        // now), so arm it again.
        loop {
            let at = tokio::time::Instant::now() + PROBE_AHEAD;
            probe.alarm.as_mut().reset(at);
            let mut cx = Context::from_waker(&probe.waker);
            if probe.alarm.as_mut().poll(&mut cx).is_pending() {
                break;
            }
        }
    }

    /// The probe fired: with nothing changed since it was armed, the runtime
    /// is idle, and the clock moves to the next deadline.
    fn fired(&self) {
        let armed = match self.probe.try_lock() {
            Ok(mut probe) => probe.as_mut().and_then(|probe| probe.armed.take()),
            // Being armed again, which supersedes this firing.
            Err(_) => None,
        };
        let Some(armed) = armed else {
            return;
        };
        if self.epoch.load(SeqCst) != armed.epoch || !self.looks_idle() {
            return;
        }
        if !armed.confirmed {
            self.arm(true);
            return;
        }
        let waiters = {
            let mut proofs = lock(&self.proofs);
            proofs.count += 1;
            std::mem::take(&mut proofs.waiters)
        };
        self.proved.notify_all();
        // An `advance` or `advance_async` under way waits for the runtime
        // to settle, then moves the clock itself, by its duration, as
        // `tokio::time::advance` does: no auto-advance meanwhile (which
        // jumped the clock to the next deadline, past what it was told, or
        // raced the thread moving it). Armed again, confirmed: once it is
        // done, or if a waker was stale, the next proof advances.
        let awaited = !waiters.is_empty() || self.waiting.load(SeqCst) != 0;
        waiters.into_iter().for_each(Waker::wake);
        if self.auto_advance && (awaited || self.advance_to_next()) {
            self.arm(true);
        }
    }

    /// Moves the clock to the next deadline, and on until something fires
    /// (a deadline in a higher level of the wheel first brings its entries
    /// down, firing nothing). Whether there was one.
    fn advance_to_next(&self) -> bool {
        let fired = self.timer.stats().fired;
        let mut moved = false;
        while let Some(next) = self.timer.driver().next_deadline() {
            self.timer.advance_to(next);
            moved = true;
            if self.timer.stats().fired != fired {
                break;
            }
        }
        moved
    }

    /// Blocks the calling thread (not one of the runtime's) until the probe
    /// next proves the runtime idle.
    pub(super) fn wait_idle(&self) {
        let mut proofs = lock(&self.proofs);
        let seen = proofs.count;
        drop(proofs);
        // Already idle, nothing may arm it again.
        self.quiet();
        proofs = lock(&self.proofs);
        while proofs.count == seen {
            proofs = self
                .proved
                .wait(proofs)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Counts the calling thread in `TestRuntime::advance` until the guard
    /// is dropped: meanwhile auto-advance leaves the clock to it.
    pub(super) fn advancing(&self) -> Waiting<'_> {
        self.waiting.fetch_add(1, SeqCst);
        Waiting(&self.waiting)
    }

    /// Completes once the probe next proves the runtime idle (counting the
    /// awaiting task as idle while it waits).
    pub(super) fn settled(self: &Arc<Idle>) -> Settled {
        Settled {
            idle: self.clone(),
            seen: None,
        }
    }
}

/// A thread in `TestRuntime::advance`, counted out when it leaves.
pub(super) struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, SeqCst);
    }
}

/// The future [`Idle::settled`] returns.
pub(super) struct Settled {
    idle: Arc<Idle>,
    /// The proofs counted when first polled.
    seen: Option<u64>,
}

impl Future for Settled {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let me = &mut *self;
        let mut proofs = lock(&me.idle.proofs);
        let first = me.seen.is_none();
        let seen = *me.seen.get_or_insert(proofs.count);
        if proofs.count != seen {
            return Poll::Ready(());
        }
        if !proofs.waiters.iter().any(|w| w.will_wake(cx.waker())) {
            proofs.waiters.push(cx.waker().clone());
        }
        drop(proofs);
        // Awaited outside the runtime (another runtime's task), with the
        // runtime idle already: nothing else may arm the probe. (Inside, the
        // awaiting thread is counted running, and this does nothing.) Once:
        // arming again at every poll would put the proof off for ever.
        if first {
            me.idle.quiet();
        }
        Poll::Pending
    }
}

/// The probe's waker: holds its `Idle` weakly, since the probe's tokio
/// timer, which holds the waker, belongs to the `Idle`.
struct ProbeWaker(Weak<Idle>);

impl Wake for ProbeWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if let Some(idle) = self.0.upgrade() {
            idle.fired();
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
