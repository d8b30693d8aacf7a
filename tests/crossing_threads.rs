//! Sleeps and timeouts that cross threads and runtimes: dropped, polled or
//! reset by a thread-local's destructor on another thread, or made in a
//! runtime whose default timer was shut down by hand.

mod common;

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Waker};
use std::time::Duration;

use common::{in_a_thread_locals_destructor_after_tokios, ms, paused_rt, secs};
use tokio_test::{assert_pending, task};

thread_local! {
    static KEPT: RefCell<Option<wheel::Sleep>> = const { RefCell::new(None) };
}

/// A pending sleep of a paused runtime, the last its shard has, dropped by a
/// thread-local's destructor on another thread after tokio's own
/// thread-local context is gone there (as a `tokio::time::Sleep` can be).
/// Disarming the shard's alarm entered the runtime, which panicked inside
/// the destructor and aborted the process. Run in a child process, which
/// the abort would end.
#[test]
fn a_sleep_dropped_by_a_thread_locals_destructor_after_tokios_does_not_abort() {
    let _guard = common::guard();
    const CHILD: &str = "WHEEL_TLS_DROP_CHILD";
    if !common::in_a_child(CHILD, &[]) {
        return;
    }
    let rt = paused_rt();
    let mut sleep = {
        let _in_rt = rt.enter();
        wheel::sleep(secs(3600))
    };
    rt.block_on(async {
        let mut polled = task::spawn(&mut sleep);
        assert_pending!(polled.poll());
    });
    std::thread::spawn(move || {
        KEPT.with(|kept| *kept.borrow_mut() = Some(sleep));
        // tokio's context thread-local, first used after `KEPT`, is
        // destroyed before it (destructors run in reverse order).
        assert!(tokio::runtime::Handle::try_current().is_err());
    })
    .join()
    .unwrap();
    // The runtime still serves its timers.
    rt.block_on(async {
        let start = tokio::time::Instant::now();
        wheel::sleep(secs(1)).await;
        assert_eq!(start.elapsed(), secs(1));
    });
}

/// A timeout made after the runtime's default timer was shut down by hand
/// waits on the timer that replaces it, as a sleep made then does; it
/// panicked "shut down" at its first wait: the thread's cache still named
/// the runtime, so no lookup replaced the timer.
#[test]
fn a_timeout_made_after_the_default_timer_is_shut_down_by_hand_times_out() {
    let _guard = common::guard();
    paused_rt().block_on(async {
        // The thread's cache now holds this runtime's default timer.
        wheel::sleep(Duration::from_millis(1)).await;
        wheel::Timer::current().shutdown();
        let start = tokio::time::Instant::now();
        let out = wheel::timeout(secs(1), std::future::pending::<()>()).await;
        assert!(out.is_err(), "{out:?}");
        assert_eq!(start.elapsed(), secs(1));
        assert!(!wheel::Timer::current().is_shut_down(), "not replaced");
    });
}

/// Sleeps, an interval and a timeout of a current-thread runtime, each the
/// new earliest of its shard, first polled or reset by a thread-local's
/// destructor after tokio's context is gone there (a `tokio::time::Sleep`
/// can be: it reads no clock). Registering one read the runtime's clock,
/// which entered the runtime: `Handle::enter` panicked in the destructor,
/// and the process aborted. Back in the runtime, each completes on time.
#[test]
fn sleeps_first_polled_or_reset_by_a_thread_locals_destructor_after_tokios_do_not_abort() {
    let _guard = common::guard();
    const CHILD: &str = "WHEEL_TLS_POLL_CHILD";
    if !common::in_a_child(CHILD, &[]) {
        return;
    }
    let rt = paused_rt();
    let (start, made) = rt.block_on(async {
        let mut reset = wheel::sleep(secs(3600));
        assert_pending!(task::spawn(&mut reset).poll());
        let mut interval = wheel::interval(secs(2));
        interval.tick().await;
        let timeout = Box::pin(wheel::timeout(ms(500), std::future::pending::<()>()));
        let made = (reset, interval, wheel::sleep(secs(1)), timeout);
        (tokio::time::Instant::now(), made)
    });
    let (reset, mut interval, sleep, timeout) =
        in_a_thread_locals_destructor_after_tokios(move || {
            let (mut reset, mut interval, mut sleep, mut timeout) = made;
            let mut cx = Context::from_waker(Waker::noop());
            // Each pulls its shard's promise in: 3 s, 2 s, 1 s, 500 ms.
            Pin::new(&mut reset).reset(start + secs(3));
            assert!(Pin::new(&mut reset).poll(&mut cx).is_pending());
            assert!(interval.poll_tick(&mut cx).is_pending());
            assert!(Pin::new(&mut sleep).poll(&mut cx).is_pending());
            assert!(timeout.as_mut().poll(&mut cx).is_pending());
            (reset, interval, sleep, timeout)
        });
    rt.block_on(async move {
        assert!(timeout.await.is_err());
        assert_eq!(start.elapsed(), ms(500));
        sleep.await;
        assert_eq!(start.elapsed(), secs(1));
        interval.tick().await;
        assert_eq!(start.elapsed(), secs(2));
        reset.await;
        assert_eq!(start.elapsed(), secs(3));
    });
}

