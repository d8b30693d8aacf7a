//! [`DelayQueue`]: values handed back once their deadline has passed.
//!
//! Each is under a [`Key`] that resets or removes it in O(1); [`Expired`] is
//! what the queue yields.
//!
//! # Design
//!
//! The queue owns a private `Wheel` (the same structure a [`Timer`] drives
//! its sleeps with) holding the values themselves, so insert, reset and
//! remove are O(1) and nothing is shared or locked. It waits on one timer,
//! armed for the wheel's next expiration (`wait.rs`). A queue made by
//! [`DelayQueue::new`] counts whole milliseconds and waits on a tokio
//! `Sleep` of its runtime, as tokio-util's does. On a paused clock they
//! count from its creation, as tokio-util's: a deadline rounds up to one of
//! them and tokio's `Sleep` rounds that up again, so that entries come out
//! at tokio-util's instants. On a running clock they are tokio's own
//! milliseconds (the default timer's grid, from the last one begun when
//! the queue binds), so a deadline is rounded once. One made
//! [`with_timer`](DelayQueue::with_timer) (or on a test clock) counts that
//! timer's ticks, on its grid, rounds once, and waits on a [`Sleep`] of
//! that timer. What is due is what that wait says (or a tick
//! the queue has already reached). The wheel covers every `u64` tick, so the
//! queue has no maximum age and no maximum delay (tokio-util's wheel
//! panicked once the queue was 2^36 ms old, tokio#5536).
//!
//! # Waking
//!
//! A task waiting in [`DelayQueue::poll_expired`] is parked on that wait
//! and on nothing else, so every call that changes what the next poll would
//! return must wake it by hand. The queue keeps the waker of the last poll
//! and wakes it when
//!
//! - an insert or reset lands before the tick the wait is armed for (an
//!   earlier deadline, or one already passed: tokio#1700, tokio#8274), or
//!   when nothing is armed (the queue was empty);
//! - a remove or [`clear`](DelayQueue::clear) empties the queue, so that the
//!   next poll returns `Ready(None)` (tokio#6751, tokio#8320).
//!
//! A reset or remove that makes the next expiration *later* wakes nobody:
//! the wait ends early, the poll finds nothing due and re-arms, which
//! costs one poll and never loses an entry. An empty queue holds no timer
//! entry at all.

use std::fmt;
use std::task::Waker;
use std::time::Duration;

use tokio::time::Instant;

mod at;
mod bound;
mod capacity;
mod expire;
mod key;
mod moved;
mod wait;

pub use key::{Expired, Key};

use at::Far;
use bound::Bound;
use moved::Moved;
use wait::Wait;

use crate::wheel::Wheel;
#[cfg(doc)]
use crate::Sleep;
use crate::Timer;

/// Slots per level of a queue built before it knows its timer (the default
/// timer's geometry).
const DEFAULT_SLOTS: usize = 64;
/// "Nothing armed": no `Sleep` is waiting for a tick.
const NEVER: u64 = u64::MAX;

