//! A hierarchical timing wheel (Varghese & Lauck, 1987) driving tokio
//! futures, with `tokio::time`'s API.
//!
//! Servers keep a timeout per connection, per request, per retry: hundreds
//! of thousands of timers, nearly all cancelled before they fire. This crate
//! keeps them in a multi-level timing wheel whose start, cancel and reset are
//! O(1), whose entries live in one slab, and whose driver jumps from one
//! occupied slot to the next instead of ticking through empty ones.
//!
//! # Swapping `tokio::time` for `wheel`
//!
//! [`sleep`], [`sleep_until`], [`timeout`], [`timeout_at`], [`interval`],
//! [`interval_at`], [`Instant`] and [`error::Elapsed`] mirror `tokio::time`.
//! They use a default timer per tokio runtime (125 µs tick), and because that
//! timer waits on tokio's clock, tokio's paused clock
//! (`#[tokio::test(start_paused = true)]`, `tokio::time::pause`, `advance`,
//! auto-advance) drives it as it drives `tokio::time`: every timer completes
//! at the instant tokio's would, advances by fractions of a millisecond
//! included, and a cancelled one leaves nothing for auto-advance to jump
//! to.
//!
//! ```
//! use std::time::Duration;
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let start = wheel::Instant::now();
//! wheel::sleep(Duration::from_millis(50)).await;
//!
//! let answer = wheel::timeout(Duration::from_secs(1), async { 42 }).await;
//! assert_eq!(answer, Ok(42));
//!
//! let mut every = wheel::interval(Duration::from_millis(10));
//! every.tick().await;
//! every.tick().await;
//! assert_eq!(start.elapsed(), Duration::from_millis(60));
//! # }
//! ```
//!
//! # Explicit timers
//!
//! [`Timer::builder`] makes a timer with its own tick and slots per level;
//! its methods return the same futures. [`Timer::stats`] reports what is
//! pending, fired and cancelled, and the wheel's memory.
//!
//! On a multi-thread runtime a timer is split into shards
//! ([`Builder::shards`]), each a wheel behind its own lock, and each thread
//! registers in its own: workers creating and cancelling timeouts at once
//! do not wait on one another. A wheel that has held over 65,536 timers
//! frees the memory it lets go of on a thread of the crate's, `wheel-free`
//! (started once, by the first such wheel), so that no call waits while
//! the allocator hands tens of megabytes back to the system.
//!
//! # Callbacks, shutdown and capacity
//!
//! [`Timer::schedule`] runs a closure at a deadline with no task and no
//! future, returning a [`TimerHandle`] that cancels it (Netty's
//! `newTimeout`). [`Timer::shutdown`] stops a timer and hands back what never
//! ran ([`Unfired`]); [`Builder::max_pending`] caps the pending timers, and
//! the `try_*` constructors return an [`error::Error`] instead of panicking.
//! A task waiting on [`Sleep::checked`] gets a shutdown as an error too.
//!
//! # A manual clock
//!
//! [`Builder::manual`] makes a timer whose clock moves only when
//! [`Timer::advance`] is called, on any runtime flavor or none: inject one
//! into the code under test and step it by hand. [`TestClock`] puts a
//! whole runtime's default timer on such a clock, multi-thread runtimes
//! included (tokio's paused clock needs a current-thread one), with an
//! optional auto-advance to the next deadline when the runtime is idle.
//!
//! # Keyed expirations
//!
//! [`DelayQueue`] holds values that come back, as a `futures::Stream` of
//! [`Expired`](delay_queue::Expired) entries, once their deadline passes; each insert returns a
//! [`Key`](delay_queue::Key) that resets or removes the entry in O(1): the idle-connection
//! reaper's data structure, with tokio-util's `DelayQueue` API.
//!
//! # hyper and precise timers
//!
//! With the cargo feature `precise`, [`Builder::precise`] fires timers about
//! a tenth of a millisecond late on Linux, with a 50 µs tick (tens of
//! microseconds with no [`slack`](Builder::slack)); without it, `build`
//! says which feature is missing. With the cargo feature `hyper`, [`Timer`] implements
//! `hyper::rt::Timer`: pass one to hyper's connection builders
//! (`.timer(timer)`) and their timeouts, such as an HTTP/1 server's
//! `header_read_timeout`, run on the wheel. hyper then reads the time from
//! the timer (so a [`manual`](Builder::manual) clock drives hyper too), and
//! resetting one of its sleeps moves the existing wheel entry instead of
//! allocating a new sleep.
//!
//! # tower
//!
//! With the `tower` feature, [`tower::TimeoutLayer`] and [`tower::Timeout`]
//! are `tower::timeout`'s, on the wheel: request timeouts under axum, tonic
//! or tower-http, whose errors still downcast to
//! `tower::timeout::error::Elapsed`.
//!
//! # Guarantees
//!
//! - Never early: deadlines round *up* to the next tick, and a timer fires
//!   only once the clock has reached its tick's start.
//! - At most one tick plus scheduling late (tokio's timer, which the driver
//!   waits on, adds up to 1 ms of its own rounding).
//! - Dropping a pending future removes its entry: [`Stats::pending`] goes
//!   back to zero.
//! - Each runtime has its own default timer; runtimes never share a wheel.
//! - When a timer shuts down (by hand or with its runtime), its pending
//!   futures panic with a message saying so when polled, instead of hanging
//!   or completing early ([`Sleep::checked`] returns the error instead).
//!
//! The README maps each promise to the tests that prove it.

