//! How the queue hands back what is due: [`DelayQueue::poll_expired`], and
//! the `Stream` built on it. The queue waits on one timer ([`Wait`]),
//! armed for its wheel's next expiration (see the module docs of
//! `delay_queue` for who wakes the waiting task when).

use std::pin::Pin;
use std::task::{Context, Poll};

use super::{Bound, DelayQueue, Expired, Key, Wait, NEVER};

impl<T> DelayQueue<T> {
    /// The next expired entry, `Pending`, or `Ready(None)` when the queue is empty.
    ///
    /// `Ready(Some(_))` holds an entry whose deadline has passed; on `Pending`
    /// the task is woken when one is due, or when an insert, reset or remove
    /// changes what this would return.
    ///
    /// `Ready(None)` does not end the queue: after an insert it yields
    /// again, and the task that saw `Ready(None)` is woken by that insert.
    ///
    /// # Panics
    ///
    /// Panics if the queue must wait and its timer has shut down
    /// ([`Timer::shutdown`](crate::Timer::shutdown), or its runtime shut
    /// down), as a pending [`Sleep`](crate::Sleep) does: the queue could
    /// never yield its entries. Also if the queue must wait and its timer,
    /// built with a [`max_pending`](crate::Builder::max_pending) limit, is
    /// full: a queue [`with_timer`](DelayQueue::with_timer) waits on one
    /// [`Sleep`](crate::Sleep) of that timer, whose first poll panics then,
    /// as any `Sleep`'s does.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::future::poll_fn;
    /// use std::time::Duration;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let mut queue = wheel::DelayQueue::new();
    /// queue.insert("a", Duration::from_millis(10));
    /// let expired = poll_fn(|cx| queue.poll_expired(cx)).await.unwrap();
    /// assert_eq!(expired.into_inner(), "a");
    /// assert!(poll_fn(|cx| queue.poll_expired(cx)).await.is_none());
    /// # }
    /// ```
    pub fn poll_expired(&mut self, cx: &mut Context<'_>) -> Poll<Option<Expired<T>>> {
        match &self.waker {
            Some(held) if held.will_wake(cx.waker()) => {}
            _ => self.waker = Some(cx.waker().clone()),
        }
        if self.is_empty() {
            self.disarm();
            return Poll::Ready(None);
        }
        let DelayQueue {
            wheel,
            bound,
            wait,
            armed,
            moved,
            far,
            ..
        } = self;
        let Some(Bound {
            timer,
            clock,
            runtime,
            ..
        }) = bound
        else {
            unreachable!("a queue with entries has a timer");
        };
        loop {
            let next = wheel
                .next_expiration()
                .expect("a non-empty queue has a next expiration");
            // Tick `u64::MAX`, where deadlines beyond the clock's range are
            // clamped, never comes either (`now_tick` stops short of it),
            // even once the clock has passed the instant it names: arming
            // a sleep for it would complete at once and spin.
            let at = if next == NEVER {
                None
            } else {
                clock.instant_at(next)
            };
            let Some(at) = at else {
                // Beyond what `Instant` can express: it never comes. Only an
                // insert or reset (which wakes us, nothing being armed) can
                // change that.
                *wait = None;
                *armed = NEVER;
                return Poll::Pending;
            };
            let alarm = wait.get_or_insert_with(|| Wait::new(timer, runtime.as_ref(), at));
            alarm.reset(at);
            *armed = next;
            // A tick the queue has reached is due; a later one once the
            // sleep says so, as in tokio-util's queue: on a paused clock,
            // once tokio has processed `at`.
            if next > wheel.elapsed() && alarm.poll(timer, cx).is_pending() {
                return Poll::Pending;
            }
            if let Some(key) = wheel.pop_expired(next) {
                let item = wheel.remove(key).expect("a popped entry is in the slab");
                if wheel.len() == 0 {
                    // Nothing left to wait for: free the timer entry now.
                    *wait = None;
                    *armed = NEVER;
                }
                let key = moved.leave(key);
                return Poll::Ready(Some(Expired {
                    value: item.value,
                    deadline: far.take(key, item.at),
                    key: Key(key),
                }));
            }
        }
    }
}

/// The queue's waiting task and its one wait.
impl<T> DelayQueue<T> {
    /// Wakes the waiting task if an entry at `tick` comes before the tick the
    /// wait is armed for (or nothing is armed): the wait would wake it
    /// too late, or never.
    pub(super) fn wake_if_before(&mut self, tick: u64) {
        if tick < self.armed || self.wait.is_none() {
            self.wake();
        }
    }

    pub(super) fn wake(&mut self) {
        if let Some(waker) = self.waker.take() {
            waker.wake();
        }
    }

    /// Drops the wait, and with it the queue's timer entry.
    pub(super) fn disarm(&mut self) {
        self.wait = None;
        self.armed = NEVER;
    }
}

/// The expired entries, tick by tick; `None` when the queue is empty.
///
/// Those due in one tick come out in the order [`DelayQueue::peek`] names
/// them, not by deadline (see [`DelayQueue::poll_expired`]).
impl<T> futures_core::Stream for DelayQueue<T> {
    type Item = Expired<T>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Expired<T>>> {
        self.get_mut().poll_expired(cx)
    }
}
