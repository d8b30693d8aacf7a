//! `wheel::sleep` and `Sleep` under tokio's paused clock.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use tokio::time;
use tokio_test::{assert_pending, assert_ready, task};
use wheel::Instant;

mod common;
use common::ms;

#[tokio::test(start_paused = true)]
async fn completes_exactly_at_the_deadline() {
    let _guard = common::guard();
    let start = Instant::now();
    wheel::sleep(ms(250)).await;
    assert_eq!(start.elapsed(), ms(250));
}

#[tokio::test(start_paused = true)]
async fn advance_wakes_the_task_before_it_returns() {
    let _guard = common::guard();
    let mut sleep = task::spawn(wheel::sleep(ms(10)));
    assert_pending!(sleep.poll());
    time::advance(ms(9)).await;
    assert!(!sleep.is_woken());
    assert_pending!(sleep.poll());
    time::advance(ms(1)).await;
    assert!(sleep.is_woken());
    assert_ready!(sleep.poll());
}

#[tokio::test(start_paused = true)]
async fn zero_and_past_deadlines_complete_without_time_passing() {
    let _guard = common::guard();
    let start = Instant::now();
    wheel::sleep(Duration::ZERO).await;
    wheel::sleep_until(start - ms(5)).await;
    assert_eq!(Instant::now(), start);
    let mut past = task::spawn(wheel::sleep_until(start));
    assert_ready!(past.poll());
    assert_eq!(wheel::Timer::current().stats().pending, 0);
}

