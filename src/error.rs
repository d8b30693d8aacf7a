//! Error types.
//!
//! Errors are opaque structs, as in `tokio::time::error`: match on them with
//! their `is_*` predicates, print them with `Display`.

use std::fmt;

/// The error returned by [`Timeout`](crate::Timeout) when its deadline passes
/// before the inner future completes.
///
/// Its message is the same as `tokio::time::error::Elapsed`'s, but it is
/// not that type (tokio's has no public constructor): an error type with
/// `impl From<tokio::time::error::Elapsed>` needs the same impl for this
/// one, or a `map_err` where the timeout is awaited, for `?` to compile.
/// Like tokio's, it converts into an [`std::io::Error`] of kind `TimedOut`.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let err = wheel::timeout(Duration::from_millis(5), std::future::pending::<()>())
///     .await
///     .unwrap_err();
/// assert_eq!(err.to_string(), "deadline has elapsed");
/// # }
/// ```
///
/// An error type of your own, converted into for `?`:
///
/// ```
/// # use std::time::Duration;
/// #[derive(Debug)]
/// enum MyError {
///     Timeout,
/// }
/// impl From<wheel::error::Elapsed> for MyError {
///     fn from(_: wheel::error::Elapsed) -> MyError {
///         MyError::Timeout
///     }
/// }
///
/// async fn fetch() -> Result<u32, MyError> {
///     let answer = wheel::timeout(Duration::from_secs(1), async { 42 }).await?;
///     Ok(answer)
/// }
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// # assert_eq!(fetch().await.unwrap(), 42);
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Elapsed(());

impl Elapsed {
    pub(crate) fn new() -> Elapsed {
        Elapsed(())
    }
}

impl fmt::Display for Elapsed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("deadline has elapsed")
    }
}

impl std::error::Error for Elapsed {}

impl From<Elapsed> for std::io::Error {
    fn from(_: Elapsed) -> std::io::Error {
        std::io::ErrorKind::TimedOut.into()
    }
}

