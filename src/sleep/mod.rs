//! [`Sleep`], and the [`sleep`]/[`sleep_until`] constructors.

mod binding;
mod checked;
mod state;

pub use checked::CheckedSleep;

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::Instant;

use crate::driver::{
    real_now, registry, Deadline, Polled, Registrant, Registration, Reset, Shard, WakerId,
};
use crate::error::{BuildError, Error};
use crate::sync::Arc;
use state::{Packed, State};

/// Waits until `duration` has elapsed, on the current runtime's default timer.
///
/// The drop-in for `tokio::time::sleep`. The deadline is `Instant::now() +
/// duration`, a duration over 30 years counting as 30 years (as tokio's
/// does), and is rounded up to the timer's 125 µs tick: the sleep never
/// completes early, and at most one tick plus scheduling late (tokio's
/// timer, which the timer's alarm waits on, rounds up to its own
/// millisecond).
///
/// Nothing is registered until the first poll (or a
/// [`reset`](Sleep::reset)). A deadline whose tick the timer has already
/// processed, or whose tick has come by the clock when it is the timer's
/// earliest (the only case in which that poll reads the clock), completes at
/// once; any other is registered and completes when its tick comes, which
/// for a deadline that has just passed is by the next tick. tokio does the
/// same on its millisecond grid. On a paused clock the ticks due are those
/// of tokio's milliseconds processed, so the sleep completes at the instant
/// tokio's would; on a running clock this grid is finer, and a deadline
/// just passed may complete at once where tokio's waits for its next
/// millisecond.
///
/// **The binding rule:** a sleep (or `timeout`, or `interval`) made inside
/// a runtime's context belongs to that runtime's default timer, and its
/// deadline counts from that timer's clock, as tokio's does, whatever
/// thread or task makes it (`Handle::enter`, `block_in_place`,
/// `spawn_blocking` and a nested `block_on` included). Made outside any
/// runtime (where tokio's panics), it is bound to the default timer of the
/// runtime it is first polled (or reset) in, and what was left of its
/// duration by the real clock counts from that runtime's clock (a paused
/// one, or a `TestRuntime`'s, may be hours from the real one); so does a
/// [`timeout`](crate::timeout())'s, and an [`interval`](crate::interval())'s
/// first tick is due at once there. (Made in a runtime with no timer,
/// built without or shut down, it is unbound too, and counts from the
/// real clock as outside.) An instant given ([`sleep_until`],
/// [`timeout_at`](crate::timeout_at()), [`Sleep::reset`]) stays that
/// instant, except on a `TestRuntime`'s clock, whose instants are not
/// tokio's: there it too counts the time it had left.
///
/// # Panics
///
/// Polling the returned [`Sleep`] before its deadline panics outside a tokio
/// runtime (with timers enabled).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let start = wheel::Instant::now();
/// wheel::sleep(Duration::from_millis(100)).await;
/// assert_eq!(start.elapsed(), Duration::from_millis(100));
/// # }
/// ```
pub fn sleep(duration: Duration) -> Sleep {
    let (shard, now) = bind();
    Sleep::counted(shard, Deadline::after_capped(now, duration))
}

/// The current runtime's default timer's shard for a sleep made now, and
/// the time on that timer's clock; outside a runtime (or in one with no
/// timer: without timers, or shut down), none yet (the first poll binds
/// it) and the real clock's time, whatever tokio's clock reads there.
#[inline]
pub(crate) fn bind() -> (Option<Arc<Shard>>, Instant) {
    match registry::default_binding() {
        Ok((shard, now)) => (Some(shard), now),
        Err(_) => (None, real_now()),
    }
}

/// Waits until `deadline`, on the current runtime's default timer.
///
/// The drop-in for `tokio::time::sleep_until`; see [`sleep`].
///
/// # Examples
///
/// ```
/// use std::time::Duration;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let deadline = wheel::Instant::now() + Duration::from_secs(3);
/// wheel::sleep_until(deadline).await;
/// assert_eq!(wheel::Instant::now(), deadline);
/// # }
/// ```
pub fn sleep_until(deadline: Instant) -> Sleep {
    Sleep::new(registry::default_shard().ok(), deadline)
}

