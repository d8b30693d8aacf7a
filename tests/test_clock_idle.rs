//! When a `TestRuntime`'s clock may move, scenario by scenario, each beside
//! its tokio twin on tokio's paused clock where tokio can run the program:
//! a `block_on` woken by a task, `block_in_place`, loopback I/O under
//! timeouts, a callback that wakes no task, a sleep made in another
//! runtime's context, the clock a task reads, advancing by hand, and a
//! `timeout` that no test runtime elsewhere changes. The clock is read, never
//! real time; the watchdog (`common::guard`) fails a test that hangs.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{ms, secs};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::runtime::Builder;

const WORKERS: [usize; 3] = [1, 2, 4];

/// Every flavour a test runtime comes in here: current-thread, then 1, 2
/// and 4 workers.
fn flavours() -> impl Iterator<Item = Option<usize>> {
    std::iter::once(None).chain(WORKERS.map(Some))
}

/// A task sleeps 10 s while another sleeps 1 s and then sends to
/// `block_on`'s future: woken, it is busy until polled, so it reads 1 s,
/// not 10 (tokio's paused clock reads 1 s too).
#[test]
fn block_on_woken_by_a_task_sees_the_clock_where_the_task_left_it() {
    let _guard = common::guard();
    let program = || async {
        let start = wheel::now();
        let _background = tokio::spawn(wheel::sleep(secs(10)));
        let (tx, rx) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            wheel::sleep(secs(1)).await;
            tx.send(()).unwrap();
        });
        rx.await.unwrap();
        wheel::now() - start
    };
    for workers in flavours() {
        let rt = common::test_rt(workers, true);
        for _ in 0..50 {
            assert_eq!(rt.block_on(program()), secs(1), "{workers:?} workers");
        }
    }
    // The twin: tokio's paused clock.
    let tokio_rt = common::paused_rt();
    let read = tokio_rt.block_on(async {
        let start = tokio::time::Instant::now();
        let _background = tokio::spawn(tokio::time::sleep(secs(10)));
        let (tx, rx) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            tokio::time::sleep(secs(1)).await;
            tx.send(()).unwrap();
        });
        rx.await.unwrap();
        start.elapsed()
    });
    assert_eq!(read, secs(1));
}

/// A task inside `block_in_place` is running: the clock stays put while it
/// blocks, with a sleeper waiting to be jumped to.
#[test]
fn the_clock_stays_put_while_a_task_is_inside_block_in_place() {
    let _guard = common::guard();
    for workers in WORKERS {
        let rt = common::test_rt(Some(workers), true);
        for _ in 0..5 {
            let moved = rt.block_on(async {
                let _background = tokio::spawn(wheel::sleep(secs(10)));
                tokio::spawn(async {
                    let before = wheel::now();
                    // Long enough for several probes to fire.
                    tokio::task::block_in_place(|| std::thread::sleep(ms(20)));
                    wheel::now() - before
                })
                .await
                .unwrap()
            });
            assert_eq!(moved, Duration::ZERO, "{workers} workers");
            // The thread that ran it left the pool and counts no more:
            // auto-advance goes on (kept 10 s, tokio's default, it would
            // wait that long).
            let real = std::time::Instant::now();
            rt.block_on(wheel::sleep(secs(1)));
            assert!(real.elapsed() < secs(5), "{workers} workers: stalled");
        }
    }
}

/// 20 pings over 127.0.0.1, each under a 5 s timeout, answered by a task of
/// the same runtime, with a task asleep for an hour that auto-advance would
/// jump to: how many were answered in time, and how far the clock moved.
/// On the wheel (the test clock), or on tokio's timers (its paused clock).
async fn ping_pong(on_wheel: bool) -> (usize, Duration) {
    let now = || {
        if on_wheel {
            wheel::now()
        } else {
            tokio::time::Instant::now()
        }
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut byte = [0u8];
        while socket.read_exact(&mut byte).await.is_ok() {
            socket.write_all(&byte).await.unwrap();
        }
    });
    let _background = if on_wheel {
        tokio::spawn(async { wheel::sleep(secs(3600)).await })
    } else {
        tokio::spawn(tokio::time::sleep(secs(3600)))
    };
    let start = now();
    let mut client = tokio::net::TcpStream::connect(address).await.unwrap();
    let mut answered = 0;
    for ping in 0..20u8 {
        let round = async {
            client.write_all(&[ping]).await.unwrap();
            let mut pong = [0u8];
            client.read_exact(&mut pong).await.unwrap();
            pong[0]
        };
        let on_time = if on_wheel {
            wheel::timeout(secs(5), round).await.ok()
        } else {
            tokio::time::timeout(secs(5), round).await.ok()
        };
        answered += usize::from(on_time == Some(ping));
    }
    (answered, now() - start)
}

