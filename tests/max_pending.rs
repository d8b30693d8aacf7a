//! What `Builder::max_pending` counts: what holds an entry in the timer's
//! wheel. A `Timer::sleep` registers at its first poll (as tokio's does), so
//! one nobody polled does not count; a `try_sleep` registers at once and
//! counts from then; a `DelayQueue`'s entries live in its own wheel, and
//! only the one sleep it waits on counts. A limit of zero is refused.

use tokio_test::{assert_pending, assert_ready, task};
use wheel::{DelayQueue, Timer};

mod common;
use common::secs;

fn limited(max: usize) -> Timer {
    Timer::builder().manual().max_pending(max).build().unwrap()
}

#[test]
fn a_limit_of_zero_is_refused_by_build_naming_the_setting() {
    let error = Timer::builder()
        .manual()
        .max_pending(0)
        .build()
        .unwrap_err();
    assert!(error.is_invalid_max_pending(), "{error}");
    assert!(!error.is_invalid_shards() && !error.is_invalid_tick());
    assert!(error.to_string().contains("max_pending"), "{error}");
    // One is the smallest limit there is.
    assert!(Timer::builder().manual().max_pending(1).build().is_ok());
}

#[test]
fn an_unpolled_sleep_does_not_count_and_its_first_poll_is_refused() {
    let timer = limited(1);
    let mut lazy = timer.sleep(secs(1));
    assert_eq!(timer.stats().pending, 0);

    // The place is free: try_sleep takes it at once.
    let _eager = timer.try_sleep(secs(1)).unwrap();
    assert_eq!(timer.stats().pending, 1);

    // The lazy sleep finds the timer full when first polled: the error,
    // through `checked`, rather than a panic.
    let mut checked = task::spawn(lazy.checked());
    let error = assert_ready!(checked.poll()).unwrap_err();
    assert!(error.is_at_capacity() && !error.is_shutdown(), "{error}");
}

#[test]
fn a_try_sleep_counts_before_it_is_polled() {
    let timer = limited(1);
    let unpolled = timer.try_sleep(secs(1)).unwrap();
    assert_eq!(timer.stats().pending, 1);
    assert!(timer.try_sleep(secs(1)).unwrap_err().is_at_capacity());
    drop(unpolled);
    assert!(timer.try_sleep(secs(1)).is_ok());
}

#[test]
fn a_polled_sleep_counts_until_it_is_dropped() {
    let timer = limited(1);
    let mut sleep = task::spawn(timer.sleep(secs(1)));
    assert_pending!(sleep.poll());
    assert!(timer.try_sleep(secs(1)).unwrap_err().is_at_capacity());
    drop(sleep);
    assert!(timer.try_sleep(secs(1)).is_ok());
}

#[test]
fn delay_queue_entries_do_not_count_only_the_sleep_it_waits_on() {
    let timer = limited(2);
    let mut queue = task::spawn(DelayQueue::with_timer(timer.clone()));
    for n in 0..100u64 {
        queue.insert(n, secs(1 + n));
    }
    // Not polled yet: its sleep is not registered.
    assert_eq!(timer.stats().pending, 0);
    assert_pending!(queue.poll_next());
    assert_eq!(timer.stats().pending, 1, "one sleep for a hundred entries");

    let _one = timer.try_sleep(secs(1)).unwrap();
    assert!(timer.try_sleep(secs(1)).unwrap_err().is_at_capacity());

    timer.advance(secs(1));
    let first = assert_ready!(queue.poll_next()).expect("due");
    assert_eq!(first.into_inner(), 0);
}

