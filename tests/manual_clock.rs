//! The manual clock: `Timer::builder().manual()`, `advance`, `advance_to`.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use tokio_test::{assert_pending, assert_ready, assert_ready_eq, task};
use wheel::{Instant, Timer};

mod common;
use common::{manual, ms};

#[test]
fn works_with_no_runtime_at_all() {
    let _guard = common::guard();
    let timer = manual();
    let start = timer.now();
    let mut sleep = task::spawn(timer.sleep(Duration::from_millis(10)));
    let mut timeout =
        task::spawn(timer.timeout(Duration::from_millis(20), std::future::pending::<()>()));
    let mut interval = timer.interval(Duration::from_millis(15));
    let mut tick = task::spawn(async move {
        let first = interval.tick().await;
        let second = interval.tick().await;
        second - first
    });
    assert_pending!(sleep.poll());
    assert_pending!(timeout.poll());
    assert_pending!(tick.poll());

    timer.advance(Duration::from_millis(10));
    assert!(sleep.is_woken());
    assert_ready!(sleep.poll());
    assert!(!timeout.is_woken());
    assert_pending!(timeout.poll());

    timer.advance(Duration::from_millis(10));
    assert!(timeout.is_woken());
    assert!(assert_ready!(timeout.poll()).is_err());
    assert!(tick.is_woken());
    assert_ready_eq!(tick.poll(), Duration::from_millis(15));
    assert_eq!(timer.now() - start, Duration::from_millis(20));
    assert_eq!(timer.stats().pending, 0);
}

#[test]
fn never_moves_by_itself() {
    let _guard = common::guard();
    let timer = manual();
    let start = timer.now();
    let mut sleep = task::spawn(timer.sleep(Duration::from_millis(1)));
    assert_pending!(sleep.poll());
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(timer.now(), start);
    assert!(!sleep.is_woken());
    assert_pending!(sleep.poll());
}

#[test]
fn advance_to_the_past_leaves_the_clock_alone() {
    let _guard = common::guard();
    let timer = manual();
    let start = timer.now();
    timer.advance(Duration::from_secs(5));
    timer.advance_to(start);
    assert_eq!(timer.now() - start, Duration::from_secs(5));
}

#[test]
fn a_sleep_already_due_completes_on_first_poll() {
    let _guard = common::guard();
    let timer = manual();
    let deadline = timer.now() + Duration::from_secs(1);
    timer.advance(Duration::from_secs(2));
    let mut sleep = task::spawn(timer.sleep_until(deadline));
    assert_ready!(sleep.poll());
    assert_eq!(timer.stats().entries, 0);
}

#[test]
fn a_sleep_reset_to_a_deadline_already_reached_completes_at_once() {
    let _guard = common::guard();
    // Off the 125 µs tick grid: the deadline's tick has not begun, but the
    // clock is at the deadline, which is what a fresh sleep completes on.
    let timer = manual();
    let mut sleep = task::spawn(timer.sleep(Duration::from_secs(10)));
    assert_pending!(sleep.poll());
    timer.advance(ms(50) + Duration::from_nanos(1));
    let now = timer.now();
    assert_ready!(task::spawn(timer.sleep_until(now)).poll());
    sleep.enter(|_, sleep| sleep.reset(now));
    assert!(sleep.is_woken());
    assert_ready!(sleep.poll());
    assert_eq!(timer.stats().entries, 0);
}

#[test]
fn a_deadline_off_the_tick_grid_fires_at_the_next_tick_or_exactly_with_a_1_ns_tick() {
    let _guard = common::guard();
    let d = ms(50) + Duration::from_nanos(1);
    let coarse = manual();
    let exact = Timer::builder()
        .manual()
        .tick(Duration::from_nanos(1))
        .build()
        .unwrap();
    let mut late = task::spawn(coarse.sleep(d));
    let mut on_time = task::spawn(exact.sleep(d));
    assert_pending!(late.poll());
    assert_pending!(on_time.poll());
    coarse.advance(d);
    exact.advance(d - Duration::from_nanos(1));
    assert!(
        !late.is_woken(),
        "the 125 µs tick that holds it has not begun"
    );
    assert!(!on_time.is_woken(), "early");
    exact.advance(Duration::from_nanos(1));
    assert!(on_time.is_woken());
    coarse.advance_to(coarse.now() + Duration::from_micros(125) - Duration::from_nanos(1));
    assert!(late.is_woken());
}

