//! Timers across runtimes: multi-thread runtimes and several runtimes at
//! once. A runtime's shutdown is in `runtime_shutdown.rs`; explicit timers
//! and their lifetime in `explicit_timers.rs`.

use std::future::pending;
use std::sync::mpsc;
use std::thread;

use tokio::runtime::{Builder as RtBuilder, Handle};
use tokio::time;
use tokio_test::{assert_pending, assert_ready, task};
use wheel::{Instant, Timer};

mod common;
use common::{ms, multi_rt, paused_rt, real_rt, registered, secs, splitmix};

/// Awaits every task, failing with `what` if they take more than a
/// generous 10 s (the sleeps involved are at most tens of milliseconds).
async fn join_within_10s(handles: Vec<tokio::task::JoinHandle<()>>, what: &str) {
    let all = async {
        for h in handles {
            h.await.unwrap();
        }
    };
    if time::timeout(secs(10), all).await.is_err() {
        panic!("timed out: {what}");
    }
}

/// Spawns `n` tasks sleeping 1 to `spread` ms on `timer` (the default timer
/// if `None`), each asserting it did not wake early, and awaits them all.
async fn sleepers_never_early(n: u64, spread: u64, timer: Option<&Timer>, what: &str) {
    let mut handles = Vec::new();
    for i in 0..n {
        let timer = timer.cloned();
        handles.push(tokio::spawn(async move {
            let deadline = Instant::now() + ms(1 + i % spread);
            match timer {
                Some(timer) => timer.sleep_until(deadline).await,
                None => wheel::sleep_until(deadline).await,
            }
            assert!(Instant::now() >= deadline, "early");
        }));
    }
    join_within_10s(handles, what).await;
}

