//! What a big wheel lets go of is freed on a thread of the crate's own, so
//! that glibc handing tens of megabytes back to the system (`brk`,
//! milliseconds of kernel time) delays neither the call that let it go nor
//! anything waiting on the shard's lock. Why a `free` can cost that, and
//! which wheels hand memory off, is in `wheel/slots/hand_off.rs`.
//!
//! # The thread
//!
//! One for the process, `wheel-free`, started by the first hand-off and
//! kept; it only frees (nothing handed to it is live, so no destructor of
//! the user's runs there). A [`Freer`] is its queue: a vector with room
//! for [`ROOM`] hand-offs, allocated once, that the thread swaps for an
//! empty one of the same room, so neither side allocates. A hand-off is
//! a push under the queue's lock, called under the shard's lock (one in
//! 1,024 removals of a big wheel; the thread never takes a shard's lock,
//! so the two cannot deadlock). It rings the bell only when the thread's
//! [`Patience`] changes: the first hand-off wakes the thread to linger,
//! and a batch ([`WAKE_AT`] chunks, or a whole wheel) wakes it to free.
//! Ringing for every chunk cost a drop in order 20 ns on average (the
//! wake-up of an idle vCPU, `compare`'s `worst_drop`, Xeon). So memory
//! is freed at the latest [`LINGER`] after it was handed off.
//!
//! Where the thread cannot be started, the queue is full (the thread is
//! [`ROOM`] behind) or its lock poisoned, or the process was forked since
//! the thread started, or while it started (the child has no such thread:
//! what it queued would wait for ever, a fork during the thread's swap
//! leaves the lock held, and one during the start leaves it unfinished
//! there for ever), the memory is freed where it was let go of, as before.
//!
//! Not tokio's blocking pool: a manual timer hands off too, a
//! `TestRuntime`'s clock would count its threads as running, and a task
//! there would be an allocation a hand-off.
//!
//! What this does not remove: while the thread hands memory back, it holds
//! the allocator's lock of the arena the memory came from, so a `malloc`
//! elsewhere that misses its thread's cache on that arena waits for it: a
//! timer call that allocates a chunk, too. The cost has left the calls
//! that free, not the process.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::Duration;

use super::job::Job;
use crate::wheel::Freed;

/// Hand-offs that may wait for the thread; one more is freed in place. A
/// wheel's chunks can empty faster than the thread frees them (in a random
/// order the last thousandth of a burst empties most of them) while a
/// `free` hands memory back: room for 4,096 (a wheel of 4 Mi entries
/// emptying at once), 40 bytes each (a chunk's header), allocated with
/// the thread, twice.
const ROOM: usize = 4096;

/// Chunks that make a batch, which the thread frees at once.
const WAKE_AT: usize = 16;

/// How long the thread waits for a batch before it frees what it has.
const LINGER: Duration = Duration::from_millis(100);

/// The process that starts (or started) the thread, claimed before it
/// does; 0 before the first hand-off.
static STARTED_IN: AtomicU32 = AtomicU32::new(0);

/// The thread, once started; `None` if it could not be.
static THREAD: OnceLock<Option<&'static Freer<Freed<Job>>>> = OnceLock::new();

/// Frees `freed` on the `wheel-free` thread, or here if it cannot.
#[cold]
#[inline(never)]
pub(super) fn free_elsewhere(freed: Freed<Job>) {
    let pid = std::process::id();
    // Claimed before `THREAD` is touched: a child forked while another
    // thread started it must not wait on a start no thread of its own
    // finishes (for ever, under the shard's lock).
    let starter = STARTED_IN
        .compare_exchange(0, pid, Ordering::Relaxed, Ordering::Relaxed)
        .map_or_else(|starter| starter, |_| pid);
    // In a child forked since, dropped here.
    if starter == pid {
        if let Some(thread) = *THREAD.get_or_init(|| Freer::start(ROOM, LINGER, is_batch)) {
            // Refused, dropped here too.
            let _ = thread.hand(freed);
        }
    }
}

/// Whether what waits makes a batch: [`WAKE_AT`] chunks, or a whole
/// wheel's slab.
fn is_batch(waiting: &[Freed<Job>]) -> bool {
    waiting.len() >= WAKE_AT || waiting.iter().any(|f| matches!(f, Freed::Slab(_)))
}

