//! [`Timer::schedule`] and its variants: callback timers with cancel
//! handles, as Netty's `newTimeout`.

use std::time::Duration;

use tokio::time::Instant;

use super::Timer;
use crate::error::Error;
use crate::TimerHandle;

impl Timer {
    /// Runs `f` once `delay` has passed, on the thread that drives the
    /// timer, without a task or a future: the handle cancels it. Start and
    /// cancel are O(1).
    ///
    /// The callback runs outside the timer's lock, so it may schedule,
    /// cancel or sleep on this timer; it should be short (spawn a task for
    /// real work), because it runs where tokio fires its timers (or, if its
    /// deadline has already passed when it is scheduled, on a task of the
    /// timer's runtime); never inside `schedule`, nor inside any other
    /// timer's poll, reset or drop. A manual timer's runs inside
    /// [`advance`](Timer::advance). A callback that panics is caught and
    /// counted in [`Stats::panicked`](crate::Stats::panicked); the timer carries on. A deadline that
    /// has already passed runs by the next tick, never early (a manual
    /// timer's at the first `advance` that reaches the end of that tick).
    /// Dropping the handle does not cancel the callback, and a runtime timer
    /// stays alive until its pending callbacks have run, even with no handle
    /// left.
    ///
    /// # Panics
    ///
    /// Panics if the timer has shut down or is at capacity;
    /// [`try_schedule`](Timer::try_schedule) returns the error instead.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use std::sync::Arc;
    /// use std::time::Duration;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let timer = wheel::Timer::builder().build().unwrap();
    /// let ran = Arc::new(AtomicBool::new(false));
    /// let flag = ran.clone();
    /// let handle = timer.schedule(Duration::from_millis(50), move || flag.store(true, Ordering::SeqCst));
    ///
    /// wheel::sleep(Duration::from_millis(60)).await;
    /// assert!(ran.load(Ordering::SeqCst));
    /// assert!(handle.is_expired());
    /// assert!(!handle.cancel(), "too late: it has run");
    /// # }
    /// ```
    #[track_caller]
    pub fn schedule<F>(&self, delay: Duration, f: F) -> TimerHandle
    where
        F: FnOnce() + Send + 'static,
    {
        self.schedule_at(self.deadline_after(delay), f)
    }

    /// Runs `f` at `deadline`; see [`schedule`](Timer::schedule).
    ///
    /// # Panics
    ///
    /// Panics if the timer has shut down or is at capacity;
    /// [`try_schedule_at`](Timer::try_schedule_at) returns the error instead.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let timer = wheel::Timer::builder().build().unwrap();
    /// let handle = timer.schedule_at(timer.now() + std::time::Duration::from_secs(1), || {
    ///     unreachable!("cancelled before it is due")
    /// });
    /// assert!(handle.cancel());
    /// assert!(handle.is_cancelled());
    /// # }
    /// ```
    #[track_caller]
    pub fn schedule_at<F>(&self, deadline: Instant, f: F) -> TimerHandle
    where
        F: FnOnce() + Send + 'static,
    {
        match self.try_schedule_at(deadline, f) {
            Ok(handle) => handle,
            Err(e) => panic!("wheel: cannot schedule a callback: {e}"),
        }
    }

    /// Like [`schedule`](Timer::schedule), but returns why the timer refused.
    ///
    /// # Errors
    ///
    /// The timer has shut down, or holds `max_pending` pending timers.
    ///
    /// # Examples
    ///
    /// ```
    /// let timer = wheel::Timer::builder().manual().build().unwrap();
    /// let handle = timer.try_schedule(std::time::Duration::from_secs(1), || {}).unwrap();
    /// timer.advance(std::time::Duration::from_secs(1));
    /// assert!(handle.is_expired());
    /// ```
    pub fn try_schedule<F>(&self, delay: Duration, f: F) -> Result<TimerHandle, Error>
    where
        F: FnOnce() + Send + 'static,
    {
        self.try_schedule_at(self.deadline_after(delay), f)
    }

    /// Like [`schedule_at`](Timer::schedule_at), but returns why the timer
    /// refused.
    ///
    /// # Errors
    ///
    /// The timer has shut down, or holds `max_pending` pending timers.
    ///
    /// # Examples
    ///
    /// ```
    /// let timer = wheel::Timer::builder().manual().max_pending(1).build().unwrap();
    /// let _first = timer.try_schedule_at(timer.now(), || {}).unwrap();
    /// let err = timer.try_schedule_at(timer.now(), || {}).unwrap_err();
    /// assert!(err.is_at_capacity());
    /// ```
    pub fn try_schedule_at<F>(&self, deadline: Instant, f: F) -> Result<TimerHandle, Error>
    where
        F: FnOnce() + Send + 'static,
    {
        let shard = self.driver.home().clone();
        let (key, state) = shard.schedule(deadline, Box::new(f))?;
        Ok(TimerHandle::new(self.clone(), shard, key, state))
    }
}
