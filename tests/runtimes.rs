//! Timers across runtimes: multi-thread runtimes, several runtimes at once,
//! runtime shutdown, explicit timers, the builder's errors and timer lifetime.

use std::future::{pending, Future};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::mpsc;
use std::task::{Context, Poll};
use std::thread;
use std::time::Duration;

use tokio::runtime::{Builder as RtBuilder, Handle, Runtime};
use tokio::time;
use tokio_test::{assert_pending, assert_ready, task};
use wheel::{Instant, Timer};

mod common;
use common::{ms, panic_message, paused_rt, secs};

/// A current-thread runtime with timers, on real time.
fn real_rt() -> Runtime {
    RtBuilder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
}

fn multi_rt() -> Runtime {
    RtBuilder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap()
}

/// A deterministic pseudo-random stream (splitmix64).
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Polls `f` once with a no-op context; for futures that must be polled
/// outside any runtime.
fn poll_once<F: Future + Unpin>(f: &mut F) -> Poll<F::Output> {
    let mut cx = Context::from_waker(std::task::Waker::noop());
    Pin::new(f).poll(&mut cx)
}

/// Polls `sleep` once, so that it registers, and returns it (pending).
fn registered(mut sleep: wheel::Sleep) -> wheel::Sleep {
    assert!(
        poll_once(&mut sleep).is_pending(),
        "expected a pending sleep"
    );
    sleep
}

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

/// Lets spawned tasks (such as a timer's sentinel) run.
async fn settle() {
    for _ in 0..8 {
        tokio::task::yield_now().await;
    }
}

/// The round-up rule: the first instant at or after `deadline` that is a
/// whole number of ticks after `origin`.
fn rounded_up(origin: Instant, tick: Duration, deadline: Instant) -> Instant {
    let since = (deadline - origin).as_nanos();
    let tick_ns = tick.as_nanos();
    let ticks = since.div_ceil(tick_ns);
    origin + Duration::from_nanos(u64::try_from(ticks * tick_ns).unwrap())
}

