//! A default-timer sleep belongs to the runtime whose context it is made
//! in, as a `tokio::time` sleep does: a task that once looked inside
//! another runtime keeps its own, a `block_on` nested in `spawn_blocking`
//! or `block_in_place` gets the nested runtime's, and a sleep made in one
//! runtime and polled in another waits on the clock it was made with.

mod common;

use std::time::Duration;

use common::ms;
use tokio::runtime::{Builder, Runtime};
use tokio_test::{assert_pending, assert_ready, task};
use wheel::{DelayQueue, Timer};

fn multi_thread(workers: usize) -> Runtime {
    Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_time()
        .build()
        .unwrap()
}

/// A current-thread runtime whose paused clock is an hour ahead of the
/// real one.
fn an_hour_ahead() -> Runtime {
    let rt = common::paused_unguarded();
    rt.block_on(tokio::time::advance(Duration::from_secs(3600)));
    rt
}

/// A task of runtime one asks for the default timer, and makes a
/// `DelayQueue`, inside runtime two's `Handle::enter`. Runtime one's sleeps
/// on that worker still belong to runtime one (before, they bound to
/// runtime two's timer, were served by its busy worker, and panicked "the
/// timer has shut down" once it was dropped).
#[test]
fn a_look_inside_another_runtime_does_not_rebind_a_worker() {
    let _guard = common::guard();
    let (one, two) = (multi_thread(1), multi_thread(1));
    let two_handle = two.handle().clone();
    let pending_on_one = one.block_on(async move {
        tokio::spawn(async move {
            let _in_two = two_handle.enter();
            let theirs = Timer::current();
            let mut queue = DelayQueue::new();
            queue.insert((), ms(1));
            drop((theirs, queue));
        })
        .await
        .unwrap();
        tokio::spawn(async {
            let mut sleep = task::spawn(wheel::sleep(Duration::from_secs(3600)));
            assert_pending!(sleep.poll());
            Timer::current().stats().pending
        })
        .await
        .unwrap()
    });
    assert_eq!(pending_on_one, 1, "the sleep went to runtime two's timer");
    drop(two);
}

/// In `spawn_blocking`, a `block_on` of runtime one's handle and then one
/// of runtime two: each sleep is its own runtime's, as tokio's are.
#[test]
fn a_block_on_nested_in_spawn_blocking_gets_its_own_runtimes_timer() {
    let _guard = common::guard();
    let one = multi_thread(1);
    let fired = one.block_on(async {
        tokio::task::spawn_blocking(|| {
            let own = tokio::runtime::Handle::current();
            own.block_on(wheel::sleep(ms(1)));
            let two = multi_thread(1);
            two.block_on(async {
                wheel::sleep(ms(1)).await;
                tokio::time::sleep(ms(1)).await;
                Timer::current().stats().fired
            })
        })
        .await
        .unwrap()
    });
    assert_eq!(
        fired, 1,
        "runtime two's timer fired nothing: the sleep was runtime one's"
    );
}

/// In `block_in_place`, a paused current-thread runtime's task sleeps on
/// its own runtime's paused clock: 200 ms of it, auto-advanced (before, it
/// completed after 0 ns of that clock: early on the clock its deadline came
/// from).
#[test]
fn a_paused_runtimes_task_in_block_in_place_sleeps_on_its_clock() {
    let _guard = common::guard();
    let one = multi_thread(2);
    let (ours, tokios) = one.block_on(async {
        tokio::spawn(async {
            tokio::task::block_in_place(|| {
                common::paused_unguarded().block_on(async {
                    let ours = tokio::spawn(async {
                        let start = wheel::Instant::now();
                        wheel::sleep(ms(200)).await;
                        start.elapsed()
                    });
                    let tokios = tokio::spawn(async {
                        let start = tokio::time::Instant::now();
                        tokio::time::sleep(ms(200)).await;
                        start.elapsed()
                    });
                    (ours.await.unwrap(), tokios.await.unwrap())
                })
            })
        })
        .await
        .unwrap()
    });
    assert_eq!(tokios, ms(200));
    assert_eq!(ours, ms(200));
}