#[test]
fn reset_immediately_ticks_at_once_on_a_waiting_interval() {
    let _guard = common::guard();
    let timer = manual();
    let mut every = task::spawn(timer.interval(ms(100)));
    assert_ready!(every.enter(|cx, mut every| every.poll_tick(cx)));
    assert_pending!(every.enter(|cx, mut every| every.poll_tick(cx)));
    timer.advance(ms(50) + Duration::from_nanos(1));
    every.reset_immediately();
    let now = timer.now();
    assert_ready_eq!(every.enter(|cx, mut every| every.poll_tick(cx)), now);
}

#[test]
fn an_interval_too_long_to_add_stays_far_off_on_a_clock_far_ahead() {
    let _guard = common::guard();
    // `Duration::MAX` overflows `Instant`, so the next tick is about 30
    // years off: on this timer's clock, 31 years ahead of the real one.
    let timer = manual();
    timer.advance(Duration::from_secs(86_400 * 365 * 31));
    let mut every = task::spawn(timer.interval(Duration::MAX));
    assert_ready!(every.enter(|cx, mut every| every.poll_tick(cx)));
    assert_pending!(every.enter(|cx, mut every| every.poll_tick(cx)));
    every.reset_after(Duration::MAX);
    assert_pending!(every.enter(|cx, mut every| every.poll_tick(cx)));
}

#[test]
fn the_interval_follows_the_manual_clock_when_it_falls_behind() {
    let _guard = common::guard();
    let timer = manual();
    let start = timer.now();
    let mut interval = timer.interval(Duration::from_millis(10));
    let poll = |interval: &mut wheel::Interval| {
        let waker = futures::task::noop_waker();
        interval.poll_tick(&mut std::task::Context::from_waker(&waker))
    };
    assert_eq!(poll(&mut interval), std::task::Poll::Ready(start));
    // Miss several ticks: Burst (the default) catches up one at a time.
    timer.advance(Duration::from_millis(35));
    let ms = |n| start + Duration::from_millis(n);
    assert_eq!(poll(&mut interval), std::task::Poll::Ready(ms(10)));
    assert_eq!(poll(&mut interval), std::task::Poll::Ready(ms(20)));
    assert_eq!(poll(&mut interval), std::task::Poll::Ready(ms(30)));
    assert!(poll(&mut interval).is_pending());
}

#[test]
#[should_panic(expected = "advance needs a manual timer")]
fn advance_on_a_runtime_timer_panics_with_a_clear_message() {
    let _guard = common::guard();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let timer = rt.block_on(async { Timer::builder().build().unwrap() });
    timer.advance(Duration::from_secs(1));
}

#[tokio::test(start_paused = true)]
async fn tokios_auto_advance_does_not_move_it() {
    let _guard = common::guard();
    let timer = manual();
    let sleeper = timer.clone();
    let task = tokio::spawn(async move { sleeper.sleep(Duration::from_secs(1)).await });
    // The paused runtime is idle: tokio auto-advances its own clock by an hour.
    tokio::time::sleep(Duration::from_secs(3600)).await;
    assert!(!task.is_finished());
    timer.advance(Duration::from_secs(1));
    task.await.unwrap();
}

#[test]
fn works_on_a_multi_thread_runtime() {
    let _guard = common::guard();
    const TASKS: u64 = 200;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    let timer = manual();
    let start = timer.now();
    let handles: Vec<_> = (1..=TASKS)
        .map(|i| {
            let timer = timer.clone();
            rt.spawn(async move {
                let deadline = start + Duration::from_millis(i);
                timer.sleep_until(deadline).await;
                let woke_at = timer.now();
                assert!(woke_at >= deadline, "task {i} completed early");
                woke_at
            })
        })
        .collect();
    // Wait (real time, bounded) until every task has registered.
    let registered = std::time::Instant::now();
    while timer.stats().pending < TASKS as usize {
        assert!(
            registered.elapsed() < Duration::from_secs(10),
            "tasks never registered"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    timer.advance(Duration::from_millis(TASKS / 2));
    // Tasks 101.. are not due: none of them may have finished.
    let early = handles[TASKS as usize / 2..]
        .iter()
        .filter(|h| h.is_finished())
        .count();
    assert_eq!(early, 0, "tasks finished before their deadline");
    timer.advance(Duration::from_millis(TASKS / 2));
    let results = rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(10), futures::future::join_all(handles))
            .await
            .expect("a woken task never finished")
    });
    for (i, result) in results.into_iter().enumerate() {
        let woke_at: Instant = result.unwrap();
        assert!(woke_at - start >= Duration::from_millis(i as u64 + 1));
    }
    assert_eq!(timer.stats().pending, 0);
}