/// A `DelayQueue` made by `new` on a current-thread runtime, first polled
/// by a thread-local's destructor after tokio's context is gone there:
/// its wait, a tokio timer made inside the queue's runtime, entered it,
/// which panicked in the destructor, and the process aborted. Back in the
/// runtime, the entry comes out on time.
#[test]
fn a_delay_queue_first_polled_by_a_thread_locals_destructor_after_tokios_does_not_abort() {
    let _guard = common::guard();
    const CHILD: &str = "WHEEL_TLS_QUEUE_CHILD";
    if !common::in_a_child(CHILD, &[]) {
        return;
    }
    let rt = paused_rt();
    let (start, queue) = rt.block_on(async {
        let mut queue = wheel::DelayQueue::new();
        queue.insert("due", secs(1));
        (tokio::time::Instant::now(), queue)
    });
    let mut queue = in_a_thread_locals_destructor_after_tokios(move || {
        let mut queue = queue;
        let mut cx = Context::from_waker(Waker::noop());
        assert!(queue.poll_expired(&mut cx).is_pending());
        queue
    });
    rt.block_on(async move {
        let expired = std::future::poll_fn(|cx| queue.poll_expired(cx)).await;
        assert_eq!(expired.map(|expired| expired.into_inner()), Some("due"));
        assert_eq!(start.elapsed(), secs(1));
    });
}

/// Sleeps registered by tasks on both workers of a multi-thread runtime,
/// handed to other tasks (so most are dropped on a thread other than the
/// one whose shard holds them), enough of them that most cancels are
/// batched (`wheel/discard.rs`), while passes fire the rest: every count
/// exact at the end, and no entry left. (Debug builds check under every
/// lock that no flush's values were left there.)
#[test]
fn batched_cancels_from_other_threads_beside_passes_leave_exact_counts() {
    let rt = common::multi_rt();
    let timer = rt.block_on(async { wheel::Timer::builder().build().unwrap() });
    const TASKS: u64 = 8;
    const EACH: u64 = 400;
    // Completed at their first poll: neither fired nor cancelled.
    let ready = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    rt.block_on(async {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<wheel::Sleep>();
        let mut makers = Vec::new();
        for t in 0..TASKS {
            let (timer, tx, ready) = (timer.clone(), tx.clone(), ready.clone());
            makers.push(tokio::spawn(async move {
                for i in 0..EACH {
                    // Some due within the test (fired by passes), most far off.
                    let d = if (i + t) % 5 == 0 {
                        ms(1 + i % 7)
                    } else {
                        secs(3600)
                    };
                    let mut sleep = timer.sleep(d);
                    std::future::poll_fn(|cx| {
                        if Pin::new(&mut sleep).poll(cx).is_ready() {
                            ready.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                        std::task::Poll::Ready(())
                    })
                    .await;
                    tx.send(sleep).unwrap();
                    if i % 50 == 0 {
                        tokio::time::sleep(ms(1)).await;
                    }
                }
            }));
        }
        drop(tx);
        let dropper = tokio::spawn(async move {
            let mut n = 0u64;
            while let Some(sleep) = rx.recv().await {
                n += 1;
                // Handed on once more now and then, to be dropped later.
                if n % 3 == 0 {
                    tokio::spawn(async move {
                        tokio::task::yield_now().await;
                        drop(sleep);
                    });
                } else {
                    drop(sleep);
                }
            }
            n
        });
        for maker in makers {
            maker.await.unwrap();
        }
        assert_eq!(dropper.await.unwrap(), TASKS * EACH);
        tokio::time::sleep(ms(20)).await;
    });
    let stats = timer.stats();
    assert_eq!((stats.pending, stats.entries), (0, 0), "{stats:?}");
    let ready = ready.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(
        stats.fired + stats.cancelled + ready,
        TASKS * EACH,
        "{stats:?}"
    );
    assert!(stats.cancelled > TASKS * EACH / 2, "{stats:?}");
    assert_eq!(stats.panicked, 0, "{stats:?}");
}
