//! [`Timer`] as hyper's timer (`hyper::rt::Timer`), behind the `hyper`
//! feature.
//!
//! hyper asks its timer for three things: sleeps, the current time, and
//! resetting a sleep it already has. Each maps onto the wheel directly:
//!
//! - A sleep is a wheel [`Sleep`], boxed because hyper stores
//!   `Pin<Box<dyn hyper::rt::Sleep>>`. hyper speaks `std::time::Instant`;
//!   `tokio::time::Instant` is a thin wrapper of it, so the conversions are
//!   free and exact.
//! - `now` is [`Timer::now`], not `std::time::Instant::now()`: hyper computes
//!   its deadlines as `timer.now() + timeout`, so on a
//!   [`manual`](crate::Builder::manual) timer, or under tokio's paused clock,
//!   they land on the clock that fires them. With the trait's default, a
//!   manual timer would see deadlines taken from the wall clock and fire
//!   them at the wrong time.
//! - `reset` moves the deadline of the sleep hyper already holds, in place:
//!   the same box and the same wheel entry, no allocation and no new
//!   registration (the trait's default drops the old sleep and boxes a new
//!   one). Only a sleep of *this* timer is reset in place; one from another
//!   timer (another wheel `Timer`, or any other `hyper::rt::Sleep`) is
//!   replaced, since its deadline would otherwise be read on a clock other
//!   than the one hyper took it from.
//!
//! A sleep belongs to this timer if the shard it holds is one of the
//! timer's: the sleep keeps that shard alive, so no other timer can have it.
//! The boxed type is the private [`HyperSleep`] rather than [`Sleep`], so
//! that `reset` can find the `Sleep` behind hyper's trait object.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant as StdInstant};

use tokio::time::Instant;

use crate::{Sleep, Timer};

/// hyper's timer trait, with the cargo feature `hyper`.
///
/// hyper's connection timeouts (an HTTP/1 server's `header_read_timeout`,
/// HTTP/2 keep-alive pings, ...) then live in the wheel next to the
/// application's own timers.
///
/// `now` follows this timer's clock (a [`manual`](crate::Builder::manual)
/// timer's included), and `reset` moves a sleep's deadline in place, keeping
/// its wheel entry, instead of allocating a new sleep.
///
/// # Panics
///
/// The sleeps handed to hyper are [`Sleep`]s, and panic when polled as they
/// do: after the timer has shut down (by [`Timer::shutdown`], or with its
/// runtime), or at the first poll when a timer built with
/// [`max_pending`](crate::Builder::max_pending) is full. Give hyper a timer
/// without a `max_pending` limit.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use hyper::rt::Timer as _;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let timer = wheel::Timer::builder()
///     .tick(Duration::from_millis(10))
///     .build()
///     .unwrap();
///
/// // Every connection served by this builder times its header reads on
/// // the wheel: `builder.serve_connection(io, service)` as usual.
/// let mut builder = hyper::server::conn::http1::Builder::new();
/// builder
///     .timer(timer.clone())
///     .header_read_timeout(Duration::from_secs(5));
///
/// // hyper's clock is the timer's clock.
/// assert!(timer.now().into_std() <= hyper::rt::Timer::now(&timer));
/// # }
/// ```
///
/// On a manual clock, hyper's time moves only when the test says so:
///
/// ```
/// use std::time::Duration;
/// use hyper::rt::Timer as _;
///
/// let timer = wheel::Timer::builder().manual().build().unwrap();
/// let start = hyper::rt::Timer::now(&timer);
/// timer.advance(Duration::from_secs(30));
/// assert_eq!(hyper::rt::Timer::now(&timer) - start, Duration::from_secs(30));
/// ```
#[cfg_attr(docsrs, doc(cfg(feature = "hyper")))]
impl ::hyper::rt::Timer for Timer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn ::hyper::rt::Sleep>> {
        Box::pin(HyperSleep {
            sleep: Timer::sleep(self, duration),
        })
    }

    fn sleep_until(&self, deadline: StdInstant) -> Pin<Box<dyn ::hyper::rt::Sleep>> {
        let sleep = Timer::sleep_until(self, Instant::from_std(deadline));
        Box::pin(HyperSleep { sleep })
    }

    fn now(&self) -> StdInstant {
        Timer::now(self).into_std()
    }

    fn reset(&self, sleep: &mut Pin<Box<dyn ::hyper::rt::Sleep>>, new_deadline: StdInstant) {
        match sleep.as_mut().downcast_mut_pin::<HyperSleep>() {
            Some(ours)
                if ours
                    .sleep
                    .shard()
                    .is_some_and(|shard| self.driver().owns(shard)) =>
            {
                let ours = Pin::into_inner(ours);
                Pin::new(&mut ours.sleep).reset(Instant::from_std(new_deadline));
            }
            _ => *sleep = ::hyper::rt::Timer::sleep_until(self, new_deadline),
        }
    }
}

/// A [`Sleep`] as hyper holds it (see the module's comment).
#[derive(Debug)]
struct HyperSleep {
    sleep: Sleep,
}

impl Future for HyperSleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        Pin::new(&mut self.get_mut().sleep).poll(cx)
    }
}

impl ::hyper::rt::Sleep for HyperSleep {}