/// A sleep made in paused runtime A's context and polled in runtime B waits
/// on A's clock and timer, as tokio's does: it completes once A's clock has
/// reached its deadline, not at once (before, it bound to B's timer with a
/// deadline read from A's clock, long past on B's).
#[test]
fn a_sleep_made_in_one_runtime_and_polled_in_another_waits_on_the_first() {
    let _guard = common::guard();
    let (a, b) = (common::paused_unguarded(), multi_thread(1));
    let (mut ours, mut tokios) = {
        let _in_a = a.enter();
        (
            task::spawn(wheel::sleep(ms(200))),
            task::spawn(tokio::time::sleep(ms(200))),
        )
    };
    b.block_on(async {
        assert_pending!(tokios.poll());
        assert_pending!(ours.poll());
    });
    let start = a.block_on(async { tokio::time::Instant::now() });
    a.block_on(async { tokio::time::sleep(ms(200)).await });
    assert!(tokios.is_woken() && ours.is_woken());
    b.block_on(async {
        assert_ready!(tokios.poll());
        assert_ready!(ours.poll());
    });
    assert_eq!(a.block_on(async { start.elapsed() }), ms(200));
}

/// A current-thread timer's clock read inside another runtime's context is
/// still its own runtime's: the reading asks tokio whose context it is in,
/// and enters its own runtime's when that is another's (both clocks here
/// are paused, ten seconds apart).
#[test]
fn a_timers_clock_read_inside_another_runtime_is_its_own() {
    let _guard = common::guard();
    let (a, b) = (common::paused_unguarded(), common::paused_unguarded());
    let timer = a.block_on(async {
        tokio::time::advance(Duration::from_secs(10)).await;
        Timer::builder().build().unwrap()
    });
    let a_now = a.block_on(async { tokio::time::Instant::now() });
    let (b_now, read) = b.block_on(async { (tokio::time::Instant::now(), timer.now()) });
    assert_eq!(read, a_now);
    assert_ne!(read, b_now);
    assert_eq!(a.block_on(async { timer.now() }), a_now);
}

/// A task of paused runtime A holds paused runtime B's `EnterGuard` across
/// an await (B is ten seconds ahead), so B is current on A's thread while A
/// parks and fires the wheel's alarm: the pass still reads A's clock, and a
/// 5 s sleep stays pending when a 1 ms one completes (a pass that read
/// whatever runtime was current fired it after 1 ms of A's time).
#[test]
fn a_pass_reads_its_own_clock_while_a_task_holds_another_runtime_entered() {
    let _guard = common::guard();
    let (a, b) = (common::paused_unguarded(), common::paused_unguarded());
    b.block_on(async { tokio::time::advance(Duration::from_secs(10)).await });
    a.block_on(async {
        let timer = Timer::builder().build().unwrap();
        let mut long = task::spawn(timer.sleep(Duration::from_secs(5)));
        let short = timer.sleep(ms(1));
        assert_pending!(long.poll());
        let _in_b = b.handle().enter();
        short.await;
        assert_pending!(long.poll(), "the 5 s sleep fired by B's clock");
    });
}

/// A queue made where the clock is ahead of the one it is then used on
/// still yields no entry before its deadline on that clock: made on
/// runtime one's paused clock an hour ahead, or outside any runtime (the
/// real clock) after runtime two's clock was paused, and used on runtime
/// two. It counted its milliseconds from its creation, on the clock it was
/// made on, so every deadline on runtime two's clock fell before its origin
/// and came out at once, up to an hour early.
#[test]
fn a_queue_made_on_a_clock_ahead_of_its_timers_is_never_early() {
    let drain = |rt: Runtime, mut queue: DelayQueue<&'static str>| {
        rt.block_on(async move {
            let start = wheel::Instant::now();
            queue.insert("a", ms(1500));
            queue.insert("b", ms(20));
            let mut out = Vec::new();
            while let Some(expired) = std::future::poll_fn(|cx| queue.poll_expired(cx)).await {
                out.push((expired.into_inner(), start.elapsed()));
            }
            assert_eq!(out, [("b", ms(20)), ("a", ms(1500))]);
        });
    };
    let ahead = common::paused_unguarded().block_on(async {
        tokio::time::advance(Duration::from_secs(3600)).await;
        DelayQueue::new()
    });
    drain(common::paused_unguarded(), ahead);
    // The real clock moves on past the paused one by more than the first
    // deadline before the queue is made.
    let behind = common::paused_unguarded();
    std::thread::sleep(ms(30));
    drain(behind, DelayQueue::new());
}

