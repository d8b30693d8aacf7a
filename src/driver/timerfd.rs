//! A precise alarm ([`Builder::precise`](crate::Builder::precise)): a Linux
//! `timerfd` on `CLOCK_MONOTONIC`, armed for an absolute deadline and
//! registered with the runtime's IO driver, so that a shard's pass runs
//! within microseconds of its promise, not on tokio's millisecond grid.
//!
//! tokio parks its IO driver in `epoll_wait` with a millisecond timeout for
//! its own timers; a `timerfd` becoming readable ends that wait at once, and
//! the IO driver then wakes the waker registered with the fd, the same
//! waker a tokio alarm has: it runs the pass where tokio fires its own
//! timers. The pass reads the clock again and fires only what that reading
//! has reached, so the `timerfd` need not be exact: its deadline, taken
//! through two clock readings, lands a little after the tick in real time,
//! and a tokio clock up to [`REAL`] off the real one (see below) could see
//! it fire before the tick, which then fires nothing.
//!
//! `std::time::Instant`, which `tokio::time::Instant` wraps, is
//! `CLOCK_MONOTONIC` on Linux: the deadline in that clock is now's reading
//! plus how far the tick is from tokio's now. A runtime whose clock can be
//! paused (a current-thread one) keeps its tokio alarm armed too, and the
//! `timerfd` only while tokio's clock reads the real time: a paused clock
//! moves when tokio moves it (`advance`, auto-advance), which the tokio
//! alarm follows and a real-time `timerfd` cannot.

