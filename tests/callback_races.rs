//! Callbacks under races: cancels from other threads and from inside other
//! callbacks, schedules from inside callbacks, panics, and shutdowns
//! racing the driver. Each asserts invariants over many iterations, not
//! timing.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::Duration;

use wheel::{Timer, TimerHandle};

mod common;
use common::manual;

/// A callback's run count, and whether a `cancel` that returned true had
/// already returned when it ran.
#[derive(Default)]
struct Probe {
    runs: AtomicU32,
    cancelled_first: AtomicBool,
    ran_after_cancel: AtomicBool,
}

fn probed(probe: &Arc<Probe>) -> impl FnOnce() + Send + 'static {
    let probe = probe.clone();
    move || {
        if probe.cancelled_first.load(Ordering::SeqCst) {
            probe.ran_after_cancel.store(true, Ordering::SeqCst);
        }
        probe.runs.fetch_add(1, Ordering::SeqCst);
    }
}

/// After the dust settles: exactly one of ran and cancelled, and the
/// handle says which.
fn settled(handle: &TimerHandle, probe: &Probe, cancelled: bool, at: &str) {
    let runs = probe.runs.load(Ordering::SeqCst);
    assert!(
        !probe.ran_after_cancel.load(Ordering::SeqCst),
        "{at}: ran after cancel() returned true"
    );
    assert_eq!(runs, u32::from(!cancelled), "{at}: runs vs cancel()");
    assert_eq!(handle.is_expired(), !cancelled, "{at}: is_expired");
    assert_eq!(handle.is_cancelled(), cancelled, "{at}: is_cancelled");
}

/// `handle.cancel()`; if it says it stopped the run, noted in `probe`, so
/// that a run after all is caught.
fn cancel_noting(handle: &TimerHandle, probe: &Probe) -> bool {
    let cancelled = handle.cancel();
    if cancelled {
        probe.cancelled_first.store(true, Ordering::SeqCst);
    }
    cancelled
}

/// `timer.advance(by)` on a thread of its own, let go together with the
/// caller's next step: both pass one barrier before this returns. Join the
/// handle once that step is done.
fn advance_alongside(timer: &Timer, by: Duration) -> std::thread::JoinHandle<()> {
    let barrier = Arc::new(Barrier::new(2));
    let advancer = {
        let (timer, barrier) = (timer.clone(), barrier.clone());
        std::thread::spawn(move || {
            barrier.wait();
            timer.advance(by);
        })
    };
    barrier.wait();
    advancer
}

#[test]
fn cancel_racing_a_manual_advance_on_another_thread_is_exactly_once() {
    let _guard = common::guard();
    let timer = manual();
    for round in 0..2000 {
        let probes: Vec<Arc<Probe>> = (0..40).map(|_| Arc::default()).collect();
        let handles: Vec<TimerHandle> = probes
            .iter()
            .map(|p| timer.schedule(Duration::from_millis(1), probed(p)))
            .collect();
        let advancer = advance_alongside(&timer, Duration::from_millis(1));
        let results: Vec<bool> = handles
            .iter()
            .zip(&probes)
            .rev()
            .map(|(h, p)| cancel_noting(h, p))
            .collect();
        advancer.join().unwrap();
        for ((h, p), c) in handles.iter().zip(&probes).zip(results.iter().rev()) {
            settled(h, p, *c, &format!("round {round}"));
        }
    }
    let stats = timer.stats();
    assert_eq!(stats.pending, 0);
    assert_eq!(stats.callbacks, 0);
    assert_eq!(stats.fired + stats.cancelled, 2000 * 40);
}

#[test]
fn cancel_racing_a_runtime_pass_on_a_multi_thread_runtime_is_exactly_once() {
    let _guard = common::guard();
    let rt = common::multi_rt();
    let timer = rt.block_on(async { Timer::builder().build().unwrap() });
    for round in 0..300 {
        let probes: Vec<Arc<Probe>> = (0..20).map(|_| Arc::default()).collect();
        // Due at once: a kicked pass runs them on a worker.
        let handles: Vec<TimerHandle> = probes
            .iter()
            .map(|p| timer.schedule(Duration::ZERO, probed(p)))
            .collect();
        let results: Vec<bool> = handles
            .iter()
            .zip(&probes)
            .map(|(h, p)| cancel_noting(h, p))
            .collect();
        // Let every pass finish.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while timer.stats().callbacks != 0
            || !handles.iter().all(|h| h.is_expired() || h.is_cancelled())
        {
            assert!(
                std::time::Instant::now() < deadline,
                "round {round}: callbacks never ran"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        // A claimed callback may still be running: wait for its count.
        std::thread::sleep(Duration::from_millis(2));
        for ((h, p), c) in handles.iter().zip(&probes).zip(&results) {
            settled(h, p, *c, &format!("round {round}"));
        }
    }
}

#[test]
fn shutdown_racing_an_advance_hands_back_or_runs_each_callback_once() {
    let _guard = common::guard();
    for round in 0..1000 {
        let timer = manual();
        let runs: Vec<Arc<AtomicU32>> = (0..100).map(|_| Arc::default()).collect();
        let handles: Vec<TimerHandle> = runs
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let r = r.clone();
                timer.schedule(Duration::from_millis(1 + (i as u64 % 3)), move || {
                    r.fetch_add(1, Ordering::SeqCst);
                })
            })
            .collect();
        let advancer = advance_alongside(&timer, Duration::from_millis(3));
        let unfired = timer.shutdown();
        let handed_back = unfired.callbacks.len();
        // Running a handed-back one counts it.
        for callback in unfired.callbacks {
            callback.run();
        }
        advancer.join().unwrap();
        let ran: u32 = runs.iter().map(|r| r.load(Ordering::SeqCst)).sum();
        for (i, r) in runs.iter().enumerate() {
            assert_eq!(r.load(Ordering::SeqCst), 1, "round {round}: callback {i}");
        }
        let expired = handles.iter().filter(|h| h.is_expired()).count();
        let cancelled = handles.iter().filter(|h| h.is_cancelled()).count();
        assert_eq!(cancelled, handed_back, "round {round}");
        assert_eq!(expired + cancelled, 100, "round {round}: ran {ran}");
        assert!(handles.iter().all(|h| !h.cancel()), "round {round}");
    }
}

