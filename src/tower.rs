//! tower's request timeout on the wheel (feature `tower`): [`Timeout`] and
//! [`TimeoutLayer`], with the API of `tower::timeout`.
//!
//! Swap `tower::timeout::TimeoutLayer` for `wheel::tower::TimeoutLayer`
//! (and `tower::timeout::Timeout` for `wheel::tower::Timeout`): the
//! service's errors are the same `BoxError`s, and a timeout is still
//! `tower::timeout::error::Elapsed` ([`Elapsed`] is that type, re-exported),
//! so code that tells a timeout from other errors with
//! `err.is::<tower::timeout::error::Elapsed>()` or `downcast_ref` (axum's
//! `HandleErrorLayer` handlers, tonic interceptors) keeps working unchanged.
//!
//! That is tower 0.5's `Elapsed`. A stack whose own `tower` is 0.4 takes
//! the layer just as well (both versions share tower-service's `Service`
//! and tower-layer's `Layer`), but its `tower::timeout::error::Elapsed` is
//! another type, which `err.is` does not match: a timeout would pass for
//! any other error. There, test for [`wheel::tower::Elapsed`](Elapsed).
//!
//! Each request's deadline is a wheel [`Timeout`](crate::Timeout) around the
//! inner service's response future, taken when the request is `call`ed (as
//! tower's is): on the default timer of the runtime `call` runs in (or,
//! called outside any, of the one that first polls the response:
//! [`TimeoutLayer::new`]), or on a given [`Timer`]
//! ([`TimeoutLayer::with_timer`]). Nothing is added to the wheel's own
//! `Timeout`: a response that is ready at its first poll never touches the
//! timer, and one that finishes first cancels its entry in O(1).
//!
//! # Differences from `tower::timeout`
//!
//! - `call` outside a runtime does not panic (tower's makes a
//!   `tokio::time::Sleep` there, which does): the deadline binds to a timer
//!   when the response is first polled, and that poll panics outside a
//!   runtime, as a wheel [`Sleep`](crate::Sleep)'s does; what was left of
//!   the timeout by the real clock then counts on that runtime's clock, as
//!   with [`timeout`](crate::timeout()).
//! - A timeout over 30 years is waited out, never cut short: tower's is a
//!   `tokio::time::sleep`, which caps it at 30 years. One too long for
//!   `Instant::now() + timeout` to exist (`Duration::MAX`) has no deadline
//!   and never touches the timer, as [`timeout`](crate::timeout()).
//! - A response future that spends the task's last unit of tokio's coop
//!   budget still times out, as with [`timeout`](crate::timeout()).
//!
//! # Examples
//!
//! ```
//! use std::time::Duration;
//! use tower::{service_fn, BoxError, Service, ServiceBuilder, ServiceExt};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let mut svc = ServiceBuilder::new()
//!     .layer(wheel::tower::TimeoutLayer::new(Duration::from_secs(1)))
//!     .service(service_fn(|secs: u64| async move {
//!         wheel::sleep(Duration::from_secs(secs)).await;
//!         Ok::<_, BoxError>(secs)
//!     }));
//!
//! assert_eq!(svc.ready().await.unwrap().call(0).await.unwrap(), 0);
//! let err = svc.ready().await.unwrap().call(5).await.unwrap_err();
//! assert!(err.is::<tower::timeout::error::Elapsed>());
//! # }
//! ```
#![cfg_attr(docsrs, doc(cfg(feature = "tower")))]

use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use ::tower::{Layer, Service};
use pin_project_lite::pin_project;

use crate::Timer;

/// `tower::timeout::error::Elapsed`: what a [`Timeout`] returns (boxed) when a request times out.
///
/// tower's own type (tower 0.5's), so that
/// `err.is::<tower::timeout::error::Elapsed>()` holds for both crates, with
/// tower 0.5 (see the [module](self)'s docs on tower 0.4).
///
/// # Examples
///
/// ```
/// let err: tower::BoxError = wheel::tower::Elapsed::new().into();
/// assert!(err.is::<tower::timeout::error::Elapsed>());
/// assert_eq!(err.to_string(), "request timed out");
/// ```
pub use ::tower::timeout::error::Elapsed;