// ---------------------------------------------------------------------------
// Multi-thread runtime (real time: only luck-free assertions)
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_thread_many_sleeps_are_never_early_and_all_complete() {
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
// A timer whose runtime has shut down
// ---------------------------------------------------------------------------

#[test]
fn a_timer_reports_its_runtimes_shutdown() {
    let rt = paused_rt();
    let (default, explicit) = rt.block_on(async {
        (
            Timer::current(),
            Timer::builder().tick(ms(10)).build().unwrap(),
        )
    });
    let outside = Timer::builder()
        .runtime(rt.handle().clone())
        .build()
        .unwrap();
    assert!(!default.is_shut_down() && !explicit.is_shut_down() && !outside.is_shut_down());
    drop(rt);
    assert!(default.is_shut_down());
    assert!(explicit.is_shut_down());
    assert!(outside.is_shut_down());
    // Another runtime's default timer is a different, live one.
    let rt_other = paused_rt();
    let other = rt_other.block_on(async { Timer::current() });
    assert!(!other.is_shut_down());
    drop(rt_other);
    assert!(other.is_shut_down());
}

#[test]
fn a_pending_sleep_of_a_shut_down_timer_panics_when_polled_and_never_completes() {
    let rt_a = paused_rt();
    let (timer, mut pending_sleep, mut fired_sleep) = rt_a.block_on(async {
        let timer = Timer::builder().tick(ms(10)).build().unwrap();
        let mut pending_sleep = task::spawn(timer.sleep(secs(60)));
        let mut fired_sleep = task::spawn(timer.sleep(ms(10)));
        assert_pending!(pending_sleep.poll());
        assert_pending!(fired_sleep.poll());
        time::advance(ms(10)).await;
        assert!(fired_sleep.is_woken());
        assert!(!pending_sleep.is_woken());
        (timer, pending_sleep, fired_sleep)
    });
    drop(rt_a);
    assert!(timer.is_shut_down());
    assert!(
        pending_sleep.is_woken(),
        "shutdown wakes pending sleeps, so nothing hangs"
    );
    assert!(!pending_sleep.is_elapsed());
    assert!(fired_sleep.is_elapsed());

    let rt_b = paused_rt();
    rt_b.block_on(async {
        // Fired before the shutdown: still completes.
        assert_ready!(fired_sleep.poll());
        // Pending at the shutdown: panics, every time, and never completes.
        for _ in 0..2 {
            let err = catch_unwind(AssertUnwindSafe(|| {
                let _ = pending_sleep.poll();
            }))
            .unwrap_err();
            let msg = panic_message(&*err);
            assert!(msg.contains("shut down"), "{msg}");
            assert!(!pending_sleep.is_elapsed());
        }
    });
    drop(pending_sleep);
    let stats = timer.stats();
    assert_eq!((stats.pending, stats.entries), (0, 0), "{stats:?}");
    assert_eq!((stats.fired, stats.cancelled), (1, 1), "{stats:?}");
}

#[test]
fn a_sleep_that_fired_before_shutdown_completes_even_outside_a_runtime() {
    let rt = paused_rt();
    let (timer, mut sleep) = rt.block_on(async {
        let mut sleep = task::spawn(wheel::sleep(ms(5)));
        assert_pending!(sleep.poll());
        time::advance(ms(5)).await;
        assert!(sleep.is_woken());
        (Timer::current(), sleep)
    });
    drop(rt);
    assert!(timer.is_shut_down());
    assert_ready!(sleep.poll());
    assert!(sleep.is_elapsed());
    assert_eq!(timer.stats().entries, 0);
}

#[test]
fn new_futures_on_a_shut_down_timer() {
    let rt_a = paused_rt();
    let timer = rt_a.block_on(async { Timer::builder().build().unwrap() });
    drop(rt_a);
    assert!(timer.is_shut_down());
    paused_rt().block_on(async {
        // Nothing to wait for: complete without the timer.
        timer.sleep(Duration::ZERO).await;
        timer.sleep_until(Instant::now() - ms(1)).await;
        assert_eq!(timer.timeout(secs(1), async { 7 }).await, Ok(7));
        // Something to wait for: panic at once rather than hang.
        let mut sleep = timer.sleep(ms(5));
        let err = catch_unwind(AssertUnwindSafe(|| poll_once(&mut sleep))).unwrap_err();
        assert!(panic_message(&*err).contains("shut down"));
        let mut timeout = Box::pin(timer.timeout(ms(5), pending::<()>()));
        let err = catch_unwind(AssertUnwindSafe(|| poll_once(&mut timeout))).unwrap_err();
        assert!(panic_message(&*err).contains("shut down"));
    });
    let stats = timer.stats();
    assert_eq!((stats.pending, stats.entries, stats.fired), (0, 0, 0));
}

#[test]
#[should_panic(expected = "shut down")]
fn awaiting_a_pending_sleep_of_a_shut_down_timer_panics() {
    let rt_a = paused_rt();
    let sleep = {
        let _context = rt_a.enter();
        registered(wheel::sleep(secs(60)))
    };
    drop(rt_a);
    // tokio's own (auto-advanced) timeout turns a hang into a failure.
    let out = paused_rt().block_on(async { time::timeout(secs(3600), sleep).await });
    panic!("the sleep returned {out:?} instead of panicking");
}

#[test]
fn a_task_waiting_on_a_timer_whose_runtime_shuts_down_is_woken_and_fails() {
    let rt_a = multi_rt();
    let timer = Timer::builder()
        .runtime(rt_a.handle().clone())
        .build()
        .unwrap();
    let rt_b = real_rt();
    let waiter = rt_b.spawn({
        let timer = timer.clone();
        async move { timer.sleep(secs(60)).await }
    });
    rt_b.block_on(async {
        let registered = async {
            while timer.stats().pending == 0 {
                tokio::task::yield_now().await;
            }
        };
        time::timeout(secs(10), registered)
            .await
            .expect("the waiter registers");
    });
    drop(rt_a);
    assert!(timer.is_shut_down());
    let joined = rt_b
        .block_on(async { time::timeout(secs(10), waiter).await })
        .expect("the waiter was woken by the shutdown, not left hanging");
    let err = joined.expect_err("the waiter must not complete");
    assert!(err.is_panic());
    let msg = panic_message(&*err.into_panic());
    assert!(msg.contains("shut down"), "{msg}");
}

#[test]
fn shutdown_racing_with_sleepers_on_another_runtime_fails_them_all_and_hangs_none() {
    let rt_a = multi_rt();
    let timer = Timer::builder()
        .tick(ms(1))
        .slots_per_level(4)
        .runtime(rt_a.handle().clone())
        .build()
        .unwrap();
    let rt_b = RtBuilder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    let handles: Vec<_> = (0..200u64)
        .map(|i| {
            let timer = timer.clone();
            rt_b.spawn(async move {
                // Sleeps until the timer's runtime goes away under it.
                let mut n = i;
                loop {
                    let deadline = Instant::now() + ms(1 + n % 5);
                    timer.sleep_until(deadline).await;
                    assert!(Instant::now() >= deadline, "early");
                    n += 1;
                }
            })
        })
        .collect();
    rt_b.block_on(async {
        let busy = async {
            while timer.stats().fired < 400 {
                time::sleep(ms(1)).await;
            }
        };
        time::timeout(secs(10), busy)
            .await
            .expect("the sleepers run");
    });
    drop(rt_a);
    assert!(timer.is_shut_down());
    rt_b.block_on(async {
        for h in handles {
            let joined = time::timeout(secs(10), h).await.expect("a sleeper hangs");
            let err = joined.expect_err("the loop only ends by panicking");
            let msg = panic_message(&*err.into_panic());
            assert!(msg.contains("shut down"), "{msg}");
        }
    });
}

/// A handle that outlived its runtime used to build a timer that was shut
/// down already, so every sleep on it panicked later: now `build` says so.
#[test]
fn building_on_a_runtime_that_has_shut_down_is_an_error() {
    let rt = real_rt();
    let handle = rt.handle().clone();
    drop(rt);
    let error = Timer::builder().runtime(handle).build().unwrap_err();
    assert!(error.is_no_runtime(), "{error}");
    assert!(error.to_string().contains("shut down"), "{error}");
}

#[test]
fn dropping_a_multi_thread_runtimes_timer_elsewhere_frees_it() {
    let rt = multi_rt();
    let metrics = rt.metrics();
    let timer = Timer::builder()
        .runtime(rt.handle().clone())
        .build()
        .unwrap();
    rt.block_on(timer.sleep(ms(2)));
    let sleeps = {
        let _context = rt.enter();
        registered(timer.sleep(secs(60)))
    };
    assert_eq!(metrics.num_alive_tasks(), 1, "the sentinel");
    // The last handles go on a thread outside the runtime.
    thread::spawn(move || drop((timer, sleeps))).join().unwrap();
    rt.block_on(async {
        let freed = async {
            while metrics.num_alive_tasks() != 0 {
                time::sleep(ms(1)).await;
            }
        };
        time::timeout(secs(10), freed)
            .await
            .expect("the timer is freed");
    });
}

// ---------------------------------------------------------------------------
// Explicit timers
// ---------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn explicit_timers_complete_at_the_deadline_rounded_up_to_their_tick() {
    let t0 = Instant::now();
    let ten = Timer::builder().tick(ms(10)).build().unwrap();
    let seven = Timer::builder().tick(ms(7)).build().unwrap();
    let start = Instant::now();
    ten.sleep(ms(25)).await;
    assert_eq!(start.elapsed(), ms(30));
    // 30 ms after seven's origin: 25 more ms rounds up to 56 (8 ticks).
    seven.sleep(ms(25)).await;
    assert_eq!(t0.elapsed(), ms(56));
    let out = seven.timeout(ms(1), pending::<()>()).await;
    assert!(out.is_err());
    assert_eq!(t0.elapsed(), ms(63));
    let deadline = t0 + ms(71);
    ten.sleep_until(deadline).await;
    assert_eq!(t0.elapsed(), ms(80));
    let mut every = seven.interval(ms(14));
    assert_eq!(every.tick().await, t0 + ms(80));
    assert_eq!(every.tick().await, t0 + ms(94));
    assert_eq!(t0.elapsed(), ms(98));
}