#[test]
fn a_callback_cancelling_one_due_later_in_a_later_batch_stops_it() {
    let _guard = common::guard();
    let timer = manual();
    let (probe, victim_slot) = (
        Arc::new(Probe::default()),
        Arc::new(Mutex::new(None::<TimerHandle>)),
    );
    let result = Arc::new(Mutex::new(None));
    {
        let (victim_slot, result) = (victim_slot.clone(), result.clone());
        timer.schedule(Duration::from_millis(1), move || {
            let victim = victim_slot.lock().unwrap().take().unwrap();
            *result.lock().unwrap() = Some(victim.cancel());
        });
    }
    // 100 callbacks in between: the victim is in a later batch.
    let (count, _) = (Arc::new(AtomicU32::new(0)), ());
    for _ in 0..100 {
        let count = count.clone();
        timer.schedule(Duration::from_millis(1), move || {
            count.fetch_add(1, Ordering::SeqCst);
        });
    }
    let victim = timer.schedule(Duration::from_millis(1), probed(&probe));
    let victim_view = timer.schedule(Duration::from_secs(3600), || {});
    drop(victim_view);
    *victim_slot.lock().unwrap() = Some(victim);
    timer.advance(Duration::from_millis(1));
    assert_eq!(count.load(Ordering::SeqCst), 100);
    let cancelled = result.lock().unwrap().unwrap();
    assert_eq!(probe.runs.load(Ordering::SeqCst), u32::from(!cancelled));
    assert!(cancelled, "the victim had not run: its cancel stops it");
}

#[test]
fn a_callback_scheduling_one_due_at_once_runs_it_at_the_next_advance_never_inline() {
    let _guard = common::guard();
    let timer = manual();
    let inner_ran = Arc::new(AtomicU32::new(0));
    let depth = Arc::new(AtomicU32::new(0));
    {
        let (timer2, inner_ran, depth) = (timer.clone(), inner_ran.clone(), depth.clone());
        timer.schedule(Duration::from_millis(1), move || {
            depth.fetch_add(1, Ordering::SeqCst);
            let (inner_ran, depth2) = (inner_ran.clone(), depth.clone());
            timer2.schedule(Duration::ZERO, move || {
                assert_eq!(
                    depth2.load(Ordering::SeqCst),
                    0,
                    "never inside the outer callback"
                );
                inner_ran.fetch_add(1, Ordering::SeqCst);
            });
            depth.fetch_sub(1, Ordering::SeqCst);
        });
    }
    timer.advance(Duration::from_millis(1));
    let after_first = inner_ran.load(Ordering::SeqCst);
    timer.advance(Duration::from_millis(1));
    assert_eq!(after_first + inner_ran.load(Ordering::SeqCst), 1);
    assert_eq!(inner_ran.load(Ordering::SeqCst), 1);
    assert_eq!(timer.stats().pending, 0);
}

/// A panic payload whose own drop panics.
struct PanicOnDrop;

impl Drop for PanicOnDrop {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            panic!("payload drop (expected by the test)");
        }
    }
}

#[test]
fn a_callback_panicking_with_a_payload_whose_drop_panics_is_contained() {
    let _guard = common::guard();
    let timer = manual();
    let runs = Arc::new(AtomicU32::new(0));
    timer.schedule(Duration::from_millis(1), || {
        std::panic::panic_any(PanicOnDrop);
    });
    let mut handles = Vec::new();
    for _ in 0..3 {
        let runs = runs.clone();
        handles.push(timer.schedule(Duration::from_millis(1), move || {
            runs.fetch_add(1, Ordering::SeqCst);
        }));
    }
    let advanced = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        timer.advance(Duration::from_millis(1));
    }));
    let advanced_ok = advanced.is_ok();
    // Whatever the advance did, the other callbacks ran exactly once or are
    // still to run (not lost).
    timer.advance(Duration::from_millis(1));
    let phases: Vec<_> = handles
        .iter()
        .map(|h| (h.is_expired(), h.is_cancelled()))
        .collect();
    assert_eq!(
        (advanced_ok, runs.load(Ordering::SeqCst), phases),
        (true, 3, vec![(true, false); 3]),
        "advance returned, and the siblings ran"
    );
    assert_eq!(timer.stats().panicked, 1);
}

#[test]
fn a_waker_panicking_with_a_payload_whose_drop_panics_is_contained() {
    use std::future::Future;
    use std::task::{Context, Wake, Waker};

    struct Bad;
    impl Wake for Bad {
        fn wake(self: Arc<Self>) {
            std::panic::panic_any(PanicOnDrop);
        }
    }
    let _guard = common::guard();
    let timer = manual();
    let mut bad = timer.sleep(Duration::from_millis(1));
    let waker = Waker::from(Arc::new(Bad));
    assert!(std::pin::Pin::new(&mut bad)
        .poll(&mut Context::from_waker(&waker))
        .is_pending());
    let mut good = tokio_test::task::spawn(timer.sleep(Duration::from_millis(1)));
    let _ = good.poll();
    let advanced = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        timer.advance(Duration::from_millis(1));
    }));
    assert!(advanced.is_ok(), "the panic escaped advance");
    assert!(good.is_woken());
    assert_eq!(timer.stats().panicked, 1);
}