#[test]
fn loopback_io_ready_is_delivered_before_the_clock_moves() {
    let _guard = common::guard();
    for workers in flavours() {
        let rt = common::test_rt(workers, true);
        for _ in 0..5 {
            let (answered, moved) = rt.block_on(ping_pong(true));
            assert_eq!(answered, 20, "{workers:?} workers");
            assert_eq!(moved, Duration::ZERO, "{workers:?} workers");
        }
    }
    // The twin: tokio's paused clock, with tokio's timeouts.
    let tokio_rt = common::paused_rt_all();
    assert_eq!(tokio_rt.block_on(ping_pong(false)), (20, Duration::ZERO));
}

/// A callback that wakes no task, or panics, fires, and auto-advance goes
/// on to the sleep after it.
#[test]
fn a_callback_that_wakes_no_task_does_not_stop_auto_advance() {
    let _guard = common::guard();
    for workers in [None, Some(2)] {
        for panics in [false, true] {
            let rt = common::test_rt(workers, true);
            let ran = Arc::new(AtomicUsize::new(0));
            let counter = ran.clone();
            rt.timer().schedule(secs(1), move || {
                counter.fetch_add(1, Ordering::SeqCst);
                assert!(!panics, "a callback that panics");
            });
            let start = rt.now();
            rt.block_on(async { wheel::sleep(secs(2)).await });
            assert_eq!(rt.now() - start, secs(2), "{workers:?} workers");
            assert_eq!(ran.load(Ordering::SeqCst), 1);
        }
    }
}

/// A trusted worker task of a test runtime enters an ordinary runtime and
/// makes a sleep there: it is that runtime's, on that runtime's clock, and
/// the test clock jumping ahead does not fire it (tokio: the same).
#[test]
// The task handle made in one runtime is awaited in the other.
#[allow(clippy::async_yields_async)]
fn a_sleep_made_in_another_runtimes_context_is_never_the_test_clocks() {
    let _guard = common::guard();
    let test = common::test_rt(Some(1), true);
    let other = Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    let other_handle = other.handle().clone();
    for twin in [false, true] {
        let other_handle = other_handle.clone();
        let task = test.block_on(async move {
            // Two tasks in a row on the worker: it would trust the second.
            tokio::spawn(async { wheel::sleep(ms(1)).await })
                .await
                .unwrap();
            tokio::spawn(async move {
                wheel::sleep(ms(1)).await;
                let _in_other = other_handle.enter();
                if twin {
                    other_handle.spawn(async { tokio::time::sleep(secs(2)).await })
                } else {
                    other_handle.spawn(wheel::sleep(secs(2)))
                }
            })
            .await
            .unwrap()
        });
        // The test clock races ahead meanwhile.
        test.handle().spawn(wheel::sleep(secs(3600)));
        let waited = other.block_on(async {
            let start = tokio::time::Instant::now();
            task.await.unwrap();
            start.elapsed()
        });
        assert_eq!(waited, secs(2), "tokio twin: {twin}");
    }
}