#[tokio::test(start_paused = true)]
async fn explicit_ticks_never_fire_early_and_fire_at_the_tick_exactly() {
    for tick in [7u64, 10] {
        let origin = Instant::now();
        let timer = Timer::builder().tick(ms(tick)).build().unwrap();
        let delays = [
            1,
            2,
            tick - 1,
            tick,
            tick + 1,
            2 * tick,
            3 * tick + 2,
            100,
            1000,
            5000,
        ];
        for delay in delays {
            let start = Instant::now();
            let deadline = start + ms(delay);
            let fires = rounded_up(origin, ms(tick), deadline);
            assert!(fires >= deadline && fires - deadline < ms(tick));
            let mut s = task::spawn(timer.sleep(ms(delay)));
            assert_pending!(s.poll());
            time::advance(fires - start - ms(1)).await;
            assert!(
                !s.is_woken(),
                "tick {tick}, delay {delay}: fired a millisecond early"
            );
            assert_pending!(s.poll());
            time::advance(ms(1)).await;
            assert!(
                s.is_woken(),
                "tick {tick}, delay {delay}: not fired at {fires:?}"
            );
            assert_ready!(s.poll());
            // Move off the tick grid before the next one.
            time::advance(ms(delay % 3 + 1)).await;
        }
        let stats = timer.stats();
        assert_eq!((stats.pending, stats.entries), (0, 0));
        assert_eq!(stats.fired, delays.len() as u64);
    }
}

