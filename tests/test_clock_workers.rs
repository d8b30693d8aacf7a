//! The test clock's idle rule on multi-thread runtimes, where workers park
//! on their own: auto-advance goes on after `block_on` returns, and the
//! clock stays put while a worker's task yields or a blocking closure runs.
//! The clock is read, never real time; a real-time bound only turns a hang
//! into a failure (the watchdog, `common::guard`, is the last net).

mod common;

use std::sync::mpsc;
use std::time::Duration;

use common::secs;

/// How long a test waits, in real time, for what auto-advance owes it:
/// each step costs a few milliseconds, so this only catches a hang.
const HANG: Duration = Duration::from_secs(10);

/// A `block_on` future that returns `Ready` while a worker parks (its
/// task having registered a sleep meanwhile) leaves the runtime idle with
/// a deadline pending: auto-advance must move the clock to it. The
/// worker's park saw `block_on` busy and armed no probe, and nothing
/// armed it after `block_on` returned: the task's sleep never ended.
#[test]
fn a_block_on_that_returns_after_a_worker_parked_leaves_auto_advance_running() {
    let _guard = common::guard();
    for workers in [1, 2, 4] {
        let rt = common::test_rt(Some(workers), true);
        let start = rt.now();
        let (done, finished) = mpsc::channel();
        rt.block_on(async move {
            tokio::spawn(async move {
                wheel::sleep(secs(60)).await;
                done.send(wheel::now()).unwrap();
            });
            // Still being polled while the task runs, registers its sleep
            // and its worker parks.
            std::thread::sleep(Duration::from_millis(100));
        });
        let woke = finished
            .recv_timeout(HANG)
            .unwrap_or_else(|_| panic!("{workers} workers: auto-advance never moved the clock"));
        assert_eq!(woke - start, secs(60), "{workers} workers");
    }
}

/// The same, with `block_on`'s future woken by the task (a oneshot) and
/// returning at once: woken, it counts busy until polled, so the worker
/// that parks after sending may find it busy and arm no probe.
#[test]
fn a_block_on_woken_then_ready_leaves_auto_advance_running() {
    let _guard = common::guard();
    for workers in [1, 2, 4] {
        let rt = common::test_rt(Some(workers), true);
        for round in 0..50 {
            let (done, finished) = mpsc::channel();
            let start = rt.now();
            rt.block_on(async move {
                let (tx, rx) = tokio::sync::oneshot::channel();
                tokio::spawn(async move {
                    wheel::sleep(secs(1)).await;
                    tx.send(()).unwrap();
                    wheel::sleep(secs(1)).await;
                    done.send(wheel::now()).unwrap();
                });
                rx.await.unwrap();
            });
            let woke = finished.recv_timeout(HANG).unwrap_or_else(|_| {
                panic!("{workers} workers, round {round}: auto-advance never moved the clock")
            });
            assert_eq!(woke - start, secs(2), "{workers} workers, round {round}");
        }
    }
}

/// On a multi-thread runtime too (`test_clock_idle.rs` pins the
/// current-thread one), the clock stays put while a task keeps yielding
/// and while a `spawn_blocking` closure runs, though a deadline is pending
/// and probes fire meanwhile, as on tokio's paused clock.
#[test]
fn the_clock_stays_put_while_a_worker_task_yields_or_a_blocking_closure_runs() {
    let _guard = common::guard();
    for workers in [1, 2, 4] {
        let rt = common::test_rt(Some(workers), true);
        let moved = rt.block_on(async {
            let _background = tokio::spawn(wheel::sleep(secs(3600)));
            let start = wheel::now();
            tokio::spawn(async {
                // Real time, so that several probes would fire meanwhile.
                let real = std::time::Instant::now();
                while real.elapsed() < Duration::from_millis(10) {
                    tokio::task::yield_now().await;
                }
            })
            .await
            .unwrap();
            let yielding = wheel::now() - start;
            tokio::task::spawn_blocking(|| std::thread::sleep(Duration::from_millis(10)))
                .await
                .unwrap();
            (yielding, wheel::now() - start)
        });
        assert_eq!(moved, (Duration::ZERO, Duration::ZERO), "{workers} workers");
    }
}