/// Why a [`Timer`](crate::Timer) could not be built.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let err = wheel::Timer::builder().slots_per_level(100).build().unwrap_err();
/// assert!(err.is_invalid_slots());
/// assert!(err.to_string().contains("power of two"));
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildError {
    kind: BuildErrorKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum BuildErrorKind {
    ZeroTick,
    TickTooLong(std::time::Duration),
    Slots(usize),
    Shards(usize),
    ShardsWithLimit(usize),
    NoRuntime,
    RuntimeShutDown,
    TimersDisabled,
    ZeroMaxPending,
    PreciseUnsupported(String),
    #[cfg(feature = "precise")]
    IoDisabled,
}

impl BuildError {
    pub(crate) fn zero_tick() -> BuildError {
        BuildError {
            kind: BuildErrorKind::ZeroTick,
        }
    }

    pub(crate) fn tick_too_long(tick: std::time::Duration) -> BuildError {
        BuildError {
            kind: BuildErrorKind::TickTooLong(tick),
        }
    }

    pub(crate) fn slots(slots: usize) -> BuildError {
        BuildError {
            kind: BuildErrorKind::Slots(slots),
        }
    }

    pub(crate) fn shards(shards: usize) -> BuildError {
        BuildError {
            kind: BuildErrorKind::Shards(shards),
        }
    }

    pub(crate) fn shards_with_limit(shards: usize) -> BuildError {
        BuildError {
            kind: BuildErrorKind::ShardsWithLimit(shards),
        }
    }

    pub(crate) fn no_runtime() -> BuildError {
        BuildError {
            kind: BuildErrorKind::NoRuntime,
        }
    }

    pub(crate) fn runtime_shut_down() -> BuildError {
        BuildError {
            kind: BuildErrorKind::RuntimeShutDown,
        }
    }

    pub(crate) fn timers_disabled() -> BuildError {
        BuildError {
            kind: BuildErrorKind::TimersDisabled,
        }
    }

    pub(crate) fn zero_max_pending() -> BuildError {
        BuildError {
            kind: BuildErrorKind::ZeroMaxPending,
        }
    }

    pub(crate) fn precise_unsupported(why: impl Into<String>) -> BuildError {
        BuildError {
            kind: BuildErrorKind::PreciseUnsupported(why.into()),
        }
    }

    #[cfg(feature = "precise")]
    pub(crate) fn io_disabled() -> BuildError {
        BuildError {
            kind: BuildErrorKind::IoDisabled,
        }
    }

    /// [`Builder::precise`](crate::Builder::precise) cannot be had here.
    ///
    /// The crate was built without the cargo feature `precise` (the message
    /// names it), or this is not Linux, or the timer is
    /// [`manual`](crate::Builder::manual) (its time moves only when told
    /// to), or the kernel refused a `timerfd`. The message says which. This
    /// predicate exists with or without the feature.
    ///
    /// # Examples
    ///
    /// ```
    /// let error = wheel::Timer::builder().manual().precise().build().unwrap_err();
    /// assert!(error.is_precise_unsupported());
    /// ```
    pub fn is_precise_unsupported(&self) -> bool {
        matches!(self.kind, BuildErrorKind::PreciseUnsupported(_))
    }

    /// A [`precise`](crate::Builder::precise) timer's runtime has no IO
    /// driver (cargo feature `precise`).
    ///
    /// The timer's `timerfd` is registered with that driver: build the
    /// runtime with `enable_io()` or `enable_all()`. Only with the cargo
    /// feature `precise`, without which no build gets this far.
    ///
    /// # Examples
    ///
    /// ```
    /// let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    /// let error = wheel::Timer::builder()
    ///     .runtime(runtime.handle().clone())
    ///     .precise()
    ///     .build()
    ///     .unwrap_err();
    /// assert!(error.is_io_disabled() || error.is_precise_unsupported());
    /// ```
    #[cfg(feature = "precise")]
    #[cfg_attr(docsrs, doc(cfg(feature = "precise")))]
    pub fn is_io_disabled(&self) -> bool {
        matches!(self.kind, BuildErrorKind::IoDisabled)
    }

    /// The tick was zero, or longer than `u64::MAX` nanoseconds.
    ///
    /// # Examples
    ///
    /// ```
    /// let error = wheel::Timer::builder().manual().tick(std::time::Duration::ZERO).build();
    /// assert!(error.unwrap_err().is_invalid_tick());
    /// ```
    pub fn is_invalid_tick(&self) -> bool {
        matches!(
            self.kind,
            BuildErrorKind::ZeroTick | BuildErrorKind::TickTooLong(_)
        )
    }

    /// `slots_per_level` was not a power of two between 2 and 4096.
    ///
    /// # Examples
    ///
    /// ```
    /// let error = wheel::Timer::builder().manual().slots_per_level(100).build();
    /// assert!(error.unwrap_err().is_invalid_slots());
    /// ```
    pub fn is_invalid_slots(&self) -> bool {
        matches!(self.kind, BuildErrorKind::Slots(_))
    }

    /// [`max_pending`](crate::Builder::max_pending) was zero: a timer that
    /// refuses every timer.
    ///
    /// # Examples
    ///
    /// ```
    /// let error = wheel::Timer::builder().manual().max_pending(0).build();
    /// assert!(error.unwrap_err().is_invalid_max_pending());
    /// ```
    pub fn is_invalid_max_pending(&self) -> bool {
        matches!(self.kind, BuildErrorKind::ZeroMaxPending)
    }

    /// `shards` was not a power of two between 1 and 64, or was more than
    /// one on a timer with a `max_pending` limit.
    ///
    /// # Examples
    ///
    /// ```
    /// let error = wheel::Timer::builder().manual().shards(3).build();
    /// assert!(error.unwrap_err().is_invalid_shards());
    /// ```
    pub fn is_invalid_shards(&self) -> bool {
        matches!(
            self.kind,
            BuildErrorKind::Shards(_) | BuildErrorKind::ShardsWithLimit(_)
        )
    }

    /// There was no tokio runtime to run the timer on.
    ///
    /// `build` was called outside a runtime and no
    /// [`runtime`](crate::Builder::runtime) was given, or the runtime had shut
    /// down (the message says which).
    ///
    /// # Examples
    ///
    /// ```
    /// // Not inside a runtime, and none given.
    /// let error = wheel::Timer::builder().build().unwrap_err();
    /// assert!(error.is_no_runtime());
    /// ```
    pub fn is_no_runtime(&self) -> bool {
        matches!(
            self.kind,
            BuildErrorKind::NoRuntime | BuildErrorKind::RuntimeShutDown
        )
    }

    /// The runtime given had shut down (one kind of
    /// [`is_no_runtime`](BuildError::is_no_runtime)).
    pub(crate) fn is_runtime_shut_down(&self) -> bool {
        matches!(self.kind, BuildErrorKind::RuntimeShutDown)
    }

    /// The runtime was built without `enable_time()`.
    ///
    /// tokio offers no way to ask, so the build tries a tokio timer and
    /// catches its panic; the process's panic hook reports that panic (the
    /// crate installs no hook of its own) before the build returns this.
    ///
    /// # Examples
    ///
    /// ```
    /// let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    /// let error = wheel::Timer::builder()
    ///     .runtime(runtime.handle().clone())
    ///     .build()
    ///     .unwrap_err();
    /// assert!(error.is_timers_disabled());
    /// ```
    pub fn is_timers_disabled(&self) -> bool {
        matches!(self.kind, BuildErrorKind::TimersDisabled)
    }
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            BuildErrorKind::ZeroTick => f.write_str("the timer's tick must be longer than zero"),
            BuildErrorKind::TickTooLong(tick) => {
                write!(
                    f,
                    "the timer's tick must be at most u64::MAX nanoseconds, got {tick:?}"
                )
            }
            BuildErrorKind::Slots(slots) => write!(
                f,
                "slots_per_level must be a power of two between {} and {}, got {slots}",
                crate::wheel::MIN_SLOTS,
                crate::wheel::MAX_SLOTS
            ),
            BuildErrorKind::Shards(shards) => write!(
                f,
                "shards must be a power of two between 1 and {}, got {shards}",
                crate::driver::MAX_SHARDS
            ),
            BuildErrorKind::ShardsWithLimit(shards) => write!(
                f,
                "a timer with max_pending keeps one shard, so that the limit is exact; \
                 got {shards} shards"
            ),
            BuildErrorKind::NoRuntime => f.write_str(
                "no tokio runtime to drive the timer: call this from within a runtime, \
                 or pass one with Builder::runtime",
            ),
            BuildErrorKind::RuntimeShutDown => {
                f.write_str("the tokio runtime given to drive the timer has shut down")
            }
            BuildErrorKind::TimersDisabled => f.write_str(
                "the tokio runtime has timers disabled: build it with `enable_time()` \
                 (or `enable_all()`)",
            ),
            BuildErrorKind::ZeroMaxPending => f.write_str(
                "max_pending must be at least 1: a timer allowed no pending timer could \
                 never run one (leave max_pending unset for no limit)",
            ),
            BuildErrorKind::PreciseUnsupported(why) => {
                write!(f, "a precise timer cannot be had here: {why}")
            }
            #[cfg(feature = "precise")]
            BuildErrorKind::IoDisabled => f.write_str(
                "a precise timer registers a timerfd with the runtime's IO driver, and the \
                 runtime has it disabled: build it with `enable_io()` (or `enable_all()`)",
            ),
        }
    }
}

