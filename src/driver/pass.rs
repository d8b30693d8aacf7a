//! The pass: what drives a shard. It reads the clock, fires what is due,
//! and arms the alarm for what comes next; and [`Shard::surely_pending`],
//! what lets a `Sleep` polled again skip the lock.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::task::Waker;

use super::job::{held_waker, Batch, Job};
use super::shard::{Inner, Shard};
use super::{Deadline, NEVER};
use crate::sync::{Arc, Ordering};
use crate::wheel::Key;

impl Shard {
    /// Fires everything due by now, then arms the alarm for the next
    /// expiration, going round again if that moment has already come. Run
    /// by the alarm (where tokio fires its timers), by a `kick`ed task, and
    /// by `Timer::advance`; never by a registration, a poll, a reset or a
    /// drop.
    ///
    /// Wakers are woken and callbacks run 32 at a time with the lock
    /// released, so a woken task that polls at once, or a callback that
    /// schedules another, does not wait for the pass. Another pass may run
    /// meanwhile (tokio firing a re-arm on another thread): each pops under
    /// the lock, so each entry fires once.
    pub(crate) fn pass(&self) {
        let mut batch = Batch::new();
        let mut release = None;
        let mut inner = self.lock();
        inner.passes += u64::from(!self.is_shut_down());
        // The tick the alarm said has come, if it said so.
        let mut come = 0;
        'pass: loop {
            // After a shutdown nothing is read, not even the clock: tokio
            // may be tearing its runtime down on this very thread.
            if self.is_shut_down() {
                break;
            }
            let mut now = self.due_tick(&mut inner).max(come);
            self.publish(now);
            while let Some((key, waker)) = inner.wheel.pop_expired_with(now, Job::take_waker) {
                let Some(fire) = inner.fire_entry(key, waker, &mut release) else {
                    continue;
                };
                if batch.push(fire) {
                    self.unlock(inner);
                    batch.drain().for_each(|fire| self.fire(fire));
                    inner = self.lock();
                    if self.is_shut_down() {
                        break 'pass;
                    }
                    // Another pass may have run meanwhile, with a later clock
                    // reading, and moved entries due by it to the wheel's due
                    // list: it published that reading first, so they are due
                    // by it, and this pass pops them with it.
                    now = now.max(self.published.load(Ordering::Relaxed));
                }
            }
            let next = inner.wheel.next_expiration().unwrap_or(NEVER);
            inner.wake_at = next;
            if self.arm(&mut inner, next).is_pending() {
                break;
            }
            // Already due: the clock moved on while this pass worked. The
            // alarm's clock says so, and its word is final: the moment it
            // was armed for, the latest deadline of tick `next`, has passed.
            come = next;
        }
        self.unlock(inner);
        batch.drain().for_each(|fire| self.fire(fire));
        // The caller holds a reference too, so this is never the last.
        drop(release);
    }

    /// Announces that entries up to `tick` may fire from now on: called,
    /// under the lock, before any of them is popped. Only ever raised
    /// (shutdown raises it to the end).
    pub(super) fn publish(&self, tick: u64) {
        if tick > self.published.load(Ordering::Relaxed) {
            self.published_at
                .store(self.clock().deadline_at(tick), Ordering::Release);
            self.published.store(tick, Ordering::Release);
        }
    }

    /// Whether the entry of a `Sleep` due at `deadline` has certainly not
    /// fired, as far as can be told without the lock. `near` is the
    /// deadline's [`to_i64`](Deadline::to_i64), which the caller has at
    /// hand; `deadline` gives the whole, called only when that is `None`
    /// (and by a debug assertion).
    ///
    /// A pass raises `published` before it pops what is due by it, so a
    /// deadline after it is unfired. Should the pass fire the entry just
    /// after this look, it wakes the waker the entry holds; a `Sleep` that
    /// returns `Pending` on this look does so only with that very waker, so
    /// its task is polled again and then sees the new watermark.
    #[inline]
    pub(crate) fn surely_pending(
        &self,
        near: Option<i64>,
        deadline: impl Fn() -> Deadline,
    ) -> bool {
        debug_assert_eq!(near, deadline().to_i64());
        // Exact: a deadline's tick is at most `w` just when the deadline is
        // at most `deadline_at(w)`, and saturating at the ends of `i64`
        // keeps that for every deadline `to_i64` lets through.
        match near {
            Some(near) => near > self.published_at.load(Ordering::Acquire),
            None => self.surely_pending_far(deadline()),
        }
    }

    /// [`surely_pending`](Shard::surely_pending) by the tick, for the
    /// deadlines more than 292 years from the base.
    #[cold]
    #[inline(never)]
    fn surely_pending_far(&self, deadline: Deadline) -> bool {
        self.clock().tick_of(deadline) > self.published.load(Ordering::Acquire)
    }

    /// Wakes a waker or runs a callback, containing a panic so one bad
    /// waker or callback cannot stop the pass from serving everyone else.
    pub(super) fn fire(&self, fire: Job) {
        let panicked = match fire {
            Job::Wake(waker) => contain(|| waker.wake()),
            // Dropped unrun if its handle cancelled it while it sat in the
            // batch; a panicking drop is contained too.
            Job::Call(callback) => contain(|| {
                if callback.state.claim() {
                    self.callbacks_fired.fetch_add(1, Ordering::Relaxed);
                    (callback.run)();
                }
            }),
        };
        if panicked {
            self.panicked.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Runs `f`; `true` if it panicked. The panic's payload is dropped inside
/// a `catch_unwind` too (and leaked if that drop panics as well): a
/// payload whose drop panics must not unwind the pass, which would drop
/// the rest of its batch unrun.
pub(super) fn contain(f: impl FnOnce()) -> bool {
    let Err(payload) = catch_unwind(AssertUnwindSafe(f)) else {
        return false;
    };
    if let Err(again) = catch_unwind(AssertUnwindSafe(move || drop(payload))) {
        std::mem::forget(again);
    }
    true
}

impl Inner {
    /// What firing the entry `key` (just popped, due, its sleep's `waker`
    /// taken out with it) takes out of the wheel: that waker (the entry
    /// stays, the `Sleep`'s to free), or a callback (its entry goes;
    /// `waker` is `None`). A callback is left `PENDING`: claimed just
    /// before it runs, and counted fired then, since a cancel can still stop
    /// it. With the last callback goes the shard's hold on itself, into
    /// `release`, to drop once the lock is released. (Should a callback
    /// scheduled meanwhile make this happen twice in a pass, the first is
    /// dropped here: the pass's caller holds the shard, so that frees
    /// nothing.)
    fn fire_entry(
        &mut self,
        key: Key,
        waker: Option<Waker>,
        release: &mut Option<Arc<Shard>>,
    ) -> Option<Job> {
        match waker {
            Some(waker) => {
                self.fired += 1;
                held_waker(waker).map(Job::Wake)
            }
            None => {
                let Some(Job::Call(callback)) = self.wheel.remove(key) else {
                    unreachable!("only a callback's entry holds no waker")
                };
                if let Some(last) = self.callback_done() {
                    *release = Some(last);
                }
                Some(Job::Call(callback))
            }
        }
    }
}