#[tokio::test(start_paused = true)]
async fn sub_tick_deadlines_round_up_never_down() {
    let _guard = common::guard();
    time::advance(Duration::from_micros(300)).await;
    let start = Instant::now();
    // 1.5 ms from an unaligned start cannot complete before 1.5 ms, nor
    // later than the default tick plus tokio's own 1 ms rounding after.
    wheel::sleep(Duration::from_micros(1500)).await;
    let took = start.elapsed();
    assert!(took >= Duration::from_micros(1500), "early: {took:?}");
    assert!(
        took <= Duration::from_micros(1500) + ms(2),
        "late: {took:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn dropping_a_pending_sleep_leaves_nothing() {
    let _guard = common::guard();
    let timer = wheel::Timer::current();
    let mut sleeps: Vec<_> = (0..1000)
        .map(|i| task::spawn(wheel::sleep(ms(1 + i))))
        .collect();
    for s in &mut sleeps {
        assert_pending!(s.poll());
    }
    assert_eq!(timer.stats().pending, 1000);
    drop(sleeps);
    let stats = timer.stats();
    assert_eq!(
        (stats.pending, stats.entries, stats.cancelled),
        (0, 0, 1000)
    );
}

/// A waker that only counts the tasks holding it (through its `Arc`).
struct Counted;

impl std::task::Wake for Counted {
    fn wake(self: std::sync::Arc<Self>) {}
}

#[tokio::test(start_paused = true)]
async fn a_dropped_pending_sleeps_count_goes_at_once_and_its_waker_with_its_batch() {
    let _guard = common::guard();
    // One deadline, so each entry has neighbours in its slot, and the older
    // half dropped first, long after they were made: the wheel leaves
    // those entries, and the wakers they hold, for a batch of at most 128
    // (`wheel/discard.rs`); the count of pending timers goes now.
    let counted = std::sync::Arc::new(Counted);
    let waker = std::task::Waker::from(counted.clone());
    let mut cx = std::task::Context::from_waker(&waker);
    let mut sleeps: std::collections::VecDeque<_> =
        (0..1000).map(|_| Box::pin(wheel::sleep(ms(50)))).collect();
    for s in &mut sleeps {
        assert!(s.as_mut().poll(&mut cx).is_pending());
    }
    let held = std::sync::Arc::strong_count(&counted);
    assert_eq!(held, 1002, "the test's two handles and one per entry");
    let mut batched = false;
    for n in 1..=500 {
        drop(sleeps.pop_front());
        let kept = std::sync::Arc::strong_count(&counted) - (held - n);
        assert!(kept < 128, "{kept} wakers of dropped sleeps still held");
        batched |= kept > 0;
    }
    assert!(batched, "no cancel was left for a batch");
    // A stats read flushes the batch: every dropped sleep's waker is gone.
    assert_eq!(wheel::Timer::current().stats().pending, 500);
    assert_eq!(std::sync::Arc::strong_count(&counted), held - 500);
    // The last one registered is freed at once, waker and all.
    drop(sleeps.pop_back());
    assert_eq!(std::sync::Arc::strong_count(&counted), held - 501);
}

#[tokio::test(start_paused = true)]
async fn reset_moves_a_registered_sleep_and_keeps_its_waker() {
    let _guard = common::guard();
    let start = Instant::now();
    let mut sleep = task::spawn(wheel::sleep(ms(100)));
    assert_pending!(sleep.poll());
    sleep.enter(|_, s| s.reset(start + ms(20)));
    time::advance(ms(20)).await;
    assert!(sleep.is_woken(), "reset kept the waker from the first poll");
    assert_ready!(sleep.poll());
    assert!(sleep.is_elapsed());
}

#[tokio::test(start_paused = true)]
async fn reset_later_does_not_fire_at_the_old_deadline() {
    let _guard = common::guard();
    let start = Instant::now();
    let mut sleep = task::spawn(wheel::sleep(ms(10)));
    assert_pending!(sleep.poll());
    sleep.enter(|_, s| s.reset(start + ms(30)));
    time::advance(ms(10)).await;
    assert!(!sleep.is_woken());
    assert_pending!(sleep.poll());
    time::advance(ms(20)).await;
    assert_ready!(sleep.poll());
}

#[tokio::test(start_paused = true)]
async fn reset_into_the_past_wakes_at_once() {
    let _guard = common::guard();
    let start = Instant::now();
    let mut sleep = task::spawn(wheel::sleep(ms(100)));
    assert_pending!(sleep.poll());
    time::advance(ms(5)).await;
    sleep.enter(|_, s| s.reset(start));
    // The wheel has processed up to 5 ms, so a deadline at 0 is due now.
    assert!(sleep.is_woken());
    assert_ready!(sleep.poll());
}

#[tokio::test(start_paused = true)]
async fn a_repoll_from_another_task_moves_the_wake_up_there() {
    let _guard = common::guard();
    // A repeated poll may skip the lock only with the waker the wheel holds.
    let mut sleep = wheel::sleep(ms(10));
    let mut first = task::spawn(());
    let mut second = task::spawn(());
    first.enter(|cx, _| assert!(Pin::new(&mut sleep).poll(cx).is_pending()));
    first.enter(|cx, _| assert!(Pin::new(&mut sleep).poll(cx).is_pending()));
    second.enter(|cx, _| assert!(Pin::new(&mut sleep).poll(cx).is_pending()));
    time::advance(ms(10)).await;
    assert!(second.is_woken());
    assert!(!first.is_woken());
    second.enter(|cx, _| assert!(Pin::new(&mut sleep).poll(cx).is_ready()));
}

#[tokio::test(start_paused = true)]
async fn a_fired_sleep_reset_later_is_woken_at_the_new_deadline() {
    let _guard = common::guard();
    // Firing took the waker from the wheel; the poll after the reset must
    // leave one there again, although the same task polls.
    let start = Instant::now();
    let mut sleep = task::spawn(wheel::sleep(ms(10)));
    assert_pending!(sleep.poll());
    time::advance(ms(10)).await;
    assert!(sleep.is_woken());
    sleep.enter(|_, sleep| sleep.reset(start + ms(30)));
    assert!(!sleep.is_elapsed());
    assert_pending!(sleep.poll());
    time::advance(ms(19)).await;
    assert!(!sleep.is_woken());
    time::advance(ms(1)).await;
    assert!(sleep.is_woken());
    assert_ready!(sleep.poll());
    assert_eq!(start.elapsed(), ms(30));
}

#[tokio::test(start_paused = true)]
async fn reset_after_completion_sleeps_again() {
    let _guard = common::guard();
    let mut sleep = Box::pin(wheel::sleep(ms(5)));
    sleep.as_mut().await;
    assert!(sleep.is_elapsed());
    let again = Instant::now() + ms(7);
    sleep.as_mut().reset(again);
    assert!(!sleep.is_elapsed());
    sleep.as_mut().await;
    assert_eq!(Instant::now(), again);
}

#[tokio::test(start_paused = true)]
async fn earlier_registration_reschedules_the_driver() {
    let _guard = common::guard();
    let start = Instant::now();
    let mut late = task::spawn(wheel::sleep(ms(60_000)));
    assert_pending!(late.poll());
    // The alarm now waits for a minute; a 3 ms sleep must pull it in.
    wheel::sleep(ms(3)).await;
    assert_eq!(start.elapsed(), ms(3));
    assert_pending!(late.poll());
}

#[tokio::test(start_paused = true)]
async fn many_timers_fire_in_deadline_order_never_early() {
    let _guard = common::guard();
    let start = Instant::now();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    for i in (0..200u64).rev() {
        let tx = tx.clone();
        let delay = ms(i * 37 % 5_000 + 1);
        tokio::spawn(async move {
            wheel::sleep(delay).await;
            tx.send((delay, start.elapsed())).unwrap();
        });
    }
    drop(tx);
    let mut last = Duration::ZERO;
    let mut n = 0;
    while let Some((delay, at)) = rx.recv().await {
        assert_eq!(at, delay, "fired at {at:?}, deadline {delay:?}");
        assert!(at >= last, "out of order");
        last = at;
        n += 1;
    }
    assert_eq!(n, 200);
}

#[tokio::test(start_paused = true)]
async fn far_deadlines_do_not_panic_and_stay_pending() {
    let _guard = common::guard();
    let timer = wheel::Timer::current();
    let mut max = task::spawn(wheel::sleep(Duration::MAX));
    let mut centuries = task::spawn(wheel::sleep(Duration::from_secs(300 * 365 * 86_400)));
    assert_pending!(max.poll());
    assert_pending!(centuries.poll());
    time::advance(Duration::from_secs(86_400 * 365)).await;
    assert_pending!(max.poll());
    assert_pending!(centuries.poll());
    assert!(timer.stats().levels > 4);
}

#[tokio::test(start_paused = true)]
async fn an_hour_with_one_timer() {
    let _guard = common::guard();
    let start = Instant::now();
    wheel::sleep(Duration::from_secs(3600)).await;
    assert_eq!(start.elapsed(), Duration::from_secs(3600));
}

#[test]
fn polling_outside_a_runtime_panics_with_a_clear_message() {
    let _guard = common::guard();
    let sleep = wheel::sleep(ms(10));
    let mut sleep = task::spawn(sleep);
    let err = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = sleep.poll();
    }))
    .unwrap_err();
    let msg = common::panic_message(&*err);
    assert!(msg.contains("polled outside a tokio runtime"), "{msg}");
}