impl std::error::Error for BuildError {}

/// Why a [`Timer`](crate::Timer) refused new work: shut down, or full.
///
/// It has shut down, or it holds as many pending timers as
/// [`Builder::max_pending`] allows (or, on a timer split into shards, as
/// many as a shard can name).
///
/// Returned by the fallible constructors ([`Timer::try_sleep`],
/// [`Timer::try_schedule`], ...) when called, and by [`Sleep::checked`]
/// when the sleep is polled. Their infallible twins panic with the same
/// message instead: [`Timer::schedule`] when called, and the futures of
/// [`Timer::sleep`], `timeout` and `interval` when polled (they register
/// at their first poll, and a pending one finds a shutdown at its next).
///
/// [`Builder::max_pending`]: crate::Builder::max_pending
/// [`Timer::try_sleep`]: crate::Timer::try_sleep
/// [`Timer::try_schedule`]: crate::Timer::try_schedule
/// [`Timer::schedule`]: crate::Timer::schedule
/// [`Timer::sleep`]: crate::Timer::sleep
/// [`Sleep::checked`]: crate::Sleep::checked
///
/// # Examples
///
/// ```
/// use std::time::Duration;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let timer = wheel::Timer::builder().max_pending(1).build().unwrap();
/// let _first = timer.try_sleep(Duration::from_secs(1)).unwrap();
/// let err = timer.try_sleep(Duration::from_secs(1)).unwrap_err();
/// assert!(err.is_at_capacity());
/// assert!(err.to_string().contains("1 pending"));
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    kind: ErrorKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum ErrorKind {
    ShutDown,
    AtCapacity(usize),
    /// The calling thread's shard has no slab index left: see
    /// [`Builder::shards`](crate::Builder::shards).
    ShardFull(usize),
}

