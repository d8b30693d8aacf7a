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

/// A column's queue: its types and how it is made (`$make`, from the
/// column's timer). tokio-util's queue and the crate's have the same API,
/// so the calls are the same text.
macro_rules! queue_side {
    ($side:ty, $queue:ty, $key:ty, |$timer:pat_param| $make:expr) => {
        impl QueueSide for $side {
            type Queue = $queue;
            type Key = $key;

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

// tokio-util's queue, for both tokio columns (the runtime decides which
// tokio timer its `Sleep` is on).
queue_side!(
    Tokio,
    tokio_util::time::DelayQueue<u64>,
    tokio_util::time::delay_queue::Key,
    |_| tokio_util::time::DelayQueue::new()
);
queue_side!(
    TokioAlt,
    tokio_util::time::DelayQueue<u64>,
    tokio_util::time::delay_queue::Key,
    |_| tokio_util::time::DelayQueue::new()
);
queue_side!(
    Wheel,
    wheel::DelayQueue<u64>,
    wheel::delay_queue::Key,
    |_| wheel::DelayQueue::new()
);
queue_side!(
    WheelTimer,
    wheel::DelayQueue<u64>,
    wheel::delay_queue::Key,
    |timer| wheel::DelayQueue::with_timer(timer.clone())
);