/// A queue of values, each handed back once its deadline has passed.
///
/// They come from [`poll_expired`] (or the `futures::Stream` impl): the
/// keyed timeouts of an idle-connection reaper, a cache's expiries, a retry
/// schedule.
///
/// Each insert returns a [`Key`] with which the entry can be
/// [`reset`](DelayQueue::reset) to a new deadline (a heartbeat) or
/// [`remove`](DelayQueue::remove)d (the connection closed), both O(1). The
/// API is tokio-util's `DelayQueue`; the storage is a hierarchical timing
/// wheel private to the queue, which waits on one timer: a tokio timer of
/// the runtime, as tokio-util's does, for a queue made by
/// [`new`](DelayQueue::new) (it is in no [`Timer::stats`]), or a [`Sleep`]
/// of the [`Timer`] given [`with_timer`](DelayQueue::with_timer) (or of a
/// test clock's timer).
///
/// # Timing
///
/// Never early: an entry is yielded only once its timer's clock
/// ([`Timer::now`]) has reached its deadline, rounded up to the queue's
/// tick and then the timer's. A queue made by [`new`](DelayQueue::new)
/// counts whole milliseconds: on a paused clock from its creation, as
/// tokio-util's does, so an entry comes out when tokio-util's would; on a
/// running one, tokio's own, so an entry comes out at the first of them
/// at or after its deadline (up to a millisecond sooner than tokio-util's,
/// which rounds twice); one made
/// [`with_timer`](DelayQueue::with_timer) counts that timer's ticks, at
/// most a tick plus scheduling late. Entries come out in the order of their
/// deadlines' ticks. On a queue `with_timer`, one inserted or reset to a
/// deadline that has already passed is due at the tick its deadline falls
/// in (not rounded up, so a zero timeout waits for no tick): ahead of
/// entries due later that have not been yielded yet, unless the queue has
/// already moved past that tick, when it comes after the entries already
/// due.
///
/// # Keys
///
/// A key names one entry until that entry is yielded, removed or cleared;
/// after that it is *stale*, even once its slot is reused: [`try_remove`]
/// returns `None`, and [`remove`], [`reset`], [`reset_at`] and
/// [`deadline`] panic with a message saying the key is stale. Keys carry a
/// 32-bit generation, counted over the whole queue, so a stale key could
/// only alias a new entry in its slot if that entry's insert came exactly a
/// multiple of 2^32 - 1 inserts after its own. A key stays the same for
/// its entry's whole life, [`compact`](DelayQueue::compact) or not, so it
/// can be kept in a map.
///
/// # An empty queue
///
/// [`poll_expired`] returns `Ready(None)` when the queue is empty (as
/// tokio-util's does) and the stream then ends, but the queue is not fused:
/// inserting again makes it yield again, and a task that polled the empty
/// queue is woken by that insert.
///
/// [`poll_expired`]: DelayQueue::poll_expired
/// [`try_remove`]: DelayQueue::try_remove
/// [`remove`]: DelayQueue::remove
/// [`reset`]: DelayQueue::reset
/// [`reset_at`]: DelayQueue::reset_at
/// [`deadline`]: DelayQueue::deadline
///
/// # Examples
///
/// ```
/// use futures::StreamExt;
/// use std::time::Duration;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let mut idle = wheel::DelayQueue::new();
/// let a = idle.insert("conn a", Duration::from_millis(300));
/// let _b = idle.insert("conn b", Duration::from_millis(300));
///
/// wheel::sleep(Duration::from_millis(200)).await;
/// idle.reset(&a, Duration::from_millis(300)); // a heartbeat from a
///
/// let first = idle.next().await.unwrap();
/// assert_eq!(*first.get_ref(), "conn b"); // b went silent
/// let second = idle.next().await.unwrap();
/// assert_eq!(second.into_inner(), "conn a");
/// assert!(idle.next().await.is_none()); // empty
/// # }
/// ```
pub struct DelayQueue<T> {
    wheel: Wheel<Item<T>>,
    /// The timer and the queue's tick grid; set on first use unless built
    /// `with_timer`.
    bound: Option<Bound>,
    /// Armed for the wheel's next expiration while entries are pending.
    wait: Option<Wait>,
    /// The tick `wait` is armed for, or `NEVER`.
    armed: u64,
    /// When a queue on the default timer was made: on a paused clock it
    /// counts whole milliseconds from then, as tokio-util's does (`None`:
    /// `with_timer`; see `bound.rs`).
    start: Option<Instant>,
    /// The waker of the last `poll_expired`, woken by the calls listed in
    /// the module notes.
    waker: Option<Waker>,
    /// Where [`compact`](DelayQueue::compact) moved entries to: every key
    /// handed out goes through it (see `moved.rs`).
    moved: Moved,
    /// The deadlines too far to keep in an entry (see `at.rs`).
    far: Far,
}

/// One entry's value and the deadline it was given (before rounding), as
/// `at.rs` keeps it.
struct Item<T> {
    value: T,
    at: i64,
}

