//! Bad input: for each, the documented behaviour holds, and nothing hangs,
//! completes early, or panics inside the driver.
//!
//! | input | documented behaviour (where) | tests |
//! |---|---|---|
//! | `Duration::ZERO` | completes on the first poll without touching the wheel (`sleep`); `timeout` polls the inner future first; a zero tick is a `BuildError` (`Builder::build`) | here; `sleep.rs` `zero_and_past_deadlines_complete_without_time_passing`; `timeout.rs` `a_ready_future_wins_even_with_a_zero_duration`, `a_pending_future_with_a_zero_duration_times_out_at_once`; `explicit_timers.rs` `build_errors` |
//! | `Duration::MAX` | the deadline becomes about 30 years ahead, as in tokio (`sleep`, `Timer::sleep`) | here; `sleep.rs` `far_deadlines_do_not_panic_and_stay_pending`; `timeout.rs` `duration_max_does_not_panic`; `interval.rs` `duration_max_period_does_not_panic`, `reset_after_duration_max_does_not_panic` |
//! | deadlines far in the past | complete on the first poll; a registered sleep reset there is woken at once (`sleep`, `Sleep::reset`) | here; `sleep.rs` `reset_into_the_past_wakes_at_once`; `interval.rs` `interval_at_a_past_start_bursts_to_catch_up` |
//! | `Instant` overflow, deadlines beyond the wheel's range | overflowing durations clamp to 30 years; a deadline more than `u64::MAX` ticks after the timer's start never fires (`Builder::tick`) | here; `driver/clock.rs` `the_clamped_tick_never_comes` |
//! | resetting an elapsed `Sleep` | it sleeps again until the new deadline, whether it had only fired or already completed (`Sleep::reset`) | here; `sleep.rs` `reset_after_completion_sleeps_again` |
//! | zero interval period | panics at the caller with tokio's message (`interval`, `Timer::interval_at`, `# Panics`) | here; `interval.rs` `zero_period_panics*` |
//! | a `Timer` after its runtime shut down | what needs no waiting completes; a pending sleep panics when polled, saying why (`Sleep`, `# Panics`) | here; `runtime_shutdown.rs` |
//! | dropping every `Timer` handle while futures wait | the futures keep the timer alive and complete on time (`Timer`) | here; `explicit_timers.rs` `a_sleep_keeps_its_timer_alive`, `dropping_every_handle_frees_the_timer` |
//! | a waker that panics when woken | the panic is contained; every other timer is still served (`Sleep`) | here; `sleep.rs` `a_panicking_waker_does_not_stop_the_driver` |

use std::future::{pending, Future};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use tokio::time;
use tokio_test::{assert_pending, assert_ready, task};
use wheel::{Instant, Timer};

mod common;
use common::{ms, panic_message, paused_rt, secs};

const YEAR: Duration = Duration::from_secs(365 * 86_400);

/// Polls `f` once with `waker`.
fn poll_with<F: Future + Unpin>(f: &mut F, waker: &Waker) -> Poll<F::Output> {
    Pin::new(f).poll(&mut Context::from_waker(waker))
}

/// A waker that panics when woken, counting the attempts.
struct Bomb(AtomicUsize);

impl Wake for Bomb {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
        panic!("this waker panics when woken");
    }
}

fn bomb() -> (Arc<Bomb>, Waker) {
    let bomb = Arc::new(Bomb(AtomicUsize::new(0)));
    (bomb.clone(), Waker::from(bomb))
}

/// The first instant at or after `deadline` that is a whole number of ticks
/// after `origin`.
fn rounded_up(origin: Instant, tick: Duration, deadline: Instant) -> Instant {
    let ticks = (deadline - origin).as_nanos().div_ceil(tick.as_nanos());
    origin + Duration::from_nanos(u64::try_from(ticks * tick.as_nanos()).unwrap())
}