#[test]
fn sleep_is_small_and_unpin() {
    let _guard = common::guard();
    fn unpin<T: Unpin>() {}
    unpin::<wheel::Sleep>();
    // The timer (8), the deadline and the entry's key (16 together) and the
    // identity of the waker the entry holds (16), which lets a pending poll
    // skip the lock; tokio's is 112. Boxed, 40 bytes take a 48-byte block
    // from glibc's allocator, where 56 took 64.
    assert!(
        std::mem::size_of::<wheel::Sleep>() <= 40,
        "{}",
        std::mem::size_of::<wheel::Sleep>()
    );
}

#[tokio::test(start_paused = true)]
async fn a_panicking_waker_does_not_stop_the_driver() {
    let _guard = common::guard();
    use std::sync::Arc;
    use std::task::{Context, Wake, Waker};

    struct Bomb;
    impl Wake for Bomb {
        fn wake(self: Arc<Self>) {
            panic!("this waker panics when woken");
        }
    }
    let bomb = Waker::from(Arc::new(Bomb));
    let mut doomed = Box::pin(wheel::sleep(ms(5)));
    assert!(doomed
        .as_mut()
        .poll(&mut Context::from_waker(&bomb))
        .is_pending());

    let mut fine = task::spawn(wheel::sleep(ms(5)));
    assert_pending!(fine.poll());
    let mut later = task::spawn(wheel::sleep(ms(10)));
    assert_pending!(later.poll());

    time::advance(ms(5)).await;
    assert!(fine.is_woken());
    assert_ready!(fine.poll());
    time::advance(ms(5)).await;
    assert!(later.is_woken(), "the driver kept serving after the panic");
    assert_ready!(later.poll());
    assert!(doomed
        .as_mut()
        .poll(&mut Context::from_waker(&bomb))
        .is_ready());
}