// Multi-thread runtime (real time: only luck-free assertions)
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_thread_many_sleeps_are_never_early_and_all_complete() {
    let _guard = common::guard();
    const TASKS: u64 = 2000;
    let timer = Timer::current();
    let explicit = Timer::builder()
        .tick(ms(7))
        .slots_per_level(4)
        .build()
        .unwrap();
    let mut seed = 0x5eed;
    let mut handles = Vec::new();
    for i in 0..TASKS {
        let delay = ms(1 + splitmix(&mut seed) % 30);
        let explicit = explicit.clone();
        handles.push(tokio::spawn(async move {
            let start = Instant::now();
            let deadline = start + delay;
            match i % 4 {
                0 => wheel::sleep(delay).await,
                1 => wheel::sleep_until(deadline).await,
                2 => {
                    let out = wheel::timeout(delay, pending::<()>()).await;
                    assert!(out.is_err(), "a pending future cannot beat its timeout");
                }
                _ => explicit.sleep(delay).await,
            }
            let now = Instant::now();
            assert!(
                now >= deadline,
                "task {i}: {delay:?} sleep woke {:?} early",
                deadline - now
            );
        }));
    }
    join_within_10s(handles, "all sleeps complete").await;

    let stats = timer.stats();
    assert_eq!(
        (stats.pending, stats.entries, stats.cancelled),
        (0, 0, 0),
        "{stats:?}"
    );
    assert!(stats.fired <= TASKS * 3 / 4, "{stats:?}");
    let stats = explicit.stats();
    assert_eq!(
        (stats.pending, stats.entries, stats.cancelled),
        (0, 0, 0),
        "{stats:?}"
    );
    assert!(stats.fired <= TASKS / 4, "{stats:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_thread_churn_leaves_no_pending_timers_and_no_entries() {
    let _guard = common::guard();
    const TASKS: u64 = 64;
    const ROUNDS: u64 = 50;
    let timer = Timer::current();
    let explicit = Timer::builder()
        .tick(ms(3))
        .slots_per_level(2)
        .build()
        .unwrap();
    let mut handles = Vec::new();
    for t in 0..TASKS {
        let explicit = explicit.clone();
        handles.push(tokio::spawn(async move {
            for r in 0..ROUNDS {
                // Each of these registers on its first poll (a minute is far
                // away) and is cancelled by the drop.
                let mut sleep = wheel::sleep(secs(60 + t + r));
                assert!(futures::poll!(&mut sleep).is_pending());
                drop(sleep);
                let mut timeout = Box::pin(wheel::timeout(secs(60), pending::<()>()));
                assert!(futures::poll!(timeout.as_mut()).is_pending());
                drop(timeout);
                let mut on_explicit = explicit.sleep(secs(60 + r));
                assert!(futures::poll!(&mut on_explicit).is_pending());
                drop(on_explicit);
                if r % 10 == 0 {
                    // Some that really fire, interleaved with the churn.
                    wheel::sleep(ms(1)).await;
                    explicit.sleep(ms(2)).await;
                } else if r % 3 == 0 {
                    tokio::task::yield_now().await;
                }
            }
        }));
    }
    join_within_10s(handles, "churn completes").await;

    let stats = timer.stats();
    assert_eq!((stats.pending, stats.entries), (0, 0), "{stats:?}");
    assert_eq!(stats.cancelled, TASKS * ROUNDS * 2, "{stats:?}");
    assert!(stats.fired <= TASKS * ROUNDS / 10, "{stats:?}");
    let stats = explicit.stats();
    assert_eq!((stats.pending, stats.entries), (0, 0), "{stats:?}");
    assert_eq!(stats.cancelled, TASKS * ROUNDS, "{stats:?}");
    assert!(stats.fired <= TASKS * ROUNDS / 10, "{stats:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_thread_workers_share_the_runtimes_default_timer() {
    let _guard = common::guard();
    let timer = Timer::current();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    for _ in 0..16 {
        let tx = tx.clone();
        tokio::spawn(async move {
            tx.send(registered(wheel::sleep(secs(60)))).unwrap();
        });
    }
    drop(tx);
    let mut sleeps = Vec::new();
    while let Some(sleep) = rx.recv().await {
        sleeps.push(sleep);
    }
    assert_eq!(sleeps.len(), 16);
    assert_eq!(timer.stats().pending, 16);
    drop(sleeps);
    let stats = timer.stats();
    assert_eq!((stats.pending, stats.entries, stats.cancelled), (0, 0, 16));
}

#[test]
fn concurrent_first_use_on_a_multi_thread_runtime_makes_one_default_timer() {
    let _guard = common::guard();
    const TASKS: usize = 16;
    for _ in 0..10 {
        let rt = RtBuilder::new_multi_thread()
            .worker_threads(4)
            .enable_time()
            .build()
            .unwrap();
        rt.block_on(async {
            let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(TASKS));
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
            for _ in 0..TASKS {
                let barrier = barrier.clone();
                let tx = tx.clone();
                tokio::spawn(async move {
                    barrier.wait().await;
                    // The first use of the default timer, racing the others.
                    tx.send(registered(wheel::sleep(secs(60)))).unwrap();
                });
            }
            drop(tx);
            let mut sleeps = Vec::new();
            while let Some(sleep) = rx.recv().await {
                sleeps.push(sleep);
            }
            assert_eq!(sleeps.len(), TASKS);
            let timer = Timer::current();
            assert_eq!(
                timer.stats().pending,
                TASKS,
                "sleeps landed on several timers"
            );
            drop(sleeps);
            assert_eq!(timer.stats().cancelled, TASKS as u64);
            // Timers built by the losers of the race are freed: only the
            // default timer's sentinel task is left.
            let metrics = Handle::current().metrics();
            let one_left = async {
                while metrics.num_alive_tasks() != 1 {
                    time::sleep(ms(1)).await;
                }
            };
            time::timeout(secs(10), one_left)
                .await
                .expect("one sentinel left");
        });
    }
}

#[test]
fn a_timer_on_a_multi_thread_runtime_serves_another_runtimes_tasks() {
    let _guard = common::guard();
    let rt_a = multi_rt();
    let timer = Timer::builder()
        .tick(ms(5))
        .runtime(rt_a.handle().clone())
        .build()
        .unwrap();
    let rt_b = real_rt();
    rt_b.block_on(async {
        sleepers_never_early(50, 20, Some(&timer), "the other runtime's alarm wakes us").await;
    });
    let stats = timer.stats();
    assert_eq!((stats.pending, stats.entries, stats.cancelled), (0, 0, 0));
    drop(rt_a);
    assert!(timer.is_shut_down());
}

// ---------------------------------------------------------------------------
// Several runtimes
// ---------------------------------------------------------------------------

#[test]
fn paused_runtimes_on_two_threads_have_their_own_timers_and_clocks() {
    let _guard = common::guard();
    let (a_ready, b_waits) = mpsc::channel::<()>();
    let (b_done, a_waits) = mpsc::channel::<()>();
    let a = thread::spawn(move || {
        paused_rt().block_on(async {
            let timer = Timer::current();
            let start = Instant::now();
            let mut sleeps: Vec<_> = (0..3).map(|_| task::spawn(wheel::sleep(ms(10)))).collect();
            for s in &mut sleeps {
                assert_pending!(s.poll());
            }
            a_ready.send(()).unwrap();
            a_waits
                .recv_timeout(secs(10))
                .expect("runtime B advanced its clock");
            // B advanced its clock by a second and fired its sleeps; ours
            // neither moved nor fired.
            assert_eq!(Instant::now(), start);
            for s in &mut sleeps {
                assert!(!s.is_woken(), "another runtime's clock fired our sleep");
                assert_pending!(s.poll());
            }
            assert_eq!((timer.stats().pending, timer.stats().fired), (3, 0));
            time::advance(ms(10)).await;
            for s in &mut sleeps {
                assert!(s.is_woken());
                assert_ready!(s.poll());
            }
            timer.stats()
        })
    });
    let b = thread::spawn(move || {
        paused_rt().block_on(async {
            let timer = Timer::current();
            let mut sleeps: Vec<_> = (0..5).map(|_| task::spawn(wheel::sleep(ms(10)))).collect();
            for s in &mut sleeps {
                assert_pending!(s.poll());
            }
            b_waits
                .recv_timeout(secs(10))
                .expect("runtime A registered");
            // A's three sleeps are in A's timer, not ours.
            assert_eq!(timer.stats().pending, 5);
            time::advance(secs(1)).await;
            for s in &mut sleeps {
                assert!(s.is_woken());
                assert_ready!(s.poll());
            }
            b_done.send(()).unwrap();
            timer.stats()
        })
    });
    let a = a.join().unwrap();
    let b = b.join().unwrap();
    assert_eq!((a.pending, a.entries, a.fired), (0, 0, 3), "{a:?}");
    assert_eq!((b.pending, b.entries, b.fired), (0, 0, 5), "{b:?}");
}

#[test]
fn runtimes_taking_turns_on_one_thread_keep_separate_default_timers() {
    let _guard = common::guard();
    let rt1 = paused_rt();
    let rt2 = paused_rt();
    let t1 = rt1.block_on(async { Timer::current() });
    let t2 = rt2.block_on(async { Timer::current() });
    rt1.block_on(async {
        for _ in 0..2 {
            wheel::sleep(ms(5)).await;
        }
    });
    rt2.block_on(async {
        for _ in 0..7 {
            wheel::sleep(ms(5)).await;
        }
    });
    rt1.block_on(async { wheel::sleep(ms(5)).await });
    assert_eq!(t1.stats().fired, 3);
    assert_eq!(t2.stats().fired, 7);
    // `Timer::current()` keeps answering with each runtime's own timer.
    assert_eq!(rt1.block_on(async { Timer::current().stats() }), t1.stats());
    assert_eq!(rt2.block_on(async { Timer::current().stats() }), t2.stats());

    // Advancing rt2's clock does not fire a sleep of rt1.
    let now1 = rt1.block_on(async { Instant::now() });
    let mut s1 = task::spawn(wheel::sleep_until(now1 + ms(10)));
    rt1.block_on(async { assert_pending!(s1.poll()) });
    rt2.block_on(async { time::advance(secs(100)).await });
    assert!(!s1.is_woken());
    rt1.block_on(async {
        assert_pending!(s1.poll());
        time::advance(ms(9)).await;
        assert!(!s1.is_woken());
        time::advance(ms(1)).await;
        assert!(s1.is_woken());
        assert_ready!(s1.poll());
    });
    assert_eq!((t1.stats().fired, t2.stats().fired), (4, 7));
}

#[test]
fn a_runtime_shutting_down_does_not_break_another_runtimes_timers() {
    let _guard = common::guard();
    let rt_b = paused_rt();
    let timer_b = rt_b.block_on(async {
        wheel::sleep(ms(1)).await;
        Timer::current()
    });

    let rt_a = paused_rt();
    let (timer_a, pending_in_a) = rt_a.block_on(async {
        let start = Instant::now();
        wheel::sleep(ms(3)).await;
        assert_eq!(start.elapsed(), ms(3));
        let mut p = task::spawn(wheel::sleep(secs(60)));
        assert_pending!(p.poll());
        (Timer::current(), p)
    });
    assert_eq!(timer_a.stats().fired, 1);
    drop(rt_a);
    assert!(timer_a.is_shut_down());
    assert!(!timer_b.is_shut_down());
    // Dropping a pending sleep of the dead timer is fine too.
    drop(pending_in_a);
    assert_eq!(timer_a.stats().pending, 0);

    rt_b.block_on(async {
        let current = Timer::current();
        assert!(!current.is_shut_down());
        let start = Instant::now();
        wheel::sleep(ms(20)).await;
        assert_eq!(start.elapsed(), ms(20));
        let out = wheel::timeout(ms(5), pending::<()>()).await;
        assert!(out.is_err());
        assert_eq!(start.elapsed(), ms(25));
        // Still the very timer B had before A went away.
        assert_eq!(current.stats(), timer_b.stats());
        assert_eq!(timer_b.stats().fired, 3);
    });

    // And a runtime created afterwards gets a fresh, working timer.
    let rt_c = paused_rt();
    let timer_c = rt_c.block_on(async {
        wheel::sleep(ms(2)).await;
        Timer::current()
    });
    assert_eq!(timer_c.stats().fired, 1);
    assert_eq!(timer_b.stats().fired, 3);
}

#[test]
fn runtimes_coming_and_going_do_not_disturb_a_busy_multi_thread_runtime() {
    let _guard = common::guard();
    let main = multi_rt();
    let churner = thread::spawn(|| {
        let mut timers = Vec::new();
        for _ in 0..20 {
            let rt = real_rt();
            let (timer, leftover) = rt.block_on(async {
                wheel::sleep(ms(1)).await;
                let mut left = wheel::sleep(secs(60));
                assert!(futures::poll!(&mut left).is_pending());
                (Timer::current(), left)
            });
            drop(rt);
            assert!(timer.is_shut_down());
            drop(leftover);
            timers.push(timer);
        }
        timers
    });
    main.block_on(async {
        let timer = Timer::current();
        sleepers_never_early(500, 25, None, "all sleeps complete").await;
        assert!(!timer.is_shut_down());
        assert!(!Timer::current().is_shut_down());
        let stats = timer.stats();
        assert_eq!((stats.pending, stats.entries, stats.cancelled), (0, 0, 0));
    });
    let dead = churner.join().unwrap();
    assert!(dead.iter().all(Timer::is_shut_down));
}

// ---------------------------------------------------------------------------