#[tokio::test(start_paused = true)]
async fn duration_zero_completes_on_the_first_poll_and_registers_nothing() {
    let _guard = common::guard();
    for slots in [2, 64] {
        let timer = Timer::builder()
            .tick(ms(3))
            .slots_per_level(slots)
            .build()
            .unwrap();
        let start = Instant::now();
        assert_ready!(task::spawn(timer.sleep(Duration::ZERO)).poll());
        assert_ready!(task::spawn(wheel::sleep(Duration::ZERO)).poll());
        let mut out = task::spawn(timer.timeout(Duration::ZERO, pending::<()>()));
        assert!(assert_ready!(out.poll()).is_err());
        let mut ok = task::spawn(timer.timeout(Duration::ZERO, async { 1 }));
        assert_eq!(assert_ready!(ok.poll()), Ok(1));
        let stats = timer.stats();
        assert_eq!((stats.pending, stats.entries, stats.fired), (0, 0, 0));

        // A registered sleep reset to zero from now (on a tick) is woken at
        // once, through the wheel.
        let mut later = task::spawn(timer.sleep(secs(60)));
        assert_pending!(later.poll());
        later.enter(|_, s| s.reset(Instant::now()));
        assert!(later.is_woken());
        assert_ready!(later.poll());

        // An interval told to tick zero from now ticks now.
        let mut every = timer.interval(secs(1));
        every.tick().await;
        every.reset_after(Duration::ZERO);
        assert_eq!(every.tick().await, start);

        assert_eq!(Instant::now(), start, "no time passed");
        // The reset sleep, and the interval's completed sleep reset to now:
        // as tokio's, a reset registers, and into the past that is a fire.
        let stats = timer.stats();
        assert_eq!((stats.pending, stats.entries, stats.fired), (0, 0, 2));
    }
}

#[tokio::test(start_paused = true)]
async fn duration_max_waits_thirty_years_on_every_geometry_then_fires_not_before() {
    let _guard = common::guard();
    let geometries = [
        (Duration::from_nanos(1), 2),
        (ms(1), 4),
        (ms(1), 64),
        (secs(3600), 4096),
    ];
    for (tick, slots) in geometries {
        let timer = Timer::builder()
            .tick(tick)
            .slots_per_level(slots)
            .build()
            .unwrap();
        let origin = Instant::now();
        let what = format!("{tick:?} tick, {slots} slots");
        let mut sleep = task::spawn(timer.sleep(Duration::MAX));
        let deadline = sleep.deadline();
        assert!(
            deadline >= origin + 29 * YEAR && deadline <= origin + 31 * YEAR,
            "{what}"
        );
        assert_pending!(sleep.poll());
        // A timeout whose deadline overflows has none, as tokio's: it
        // never registers and never expires.
        let mut timeout = task::spawn(timer.timeout(Duration::MAX, pending::<()>()));
        assert_pending!(timeout.poll());
        assert_eq!(timer.timeout(Duration::MAX, async { 5 }).await, Ok(5));
        assert_eq!(timer.stats().pending, 1, "{what}");

        time::advance(YEAR).await;
        assert!(!sleep.is_woken(), "{what}");
        assert_pending!(sleep.poll());
        // When the clock gets there it fires: at the deadline rounded up to
        // the tick, not a millisecond before.
        let fires = rounded_up(origin, tick, deadline);
        time::advance(fires - Instant::now() - ms(1)).await;
        assert!(!sleep.is_woken(), "{what}: early");
        assert_pending!(sleep.poll());
        time::advance(ms(1)).await;
        assert!(sleep.is_woken(), "{what}: not fired at its deadline");
        assert_ready!(sleep.poll());
        time::advance(100 * YEAR).await;
        assert!(!timeout.is_woken(), "{what}");
        assert_pending!(timeout.poll());
        let stats = timer.stats();
        assert_eq!((stats.pending, stats.entries), (0, 0), "{what}");
        assert_eq!((stats.fired, stats.cancelled), (1, 0), "{what}");
    }
}

