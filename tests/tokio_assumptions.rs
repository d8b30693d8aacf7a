//! What the driver assumes of tokio's internals, each pinned by a test on
//! tokio alone: a tokio release that changes one fails its test here, by
//! name, before it breaks the wheel in some subtler way. `docs/DESIGN.md`
//! ("What the driver assumes of tokio") lists each with what relies on it.

mod common;

use std::collections::HashSet;
use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use tokio::runtime::Builder;
use tokio::time::Instant;

struct Counting(AtomicUsize);

impl Wake for Counting {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// `alarm.rs` (`ARMING`): resetting a registered tokio timer to a moment
/// tokio's driver has processed calls its waker on the spot, on the
/// resetting thread, before `reset` returns (the wheel's alarm waker must
/// then run nothing: the shard's lock is held).
#[test]
fn a_reset_into_the_processed_past_wakes_before_it_returns() {
    let _guard = common::guard();
    common::paused_unguarded().block_on(async {
        let start = Instant::now();
        tokio::time::sleep(Duration::from_millis(2)).await;
        let counting = Arc::new(Counting(AtomicUsize::new(0)));
        let waker = Waker::from(counting.clone());
        let mut sleep = pin!(tokio::time::sleep(Duration::from_secs(3600)));
        let mut cx = Context::from_waker(&waker);
        assert!(sleep.as_mut().poll(&mut cx).is_pending());
        sleep.as_mut().reset(start + Duration::from_millis(1));
        assert_eq!(
            counting.0.load(Ordering::SeqCst),
            1,
            "not woken on the spot"
        );
    });
}

/// `grid.rs`: a tokio sleep's first poll completes at once exactly when
/// its deadline's millisecond is one the driver has processed (the search
/// for tokio's grid, and a registration's first poll on a paused clock).
#[test]
fn a_first_poll_is_ready_exactly_when_its_millisecond_was_processed() {
    let _guard = common::guard();
    common::paused_unguarded().block_on(async {
        let start = Instant::now();
        tokio::time::sleep(Duration::from_millis(3)).await;
        // The clock moves 300 µs further; the driver has not processed it.
        tokio::time::advance(Duration::from_micros(300)).await;
        let first_poll = |at: Instant| {
            let sleep = pin!(tokio::time::sleep_until(at));
            sleep
                .poll(&mut Context::from_waker(Waker::noop()))
                .is_ready()
        };
        assert!(first_poll(start + Duration::from_millis(3)));
        assert!(!first_poll(
            start + Duration::from_millis(3) + Duration::from_nanos(1)
        ));
        assert!(
            !first_poll(start + Duration::from_micros(3200)),
            "before the clock"
        );
    });
}

/// `time.rs` (`Time::come`): tokio's driver never processes a moment its
/// clock has not reached, so a tokio sleep until a moment after the
/// clock's reading never completes at its first poll, and a registration
/// for such a moment asks tokio nothing. Checked just after the driver
/// processed the clock's millisecond and after an `advance` it has not.
#[test]
fn a_first_poll_is_never_ready_for_a_moment_the_clock_has_not_reached() {
    let _guard = common::guard();
    common::paused_unguarded().block_on(async {
        let first_poll = |at: Instant| {
            let sleep = pin!(tokio::time::sleep_until(at));
            sleep
                .poll(&mut Context::from_waker(Waker::noop()))
                .is_ready()
        };
        for advance_us in [0, 300, 1000, 1999] {
            tokio::time::sleep(Duration::from_millis(3)).await;
            tokio::time::advance(Duration::from_micros(advance_us)).await;
            let now = Instant::now();
            for ahead in [1, 1_000, 999_999, 1_000_000] {
                assert!(
                    !first_poll(now + Duration::from_nanos(ahead)),
                    "{ahead} ns ahead after advancing {advance_us} µs"
                );
            }
        }
    });
}

/// `registry.rs`: a runtime's id is never another's, even once it is gone
/// (the registry keys each runtime's default timer by it, and a `Timeout`
/// names its runtime by it until it first waits).
#[test]
fn runtime_ids_are_never_reused() {
    let _guard = common::guard();
    let ids: HashSet<_> = (0..200)
        .map(|_| {
            let rt = Builder::new_current_thread().build().unwrap();
            rt.handle().id()
        })
        .collect();
    assert_eq!(ids.len(), 200);
}

/// `sentinel.rs`: when a runtime shuts down, tokio drops its tasks before
/// it shuts its time driver down, so a task's drop can still use a tokio
/// timer of that runtime (the sentinel drops its shards' alarms there).
#[test]
fn tasks_are_dropped_before_the_time_driver_shuts_down() {
    let _guard = common::guard();
    struct UsesTimerOnDrop(Arc<AtomicUsize>);
    impl Future for UsesTimerOnDrop {
        type Output = ();
        fn poll(self: std::pin::Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
            Poll::Pending
        }
    }
    impl Drop for UsesTimerOnDrop {
        fn drop(&mut self) {
            let mut sleep = pin!(tokio::time::sleep(Duration::from_secs(1)));
            // A timer of a driver shut down panics when polled.
            let polled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                sleep
                    .as_mut()
                    .poll(&mut Context::from_waker(Waker::noop()))
                    .is_pending()
            }));
            if matches!(polled, Ok(true)) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
    }
    for flavour in [Builder::new_current_thread(), Builder::new_multi_thread()] {
        let mut flavour = flavour;
        let rt = flavour.enable_time().build().unwrap();
        let dropped_alive = Arc::new(AtomicUsize::new(0));
        rt.spawn(UsesTimerOnDrop(dropped_alive.clone()));
        rt.block_on(tokio::task::yield_now());
        drop(rt);
        assert_eq!(dropped_alive.load(Ordering::SeqCst), 1);
    }
}

/// `alarm.rs` (`Source`): only a current-thread runtime's clock can be
/// paused, so a multi-thread runtime's timer reads the real clock with no
/// runtime context (`tokio::time::pause` panics there).
#[test]
fn a_multi_thread_runtimes_clock_cannot_be_paused() {
    let _guard = common::guard();
    let rt = Builder::new_multi_thread()
        .worker_threads(1)
        .enable_time()
        .build()
        .unwrap();
    let paused = rt.block_on(async { tokio::spawn(async { tokio::time::pause() }).await.is_ok() });
    assert!(!paused, "a multi-thread runtime's clock paused");
}
