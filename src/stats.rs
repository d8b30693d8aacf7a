//! [`Stats`]: a snapshot of a timer's counters.

/// A snapshot of a timer's counters, from [`Timer::stats`](crate::Timer::stats).
///
/// A timer split into shards ([`Builder::shards`](crate::Builder::shards))
/// reports the sum over its shards, except `levels`, the most any shard's
/// wheel has. The shards are read one after another, so while other
/// threads are registering the sum need not match any single instant.
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
    /// Timers registered and waiting for their deadline. After a shutdown,
    /// the sleeps that were pending stay counted until they are dropped
    /// (polled, each reports the shutdown).
    pub pending: usize,
    /// Wheel entries in use: the pending timers, and the sleeps fired but
    /// not yet polled (a sleep's entry is its own until it completes or is
    /// dropped). A dropped sleep's entry goes with a batch of up to 128
    /// others, which reading the stats frees first. Once every sleep has
    /// completed or been dropped, this equals `pending`; a difference would
    /// be a leak.
    pub entries: usize,
    /// Levels the wheel has allocated (level 0 always; higher ones on
    /// demand); with shards, the most any shard's wheel has.
    pub levels: usize,
    /// Callbacks scheduled and not yet cancelled or taken to run (also
    /// counted in `pending`). The driver takes due callbacks in batches of
    /// up to 32 and runs them outside its locks, so a callback running now
    /// is not counted, nor are the others of its batch.
    pub callbacks: usize,
    /// Timers fired since the timer was built: sleeps the driver woke (or
    /// completed) at their deadline, and callbacks it started to run. It
    /// never goes down. A sleep whose deadline had already passed when it
    /// was first polled completes at that poll, and is no fire; a callback
    /// cancelled after it came due, before it ran, counts as cancelled.
    pub fired: u64,
    /// Registered timers dropped, and callbacks cancelled (or handed back by
    /// [`Timer::shutdown`](crate::Timer::shutdown)), before they fired.
    pub cancelled: u64,
    /// Callbacks that panicked, and wakers that panicked when woken. The
    /// driver catches the panic and carries on.
    pub panicked: u64,
    /// Driver passes since the timer was built: each time a shard's alarm
    /// fired (or `advance` stepped) and the driver looked at its wheel. With
    /// nothing due, a runtime's timer makes none; a
    /// [`manual`](crate::Builder::manual) one makes at least one per
    /// `advance`, even with nothing pending.
    pub passes: u64,
    /// Entries the wheel's slab has room for: its capacity, at 40 bytes
    /// each (on 64-bit targets). The slab is in chunks of 1024 entries,
    /// each allocated when first needed and freed when it empties (one
    /// empty chunk is kept per shard), so it follows the number of live
    /// entries to within a chunk or two, and no single call allocates or
    /// frees more than a few chunks. New entries take the lowest free
    /// slot. Entries never move, so a live timer holds its chunk until it
    /// completes or is dropped. When the timer has no entries left it is
    /// at most 1024, and zero after any burst larger than that. A slab
    /// past 64 chunks hands what it lets go of (and the levels that empty
    /// with it) to the crate's `wheel-free` thread, which frees it soon
    /// after (0.1 s at most once it is done with what it was freeing): it
    /// leaves this count at once, the process a little later.
    pub allocated_entries: usize,
    /// Heap bytes of the wheel's levels (8 bytes per slot per level, plus
    /// occupancy bitmaps). Levels are allocated when a deadline first needs
    /// them; empty ones are freed, from the top, when a wheel that grew
    /// past one chunk (see `allocated_entries`) empties, so a timer that
    /// empties after a burst is back to one level. A timer that never grows
    /// past one chunk keeps its levels: a few KiB at most with 64 slots per
    /// level.
    pub level_bytes: usize,
}

/// One line a person can read: what is pending, what happened, and the
/// wheel's memory.
///
/// # Examples
///
/// ```
/// let timer = wheel::Timer::builder().manual().build().unwrap();
/// let _sleep = timer.try_sleep(std::time::Duration::from_secs(1)).unwrap();
/// timer.schedule(std::time::Duration::from_secs(2), || {});
/// let shown = timer.stats().to_string();
/// assert!(
///     shown.starts_with("2 pending (1 callback), 0 fired, 0 cancelled, 0 panicked, 0 passes; wheel: 2 entries"),
///     "{shown}"
/// );
/// ```
impl std::fmt::Display for Stats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let plural =
            |n: usize, one: &'static str, many: &'static str| if n == 1 { one } else { many };
        write!(
            f,
            "{} pending ({} {}), {} fired, {} cancelled, {} panicked, {} {}; \
             wheel: {} {} in use, room for {}, {} {} ({} bytes of slots)",
            self.pending,
            self.callbacks,
            plural(self.callbacks, "callback", "callbacks"),
            self.fired,
            self.cancelled,
            self.panicked,
            self.passes,
            plural(self.passes as usize, "pass", "passes"),
            self.entries,
            plural(self.entries, "entry", "entries"),
            self.allocated_entries,
            self.levels,
            plural(self.levels, "level", "levels"),
            self.level_bytes,
        )
    }
}
