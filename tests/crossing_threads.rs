//! Sleeps and timeouts that cross threads and runtimes: dropped by a
//! thread-local's destructor on another thread, or made in a runtime whose
//! default timer was shut down by hand.

mod common;

use std::cell::RefCell;
use std::time::Duration;

use common::{paused_rt, secs};
use tokio_test::{assert_pending, task};

thread_local! {
    static KEPT: RefCell<Option<wheel::Sleep>> = const { RefCell::new(None) };
}

/// A pending sleep of a paused runtime, the last its shard has, dropped by a
/// thread-local's destructor on another thread after tokio's own
/// thread-local context is gone there (as a `tokio::time::Sleep` can be).
/// Disarming the shard's alarm entered the runtime, which panicked inside
/// the destructor and aborted the process. Run in a child process, which
/// the abort would end.
#[test]
fn a_sleep_dropped_by_a_thread_locals_destructor_after_tokios_does_not_abort() {
    let _guard = common::guard();
    const CHILD: &str = "WHEEL_TLS_DROP_CHILD";
    if std::env::var_os(CHILD).is_none() {
        let out = common::rerun_alone(&[(CHILD, "1")], &[]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "child failed: {stderr}");
        return;
    }
    let rt = paused_rt();
    let mut sleep = {
        let _in_rt = rt.enter();
        wheel::sleep(secs(3600))
    };
    rt.block_on(async {
        let mut polled = task::spawn(&mut sleep);
        assert_pending!(polled.poll());
    });
    std::thread::spawn(move || {
        KEPT.with(|kept| *kept.borrow_mut() = Some(sleep));
        // tokio's context thread-local, first used after `KEPT`, is
        // destroyed before it (destructors run in reverse order).
        assert!(tokio::runtime::Handle::try_current().is_err());
    })
    .join()
    .unwrap();
    // The runtime still serves its timers.
    rt.block_on(async {
        let start = tokio::time::Instant::now();
        wheel::sleep(secs(1)).await;
        assert_eq!(start.elapsed(), secs(1));
    });
}

/// A timeout made after the runtime's default timer was shut down by hand
/// waits on the timer that replaces it, as a sleep made then does; it
/// panicked "shut down" at its first wait: the thread's cache still named
/// the runtime, so no lookup replaced the timer.
#[test]
fn a_timeout_made_after_the_default_timer_is_shut_down_by_hand_times_out() {
    let _guard = common::guard();
    paused_rt().block_on(async {
        // The thread's cache now holds this runtime's default timer.
        wheel::sleep(Duration::from_millis(1)).await;
        wheel::Timer::current().shutdown();
        let start = tokio::time::Instant::now();
        let out = wheel::timeout(secs(1), std::future::pending::<()>()).await;
        assert!(out.is_err(), "{out:?}");
        assert_eq!(start.elapsed(), secs(1));
        assert!(!wheel::Timer::current().is_shut_down(), "not replaced");
    });
}