impl<T> DelayQueue<T> {
    /// An empty queue on the current runtime's default timer, which it looks
    /// up on first use (so creating one outside a runtime is fine).
    ///
    /// # Examples
    ///
    /// ```
    /// let queue: wheel::DelayQueue<u32> = wheel::DelayQueue::new();
    /// assert!(queue.is_empty());
    /// ```
    pub fn new() -> DelayQueue<T> {
        DelayQueue::with_capacity(0)
    }

    /// An empty queue with room for `capacity` entries before it
    /// reallocates, on the default timer as with [`new`](DelayQueue::new).
    ///
    /// # Examples
    ///
    /// ```
    /// let queue: wheel::DelayQueue<u32> = wheel::DelayQueue::with_capacity(1000);
    /// assert!(queue.capacity() >= 1000);
    /// ```
    pub fn with_capacity(capacity: usize) -> DelayQueue<T> {
        DelayQueue {
            wheel: Wheel::with_capacity(DEFAULT_SLOTS, capacity),
            bound: None,
            wait: None,
            armed: NEVER,
            // On the clock of the timer it will use (a test clock's too).
            start: Some(crate::now()),
            waker: None,
            moved: Moved::default(),
            far: Far::default(),
        }
    }

    /// An empty queue on `timer`: its deadlines round up to that timer's
    /// tick, and it follows that timer's clock.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let coarse = wheel::Timer::builder().tick(Duration::from_millis(100)).build().unwrap();
    /// let mut queue = wheel::DelayQueue::with_timer(coarse);
    /// let start = wheel::Instant::now();
    /// queue.insert((), Duration::from_millis(150));
    /// std::future::poll_fn(|cx| queue.poll_expired(cx)).await;
    /// assert_eq!(start.elapsed(), Duration::from_millis(200)); // rounded up, never down
    /// # }
    /// ```
    pub fn with_timer(timer: Timer) -> DelayQueue<T> {
        let slots = timer.slots_per_level();
        DelayQueue {
            wheel: Wheel::with_capacity(slots, 0),
            bound: Some(Bound::new(timer, None)),
            wait: None,
            armed: NEVER,
            start: None,
            waker: None,
            moved: Moved::default(),
            far: Far::default(),
        }
    }

    /// Inserts `value`, to be yielded once `timeout` has elapsed.
    ///
    /// A zero timeout makes it due at once (on a queue made by
    /// [`new`](DelayQueue::new), once its millisecond has come, as with
    /// tokio-util's: see "Timing"). A timeout that overflows `Instant`
    /// becomes about 30 years, as in tokio.
    ///
    /// If this is now the earliest entry, a task waiting in
    /// [`poll_expired`](DelayQueue::poll_expired) is woken to re-arm.
    ///
    /// # Panics
    ///
    /// Panics if the queue has no timer yet (built with
    /// [`new`](DelayQueue::new)) and is used outside a tokio runtime with
    /// timers enabled.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let mut queue = wheel::DelayQueue::new();
    /// let key = queue.insert("later", Duration::from_secs(5));
    /// assert_eq!(queue.deadline(&key) - wheel::Instant::now(), Duration::from_secs(5));
    /// # }
    /// ```
    #[track_caller]
    pub fn insert(&mut self, value: T, timeout: Duration) -> Key {
        let now = self.now();
        match self.ahead(now, timeout) {
            Some((tick, at)) => self.insert_tick(value, tick, at),
            None => self.insert_due(value, crate::deadline_after(now, timeout), Some(now)),
        }
    }

    /// Inserts `value`, to be yielded once `deadline` has passed; a deadline
    /// already passed makes it due at once (see [`insert`](DelayQueue::insert)).
    ///
    /// # Panics
    ///
    /// As [`insert`](DelayQueue::insert): outside a runtime, before the queue
    /// has a timer.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let mut queue = wheel::DelayQueue::new();
    /// let deadline = wheel::Instant::now() + Duration::from_secs(1);
    /// let key = queue.insert_at("job", deadline);
    /// assert_eq!(queue.deadline(&key), deadline);
    /// # }
    /// ```
    #[track_caller]
    pub fn insert_at(&mut self, value: T, deadline: Instant) -> Key {
        self.insert_due(value, deadline, None)
    }