impl Error {
    pub(crate) fn shut_down() -> Error {
        Error {
            kind: ErrorKind::ShutDown,
        }
    }

    pub(crate) fn at_capacity(max: usize) -> Error {
        Error {
            kind: ErrorKind::AtCapacity(max),
        }
    }

    pub(crate) fn shard_full(capacity: usize) -> Error {
        Error {
            kind: ErrorKind::ShardFull(capacity),
        }
    }

    /// The timer has shut down: [`Timer::shutdown`](crate::Timer::shutdown)
    /// was called, its runtime shut down, or (a
    /// [`manual`](crate::Builder::manual) one) its last `Timer` was dropped.
    ///
    /// # Examples
    ///
    /// ```
    /// let timer = wheel::Timer::builder().manual().build().unwrap();
    /// timer.shutdown();
    /// let error = timer.try_sleep(std::time::Duration::from_secs(1)).unwrap_err();
    /// assert!(error.is_shutdown());
    /// ```
    pub fn is_shutdown(&self) -> bool {
        matches!(self.kind, ErrorKind::ShutDown)
    }

    /// The timer refused new work because it is full.
    ///
    /// It already holds [`Builder::max_pending`](crate::Builder::max_pending)
    /// pending timers, or the calling thread's shard holds as many entries as
    /// its keys can name (see [`Builder::shards`](crate::Builder::shards)).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let timer = wheel::Timer::builder().manual().max_pending(1).build().unwrap();
    /// let _first = timer.try_sleep(Duration::from_secs(1)).unwrap();
    /// let error = timer.try_sleep(Duration::from_secs(1)).unwrap_err();
    /// assert!(error.is_at_capacity());
    /// ```
    pub fn is_at_capacity(&self) -> bool {
        matches!(
            self.kind,
            ErrorKind::AtCapacity(_) | ErrorKind::ShardFull(_)
        )
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            ErrorKind::ShutDown => f.write_str(
                "the timer has shut down (Timer::shutdown was called, its runtime shut down, \
                 or it was a manual timer whose last Timer was dropped)",
            ),
            ErrorKind::AtCapacity(max) => write!(
                f,
                "the timer is at capacity: {max} pending timers (Builder::max_pending)"
            ),
            ErrorKind::ShardFull(capacity) => write!(
                f,
                "the timer's shard for this thread is full: {capacity} entries, as many as \
                 its keys can name (fewer shards, Builder::shards, leave each more room)"
            ),
        }
    }
}

impl std::error::Error for Error {}