#[test]
fn futures_and_handles_are_send_sync_unpin() {
    let _guard = common::guard();
    fn check<T: Send + Sync + Unpin>() {}
    check::<wheel::Sleep>();
    check::<wheel::Timeout<std::future::Ready<()>>>();
    check::<wheel::Interval>();
    check::<wheel::Timer>();
    check::<wheel::error::Elapsed>();
    check::<wheel::error::BuildError>();
}

/// A loop over sleeps that are already due spends tokio's cooperative
/// budget, as `tokio::time::Sleep` does, so it yields to the runtime's
/// other tasks rather than starve them.
#[tokio::test(start_paused = true)]
async fn a_loop_of_due_sleeps_lets_other_tasks_run() {
    let _guard = common::guard();
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    let past = Instant::now();
    wheel::sleep(ms(1)).await;
    let ran = Arc::new(AtomicBool::new(false));
    let flag = ran.clone();
    tokio::spawn(async move { flag.store(true, Ordering::SeqCst) });
    let mut sleeps = 0;
    while !ran.load(Ordering::SeqCst) {
        wheel::sleep_until(past).await;
        sleeps += 1;
        assert!(sleeps <= 1000, "{sleeps} due sleeps and no yield");
    }
    assert!(
        sleeps >= 1,
        "the spawned task ran only once this task yielded"
    );
}

/// Found by review: polling a sleep whose deadline had passed panicked
/// outside a runtime, though only one not yet due needs the timer.
#[test]
fn a_due_sleep_completes_when_polled_outside_a_runtime() {
    let _guard = common::guard();
    let mut due = task::spawn(wheel::sleep(Duration::ZERO));
    assert_ready!(due.poll());
    let mut passed = task::spawn(wheel::sleep_until(Instant::now() - ms(1)));
    assert_ready!(passed.poll());
    let mut later = task::spawn(wheel::sleep(Duration::from_secs(60)));
    let polled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| later.poll()));
    assert!(polled.is_err(), "a sleep not yet due needs the timer");
}

/// Found by review: as tokio's, a reset registers the sleep, so it is
/// elapsed once the new deadline passes whether or not it was polled, and
/// a completed one likewise.
#[tokio::test(start_paused = true)]
async fn a_reset_registers_so_is_elapsed_matches_tokio_without_a_poll() {
    let _guard = common::guard();
    let start = Instant::now();
    let mut tokio_sleep = Box::pin(time::sleep(Duration::from_secs(60)));
    let mut never_polled = wheel::sleep(Duration::from_secs(60));
    let mut completed = wheel::sleep(ms(1));
    (&mut completed).await;
    tokio_sleep.as_mut().reset(start + ms(10));
    Pin::new(&mut never_polled).reset(start + ms(10));
    Pin::new(&mut completed).reset(start + ms(10));
    assert!(!never_polled.is_elapsed() && !completed.is_elapsed());
    time::sleep(ms(20)).await;
    assert!(tokio_sleep.is_elapsed());
    assert!(never_polled.is_elapsed(), "not registered by the reset");
    assert!(completed.is_elapsed(), "not registered by the reset");
}

