//! `Sleep::checked` and `Sleep::poll_checked`: a shutdown a program can
//! handle. Polling a sleep whose timer has shut down before its deadline
//! panics (tests/shutdown.rs); waiting on `checked` returns the same error
//! as a value instead, never early, and completes with `Ok` exactly when
//! the sleep would.

use std::pin::Pin;
use std::time::Duration;

use tokio_test::{assert_pending, assert_ready, task};
use wheel::{Instant, Timer};

mod common;
use common::{manual, ms, paused_rt, secs};

#[test]
fn a_task_waiting_on_checked_gets_the_shutdown_as_an_error_at_once() {
    paused_rt().block_on(async {
        let timer = Timer::builder().build().unwrap();
        let start = Instant::now();
        let waiter = tokio::spawn({
            let mut sleep = timer.sleep(secs(60));
            async move { (sleep.checked().await, Instant::now()) }
        });
        tokio::time::sleep(ms(10)).await; // the waiter registers and waits
        let unfired = timer.shutdown();
        assert_eq!(unfired.sleeps, 1);
        let (result, at) = waiter.await.unwrap();
        let error = result.unwrap_err();
        assert!(error.is_shutdown() && !error.is_at_capacity(), "{error}");
        assert_eq!(at - start, ms(10), "reported when the shutdown came");
    });
}

#[test]
fn checked_is_the_sleep_on_a_running_timer_never_early() {
    paused_rt().block_on(async {
        let timer = Timer::builder().tick(ms(10)).build().unwrap();
        let start = Instant::now();
        let mut sleep = timer.sleep(ms(25));
        sleep.checked().await.unwrap();
        assert_eq!(start.elapsed(), ms(30), "rounded up to the tick, as .await");
        assert!(sleep.is_elapsed());
        // Completed: checking again is Ok at once.
        sleep.checked().await.unwrap();
    });
}

#[test]
fn a_sleep_never_polled_reports_a_shutdown_that_came_first() {
    let timer = manual();
    let mut sleep = timer.sleep(secs(1));
    drop(timer.shutdown());
    let mut checked = task::spawn(sleep.checked());
    assert!(assert_ready!(checked.poll()).unwrap_err().is_shutdown());
}

#[test]
fn after_a_shutdown_a_passed_deadline_still_completes_ok() {
    paused_rt().block_on(async {
        let timer = Timer::builder().build().unwrap();
        let mut sleep = timer.sleep(ms(10));
        let mut checked = task::spawn(sleep.checked());
        assert_pending!(checked.poll());
        drop(checked);
        drop(timer.shutdown());
        let mut checked = task::spawn(sleep.checked());
        assert!(assert_ready!(checked.poll()).unwrap_err().is_shutdown());
        drop(checked);
        // The error leaves the sleep as it was: once its deadline passes it
        // needs no timer to complete.
        tokio::time::advance(ms(10)).await;
        sleep.checked().await.unwrap();
    });
}

#[test]
fn a_runtime_shutdown_is_reported_to_a_sleep_waiting_elsewhere() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let timer = Timer::builder()
        .runtime(rt.handle().clone())
        .build()
        .unwrap();
    let mut sleep = timer.sleep(secs(60));
    let mut checked = task::spawn(sleep.checked());
    {
        let _inside = rt.enter();
        assert_pending!(checked.poll());
    }
    drop(rt);
    assert!(checked.is_woken(), "the shutdown wakes the waiter");
    assert!(assert_ready!(checked.poll()).unwrap_err().is_shutdown());
}

#[test]
fn poll_checked_reports_what_poll_would_panic_with() {
    let timer = manual();
    let mut sleep = timer.sleep(secs(1));
    let mut polled = task::spawn(std::future::poll_fn(|cx| {
        Pin::new(&mut sleep).poll_checked(cx)
    }));
    assert_pending!(polled.poll());
    timer.advance(Duration::from_millis(500));
    assert_pending!(polled.poll());
    drop(timer.shutdown());
    assert!(polled.is_woken());
    let error = assert_ready!(polled.poll()).unwrap_err();
    assert!(error.is_shutdown());
    assert!(error.to_string().contains("shut down"), "{error}");
}

#[test]
fn checked_sleep_is_a_readable_must_use_future() {
    let timer = manual();
    let mut sleep = timer.sleep(secs(1));
    let checked = sleep.checked();
    let debug = format!("{checked:?}");
    assert!(
        debug.starts_with("CheckedSleep { sleep: Sleep {"),
        "{debug}"
    );
}