/// `wheel::now()` reads the test clock, and a deadline counted from it
/// waits on it after the clock has moved an hour (tokio's twin: the paused
/// clock's `Instant::now()`); a `timeout` made in `block_on` counts from it
/// too, and a sleep made outside the runtime counts the time it had left.
#[test]
fn a_task_reads_the_test_clock_with_wheel_now() {
    let _guard = common::guard();
    let made_outside = wheel::sleep(secs(5));
    for workers in flavours() {
        let rt = common::test_rt(workers, true);
        let (waited, timed_out_after) = rt.block_on(async {
            wheel::sleep(secs(3600)).await;
            let start = wheel::now();
            wheel::sleep_until(wheel::now() + secs(5)).await;
            let waited = wheel::now() - start;
            let start = wheel::now();
            let timed_out = wheel::timeout(secs(7), std::future::pending::<()>()).await;
            assert!(timed_out.is_err());
            (waited, wheel::now() - start)
        });
        assert_eq!((waited, timed_out_after), (secs(5), secs(7)), "{workers:?}");
        assert_eq!(rt.block_on(async { wheel::now() }), rt.now());
    }
    let tokio_rt = common::paused_rt();
    let waited = tokio_rt.block_on(async {
        tokio::time::sleep(secs(3600)).await;
        let start = tokio::time::Instant::now();
        tokio::time::sleep_until(tokio::time::Instant::now() + secs(5)).await;
        start.elapsed()
    });
    assert_eq!(waited, secs(5));
    // Outside any runtime, `wheel::now()` is tokio's clock.
    let before = wheel::Instant::now();
    assert!(wheel::now() >= before);
    // Made outside, first polled in a test runtime whose clock has moved:
    // it waits about its 5 s there (less the real time since it was made),
    // not none.
    let rt = common::test_rt(Some(2), true);
    rt.block_on(async { wheel::sleep(secs(3600)).await });
    let start = rt.now();
    rt.block_on(made_outside);
    let waited = rt.now() - start;
    assert!(waited > secs(4) && waited <= secs(5), "waited {waited:?}");
}

/// By hand, as tokio's `advance(d).await`: the advance lets the tasks
/// spawned or woken before it register first, and those it woke register
/// their next timers before it returns: no spinning on the stats.
#[test]
fn advancing_by_hand_waits_for_tasks_to_register() {
    let _guard = common::guard();
    for workers in WORKERS {
        let rt = common::test_rt(Some(workers), false);
        let start = rt.now();
        let (report, reports) = std::sync::mpsc::channel();
        for task in 1..=4u64 {
            let report = report.clone();
            rt.handle().spawn(async move {
                for _ in 0..3 {
                    wheel::sleep(secs(task)).await;
                    report.send((task, wheel::now())).unwrap();
                }
            });
        }
        let mut seen = Vec::new();
        for _ in 0..12 {
            rt.advance(secs(1));
            seen.extend(reports.try_iter());
        }
        let mut expected: Vec<_> = (1..=4u64)
            .flat_map(|task| (1..=3).map(move |n| (task, secs(task * n))))
            .filter(|&(_, at)| at <= secs(12))
            .collect();
        expected.sort();
        let mut seen: Vec<_> = seen.into_iter().map(|(t, at)| (t, at - start)).collect();
        seen.sort();
        assert_eq!(seen, expected, "{workers} workers");
    }
}

/// The same program on tokio's paused clock and a test runtime's manual
/// one, advanced inside the runtime: the task's sleep ends at the same
/// instant on both; the test runtime's advance needs no yield first.
#[test]
fn advance_async_inside_the_runtime_as_tokios_advance() {
    let _guard = common::guard();
    let tokio_rt = common::paused_rt();
    let tokio_done = tokio_rt.block_on(async {
        let task = tokio::spawn(tokio::time::sleep(secs(5)));
        tokio::task::yield_now().await;
        tokio::time::advance(secs(5)).await;
        tokio::task::yield_now().await;
        task.is_finished()
    });
    assert!(tokio_done);
    for workers in flavours() {
        let rt = common::test_rt(workers, false);
        let done = rt.block_on(async {
            let task = tokio::spawn(wheel::sleep(secs(5)));
            rt.advance_async(secs(5)).await;
            task.is_finished()
        });
        assert!(done, "{workers:?} workers");
    }
}

#[test]
#[should_panic(expected = "advance_async")]
fn advance_inside_the_runtime_panics_naming_the_async_one() {
    let rt = common::test_rt(Some(1), false);
    rt.block_on(async { rt.advance(secs(1)) });
}