/// A future that completes at a deadline; made by [`sleep`], [`sleep_until`]
/// or a [`Timer`](crate::Timer).
///
/// Unlike `tokio::time::Sleep`, this type is `Unpin` (its wheel entry lives
/// in the timer, not in the future), so it can be polled or `select!`ed by
/// `&mut` without pinning, and it is small: a deadline, an entry key, and
/// the part of its timer it is registered in.
///
/// Dropping a pending `Sleep` removes its entry from the wheel.
///
/// A waker that panics when the timer wakes it does not disturb the timer:
/// the panic is caught there, and every other sleep is still woken.
///
/// # Panics
///
/// Polling panics if the sleep is pending when its timer has shut down
/// ([`Timer::shutdown`](crate::Timer::shutdown), its runtime shut down, or a
/// [`manual`](crate::Builder::manual) timer lost its last `Timer`) and its deadline has not
/// passed: the timer can no longer fire it, completing it would be early,
/// and waiting would hang. (Once the deadline has passed, by the timer's
/// clock, it completes.) The
/// message says so, as `tokio::time::Sleep`'s does. A sleep of the default
/// timer first polled outside any runtime before its deadline panics
/// likewise, and so does the
/// first poll of a sleep made by [`Timer::sleep`](crate::Timer::sleep) on a timer at its
/// [`max_pending`](crate::Builder::max_pending) limit
/// ([`Timer::try_sleep`](crate::Timer::try_sleep) returns that error instead).
/// [`checked`](Sleep::checked) reports a shutdown, or that limit, as an
/// error instead of panicking.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let mut sleep = wheel::sleep(Duration::from_secs(10));
/// tokio::select! {
///     _ = &mut sleep => unreachable!("the other branch is ready first"),
///     _ = wheel::sleep(Duration::from_secs(1)) => {}
/// }
/// assert!(!sleep.is_elapsed());
/// # }
/// ```
#[must_use = "futures do nothing unless you `.await` or poll them"]
pub struct Sleep {
    /// The shard of its timer the sleep registers in: the creating thread's
    /// (or, for the default timer, not bound until first registered).
    shard: Option<Arc<Shard>>,
    /// The deadline and the registration, in 32 bytes (see `state.rs`).
    state: Packed,
}

impl Sleep {
    pub(crate) fn new(shard: Option<Arc<Shard>>, deadline: Instant) -> Sleep {
        Sleep::at(shard, Deadline::from_instant(deadline))
    }

    /// Whether the deadline is [`Deadline::NEVER`], so that nothing will
    /// ever fire the sleep: a `Timeout` made so has no deadline.
    #[inline]
    pub(crate) fn never_fires(&self) -> bool {
        self.state.near_deadline().is_none() && self.state.deadline() == Deadline::NEVER
    }

    /// [`new`](Sleep::new), with the deadline already converted.
    #[inline]
    pub(crate) fn at(shard: Option<Arc<Shard>>, deadline: Deadline) -> Sleep {
        Sleep {
            shard,
            state: Packed::idle(deadline),
        }
    }

    /// A sleep that has already completed at `deadline`: an interval's first
    /// tick, due at once, which so needs neither the wheel nor its rounding
    /// up to the tick.
    pub(crate) fn elapsed_at(shard: Option<Arc<Shard>>, deadline: Instant) -> Sleep {
        let mut sleep = Sleep::new(shard, deadline);
        sleep.state.set(State::Elapsed);
        sleep
    }

    /// A sleep that [`Timer::try_sleep_until`] registered eagerly for
    /// `deadline`.
    pub(crate) fn registered(
        shard: Arc<Shard>,
        deadline: Deadline,
        registration: Registration,
    ) -> Result<Sleep, Error> {
        let mut sleep = Sleep {
            shard: Some(shard),
            state: Packed::idle(deadline),
        };
        sleep.state.set(match registration {
            Registration::Pending(key, waker) => State::Registered { key, waker },
            Registration::Elapsed => State::Elapsed,
            Registration::Refused(error) => return Err(error),
        });
        Ok(sleep)
    }

