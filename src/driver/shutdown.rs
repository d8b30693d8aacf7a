//! Shutting a shard down: what never ran is handed back, every pending
//! `Sleep` is woken to learn of it, and the alarm is dropped.
//!
//! `Timer::shutdown` shuts every shard down; so does the runtime, through
//! the timer's sentinel task, which tokio drops before it shuts its time
//! driver down. A shard checks for shutdown under its lock before every
//! arming, and shutdown drops the alarm under that lock, so no tokio timer
//! of a shard is left for tokio's time driver to fire, or polled, after
//! that driver has gone.

use std::task::Waker;

use super::alarm::Alarm;
use super::job::{held_waker, Job, RunOrder};
use super::shard::Shard;
use crate::sync::Ordering;

/// What a shutdown found that will never run.
#[derive(Default)]
pub(crate) struct Leftovers {
    /// By deadline, then as scheduled ([`RunOrder`]).
    pub(crate) callbacks: Vec<(RunOrder, Box<dyn FnOnce() + Send>)>,
    pub(crate) sleeps: usize,
}

impl Shard {
    /// Marks the shard shut down, adds its pending callbacks and sleeps to
    /// `leftovers`, and wakes every pending `Sleep`, which then completes
    /// if its deadline has passed and otherwise panics, saying why, rather
    /// than hang or complete early. A second call finds nothing.
    pub(crate) fn shut_down(&self, leftovers: &mut Leftovers) {
        let mut inner = self.lock();
        if self.is_shut_down() {
            return;
        }
        self.shut_down.store(true, Ordering::Release);
        // Every pending sleep must take the locked path, which reports it.
        self.published_at.store(i64::MAX, Ordering::Release);
        self.published.store(u64::MAX, Ordering::Release);
        inner.alarm = Alarm::Off;
        let mut wakers: Vec<Waker> = Vec::new();
        // A sleep's entry stays, so the `Sleep` learns of the shutdown when
        // it polls; a callback's goes: it is handed back, and nothing will
        // ask for it by key again.
        let keep = |job: &Job| matches!(job, Job::Wake(_));
        for job in inner.wheel.take_scheduled_values(keep) {
            match job {
                Job::Wake(waker) => {
                    leftovers.sleeps += 1;
                    wakers.extend(held_waker(waker));
                }
                Job::Call(callback) => {
                    // In the wheel, so `PENDING`: only this and a cancel
                    // (under this lock) leave it.
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
        // Those a pass has taken to run were uncounted when taken.
        inner.callbacks = 0;
        let keep_alive = inner.keep_alive.take();
        let sentinel = inner.sentinel.take();
        self.unlock(inner);
        wakers
            .into_iter()
            .for_each(|waker| self.fire(Job::Wake(waker)));
        // Let the sentinel task finish once every shard has shut down.
        if let Some(sentinel) = sentinel {
            sentinel.wake();
        }
        drop(keep_alive);
    }
}
