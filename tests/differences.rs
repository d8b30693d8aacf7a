//! Every difference from `tokio::time` and tokio-util's `DelayQueue` that
//! the README lists, shown by a test; where tokio can run the same scenario
//! it runs beside the wheel. (Everything else is checked equal, scenario by
//! scenario, in `tests/tokio_parity.rs`.)

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use tokio_test::{assert_pending, assert_ready, task};

mod common;
use common::{ms, panic_message, paused_rt};

fn us(n: u64) -> Duration {
    Duration::from_micros(n)
}

fn poll_once<F: Future + Unpin>(future: &mut F) -> Poll<F::Output> {
    Pin::new(future).poll(&mut Context::from_waker(Waker::noop()))
}

/// tokio's `sleep` panics when made outside a runtime; a wheel `Sleep` is
/// bound to its runtime's default timer when first polled, so it may be
/// made anywhere (in a constructor that runs before the runtime, say) and
/// panics only if polled outside a runtime before its deadline.
#[test]
fn a_sleep_made_outside_a_runtime_panics_only_when_polled_there() {
    let _guard = common::guard();
    let made_by_tokio = std::panic::catch_unwind(|| tokio::time::sleep(ms(10)));
    assert!(made_by_tokio.is_err(), "tokio's panics at construction");

    let mut ours = wheel::sleep(ms(10));
    let polled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| poll_once(&mut ours)));
    let message = panic_message(&*polled.unwrap_err());
    assert!(
        message.contains("polled outside a tokio runtime"),
        "{message}"
    );

    // Made outside, polled inside: it completes.
    let ours = wheel::sleep(ms(10));
    paused_rt().block_on(ours);
}

/// Timers due within one millisecond wake tick by tick; tokio's, all on
/// one millisecond of its grid, wake in the order they were registered.
/// Within one 125 µs tick the wheel's do too: the README says "tick by
/// tick", not "in deadline order".
#[test]
fn timers_due_within_a_millisecond_wake_tick_by_tick() {
    let _guard = common::guard();
    /// Registers a late then an early sleep (`sleep` makes them), `late`
    /// and `early` after the start, runs until both are done, and returns
    /// the order they completed in.
    fn order<S: Future<Output = ()> + Send + 'static>(
        sleep: fn(Duration) -> S,
        late: Duration,
        early: Duration,
    ) -> Vec<&'static str> {
        paused_rt().block_on(async move {
            let done = Arc::new(Mutex::new(Vec::new()));
            let tasks: Vec<_> = [("late", late), ("early", early)]
                .into_iter()
                .map(|(name, after)| {
                    let done = done.clone();
                    tokio::spawn(async move {
                        sleep(after).await;
                        done.lock().unwrap().push(name);
                    })
                })
                .collect();
            for task in tasks {
                task.await.unwrap();
            }
            done.lock().unwrap().clone()
        })
    }
    let (late, early) = (us(1_900), us(1_100));
    assert_eq!(order(tokio::time::sleep, late, early), ["late", "early"]);
    assert_eq!(order(wheel::sleep, late, early), ["early", "late"]);
    // Both in the tick 1,000-1,125 µs: registration order.
    let (late, early) = (us(1_120), us(1_005));
    assert_eq!(order(wheel::sleep, late, early), ["late", "early"]);
}

/// Each timer runs one small task of its own on its runtime (it learns
/// there that the runtime is shutting down), so `num_alive_tasks` counts
/// one more per timer: the default timer's from its first use.
#[test]
fn each_timer_runs_a_task_that_runtime_metrics_count() {
    let _guard = common::guard();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let metrics = rt.metrics();
    rt.block_on(async {
        assert_eq!(metrics.num_alive_tasks(), 0);
        tokio::time::sleep(ms(1)).await;
        assert_eq!(metrics.num_alive_tasks(), 0, "tokio's timer runs none");
        wheel::sleep(ms(1)).await;
        assert_eq!(metrics.num_alive_tasks(), 1, "the default timer's");
        let timer = wheel::Timer::builder().build().unwrap();
        assert_eq!(metrics.num_alive_tasks(), 2, "and the explicit timer's");
        drop(timer);
        tokio::task::yield_now().await;
        assert_eq!(metrics.num_alive_tasks(), 1, "gone with the timer");
    });
}

/// The names of this process's threads (Linux: `/proc/self/task`).
#[cfg(target_os = "linux")]
fn thread_names() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .map(|name| name.trim().to_owned())
        .collect()
}

/// A timer that held over 64 chunks of 1,024 timers frees what it lets go
/// of on a thread of the crate's, `wheel-free`, started by the first such
/// timer in the process and kept (tokio's timers start none). In a child
/// process of its own, so that no other test has started it.
#[cfg(target_os = "linux")]
#[test]
fn a_timer_past_65536_pending_frees_memory_on_a_thread_of_its_own() {
    const CHILD: &str = "WHEEL_FREE_THREAD_CHILD";
    if !common::in_a_child(CHILD, &[]) {
        return;
    }
    let _guard = common::guard();
    let is_ours = |name: &String| name == "wheel-free";
    paused_rt().block_on(async {
        let mut cx = Context::from_waker(Waker::noop());
        let mut sleeps: Vec<_> = (0..70_000).map(|_| wheel::sleep(ms(1_000))).collect();
        for sleep in sleeps.iter_mut() {
            assert!(Pin::new(sleep).poll(&mut cx).is_pending());
        }
        assert!(!thread_names().iter().any(is_ours), "none before");
        drop(sleeps);
        // The thread names itself as it starts.
        let start = std::time::Instant::now();
        while !thread_names().iter().any(is_ours) {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "{:?}",
                thread_names()
            );
            std::thread::sleep(ms(1));
        }
    });
}