    /// The instant at which the sleep completes (before rounding up to the
    /// timer's tick).
    ///
    /// A `Sleep` keeps its deadline as 72-bit nanoseconds: an instant more
    /// than about 74,800 years after the process first made one reads as
    /// that (and never comes); see "Overflow" in `docs/DESIGN.md`.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let deadline = wheel::Instant::now() + std::time::Duration::from_secs(1);
    /// assert_eq!(wheel::sleep_until(deadline).deadline(), deadline);
    /// # }
    /// ```
    pub fn deadline(&self) -> Instant {
        self.state.deadline().instant()
    }

    /// Whether the sleep has completed.
    ///
    /// That is: it returned `Ready`, or its timer has fired it and the next
    /// poll will (as it will once the deadline has passed on a timer that has
    /// shut down before firing it).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let mut sleep = wheel::sleep(std::time::Duration::from_millis(5));
    /// assert!(!sleep.is_elapsed());
    /// (&mut sleep).await;
    /// assert!(sleep.is_elapsed());
    /// # }
    /// ```
    pub fn is_elapsed(&self) -> bool {
        match (self.state.get(), &self.shard) {
            (State::Elapsed | State::Fired, _) => true,
            // After shutdown, `published` is at its end, so this asks
            // `has_fired`, which knows about shutdown.
            (State::Registered { key, .. }, Some(shard)) => {
                !self.surely_pending(shard) && shard.has_fired(key, self.state.deadline())
            }
            _ => false,
        }
    }

    /// Moves the deadline, whether the sleep is pending or has completed
    /// (it then completes again at the new deadline).
    ///
    /// A registered sleep keeps
    /// its entry and its waker: a task waiting on it is woken at the new
    /// deadline without polling it again, and at once if that has passed.
    /// As with tokio's, a sleep not registered (never polled, or completed)
    /// is registered by the reset, so [`is_elapsed`](Sleep::is_elapsed)
    /// turns true at the new deadline whether or not it is polled. Reset
    /// after completing, it wakes no task until it is polled again (tokio's
    /// wakes the task that polled it last). A sleep of the default timer
    /// that is reset outside any runtime, before its
    /// first poll, waits for that poll instead. A reset to a deadline that
    /// has passed counts as a fire in [`Timer::stats`](crate::Timer::stats).
    ///
    /// After the timer's runtime has shut down, a sleep reset to a deadline
    /// that has not passed is pending again, even if it had fired: polling
    /// it then panics (see [`Sleep`]) rather than completing early. One
    /// reset to a deadline that has passed completes.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let start = wheel::Instant::now();
    /// let mut sleep = std::pin::pin!(wheel::sleep(Duration::from_secs(60)));
    /// sleep.as_mut().reset(start + Duration::from_millis(10));
    /// sleep.await;
    /// assert_eq!(start.elapsed(), Duration::from_millis(10));
    /// # }
    /// ```
    pub fn reset(self: Pin<&mut Self>, deadline: Instant) {
        self.get_mut()
            .reset_to(Deadline::from_instant(deadline), false);
    }

    /// [`reset`](Sleep::reset) to a deadline the caller has read the clock
    /// and found passed: the sleep completes now, rather than at the end of
    /// the tick the deadline rounds up to (an interval's
    /// `reset_immediately` on a coarse timer), and a task waiting on it is
    /// woken.
    pub(crate) fn reset_passed(&mut self, deadline: Instant) {
        self.reset_to(Deadline::from_instant(deadline), true);
    }

    /// [`reset`](Sleep::reset), with the deadline already converted;
    /// `passed` as in [`reset_passed`](Sleep::reset_passed).
    #[inline(always)]
    fn reset_to(&mut self, deadline: Deadline, passed: bool) {
        let Some(shard) = &self.shard else {
            return self.reset_unbound(deadline, passed);
        };
        let tick = shard.clock().tick_of(deadline);
        self.state.set_deadline(deadline);
        match self.state.get() {
            State::Registered { key, waker } => match shard.reset(key, deadline, tick, passed) {
                // The common case (the entry still holds the waker, or none
                // was known) leaves the state as it was.
                Reset::Pending { holds_waker } => {
                    if waker.is_some() && !holds_waker {
                        self.state.set(State::Registered { key, waker: None });
                    }
                }
                Reset::Fired => self.state.set(State::Fired),
                Reset::Refused => self.state.set(State::Idle),
            },
            // Completed, or never polled: registered afresh, with no waker
            // (a completed tokio sleep keeps its last poll's: a difference,
            // `tests/differences.rs`), so that `is_elapsed` turns true at
            // the new deadline whether or not it is polled. Completing at
            // once counts as a fire, as a reset into the past does.
            State::Idle | State::Fired | State::Elapsed => {
                let state = match shard.register(deadline, tick, Registrant::Reset { passed }) {
                    Registration::Pending(key, waker) => State::Registered { key, waker },
                    Registration::Elapsed => State::Fired,
                    // Shut down or full: the next poll registers again and
                    // panics, saying which.
                    Registration::Refused(_) => State::Idle,
                };
                self.state.set(state);
            }
        }
    }

