//! A precise alarm ([`Builder::precise`](crate::Builder::precise)): a Linux
//! `timerfd` on `CLOCK_MONOTONIC`, armed for an absolute deadline and
//! registered with the runtime's IO driver, so that a shard's pass runs
//! within microseconds of its promise, not on tokio's millisecond grid.
//!
//! tokio parks its IO driver in `epoll_wait` with a millisecond timeout for
//! its own timers; a `timerfd` becoming readable ends that wait at once, and
//! the IO driver then wakes the waker registered with the fd, the same
//! waker a tokio alarm has: it runs the pass where tokio fires its own
//! timers. The pass reads the clock again, so a `timerfd` that fires a
//! little early (its deadline is taken through two clock readings) fires
//! nothing early.
//!
//! `std::time::Instant`, which `tokio::time::Instant` wraps, is
//! `CLOCK_MONOTONIC` on Linux: the deadline in that clock is now's reading
//! plus how far the tick is from tokio's now. A runtime whose clock can be
//! paused (a current-thread one) keeps its tokio alarm armed too, and the
//! `timerfd` only while tokio's clock reads the real time: a paused clock
//! moves when tokio moves it (`advance`, auto-advance), which the tokio
//! alarm follows and a real-time `timerfd` cannot.

use std::io;
use std::os::fd::OwnedFd;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use rustix::time::{
    clock_gettime, timerfd_create, timerfd_settime, ClockId, Itimerspec, TimerfdClockId,
    TimerfdFlags, TimerfdTimerFlags, Timespec,
};
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;
use tokio::time::Instant;

use super::{Clock, NEVER};

/// Within this of the real clock, a tokio clock is taken to be the real
/// one: not paused, nor resumed after a pause.
const REAL: Duration = Duration::from_millis(1);

/// A `timerfd` registered with the runtime's IO driver.
pub(crate) struct Timerfd {
    fd: AsyncFd<OwnedFd>,
    /// The tick it is armed for, or `NEVER`.
    armed_at: u64,
}

impl Timerfd {
    /// A disarmed `timerfd`; made inside the runtime's context. Fails on a
    /// runtime whose IO driver is off (tokio panics then: the builder
    /// catches it), or if the kernel refuses the fd.
    pub(crate) fn new() -> io::Result<Timerfd> {
        let fd = timerfd_create(
            TimerfdClockId::Monotonic,
            TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC,
        )?;
        // `with_interest` is deprecated in favour of an `unsafe` function,
        // because an `AsRawFd` impl could hand tokio an fd that it then
        // closes or changes (tokio#8587); an `OwnedFd` owns its fd until it
        // is dropped, with the `AsyncFd`, so the safe one is sound here, and
        // it is there in every tokio this crate supports.
        #[allow(deprecated)]
        let fd = AsyncFd::with_interest(fd, Interest::READABLE)?;
        Ok(Timerfd {
            fd,
            armed_at: NEVER,
        })
    }