/// tokio-util's `DelayQueue` sleeps until its next entry's deadline. This
/// one sleeps until its wheel's next expiration, which for an entry beyond
/// the first level is the start of the entry's slot: the task is woken
/// there with nothing due (here at 64 ms for an entry due at 100 ms: the
/// queue counts milliseconds, as tokio-util's does), its poll returns
/// `Pending`, and the entry comes out on time.
#[test]
fn a_delay_queue_wakes_its_task_at_a_level_boundary_with_nothing_due() {
    let _guard = common::guard();
    paused_rt().block_on(async {
        let mut queue = task::spawn(wheel::DelayQueue::new());
        queue.insert("due at 100 ms", ms(100));
        assert_pending!(queue.poll_next());
        tokio::time::advance(ms(64)).await;
        assert!(queue.is_woken(), "woken at the level-1 slot's start");
        assert_pending!(queue.poll_next());
        tokio::time::advance(ms(36)).await;
        assert!(queue.is_woken());
        let expired = assert_ready!(queue.poll_next()).unwrap();
        assert_eq!(expired.into_inner(), "due at 100 ms");
    });
}

/// A reset (or remove) that makes the next expiration later wakes nobody:
/// the queue's sleep still fires at the old time, the poll finds nothing
/// due and sleeps again. tokio-util's re-arms its sleep for the new
/// deadline, so its task is not woken at the old one (wakes nobody at the
/// reset is no difference: the README said so).
#[test]
fn a_delay_queue_reset_to_later_wakes_nobody_until_the_old_deadline() {
    let _guard = common::guard();
    paused_rt().block_on(async {
        let mut theirs = task::spawn(tokio_util::time::DelayQueue::new());
        let key = theirs.insert("moved", ms(5));
        assert_pending!(theirs.enter(|cx, mut queue| queue.poll_expired(cx)));
        theirs.reset(&key, ms(20));
        assert!(!theirs.is_woken());
        tokio::time::advance(ms(5)).await;
        assert!(
            !theirs.is_woken(),
            "tokio-util's: no wake at the old deadline"
        );
    });
    paused_rt().block_on(async {
        let mut queue = task::spawn(wheel::DelayQueue::new());
        let key = queue.insert("moved", ms(5));
        assert_pending!(queue.poll_next());
        queue.reset(&key, ms(20));
        assert!(!queue.is_woken());
        tokio::time::advance(ms(5)).await;
        assert!(queue.is_woken(), "the old deadline's wake");
        assert_pending!(queue.poll_next());
        tokio::time::advance(ms(15)).await;
        assert_eq!(
            assert_ready!(queue.poll_next()).unwrap().into_inner(),
            "moved"
        );
    });
}

/// Entries due at one instant come out in the order they were inserted;
/// tokio-util's come out in the reverse order.
#[test]
fn a_delay_queue_yields_entries_due_at_one_instant_in_insertion_order() {
    let _guard = common::guard();
    paused_rt().block_on(async {
        let at = tokio::time::Instant::now() + ms(5);
        let mut theirs = tokio_util::time::DelayQueue::new();
        let mut ours = wheel::DelayQueue::new();
        for item in ["first", "second", "third"] {
            theirs.insert_at(item, at);
            ours.insert_at(item, at);
        }
        let (mut theirs, mut ours) = (task::spawn(theirs), task::spawn(ours));
        assert_pending!(theirs.poll_next());
        assert_pending!(ours.poll_next());
        tokio::time::advance(ms(5)).await;
        let (mut their_order, mut our_order) = (Vec::new(), Vec::new());
        for _ in 0..3 {
            their_order.extend(assert_ready!(theirs.poll_next()).map(|e| e.into_inner()));
            our_order.extend(assert_ready!(ours.poll_next()).map(|e| e.into_inner()));
        }
        assert_eq!(their_order, ["third", "second", "first"], "tokio-util's");
        assert_eq!(our_order, ["first", "second", "third"]);
    });
}

/// `Sleep` (and so `Timeout<F>` of an `Unpin` future) is `Unpin`, and 40
/// bytes: its wheel entry lives in the timer. tokio's is `!Unpin`, 112.
#[test]
fn a_sleep_is_unpin_and_small() {
    let _guard = common::guard();
    fn unpin<T: Unpin>() {}
    unpin::<wheel::Sleep>();
    unpin::<wheel::Timeout<std::future::Ready<()>>>();
    assert_eq!(std::mem::size_of::<wheel::Sleep>(), 40);
    assert!(std::mem::size_of::<tokio::time::Sleep>() > 40);
}