#[test]
fn builder_runtime_builds_a_timer_outside_any_runtime() {
    let rt = paused_rt();
    let timer = Timer::builder()
        .tick(ms(10))
        .slots_per_level(8)
        .runtime(rt.handle().clone())
        .build()
        .unwrap();
    assert_eq!((timer.tick(), timer.slots_per_level()), (ms(10), 8));
    rt.block_on(async {
        let start = Instant::now();
        timer.sleep(ms(25)).await;
        assert_eq!(start.elapsed(), ms(30));
        timer.sleep(ms(1)).await;
        assert_eq!(start.elapsed(), ms(40));
    });
    assert_eq!(timer.stats().fired, 2);
    drop(rt);
    assert!(timer.is_shut_down());
}

#[test]
fn build_errors() {
    // Outside a runtime, with no runtime given.
    assert!(Timer::builder().build().unwrap_err().is_no_runtime());
    assert!(Timer::try_current().unwrap_err().is_no_runtime());

    let rt = real_rt();
    let builder = || Timer::builder().runtime(rt.handle().clone());
    let err = builder().tick(Duration::ZERO).build().unwrap_err();
    assert!(err.is_invalid_tick() && !err.is_invalid_slots() && !err.is_no_runtime());
    assert!(builder()
        .tick(Duration::MAX)
        .build()
        .unwrap_err()
        .is_invalid_tick());
    for slots in [0, 1, 3, 6, 100, 4097, 8192] {
        let err = builder().slots_per_level(slots).build().unwrap_err();
        assert!(err.is_invalid_slots(), "{slots}: {err}");
        assert!(!err.is_invalid_tick() && !err.is_timers_disabled());
    }
    for slots in [2, 4, 64, 4096] {
        let timer = builder().slots_per_level(slots).build().unwrap();
        assert_eq!(timer.slots_per_level(), slots);
    }
    assert!(builder().tick(Duration::from_nanos(1)).build().is_ok());
    for shards in [0, 3, 6, 128] {
        let err = builder().shards(shards).build().unwrap_err();
        assert!(
            err.is_invalid_shards() && !err.is_invalid_slots(),
            "{shards}: {err}"
        );
        assert!(err.to_string().contains("power of two"), "{err}");
    }
    for shards in [1, 2, 64] {
        assert_eq!(builder().shards(shards).build().unwrap().shards(), shards);
    }
    // A limit is counted under one lock: more shards are refused, and the
    // default is one.
    let err = builder().max_pending(10).shards(2).build().unwrap_err();
    assert!(
        err.is_invalid_shards() && err.to_string().contains("max_pending"),
        "{err}"
    );
    assert_eq!(
        builder()
            .max_pending(10)
            .shards(1)
            .build()
            .unwrap()
            .shards(),
        1
    );

    // A runtime without `enable_time()`.
    let no_time = RtBuilder::new_current_thread().build().unwrap();
    let err = Timer::builder()
        .runtime(no_time.handle().clone())
        .build()
        .unwrap_err();
    assert!(err.is_timers_disabled(), "{err}");
    assert!(err.to_string().contains("enable_time"), "{err}");
    no_time.block_on(async {
        assert!(Timer::builder().build().unwrap_err().is_timers_disabled());
        assert!(Timer::try_current().unwrap_err().is_timers_disabled());
        let mut sleep = wheel::sleep(ms(5));
        let err = catch_unwind(AssertUnwindSafe(|| poll_once(&mut sleep))).unwrap_err();
        assert!(panic_message(&*err).contains("timers disabled"));
    });
}

