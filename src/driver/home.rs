//! Which shard of a timer a thread registers in: its *home* (see "Shards"
//! in the driver's docs).
//!
//! Each timer deals its shards out itself, in the order threads first
//! register with it: a counter per timer, and a per-thread cache of the
//! last four (timer, shard) pairs. So the first `shards` threads to register
//! with a timer (a runtime's workers, for its default timer) each get a
//! shard of their own, whatever other threads and timers the process has.
//!
//! A single number per thread, counted over the whole process, would not
//! promise that: two workers of one runtime, numbered `k` and `k + shards`
//! because threads of another runtime (or a blocking pool) registered
//! between them, would share one shard and its lock for good while another
//! sat idle.
//!
//! The cache holds four timers, so a thread that uses its runtime's default
//! timer and three explicit ones keeps its shard in each (dealing again
//! takes an atomic add on the timer's counter, which every thread shares). A thread that
//! comes back to a timer evicted from its cache is dealt a shard again,
//! perhaps another: that only moves where its new entries go, since every
//! key carries its own shard. A timer is named by its address; a later
//! timer at the address of a dropped one may inherit a thread's cached
//! shard (masked to its own count), which is as good as any.
//!
//! Under loom the home is the model's thread index instead, so that every
//! run of a model maps threads to shards the same way.

#[cfg(not(loom))]
use std::cell::Cell;
use std::sync::atomic::AtomicUsize;
#[cfg(not(loom))]
use std::sync::atomic::Ordering;

/// How many timers a thread remembers its shard in.
#[cfg(not(loom))]
const HOMES_KEPT: usize = 4;

#[cfg(not(loom))]
std::thread_local! {
    /// (timer address, shard) for the four timers this thread used last,
    /// the latest first; address 0 is an empty place.
    static HOMES: Cell<[(usize, usize); HOMES_KEPT]> = const { Cell::new([(0, 0); HOMES_KEPT]) };
}

/// The calling thread's shard of the timer at address `timer`, whose
/// shards `dealer` deals, reduced by `mask` (shards - 1).
#[cfg(not(loom))]
#[inline]
pub(super) fn home(timer: usize, dealer: &AtomicUsize, mask: usize) -> usize {
    let deal = || dealer.fetch_add(1, Ordering::Relaxed);
    let shard = HOMES
        .try_with(|homes| {
            let mut kept = homes.get();
            if kept[0].0 == timer {
                return kept[0].1;
            }
            // Found further down, or dealt anew: moved to the front, the
            // others shifted down (the last one out, if it was not found).
            let at = kept.iter().position(|&(kept, _)| kept == timer);
            let shard = at.map_or_else(deal, |at| kept[at].1);
            let end = at.unwrap_or(HOMES_KEPT - 1);
            kept.copy_within(0..end, 1);
            kept[0] = (timer, shard);
            homes.set(kept);
            shard
        })
        // A thread-local being destroyed (a `Sleep` dropped by another
        // thread-local's destructor): any shard will do.
        .unwrap_or_else(|_| deal());
    shard & mask
}

/// Under loom: the model's thread index ("ThreadId(n)"), reduced by `mask`.
#[cfg(loom)]
pub(super) fn home(_timer: usize, _dealer: &AtomicUsize, mask: usize) -> usize {
    let id = format!("{:?}", loom::thread::current().id());
    let index = id
        .bytes()
        .filter(u8::is_ascii_digit)
        .fold(0, |n, digit| n * 10 + usize::from(digit - b'0'));
    index & mask
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// `home` for the timer named `timer` on a fresh thread.
    fn on_new_thread(timer: usize, dealer: &AtomicUsize, mask: usize) -> usize {
        std::thread::scope(|s| s.spawn(|| home(timer, dealer, mask)).join().unwrap())
    }

    #[test]
    fn the_first_threads_of_a_timer_each_get_their_own_shard() {
        let (a, b) = (AtomicUsize::new(0), AtomicUsize::new(0));
        let mut homes = Vec::new();
        for _ in 0..4 {
            homes.push(on_new_thread(1, &a, 3));
            // Threads that register with another timer in between, as a
            // second runtime's workers would, do not take this one's shards.
            for _ in 0..3 {
                on_new_thread(2, &b, 3);
            }
        }
        homes.sort_unstable();
        assert_eq!(homes, [0, 1, 2, 3]);
    }

    #[test]
    fn a_thread_keeps_its_shard_in_four_timers_it_alternates_between() {
        let dealers: Vec<AtomicUsize> = (0..5).map(|_| AtomicUsize::new(0)).collect();
        let home_in = |timer: usize| home(timer + 1, &dealers[timer], 7);
        std::thread::scope(|s| {
            s.spawn(|| {
                let first: Vec<usize> = (0..4).map(home_in).collect();
                for _ in 0..10 {
                    assert_eq!((0..4).map(home_in).collect::<Vec<_>>(), first);
                }
                let dealt = |timer: usize| dealers[timer].load(Ordering::Relaxed);
                assert!((0..4).all(|timer| dealt(timer) == 1), "dealt again");
                // A fifth timer evicts the one used longest ago (timer 0),
                // which is dealt a shard again when this thread comes back.
                home_in(4);
                for timer in 1..4 {
                    home_in(timer);
                }
                assert_eq!(dealt(0), 1);
                home_in(0);
                assert_eq!(dealt(0), 2, "evicted, dealt again");
                assert!((1..4).all(|timer| dealt(timer) == 1));
            })
            .join()
            .unwrap();
        });
    }

    #[test]
    fn a_home_is_always_below_the_shard_count() {
        let dealer = AtomicUsize::new(usize::MAX - 2);
        for _ in 0..8 {
            assert!(on_new_thread(9, &dealer, 3) <= 3);
        }
    }
}