    /// Arms the `timerfd` for `tick` (`NEVER`: disarms it), `now` being the
    /// shard's clock, and registers `waker` to be woken when it fires.
    /// `Ready` if the tick has already come. `real`: the shard's clock is
    /// the real one (a multi-thread runtime's); otherwise it is checked
    /// against the real clock, and a clock that is not (paused, or resumed
    /// after a pause) leaves the `timerfd` disarmed.
    pub(crate) fn arm(
        &mut self,
        tick: u64,
        clock: &Clock,
        now: Instant,
        real: bool,
        waker: &Waker,
    ) -> Poll<()> {
        let when = (tick != NEVER).then(|| clock.instant_at(tick)).flatten();
        let std_now = std::time::Instant::now();
        let apart = now
            .into_std()
            .checked_duration_since(std_now)
            .unwrap_or_else(|| std_now.duration_since(now.into_std()));
        let follows_real = real || apart <= REAL;
        let Some(when) = when.filter(|_| follows_real) else {
            self.disarm();
            return Poll::Pending;
        };
        let Some(wait) = when
            .checked_duration_since(now)
            .filter(|wait| !wait.is_zero())
        else {
            self.disarm();
            return Poll::Ready(());
        };
        if tick == self.armed_at {
            // Still armed for it: `Ready` if it has fired meanwhile.
            return self.fired(waker);
        }
        // Expirations of an earlier arming go first: the pass they call for
        // has run, is waiting for the shard's lock, or comes no earlier than
        // the one this arming calls for. Draining also registers `waker`,
        // before the new deadline is set, so that a deadline that passes at
        // once is an event tokio delivers to it.
        self.drain(waker);
        let at = add(clock_gettime(ClockId::Monotonic), wait);
        if self.set(at).is_err() {
            // Cannot happen with a valid fd and deadline; the tokio alarm,
            // where there is one, is still there.
            self.armed_at = NEVER;
            return Poll::Pending;
        }
        self.armed_at = tick;
        Poll::Pending
    }

    /// Whether the fd has fired: consumes the expiration if so, and
    /// otherwise registers `waker` for it.
    fn fired(&mut self, waker: &Waker) -> Poll<()> {
        let mut cx = Context::from_waker(waker);
        while let Poll::Ready(Ok(mut ready)) = self.fd.poll_read_ready(&mut cx) {
            let read = rustix::io::read(self.fd.get_ref(), &mut [0u8; 8]);
            ready.clear_ready();
            if read.is_ok() {
                self.armed_at = NEVER;
                return Poll::Ready(());
            }
            // Readiness without an expiration: look again, which registers
            // `waker` once there is none.
        }
        Poll::Pending
    }

    /// Consumes whatever expirations and readiness the fd holds, and
    /// registers `waker` for the next.
    fn drain(&mut self, waker: &Waker) {
        let mut cx = Context::from_waker(waker);
        while let Poll::Ready(Ok(mut ready)) = self.fd.poll_read_ready(&mut cx) {
            let _ = rustix::io::read(self.fd.get_ref(), &mut [0u8; 8]);
            ready.clear_ready();
        }
    }

    fn disarm(&mut self) {
        if self.armed_at != NEVER {
            let _ = self.set(Timespec {
                tv_sec: 0,
                tv_nsec: 0,
            });
            self.armed_at = NEVER;
        }
    }

    /// Arms the fd for the absolute `CLOCK_MONOTONIC` time `at`; zero
    /// disarms it.
    fn set(&self, at: Timespec) -> io::Result<()> {
        let zero = Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        let spec = Itimerspec {
            it_interval: zero,
            it_value: at,
        };
        timerfd_settime(self.fd.get_ref(), TimerfdTimerFlags::ABSTIME, &spec)?;
        Ok(())
    }
}

/// `at` plus `wait`, saturating far in the future.
fn add(at: Timespec, wait: Duration) -> Timespec {
    let nanos = at.tv_nsec + i64::from(wait.subsec_nanos());
    let secs = i64::try_from(wait.as_secs())
        .ok()
        .and_then(|secs| at.tv_sec.checked_add(secs))
        .and_then(|secs| secs.checked_add(nanos / 1_000_000_000));
    match secs {
        Some(tv_sec) => Timespec {
            tv_sec,
            tv_nsec: nanos % 1_000_000_000,
        },
        None => Timespec {
            tv_sec: i64::MAX,
            tv_nsec: 999_999_999,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adding_a_wait_carries_the_nanoseconds_and_saturates() {
        let at = Timespec {
            tv_sec: 5,
            tv_nsec: 999_999_999,
        };
        let sum = add(at, Duration::new(1, 2));
        assert_eq!((sum.tv_sec, sum.tv_nsec), (7, 1));
        let far = add(at, Duration::MAX);
        assert_eq!(far.tv_sec, i64::MAX);
    }
}