#[test]
fn try_current_outside_a_runtime_is_no_runtime() {
    let err = Timer::try_current().unwrap_err();
    assert!(err.is_no_runtime());
    assert!(!err.is_timers_disabled() && !err.is_invalid_slots() && !err.is_invalid_tick());
    // Also on a thread that has used (and outlived) a runtime.
    paused_rt().block_on(async { wheel::sleep(ms(1)).await });
    assert!(Timer::try_current().unwrap_err().is_no_runtime());
    let err = catch_unwind(Timer::current).unwrap_err();
    assert!(panic_message(&*err).contains("no tokio runtime"));
}

// ---------------------------------------------------------------------------
// Timer lifetime
// ---------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn dropping_every_handle_frees_the_timer() {
    let metrics = Handle::current().metrics();
    settle().await;
    let base = metrics.num_alive_tasks();

    let timer = Timer::builder().tick(ms(5)).build().unwrap();
    let copy = timer.clone();
    settle().await;
    // The timer's sentinel task lives exactly as long as the timer.
    assert_eq!(metrics.num_alive_tasks(), base + 1);
    let mut sleep = task::spawn(copy.sleep(ms(50)));
    assert_pending!(sleep.poll());
    // A cancelled sleep leaves the alarm armed; that must not keep it alive.
    drop(sleep);
    drop(timer);
    drop(copy);
    settle().await;
    assert_eq!(metrics.num_alive_tasks(), base, "the timer was not freed");
    // The alarm's deadline passing later is harmless.
    time::advance(ms(100)).await;
    settle().await;
    assert_eq!(metrics.num_alive_tasks(), base);

    // Built and dropped before its sentinel task ever ran.
    drop(Timer::builder().build().unwrap());
    settle().await;
    assert_eq!(metrics.num_alive_tasks(), base, "the timer was not freed");
}

#[tokio::test(start_paused = true)]
async fn a_sleep_keeps_its_timer_alive() {
    let metrics = Handle::current().metrics();
    settle().await;
    let base = metrics.num_alive_tasks();

    let timer = Timer::builder().tick(ms(10)).build().unwrap();
    let start = Instant::now();
    let mut sleep = task::spawn(timer.sleep(ms(25)));
    let mut not_yet_polled = timer.sleep(ms(40));
    drop(timer);
    assert_pending!(sleep.poll());
    settle().await;
    assert_eq!(
        metrics.num_alive_tasks(),
        base + 1,
        "freed while a sleep holds it"
    );
    time::advance(ms(30)).await;
    assert!(sleep.is_woken());
    assert_ready!(sleep.poll());
    drop(sleep);
    settle().await;
    assert_eq!(
        metrics.num_alive_tasks(),
        base + 1,
        "freed while a sleep holds it"
    );
    (&mut not_yet_polled).await;
    assert_eq!(start.elapsed(), ms(40));
    drop(not_yet_polled);
    settle().await;
    assert_eq!(metrics.num_alive_tasks(), base, "the timer was not freed");
}

