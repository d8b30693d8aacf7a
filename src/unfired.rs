//! [`Unfired`]: what [`Timer::shutdown`](crate::Timer::shutdown) hands back.

use tokio::time::Instant;

use crate::driver::Leftovers;

/// What a timer had pending when [`Timer::shutdown`](crate::Timer::shutdown)
/// stopped it (Netty's `stop()`).
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
/// let counter = runs.clone();
/// timer.schedule(Duration::from_secs(9), move || {
///     counter.fetch_add(1, Ordering::SeqCst);
/// });
///
/// // Flush the work that never ran, now, instead of losing it.
/// for callback in timer.shutdown().callbacks {
///     callback.run();
/// }
/// assert_eq!(runs.load(Ordering::SeqCst), 1);
/// ```
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct Unfired {
    /// The callbacks that were scheduled and had not run, in deadline order
    /// (those with one deadline in the order they were scheduled).
    pub callbacks: Vec<UnfiredCallback>,
    /// How many sleeps were registered and had not fired.
    ///
    /// They are woken; polling one panics (waiting on
    /// [`Sleep::checked`](crate::Sleep::checked) returns an error instead),
    /// unless its deadline has passed by then, when it completes (and
    /// counts in [`Stats::fired`](crate::Stats::fired) as well as here).
    pub sleeps: usize,
}

impl Unfired {
    pub(crate) fn new(leftovers: Leftovers) -> Unfired {
        Unfired {
            callbacks: leftovers
                .callbacks
                .into_iter()
                .map(|((deadline, _, _), run)| UnfiredCallback { deadline, run })
                .collect(),
            sleeps: leftovers.sleeps,
        }
    }
}

/// A callback that a shutdown stopped before it ran: run it, or drop it.
///
/// # Examples
///
/// ```
/// let timer = wheel::Timer::builder().manual().build().unwrap();
/// let at = timer.now() + std::time::Duration::from_secs(1);
/// timer.schedule_at(at, || println!("flushed"));
/// let callback = timer.shutdown().callbacks.pop().unwrap();
/// assert_eq!(callback.deadline(), at);
/// callback.run();
/// ```
pub struct UnfiredCallback {
    deadline: Instant,
    run: Box<dyn FnOnce() + Send>,
}

impl UnfiredCallback {
    /// When it was due (before rounding up to the timer's tick).
    ///
    /// # Examples
    ///
    /// ```
    /// let timer = wheel::Timer::builder().manual().build().unwrap();
    /// let at = timer.now() + std::time::Duration::from_secs(1);
    /// timer.schedule_at(at, || {});
    /// let callback = timer.shutdown().callbacks.pop().unwrap();
    /// assert_eq!(callback.deadline(), at);
    /// ```
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Runs it now, on this thread.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use std::sync::Arc;
    ///
    /// let timer = wheel::Timer::builder().manual().build().unwrap();
    /// let ran = Arc::new(AtomicBool::new(false));
    /// let flag = ran.clone();
    /// timer.schedule(std::time::Duration::from_secs(1), move || flag.store(true, Ordering::SeqCst));
    /// timer.shutdown().callbacks.pop().unwrap().run();
    /// assert!(ran.load(Ordering::SeqCst));
    /// ```
    pub fn run(self) {
        (self.run)();
    }
}

impl std::fmt::Debug for UnfiredCallback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UnfiredCallback")
            .field("deadline", &self.deadline)
            .finish_non_exhaustive()
    }
}
