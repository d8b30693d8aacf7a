//! Callback edge cases that held when probed: a three-way race of
//! `advance`, `cancel` and `shutdown`; `Unfired`'s order across shards;
//! handles outliving their runtime; deadlines beyond the tick range; a
//! callback dropping the last `Timer`; schedules on many shards racing
//! advances and a shutdown. Invariants only, never timing.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::Duration;

mod common;
use common::manual;

fn runs(n: usize) -> Arc<Vec<AtomicU32>> {
    Arc::new((0..n).map(|_| AtomicU32::new(0)).collect())
}

#[test]
fn advance_cancel_and_shutdown_racing_run_or_hand_back_each_callback_once() {
    let _guard = common::guard();
    for round in 0..300 {
        let timer = manual();
        let n = 80;
        let runs = runs(n);
        let handles: Arc<Vec<_>> = Arc::new(
            (0..n)
                .map(|i| {
                    let (runs, again) = (runs.clone(), timer.clone());
                    timer.schedule(Duration::from_millis(1 + i as u64 % 7), move || {
                        runs[i].fetch_add(1, Ordering::SeqCst);
                        // Refused once the timer has shut down.
                        let _ = again.try_schedule(Duration::ZERO, || {});
                    })
                })
                .collect(),
        );
        let barrier = Arc::new(Barrier::new(3));
        let (advancer, start) = (timer.clone(), barrier.clone());
        let advance = std::thread::spawn(move || {
            start.wait();
            advancer.advance(Duration::from_millis(10));
        });
        let (cancelling, start) = (handles.clone(), barrier.clone());
        let cancel = std::thread::spawn(move || {
            start.wait();
            let every_third = cancelling.iter().enumerate().step_by(3);
            every_third
                .map(|(i, h)| (i, h.cancel()))
                .collect::<Vec<_>>()
        });
        barrier.wait();
        let unfired = timer.shutdown();
        advance.join().unwrap();
        let stopped = cancel.join().unwrap();
        let deadlines: Vec<_> = unfired.callbacks.iter().map(|c| c.deadline()).collect();
        assert!(deadlines.is_sorted(), "round {round}: {deadlines:?}");
        for (i, handle) in handles.iter().enumerate() {
            let ran = runs[i].load(Ordering::SeqCst);
            assert!(
                handle.is_expired() ^ handle.is_cancelled(),
                "round {round}: {i}"
            );
            assert_eq!(ran == 1, handle.is_expired(), "round {round}: {i}");
        }
        unfired.callbacks.into_iter().for_each(|c| c.run());
        for (i, runs) in runs.iter().enumerate() {
            let cancelled = stopped.contains(&(i, true));
            let want = u32::from(!cancelled);
            assert_eq!(runs.load(Ordering::SeqCst), want, "round {round}: {i}");
        }
    }
}

#[test]
fn unfired_keeps_scheduling_order_for_one_deadline_across_shards() {
    let _guard = common::guard();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let timer = rt.block_on(async { wheel::Timer::builder().shards(2).build().unwrap() });
    let due = timer.now() + Duration::from_secs(100);
    let order = Arc::new(Mutex::new(Vec::new()));
    for i in 0..40 {
        let (timer, order) = (timer.clone(), order.clone());
        // A thread each, one after another: homes dealt round the shards.
        std::thread::spawn(move || timer.schedule_at(due, move || order.lock().unwrap().push(i)))
            .join()
            .unwrap();
    }
    timer.shutdown().callbacks.into_iter().for_each(|c| c.run());
    assert_eq!(*order.lock().unwrap(), (0..40).collect::<Vec<_>>());
}

#[test]
fn a_handle_outliving_its_runtime_reports_what_became_of_its_callback() {
    let _guard = common::guard();
    let rt = common::paused_rt_all();
    let runs = runs(2);
    let (timer, late, early) = rt.block_on(async {
        let timer = wheel::Timer::builder().build().unwrap();
        let counted = |i: usize| {
            let runs = runs.clone();
            move || {
                runs[i].fetch_add(1, Ordering::SeqCst);
            }
        };
        let late = timer.schedule(Duration::from_secs(5), counted(0));
        let early = timer.schedule(Duration::from_millis(1), counted(1));
        tokio::time::sleep(Duration::from_millis(2)).await;
        (timer, late, early)
    });
    drop(rt);
    assert!(
        !late.cancel(),
        "handed back (and dropped) by the runtime's shutdown"
    );
    assert!(late.is_cancelled() && !late.is_expired());
    assert!(early.is_expired() && !early.is_cancelled());
    let counts: Vec<_> = runs.iter().map(|r| r.load(Ordering::SeqCst)).collect();
    assert_eq!(counts, [0, 1]);
    assert!(format!("{late:?}").contains("cancelled: true"));
    let refused = timer.try_schedule(Duration::ZERO, || {}).unwrap_err();
    assert!(refused.is_shutdown());
}

