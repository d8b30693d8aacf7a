//! [`TimerHandle`]: the handle of a callback timer.

use tokio::time::Instant;

use crate::driver::job::{CallbackState, CANCELLED, EXPIRED};
use crate::driver::Shard;
use crate::sync::Arc;
use crate::wheel::Key;
use crate::Timer;

/// The handle of a callback scheduled with [`Timer::schedule`]: cancel it,
/// or ask what became of it (Netty's `Timeout`).
///
/// Dropping the handle does not cancel the callback. The handle keeps its
/// timer alive.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
///
/// let timer = wheel::Timer::builder().manual().build().unwrap();
/// let handle = timer.schedule(Duration::from_secs(1), || println!("retrying"));
/// assert!(!handle.is_expired() && !handle.is_cancelled());
/// assert!(handle.cancel());
/// assert!(!handle.cancel(), "only the first cancel stops it");
/// timer.advance(Duration::from_secs(1));
/// assert!(handle.is_cancelled() && !handle.is_expired());
/// ```
pub struct TimerHandle {
    timer: Timer,
    /// The shard the callback is in.
    shard: Arc<Shard>,
    key: Key,
    state: Arc<CallbackState>,
}

impl TimerHandle {
    pub(crate) fn new(
        timer: Timer,
        shard: Arc<Shard>,
        key: Key,
        state: Arc<CallbackState>,
    ) -> TimerHandle {
        TimerHandle {
            timer,
            shard,
            key,
            state,
        }
    }

    /// Cancels the callback, in O(1): `true` if this call stopped it from running.
    ///
    /// `false` if it had already run (or started), been cancelled, or been
    /// handed back by [`Timer::shutdown`].
    ///
    /// A callback can be cancelled until the moment the driver starts it,
    /// so one callback can cancel another due in the same pass (a success
    /// cancelling its retry, both due) if that one has not run yet: the
    /// driver takes due callbacks out of the wheel up to 32 at a time, and
    /// claims each only just before running it.
    ///
    /// # Examples
    ///
    /// ```
    /// let timer = wheel::Timer::builder().manual().build().unwrap();
    /// let handle = timer.schedule(std::time::Duration::from_secs(1), || {});
    /// assert!(handle.cancel());
    /// assert_eq!(timer.stats().pending, 0);
    /// ```
    pub fn cancel(&self) -> bool {
        self.shard.cancel_callback(self.key, &self.state)
    }

    /// Whether the timer has started the callback. It may still be
    /// running on another thread.
    ///
    /// # Examples
    ///
    /// ```
    /// let timer = wheel::Timer::builder().manual().build().unwrap();
    /// let handle = timer.schedule(std::time::Duration::from_secs(1), || {});
    /// timer.advance(std::time::Duration::from_secs(1));
    /// assert!(handle.is_expired());
    /// ```
    pub fn is_expired(&self) -> bool {
        self.state.phase() == EXPIRED
    }

    /// Whether the callback will never be run by the timer: it was
    /// cancelled, or the timer shut down first.
    ///
    /// # Examples
    ///
    /// ```
    /// let timer = wheel::Timer::builder().manual().build().unwrap();
    /// let handle = timer.schedule(std::time::Duration::from_secs(1), || {});
    /// drop(timer.shutdown());
    /// assert!(handle.is_cancelled());
    /// ```
    pub fn is_cancelled(&self) -> bool {
        self.state.phase() == CANCELLED
    }

    /// When the callback is due (before rounding up to the timer's tick).
    ///
    /// # Examples
    ///
    /// ```
    /// let timer = wheel::Timer::builder().manual().build().unwrap();
    /// let at = timer.now() + std::time::Duration::from_secs(3);
    /// assert_eq!(timer.schedule_at(at, || {}).deadline(), at);
    /// ```
    pub fn deadline(&self) -> Instant {
        self.state.deadline()
    }

    /// The timer the callback was scheduled on.
    ///
    /// # Examples
    ///
    /// ```
    /// let timer = wheel::Timer::builder().manual().build().unwrap();
    /// let handle = timer.schedule(std::time::Duration::from_secs(1), || {});
    /// assert!(handle.timer().is_manual());
    /// ```
    pub fn timer(&self) -> &Timer {
        &self.timer
    }
}

impl std::fmt::Debug for TimerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The deadline as a duration from now on the timer's clock: an
        // `Instant`'s own `Debug` is the platform's raw clock reading.
        let (now, deadline) = (self.timer.now(), self.deadline());
        let mut debug = f.debug_struct("TimerHandle");
        match deadline.checked_duration_since(now) {
            Some(left) => debug.field("due_in", &left),
            None => debug.field("overdue_by", &(now - deadline)),
        };
        debug
            .field("expired", &self.is_expired())
            .field("cancelled", &self.is_cancelled())
            .finish()
    }
}
