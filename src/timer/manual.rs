//! A manual timer's clock: [`Timer::advance`], [`Timer::advance_to`] and
//! [`Timer::is_manual`].

use std::time::Duration;

use tokio::time::Instant;

use super::Timer;

impl Timer {
    /// Moves a [`manual`](crate::Builder::manual) timer's clock forward by
    /// `duration`, firing everything due by then.
    ///
    /// It fires tick by tick (what is due in one tick fires together,
    /// callbacks in an unspecified order, most often the order they were
    /// scheduled), before it returns: due sleeps have woken their tasks (which
    /// run when their executor polls them) and due callbacks have run.
    ///
    /// The clock steps from one expiration to the next, so a callback that
    /// reads [`now`](Timer::now) sees the tick it was due at. Called from
    /// inside one of this timer's callbacks, `advance` moves the clock in one
    /// step and returns at once; the timer fires what became due as soon as
    /// the callback returns.
    ///
    /// # Panics
    ///
    /// Panics if the timer is not manual.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::atomic::{AtomicU32, Ordering};
    /// use std::sync::Arc;
    /// use std::time::Duration;
    ///
    /// let timer = wheel::Timer::builder().manual().build().unwrap();
    /// let runs = Arc::new(AtomicU32::new(0));
    /// for secs in 1..=3 {
    ///     let runs = runs.clone();
    ///     timer.schedule(Duration::from_secs(secs), move || {
    ///         runs.fetch_add(1, Ordering::SeqCst);
    ///     });
    /// }
    /// timer.advance(Duration::from_secs(2));
    /// assert_eq!(runs.load(Ordering::SeqCst), 2);
    /// ```
    #[track_caller]
    pub fn advance(&self, duration: Duration) {
        self.advance_to(crate::deadline_after(self.now(), duration));
    }

    /// Moves a [`manual`](crate::Builder::manual) timer's clock to `deadline` (a
    /// deadline in the past leaves it where it is) and fires everything due;
    /// see [`advance`](Timer::advance).
    ///
    /// # Panics
    ///
    /// Panics if the timer is not manual.
    ///
    /// # Examples
    ///
    /// ```
    /// let timer = wheel::Timer::builder().manual().build().unwrap();
    /// let start = timer.now();
    /// timer.advance_to(start + std::time::Duration::from_secs(1));
    /// assert_eq!(timer.now() - start, std::time::Duration::from_secs(1));
    /// ```
    #[track_caller]
    pub fn advance_to(&self, deadline: Instant) {
        self.driver.advance_to(deadline);
    }

    /// Whether this timer has a [`manual`](crate::Builder::manual) clock.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(wheel::Timer::builder().manual().build().unwrap().is_manual());
    /// ```
    pub fn is_manual(&self) -> bool {
        self.driver.is_manual()
    }
}
