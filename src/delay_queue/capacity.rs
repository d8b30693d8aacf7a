//! The queue's room: how many entries it holds (`len`, `clear`) and before
//! it reallocates, and giving memory back (`shrink_to_fit`, and `compact`,
//! which moves entries and keeps their keys valid through
//! [`Moved`](super::moved::Moved)).

use super::DelayQueue;

impl<T> DelayQueue<T> {
    /// Entries in the queue, due or not.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let mut queue = wheel::DelayQueue::new();
    /// queue.insert(1, std::time::Duration::from_secs(1));
    /// assert_eq!(queue.len(), 1);
    /// # }
    /// ```
    pub fn len(&self) -> usize {
        self.wheel.len()
    }

    /// Whether the queue holds no entry.
    ///
    /// # Examples
    ///
    /// ```
    /// let queue: wheel::DelayQueue<()> = wheel::DelayQueue::new();
    /// assert!(queue.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.wheel.len() == 0
    }

    /// Drops every entry; every key handed out so far becomes stale. A task
    /// waiting in [`poll_expired`](DelayQueue::poll_expired) is woken to see
    /// `Ready(None)`.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let mut queue = wheel::DelayQueue::new();
    /// let key = queue.insert("a", std::time::Duration::from_secs(1));
    /// queue.clear();
    /// assert!(queue.is_empty());
    /// assert!(queue.try_remove(&key).is_none());
    /// # }
    /// ```
    pub fn clear(&mut self) {
        let had_entries = !self.is_empty();
        self.wheel.clear();
        self.moved.clear();
        self.far.clear();
        self.disarm();
        if had_entries {
            self.wake();
        }
    }

    /// Entries the queue holds before it reallocates.
    ///
    /// # Examples
    ///
    /// ```
    /// let queue: wheel::DelayQueue<()> = wheel::DelayQueue::with_capacity(64);
    /// assert!(queue.capacity() >= 64);
    /// ```
    pub fn capacity(&self) -> usize {
        self.wheel.capacity()
    }

    /// Makes room for at least `additional` more entries.
    ///
    /// # Examples
    ///
    /// ```
    /// let mut queue: wheel::DelayQueue<()> = wheel::DelayQueue::new();
    /// queue.reserve(100);
    /// assert!(queue.capacity() >= 100);
    /// ```
    pub fn reserve(&mut self, additional: usize) {
        self.wheel.reserve(additional);
    }

    /// Releases memory the queue no longer needs, without moving an entry.
    ///
    /// Entries are stored in chunks of 1024 slots: a chunk with no entry is
    /// freed, and the others keep their slots up to their last entry (see
    /// [`compact`](DelayQueue::compact), which moves entries to release them).
    /// The queue never does this by itself: capacity it has grown to, or been
    /// given with [`with_capacity`](DelayQueue::with_capacity) or
    /// [`reserve`](DelayQueue::reserve), stays until this is called, and so
    /// does the room `compact` took to note where it moved entries.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let mut queue = wheel::DelayQueue::with_capacity(10_000);
    /// let key = queue.insert("kept", std::time::Duration::from_secs(1));
    /// queue.shrink_to_fit();
    /// assert!(queue.capacity() < 10_000);
    /// assert_eq!(queue.remove(&key).into_inner(), "kept");
    /// # }
    /// ```
    pub fn shrink_to_fit(&mut self) {
        self.wheel.shrink_to_fit();
        self.moved.shrink_to_fit();
    }

    /// Shrinks capacity to the number of entries, as tokio-util's `compact` does.
    ///
    /// Entries above free slots move into them, so one entry left from the top
    /// of a burst does not hold the burst's room. Every key handed out stays
    /// valid: the queue notes where each moved entry went, and looks its key up
    /// there until the entry leaves (a hash lookup per operation on any key
    /// while moved entries remain; none otherwise). O(capacity).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let mut queue = wheel::DelayQueue::with_capacity(10);
    /// let _one = queue.insert(1, Duration::from_secs(1));
    /// let two = queue.insert(2, Duration::from_secs(2));
    /// let three = queue.insert(3, Duration::from_secs(3));
    /// queue.remove(&two);
    /// queue.compact();
    /// assert_eq!(queue.capacity(), 2);
    /// assert_eq!(queue.deadline(&three), wheel::Instant::now() + Duration::from_secs(3));
    /// assert_eq!(queue.remove(&three).into_inner(), 3);
    /// # }
    /// ```
    pub fn compact(&mut self) {
        let moves = self.wheel.compact();
        self.moved.record(moves);
        self.moved.shrink_to_fit();
    }
}