/// What the thread does, given what waits for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Patience {
    /// Nothing waits: sleep until woken.
    Idle,
    /// Less than a batch: wait for the rest, at most the linger, then free.
    Linger,
    /// A batch: free it now.
    Free,
}

/// A queue of things to drop, and the thread that drops them.
struct Freer<T> {
    waiting: Mutex<Vec<T>>,
    bell: Condvar,
    room: usize,
    linger: Duration,
    is_batch: fn(&[T]) -> bool,
    /// Times a hand-off rang the bell.
    #[cfg(test)]
    rings: std::sync::atomic::AtomicUsize,
}

impl<T: Send + 'static> Freer<T> {
    /// A queue with room for `room`, not yet served.
    fn new(room: usize, linger: Duration, is_batch: fn(&[T]) -> bool) -> Freer<T> {
        Freer {
            waiting: Mutex::new(Vec::with_capacity(room)),
            bell: Condvar::new(),
            room,
            linger,
            is_batch,
            #[cfg(test)]
            rings: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// A queue, for the life of the process, and its thread; `None` if the
    /// system would not start one.
    fn start(
        room: usize,
        linger: Duration,
        is_batch: fn(&[T]) -> bool,
    ) -> Option<&'static Freer<T>> {
        let freer = Box::leak(Box::new(Freer::new(room, linger, is_batch)));
        std::thread::Builder::new()
            .name("wheel-free".into())
            .spawn(|| freer.serve())
            .ok()?;
        Some(freer)
    }

    fn patience(&self, waiting: &[T]) -> Patience {
        if waiting.is_empty() {
            Patience::Idle
        } else if (self.is_batch)(waiting) {
            Patience::Free
        } else {
            Patience::Linger
        }
    }

    /// Queues `item` for the thread, waking it if its patience changes;
    /// gives `item` back if the queue is full or its lock poisoned.
    fn hand(&self, item: T) -> Result<(), T> {
        let Ok(mut waiting) = self.waiting.lock() else {
            return Err(item);
        };
        if waiting.len() == self.room {
            return Err(item);
        }
        let before = self.patience(&waiting);
        waiting.push(item);
        // Not at every hand-off while the patience stays: `notify_one` is a
        // `futex` call, waiter or not, under the shard's lock.
        if self.patience(&waiting) != before {
            #[cfg(test)]
            self.rings.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            self.bell.notify_one();
        }
        Ok(())
    }

    /// The thread: drops what waits, as its patience says, for ever (until
    /// the lock is poisoned, which nothing here does).
    fn serve(&self) -> Option<()> {
        let mut taken = Vec::with_capacity(self.room);
        let mut waiting = self.waiting.lock().ok()?;
        loop {
            match self.patience(&waiting) {
                Patience::Idle => {
                    waiting = self.bell.wait(waiting).ok()?;
                    continue;
                }
                Patience::Linger => {
                    waiting = self.bell.wait_timeout(waiting, self.linger).ok()?.0;
                }
                Patience::Free => {}
            }
            // Whatever waits now goes: a batch, or what lingered.
            std::mem::swap(&mut *waiting, &mut taken);
            drop(waiting);
            taken.clear();
            waiting = self.waiting.lock().ok()?;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::time::Instant;

    use super::*;

    /// Counts its drops.
    struct Tracked(Arc<AtomicUsize>);

    impl Drop for Tracked {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn two_make_a_batch(waiting: &[Tracked]) -> bool {
        waiting.len() >= 2
    }

    /// Waits, up to a generous bound, until `count` reaches `n`.
    fn until(count: &AtomicUsize, n: usize) {
        let start = Instant::now();
        while count.load(Ordering::SeqCst) < n {
            assert!(start.elapsed() < Duration::from_secs(30), "never freed");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn patience_follows_what_waits() {
        let freer = Freer::new(4, LINGER, two_make_a_batch);
        let count = Arc::new(AtomicUsize::new(0));
        let one = || Tracked(count.clone());
        assert_eq!(freer.patience(&[]), Patience::Idle);
        assert_eq!(freer.patience(&[one()]), Patience::Linger);
        assert_eq!(freer.patience(&[one(), one()]), Patience::Free);
        assert!(is_batch(&[Freed::empty_slab()]));
        let chunks: Vec<_> = (0..WAKE_AT)
            .map(|_| Freed::Chunk(Default::default()))
            .collect();
        assert!(!is_batch(&chunks[1..]) && is_batch(&chunks));
    }

    #[test]
    fn a_full_queue_gives_the_item_back_to_be_freed_in_place() {
        let freer = Freer::new(2, LINGER, two_make_a_batch);
        let count = Arc::new(AtomicUsize::new(0));
        assert!(freer.hand(Tracked(count.clone())).is_ok());
        assert!(freer.hand(Tracked(count.clone())).is_ok());
        let refused = freer.hand(Tracked(count.clone()));
        assert!(refused.is_err());
        drop(refused);
        assert_eq!(count.load(Ordering::SeqCst), 1, "only the refused one");
    }

    /// A batch wakes the thread at once: with an hour's linger, only the
    /// bell can have freed it.
    #[test]
    fn a_batch_is_freed_at_once() {
        let freer = Freer::start(8, Duration::from_secs(3600), two_make_a_batch).unwrap();
        let count = Arc::new(AtomicUsize::new(0));
        freer.hand(Tracked(count.clone())).ok().unwrap();
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(count.load(Ordering::SeqCst), 0, "one lingers");
        freer.hand(Tracked(count.clone())).ok().unwrap();
        until(&count, 2);
    }

    /// A thing to drop whose drop, for one, waits at a gate.
    enum Item {
        Counted(Arc<AtomicUsize>),
        Gated(Arc<std::sync::Mutex<()>>, Arc<AtomicUsize>),
    }

    impl Drop for Item {
        fn drop(&mut self) {
            match self {
                Item::Counted(count) => drop(count.fetch_add(1, Ordering::SeqCst)),
                Item::Gated(gate, entered) => {
                    entered.fetch_add(1, Ordering::SeqCst);
                    drop(gate.lock());
                }
            }
        }
    }

    fn two_items_make_a_batch(waiting: &[Item]) -> bool {
        waiting.len() >= 2
    }

    /// While the thread is busy freeing, hand-offs pile up: they ring once
    /// to make it linger and once as they make a batch, not at every one
    /// (ringing as long as a batch waited: 100 hand-offs rang 100 times).
    #[test]
    fn hand_offs_to_a_busy_thread_ring_as_its_patience_changes() {
        let freer = Freer::start(200, Duration::from_secs(3600), two_items_make_a_batch).unwrap();
        let count = Arc::new(AtomicUsize::new(0));
        let entered = Arc::new(AtomicUsize::new(0));
        let gate = Arc::new(std::sync::Mutex::new(()));
        let held = gate.lock().unwrap();
        // A batch whose first drop waits at the gate: the thread is busy.
        freer
            .hand(Item::Gated(gate.clone(), entered.clone()))
            .ok()
            .unwrap();
        freer.hand(Item::Counted(count.clone())).ok().unwrap();
        until(&entered, 1);
        let before = freer.rings.load(Ordering::SeqCst);
        for _ in 0..100 {
            freer.hand(Item::Counted(count.clone())).ok().unwrap();
        }
        let rang = freer.rings.load(Ordering::SeqCst) - before;
        drop(held);
        assert_eq!(rang, 2, "100 hand-offs to a busy thread rang {rang} times");
        until(&count, 101);
    }

    /// Less than a batch is freed once the linger has passed: the first
    /// hand-off woke the thread to wait.
    #[test]
    fn less_than_a_batch_is_freed_after_the_linger() {
        let freer = Freer::start(8, Duration::from_millis(10), two_make_a_batch).unwrap();
        let count = Arc::new(AtomicUsize::new(0));
        freer.hand(Tracked(count.clone())).ok().unwrap();
        until(&count, 1);
        // And again, the thread having gone back to sleep.
        std::thread::sleep(Duration::from_millis(50));
        freer.hand(Tracked(count.clone())).ok().unwrap();
        until(&count, 2);
    }
}
