//! What a `TestRuntime`'s hooks saw late, or never: a `spawn_blocking`
//! closure whose thread has not started yet, and `advance_async` awaited in
//! another runtime's task while the test runtime is idle. The clock is
//! read, never real time; the watchdog (`common::guard`) fails a test that
//! hangs.

mod common;

use common::secs;
use tokio::runtime::Builder;
use wheel::TestRuntime;

fn test_rt(workers: Option<usize>) -> TestRuntime {
    common::test_rt(workers, true)
}

/// A `spawn_blocking` closure is queued before its thread starts (each
/// one starts a thread: `thread_keep_alive(0)`), and the runtime is busy
/// from then: the clock stays put while `block_on` awaits it, as tokio's
/// paused clock does. It jumped an hour when the thread was slow to start.
#[test]
fn the_clock_stays_put_while_a_spawn_blocking_thread_starts() {
    let _guard = common::guard();
    for workers in [None, Some(1), Some(2), Some(4)] {
        let rt = test_rt(workers);
        let moved = rt.block_on(async {
            let start = wheel::now();
            let _background = tokio::spawn(wheel::sleep(secs(3600)));
            for round in 0..300 {
                tokio::task::spawn_blocking(|| ()).await.unwrap();
                if wheel::now() != start {
                    return Some(round);
                }
            }
            None
        });
        assert_eq!(moved, None, "{workers:?} workers: moved in that round");
    }
    // The twin: tokio's paused clock.
    let tokio_rt = common::paused_rt();
    let moved = tokio_rt.block_on(async {
        let start = tokio::time::Instant::now();
        let _background = tokio::spawn(tokio::time::sleep(secs(3600)));
        for _ in 0..300 {
            tokio::task::spawn_blocking(|| ()).await.unwrap();
        }
        start.elapsed()
    });
    assert_eq!(moved, secs(0));
}

/// `advance_async` awaited in another runtime's task (a `#[tokio::test]`
/// driving a multi-thread test runtime) while the test runtime is idle
/// already: its workers parked, nothing arms the probe again but the
/// awaiting future. It waited for ever, with auto-advance on or off.
#[test]
fn advance_async_awaited_outside_moves_an_idle_runtime() {
    let _guard = common::guard();
    let outer = Builder::new_current_thread().enable_all().build().unwrap();
    for workers in [1, 2] {
        for auto_advance in [false, true] {
            let rt = common::test_rt(Some(workers), auto_advance);
            // Idle, proved so, the probe not armed since.
            rt.advance(secs(0));
            let start = rt.now();
            // With auto-advance, no deadline: it would move the clock.
            let task = (!auto_advance).then(|| rt.handle().spawn(wheel::sleep(secs(5))));
            outer.block_on(rt.advance_async(secs(5)));
            assert_eq!(rt.now() - start, secs(5), "{workers} workers");
            assert!(task.is_none_or(|task| task.is_finished()));
        }
    }
}