#[test]
fn a_runtime_whose_timers_were_dropped_shuts_down_cleanly() {
    let rt = paused_rt();
    rt.block_on(async {
        for tick in [1, 3, 10] {
            let timer = Timer::builder().tick(ms(tick)).build().unwrap();
            let mut pending_sleep = task::spawn(timer.sleep(secs(60)));
            assert_pending!(pending_sleep.poll());
            timer.sleep(ms(5)).await;
            drop(timer);
            drop(pending_sleep);
        }
        wheel::sleep(ms(5)).await;
    });
    let (done_tx, done_rx) = mpsc::channel();
    thread::spawn(move || {
        drop(rt);
        done_tx.send(()).unwrap();
    });
    done_rx
        .recv_timeout(secs(10))
        .expect("the runtime shuts down");
}

/// The driver can run on any thread that registers or resets a timer; it
/// must judge "due" by the clock of the timer's own runtime. Here that clock
/// is paused while the real clock runs ahead, and a reset from a thread with
/// no runtime must not fire the sleep by the real clock.
#[test]
fn the_driver_reads_its_own_runtimes_clock() {
    let rt = paused_rt();
    let (start, mut sleep) = rt.block_on(async {
        let timer = Timer::builder().build().unwrap();
        let start = Instant::now();
        let mut sleep = task::spawn(timer.sleep(secs(3600)));
        assert_pending!(sleep.poll());
        (start, sleep)
    });
    // The real clock moves at least 60 ms past the paused one.
    thread::sleep(ms(60));
    thread::scope(|s| {
        s.spawn(|| sleep.enter(|_, sleep| sleep.reset(start + ms(50))));
    });
    rt.block_on(async {
        assert!(
            !sleep.is_woken(),
            "fired by the real clock, 50 ms early on the paused one"
        );
        assert_pending!(sleep.poll());
        time::advance(ms(50)).await;
        assert!(sleep.is_woken());
        assert_ready!(sleep.poll());
    });
}

/// A runtime timer's clock is its runtime's, whichever context asks: with
/// a paused runtime, the real clock (outside it) is ahead, and reading that
/// would complete sleeps early.
#[test]
fn a_runtime_timers_clock_is_its_runtimes_from_any_context() {
    let rt = RtBuilder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    let (timer, start) = rt.block_on(async {
        time::advance(Duration::from_secs(3600)).await;
        (Timer::builder().build().unwrap(), Instant::now())
    });
    thread::sleep(Duration::from_millis(20));
    assert_eq!(timer.now(), start, "read outside the runtime");

    // Real time has moved on 20 ms; the timer's clock has not.
    let deadline = start + Duration::from_millis(10);
    let eager = timer.try_sleep_until(deadline).unwrap();
    assert!(!eager.is_elapsed(), "due in 10 ms on the timer's clock");
    let mut sleep = task::spawn(timer.sleep(Duration::from_millis(10)));
    assert_pending!(sleep.poll());
    assert_eq!(sleep.deadline(), deadline);
}