#[tokio::test(start_paused = true)]
async fn deadlines_far_in_the_past_complete_on_the_first_poll() {
    let _guard = common::guard();
    time::advance(secs(10)).await;
    let timer = Timer::builder()
        .tick(ms(10))
        .slots_per_level(2)
        .build()
        .unwrap();
    let now = Instant::now();
    // As far back as this machine's monotonic clock reaches (it may have
    // booted minutes ago); all of them are before the timer's origin.
    let far = [100 * YEAR, YEAR, secs(86_400), secs(10)]
        .into_iter()
        .find_map(|back| now.checked_sub(back))
        .unwrap();
    for deadline in [far, now - ms(1), now] {
        assert_ready!(task::spawn(timer.sleep_until(deadline)).poll());
        assert_ready!(task::spawn(wheel::sleep_until(deadline)).poll());
        let mut out = task::spawn(timer.timeout_at(deadline, pending::<()>()));
        assert!(assert_ready!(out.poll()).is_err());
        let mut ok = task::spawn(timer.timeout_at(deadline, async { 2 }));
        assert_eq!(assert_ready!(ok.poll()), Ok(2));
    }
    let stats = timer.stats();
    assert_eq!((stats.pending, stats.entries, stats.fired), (0, 0, 0));

    // A registered sleep reset far into the past is woken at once.
    let mut sleep = task::spawn(timer.sleep(secs(60)));
    assert_pending!(sleep.poll());
    sleep.enter(|_, s| s.reset(far));
    assert!(sleep.is_woken());
    assert_ready!(sleep.poll());

    // An interval that started long ago: its first tick is its start, then
    // it bursts to catch up (tokio's default), every tick at once.
    let mut every = timer.interval_at(far, secs(1));
    assert_eq!(every.tick().await, far);
    assert_eq!(every.tick().await, far + secs(1));
    assert_eq!(Instant::now(), now, "no time passed");
    let stats = timer.stats();
    assert_eq!((stats.pending, stats.entries, stats.fired), (0, 0, 1));
}

/// With a 1 ns tick the wheel's `u64` ticks span 584 years. A deadline past
/// that never fires; before the fix the clock passing the range fired it
/// (here, 100 years early).
#[tokio::test(start_paused = true)]
async fn deadlines_beyond_the_wheels_range_never_fire_and_never_early() {
    let _guard = common::guard();
    let timer = Timer::builder()
        .tick(Duration::from_nanos(1))
        .slots_per_level(2)
        .build()
        .unwrap();
    let origin = Instant::now();
    let beyond = origin + 700 * YEAR;
    let within = origin + 584 * YEAR;
    let mut never = task::spawn(timer.sleep_until(beyond));
    let mut last = task::spawn(timer.sleep_until(within));
    assert_pending!(never.poll());
    assert_pending!(last.poll());
    // Moving a sleep to an instant beyond the range is no different.
    let mut moved = task::spawn(timer.sleep(ms(5)));
    assert_pending!(moved.poll());
    moved.enter(|_, s| s.reset(origin + 10_000 * YEAR));

    time::advance(within - origin).await;
    assert!(last.is_woken(), "the last tick in range fires");
    assert_ready!(last.poll());
    time::advance(100 * YEAR).await;
    // Past the range now, and still short of `beyond`.
    assert!(Instant::now() < beyond);
    assert!(!never.is_woken(), "fired a century early");
    assert_pending!(never.poll());
    assert!(!moved.is_woken());
    assert_pending!(moved.poll());
    assert!(!never.is_elapsed() && !moved.is_elapsed());
    drop((never, moved));
    let stats = timer.stats();
    assert_eq!((stats.pending, stats.entries, stats.cancelled), (0, 0, 2));

    // An `Instant` the caller cannot even compute (`now + Duration::MAX`
    // overflows) is not needed: the duration constructors clamp.
    assert!(Instant::now().checked_add(Duration::MAX).is_none());
    let mut clamped = task::spawn(wheel::sleep(Duration::MAX));
    assert_pending!(clamped.poll());
    let mut every = task::spawn(wheel::interval(Duration::MAX));
    assert_ready!(every.enter(|cx, mut i| i.poll_tick(cx)));
    assert_pending!(every.enter(|cx, mut i| i.poll_tick(cx)));
}