#[tokio::test(start_paused = true)]
async fn debug_shows_the_deadline_and_the_state_a_person_can_read() {
    let _guard = common::guard();
    let deadline = Instant::now() + ms(10);
    let mut sleep = task::spawn(wheel::sleep_until(deadline));
    let shown = |sleep: &wheel::Sleep| format!("{sleep:?}");
    let unpolled = shown(&sleep);
    assert!(
        unpolled.starts_with(&format!(
            "Sleep {{ deadline: {deadline:?}, state: \"unregistered\", tick: 125µs"
        )),
        "{unpolled}"
    );
    // Made outside any runtime, it is bound when first polled.
    let outside = std::thread::spawn(move || format!("{:?}", wheel::sleep_until(deadline)));
    let outside = outside.join().unwrap();
    assert!(
        outside.ends_with("state: \"unregistered\", timer: default, not yet bound }"),
        "{outside}"
    );
    assert_pending!(sleep.poll());
    let pending = shown(&sleep);
    assert!(
        pending.contains("state: \"pending\", tick: 125µs"),
        "{pending}"
    );
    time::advance(ms(10)).await;
    assert!(shown(&sleep).contains("state: \"fired\""), "{:?}", &*sleep);
    assert_ready!(sleep.poll());
    assert!(
        shown(&sleep).contains("state: \"completed\""),
        "{:?}",
        &*sleep
    );
    assert!(!pending.contains("Packed"), "{pending}");
}

/// A duration over 30 years counts as 30 years, to the nanosecond, as with
/// tokio's `sleep`: just past the cap is capped too, not only durations
/// whose sum would overflow. Checked from a moment after the instant
/// deadlines count from (the process's first timer use, which may come
/// after this runtime's paused clock started), where the fast path is.
#[tokio::test(start_paused = true)]
async fn a_duration_just_over_thirty_years_is_capped_as_tokios_is() {
    let _guard = common::guard();
    let thirty = Duration::from_secs(86_400 * 365 * 30);
    let nano = Duration::from_nanos(1);
    let _first_use = wheel::sleep(Duration::ZERO);
    for wait in [Duration::ZERO, Duration::from_secs(3600)] {
        time::advance(wait).await;
        for duration in [
            thirty - nano,
            thirty,
            thirty + nano,
            thirty + ms(1),
            Duration::MAX,
        ] {
            assert_eq!(
                wheel::sleep(duration).deadline(),
                tokio::time::sleep(duration).deadline(),
                "{duration:?}, {wait:?} in"
            );
        }
    }
}

/// A paused shard left with nothing pending disarms its alarm (`tidy`), so
/// that auto-advance does not jump to a deadline nobody waits for. Cancels
/// still waiting in a batch must go then too: their slots were what kept
/// the alarm armed no later than their deadlines, and with it disarmed no
/// pass comes to flush them. A sleep that fired and is not polled again
/// (an interval nobody ticks) keeps its entry, and so its chunk, from
/// holding cancelled entries only.
#[test]
fn a_paused_shard_left_with_nothing_pending_lets_go_of_its_batched_wakers() {
    let rt = common::paused_rt();
    let timer = rt.block_on(async { wheel::Timer::builder().build().unwrap() });
    let _in_rt = rt.enter();
    let counted = std::sync::Arc::new(Counted);
    let waker = std::task::Waker::from(counted.clone());
    let mut cx = std::task::Context::from_waker(&waker);
    let mut fired = timer.sleep(ms(1));
    assert!(Pin::new(&mut fired).poll(&mut cx).is_pending());
    let sleeps: Vec<_> = (0..200)
        .map(|_| {
            let mut sleep = timer.sleep(Duration::from_secs(3600));
            assert!(Pin::new(&mut sleep).poll(&mut cx).is_pending());
            sleep
        })
        .collect();
    rt.block_on(time::sleep(ms(2)));
    assert!(fired.is_elapsed());
    // The oldest first: most are batched, the last 64 freed at once.
    drop(sleeps);
    // Idle, long past every deadline: no pass has anything to do.
    rt.block_on(time::sleep(Duration::from_secs(7200)));
    let kept = std::sync::Arc::strong_count(&counted) - 2;
    assert_eq!(kept, 0, "wakers of sleeps dropped two hours ago still held");
    assert_eq!(timer.stats().pending, 0);
    drop(fired);
}
