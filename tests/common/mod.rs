//! Helpers shared by the integration tests (each test file is its own crate
//! and uses only some of them).
#![allow(dead_code)]

use std::any::Any;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::runtime::{Builder, Runtime};
use tokio_test::task::Spawn;
use tokio_test::{assert_pending, assert_ready_eq, task};
use wheel::delay_queue::{DelayQueue, Expired};
use wheel::{Instant, Interval, Timer};

pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

pub fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// A current-thread runtime with timers and a paused clock.
pub fn paused_rt() -> Runtime {
    Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap()
}

/// A timer on a manual clock, with the default geometry.
pub fn manual() -> Timer {
    Timer::builder().manual().build().unwrap()
}

/// A timer on a manual clock whose tick is `tick`.
pub fn manual_ticking(tick: Duration) -> Timer {
    Timer::builder().manual().tick(tick).build().unwrap()
}

/// The message of a caught panic, whatever its payload type.
pub fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "<non-string panic payload>".to_owned()
    }
}

/// A current-thread runtime with timers, on real time.
pub fn real_rt() -> Runtime {
    Builder::new_current_thread().enable_time().build().unwrap()
}

/// A multi-thread runtime with two workers and timers, on real time.
pub fn multi_rt() -> Runtime {
    Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap()
}

/// Polls `f` once with a no-op context; for futures that must be polled
/// outside any runtime.
pub fn poll_once<F: Future + Unpin>(f: &mut F) -> Poll<F::Output> {
    let mut cx = Context::from_waker(std::task::Waker::noop());
    Pin::new(f).poll(&mut cx)
}

/// Polls `sleep` once, so that it registers, and returns it (pending).
pub fn registered(mut sleep: wheel::Sleep) -> wheel::Sleep {
    assert!(
        poll_once(&mut sleep).is_pending(),
        "expected a pending sleep"
    );
    sleep
}

/// Polls `interval`'s `poll_tick` once, in its mock task.
pub fn poll_tick(interval: &mut task::Spawn<Interval>) -> Poll<Instant> {
    interval.enter(|cx, mut interval| interval.poll_tick(cx))
}

/// Polls `interval` once per offset, expecting a tick scheduled at
/// `start + offset` each time, then expects it to be pending.
#[track_caller]
pub fn expect_ticks(interval: &mut task::Spawn<Interval>, start: Instant, offsets: &[u64]) {
    for &offset in offsets {
        assert_ready_eq!(
            poll_tick(interval),
            start + ms(offset),
            "tick at {offset} ms"
        );
    }
    assert_pending!(
        poll_tick(interval),
        "no tick after {offsets:?} at {:?}",
        start.elapsed()
    );
}

/// Polls a `DelayQueue` once in its task's context.
pub fn poll_queue<T>(queue: &mut Spawn<DelayQueue<T>>) -> Poll<Option<Expired<T>>> {
    queue.enter(|cx, mut q| q.poll_expired(cx))
}

/// Polls a `DelayQueue` until `Pending` or `Ready(None)`, returning what
/// was yielded.
pub fn drain_queue<T>(queue: &mut Spawn<DelayQueue<T>>) -> Vec<T> {
    let mut out = Vec::new();
    while let Poll::Ready(Some(expired)) = poll_queue(queue) {
        out.push(expired.into_inner());
    }
    out
}

/// A deterministic pseudo-random stream (splitmix64).
pub fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
