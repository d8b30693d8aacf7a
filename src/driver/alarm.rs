//! How a shard asks to be driven ([`Alarm`]), on its own copy of the
//! timer's [`Time`].
//!
//! A runtime shard's alarm is a tokio `Sleep` armed for the shard's next
//! expiration; its waker runs the shard's pass where tokio fires its own
//! timers. A manual shard's alarm is nothing: `Timer::advance` runs the
//! passes. Under loom a manual timer's shards stand in for a runtime's
//! (tokio cannot run there), with the models playing tokio's part: they
//! fire a shard once the model clock reaches its promise, and run the pass a
//! `Shard::kick` asked for.
//!
//! The tokio `Sleep` is made once, with the shard, and reset each time the
//! alarm is armed: resetting it touches no reference count every worker
//! shares (making one does: it clones the runtime's handle). Resetting a
//! registered tokio timer to a moment tokio has already passed calls its
//! waker on the spot, inside the shard's lock: that wake is recognised
//! ([`ARMING`]) and runs nothing, and the arming, which sees `Ready`, acts.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Wake, Waker};

use tokio::time::Instant;

use super::time::{can_enter, Time};
#[cfg(all(feature = "precise", target_os = "linux"))]
use super::timerfd::Timerfd;
use super::{Shard, NEVER};
use crate::sync::{Arc, Weak};

/// What calls a shard's pass when its promise comes due.
pub(crate) enum Alarm {
    /// A runtime shard's: one tokio timer, reset each time the alarm is
    /// armed, whose waker runs the shard's pass.
    Tokio(TokioAlarm),
    /// A manual shard's: `Timer::advance` runs its passes.
    #[cfg(not(loom))]
    Manual,
    /// Under loom, a manual shard's alarm is this model of a tokio one: it
    /// records what a tokio timer would be armed for and whether a pass was
    /// kicked, and the models play tokio with it.
    #[cfg(loom)]
    Model {
        time: Time,
        armed: u64,
        kicked: bool,
    },
    /// A precise runtime shard's (`Builder::precise`): a `timerfd`, and the
    /// tokio timer as well where the clock can be paused (see `timerfd.rs`).
    #[cfg(all(feature = "precise", target_os = "linux"))]
    Precise(Box<Precise>),
    /// Shut down: never armed again.
    Off,
}

/// A precise shard's alarm: see `timerfd.rs`.
#[cfg(all(feature = "precise", target_os = "linux"))]
pub(crate) struct Precise {
    time: Time,
    fd: Timerfd,
    /// On a runtime whose clock can be paused: the tokio timer, which
    /// follows that clock.
    tokio: Option<TokioAlarm>,
    waker: Waker,
    /// `Builder::slack` in whole ticks, plus one: see [`spaced`].
    spacing: u64,
}

/// The tick to arm a precise alarm's fd for, to fire `tick` (due after
/// tick `now`) when the shard's last pass ran in tick `last_pass`: no sooner
/// than the first multiple of `spacing` after that pass, so that one
/// wake-up fires what comes due meanwhile, and a timer's shards, sharing the
/// multiples, go off together (one thread wake-up for all their fds). A
/// lone timer, due after that multiple, is not delayed. A tick already due
/// stays due: the pass goes round again at once, with no wake-up to save.
/// `last_pass` 0 is the timer's start, before any pass: nothing to space from
/// (were a pass to run in tick 0, one wake-up is all that is lost).
#[cfg(any(test, all(feature = "precise", target_os = "linux")))]
fn spaced(tick: u64, now: u64, last_pass: u64, spacing: u64) -> u64 {
    if tick == NEVER || tick <= now || last_pass == 0 {
        return tick;
    }
    let next_multiple = (last_pass / spacing)
        .saturating_add(1)
        .saturating_mul(spacing);
    tick.max(next_multiple.min(NEVER - 1))
}

/// A runtime shard's tokio timer.
pub(crate) struct TokioAlarm {
    time: Time,
    sleep: Pin<Box<tokio::time::Sleep>>,
    /// The tick it is armed for and has not fired, or `NEVER`.
    armed_at: u64,
    /// Runs the shard's pass; weak, so an armed alarm does not keep the
    /// shard alive.
    waker: Waker,
    /// The shard's address, for [`ARMING`].
    shard: usize,
}

std::thread_local! {
    /// The shard whose tokio alarm this thread is arming, if any. Resetting
    /// a registered tokio timer to a moment tokio has already passed calls
    /// its waker on the spot, here with the shard's lock held: that wake
    /// must not run a pass (which would take the lock again). The arming
    /// sees `Ready` instead, and acts on it.
    static ARMING: Cell<usize> = const { Cell::new(0) };
}