    /// `now` as for [`due_tick`](DelayQueue::due_tick).
    #[track_caller]
    fn insert_due(&mut self, value: T, deadline: Instant, now: Option<Instant>) -> Key {
        let tick = self.due_tick(deadline, now);
        let at = at::encode(deadline);
        let key = self.insert_tick(value, tick, at);
        if at == at::FAR {
            // A new entry's key is the wheel's (nothing has moved it).
            self.far.keep(key.0, deadline);
        }
        key
    }

    /// Inserts `value` at `tick`, its deadline kept as `at`.
    #[inline]
    fn insert_tick(&mut self, value: T, tick: u64, at: i64) -> Key {
        let mut key = self.wheel.insert(tick, Item { value, at });
        // Generations wrap: this may be the key a compacted entry, still
        // here, was handed out with. Skip to the next generation.
        while self.moved.inside(key) != key {
            let item = self.wheel.remove(key).expect("just inserted");
            key = self.wheel.insert(tick, item);
        }
        self.wake_if_before(tick);
        Key(key)
    }

    /// Moves the entry's deadline to `timeout` from now, whether that is
    /// later or earlier; a zero timeout makes it due at once (and wakes a
    /// waiting task).
    ///
    /// # Panics
    ///
    /// Panics if `key` is stale (its entry was yielded, removed or cleared).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let mut queue = wheel::DelayQueue::new();
    /// let key = queue.insert("conn", Duration::from_millis(300));
    /// wheel::sleep(Duration::from_millis(200)).await;
    /// queue.reset(&key, Duration::from_millis(300)); // heartbeat
    /// assert_eq!(queue.deadline(&key) - wheel::Instant::now(), Duration::from_millis(300));
    /// # }
    /// ```
    #[track_caller]
    pub fn reset(&mut self, key: &Key, timeout: Duration) {
        let now = self.now();
        match self.ahead(now, timeout) {
            Some((tick, at)) => self.reset_tick(key, tick, at, None),
            None => self.reset_due(key, crate::deadline_after(now, timeout), Some(now)),
        }
    }

    /// Moves the entry's deadline to `deadline`; one already passed makes
    /// it due at once and wakes a waiting task.
    ///
    /// # Panics
    ///
    /// Panics if `key` is stale.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let mut queue = wheel::DelayQueue::new();
    /// let key = queue.insert("conn", Duration::from_secs(60));
    /// queue.reset_at(&key, wheel::Instant::now()); // close it now
    /// let expired = std::future::poll_fn(|cx| queue.poll_expired(cx)).await.unwrap();
    /// assert_eq!(expired.key(), key);
    /// # }
    /// ```
    #[track_caller]
    pub fn reset_at(&mut self, key: &Key, deadline: Instant) {
        self.reset_due(key, deadline, None);
    }

    /// `now` as for [`due_tick`](DelayQueue::due_tick).
    #[track_caller]
    fn reset_due(&mut self, key: &Key, deadline: Instant, now: Option<Instant>) {
        let tick = self.due_tick(deadline, now);
        self.reset_tick(key, tick, at::encode(deadline), Some(deadline));
    }

    /// Moves the entry to `tick`, its deadline kept as `at`; `deadline` is
    /// that deadline when the caller has it as an `Instant` (always when
    /// `at` is `FAR`).
    #[track_caller]
    #[inline]
    fn reset_tick(&mut self, key: &Key, tick: u64, at: i64, deadline: Option<Instant>) {
        let inside = self.moved.inside(key.0);
        if self.wheel.reschedule(inside, tick).is_none() {
            stale_key("reset");
        }
        if let Some(item) = self.wheel.value_mut(inside) {
            let was = std::mem::replace(&mut item.at, at);
            if at == at::FAR {
                let deadline = deadline.expect("a far deadline comes as an Instant");
                self.far.keep(key.0, deadline);
            } else if was == at::FAR {
                self.far.forget(key.0);
            }
        }
        self.wake_if_before(tick);
    }

