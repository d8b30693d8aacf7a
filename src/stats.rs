//! [`Stats`]: a snapshot of a timer's counters.

/// A snapshot of a timer's counters, from [`Timer::stats`](crate::Timer::stats).
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let stats: wheel::Stats = wheel::Timer::current().stats();
/// println!("{} pending in {} levels", stats.pending, stats.levels);
/// # }
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Timers registered and waiting for their deadline.
    pub pending: usize,
    /// Wheel entries in use: the pending ones plus fired ones whose future
    /// has not yet been polled or dropped to collect the result.
    pub entries: usize,
    /// Levels the wheel has allocated (level 0 always; higher ones on demand).
    pub levels: usize,
    /// Callbacks scheduled and not yet run or cancelled (also counted in
    /// `pending`).
    pub callbacks: usize,
    /// Timers fired since the timer was built.
    pub fired: u64,
    /// Registered timers dropped, and callbacks cancelled, before they fired.
    pub cancelled: u64,
    /// Callbacks that panicked, and wakers that panicked when woken. The
    /// driver catches the panic and carries on.
    pub panicked: u64,
}
