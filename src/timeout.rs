//! [`Timeout`], and the [`timeout`]/[`timeout_at`] constructors.

use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use pin_project_lite::pin_project;
use tokio::runtime::Id;
use tokio::time::Instant;

use crate::driver::{registry, Deadline, Shard};
use crate::error::Elapsed;
use crate::sync::Arc;
use crate::Sleep;

/// Requires `future` to complete within `duration`, on the current runtime's
/// default timer.
///
/// The drop-in for `tokio::time::timeout`: the future is polled first, so one
/// that is ready at once wins even with a zero duration, and a future that
/// is ready at once never touches the timer. On expiry `Err(Elapsed)` is
/// returned and the future is not polled again; it is dropped with the
/// `Timeout` (or handed back by [`Timeout::into_inner`]), as tokio's is. A `duration` too long for `Instant::now() +
/// duration` to exist (`Duration::MAX`) means no deadline: the timeout
/// never expires and never touches the timer, as with tokio's.
///
/// Made inside a runtime's context, it belongs to that runtime's default
/// timer, and its deadline counts from that timer's clock from when it is
/// made (see [`sleep`](crate::sleep()) on the binding rule); it takes its
/// shard of that timer when it first waits.
///
/// # Panics
///
/// Polling the returned [`Timeout`] panics outside a tokio runtime (with
/// timers enabled) if the inner future is pending and the deadline has not
/// passed, and, after its timer has shut down, likewise: see [`Sleep`]'s
/// panics, and [`sleep`](crate::sleep()) on where the default timer comes
/// from. One whose runtime is gone before it first waits panics, due or
/// not, as tokio's does: the clock its deadline counts on went with it. To
/// get a shutdown as an error instead, race the future against
/// [`Sleep::checked`] (`tokio::select!`).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// assert_eq!(wheel::timeout(Duration::from_secs(1), async { 1 }).await, Ok(1));
///
/// let slow = wheel::sleep(Duration::from_secs(5));
/// assert!(wheel::timeout(Duration::from_secs(1), slow).await.is_err());
/// # }
/// ```
#[inline]
pub fn timeout<F: IntoFuture>(duration: Duration, future: F) -> Timeout<F::IntoFuture> {
    let (made_in, now) = registry::default_runtime_now();
    let mut timeout = Timeout::made_in(
        future.into_future(),
        made_in,
        None,
        now.checked_add(duration),
    );
    if made_in.is_none() {
        // Unbound (made outside any runtime, or in one with no timer):
        // `now` was the real clock's.
        timeout.delay.count_from_outside();
    }
    timeout
}

/// Requires `future` to complete before `deadline`; see [`timeout`].
///
/// # Panics
///
/// As [`timeout`]'s.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let deadline = wheel::Instant::now() + Duration::from_millis(50);
/// let out = wheel::timeout_at(deadline, std::future::pending::<()>()).await;
/// assert!(out.is_err());
/// assert_eq!(wheel::Instant::now(), deadline);
/// # }
/// ```
pub fn timeout_at<F: IntoFuture>(deadline: Instant, future: F) -> Timeout<F::IntoFuture> {
    let made_in = registry::default_runtime().ok();
    Timeout::made_in(future.into_future(), made_in, None, Some(deadline))
}

pin_project! {
    /// A future with a deadline; made by [`timeout`], [`timeout_at`] or a
    /// [`Timer`](crate::Timer).
    ///
    /// Outputs `Ok(value)` if the inner future completes first, else
    /// `Err(Elapsed)`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let t: wheel::Timeout<_> = wheel::timeout(Duration::from_secs(1), async { "done" });
    /// assert_eq!(t.await, Ok("done"));
    /// # }
    /// ```
    #[must_use = "futures do nothing unless you `.await` or poll them"]
    pub struct Timeout<T> {
        #[pin]
        value: T,
        delay: Sleep,
        // The runtime whose default timer it belongs to (made in its
        // context), until it first waits: its delay is then bound to this
        // thread's shard of that timer.
        made_in: Option<Id>,
        // The deadline, until the first wait sets it in the delay: a
        // timeout whose future is ready at once never converts it into the
        // timer's terms. `None` once set, or if there is none (a
        // `Duration::MAX`): the delay then never fires.
        until: Option<Instant>,
    }
}

impl<T> Timeout<T> {
    /// A timeout waiting on `delay`, whose deadline is set.
    pub(crate) fn new(value: T, delay: Sleep) -> Timeout<T> {
        Timeout {
            value,
            delay,
            made_in: None,
            until: None,
        }
    }

    /// A timeout due at `until` (never: `None`), on `shard` or, unbound
    /// (`None`), on the default timer of runtime `made_in`.
    pub(crate) fn made_in(
        value: T,
        made_in: Option<Id>,
        shard: Option<Arc<Shard>>,
        until: Option<Instant>,
    ) -> Timeout<T> {
        Timeout {
            value,
            delay: Sleep::at(shard, Deadline::NEVER),
            made_in,
            until,
        }
    }

    /// The inner future.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let t = wheel::timeout(std::time::Duration::from_secs(1), std::future::ready(3));
    /// let _inner: &std::future::Ready<i32> = t.get_ref();
    /// # }
    /// ```
    pub fn get_ref(&self) -> &T {
        &self.value
    }

    /// The inner future, mutably.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let mut t = wheel::timeout(std::time::Duration::from_secs(1), std::future::ready(3));
    /// let _inner: &mut std::future::Ready<i32> = t.get_mut();
    /// # }
    /// ```
    pub fn get_mut(&mut self) -> &mut T {
        &mut self.value
    }

    /// Gives up the deadline and returns the inner future.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let t = wheel::timeout(std::time::Duration::from_secs(1), std::future::ready(3));
    /// assert_eq!(t.into_inner().await, 3);
    /// # }
    /// ```
    pub fn into_inner(self) -> T {
        self.value
    }
}

/// The inner future, and the deadline before the first wait (the delay
/// holds none yet), the delay after it.
impl<T: std::fmt::Debug> std::fmt::Debug for Timeout<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut debug = f.debug_struct("Timeout");
        debug.field("value", &self.value);
        match &self.until {
            Some(deadline) => debug.field("deadline", deadline),
            None => debug.field("delay", &self.delay),
        };
        debug.finish()
    }
}

impl<T: Future> Future for Timeout<T> {
    type Output = Result<T::Output, Elapsed>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let me = self.project();
        let had_budget = tokio::task::coop::has_budget_remaining();
        if let Poll::Ready(value) = me.value.poll(cx) {
            return Poll::Ready(Ok(value));
        }
        if let Some(until) = me.until.take() {
            me.delay.reset_unregistered(until);
        }
        if me.delay.never_fires() {
            // No deadline (`Duration::MAX`): no timer is involved.
            return Poll::Pending;
        }
        if let Some(id) = me.made_in.take() {
            me.delay.bind_to(registry::shard_of(id), id);
        }
        // If the inner future spent the task's last unit of tokio's budget,
        // the delay is still looked at, without one (as tokio's `Timeout`
        // does): else a future that keeps the budget spent, without ever
        // completing, would never time out.
        let delay = if had_budget && !tokio::task::coop::has_budget_remaining() {
            me.delay.poll_unbudgeted(cx)
        } else {
            Pin::new(me.delay).poll(cx)
        };
        match delay {
            Poll::Ready(()) => Poll::Ready(Err(Elapsed::new())),
            Poll::Pending => Poll::Pending,
        }
    }
}