    /// Resets the deadline without keeping the sleep registered: the next
    /// poll registers it afresh. Cheaper than [`reset`](Sleep::reset) when
    /// the caller is about to poll anyway (an interval that just ticked, a
    /// `Timeout` setting its deadline at its first wait).
    pub(crate) fn reset_unregistered(&mut self, deadline: Instant) {
        self.release();
        self.state.set_deadline(Deadline::from_instant(deadline));
        // A `Timeout` made outside any runtime keeps its mark.
        self.state.set_idle();
    }

    /// Frees the wheel entry, if this sleep has one: a registered sleep's,
    /// pending or fired (the driver leaves a fired entry to its sleep).
    #[inline(never)]
    fn release(&mut self) {
        if let (State::Registered { key, .. }, Some(shard)) = (self.state.get(), &self.shard) {
            shard.cancel(key, shard.clock().tick_of(self.state.deadline()));
        }
    }

    /// Whether `shard`, this sleep's, has certainly not fired its entry, as
    /// told without the lock.
    #[inline]
    fn surely_pending(&self, shard: &Shard) -> bool {
        // `near_deadline` is the cheap half; the whole deadline is only
        // assembled for one more than 292 years from the base.
        shard.surely_pending(self.state.near_deadline(), || self.state.deadline())
    }

    /// The shard the sleep is bound to, if it is yet.
    #[cfg(feature = "hyper")]
    pub(crate) fn shard(&self) -> Option<&Arc<Shard>> {
        self.shard.as_ref()
    }

    /// The time on this sleep's timer's clock. Before a default-timer
    /// sleep is bound, the clock of the timer a reset or poll here would
    /// bind it to: the current runtime's default timer's (a `TestRuntime`'s
    /// test clock, not `Instant::now()`), and tokio's outside any runtime.
    pub(crate) fn now(&self) -> Instant {
        self.shard
            .as_ref()
            .map_or_else(crate::now, |shard| shard.now())
    }

    /// The tick of this sleep's timer (the default timer's before it is bound).
    pub(crate) fn tick(&self) -> Duration {
        self.shard
            .as_ref()
            .map_or(crate::DEFAULT_TICK, |shard| shard.clock().tick())
    }
}

/// Shows the deadline, the state and the timer's tick.
///
/// The state is `unregistered` (not yet polled, or reset since it
/// completed), `pending`, `fired` (due, completing at its next poll) or
/// `completed`; before a default-timer sleep is bound to its runtime's
/// timer, `timer: default, not yet bound` stands for the tick.
impl std::fmt::Debug for Sleep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match self.state.get() {
            State::Idle => "unregistered",
            State::Registered { .. } if self.is_elapsed() => "fired",
            State::Registered { .. } => "pending",
            State::Fired => "fired",
            State::Elapsed => "completed",
        };
        let mut debug = f.debug_struct("Sleep");
        debug
            .field("deadline", &self.deadline())
            .field("state", &state);
        match &self.shard {
            Some(shard) => debug.field("tick", &shard.clock().tick()),
            None => debug.field("timer", &format_args!("default, not yet bound")),
        };
        debug.finish()
    }
}

