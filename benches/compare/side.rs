//! "Which timer": the one trait every workload is generic over, so each
//! column runs exactly the same code and differs only in these calls.
//!
//! Four columns:
//!
//! - `tokio`: `tokio::time`, on tokio's default timer.
//! - `tokio-alt`: `tokio::time` on a multi-thread runtime built with
//!   `enable_alt_timer()` (per-worker wheels; needs `--cfg tokio_unstable`,
//!   and has no effect on a current-thread runtime, so it runs only in the
//!   multi-thread groups).
//! - `wheel`: `wheel`'s free functions, on the runtime's default timer
//!   (what `use wheel::{sleep, timeout}` gives a user).
//! - `timer`: an explicit `wheel::Timer`, built once per runtime with
//!   `Timer::builder().build()`, and `timer.sleep(d)` (no default-timer
//!   lookup per call).

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use tokio::time::Instant;

/// A timer implementation under test. Every column's calls are
/// `#[inline]`: without it, whether a call is inlined into the timed loop
/// depends on how the compiler happens to split the bench into codegen units,
/// which moved `timeout_ready` by 40 instructions a call between two builds
/// that changed nothing on its path.
pub(crate) trait Side: 'static {
    /// The table's column.
    const COLUMN: Column;
    /// What each call needs besides its arguments: nothing, or the explicit
    /// timer. Made once per runtime, inside it, by [`Side::timer`].
    type Timer: Clone + Send + Sync + 'static;
    /// The sleep future. `Send`, so the multi-thread workloads can spawn it.
    type Sleep: Future<Output = ()> + Send + 'static;
    /// The timeout error.
    type Elapsed: std::fmt::Debug + Send;

    /// Called once per run, inside the runtime, before any task starts.
    fn timer() -> Self::Timer;
    fn sleep(timer: &Self::Timer, duration: Duration) -> Self::Sleep;
    fn sleep_until(timer: &Self::Timer, deadline: Instant) -> Self::Sleep;
    fn reset(sleep: Pin<&mut Self::Sleep>, deadline: Instant);
    fn timeout<F: Future + Send>(
        timer: &Self::Timer,
        duration: Duration,
        future: F,
    ) -> impl Future<Output = Result<F::Output, Self::Elapsed>> + Send;
    /// Timers the implementation reports as pending, if it can tell: a check
    /// (outside timing) that a workload registered what it says it did.
    fn pending(timer: &Self::Timer) -> Option<usize>;
}

/// The table's columns, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Column {
    Tokio = 0,
    TokioAlt = 1,
    Wheel = 2,
    Timer = 3,
}

impl Column {
    pub(crate) const ALL: [Column; 4] = [
        Column::Tokio,
        Column::TokioAlt,
        Column::Wheel,
        Column::Timer,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Column::Tokio => "tokio",
            Column::TokioAlt => "tokio-alt",
            Column::Wheel => "wheel",
            Column::Timer => "timer",
        }
    }

    /// Whether this build can run the column at all: `tokio-alt` needs
    /// `RUSTFLAGS="--cfg tokio_unstable"`.
    pub(crate) fn built(self) -> bool {
        self != Column::TokioAlt || cfg!(tokio_unstable)
    }
}

/// Makes `builder` use tokio's alternative timer, for the `tokio-alt`
/// column: only a `--cfg tokio_unstable` build has it.
#[cfg(tokio_unstable)]
pub(crate) fn alt_timer(builder: &mut tokio::runtime::Builder) {
    builder.enable_alt_timer();
}

/// See above: never called in a build without the column.
#[cfg(not(tokio_unstable))]
pub(crate) fn alt_timer(_: &mut tokio::runtime::Builder) {
    unreachable!("tokio-alt runs only when built with --cfg tokio_unstable")
}

/// The column named `name`, if there is one.
pub(crate) fn column_named(name: &str) -> Option<Column> {
    Column::ALL.into_iter().find(|c| c.name() == name)
}

/// The columns named in a `--columns` list (`tokio,wheel`).
pub(crate) fn columns_named(list: &str) -> Result<Vec<Column>, String> {
    list.split(',')
        .map(|name| column_named(name).ok_or_else(|| format!("no column named {name:?}")))
        .collect()
}

/// Width of a value cell in the benches' tables.
pub(crate) const VALUE: usize = 9;
/// Width of a ratio cell.
pub(crate) const RATIO: usize = 11;
/// The ratios every table ends with: a name, and the two columns divided.
pub(crate) const RATIOS: [(&str, Column, Column); 3] = [
    ("wheel/tokio", Column::Wheel, Column::Tokio),
    ("timer/tokio", Column::Timer, Column::Tokio),
    ("wheel/alt", Column::Wheel, Column::TokioAlt),
];

/// Prints a table's header: three label columns (name, width), then one
/// per timer column and one per ratio, as Markdown.
pub(crate) fn print_header(labels: [(&str, usize); 3]) {
    print!("|");
    for (name, width) in labels {
        print!(" {name:<width$} |");
    }
    for column in Column::ALL {
        print!(" {:>VALUE$} |", column.name());
    }
    for (name, _, _) in RATIOS {
        print!(" {name:>RATIO$} |");
    }
    println!();
    print!("|");
    for (_, width) in labels {
        print!("{}|", "-".repeat(width + 2));
    }
    for _ in Column::ALL {
        print!("{}:|", "-".repeat(VALUE + 1));
    }
    for _ in RATIOS {
        print!("{}:|", "-".repeat(RATIO + 1));
    }
    println!();
}

