//! How entries leave before they fire ([`Shard::cancel`],
//! [`Shard::cancel_callback`]), and how a shard lets go of its lock after
//! work that may have flushed cancelled entries ([`Shard::unlock`]).
//!
//! A cancel of a sleep whose entry is still scheduled leaves the entry,
//! unread, for a batch (`wheel/discard.rs`): reading it would be a cache
//! miss paid under the lock, one cancel after another. The entry holds a
//! clone of the task's waker, so that waker goes with the batch too, not
//! with the `Sleep`: at the latest when `BATCH` cancels have gathered,
//! when the shard's next pass runs (a pass flushes before it fires, and
//! the batch's slots keep the alarm armed no later than their deadlines),
//! when a chunk would hold cancelled entries only, when the stats are
//! read, or, on a paused clock, once nothing else is pending (`tidy`). A cancel of an entry that may have fired reads it, and frees it
//! and its waker at once; so does a cancel of one of the last few entries
//! registered (a timeout around a future that was nearly ready).
//!
//! A flush can happen under any lock of a shard that removes or cancels an
//! entry, or reads the stats. It leaves the entries' values in the wheel
//! ([`Wheel::move_dead_into`]): wakers, whose drop may take this very lock (the
//! last clone of a waker can drop its task, and in it another sleep of
//! this shard). So each such lock is let go of through
//! [`Shard::unlock`], which takes them out first and drops them once the
//! lock is released, containing a drop that panics as a panicking wake is
//! contained in the pass ([`contain`]): the caller may be the pass, or an
//! unrelated sleep's drop. `Shard::lock` checks, in debug builds, that no
//! lock was let go of another way with values left: a test that reaches
//! such a path fails there.
//!
//! [`Wheel::move_dead_into`]: crate::wheel::Wheel::move_dead_into

use super::job::{Batch, CallbackState, Job};
use super::pass::contain;
use super::shard::{Inner, Shard};
use crate::sync::{Arc, MutexGuard, Ordering};
use crate::wheel::Key;

impl Shard {
    /// Frees the entry of a `Sleep` that is dropped, or reset to be
    /// registered afresh: counted cancelled if it had not fired. `tick` is
    /// the entry's deadline, as the sleep knows it. After the last tick the
    /// wheel has processed, the entry cannot have fired (a pass pops only
    /// what is due by then), so it is still scheduled and the wheel may
    /// leave it, unread, for a batch (`wheel/discard.rs`); its waker goes
    /// with the batch. Otherwise the entry is read and freed now.
    pub(crate) fn cancel(&self, key: Key, tick: u64) {
        let mut inner = self.lock();
        let job = if tick > inner.wheel.elapsed() {
            inner.cancelled += 1;
            inner.wheel.discard(key)
        } else {
            let (job, pending) = inner.wheel.remove_scheduled(key).unzip();
            inner.cancelled += u64::from(pending == Some(true));
            job
        };
        self.tidy(&mut inner);
        self.unlock(inner);
        drop(job);
    }

    /// Cancels a pending callback; `true` if that stopped it from running.
    ///
    /// A `PENDING` callback is in the wheel, or in a pass's batch (taken out
    /// but not yet claimed to run). Under this lock, which the pass takes
    /// entries out under, the two cannot change places. Winning the phase
    /// stops it either way; only one still in the wheel is freed and
    /// uncounted here, since the pass uncounted one it took.
    pub(crate) fn cancel_callback(&self, key: Key, state: &CallbackState) -> bool {
        let mut inner = self.lock();
        // Run (or running), cancelled, or handed back by a shutdown.
        if !state.try_cancel() {
            return false;
        }
        inner.cancelled += 1;
        // Still in the wheel only if its slot holds this very callback: once
        // a pass has removed it, the slot may hold a newer entry whose
        // generation has come round to the key's.
        let in_wheel = matches!(
            inner.wheel.value(key),
            Some(Job::Call(callback)) if std::ptr::eq(Arc::as_ptr(&callback.state), state)
        );
        if !in_wheel {
            // In a batch: the pass drops it unrun.
            return true;
        }
        // The closure comes out now; the entry, read just above, goes with
        // a batch (`wheel/discard.rs`), holding a default.
        let job = inner.wheel.value_mut(key).map(std::mem::take);
        let _default = inner.wheel.discard(key);
        let keep_alive = inner.callback_done();
        self.tidy(&mut inner);
        self.unlock(inner);
        // The closure is dropped after the lock and the count, in case its
        // drop panics.
        drop(job);
        drop(keep_alive);
        true
    }

    /// Lets go of the lock, then drops what a flush under it let go of.
    #[inline(always)]
    pub(super) fn unlock(&self, inner: MutexGuard<'_, Inner>) {
        if inner.wheel.has_dead() {
            self.unlock_dead(inner);
        }
    }

    /// [`unlock`](Shard::unlock) after a flush. The values move into a
    /// [`Batch`], whose buffer this thread keeps (a pass's), and the wheel
    /// keeps its own, so that once warm neither allocates: an allocation
    /// here (2 KiB, past glibc's per-thread cache) could wait for the
    /// allocator's lock, which the `wheel-free` thread holds while it hands
    /// memory back (`elsewhere.rs`; `compare`'s worst newest-first drop at
    /// a million read 0.6-1.8 ms with a `Vec` a flush). Each value is
    /// dropped in a [`contain`] of its own, counted if it panicked: one
    /// `contain` around them all would have a second panicking drop panic
    /// during the first's unwinding, which aborts the process.
    #[cold]
    #[inline(never)]
    fn unlock_dead(&self, mut inner: MutexGuard<'_, Inner>) {
        // Taken, not borrowed: a waker's drop below may flush and unlock
        // again on this thread (it then finds the buffer taken).
        let mut dead = Batch::new();
        inner.wheel.move_dead_into(dead.buffer());
        drop(inner);
        for job in dead.drain() {
            if contain(move || drop(job)) {
                self.panicked.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}