#[test]
fn advance_from_several_threads_fires_everything_once() {
    let _guard = common::guard();
    let timer = manual();
    let start = timer.now();
    let fired = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    for i in 0..1000u64 {
        let fired = fired.clone();
        timer.schedule_at(start + Duration::from_micros(i * 997 % 50_000), move || {
            fired.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        });
    }
    let threads: Vec<_> = (1..=4u64)
        .map(|t| {
            let timer = timer.clone();
            std::thread::spawn(move || timer.advance_to(start + Duration::from_millis(12 * t + 2)))
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().unwrap());
    assert_eq!(fired.load(std::sync::atomic::Ordering::SeqCst), 1000);
    assert_eq!(timer.stats().pending, 0);
}

#[test]
fn dropping_a_pending_sleep_cancels_it() {
    let _guard = common::guard();
    let timer = manual();
    let mut sleep = task::spawn(timer.sleep(Duration::from_millis(5)));
    assert_pending!(sleep.poll());
    drop(sleep);
    timer.advance(Duration::from_millis(5));
    let stats = timer.stats();
    assert_eq!((stats.pending, stats.cancelled, stats.fired), (0, 1, 0));
}

#[test]
fn a_delay_queue_follows_the_manual_clock() {
    let _guard = common::guard();
    let timer = manual();
    let start = timer.now();
    let mut queue = task::spawn(wheel::DelayQueue::with_timer(timer.clone()));
    for (value, ms) in [("c", 30u64), ("a", 10), ("b", 20)] {
        queue.enter(|_, mut q| q.insert(value, Duration::from_millis(ms)));
    }
    assert_pending!(queue.enter(|cx, mut q| q.poll_expired(cx)));
    timer.advance(Duration::from_millis(20));
    assert!(queue.is_woken());
    let mut got = Vec::new();
    while let std::task::Poll::Ready(Some(expired)) = queue.enter(|cx, mut q| q.poll_expired(cx)) {
        assert!(
            expired.deadline() - start <= Duration::from_millis(20),
            "early"
        );
        got.push(expired.into_inner());
    }
    assert_eq!(got, ["a", "b"]);
    timer.advance(Duration::from_millis(10));
    assert!(queue.is_woken());
    let last = assert_ready!(queue.enter(|cx, mut q| q.poll_expired(cx)));
    assert_eq!(last.map(|e| e.into_inner()), Some("c"));
}

/// A sharded timer: each thread registers in its own shard, and any thread
/// can fire, poll or cancel any of them. Sleeps made on four threads fire
/// exactly at their deadlines when the main thread advances, the ones
/// dropped on yet another thread are cancelled, and nothing is left.
#[test]
fn a_sharded_timer_serves_every_thread_from_any_thread() {
    let _guard = common::guard();
    let timer = Timer::builder().manual().shards(4).build().unwrap();
    assert_eq!(timer.shards(), 4);
    let start = timer.now();
    let made: Vec<_> = (0..4u64)
        .map(|t| {
            let timer = timer.clone();
            std::thread::spawn(move || {
                (0..50u64)
                    .map(|i| {
                        let mut sleep = task::spawn(timer.sleep_until(start + ms(1 + i + t * 50)));
                        assert_pending!(sleep.poll());
                        sleep
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut sleeps: Vec<_> = made.into_iter().flat_map(|t| t.join().unwrap()).collect();
    assert_eq!(timer.stats().pending, 200);
    // Every other one is dropped on another thread.
    let dropped: Vec<_> = (0..100).map(|i| sleeps.remove(i)).collect();
    std::thread::spawn(move || drop(dropped)).join().unwrap();
    assert_eq!(timer.stats().pending, 100);
    for step in 1..=200u64 {
        timer.advance_to(start + ms(step));
        for sleep in &mut sleeps {
            let due = sleep.deadline() <= start + ms(step);
            assert_eq!(
                sleep.is_elapsed(),
                due,
                "at {step} ms: {:?}",
                sleep.deadline()
            );
        }
    }
    for sleep in &mut sleeps {
        assert!(sleep.is_woken());
        assert_ready!(sleep.poll());
    }
    let stats = timer.stats();
    assert_eq!((stats.pending, stats.entries), (0, 0), "{stats:?}");
    assert_eq!((stats.fired, stats.cancelled), (100, 100), "{stats:?}");
}

/// Runs `f` on a thread of its own and fails if it has not returned within
/// 10 s: how these tests tell a hang from a pass (which takes microseconds).
fn returns(f: impl FnOnce() + Send + 'static) {
    let (done, finished) = mpsc::channel();
    let thread = std::thread::spawn(move || {
        f();
        let _ = done.send(());
    });
    match finished.recv_timeout(Duration::from_secs(10)) {
        Ok(()) => {}
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("hung: did not return within 10 s"),
        // It panicked: report its panic.
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            std::panic::resume_unwind(thread.join().unwrap_err())
        }
    }
}

#[test]
fn advancing_past_a_deadline_clamped_beyond_the_clocks_range_returns() {
    let _guard = common::guard();
    returns(|| {
        const YEAR: Duration = Duration::from_secs(365 * 86_400);
        // 1 ns ticks cover 584 years: a deadline 700 years out is clamped to
        // the tick that never comes.
        let timer = Timer::builder()
            .manual()
            .tick(Duration::from_nanos(1))
            .build()
            .unwrap();
        let ran = Arc::new(AtomicU32::new(0));
        let counter = ran.clone();
        timer.schedule_at(timer.now() + 700 * YEAR, move || {
            counter.fetch_add(1, Ordering::SeqCst);
        });
        timer.advance(600 * YEAR);
        assert_eq!(ran.load(Ordering::SeqCst), 0);
    });
}

#[test]
fn a_callback_may_advance_a_timer_whose_callback_advances_this_one() {
    let _guard = common::guard();
    returns(|| {
        let (a, b) = (manual(), manual());
        let ran = Arc::new(AtomicU32::new(0));
        {
            let (a, ran) = (a.clone(), ran.clone());
            b.schedule(Duration::from_secs(1), move || {
                // `a`'s runner is on this stack, under `b`'s.
                a.advance(Duration::from_secs(1));
                ran.fetch_add(1, Ordering::SeqCst);
            });
        }
        {
            let b = b.clone();
            a.schedule(Duration::from_secs(1), move || {
                b.advance(Duration::from_secs(1))
            });
        }
        a.advance(Duration::from_secs(1));
        assert_eq!(ran.load(Ordering::SeqCst), 1);
    });
}

/// `Stats::passes` counts the passes run over the wheel: every advance
/// runs at least one more (with nothing pending too: the docs said "with
/// nothing due, a timer makes none"), and a timer shut down runs none.
#[test]
fn passes_count_every_pass_and_none_after_shutdown() {
    let _guard = common::guard();
    let timer = manual();
    let _sleeps: Vec<_> = (1..=3)
        .map(|n| common::registered(timer.sleep(ms(n))))
        .collect();
    assert_eq!(timer.stats().passes, 0, "no pass before any advance");
    let empty = manual();
    empty.advance(Duration::ZERO);
    assert_eq!(empty.stats().passes, 1, "an advance with nothing pending");
    let mut before = 0;
    for n in 1..=3 {
        timer.advance(ms(1));
        let stats = timer.stats();
        assert_eq!(stats.fired, n);
        assert!(stats.passes > before, "advance {n}: {stats}");
        before = stats.passes;
    }
    timer.shutdown();
    timer.advance(ms(1));
    assert_eq!(
        timer.stats().passes,
        before,
        "a pass counted after shutdown"
    );
}