/// The panic of a default-timer sleep polled where there is no default
/// timer. `BuildError`'s own message for a missing runtime suggests
/// `Builder::runtime`, which the free functions do not take.
#[cold]
fn no_default_timer(error: BuildError) -> ! {
    if error.is_no_runtime() && !error.is_runtime_shut_down() {
        panic!(
            "wheel: a Sleep, Timeout or Interval of the default timer (made by \
             wheel::sleep, timeout, interval, ...) was polled outside a tokio runtime \
             before its deadline: poll it inside a runtime, or make it with a Timer \
             built with Builder::runtime"
        )
    }
    panic!("wheel: cannot register a Sleep on the runtime's default timer: {error}")
}

fn refused(error: Error) -> ! {
    panic!("wheel: this Sleep can never complete: {error}")
}

impl Future for Sleep {
    type Output = ();

    /// Completing spends one unit of tokio's cooperative budget, as with
    /// `tokio::time`'s `Sleep`: once a task has spent it all (128 futures
    /// that made progress), this returns `Pending` instead, and the task is
    /// woken at once, so a loop over sleeps that are already due (an
    /// `Interval` catching up) lets the runtime's other tasks run. Outside a
    /// runtime, or in `tokio::task::unconstrained`, there is no budget.
    ///
    /// Unlike tokio's, a poll that finds the sleep pending spends nothing
    /// and does not look at the budget (tokio's gives the unit back): it
    /// returns `Pending` either way, with the timer holding the waker.
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        std::task::ready!(self.get_mut().poll_unbudgeted(cx));
        // The state now says complete, so a poll after the task has yielded
        // finds it so at once.
        std::task::ready!(tokio::task::coop::poll_proceed(cx)).made_progress();
        Poll::Ready(())
    }
}

impl Sleep {
    /// [`poll`](Sleep::poll) without the budget: for a `Timeout` whose
    /// inner future spent the last of it.
    #[inline(always)]
    pub(crate) fn poll_unbudgeted(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        match self.poll_result(cx) {
            Poll::Ready(Ok(())) => Poll::Ready(()),
            Poll::Ready(Err(error)) => refused(error),
            Poll::Pending => Poll::Pending,
        }
    }

    /// [`poll_unbudgeted`](Sleep::poll_unbudgeted), with the timer's
    /// refusal (shut down, or at capacity) as an error instead of a panic.
    #[inline(always)]
    pub(crate) fn poll_result(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        match self.state.get() {
            State::Elapsed => Poll::Ready(Ok(())),
            State::Fired => {
                self.state.set(State::Elapsed);
                Poll::Ready(Ok(()))
            }
            State::Registered { key, waker } => {
                let shard = self.shard.as_ref().expect("a registered sleep has a shard");
                if waker == Some(WakerId::of(cx.waker())) && self.surely_pending(shard) {
                    return Poll::Pending;
                }
                match shard.poll(key, self.state.deadline(), cx.waker()) {
                    Polled::Pending(held) => {
                        self.state.set(State::Registered {
                            key,
                            waker: Some(held),
                        });
                        Poll::Pending
                    }
                    Polled::Ready => {
                        self.state.set(State::Elapsed);
                        Poll::Ready(Ok(()))
                    }
                    Polled::Refused(error) => Poll::Ready(Err(error)),
                }
            }
            State::Idle => {
                if self.shard.is_none() {
                    match registry::default_shard() {
                        Ok(shard) => self.bind_late(shard),
                        // Due already: no timer is needed to say so.
                        Err(_) if self.due_unbound() => {
                            self.state.set(State::Elapsed);
                            return Poll::Ready(Ok(()));
                        }
                        Err(e) => no_default_timer(e),
                    }
                }
                let deadline = self.state.deadline();
                let shard = self.shard.as_ref().expect("bound above");
                let tick = shard.clock().tick_of(deadline);
                match shard.register(deadline, tick, Registrant::Poll(cx.waker())) {
                    Registration::Pending(key, held) => {
                        self.state.set(State::Registered { key, waker: held });
                        Poll::Pending
                    }
                    Registration::Elapsed => {
                        self.state.set(State::Elapsed);
                        Poll::Ready(Ok(()))
                    }
                    Registration::Refused(error) => Poll::Ready(Err(error)),
                }
            }
        }
    }
}

impl Drop for Sleep {
    #[inline]
    fn drop(&mut self) {
        // Inline, so that dropping a sleep that never registered (a timeout
        // whose future was ready at once) folds away.
        if self.state.is_registered() {
            self.release();
        }
    }
}