/// `tower::BoxError`, the error type of a [`Timeout`] service.
///
/// # Examples
///
/// ```
/// let err: wheel::tower::BoxError = "inner failure".into();
/// assert_eq!(err.to_string(), "inner failure");
/// ```
pub use ::tower::BoxError;

/// Applies a timeout to each request of the inner service, on the wheel: a
/// `Layer` making [`Timeout`]s, the drop-in for
/// `tower::timeout::TimeoutLayer`.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tower::{service_fn, BoxError, ServiceBuilder, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let svc = ServiceBuilder::new()
///     .layer(wheel::tower::TimeoutLayer::new(Duration::from_millis(100)))
///     .service(service_fn(|()| std::future::pending::<Result<(), BoxError>>()));
///
/// let err = svc.oneshot(()).await.unwrap_err();
/// assert!(err.is::<wheel::tower::Elapsed>());
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct TimeoutLayer {
    timeout: Duration,
    timer: Option<Timer>,
}

impl TimeoutLayer {
    /// A layer whose requests time out after `timeout`, on a runtime's default timer.
    ///
    /// That of the runtime `call` runs in; called outside any, that of the
    /// runtime that first polls the response.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let layer = wheel::tower::TimeoutLayer::new(Duration::from_secs(30));
    /// # let _ = layer;
    /// ```
    pub const fn new(timeout: Duration) -> TimeoutLayer {
        TimeoutLayer {
            timeout,
            timer: None,
        }
    }

    /// A layer whose requests time out after `timeout` on `timer`: its
    /// tick, its shards, its clock (a [`manual`](crate::Builder::manual)
    /// clock included), its [`stats`](Timer::stats).
    ///
    /// # Panics
    ///
    /// Polling a response panics as a [`Timer::timeout`]'s does: after the
    /// timer has shut down, or at its first pending poll when the timer is
    /// at its [`max_pending`](crate::Builder::max_pending) limit.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tower::{service_fn, BoxError, ServiceBuilder, ServiceExt};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let timer = wheel::Timer::builder()
    ///     .tick(Duration::from_millis(10))
    ///     .build()
    ///     .unwrap();
    /// let svc = ServiceBuilder::new()
    ///     .layer(wheel::tower::TimeoutLayer::with_timer(timer.clone(), Duration::from_secs(1)))
    ///     .service(service_fn(|()| std::future::pending::<Result<(), BoxError>>()));
    ///
    /// assert!(svc.oneshot(()).await.unwrap_err().is::<wheel::tower::Elapsed>());
    /// assert_eq!(timer.stats().fired, 1);
    /// # }
    /// ```
    pub fn with_timer(timer: Timer, timeout: Duration) -> TimeoutLayer {
        TimeoutLayer {
            timeout,
            timer: Some(timer),
        }
    }
}

impl<S> Layer<S> for TimeoutLayer {
    type Service = Timeout<S>;

    fn layer(&self, inner: S) -> Timeout<S> {
        Timeout {
            inner,
            timeout: self.timeout,
            timer: self.timer.clone(),
        }
    }
}

/// A service whose requests time out, on the wheel: the drop-in for
/// `tower::timeout::Timeout`.
///
/// `poll_ready` is the inner service's, its error boxed. `call` calls the
/// inner service and gives its response future a deadline `timeout` from
/// then; the [`ResponseFuture`] outputs the response, the inner error boxed,
/// or a boxed [`Elapsed`] if the deadline passes first (the inner future is
/// dropped with the response future, as tower's is).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tower::{service_fn, BoxError, Service, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let inner = service_fn(|n: u32| async move { Ok::<_, BoxError>(n * 2) });
/// let mut svc = wheel::tower::Timeout::new(inner, Duration::from_secs(1));
/// assert_eq!(svc.ready().await.unwrap().call(21).await.unwrap(), 42);
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Timeout<S> {
    inner: S,
    timeout: Duration,
    timer: Option<Timer>,
}