impl Alarm {
    /// A runtime shard's alarm on `time`, disarmed; made inside the
    /// runtime's context (creating the tokio timer registers nothing).
    pub(crate) fn tokio(shard: Weak<Shard>, time: Time) -> Alarm {
        Alarm::Tokio(TokioAlarm::new(shard, time))
    }

    /// A precise runtime shard's alarm around `fd`, disarmed; made inside
    /// the runtime's context. Where the runtime's clock can be paused, the
    /// tokio timer is kept as well.
    #[cfg(all(feature = "precise", target_os = "linux"))]
    pub(crate) fn precise(fd: Timerfd, shard: Weak<Shard>, time: Time, spacing: u64) -> Alarm {
        let tokio = time
            .is_pausable()
            .then(|| TokioAlarm::new(shard.clone(), time.clone()));
        Alarm::Precise(Box::new(Precise {
            time,
            fd,
            tokio,
            waker: Waker::from(Arc::new(AlarmWaker(shard))),
            spacing,
        }))
    }

    /// A manual shard's alarm (under loom, the model of a tokio one).
    pub(crate) fn manual(time: &Time) -> Alarm {
        #[cfg(not(loom))]
        {
            let _ = time;
            Alarm::Manual
        }
        #[cfg(loom)]
        Alarm::Model {
            time: time.clone(),
            armed: NEVER,
            kicked: false,
        }
    }

    /// Arms the alarm for `tick` (`NEVER`: nothing), the shard's last pass
    /// having run in tick `last_pass`. `Ready` if that moment has already
    /// come by the clock the alarm waits on, and the alarm will not call:
    /// the caller runs a pass (a pass goes round again) or `Shard::kick`s
    /// one.
    pub(crate) fn arm(&mut self, tick: u64, last_pass: u64) -> Poll<()> {
        #[cfg(not(all(feature = "precise", target_os = "linux")))]
        let _ = last_pass;
        match self {
            Alarm::Tokio(alarm) => alarm.arm(tick),
            #[cfg(all(feature = "precise", target_os = "linux"))]
            Alarm::Precise(precise) => {
                let time = &precise.time;
                // Where the clock cannot be read (in a thread-local's
                // destructor), the fd, armed from a reading, is disarmed:
                // the clock is then a pausable runtime's, whose tokio
                // alarm, kept beside the fd, calls.
                let Some(now) = time.try_now() else {
                    precise.fd.disarm();
                    return match &mut precise.tokio {
                        Some(alarm) => alarm.arm(tick),
                        None => Poll::Pending,
                    };
                };
                let fd = precise.fd.arm(
                    spaced(tick, time.clock().now_tick(now), last_pass, precise.spacing),
                    time.clock(),
                    now,
                    !time.is_pausable(),
                    &precise.waker,
                );
                let tokio = match &mut precise.tokio {
                    Some(alarm) => alarm.arm(tick),
                    None => Poll::Pending,
                };
                // The fd keeps real time, from an arming that took the
                // clock to run with it. Where tokio can pause the clock
                // that may not hold: paused since (within `REAL` of the
                // pause it fires before the clock has moved), or paused
                // then and resumed since (the clock lags the real one by
                // the pause). The pass takes a `Ready` here as final, so
                // the fd's counts only on a clock read again that runs
                // (a still one is the tokio alarm's to decide) and has
                // reached the tick; otherwise the tokio alarm, armed for
                // it above, calls.
                let fd = fd.is_ready()
                    && (!time.is_pausable()
                        || time.try_now().is_some_and(|again| {
                            again != now && time.clock().now_tick(again) >= tick
                        }));
                if fd || tokio.is_ready() {
                    Poll::Ready(())
                } else {
                    Poll::Pending
                }
            }
            #[cfg(not(loom))]
            Alarm::Manual => Poll::Pending,
            #[cfg(loom)]
            Alarm::Model { time, armed, .. } => {
                if tick != NEVER && tick <= time.clock().now_tick(time.now()) {
                    *armed = NEVER;
                    Poll::Ready(())
                } else {
                    *armed = tick;
                    Poll::Pending
                }
            }
            Alarm::Off => Poll::Pending,
        }
    }

    /// A precise alarm whose `timerfd` is armed.
    #[cfg(all(test, feature = "precise", target_os = "linux"))]
    pub(crate) fn is_timerfd_armed(&self) -> bool {
        matches!(self, Alarm::Precise(precise) if precise.fd.is_armed())
    }

    /// A precise alarm's spacing (`Builder::slack` in whole ticks, plus one).
    #[cfg(all(test, feature = "precise", target_os = "linux"))]
    pub(crate) fn spacing(&self) -> Option<u64> {
        match self {
            Alarm::Precise(precise) => Some(precise.spacing),
            _ => None,
        }
    }