#[test]
fn a_deadline_beyond_the_tick_range_runs_once_the_clock_passes_it() {
    let _guard = common::guard();
    let timer = manual();
    let runs = runs(1);
    let counted = runs.clone();
    let year = Duration::from_secs(86_400 * 365);
    let far = timer.now() + year * 1000;
    let handle = timer.schedule_at(far, move || {
        counted[0].fetch_add(1, Ordering::SeqCst);
    });
    timer.advance(year * 999);
    assert!(!handle.is_expired());
    timer.advance(year * 2);
    assert!(handle.is_expired());
    timer.advance(year * 2000);
    assert_eq!(runs[0].load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn a_callback_dropping_the_last_timer_leaves_its_siblings_to_run() {
    let _guard = common::guard();
    let timer = wheel::Timer::builder().build().unwrap();
    let runs = runs(3);
    let last = timer.clone();
    let counted = runs.clone();
    timer.schedule(Duration::from_millis(5), move || {
        drop(last);
        counted[0].fetch_add(1, Ordering::SeqCst);
    });
    for (i, ms) in [(1, 5), (2, 50)] {
        let counted = runs.clone();
        timer.schedule(Duration::from_millis(ms), move || {
            counted[i].fetch_add(1, Ordering::SeqCst);
        });
    }
    drop(timer);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let counts: Vec<_> = runs.iter().map(|r| r.load(Ordering::SeqCst)).collect();
    assert_eq!(counts, [1, 1, 1]);
}

/// Threads scheduling on a four-shard manual timer while it advances: none
/// runs before its deadline by the timer's clock, each runs once, and the
/// stats agree.
#[test]
fn schedules_on_many_shards_racing_advances_run_once_never_early() {
    for round in 0..100 {
        let timer = wheel::Timer::builder().manual().shards(4).build().unwrap();
        let (early, ran) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
        let schedulers: Vec<_> = (0..3u64)
            .map(|k| {
                let (timer, early, ran) = (timer.clone(), early.clone(), ran.clone());
                std::thread::spawn(move || {
                    (0..50u64)
                        .map(|i| {
                            let at = timer.now() + Duration::from_micros((i * 131 + k * 17) % 3000);
                            let (t, e, r) = (timer.clone(), early.clone(), ran.clone());
                            timer.schedule_at(at, move || {
                                e.fetch_add(u32::from(t.now() < at), Ordering::SeqCst);
                                r.fetch_add(1, Ordering::SeqCst);
                            })
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        for _ in 0..10 {
            timer.advance(Duration::from_micros(500));
        }
        let handles: Vec<_> = schedulers
            .into_iter()
            .flat_map(|s| s.join().unwrap())
            .collect();
        timer.advance(Duration::from_secs(1));
        assert_eq!(early.load(Ordering::SeqCst), 0, "round {round}");
        assert_eq!(ran.load(Ordering::SeqCst), 150, "round {round}");
        assert!(handles.iter().all(|h| h.is_expired() && !h.cancel()));
        let s = timer.stats();
        let counts = (s.pending, s.callbacks, s.fired, s.cancelled);
        assert_eq!(counts, (0, 0, 150, 0), "round {round}: {s}");
    }
}

/// A shutdown racing schedules on other shards hands back every callback
/// that was accepted, by deadline, each handle cancelled, and counts them.
#[test]
fn a_shutdown_racing_schedules_on_many_shards_hands_back_each_accepted_one() {
    for round in 0..200 {
        let timer = wheel::Timer::builder().manual().shards(4).build().unwrap();
        let barrier = Arc::new(Barrier::new(4));
        let schedulers: Vec<_> = (0..3u64)
            .map(|k| {
                let (timer, barrier) = (timer.clone(), barrier.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    (0..40u64)
                        .filter_map(|i| {
                            let delay = Duration::from_millis(1 + (i + k) % 5);
                            timer.try_schedule(delay, || {}).ok()
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        barrier.wait();
        let unfired = timer.shutdown();
        let handles: Vec<_> = schedulers
            .into_iter()
            .flat_map(|s| s.join().unwrap())
            .collect();
        assert_eq!(unfired.callbacks.len(), handles.len(), "round {round}");
        assert!(handles.iter().all(|h| h.is_cancelled() && !h.cancel()));
        let by_deadline = unfired.callbacks.windows(2);
        assert!(by_deadline
            .into_iter()
            .all(|w| w[0].deadline() <= w[1].deadline()));
        let s = timer.stats();
        let counts = (s.pending, s.callbacks, s.cancelled as usize);
        assert_eq!(counts, (0, 0, handles.len()), "round {round}: {s}");
    }
}