/// `tokio::time`.
pub(crate) enum Tokio {}

/// `tokio::time` on tokio's alternative timer (the runtime decides; the
/// calls are the same as [`Tokio`]'s).
pub(crate) enum TokioAlt {}

/// `wheel`'s free functions: the runtime's default timer.
pub(crate) enum Wheel {}

/// An explicit `wheel::Timer`.
pub(crate) enum WheelTimer {}

impl Side for Tokio {
    const COLUMN: Column = Column::Tokio;
    type Timer = ();
    type Sleep = tokio::time::Sleep;
    type Elapsed = tokio::time::error::Elapsed;

    fn timer() {}

    #[inline]
    fn sleep(_: &(), duration: Duration) -> Self::Sleep {
        tokio::time::sleep(duration)
    }

    #[inline]
    fn sleep_until(_: &(), deadline: Instant) -> Self::Sleep {
        tokio::time::sleep_until(deadline)
    }

    #[inline]
    fn reset(sleep: Pin<&mut Self::Sleep>, deadline: Instant) {
        sleep.reset(deadline);
    }

    #[inline]
    fn timeout<F: Future + Send>(
        _: &(),
        duration: Duration,
        future: F,
    ) -> impl Future<Output = Result<F::Output, Self::Elapsed>> + Send {
        tokio::time::timeout(duration, future)
    }

    fn pending(_: &()) -> Option<usize> {
        // tokio has no stable way to count registered timers.
        None
    }
}

impl Side for TokioAlt {
    const COLUMN: Column = Column::TokioAlt;
    type Timer = ();
    type Sleep = tokio::time::Sleep;
    type Elapsed = tokio::time::error::Elapsed;

    fn timer() {}

    #[inline]
    fn sleep(timer: &(), duration: Duration) -> Self::Sleep {
        Tokio::sleep(timer, duration)
    }

    #[inline]
    fn sleep_until(timer: &(), deadline: Instant) -> Self::Sleep {
        Tokio::sleep_until(timer, deadline)
    }

    #[inline]
    fn reset(sleep: Pin<&mut Self::Sleep>, deadline: Instant) {
        Tokio::reset(sleep, deadline);
    }

    #[inline]
    fn timeout<F: Future + Send>(
        timer: &(),
        duration: Duration,
        future: F,
    ) -> impl Future<Output = Result<F::Output, Self::Elapsed>> + Send {
        Tokio::timeout(timer, duration, future)
    }

    fn pending(timer: &()) -> Option<usize> {
        Tokio::pending(timer)
    }
}

impl Side for Wheel {
    const COLUMN: Column = Column::Wheel;
    type Timer = ();
    type Sleep = wheel::Sleep;
    type Elapsed = wheel::error::Elapsed;

    fn timer() {}

    #[inline]
    fn sleep(_: &(), duration: Duration) -> Self::Sleep {
        wheel::sleep(duration)
    }

    #[inline]
    fn sleep_until(_: &(), deadline: Instant) -> Self::Sleep {
        wheel::sleep_until(deadline)
    }

    #[inline]
    fn reset(sleep: Pin<&mut Self::Sleep>, deadline: Instant) {
        sleep.reset(deadline);
    }

    #[inline]
    fn timeout<F: Future + Send>(
        _: &(),
        duration: Duration,
        future: F,
    ) -> impl Future<Output = Result<F::Output, Self::Elapsed>> + Send {
        wheel::timeout(duration, future)
    }

    fn pending(_: &()) -> Option<usize> {
        Some(wheel::Timer::current().stats().pending)
    }
}

impl Side for WheelTimer {
    const COLUMN: Column = Column::Timer;
    type Timer = wheel::Timer;
    type Sleep = wheel::Sleep;
    type Elapsed = wheel::error::Elapsed;

    fn timer() -> wheel::Timer {
        wheel::Timer::builder()
            .build()
            .expect("a default-geometry timer")
    }

    #[inline]
    fn sleep(timer: &wheel::Timer, duration: Duration) -> Self::Sleep {
        timer.sleep(duration)
    }

    #[inline]
    fn sleep_until(timer: &wheel::Timer, deadline: Instant) -> Self::Sleep {
        timer.sleep_until(deadline)
    }

    #[inline]
    fn reset(sleep: Pin<&mut Self::Sleep>, deadline: Instant) {
        sleep.reset(deadline);
    }

    #[inline]
    fn timeout<F: Future + Send>(
        timer: &wheel::Timer,
        duration: Duration,
        future: F,
    ) -> impl Future<Output = Result<F::Output, Self::Elapsed>> + Send {
        timer.timeout(duration, future)
    }

    fn pending(timer: &wheel::Timer) -> Option<usize> {
        Some(timer.stats().pending)
    }
}