impl<S> Timeout<S> {
    /// Wraps `inner`, its requests timing out after `timeout` on a runtime's default timer.
    ///
    /// That of the runtime `call` runs in; called outside any, that of the
    /// runtime that first polls the response.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let svc = wheel::tower::Timeout::new(tower::service_fn(|()| async {
    ///     Ok::<_, tower::BoxError>(())
    /// }), Duration::from_secs(1));
    /// # let _ = svc;
    /// ```
    pub const fn new(inner: S, timeout: Duration) -> Timeout<S> {
        Timeout {
            inner,
            timeout,
            timer: None,
        }
    }

    /// Wraps `inner`, its requests timing out after `timeout` on `timer`;
    /// see [`TimeoutLayer::with_timer`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tower::{service_fn, BoxError, ServiceExt};
    ///
    /// let timer = wheel::Timer::builder().manual().build().unwrap();
    /// let inner = service_fn(|()| std::future::pending::<Result<(), BoxError>>());
    /// let svc = wheel::tower::Timeout::with_timer(inner, timer.clone(), Duration::from_secs(5));
    /// let mut response = tokio_test::task::spawn(svc.oneshot(()));
    /// assert!(response.poll().is_pending());
    /// timer.advance(Duration::from_secs(5));
    /// assert!(response.poll().is_ready());
    /// ```
    pub fn with_timer(inner: S, timer: Timer, timeout: Duration) -> Timeout<S> {
        Timeout {
            inner,
            timeout,
            timer: Some(timer),
        }
    }

    /// The inner service.
    ///
    /// # Examples
    ///
    /// ```
    /// let svc = wheel::tower::Timeout::new(5u8, std::time::Duration::from_secs(1));
    /// assert_eq!(*svc.get_ref(), 5);
    /// ```
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The inner service, mutably.
    ///
    /// # Examples
    ///
    /// ```
    /// let mut svc = wheel::tower::Timeout::new(5u8, std::time::Duration::from_secs(1));
    /// *svc.get_mut() += 1;
    /// assert_eq!(svc.into_inner(), 6);
    /// ```
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// Gives up the timeout and returns the inner service.
    ///
    /// # Examples
    ///
    /// ```
    /// let svc = wheel::tower::Timeout::new("inner", std::time::Duration::from_secs(1));
    /// assert_eq!(svc.into_inner(), "inner");
    /// ```
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, Request> Service<Request> for Timeout<S>
where
    S: Service<Request>,
    S::Error: Into<BoxError>,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = ResponseFuture<S::Future>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    #[inline]
    fn call(&mut self, request: Request) -> ResponseFuture<S::Future> {
        let response = self.inner.call(request);
        // Each arm builds the future where it is returned: one `Timeout`
        // picked by a `match`, then wrapped, was copied once more
        // (callgrind, `tower_ready`: 20 instructions a call).
        match &self.timer {
            Some(timer) => ResponseFuture {
                timeout: timer.timeout(self.timeout, response),
            },
            None => ResponseFuture {
                timeout: crate::timeout(self.timeout, response),
            },
        }
    }
}

pin_project! {
    /// The response future of a [`Timeout`] service: the inner service's
    /// response, its error boxed, or a boxed [`Elapsed`] if the deadline
    /// passes first.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tower::{service_fn, BoxError, Service};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let inner = service_fn(|()| async { Err::<(), _>("refused") });
    /// let mut svc = wheel::tower::Timeout::new(inner, Duration::from_secs(1));
    /// let response: wheel::tower::ResponseFuture<_> = svc.call(());
    /// assert_eq!(response.await.unwrap_err().to_string(), "refused");
    /// # }
    /// ```
    #[must_use = "futures do nothing unless you `.await` or poll them"]
    #[derive(Debug)]
    pub struct ResponseFuture<F> {
        #[pin]
        timeout: crate::Timeout<F>,
    }
}

impl<F, T, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<T, E>>,
    E: Into<BoxError>,
{
    type Output = Result<T, BoxError>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<T, BoxError>> {
        Poll::Ready(match ready!(self.project().timeout.poll(cx)) {
            Ok(response) => response.map_err(Into::into),
            Err(_) => Err(Elapsed::new().into()),
        })
    }
}