    /// Removes the entry and returns it as an [`Expired`], as tokio-util's
    /// `remove` does: its value ([`into_inner`](Expired::into_inner)), its
    /// deadline and its (now stale) key.
    ///
    /// If that empties the queue, a task waiting in
    /// [`poll_expired`](DelayQueue::poll_expired) is woken to see
    /// `Ready(None)`.
    ///
    /// # Panics
    ///
    /// Panics if `key` is stale; [`try_remove`](DelayQueue::try_remove)
    /// returns `None` instead.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let mut queue = wheel::DelayQueue::new();
    /// let key = queue.insert("conn", Duration::from_secs(1));
    /// let removed = queue.remove(&key);
    /// assert_eq!((removed.key(), removed.into_inner()), (key, "conn"));
    /// assert!(queue.is_empty());
    /// # }
    /// ```
    #[track_caller]
    pub fn remove(&mut self, key: &Key) -> Expired<T> {
        match self.try_remove(key) {
            Some(removed) => removed,
            None => stale_key("remove"),
        }
    }

    /// Removes the entry and returns it, or `None` if `key` is stale (the
    /// entry was already yielded, removed or cleared).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let mut queue = wheel::DelayQueue::new();
    /// let key = queue.insert("conn", Duration::from_secs(1));
    /// assert_eq!(queue.try_remove(&key).map(|e| e.into_inner()), Some("conn"));
    /// assert!(queue.try_remove(&key).is_none());
    /// # }
    /// ```
    pub fn try_remove(&mut self, key: &Key) -> Option<Expired<T>> {
        let inside = self.moved.inside(key.0);
        let item = self.wheel.remove(inside)?;
        self.moved.leave(inside);
        if self.wheel.len() == 0 {
            self.disarm();
            self.wake();
        }
        Some(Expired {
            value: item.value,
            deadline: self.far.take(key.0, item.at),
            key: *key,
        })
    }

    /// The deadline the entry was given (before rounding up to a tick).
    ///
    /// # Panics
    ///
    /// Panics if `key` is stale.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let mut queue = wheel::DelayQueue::new();
    /// let at = wheel::Instant::now() + Duration::from_micros(1500);
    /// let key = queue.insert_at((), at);
    /// assert_eq!(queue.deadline(&key), at);
    /// # }
    /// ```
    #[track_caller]
    pub fn deadline(&self, key: &Key) -> Instant {
        match self.wheel.value(self.moved.inside(key.0)) {
            Some(item) => self.far.get(key.0, item.at),
            None => stale_key("deadline"),
        }
    }

    /// The key of the entry that will be yielded next, or `None` if the queue
    /// is empty. Among entries due in the same tick, the one yielded first.
    ///
    /// Unless entries are due, it looks through the entries of the wheel's
    /// next slot for the earliest: O(entries in that slot), where
    /// tokio-util's names the first of its slot, not always the earliest.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let mut queue = wheel::DelayQueue::new();
    /// assert_eq!(queue.peek(), None);
    /// queue.insert("b", Duration::from_secs(2));
    /// let a = queue.insert("a", Duration::from_secs(1));
    /// assert_eq!(queue.peek(), Some(a));
    /// # }
    /// ```
    pub fn peek(&self) -> Option<Key> {
        self.wheel.peek().map(|key| Key(self.moved.outside(key)))
    }
}

#[track_caller]
fn stale_key(operation: &str) -> ! {
    panic!(
        "wheel: DelayQueue::{operation} with a stale key: its entry was already \
         yielded, removed or cleared"
    )
}

impl<T> Default for DelayQueue<T> {
    fn default() -> DelayQueue<T> {
        DelayQueue::new()
    }
}

/// The queue never pins its values: they live in a slab and move freely.
impl<T> Unpin for DelayQueue<T> {}

impl<T> fmt::Debug for DelayQueue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DelayQueue")
            .field("len", &self.len())
            .field("timer", &self.bound.as_ref().map(|b| &b.timer))
            .finish_non_exhaustive()
    }
}
