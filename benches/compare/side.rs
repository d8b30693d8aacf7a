//! "Which timer": the one trait every workload is generic over, so tokio and
//! wheel run exactly the same code and differ only in these calls.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use tokio::time::Instant;

/// A timer implementation under test.
pub(crate) trait Side: 'static {
    /// The table's column name.
    const NAME: &'static str;
    /// The sleep future. `Send`, so the multi-thread workloads can spawn it.
    type Sleep: Future<Output = ()> + Send + 'static;
    /// The timeout error.
    type Elapsed: std::fmt::Debug;

    fn sleep(duration: Duration) -> Self::Sleep;
    fn sleep_until(deadline: Instant) -> Self::Sleep;
    fn reset(sleep: Pin<&mut Self::Sleep>, deadline: Instant);
    fn timeout<F: Future>(
        duration: Duration,
        future: F,
    ) -> impl Future<Output = Result<F::Output, Self::Elapsed>>;
    /// Timers the implementation reports as pending, if it can tell: a check
    /// (outside timing) that a workload registered what it says it did.
    fn pending() -> Option<usize>;
}

/// `tokio::time`.
pub(crate) enum Tokio {}

/// `wheel`'s free functions: the runtime's default timer.
pub(crate) enum Wheel {}

impl Side for Tokio {
    const NAME: &'static str = "tokio";
    type Sleep = tokio::time::Sleep;
    type Elapsed = tokio::time::error::Elapsed;

    fn sleep(duration: Duration) -> Self::Sleep {
        tokio::time::sleep(duration)
    }

    fn sleep_until(deadline: Instant) -> Self::Sleep {
        tokio::time::sleep_until(deadline)
    }

    fn reset(sleep: Pin<&mut Self::Sleep>, deadline: Instant) {
        sleep.reset(deadline);
    }

    fn timeout<F: Future>(
        duration: Duration,
        future: F,
    ) -> impl Future<Output = Result<F::Output, Self::Elapsed>> {
        tokio::time::timeout(duration, future)
    }

    fn pending() -> Option<usize> {
        // tokio has no stable way to count registered timers.
        None
    }
}

impl Side for Wheel {
    const NAME: &'static str = "wheel";
    type Sleep = wheel::Sleep;
    type Elapsed = wheel::error::Elapsed;

    fn sleep(duration: Duration) -> Self::Sleep {
        wheel::sleep(duration)
    }

    fn sleep_until(deadline: Instant) -> Self::Sleep {
        wheel::sleep_until(deadline)
    }

    fn reset(sleep: Pin<&mut Self::Sleep>, deadline: Instant) {
        sleep.reset(deadline);
    }

    fn timeout<F: Future>(
        duration: Duration,
        future: F,
    ) -> impl Future<Output = Result<F::Output, Self::Elapsed>> {
        wheel::timeout(duration, future)
    }

    fn pending() -> Option<usize> {
        Some(wheel::Timer::current().stats().pending)
    }
}
