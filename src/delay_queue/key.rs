//! What a [`DelayQueue`](super::DelayQueue) hands out: a [`Key`] per entry, and the
//! [`Expired`] entry it yields.

use std::fmt;

use tokio::time::Instant;

use crate::wheel::Key as EntryKey;
/// Names one entry of a [`DelayQueue`](super::DelayQueue), from its insert until it is yielded,
/// removed or cleared; stale after that (see [`DelayQueue`](super::DelayQueue)'s "Keys").
///
/// Small and `Copy`, `Eq` and `Hash`: keep it in the connection's state or
/// in a map.
///
/// # Examples
///
/// ```
/// use std::collections::HashMap;
/// use std::time::Duration;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let mut queue = wheel::DelayQueue::new();
/// let mut by_key = HashMap::new();
/// let key: wheel::delay_queue::Key = queue.insert(7u32, Duration::from_secs(1));
/// by_key.insert(key, "conn 7");
/// assert_eq!(by_key[&key], "conn 7");
/// # }
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Key(pub(super) EntryKey);

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Key")
            .field("index", &self.0.index)
            .field("generation", &self.0.generation)
            .finish()
    }
}

/// An entry yielded by a [`DelayQueue`](super::DelayQueue) once its deadline passed.
///
/// Or taken out by [`remove`](super::DelayQueue::remove): the value, the
/// deadline it was given and the key it had (now stale).
///
/// # Examples
///
/// ```
/// use futures::StreamExt;
/// use std::time::Duration;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let mut queue = wheel::DelayQueue::new();
/// let key = queue.insert("a", Duration::from_millis(5));
/// let expired: wheel::delay_queue::Expired<&str> = queue.next().await.unwrap();
/// assert_eq!(expired.key(), key);
/// assert!(expired.deadline() <= wheel::Instant::now());
/// # }
/// ```
#[derive(Debug)]
pub struct Expired<T> {
    pub(super) value: T,
    pub(super) deadline: Instant,
    pub(super) key: Key,
}

impl<T> Expired<T> {
    /// The value.
    ///
    /// # Examples
    ///
    /// ```
    /// # use futures::StreamExt;
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let mut queue = wheel::DelayQueue::new();
    /// queue.insert(String::from("a"), std::time::Duration::ZERO);
    /// let value: String = queue.next().await.unwrap().into_inner();
    /// assert_eq!(value, "a");
    /// # }
    /// ```
    pub fn into_inner(self) -> T {
        self.value
    }

    /// A reference to the value.
    ///
    /// # Examples
    ///
    /// ```
    /// # use futures::StreamExt;
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let mut queue = wheel::DelayQueue::new();
    /// queue.insert(3, std::time::Duration::ZERO);
    /// assert_eq!(*queue.next().await.unwrap().get_ref(), 3);
    /// # }
    /// ```
    pub fn get_ref(&self) -> &T {
        &self.value
    }

    /// A mutable reference to the value.
    ///
    /// # Examples
    ///
    /// ```
    /// # use futures::StreamExt;
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let mut queue = wheel::DelayQueue::new();
    /// queue.insert(3, std::time::Duration::ZERO);
    /// let mut expired = queue.next().await.unwrap();
    /// *expired.get_mut() += 1;
    /// assert_eq!(expired.into_inner(), 4);
    /// # }
    /// ```
    pub fn get_mut(&mut self) -> &mut T {
        &mut self.value
    }

    /// The deadline the entry was given (before rounding up to a tick).
    ///
    /// It has passed if the entry was yielded as expired, not necessarily if it
    /// came from [`remove`](super::DelayQueue::remove) or
    /// [`try_remove`](super::DelayQueue::try_remove).
    ///
    /// # Examples
    ///
    /// ```
    /// # use futures::StreamExt;
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let mut queue = wheel::DelayQueue::new();
    /// let at = wheel::Instant::now() + std::time::Duration::from_millis(7);
    /// queue.insert_at((), at);
    /// assert_eq!(queue.next().await.unwrap().deadline(), at);
    /// # }
    /// ```
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// The key the entry had; stale now, but useful to find the entry in a
    /// map kept beside the queue.
    ///
    /// # Examples
    ///
    /// ```
    /// # use futures::StreamExt;
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let mut queue = wheel::DelayQueue::new();
    /// let key = queue.insert((), std::time::Duration::ZERO);
    /// let expired = queue.next().await.unwrap();
    /// assert_eq!(expired.key(), key);
    /// assert!(queue.try_remove(&key).is_none());
    /// # }
    /// ```
    pub fn key(&self) -> Key {
        self.key
    }
}