#[tokio::test(start_paused = true)]
async fn resetting_an_elapsed_sleep_sleeps_again_until_the_new_deadline() {
    let _guard = common::guard();
    let timer = Timer::builder().tick(ms(5)).build().unwrap();
    let start = Instant::now();

    // Fired but not yet polled: moved back into the wheel.
    let mut fired = task::spawn(timer.sleep(ms(5)));
    assert_pending!(fired.poll());
    time::advance(ms(5)).await;
    assert!(fired.is_woken() && fired.is_elapsed());
    fired.enter(|_, s| s.reset(start + ms(20)));
    assert!(!fired.is_elapsed());
    assert_pending!(fired.poll());
    time::advance(ms(10)).await;
    assert!(!fired.is_woken(), "completed at the old deadline");
    assert_pending!(fired.poll());
    time::advance(ms(5)).await;
    assert!(fired.is_woken());
    assert_ready!(fired.poll());

    // Completed, reset into the past: elapsed at once, as tokio's (whose
    // reset registers, and fires what is already due), without an entry.
    let entries = timer.stats().entries;
    fired.enter(|_, s| s.reset(start));
    assert!(fired.is_elapsed());
    assert_ready!(fired.poll());
    assert_eq!(timer.stats().entries, entries);

    // Completed, reset into the future: waits again.
    fired.enter(|_, s| s.reset(start + ms(40)));
    assert_pending!(fired.poll());
    time::advance(ms(19)).await;
    assert!(!fired.is_woken(), "early");
    assert_pending!(fired.poll());
    time::advance(ms(1)).await;
    assert!(fired.is_woken());
    assert_ready!(fired.poll());
    assert_eq!(Instant::now(), start + ms(40));
    // Fired at 5, 20 and 40 ms, and by the reset into the past, which is
    // counted as a pending sleep's would be, whether or not the sleep had
    // been polled since it last fired.
    let stats = timer.stats();
    assert_eq!((stats.pending, stats.entries, stats.fired), (0, 0, 4));
}

#[tokio::test(start_paused = true)]
#[should_panic(expected = "`period` must be non-zero.")]
async fn a_zero_interval_period_panics_at_the_caller() {
    let _guard = common::guard();
    let timer = Timer::builder().build().unwrap();
    let _ = timer.interval_at(Instant::now(), Duration::ZERO);
}

#[test]
fn a_shut_down_timer_answers_and_fails_loudly_instead_of_hanging_or_completing_early() {
    let _guard = common::guard();
    let rt = paused_rt();
    let (timer, mut pending_sleep, mut fired, mut fired_then_past) = rt.block_on(async {
        let timer = Timer::builder().build().unwrap();
        let mut pending_sleep = task::spawn(timer.sleep(secs(60)));
        let mut fired = task::spawn(timer.sleep(ms(5)));
        let mut fired_then_past = task::spawn(timer.sleep(ms(5)));
        assert_pending!(pending_sleep.poll());
        assert_pending!(fired.poll());
        assert_pending!(fired_then_past.poll());
        time::advance(ms(5)).await;
        assert!(fired.is_elapsed() && fired_then_past.is_elapsed());
        (timer, pending_sleep, fired, fired_then_past)
    });
    drop(rt);
    assert!(timer.is_shut_down());
    let stats = timer.stats();
    // The pending entry stays, and so do the fired ones until their sleeps
    // are polled or dropped: each belongs to its `Sleep`.
    assert_eq!((stats.pending, stats.entries, stats.fired), (1, 3, 2));
    assert_eq!(timer.tick(), Duration::from_micros(125));

    paused_rt().block_on(async {
        let now = Instant::now();
        let must_panic = |poll: &mut dyn FnMut()| {
            let err = catch_unwind(AssertUnwindSafe(poll)).unwrap_err();
            let msg = panic_message(&*err);
            assert!(msg.contains("shut down"), "{msg}");
        };
        // A fired sleep reset to a later deadline must not complete (that
        // would be early); it cannot wait either: it panics, saying why.
        // (Before the fix the reset was ignored and it completed at once.)
        fired.enter(|_, s| s.reset(now + secs(60)));
        assert!(!fired.is_elapsed());
        must_panic(&mut || {
            let _ = fired.poll();
        });
        // Reset to a deadline that has passed, it completes.
        fired_then_past.enter(|_, s| s.reset(now - ms(1)));
        assert_ready!(fired_then_past.poll());
        // A pending sleep, moved or not, panics.
        pending_sleep.enter(|_, s| s.reset(now + secs(1)));
        must_panic(&mut || {
            let _ = pending_sleep.poll();
        });
        // An interval ticks at its start (nothing to wait for), then panics.
        let mut every = task::spawn(timer.interval(secs(1)));
        assert_ready!(every.enter(|cx, mut i| i.poll_tick(cx)));
        must_panic(&mut || {
            let _ = every.enter(|cx, mut i| i.poll_tick(cx));
        });
    });
    drop((pending_sleep, fired, fired_then_past));
    let stats = timer.stats();
    assert_eq!((stats.pending, stats.entries), (0, 0), "{stats:?}");
}

