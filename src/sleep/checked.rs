//! [`Sleep::checked`] and [`Sleep::poll_checked`]: waiting on a sleep with
//! the timer's refusal (shut down, at capacity) as a value, not a panic.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use super::Sleep;
use crate::error::Error;

impl Sleep {
    /// Waits for the sleep as `.await` does, but reports a timer that can
    /// no longer fire it as an `Err` instead of panicking.
    ///
    /// Completes with `Ok(())` at the deadline, exactly when the sleep
    /// itself would (never early). Where polling the sleep would panic
    /// (see [`Sleep`]'s panics) it completes with an
    /// [`Error`](crate::error::Error) instead: for which
    /// [`is_shutdown`](Error::is_shutdown) is true if the timer shut down
    /// ([`Timer::shutdown`](crate::Timer::shutdown), or its runtime shut
    /// down) before the deadline, and
    /// [`is_at_capacity`](Error::is_at_capacity) if its first poll found the
    /// timer at its [`max_pending`](crate::Builder::max_pending) limit. A
    /// shutdown wakes every pending sleep, so a task waiting here learns of
    /// it at once. A sleep of the default timer polled outside any runtime
    /// still panics (that is a misuse, not a shutdown).
    ///
    /// The sleep is borrowed, not consumed: after an `Err` it is still
    /// pending (polling it again reports the error again, or, once its
    /// deadline has passed, completes); after `Ok` it can be
    /// [`reset`](Sleep::reset).
    ///
    /// For a graceful shutdown, wait on `sleep.checked()` where you would
    /// wait on `sleep`; for a timeout, `select!` the work against it.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let timer = wheel::Timer::builder().build().unwrap();
    /// let waiter = tokio::spawn({
    ///     let mut sleep = timer.sleep(Duration::from_secs(60));
    ///     async move { sleep.checked().await }
    /// });
    /// tokio::task::yield_now().await; // the waiter registers its sleep
    /// timer.shutdown();
    /// let error = waiter.await.unwrap().unwrap_err();
    /// assert!(error.is_shutdown());
    ///
    /// // On a running timer it is the sleep.
    /// let start = wheel::Instant::now();
    /// let other = wheel::Timer::builder().build().unwrap();
    /// other.sleep(Duration::from_secs(1)).checked().await.unwrap();
    /// assert_eq!(start.elapsed(), Duration::from_secs(1));
    /// # }
    /// ```
    pub fn checked(&mut self) -> CheckedSleep<'_> {
        CheckedSleep { sleep: self }
    }

    /// Polls the sleep as [`Future::poll`] does, with the timer's refusal
    /// as an `Err` instead of a panic: see [`checked`](Sleep::checked).
    ///
    /// For hand-written futures and `poll_fn`. Completing (with `Ok` or
    /// `Err`) spends one unit of tokio's cooperative budget, as `poll` does.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::pin::Pin;
    /// use std::time::Duration;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let timer = wheel::Timer::builder().build().unwrap();
    /// let mut sleep = timer.sleep(Duration::from_millis(10));
    /// let done = std::future::poll_fn(|cx| Pin::new(&mut sleep).poll_checked(cx)).await;
    /// assert!(done.is_ok());
    /// # }
    /// ```
    pub fn poll_checked(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        let result = std::task::ready!(self.get_mut().poll_result(cx));
        std::task::ready!(tokio::task::coop::poll_proceed(cx)).made_progress();
        Poll::Ready(result)
    }
}

/// A [`Sleep`] that reports its timer's shutdown as an error; made by
/// [`Sleep::checked`].
///
/// Outputs `Ok(())` at the sleep's deadline, or an
/// [`Error`](crate::error::Error) if the timer can no longer fire it.
///
/// # Examples
///
/// ```
/// let timer = wheel::Timer::builder().manual().build().unwrap();
/// let mut sleep = timer.sleep(std::time::Duration::from_secs(1));
/// timer.shutdown();
/// let checked = sleep.checked();
/// assert!(format!("{checked:?}").starts_with("CheckedSleep"));
/// let error = futures::executor::block_on(checked).unwrap_err();
/// assert!(error.is_shutdown());
/// ```
#[must_use = "futures do nothing unless you `.await` or poll them"]
#[derive(Debug)]
pub struct CheckedSleep<'a> {
    sleep: &'a mut Sleep,
}

impl Future for CheckedSleep<'_> {
    type Output = Result<(), Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        Pin::new(&mut *self.sleep).poll_checked(cx)
    }
}
