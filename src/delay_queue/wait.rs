//! What a queue with entries waits on ([`Wait`]): one timer, armed for the
//! wheel's next expiration.
//!
//! A queue made by `DelayQueue::new` on a runtime waits as tokio-util's
//! does, on a tokio `Sleep` of that runtime: one layer between the queue
//! and tokio's driver. Through a [`Sleep`] of the default timer it would be
//! two (the sleep's entry in a shard, and the shard's own tokio alarm),
//! each stop paying a registration and a driver pass on top of tokio's
//! (callgrind, Xeon, 2026-11-28: about 2,400 instructions a stop more than
//! tokio-util's queue; the compare bench's drain row measures it). The
//! default timer it is bound to has no `max_pending` limit (`registry.rs`
//! builds it with the default builder), so the wait takes no room there;
//! it is the timer's shutdown the queue still answers to: polled after it,
//! before its next entry is due, it panics as a pending `Sleep` of that
//! timer does. What it gives up: it is not in that timer's
//! [`Timer::stats`], and a shutdown does not wake it (its tokio timer
//! does, at the next entry's deadline at the latest).
//!
//! A queue `with_timer`, or on a test clock (whose time tokio's driver does
//! not keep), waits on a [`Sleep`] of its timer: it counts in that timer's
//! stats and `max_pending`, and is woken by its shutdown. It also keeps
//! that timer's precision: the pass that fires the wait moves the shard's
//! wheel up to the clock's tick, so a later tick that came while the task
//! was being woken completes at once when the queue re-arms for it, where
//! a tokio `Sleep` would wait for tokio's next millisecond. Such a queue
//! waiting on a tokio `Sleep` instead (tried, 2026-11-29, Xeon) drained
//! about 9% cheaper on a paused clock (0.94-0.98 of tokio-util's against
//! 1.00-1.06), but in real time its entries came out 1.07-1.09 ms late at
//! the median against 0.62-0.63 (125 µs ticks; the compare bench's
//! `delay_queue` rows, four runs each): not kept.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::runtime::Handle;
use tokio::time::Instant;

use crate::driver::can_enter;
use crate::error::Error;
use crate::{Sleep, Timer};

/// The one timer a queue with entries waits on.
pub(super) enum Wait {
    /// A tokio sleep of the queue's runtime (a queue made by `new`).
    Runtime(Pin<Box<tokio::time::Sleep>>),
    /// A sleep of the queue's timer.
    Timer(Sleep),
}

impl Wait {
    /// A wait until `at`: on `runtime`'s tokio timer if given, else on
    /// `timer`. Also on `timer` where the runtime cannot be entered (in a
    /// thread-local's destructor: `Handle::enter` panics there).
    pub(super) fn new(timer: &Timer, runtime: Option<&Handle>, at: Instant) -> Wait {
        match runtime {
            Some(handle) if can_enter() => {
                // A tokio sleep takes the timer of the runtime current
                // where it is made: the queue's, whatever runtime polls it.
                let _its_timer = handle.enter();
                Wait::Runtime(Box::pin(tokio::time::sleep_until(at)))
            }
            _ => Wait::Timer(timer.sleep_until(at)),
        }
    }

    /// The moment waited for.
    fn deadline(&self) -> Instant {
        match self {
            Wait::Runtime(sleep) => sleep.deadline(),
            Wait::Timer(sleep) => sleep.deadline(),
        }
    }

    /// Moves the wait to `at`, unless it is already there.
    pub(super) fn reset(&mut self, at: Instant) {
        if self.deadline() == at {
            return;
        }
        match self {
            Wait::Runtime(sleep) => sleep.as_mut().reset(at),
            Wait::Timer(sleep) => Pin::new(sleep).reset(at),
        }
    }

    /// Whether the moment waited for has come.
    ///
    /// # Panics
    ///
    /// If it has not and `timer` has shut down, as a pending [`Sleep`] of
    /// `timer` does.
    pub(super) fn poll(&mut self, timer: &Timer, cx: &mut Context<'_>) -> Poll<()> {
        match self {
            // Asked first: a tokio timer whose runtime has shut down panics
            // when polled, fired or not (tokio's own message); the default
            // timer shuts down before tokio's driver does. As with a `Sleep`
            // of a shut-down timer, what is due by the clock still comes.
            Wait::Runtime(_) if timer.is_shut_down() => {
                if self.deadline() <= timer.now() {
                    Poll::Ready(())
                } else {
                    shut_down()
                }
            }
            Wait::Runtime(sleep) => sleep.as_mut().poll(cx),
            Wait::Timer(sleep) => Pin::new(sleep).poll(cx),
        }
    }
}

#[cold]
#[track_caller]
fn shut_down() -> ! {
    panic!(
        "wheel: this DelayQueue can never yield its entries: {}",
        Error::shut_down()
    )
}
