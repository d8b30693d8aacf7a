//! The binding rule: a timer made inside a runtime's context belongs to
//! that runtime's default timer, whatever the thread or task has seen
//! before. Each scenario is one program, run once on `tokio::time::sleep`
//! (or `timeout`) and once on the wheel's, and the two must agree.
//!
//! Each program first has tasks of a multi-thread runtime use the timer on
//! its one worker: the registry used to *trust* a task after two different
//! tasks in a row had found the same runtime there, and answered its later
//! lookups without asking tokio, so a `block_in_place`, `spawn_blocking`
//! or `Handle::enter` inside it bound the sleep to the wrong runtime.
//!
//! A sleep that waits on the wrong runtime's timer never completes in the
//! paused runtime it was made in: that runtime auto-advances to a tokio
//! timeout twice as long, and the program reports `None` rather than
//! hanging.

// The programs hand a future made in one runtime to another.
#![allow(clippy::async_yields_async)]

mod common;

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use tokio::runtime::Builder;
use tokio::time::Instant;

type Boxed<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// A sleep of one library or the other.
type MakeSleep = fn(Duration) -> Boxed<()>;

fn tokio_sleep(duration: Duration) -> Boxed<()> {
    Box::pin(tokio::time::sleep(duration))
}

fn wheel_sleep(duration: Duration) -> Boxed<()> {
    Box::pin(wheel::sleep(duration))
}

const HOUR: Duration = Duration::from_secs(3600);

fn one_worker() -> Builder {
    let mut builder = Builder::new_multi_thread();
    builder
        .worker_threads(1)
        .max_blocking_threads(1)
        .enable_time();
    builder
}

/// Tasks in a row using the timer on the one worker (and the last of them
/// on the blocking pool's one thread): what the old registry's trust grew
/// from.
async fn use_the_timer(make: MakeSleep) {
    for _ in 0..3 {
        tokio::spawn(async move { make(Duration::ZERO).await })
            .await
            .unwrap();
        tokio::task::spawn_blocking(move || drop(make(Duration::ZERO)))
            .await
            .unwrap();
    }
}

/// In `runtime`'s context, a sleep of an hour made and awaited there: how
/// far that runtime's clock moved by its end, or `None` if a tokio timeout
/// of two hours came first.
async fn an_hour_there(make: MakeSleep) -> Option<Duration> {
    let start = Instant::now();
    let slept = make(HOUR);
    tokio::time::timeout(2 * HOUR, slept)
        .await
        .ok()
        .map(|()| start.elapsed())
}

/// A worker's task that has used the timer calls `block_in_place` and
/// `block_on`s a new paused runtime, whose sleep is that runtime's.
fn block_in_place(make: MakeSleep) -> Option<Duration> {
    one_worker().build().unwrap().block_on(async move {
        use_the_timer(make).await;
        tokio::spawn(async move {
            make(Duration::ZERO).await;
            tokio::task::block_in_place(|| common::paused_unguarded().block_on(an_hour_there(make)))
        })
        .await
        .unwrap()
    })
}

/// The same from the blocking pool's one thread (`spawn_blocking`), which
/// earlier blocking tasks used the timer on.
fn spawn_blocking(make: MakeSleep) -> Option<Duration> {
    one_worker().build().unwrap().block_on(async move {
        use_the_timer(make).await;
        tokio::task::spawn_blocking(move || {
            drop(make(Duration::ZERO));
            common::paused_unguarded().block_on(an_hour_there(make))
        })
        .await
        .unwrap()
    })
}

/// A worker's task enters paused runtime B, makes a sleep there and spawns
/// it on B; runtime A is dropped first if `drop_a`. The sleep is B's: it
/// completes an hour later on B's clock (with A's timer it waited in real
/// time, or, once A was dropped, panicked "the timer has shut down").
fn made_under_enter(make: MakeSleep, drop_a: bool) -> Option<Duration> {
    let (a, b) = (one_worker().build().unwrap(), common::paused_unguarded());
    let in_b = b.handle().clone();
    let join = a.block_on(async move {
        use_the_timer(make).await;
        tokio::spawn(async move {
            make(Duration::ZERO).await;
            let _entered = in_b.enter();
            let start = Instant::now();
            let slept = make(HOUR);
            in_b.spawn(async move {
                tokio::time::timeout(2 * HOUR, slept)
                    .await
                    .ok()
                    .map(|()| start.elapsed())
            })
        })
        .await
        .unwrap()
    });
    if drop_a {
        drop(a);
    }
    b.block_on(join).expect("the sleep's task failed")
}