/// Found by a model test (h40p): a sleep the driver had fired, not yet
/// polled, still held its entry; reset to a later deadline, the entry went
/// back to pending without asking for a place, so the timer held two
/// pending timers under a limit of one. Now the reset is refused as a
/// completed sleep's is: its next poll reports the limit.
#[test]
fn a_fired_sleep_reset_at_the_limit_does_not_go_over_it() {
    let timer = limited(1);
    let mut fired = task::spawn(timer.try_sleep(secs(1)).unwrap());
    timer.advance(secs(1));
    // Fired, not yet polled: it holds its entry.
    assert_eq!((timer.stats().pending, timer.stats().entries), (0, 1));
    let _other = timer.try_sleep(secs(5)).unwrap();
    assert_eq!(timer.stats().pending, 1);

    std::pin::Pin::new(&mut *fired).reset(timer.now() + secs(1));
    assert_eq!(timer.stats().pending, 1, "over the limit of 1");
    let mut fired = fired.into_inner();
    let mut checked = task::spawn(fired.checked());
    let error = assert_ready!(checked.poll()).unwrap_err();
    assert!(error.is_at_capacity(), "{error}");

    // With room, the same reset keeps it pending, and it fires again.
    let timer = limited(1);
    let mut fired = task::spawn(timer.try_sleep(secs(1)).unwrap());
    timer.advance(secs(1));
    std::pin::Pin::new(&mut *fired).reset(timer.now() + secs(1));
    assert_eq!(timer.stats().pending, 1);
    assert_pending!(fired.poll());
    timer.advance(secs(1));
    assert!(fired.is_woken());
    assert_ready!(fired.poll());
}

/// An interval of a full timer: its first tick is due at once and needs no
/// place; waiting for the next one panics, as a `Timer::sleep`'s first
/// poll does (its docs say so).
#[test]
fn an_interval_waiting_on_a_full_timer_panics_on_its_poll() {
    let timer = limited(1);
    let _taken = timer.try_sleep(secs(1)).unwrap();
    let mut every = task::spawn(timer.interval(secs(5)));
    assert!(every.enter(|cx, mut i| i.poll_tick(cx)).is_ready());
    let waited = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        every.enter(|cx, mut i| i.poll_tick(cx)).is_pending()
    }));
    let message = common::panic_message(&*waited.expect_err("a full timer refuses the wait"));
    assert!(message.contains("max_pending"), "{message}");
}

/// Two callbacks due at one tick, the first trying to schedule two more at
/// `max_pending(2)`; `cancel_sibling`: it cancels the second first. What it
/// was admitted, and whether the second ran.
fn admitted_while_a_sibling_waits_to_run(cancel_sibling: bool) -> (Vec<bool>, bool) {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};

    let timer = limited(2);
    let admitted = Arc::new(Mutex::new(Vec::new()));
    let sibling: Arc<Mutex<Option<wheel::TimerHandle>>> = Arc::default();
    let (t, a, s) = (timer.clone(), admitted.clone(), sibling.clone());
    timer.schedule(secs(1), move || {
        if cancel_sibling {
            assert!(s.lock().unwrap().as_ref().unwrap().cancel());
        }
        for _ in 0..2 {
            let ok = t.try_schedule(secs(5), || {}).is_ok();
            a.lock().unwrap().push(ok);
        }
    });
    let ran = Arc::new(AtomicBool::new(false));
    let flag = ran.clone();
    let handle = timer.schedule(secs(1), move || flag.store(true, Ordering::SeqCst));
    *sibling.lock().unwrap() = Some(handle);
    timer.advance(secs(1));
    let admitted = admitted.lock().unwrap().clone();
    (admitted, ran.load(Ordering::SeqCst))
}

/// Found by review: `max_pending` counts a callback until it fires, as a
/// sleep, not until it runs: one the driver took out of the wheel to run
/// (with the one running) frees its place then, though it can still be
/// cancelled. The docs say so; both fit here while the first runs.
#[test]
fn a_callback_taken_out_to_run_no_longer_counts() {
    let (admitted, sibling_ran) = admitted_while_a_sibling_waits_to_run(false);
    assert!(sibling_ran);
    assert_eq!(admitted, [true, true]);
}

/// A cancelled sibling runs not, and the places are free as above.
#[test]
fn a_callback_cancelled_while_taken_out_to_run_does_not_run() {
    let (admitted, sibling_ran) = admitted_while_a_sibling_waits_to_run(true);
    assert!(!sibling_ran);
    assert_eq!(admitted, [true, true]);
}