/// A `sleep` or `timeout` made outside any runtime counts its duration from
/// the real clock; first polled on a paused clock, it counts what was left
/// of it (less the real time since it was made, at most `gap`) from that
/// clock, whether an hour ahead of the real one or behind it. Before, it
/// kept the real clock's instant: ahead, it completed at its first poll;
/// behind, it waited the gap as well. An instant given (here a `reset`
/// outside, to a real instant) stays that instant: ahead, it has passed.
#[test]
fn a_duration_made_outside_any_runtime_counts_on_the_clock_it_is_polled_on() {
    let _guard = common::guard();
    let ahead = an_hour_ahead();
    let behind = common::paused_unguarded();
    // The real clock moves on past the paused one.
    std::thread::sleep(ms(30));
    for (name, rt) in [("ahead", &ahead), ("behind", &behind)] {
        // How long `made` took on the paused clock, and the real time from
        // before it was made to its end (at least that to its first poll).
        let took = |made: &dyn Fn() -> std::pin::Pin<Box<dyn std::future::Future<Output = ()>>>| {
            let before = std::time::Instant::now();
            let future = made();
            let took = rt.block_on(async {
                let start = wheel::Instant::now();
                future.await;
                start.elapsed()
            });
            (took, before.elapsed())
        };
        let (sleep, gap) = took(&|| Box::pin(wheel::sleep(ms(100))));
        assert!(
            sleep <= ms(100) && sleep + gap >= ms(100),
            "{name}: a 100 ms sleep took {sleep:?} ({gap:?} real before)"
        );
        let timeout = || {
            // Made here, outside: the `async` block only awaits it.
            let timeout = wheel::timeout(ms(100), std::future::pending::<()>());
            Box::pin(async { assert!(timeout.await.is_err()) })
                as std::pin::Pin<Box<dyn std::future::Future<Output = ()>>>
        };
        let (timed_out, gap) = took(&timeout);
        assert!(
            timed_out <= ms(100) && timed_out + gap >= ms(100),
            "{name}: a 100 ms timeout took {timed_out:?} ({gap:?} real before)"
        );
    }
    let mut reset = Box::pin(wheel::sleep(ms(100)));
    reset.as_mut().reset(wheel::Instant::now() + ms(100));
    ahead.block_on(async {
        let start = wheel::Instant::now();
        reset.await;
        assert_eq!(start.elapsed(), Duration::ZERO, "the instant had passed");
    });
}

/// An interval made outside any runtime is bound by its first reset inside
/// a test runtime, and its next tick counts from that runtime's test clock,
/// not from `Instant::now()` (the real clock there): an hour ahead of it,
/// `reset` made the tick due at once; behind it, `reset_at` a deadline on
/// the test clock that the real clock had passed did too.
#[test]
fn an_interval_made_outside_any_runtime_resets_on_a_test_clock() {
    let _guard = common::guard();
    let test_runtime = || {
        wheel::TestClock::new()
            .build(Builder::new_current_thread().enable_time())
            .unwrap()
    };
    let pending = |interval: &mut wheel::Interval| {
        let mut tick = task::spawn(std::future::poll_fn(|cx| interval.poll_tick(cx)));
        assert_pending!(tick.poll(), "the tick came before the test clock moved");
    };
    let ahead = test_runtime();
    ahead.advance(Duration::from_secs(3600));
    let mut interval = wheel::interval(ms(100));
    ahead.block_on(async {
        interval.reset();
        pending(&mut interval);
    });
    ahead.advance(ms(99));
    ahead.block_on(async { pending(&mut interval) });
    ahead.advance(ms(1));
    ahead.block_on(async { assert_ready!(task::spawn(interval.tick()).poll()) });

    let behind = test_runtime();
    // The real clock moves on past the test clock by more than the deadline.
    std::thread::sleep(ms(30));
    let mut interval = wheel::interval(ms(100));
    behind.block_on(async {
        interval.reset_at(wheel::now() + ms(10));
        pending(&mut interval);
    });
    behind.advance(ms(10));
    behind.block_on(async { assert_ready!(task::spawn(interval.tick()).poll()) });
}