#[test]
fn block_in_place_then_block_on_gets_the_nested_runtimes_timer() {
    let _guard = common::guard();
    assert_eq!(block_in_place(tokio_sleep), Some(HOUR));
    assert_eq!(block_in_place(wheel_sleep), Some(HOUR));
}

#[test]
fn spawn_blocking_then_block_on_gets_the_nested_runtimes_timer() {
    let _guard = common::guard();
    assert_eq!(spawn_blocking(tokio_sleep), Some(HOUR));
    assert_eq!(spawn_blocking(wheel_sleep), Some(HOUR));
}

#[test]
fn a_sleep_made_under_enter_is_the_entered_runtimes() {
    let _guard = common::guard();
    for drop_a in [false, true] {
        assert_eq!(made_under_enter(tokio_sleep, drop_a), Some(HOUR));
        assert_eq!(made_under_enter(wheel_sleep, drop_a), Some(HOUR));
    }
}

/// A `timeout` of an hour made in runtime A's context and first polled in
/// paused runtime B, whose clock is a day ahead of A's: the deadline and the
/// timer both come from A, where it was made. (The wheel's used to read its
/// deadline from A's clock and bind to B's timer where it first waited: a
/// deadline a day in B's past, elapsed at once.)
fn timeout_made_in_a_polled_in_b<T: Future<Output = Result<(), E>> + Send + 'static, E>(
    make: fn() -> T,
) -> Option<Duration> {
    let (a, b) = (one_worker().build().unwrap(), common::paused_unguarded());
    b.block_on(tokio::time::advance(24 * HOUR));
    let timed = a.block_on(async move { tokio::spawn(async move { make() }).await.unwrap() });
    b.block_on(async move {
        // This thread's last default timer is B's.
        drop(wheel::sleep(Duration::ZERO));
        let start = Instant::now();
        // The outer timeout, two hours of B's clock, ends the program if the
        // inner one never fires on B (A's is a real clock).
        match tokio::time::timeout(2 * HOUR, timed).await {
            Ok(Err(_elapsed)) => Some(start.elapsed()),
            Ok(Ok(())) => unreachable!("the inner future is pending"),
            Err(_) => None,
        }
    })
}

#[test]
fn a_timeout_takes_its_clock_and_its_timer_from_where_it_is_made() {
    let _guard = common::guard();
    let tokio =
        timeout_made_in_a_polled_in_b(|| tokio::time::timeout(HOUR, std::future::pending::<()>()));
    let wheel =
        timeout_made_in_a_polled_in_b(|| wheel::timeout(HOUR, std::future::pending::<()>()));
    assert_eq!(tokio, None, "tokio's timeout is A's");
    assert_eq!(wheel, tokio);
}

/// A `timeout` whose runtime (and so its timer) is gone before it first
/// waits panics that its timer has shut down, its deadline passed or not,
/// as tokio's does (`a_timeout_whose_runtime_is_gone_panics_as_tokios_does`):
/// the clock its deadline was read on is gone with it, and the one where it
/// is polled may be ahead of it (`runtime_shutdown.rs`). (It timed out
/// once its deadline had passed by the clock where it was polled.)
#[test]
fn a_timeout_whose_timer_is_gone_by_its_first_wait() {
    let _guard = common::guard();
    let run = |duration: Duration| {
        let made_in = Builder::new_current_thread().enable_time().build().unwrap();
        let timed =
            made_in.block_on(async move { wheel::timeout(duration, std::future::pending::<()>()) });
        drop(made_in);
        std::thread::sleep(Duration::from_millis(5));
        let awaited_in = Builder::new_current_thread().enable_time().build().unwrap();
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            awaited_in.block_on(timed).is_err()
        }))
        .map_err(|panic| common::panic_message(&*panic))
    };
    for duration in [Duration::from_millis(1), HOUR] {
        let message = run(duration).unwrap_err();
        assert!(message.contains("shut down"), "{duration:?}: {message}");
    }
}