/// A `timeout` made in one ordinary runtime and awaited in another, after
/// the first is gone, panics as tokio's does (its timer has shut down), a
/// test runtime alive in the process or not.
#[test]
// The timeout made in one runtime is awaited in another.
#[allow(clippy::async_yields_async)]
fn a_timeout_whose_runtime_is_gone_panics_as_tokios_does() {
    let _guard = common::guard();
    fn run<T: std::future::Future<Output = Result<(), E>> + Send + 'static, E>(
        make: fn() -> T,
    ) -> bool {
        let made_in = Builder::new_current_thread().enable_time().build().unwrap();
        let timeout = made_in.block_on(async move { make() });
        drop(made_in);
        let awaited_in = common::paused_rt();
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            awaited_in.block_on(async move { drop(timeout.await) })
        }))
        .is_err()
    }
    let tokio = || tokio::time::timeout(ms(10), std::future::pending::<()>());
    let wheel = || wheel::timeout(ms(10), std::future::pending::<()>());
    assert!(run(tokio), "tokio's completed");
    assert!(run(wheel), "without a test runtime");
    let test = common::test_rt(Some(2), true);
    test.block_on(async {});
    assert!(run(wheel), "with a test runtime");
    drop(test);
}

/// A waker `block_on`'s future left behind, woken after `block_on` has
/// returned, leaves the runtime idle: the next auto-advance goes on.
#[test]
fn a_stale_block_on_waker_does_not_keep_the_runtime_busy() {
    let _guard = common::guard();
    for workers in flavours() {
        let rt = common::test_rt(workers, true);
        let left_behind = std::sync::Mutex::new(None);
        rt.block_on(std::future::poll_fn(|cx| {
            *left_behind.lock().unwrap() = Some(cx.waker().clone());
            std::task::Poll::Ready(())
        }));
        left_behind.lock().unwrap().take().unwrap().wake();
        let start = rt.now();
        // Made inside: one made outside counts the real time before its
        // first poll against it.
        rt.block_on(async { wheel::sleep(secs(1)).await });
        assert_eq!(rt.now() - start, secs(1), "{workers:?} workers");
    }
}

/// A `timeout` counts from when it was made, on the test clock, as
/// tokio's does on its paused clock: made, then the clock moves 2 s, then
/// awaited, a 5 s timeout expires 3 s later. In `block_on`'s future and in
/// a spawned task.
#[test]
fn a_timeout_counts_from_when_it_was_made() {
    let _guard = common::guard();
    let program = || async {
        let start = wheel::now();
        let timeout = wheel::timeout(secs(5), std::future::pending::<()>());
        wheel::sleep(secs(2)).await;
        assert!(timeout.await.is_err());
        wheel::now() - start
    };
    for workers in flavours() {
        let rt = common::test_rt(workers, true);
        assert_eq!(rt.block_on(program()), secs(5), "{workers:?}: block_on");
        let spawned = rt.block_on(async move { tokio::spawn(program()).await.unwrap() });
        assert_eq!(spawned, secs(5), "{workers:?}: a task");
    }
    let tokio_rt = common::paused_rt();
    let waited = tokio_rt.block_on(async {
        let start = tokio::time::Instant::now();
        let timeout = tokio::time::timeout(secs(5), std::future::pending::<()>());
        tokio::time::sleep(secs(2)).await;
        assert!(timeout.await.is_err());
        start.elapsed()
    });
    assert_eq!(waited, secs(5));
}

/// A worker of one test runtime, inside `block_in_place`, drives another,
/// current-thread test runtime with `block_on`: the second's park hooks run
/// on the first's thread, and each runtime counts only its own threads.
#[test]
fn a_test_runtime_driven_from_anothers_worker_keeps_its_own_count() {
    let _guard = common::guard();
    let outer = common::test_rt(Some(2), true);
    let inner = std::sync::Arc::new(common::test_rt(None, true));
    for _ in 0..3 {
        let nested = inner.clone();
        let waited = outer.block_on(async move {
            tokio::spawn(async move {
                wheel::sleep(ms(1)).await;
                tokio::task::block_in_place(|| {
                    nested.block_on(async {
                        let start = wheel::now();
                        wheel::sleep(secs(1)).await;
                        wheel::now() - start
                    })
                })
            })
            .await
            .unwrap()
        });
        assert_eq!(waited, secs(1));
        // Each still advances on its own.
        let start = outer.now();
        outer.block_on(async { wheel::sleep(secs(3)).await });
        assert_eq!(outer.now() - start, secs(3));
    }
}