/// Building a timer on a runtime without timers returns an error, and says
/// nothing on stderr: tokio's panic, which is how the build finds out, is
/// caught without its message and backtrace. Other panics are still
/// reported. Run in a child process, whose stderr the test can read.
#[test]
fn a_build_that_returns_timers_disabled_prints_nothing() {
    const CHILD: &str = "WHEEL_QUIET_BUILD_CHILD";
    if std::env::var_os(CHILD).is_none() {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "a_build_that_returns_timers_disabled_prints_nothing",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD, "1")
            .env("RUST_BACKTRACE", "1")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "child failed: {stderr}");
        assert!(!stderr.contains("timers are disabled"), "{stderr}");
        assert!(
            stderr.contains("a panic after the build is still reported"),
            "{stderr}"
        );
        return;
    }
    let no_time = RtBuilder::new_current_thread().build().unwrap();
    for _ in 0..2 {
        let err = Timer::builder()
            .runtime(no_time.handle().clone())
            .build()
            .unwrap_err();
        assert!(err.is_timers_disabled(), "{err}");
    }
    let reported = std::thread::spawn(|| panic!("a panic after the build is still reported"));
    assert!(reported.join().is_err());
}

/// What the README says of a timer built off tokio's millisecond grid (here
/// 300 µs into a paused runtime): a sleep due on tokio's grid wakes at most
/// 1 ms after tokio's own, never before.
#[tokio::test(start_paused = true)]
async fn a_timer_built_off_tokios_grid_wakes_within_a_millisecond_of_tokio_never_before() {
    tokio::time::advance(Duration::from_micros(300)).await;
    let built = tokio::time::Instant::now();
    let deadline = built - Duration::from_micros(300) + Duration::from_millis(10);
    let mut ours = tokio_test::task::spawn(wheel::sleep_until(deadline));
    tokio_test::assert_pending!(ours.poll());
    tokio::time::advance(deadline - built - Duration::from_micros(1)).await;
    assert!(!ours.is_woken(), "woken before its deadline");
    tokio::time::advance(Duration::from_millis(1) + Duration::from_micros(1)).await;
    assert!(ours.is_woken(), "more than 1 ms after its deadline");
}

/// Found by review: a runtime kept in a thread-local is dropped by the
/// thread-local's destructor, and tokio's time driver, shutting down, fires
/// every timer, the wheel's alarm included. The alarm's wake reached the
/// driver's own thread-local (destroyed by then) and entered the runtime,
/// both of which panic there, and a panic in a thread-local destructor
/// aborts the process. With a paused clock, reading the time looks up
/// tokio's context thread-local, also destroyed by then (a second review
/// found the wake still read it). Run in a child process, since that is
/// an abort; once on tokio's real clock, once paused.
#[test]
fn a_runtime_dropped_by_a_thread_local_destructor_does_not_abort() {
    const CHILD: &str = "WHEEL_TLS_DROP_CHILD";
    let Some(clock) = std::env::var_os(CHILD) else {
        for clock in ["real", "paused"] {
            let out = std::process::Command::new(std::env::current_exe().unwrap())
                .args([
                    "--exact",
                    "a_runtime_dropped_by_a_thread_local_destructor_does_not_abort",
                    "--nocapture",
                ])
                .env(CHILD, clock)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "child on the {clock} clock failed: {:?}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
        }
        return;
    };
    let paused = clock == "paused";
    struct Held {
        rt: tokio::runtime::Runtime,
        timer: Option<wheel::Timer>,
    }
    std::thread_local! {
        static HELD: std::cell::RefCell<Option<Held>> = const { std::cell::RefCell::new(None) };
    }
    std::thread::spawn(move || {
        // `HELD` is used first, so it is destroyed last: after the
        // driver's own thread-local, which the sleep below uses first.
        HELD.with(|held| {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .start_paused(paused)
                .build()
                .unwrap();
            *held.borrow_mut() = Some(Held { rt, timer: None });
        });
        HELD.with(|held| {
            let mut held = held.borrow_mut();
            let held = held.as_mut().unwrap();
            let timer = held.rt.block_on(async {
                let timer = wheel::Timer::builder().build().unwrap();
                // Arms the alarm with tokio.
                let mut sleep = task::spawn(timer.sleep(Duration::from_secs(3600)));
                assert_pending!(sleep.poll());
                timer
            });
            held.timer = Some(timer);
        });
        // The thread exits: `HELD`'s destructor drops the runtime.
    })
    .join()
    .unwrap();
}