use std::future::Future;
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
use crate::error::BuildError;

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
    /// A disarmed `timerfd`; made inside the runtime's context. Fails if
    /// the kernel refuses the fd or the IO driver cannot register it, or if
    /// the runtime has shut down; tokio panics on a runtime whose IO driver
    /// is off (the builder catches that).
    pub(crate) fn new() -> Result<Timerfd, BuildError> {
        let fd = timerfd_create(
            TimerfdClockId::Monotonic,
            TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC,
        )
        .map_err(|refused| {
            BuildError::precise_unsupported(format!("the kernel refused a timerfd: {refused}"))
        })?;
        // `with_interest` is deprecated in favour of an `unsafe` function,
        // because an `AsRawFd` impl could hand tokio an fd that it then
        // closes or changes (tokio#8587); an `OwnedFd` owns its fd until it
        // is dropped, with the `AsyncFd`, so the safe one is sound here, and
        // it is there in every tokio this crate supports.
        #[allow(deprecated)]
        let fd = AsyncFd::with_interest(fd, Interest::READABLE).map_err(|refused| {
            // tokio refuses a registration on a runtime that is shutting
            // down with an error of its own, which carries no OS error
            // code; `epoll_ctl`'s refusals carry one.
            match refused.raw_os_error() {
                None => BuildError::runtime_shut_down(),
                Some(_) => BuildError::precise_unsupported(format!(
                    "the runtime's IO driver could not register a timerfd: {refused}"
                )),
            }
        })?;
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
        // Just after a `pause()`, the paused clock is still within `REAL`
        // of the real one: the fd stays armed, fires on real time, and the
        // pass finds nothing due on the paused clock and arms it again,
        // until real time has moved `REAL` past it (at most `REAL` of
        // wake-ups, once per pause).
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
        if let Err(refused) = self.set(at) {
            // Cannot happen: the fd is ours and the deadline normalised.
            // Were it to, the tokio alarm, where there is one, still calls.
            debug_assert!(false, "timerfd_settime refused {at:?}: {refused}");
            self.armed_at = NEVER;
            return Poll::Pending;
        }
        self.armed_at = tick;
        Poll::Pending
    }

    /// Whether the fd has fired: consumes the expiration if so, and
    /// otherwise registers `waker` for it.
    fn fired(&mut self, waker: &Waker) -> Poll<()> {
        outside_budget(waker, |cx| {
            while let Poll::Ready(Ok(mut ready)) = self.fd.poll_read_ready(cx) {
                let read = rustix::io::read(self.fd.get_ref(), &mut [0u8; 8]);
                ready.clear_ready();
                if read.is_ok() {
                    self.armed_at = NEVER;
                    return Poll::Ready(());
                }
                // Readiness without an expiration: look again, which
                // registers `waker` once there is none.
            }
            Poll::Pending
        })
    }

    /// Consumes whatever expirations and readiness the fd holds, and
    /// registers `waker` for the next.
    fn drain(&mut self, waker: &Waker) {
        outside_budget(waker, |cx| {
            while let Poll::Ready(Ok(mut ready)) = self.fd.poll_read_ready(cx) {
                let _ = rustix::io::read(self.fd.get_ref(), &mut [0u8; 8]);
                ready.clear_ready();
            }
        });
    }

    /// Whether it is armed for a tick.
    #[cfg(test)]
    pub(crate) fn is_armed(&self) -> bool {
        self.armed_at != NEVER
    }

    pub(crate) fn disarm(&mut self) {
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

/// Runs `look` with `waker`'s context outside tokio's coop budget. The
/// caller may be a task that has spent its budget (a loop over sleeps
/// already due), and a budget refusal in `poll_read_ready` would wake
/// `waker` on the spot, instead of registering it: the alarm's waker,
/// which runs a pass and takes the shard lock the caller holds.
fn outside_budget<R>(waker: &Waker, look: impl FnOnce(&mut Context<'_>) -> R) -> R {
    let mut look = Some(look);
    let once = std::future::poll_fn(|cx| Poll::Ready(look.take().map(|look| look(cx))));
    let mut cx = Context::from_waker(waker);
    match std::pin::pin!(tokio::task::unconstrained(once)).poll(&mut cx) {
        Poll::Ready(Some(looked)) => looked,
        _ => unreachable!("a poll_fn that is ready at once, polled once"),
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// A current-thread runtime on the real clock, as `#[tokio::main]`
    /// builds one.
    fn current_thread() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    /// A current-thread runtime keeps its tokio alarm beside the fd (for a
    /// paused clock), which would hide an fd that is never armed: on the
    /// real clock, a registration arms the fd too.
    #[test]
    fn on_a_current_thread_runtime_a_registration_arms_the_timerfd() {
        let _watchdog = crate::driver::tests::watchdog();
        let rt = current_thread();
        rt.block_on(async {
            let timer = crate::Timer::builder()
                .tick(Duration::from_micros(50))
                .precise()
                .build()
                .unwrap();
            let armed = || {
                let shards = timer.driver().shards();
                shards
                    .iter()
                    .any(|shard| shard.lock().alarm.is_timerfd_armed())
            };
            assert!(!armed());
            let mut sleep = tokio_test::task::spawn(timer.sleep(Duration::from_secs(10)));
            tokio_test::assert_pending!(sleep.poll());
            assert!(armed(), "only the tokio alarm was armed");
        });
    }

    /// On a current-thread runtime whose clock runs, the fd says when a
    /// tick has come (the tokio alarm kept beside it, for a paused clock,
    /// would call only once tokio's driver has processed its millisecond):
    /// armed for a tick 300 µs away, then again once real time has passed
    /// it, the alarm is ready though the runtime has not parked.
    #[test]
    fn on_a_running_current_thread_clock_the_timerfd_says_a_tick_has_come() {
        let _watchdog = crate::driver::tests::watchdog();
        current_thread().block_on(async {
            let timer = crate::Timer::builder()
                .tick(Duration::from_micros(50))
                .precise()
                .build()
                .unwrap();
            let time = timer.driver().time();
            let tick = time.clock().now_tick(time.now()) + 6;
            let mut inner = timer.driver().shards()[0].lock();
            assert!(inner.alarm.arm(tick, 0).is_pending());
            std::thread::sleep(Duration::from_millis(2));
            assert!(
                inner.alarm.arm(tick, 0).is_ready(),
                "left to the tokio alarm"
            );
        });
    }

    /// A paused clock that has moved off the real one leaves the fd
    /// disarmed: armed, it would fire on real time, into passes that find
    /// nothing due on the paused clock, and again each time it was re-armed.
    #[test]
    fn on_a_paused_clock_off_the_real_one_a_registration_leaves_the_timerfd_disarmed() {
        let _watchdog = crate::driver::tests::watchdog();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .unwrap();
        rt.block_on(async {
            tokio::time::advance(Duration::from_secs(3600)).await;
            let timer = crate::Timer::builder()
                .tick(Duration::from_micros(50))
                .precise()
                .build()
                .unwrap();
            let mut sleep = tokio_test::task::spawn(timer.sleep(Duration::from_secs(10)));
            tokio_test::assert_pending!(sleep.poll());
            let armed = timer
                .driver()
                .shards()
                .iter()
                .any(|shard| shard.lock().alarm.is_timerfd_armed());
            assert!(!armed, "armed on real time for a paused clock's deadline");
        });
    }

    /// Only a runtime whose clock can be paused (a current-thread one)
    /// keeps a tokio alarm beside the fd: on a multi-thread runtime it
    /// would wake tokio's driver a second time for every deadline.
    #[test]
    fn only_a_current_thread_runtime_keeps_a_tokio_alarm_too() {
        let _watchdog = crate::driver::tests::watchdog();
        for workers in [0, 2] {
            let mut builder = if workers == 0 {
                tokio::runtime::Builder::new_current_thread()
            } else {
                let mut builder = tokio::runtime::Builder::new_multi_thread();
                builder.worker_threads(workers);
                builder
            };
            let rt = builder.enable_all().build().unwrap();
            let keeps = rt.block_on(async {
                let timer = crate::Timer::builder().precise().build().unwrap();
                let shards = timer.driver().shards();
                shards
                    .iter()
                    .all(|shard| shard.lock().alarm.keeps_tokio_alarm())
            });
            assert_eq!(keeps, workers == 0, "{workers} workers");
        }
    }

    /// The builder's slack, in whole ticks plus one: 100 µs (the default)
    /// on a 50 µs tick spaces passes 3 ticks apart; a slack under a tick
    /// spaces nothing; more than a second is a second.
    #[test]
    fn the_slack_becomes_whole_ticks_plus_one_at_most_a_second() {
        let _watchdog = crate::driver::tests::watchdog();
        let rt = current_thread();
        let tick = Duration::from_micros(50);
        let spacing = |slack: Option<Duration>| {
            rt.block_on(async {
                let builder = crate::Timer::builder().tick(tick).precise();
                let builder = match slack {
                    Some(slack) => builder.slack(slack),
                    None => builder,
                };
                let timer = builder.build().unwrap();
                let shard = &timer.driver().shards()[0];
                let spacing = shard.lock().alarm.spacing();
                spacing.unwrap()
            })
        };
        assert_eq!(spacing(None), 3);
        assert_eq!(spacing(Some(Duration::ZERO)), 1);
        assert_eq!(spacing(Some(Duration::from_micros(49))), 1);
        assert_eq!(spacing(Some(Duration::from_micros(50))), 2);
        assert_eq!(spacing(Some(Duration::from_micros(149))), 3);
        assert_eq!(spacing(Some(Duration::from_secs(1))), 20_001);
        assert_eq!(spacing(Some(Duration::MAX)), 20_001);
    }

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