/// On a current-thread runtime, a task that keeps yielding runs on the
/// thread inside `block_on` between its parks, with no hook to say so: the
/// clock stays put until it is done, though each yield polls the drivers.
#[test]
fn a_current_thread_task_that_keeps_yielding_keeps_the_clock_still() {
    let _guard = common::guard();
    let rt = common::test_rt(None, true);
    let moved = rt.block_on(async {
        let _background = tokio::spawn(wheel::sleep(secs(10)));
        let start = wheel::now();
        tokio::spawn(async {
            // Real time, so that several probes would fire meanwhile.
            let real = std::time::Instant::now();
            while real.elapsed() < ms(10) {
                tokio::task::yield_now().await;
            }
        })
        .await
        .unwrap();
        wheel::now() - start
    });
    assert_eq!(moved, Duration::ZERO);
}

/// A `block_on` future that panics (a failed assertion, caught) leaves
/// the runtime as idle as it found it: a sleep awaited in the next
/// `block_on`, auto-advanced, ends at once on the test clock (it counted
/// the panicked future busy for ever: the clock never moved again). The
/// real-time bound is only a net for that hang.
#[test]
fn a_block_on_future_that_panicked_leaves_the_runtime_idle() {
    let _guard = common::guard();
    for workers in flavours() {
        let rt = common::test_rt(workers, true);
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            rt.block_on(async { panic!("a failed assertion") })
        }));
        assert!(panicked.is_err());
        let slept = rt.block_on(async {
            let start = wheel::now();
            let slept = tokio::time::timeout(secs(20), wheel::sleep(secs(3600))).await;
            slept.map(|()| wheel::now() - start)
        });
        assert_eq!(slept, Ok(secs(3600)), "{workers:?} workers");
    }
}

/// With auto-advance on, `advance_async(1 s)` moves the clock by 1 s, as
/// `tokio::time::advance(1 s).await` does on tokio's auto-advancing
/// paused clock: a task's 10 s sleep is still pending when it returns. (It
/// counted the awaiting task idle, so auto-advance first jumped the clock
/// to the sleep's deadline: 11 s, the sleep fired.)
#[test]
fn advance_async_with_auto_advance_moves_the_clock_by_its_duration_only() {
    let _guard = common::guard();
    let tokio_rt = common::paused_rt();
    let tokio_moved = tokio_rt.block_on(async {
        let start = tokio::time::Instant::now();
        let task = tokio::spawn(tokio::time::sleep(secs(10)));
        tokio::task::yield_now().await;
        tokio::time::advance(secs(1)).await;
        (start.elapsed(), task.is_finished())
    });
    assert_eq!(tokio_moved, (secs(1), false));
    for workers in flavours() {
        let rt = common::test_rt(workers, true);
        let moved = rt.block_on(async {
            let start = wheel::now();
            let task = tokio::spawn(wheel::sleep(secs(10)));
            rt.advance_async(secs(1)).await;
            (wheel::now() - start, task.is_finished())
        });
        assert_eq!(moved, (secs(1), false), "{workers:?} workers");
    }
}

/// With auto-advance on, `advance(1 s)` from outside a multi-thread
/// runtime moves the clock by 1 s: a task's 10 s sleep is still pending
/// when it returns, and `now()` reads 1 s on (auto-advance jumped the clock
/// to the sleep's deadline while `advance` waited for the runtime to be
/// idle, racing the thread that moved it: 11 s). Auto-advance then resumes
/// and finishes the sleep at 10 s.
#[test]
fn advance_with_auto_advance_moves_the_clock_by_its_duration_only() {
    let _guard = common::guard();
    for workers in WORKERS {
        let rt = common::test_rt(Some(workers), true);
        let start = rt.now();
        let task = rt.handle().spawn(async move {
            wheel::sleep(secs(10)).await;
            wheel::now()
        });
        rt.advance(secs(1));
        assert_eq!(rt.now() - start, secs(1), "{workers} workers");
        assert!(!task.is_finished(), "{workers} workers");
        let woke = rt.block_on(task).unwrap();
        assert_eq!(woke - start, secs(10), "{workers} workers");
    }
}
