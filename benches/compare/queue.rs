//! "Which queue": the `DelayQueue` group's columns, as [`Side`]'s are the
//! timers'. Every `DelayQueue` workload is generic over [`QueueSide`], so
//! each column runs the same code and differs only in these calls:
//!
//! - `tokio` (and `tokio-alt`, on the multi-thread rows): tokio-util's
//!   `DelayQueue::new()`, on `tokio::time`: the queue users would otherwise
//!   use.
//! - `wheel`: `wheel::DelayQueue::new()`, on the runtime's default timer.
//! - `timer`: `wheel::DelayQueue::with_timer(timer)`, on an explicit timer.
//!
//! Values are `u64`. The calls are `#[inline]` for the reason `side.rs`
//! gives.

use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::Instant;

use crate::side::{Side, Tokio, TokioAlt, Wheel, WheelTimer};

/// A keyed expiration queue under test, on a column's timer.
pub(crate) trait QueueSide: Side {
    type Queue: Send + 'static;
    type Key: Copy + Send + 'static;

    /// An empty queue, as users make one (`new`, or `with_timer`).
    fn queue(timer: &Self::Timer) -> Self::Queue;
    fn insert(queue: &mut Self::Queue, value: u64, timeout: Duration) -> Self::Key;
    fn insert_at(queue: &mut Self::Queue, value: u64, deadline: Instant) -> Self::Key;
    fn reset_entry(queue: &mut Self::Queue, key: &Self::Key, timeout: Duration);
    /// Removes the entry and returns its value.
    fn remove(queue: &mut Self::Queue, key: &Self::Key) -> u64;
    /// The next expired entry's value and deadline.
    fn poll_expired(queue: &mut Self::Queue, cx: &mut Context<'_>) -> Poll<Option<(u64, Instant)>>;
    fn len(queue: &Self::Queue) -> usize;
}

/// tokio-util's queue, for both tokio columns (the runtime decides which
/// tokio timer its `Sleep` is on).
macro_rules! tokio_util_queue {
    ($side:ty) => {
        impl QueueSide for $side {
            type Queue = tokio_util::time::DelayQueue<u64>;
            type Key = tokio_util::time::delay_queue::Key;

            fn queue(_: &()) -> Self::Queue {
                tokio_util::time::DelayQueue::new()
            }

            #[inline]
            fn insert(queue: &mut Self::Queue, value: u64, timeout: Duration) -> Self::Key {
                queue.insert(value, timeout)
            }

            #[inline]
            fn insert_at(queue: &mut Self::Queue, value: u64, deadline: Instant) -> Self::Key {
                queue.insert_at(value, deadline)
            }

            #[inline]
            fn reset_entry(queue: &mut Self::Queue, key: &Self::Key, timeout: Duration) {
                queue.reset(key, timeout);
            }

            #[inline]
            fn remove(queue: &mut Self::Queue, key: &Self::Key) -> u64 {
                queue.remove(key).into_inner()
            }

            #[inline]
            fn poll_expired(
                queue: &mut Self::Queue,
                cx: &mut Context<'_>,
            ) -> Poll<Option<(u64, Instant)>> {
                queue
                    .poll_expired(cx)
                    .map(|e| e.map(|e| (*e.get_ref(), e.deadline())))
            }

            fn len(queue: &Self::Queue) -> usize {
                queue.len()
            }
        }
    };
}

tokio_util_queue!(Tokio);
tokio_util_queue!(TokioAlt);

/// The crate's queue; `$make` builds it from the column's timer.
macro_rules! wheel_queue {
    ($side:ty, |$timer:ident| $make:expr) => {
        impl QueueSide for $side {
            type Queue = wheel::DelayQueue<u64>;
            type Key = wheel::delay_queue::Key;

            fn queue($timer: &Self::Timer) -> Self::Queue {
                $make
            }

            #[inline]
            fn insert(queue: &mut Self::Queue, value: u64, timeout: Duration) -> Self::Key {
                queue.insert(value, timeout)
            }

            #[inline]
            fn insert_at(queue: &mut Self::Queue, value: u64, deadline: Instant) -> Self::Key {
                queue.insert_at(value, deadline)
            }

            #[inline]
            fn reset_entry(queue: &mut Self::Queue, key: &Self::Key, timeout: Duration) {
                queue.reset(key, timeout);
            }

            #[inline]
            fn remove(queue: &mut Self::Queue, key: &Self::Key) -> u64 {
                queue.remove(key).into_inner()
            }

            #[inline]
            fn poll_expired(
                queue: &mut Self::Queue,
                cx: &mut Context<'_>,
            ) -> Poll<Option<(u64, Instant)>> {
                queue
                    .poll_expired(cx)
                    .map(|e| e.map(|e| (*e.get_ref(), e.deadline())))
            }

            fn len(queue: &Self::Queue) -> usize {
                queue.len()
            }
        }
    };
}

wheel_queue!(Wheel, |_timer| wheel::DelayQueue::new());
wheel_queue!(WheelTimer, |timer| wheel::DelayQueue::with_timer(
    timer.clone()
));