#![deny(missing_docs)]
#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(missing_debug_implementations, rust_2018_idioms, unreachable_pub)]

mod builder;
pub mod delay_queue;
mod driver;
pub mod error;
mod handle;
#[cfg(feature = "hyper")]
mod hyper;
mod interval;
mod sleep;
mod stats;
mod sync;
// tokio has no park hooks under `cfg(loom)`.
#[cfg(not(loom))]
mod test_clock;
mod timeout;
mod timer;
#[cfg(feature = "tower")]
pub mod tower;
mod unfired;
mod wheel;

pub use builder::Builder;
#[doc(inline)]
pub use delay_queue::DelayQueue;
pub use handle::TimerHandle;
pub use interval::{interval, interval_at, Interval, MissedTickBehavior};
pub use sleep::{sleep, sleep_until, CheckedSleep, Sleep};
pub use stats::Stats;
/// `std::time::Duration`, re-exported as `tokio::time` does, so that
/// `use tokio::time::{sleep, Duration}` becomes `use wheel::{sleep, Duration}`.
pub use std::time::Duration;
#[cfg(not(loom))]
pub use test_clock::{TestClock, TestRuntime};
pub use timeout::{timeout, timeout_at, Timeout};
pub use timer::Timer;
/// A measurement of a monotonic clock: `tokio::time::Instant`, re-exported so
/// that tokio's paused clock applies to both crates.
pub use tokio::time::Instant;
pub use unfired::{Unfired, UnfiredCallback};

/// Not public API: the bare wheel, exposed only so that `benches/wheel.rs`
/// can measure it without the driver.
///
/// It may change or vanish in any release; do not use it.
#[doc(hidden)]
pub mod __private {
    pub use crate::wheel::{Key, Wheel};
}

/// The time on the current runtime's default timer's clock.
///
/// That is a [`TestRuntime`]'s test clock inside one, and tokio's clock
/// (`Instant::now()`, paused or not) everywhere else.
///
/// Under a `TestRuntime`, `Instant::now()` and `Instant::elapsed()` keep
/// tokio's time (real time, unless its builder paused tokio's clock) while
/// the runtime's timers wait on the test clock: count
/// deadlines from this instead, as `wheel::sleep_until(wheel::now() + d)`.
/// Inside a runtime that has no default timer yet, reading it creates one,
/// as the first `wheel::sleep` would.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
///
/// let rt = wheel::TestClock::new()
///     .auto_advance(true)
///     .build(tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all())
///     .unwrap();
/// rt.block_on(async {
///     let start = wheel::now();
///     wheel::sleep_until(start + Duration::from_secs(3600)).await;
///     assert_eq!(wheel::now() - start, Duration::from_secs(3600));
///     // The real clock has not moved an hour.
///     assert!(wheel::Instant::now() < start + Duration::from_secs(3600));
/// });
/// ```
pub fn now() -> Instant {
    match driver::registry::default_binding() {
        Ok((_, now)) => now,
        Err(_) => Instant::now(),
    }
}

/// The default timer's tick, and [`Builder`]'s default: an eighth of tokio's
/// 1 ms. The alarm waits on tokio's timer, which rounds up to its own
/// millisecond grid. The wheel's grid starts on tokio's where tokio's
/// driver shows where that lies (`driver/grid.rs`), and any tick dividing a
/// millisecond then fires at tokio's instant. Where it does not (tokio's
/// alternative timer; a search another worker overtook), the two roundings
/// add up: with a 1 ms tick half a millisecond later than `tokio::time` on
/// average, while with 125 µs the wheel's rounding crosses one of tokio's
/// millisecond boundaries only one time in eight.
const DEFAULT_TICK: Duration = Duration::from_micros(125);

/// The longest wait a duration gives a sleep, an interval's period or a
/// callback: about 30 years, tokio's cap (its `safe_delay`), so that
/// `sleep(Duration::MAX)` and `sleep(100 years)` both end 30 years ahead,
/// as they do with `tokio::time`. (A `timeout` whose deadline overflows
/// `Instant` has none instead, as tokio's does.)
const MAX_DELAY: Duration = Duration::from_secs(86_400 * 365 * 30);

/// `duration`, cut to [`MAX_DELAY`].
fn capped(duration: Duration) -> Duration {
    duration.min(MAX_DELAY)
}

/// `now + duration`, or [`MAX_DELAY`] after `now` if that overflows:
/// counted from `now`, which callers take from the clock their deadline is
/// on (a timer's, an interval's previous tick), never from `Instant::now()`,
/// which a manual timer's clock may be far ahead of.
fn deadline_after(now: Instant, duration: Duration) -> Instant {
    now.checked_add(duration)
        .or_else(|| now.checked_add(MAX_DELAY))
        .unwrap_or(now)
}

/// The README's examples, compiled and run as doctests so they stay true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