    /// A precise alarm that keeps a tokio timer beside its `timerfd`.
    #[cfg(all(test, feature = "precise", target_os = "linux"))]
    pub(crate) fn keeps_tokio_alarm(&self) -> bool {
        matches!(self, Alarm::Precise(precise) if precise.tokio.is_some())
    }
}

impl TokioAlarm {
    /// Disarmed; made inside the runtime's context.
    fn new(shard: Weak<Shard>, time: Time) -> TokioAlarm {
        TokioAlarm {
            time,
            sleep: Box::pin(tokio::time::sleep_until(Instant::now())),
            armed_at: NEVER,
            shard: Weak::as_ptr(&shard) as usize,
            waker: Waker::from(Arc::new(AlarmWaker(shard))),
        }
    }

    fn arm(&mut self, tick: u64) -> Poll<()> {
        if tick == self.armed_at && !self.sleep.is_elapsed() {
            return Poll::Pending;
        }
        self.armed_at = NEVER;
        let when = (tick != NEVER).then(|| self.time.clock().instant_at(tick));
        let Some(when) = when.flatten() else {
            // Nothing, or beyond what `Instant` holds: it never comes. The
            // tokio timer may still be registered for an earlier arming
            // (one a cancel left, or a precise alarm's fd or a kicked pass
            // overtook). Where the clock can be paused it is replaced by
            // one never registered, so that auto-advance does not jump to
            // it (tokio counts every registered timer). Elsewhere it is
            // kept: it fires into a pass that finds nothing, where a new one
            // would clone the runtime's handle at the next arming, a count
            // every worker writes. It is kept too where tokio's context is
            // gone (a `Sleep` dropped by a thread-local's destructor), as
            // `Handle::enter` panics there.
            if self.time.is_pausable() && !self.sleep.is_elapsed() && can_enter() {
                if let Some(handle) = self.time.handle() {
                    let _its_clock = handle.enter();
                    self.sleep = Box::pin(tokio::time::sleep_until(Instant::now()));
                }
            }
            return Poll::Pending;
        };
        let _arming = Arming::enter(self.shard);
        self.sleep.as_mut().reset(when);
        // Unconstrained: the caller may be a task that has spent its coop
        // budget, and a budget refusal would not register it.
        let polled = Pin::new(&mut tokio::task::unconstrained(self.sleep.as_mut()))
            .poll(&mut Context::from_waker(&self.waker));
        if polled.is_pending() {
            self.armed_at = tick;
        }
        polled
    }
}

/// Marks this thread as arming a shard's alarm until dropped: see
/// [`ARMING`].
struct Arming(usize);

impl Arming {
    fn enter(shard: usize) -> Arming {
        Arming(ARMING.try_with(|arming| arming.replace(shard)).unwrap_or(0))
    }
}

impl Drop for Arming {
    fn drop(&mut self) {
        let _ = ARMING.try_with(|arming| arming.set(self.0));
    }
}

/// The tokio alarm's waker: runs the shard's pass, unless this thread is
/// arming that very alarm (see [`ARMING`]).
struct AlarmWaker(Weak<Shard>);

impl Wake for AlarmWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let me = Weak::as_ptr(&self.0) as usize;
        if ARMING
            .try_with(|arming| arming.get() == me)
            .unwrap_or(false)
        {
            return;
        }
        if let Some(shard) = self.0.upgrade() {
            shard.pass();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{spaced, NEVER};

    #[test]
    fn a_tick_is_spaced_to_the_first_multiple_after_the_last_pass() {
        // Spacing 3, the last pass in tick 10: the next multiple is 12.
        assert_eq!(spaced(11, 10, 10, 3), 12);
        assert_eq!(spaced(12, 10, 10, 3), 12);
        // A pass on a multiple waits for the next one.
        assert_eq!(spaced(13, 12, 12, 3), 15);
        // Beyond the multiple, a lone tick is its own.
        assert_eq!(spaced(14, 10, 10, 3), 14);
        // The clock may be past the last pass (a registration's arming).
        assert_eq!(spaced(101, 100, 10, 3), 101);
        // Before the first pass, nothing is spaced.
        assert_eq!(spaced(2, 1, 0, 3), 2);
        // Spacing 1 (no slack) changes nothing.
        assert_eq!(spaced(11, 10, 10, 1), 11);
    }

    #[test]
    fn a_due_tick_and_never_are_left_alone_and_nothing_overflows() {
        assert_eq!(spaced(10, 10, 9, 3), 10);
        assert_eq!(spaced(5, 10, 9, 3), 5);
        assert_eq!(spaced(NEVER, 10, 9, 3), NEVER);
        assert_eq!(spaced(11, 10, 10, u64::MAX), NEVER - 1);
        assert_eq!(spaced(NEVER - 1, NEVER - 2, NEVER - 2, 7), NEVER - 1);
    }
}