/// `wheel::error::Elapsed` is the crate's own type, not tokio's, and tokio's
/// has no public constructor, so no conversion into it can be written. An
/// error type that converts from tokio's `Elapsed` (for `?`) needs the same
/// conversion from the wheel's, or a `map_err` where the timeout is awaited.
/// Like tokio's, it converts into an `io::Error` of kind `TimedOut`.
#[test]
fn elapsed_is_the_crates_own_type_and_converts_as_the_readme_shows() {
    let _guard = common::guard();
    use std::any::TypeId;
    assert_ne!(
        TypeId::of::<wheel::error::Elapsed>(),
        TypeId::of::<tokio::time::error::Elapsed>()
    );

    #[derive(Debug, PartialEq)]
    enum MyError {
        Timeout,
    }
    impl From<tokio::time::error::Elapsed> for MyError {
        fn from(_: tokio::time::error::Elapsed) -> MyError {
            MyError::Timeout
        }
    }
    // What the swap needs beside it (the README's Differences).
    impl From<wheel::error::Elapsed> for MyError {
        fn from(_: wheel::error::Elapsed) -> MyError {
            MyError::Timeout
        }
    }

    async fn tokio_question_mark() -> Result<(), MyError> {
        tokio::time::timeout(ms(5), std::future::pending::<()>()).await?;
        Ok(())
    }
    async fn wheel_question_mark() -> Result<(), MyError> {
        wheel::timeout(ms(5), std::future::pending::<()>()).await?;
        Ok(())
    }
    async fn wheel_map_err() -> Result<(), MyError> {
        wheel::timeout(ms(5), std::future::pending::<()>())
            .await
            .map_err(|_| MyError::Timeout)?;
        Ok(())
    }

    paused_rt().block_on(async {
        assert_eq!(tokio_question_mark().await, Err(MyError::Timeout));
        assert_eq!(wheel_question_mark().await, Err(MyError::Timeout));
        assert_eq!(wheel_map_err().await, Err(MyError::Timeout));
        let io: std::io::Error = wheel::timeout(ms(5), std::future::pending::<()>())
            .await
            .unwrap_err()
            .into();
        assert_eq!(io.kind(), std::io::ErrorKind::TimedOut);
    });
}

/// A sleep that completed at a poll, then is reset without another poll:
/// tokio's keeps the waker of that poll and wakes the task at the new
/// deadline; the wheel's forgot it when the sleep completed (keeping it
/// would clone a waker at every completion), so the reset registers with
/// no waker and the task is woken only once it polls the sleep again.
#[test]
fn a_sleep_reset_after_completing_wakes_no_one_until_polled_again() {
    paused_rt().block_on(async {
        let mut ours = task::spawn(wheel::sleep(ms(1)));
        let mut theirs = task::spawn(Box::pin(tokio::time::sleep(ms(1))));
        tokio::time::advance(ms(1)).await;
        assert_ready!(ours.poll());
        assert_ready!(theirs.poll());
        let at = tokio::time::Instant::now() + ms(5);
        Pin::new(&mut *ours).reset(at);
        theirs.as_mut().reset(at);
        tokio::time::advance(ms(5)).await;
        assert!(theirs.is_woken(), "tokio's is woken");
        assert!(!ours.is_woken(), "the wheel's has no waker to wake");
        assert!(ours.is_elapsed());
        assert_ready!(ours.poll());
    });
}

/// Counts the clones of a waker alive (its `Arc`'s strong count).
struct Counted;

impl std::task::Wake for Counted {
    fn wake(self: Arc<Self>) {}
}

/// A pending sleep dropped long after it was made: tokio's lets go of the
/// waker it holds at once, in its drop; the wheel leaves the entry, and
/// the waker in it, for a batch of cancels (`src/wheel/discard.rs`), freed
/// when 128 have gathered, at the timer's next pass, or at a stats read.
/// The count of pending timers goes at once.
#[test]
fn a_dropped_sleeps_waker_goes_with_its_batch_of_cancels() {
    paused_rt().block_on(async {
        let counted = Arc::new(Counted);
        let waker = Waker::from(counted.clone());
        let mut cx = Context::from_waker(&waker);
        let mut theirs = Box::pin(tokio::time::sleep(ms(50)));
        let mut ours = wheel::sleep(ms(50));
        assert!(theirs.as_mut().poll(&mut cx).is_pending());
        assert!(Pin::new(&mut ours).poll(&mut cx).is_pending());
        // Made after it, so that it is not one of the last few (freed at
        // once: its lines are still in cache).
        let later: Vec<_> = (0..100)
            .map(|_| common::registered(wheel::sleep(ms(60))))
            .collect();
        let held = Arc::strong_count(&counted);
        drop(theirs);
        assert_eq!(Arc::strong_count(&counted), held - 1, "tokio's, at once");
        drop(ours);
        assert_eq!(Arc::strong_count(&counted), held - 1, "the wheel's, kept");
        assert_eq!(wheel::Timer::current().stats().pending, 100);
        assert_eq!(Arc::strong_count(&counted), held - 2, "flushed by the read");
        drop(later);
    });
}