#[tokio::test(start_paused = true)]
async fn dropping_every_timer_handle_while_futures_wait_loses_none() {
    let _guard = common::guard();
    let timer = Timer::builder()
        .tick(ms(10))
        .slots_per_level(4)
        .build()
        .unwrap();
    let start = Instant::now();
    let sleeper = tokio::spawn(timer.sleep(ms(25)));
    let timeout = tokio::spawn(timer.timeout(ms(50), pending::<()>()));
    let mut every = timer.interval(ms(30));
    let ticker = tokio::spawn(async move {
        let mut ticks = Vec::new();
        for _ in 0..3 {
            ticks.push(every.tick().await - start);
        }
        ticks
    });
    drop(timer);
    let all = async {
        sleeper.await.unwrap();
        let sleeper_done = start.elapsed();
        assert!(timeout.await.unwrap().is_err());
        let timeout_done = start.elapsed();
        (sleeper_done, timeout_done, ticker.await.unwrap())
    };
    let (sleeper_done, timeout_done, ticks) = time::timeout(secs(3600), all)
        .await
        .expect("a future of a dropped timer hangs");
    assert_eq!(sleeper_done, ms(30));
    assert_eq!(timeout_done, ms(50));
    assert_eq!(ticks, [ms(0), ms(30), ms(60)]);
}

#[tokio::test(start_paused = true)]
async fn a_panicking_waker_on_any_wake_path_leaves_the_driver_serving() {
    let _guard = common::guard();
    let timer = Timer::builder().tick(ms(1)).build().unwrap();
    let (bomb, bomb_waker) = bomb();

    // In one batch (more than the driver's 32 per batch), every third
    // waker panics: the others are all woken, in this batch and the next.
    let mut bombs = Vec::new();
    let mut fine = Vec::new();
    for i in 0..100 {
        let mut sleep = timer.sleep(ms(5));
        if i % 3 == 0 {
            assert!(poll_with(&mut sleep, &bomb_waker).is_pending());
            bombs.push(sleep);
        } else {
            let mut sleep = task::spawn(sleep);
            assert_pending!(sleep.poll());
            fine.push(sleep);
        }
    }
    time::advance(ms(5)).await;
    assert_eq!(bomb.0.load(Ordering::SeqCst), bombs.len());
    for s in &mut fine {
        assert!(s.is_woken());
        assert_ready!(s.poll());
    }
    for s in &mut bombs {
        assert!(poll_with(s, &bomb_waker).is_ready());
    }

    // Woken by a reset into the past, on the resetting thread: contained.
    let mut reset = timer.sleep(secs(60));
    assert!(poll_with(&mut reset, &bomb_waker).is_pending());
    Pin::new(&mut reset).reset(Instant::now());
    assert_eq!(bomb.0.load(Ordering::SeqCst), bombs.len() + 1);
    assert!(poll_with(&mut reset, &bomb_waker).is_ready());

    // And the driver goes on.
    let mut after = task::spawn(timer.sleep(ms(3)));
    assert_pending!(after.poll());
    time::advance(ms(3)).await;
    assert!(after.is_woken());
    assert_ready!(after.poll());
    let stats = timer.stats();
    assert_eq!((stats.pending, stats.entries, stats.fired), (0, 0, 102));
}

#[test]
fn a_panicking_waker_woken_by_shutdown_does_not_break_the_shutdown() {
    let _guard = common::guard();
    let rt = paused_rt();
    let (bomb, bomb_waker) = bomb();
    let (timer, mut doomed, mut other) = rt.block_on(async {
        let timer = Timer::builder().build().unwrap();
        let mut doomed = timer.sleep(secs(60));
        assert!(poll_with(&mut doomed, &bomb_waker).is_pending());
        let mut other = task::spawn(timer.sleep(secs(60)));
        assert_pending!(other.poll());
        (timer, doomed, other)
    });
    // The runtime's shutdown wakes both; the panic stays inside.
    drop(rt);
    assert!(timer.is_shut_down());
    assert_eq!(bomb.0.load(Ordering::SeqCst), 1);
    assert!(
        other.is_woken(),
        "the waker after the panicking one was woken"
    );
    let err = catch_unwind(AssertUnwindSafe(|| poll_with(&mut doomed, &bomb_waker))).unwrap_err();
    assert!(panic_message(&*err).contains("shut down"));
    let err = catch_unwind(AssertUnwindSafe(|| {
        let _ = other.poll();
    }))
    .unwrap_err();
    assert!(panic_message(&*err).contains("shut down"));
}
