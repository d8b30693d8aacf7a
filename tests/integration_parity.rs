//! `wheel::tower` and `impl hyper::rt::Timer` (features `tower` and
//! `hyper`) beside what they replace, `tower::timeout` and hyper-util's
//! `TokioTimer`, where `tests/tower.rs` and `tests/hyper.rs` do not look:
//! the auto traits a server stack needs, timeouts past tokio's 30-year cap,
//! and hyper's `reset` on tokio's paused clock with auto-advance (an awaited
//! sleep, reset before or after its first poll, on the default timer, a
//! timer of its own and one of several shards).
//!
//! Everything runs on tokio's paused clock; no assertion depends on how
//! fast the machine is.

use std::pin::Pin;
use std::time::Duration;

use hyper::rt::{Sleep as HyperSleep, Timer as HyperTimer};
use tokio::time::{self, Instant};
use tokio_test::{assert_pending, task};
use tower::timeout::error::Elapsed;
use tower::{service_fn, BoxError, Service, ServiceExt};
use wheel::tower::{ResponseFuture, Timeout, TimeoutLayer};
use wheel::Timer;

mod common;

const YEAR: Duration = Duration::from_secs(365 * 86_400);

/// A tower service stack is shared between a server's tasks, and its
/// response futures are spawned: the wheel's types are `Send + Sync` (and
/// the layer and service `Clone`) wherever tower's are.
#[test]
fn the_tower_types_are_send_sync_and_clone_as_towers_are() {
    fn send_sync<T: Send + Sync + 'static>() {}
    fn clone_debug<T: Clone + std::fmt::Debug>() {}
    type Inner = tower::util::BoxCloneSyncService<u8, u8, BoxError>;
    send_sync::<TimeoutLayer>();
    clone_debug::<TimeoutLayer>();
    send_sync::<Timeout<Inner>>();
    send_sync::<ResponseFuture<std::future::Ready<Result<u8, BoxError>>>>();
    send_sync::<tower::timeout::Timeout<Inner>>();
    send_sync::<tower::timeout::future::ResponseFuture<std::future::Ready<Result<u8, BoxError>>>>();
}

/// tower's timeout is a `tokio::time::sleep`, which caps a duration at 30
/// years: a longer timeout elapses at 30 years. The wheel's never elapses
/// before it is due: it waits the whole timeout out, and one too long for
/// an `Instant` (`Duration::MAX`) has no deadline at all.
#[tokio::test(start_paused = true)]
async fn a_timeout_over_30_years_is_waited_out_where_towers_stops_at_30() {
    let _guard = common::guard();
    let pending = || service_fn(|()| std::future::pending::<Result<(), BoxError>>());
    for timeout in [40 * YEAR, 300 * YEAR] {
        let start = Instant::now();
        let ours = Timeout::new(pending(), timeout).oneshot(());
        let theirs = tower::timeout::Timeout::new(pending(), timeout).oneshot(());
        let elapsed = |r: Result<(), BoxError>| r.unwrap_err().is::<Elapsed>();
        let (ours, theirs) =
            tokio::join!(async { (elapsed(ours.await), start.elapsed()) }, async {
                (elapsed(theirs.await), start.elapsed())
            },);
        assert_eq!(theirs, (true, 30 * YEAR), "tower's, {timeout:?}");
        assert_eq!(ours, (true, timeout), "ours, {timeout:?}");
    }

    let mut svc = Timeout::new(pending(), Duration::MAX);
    let mut response = task::spawn(svc.call(()));
    assert_pending!(response.poll());
    time::advance(100 * YEAR).await;
    assert_pending!(response.poll());
    assert_eq!(Timer::current().stats().pending, 0);
}

/// The timers hyper is given here: hyper-util's, then the wheel's default
/// timer, a timer of its own, and one of 4 shards.
fn timers() -> Vec<(&'static str, Box<dyn HyperTimer>)> {
    vec![
        ("TokioTimer", Box::new(hyper_util::rt::TokioTimer::new())),
        ("default", Box::new(Timer::current())),
        ("own", Box::new(Timer::builder().build().unwrap())),
        (
            "4 shards",
            Box::new(Timer::builder().shards(4).build().unwrap()),
        ),
    ]
}

/// Makes a hyper sleep of `first`, polls it once if `poll_first`, resets it
/// to `then` after the timer's `now`, and awaits it: how long that took on
/// tokio's auto-advancing paused clock.
async fn reset_and_await(
    timer: &dyn HyperTimer,
    first: Duration,
    poll_first: bool,
    then: Duration,
) -> Duration {
    let start = Instant::now();
    let mut sleep: Pin<Box<dyn HyperSleep>> = timer.sleep(first);
    if poll_first {
        assert_pending!(task::spawn(&mut sleep).poll());
    }
    timer.reset(&mut sleep, timer.now() + then);
    sleep.await;
    start.elapsed()
}

/// hyper resets its header-read and keep-alive sleeps, sometimes before
/// their first poll (HTTP/2's keep-alive). On an auto-advancing paused
/// clock a wheel sleep reset earlier or later completes when hyper-util's
/// does: nothing of the old deadline holds the clock back or jumps it.
#[tokio::test(start_paused = true)]
async fn hyper_reset_then_awaited_on_an_auto_advancing_clock_matches_tokio_timer() {
    let _guard = common::guard();
    let ms = Duration::from_millis;
    let cases = [
        (ms(10_000), true, ms(1_000)),
        (ms(10_000), false, ms(1_000)),
        (ms(1_000), true, ms(5_000)),
        (ms(1_000), false, ms(5_000)),
        (ms(1_000), true, ms(0)),
        (ms(0), false, ms(3)),
        (ms(3), true, ms(2)),
        (
            Duration::from_micros(1_500),
            true,
            Duration::from_micros(2_500),
        ),
    ];
    for (first, poll_first, then) in cases {
        let mut seen = Vec::new();
        for (name, timer) in timers() {
            let took = reset_and_await(&*timer, first, poll_first, then).await;
            seen.push((name, took));
        }
        let tokio = seen[0].1;
        for (name, took) in &seen[1..] {
            assert_eq!(
                *took, tokio,
                "{name}: {first:?}, polled first: {poll_first}, reset to {then:?}"
            );
        }
    }
}

/// A sleep hyper resets and then drops leaves no wheel alarm for tokio's
/// auto-advance to jump the clock to, as hyper-util's leaves no tokio timer.
#[tokio::test(start_paused = true)]
async fn a_reset_then_dropped_hyper_sleep_leaves_nothing_for_auto_advance() {
    // No `common::guard()`: its watchdog is a tokio timer, which the clock
    // would auto-advance to.
    for (name, timer) in timers() {
        let start = Instant::now();
        let mut sleep = timer.sleep(Duration::from_millis(100));
        assert_pending!(task::spawn(&mut sleep).poll());
        timer.reset(&mut sleep, timer.now() + Duration::from_secs(3600));
        drop(sleep);
        // The runtime idles until another thread answers: with a timer
        // left, tokio would auto-advance the clock to it meanwhile.
        let (tx, rx) = tokio::sync::oneshot::channel();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            tx.send(()).unwrap();
        });
        rx.await.unwrap();
        assert_eq!(start.elapsed(), Duration::ZERO, "{name}: the clock moved");
    }
}
