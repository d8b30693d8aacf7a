//! [`TestRuntime::block_on`](super::TestRuntime::block_on)'s future,
//! counted busy while it is polled and while it is woken and waits to be.
//!
//! On a multi-thread runtime `block_on`'s future runs on a thread that is
//! no worker: no park hook tells when it runs. So the future is wrapped:
//! while it is polled it counts in `Idle::block_on`, and its waker is
//! wrapped too, so that from the moment something wakes it until it is
//! polled again it counts there as well (a task that sends it a message
//! and parks leaves the runtime busy, not idle). When a poll returns
//! `Pending` with nothing waking it, every worker may already be parked:
//! no hook will say the runtime went idle, so this does; and so it does
//! when the future is done (returned, panicked or dropped).
//!
//! On a current-thread runtime the thread inside `block_on` also runs the
//! tasks: it is *driving* from the first poll until it parks, and again
//! after each unpark (the hooks), until `block_on` returns.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU8, Ordering::SeqCst};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Wake, Waker};

use super::idle::Idle;

/// `block_on`'s future, wrapped.
pub(super) struct Busy<F> {
    idle: Arc<Idle>,
    current_thread: bool,
    future: Pin<Box<F>>,
    waker: Arc<Woken>,
}

impl<F> Busy<F> {
    pub(super) fn new(idle: Arc<Idle>, current_thread: bool, future: F) -> Busy<F> {
        let waker = Arc::new(Woken {
            idle: Arc::downgrade(&idle),
            state: AtomicU8::new(WAITING),
            inner: Mutex::new(None),
        });
        Busy {
            idle,
            current_thread,
            future: Box::pin(future),
            waker,
        }
    }
}

/// The waker the wrapped future sees: marks it woken, then wakes
/// `block_on`.
struct Woken {
    idle: std::sync::Weak<Idle>,
    /// [`WAITING`], [`WOKEN`] (counted in `Idle::block_on`) or [`DONE`].
    state: AtomicU8,
    /// `block_on`'s own waker, as of the last poll.
    inner: Mutex<Option<Waker>>,
}

/// Not woken since the last poll.
const WAITING: u8 = 0;
/// Woken, and counted busy until polled.
const WOKEN: u8 = 1;
/// `block_on` has returned: a waker the future left behind wakes nothing
/// and counts nothing.
const DONE: u8 = 2;

impl Wake for Woken {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let counted = self
            .state
            .compare_exchange(WAITING, WOKEN, SeqCst, SeqCst)
            .is_ok();
        if counted {
            if let Some(idle) = self.idle.upgrade() {
                idle.block_on.fetch_add(1, SeqCst);
                idle.epoch.fetch_add(1, SeqCst);
            }
        }
        let inner = self
            .inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if let Some(inner) = inner {
            inner.wake();
        }
    }
}

impl Woken {
    /// Counts the future out as woken, if it was: it is being polled, or
    /// (`then` [`DONE`]) it is gone.
    fn taken(&self, idle: &Idle, then: u8) {
        if self.state.swap(then, SeqCst) == WOKEN {
            idle.block_on.fetch_sub(1, SeqCst);
        }
    }
}

impl<F: Future> Future for Busy<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let me = &mut *self;
        me.idle.block_on.fetch_add(1, SeqCst);
        // What the poll does (a write to a socket) may make a task runnable.
        me.idle.epoch.fetch_add(1, SeqCst);
        if me.current_thread {
            me.idle.set_driving(true);
        }
        me.waker.taken(&me.idle, WAITING);
        {
            let mut inner = me
                .waker
                .inner
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if !inner.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                *inner = Some(cx.waker().clone());
            }
        }
        let waker = Waker::from(me.waker.clone());
        // Counted out however the poll ends: a future that panics (a test's
        // failed assertion, caught by `catch_unwind`) left the runtime busy
        // for ever, and auto-advance and `advance` waited for it.
        let polled = {
            let _polling = Polling(&me.idle);
            me.future.as_mut().poll(&mut Context::from_waker(&waker))
        };
        match polled {
            Poll::Ready(_) => {
                if me.current_thread {
                    me.idle.set_driving(false);
                }
            }
            Poll::Pending => me.idle.quiet(),
        }
        polled
    }
}

/// `block_on`'s future being polled: counted in `Idle::block_on` from
/// before the poll until this is dropped, when the poll returns or unwinds.
struct Polling<'a>(&'a Idle);

impl Drop for Polling<'_> {
    fn drop(&mut self) {
        self.0.block_on.fetch_sub(1, SeqCst);
    }
}

impl<F> Drop for Busy<F> {
    fn drop(&mut self) {
        self.waker.taken(&self.idle, DONE);
        if self.current_thread {
            self.idle.set_driving(false);
        }
        // Done (returned, panicked or dropped): a worker that parked while
        // it was polled or woken found the runtime busy and armed no probe,
        // and none may park again: with a deadline pending, auto-advance
        // never moved the clock.
        self.idle.quiet();
    }
}
