//! Where tokio's millisecond grid lies, so that a runtime timer starts its
//! tick grid on it; and whether tokio has processed a deadline.
//!
//! tokio's time driver counts whole milliseconds from the moment it was
//! made (its `start_time`), rounds each deadline up to one and fires it
//! once it has processed that millisecond. A wheel timer's alarm, a tokio
//! timer armed for the end of the wheel tick a deadline rounds up to,
//! fires when a tokio `Sleep` with that deadline would if the wheel's ticks
//! nest in tokio's milliseconds; if not (a timer built off the grid on a
//! running clock), a millisecond later.
//!
//! tokio does not say where its grid starts, but a tokio `Sleep` does
//! ([`processed`]): first polled, it completes at once exactly when its
//! deadline's millisecond is one the driver has processed. That answer is
//! monotone in the deadline, so a binary search over deadlines before `now`
//! finds the driver's last grid point to the nanosecond in about sixty
//! probes, once per timer, each a tokio timer registered and dropped. On a
//! multi-thread runtime another worker may move the driver on meanwhile;
//! the point found may then be off the grid, and the timer as late as one
//! with no grid (never early). On a paused clock one probe decides a
//! registration's first poll (`Shard::has_come`).

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Waker};
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::time::Instant;

/// A point of the current runtime's millisecond grid at or before `now`
/// (the last one its time driver processed), if tokio says. Called inside
/// the runtime's context.
pub(crate) fn grid_point(now: Instant) -> Option<Instant> {
    // `hi` is never processed (the driver has not reached past `now`).
    let hi_bound = now + Duration::from_nanos(1);
    if processed(&Handle::current(), hi_bound) {
        // Not tokio's driver as this module knows it.
        return None;
    }
    // Below: a processed deadline, at most 2^k ms back.
    let mut back = Duration::from_millis(1);
    let mut lo = loop {
        match now.checked_sub(back) {
            Some(at) if processed(&Handle::current(), at) => break at,
            Some(_) if back < Duration::from_secs(1 << 40) => back *= 2,
            _ => return None,
        }
    };
    let mut hi = hi_bound;
    // Invariant: `lo` processed, `hi` not.
    while hi - lo > Duration::from_nanos(1) {
        let mid = lo + (hi - lo) / 2;
        if processed(&Handle::current(), mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Some(lo)
}

/// Whether `handle`'s time driver has processed the millisecond `at` rounds
/// up to: then a tokio sleep until `at` completes at its first poll.
pub(crate) fn processed(handle: &Handle, at: Instant) -> bool {
    let _its_clock = handle.enter();
    let sleep = pin!(tokio::task::unconstrained(tokio::time::sleep_until(at)));
    let mut cx = Context::from_waker(Waker::noop());
    sleep.poll(&mut cx).is_ready()
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn paused() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap()
    }

    #[test]
    fn finds_the_millisecond_tokio_last_processed() {
        let _watchdog = crate::driver::tests::watchdog();
        paused().block_on(async {
            let start = Instant::now();
            // The driver processes the clock when the task yields.
            tokio::time::advance(Duration::from_micros(2_300)).await;
            let now = Instant::now();
            assert_eq!(now - start, Duration::from_micros(2_300));
            assert_eq!(grid_point(now), Some(start + Duration::from_millis(2)));
            // Nothing is left registered: auto-advance has nowhere to go.
            tokio::time::advance(Duration::from_micros(400)).await;
            assert_eq!(
                grid_point(Instant::now()),
                Some(start + Duration::from_millis(2))
            );
        });
    }

    /// The driver may lag the clock by more than a millisecond (the clock
    /// moved, and the runtime has not parked since): the grid point is the
    /// last millisecond it processed, found further back.
    #[test]
    fn a_driver_behind_the_clock_is_found_where_it_is() {
        let _watchdog = crate::driver::tests::watchdog();
        paused().block_on(async {
            let start = Instant::now();
            // The first poll of `advance` moves the clock; the driver
            // processes it only when the task yields, which it does not.
            let mut advance = std::pin::pin!(tokio::time::advance(Duration::from_micros(5_300)));
            let _ = advance
                .as_mut()
                .poll(&mut Context::from_waker(Waker::noop()));
            let now = Instant::now();
            assert_eq!(now - start, Duration::from_micros(5_300));
            assert_eq!(grid_point(now), Some(start));
        });
    }

    #[test]
    fn on_the_grid_it_is_now() {
        let _watchdog = crate::driver::tests::watchdog();
        paused().block_on(async {
            let start = Instant::now();
            tokio::time::advance(Duration::from_millis(7)).await;
            assert_eq!(
                grid_point(Instant::now()),
                Some(start + Duration::from_millis(7))
            );
        });
    }

    /// A timer on a multi-thread runtime looks for tokio's grid too: its
    /// tick 0 is a point the search found, a moment tokio's driver had
    /// processed (a tokio sleep until it completes at once; before, tick 0
    /// was the moment the timer was built, which the driver had not
    /// reached), and its clock counts its ticks in tokio's milliseconds.
    #[test]
    fn a_multi_thread_timer_starts_on_tokios_grid() {
        let _watchdog = crate::driver::tests::watchdog();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let timer = crate::Timer::builder()
            .tick(Duration::from_micros(100))
            .runtime(rt.handle().clone())
            .build()
            .unwrap();
        let clock = timer.driver().clock();
        let origin = clock.instant_at(0).unwrap();
        let _context = rt.enter();
        let mut sleep =
            std::pin::pin!(tokio::task::unconstrained(tokio::time::sleep_until(origin)));
        let first = sleep.as_mut().poll(&mut Context::from_waker(Waker::noop()));
        assert!(first.is_ready(), "tick 0 is a millisecond tokio processed");
        assert_eq!(clock.tokio_ms_floor(25), 20, "ten ticks a millisecond");
    }
}