/// Found by review (s9c): a `sleep` or `timeout` made outside any runtime
/// counts its duration from the real clock, and first polled in a test
/// runtime it counts what was left of it on the test clock. It was moved
/// from tokio's clock there instead, which a `start_paused` builder pauses:
/// an hour ahead of the real clock, it completed at its first poll, with no
/// time gone on the test clock (behind, it waited the gap as well).
#[test]
fn a_duration_made_outside_is_never_early_on_a_test_runtime_paused_ahead() {
    let _guard = common::guard();
    let rt = wheel::TestClock::new()
        .build(
            Builder::new_current_thread()
                .enable_time()
                .start_paused(true),
        )
        .unwrap();
    // tokio's clock in the test runtime, not the test clock, an hour ahead.
    rt.block_on(tokio::time::advance(Duration::from_secs(3600)));
    let mut sleep = task::spawn(wheel::sleep(Duration::from_secs(10)));
    let mut timeout = task::spawn(wheel::timeout(
        Duration::from_secs(10),
        std::future::pending::<()>(),
    ));
    rt.block_on(async {
        assert_pending!(sleep.poll(), "the sleep completed at once");
        assert_pending!(timeout.poll(), "the timeout expired at once");
    });
    rt.advance(Duration::from_secs(10));
    rt.block_on(async {
        assert_ready!(sleep.poll());
        assert!(assert_ready!(timeout.poll()).is_err());
    });
}

/// Found by review (s9c): a `sleep` or `timeout` made outside any runtime
/// and first polled inside the entered handle of a runtime that has shut
/// down has no timer: it completes only if its deadline, counted on the
/// real clock, has passed. It was asked against tokio's clock there, that
/// runtime's, paused an hour ahead: it completed at once, with no time
/// gone on any clock.
#[test]
fn a_duration_made_outside_is_not_due_by_a_shut_down_paused_clock_ahead() {
    let _guard = common::guard();
    let rt = an_hour_ahead();
    let handle = rt.handle().clone();
    drop(rt);
    let mut sleep = task::spawn(wheel::sleep(Duration::from_secs(10)));
    let mut timeout = task::spawn(wheel::timeout(
        Duration::from_secs(10),
        std::future::pending::<()>(),
    ));
    let _entered = handle.enter();
    let polled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sleep.poll()));
    assert!(polled.is_err(), "the sleep completed: {polled:?}");
    let polled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| timeout.poll()));
    assert!(polled.is_err(), "the timeout expired: {polled:?}");
}

/// Found by review (s9c): an interval made outside any runtime took its
/// first tick's instant from the real clock and kept it when first polled
/// on a paused clock an hour ahead: that tick returned an instant an hour
/// past, every tick since then counted as missed, and (`Burst`) 36,000
/// ticks of a 100 ms period completed at once. Its start, like a `sleep`'s
/// duration made outside, counts on the clock it is polled on.
#[test]
fn an_interval_made_outside_does_not_burst_on_a_paused_clock_ahead() {
    let _guard = common::guard();
    let rt = an_hour_ahead();
    let mut interval = wheel::interval(ms(100));
    rt.block_on(async {
        let start = wheel::Instant::now();
        assert_eq!(interval.tick().await, start, "the first tick");
        let mut second = task::spawn(interval.tick());
        assert_pending!(second.poll(), "the second tick came at once");
        drop(second);
        assert_eq!(interval.tick().await, start + ms(100));
    });
}

/// Found by review (s9c): a `sleep` or `timeout` made in the entered handle
/// of a runtime that has shut down is unbound, as one made outside any
/// runtime is, and marked as counting its duration from the real clock,
/// but it read tokio's clock there, that runtime's, paused and fallen
/// behind the real one: first polled in another runtime, its time left
/// came out less the gap, here none, and it completed at once.
#[test]
fn a_duration_made_in_a_shut_down_runtime_behind_is_never_early() {
    let _guard = common::guard();
    let dead = common::paused_unguarded();
    let handle = dead.handle().clone();
    drop(dead);
    // The real clock moves on past the dead runtime's paused one.
    std::thread::sleep(ms(300));
    let (sleep, timeout) = {
        let _entered = handle.enter();
        (
            wheel::sleep(ms(200)),
            wheel::timeout(ms(200), std::future::pending::<()>()),
        )
    };
    let (mut sleep, mut timeout) = (task::spawn(sleep), task::spawn(timeout));
    common::paused_unguarded().block_on(async {
        assert_pending!(sleep.poll(), "the sleep completed at once");
        assert_pending!(timeout.poll(), "the timeout expired at once");
    });
}
