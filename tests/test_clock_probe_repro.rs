//! Repro of a test-clock defect that `tests/server_test_clock.rs` met under
//! CPU contention (issue 41; not fixed here, so `#[ignore]`d): the idle
//! probe can fire before its first poll, and then `armed a millisecond
//! ahead` panics (debug builds) or the probe is lost (release).
//!
//! `Idle::arm` (`src/test_clock/idle.rs`) arms the probe, a tokio timer, at
//! `Instant::now() + PROBE_AHEAD` (1 ms), then polls it and
//! `debug_assert!`s that the poll is pending. Registering the timer unparks
//! the runtime's driver; if the arming thread is then kept off the CPU
//! until a worker has parked on that timer and processed it (1-2 ms later,
//! on tokio's millisecond grid), the timer has fired before the poll, and
//! the poll is ready. All three places that arm meet it: `TestClock::build`
//! (`Idle::start`: the test fails), `block_on`'s future going pending (the
//! test fails), and a worker's park hook (`worker thread panicking;
//! aborting process`: the whole test binary dies). Without debug
//! assertions the probe is then lost: the timer fired with no waker
//! registered yet, or woke the probe while the arming held its lock, which
//! drops the wake-up as superseded. Nothing wakes it again until some
//! thread parks or `block_on` goes pending, so if that was the last arming
//! before every worker parked, auto-advance stops for good.
//!
//! The repro loads the machine (spinning threads, and test runtimes
//! stepping their clocks) and builds 4-worker test runtimes meanwhile, for
//! 40 s of real time or until the assertion panics or a runtime stops
//! advancing for 5 s.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod common;

/// Threads that spin, one per core of the 2-core machine it was found on.
const SPINNERS: usize = 2;
/// Test runtimes stepping their clocks meanwhile: threads that run in
/// short bursts.
const LOAD: usize = 4;
/// Threads building test runtimes at once.
const BUILDERS: usize = 2;
/// How long it tries, within the watchdog's minute.
const TRYING: Duration = Duration::from_secs(40);
/// Real time without a step that counts as auto-advance having stopped.
const STALLED: Duration = Duration::from_secs(5);

fn test_runtime() -> wheel::TestRuntime {
    wheel::TestClock::new()
        .auto_advance(true)
        .build(
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(4)
                .enable_all(),
        )
        .unwrap()
}

/// What the threads report.
struct Shared {
    start: Instant,
    done: AtomicBool,
    armed_late: AtomicUsize,
    other_panics: AtomicUsize,
    /// Per stepping thread: when it last stepped, in ms since `start`.
    stepped: Vec<AtomicU64>,
}

impl Shared {
    fn stepped(&self, thread: usize) {
        let ms = self.start.elapsed().as_millis() as u64;
        self.stepped[thread].store(ms, SeqCst);
    }

    fn panicked(&self, panic: &(dyn std::any::Any + Send)) {
        if common::panic_message(panic) == "armed a millisecond ahead" {
            self.armed_late.fetch_add(1, SeqCst);
        } else {
            self.other_panics.fetch_add(1, SeqCst);
        }
    }
}

/// Eight tasks sleeping 1 s, 1.001 s, ... ten times each: a step of the
/// clock per sleep.
async fn steps() {
    let tasks: Vec<_> = (0..8)
        .map(|task| {
            tokio::spawn(async move {
                for _ in 0..10 {
                    wheel::sleep(Duration::from_millis(1000 + task)).await;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
}

#[test]
#[ignore = "repro: under load, the test clock's idle probe fires before its first poll: \
            `armed a millisecond ahead` panics (in build, block_on, or a worker: abort), or \
            without debug assertions the probe is lost (src/test_clock/idle.rs)"]
fn the_idle_probe_is_pending_when_armed_under_load() {
    let _guard = common::guard();
    let shared = Arc::new(Shared {
        start: Instant::now(),
        done: AtomicBool::new(false),
        armed_late: AtomicUsize::new(0),
        other_panics: AtomicUsize::new(0),
        stepped: (0..LOAD + BUILDERS).map(|_| AtomicU64::new(0)).collect(),
    });
    // Detached: a runtime whose clock stopped never returns from `block_on`.
    for _ in 0..SPINNERS {
        let shared = shared.clone();
        std::thread::spawn(move || {
            while !shared.done.load(SeqCst) {
                std::hint::spin_loop();
            }
        });
    }
    for thread in 0..LOAD {
        let shared = shared.clone();
        std::thread::spawn(move || {
            let rt = test_runtime();
            let ran = catch_unwind(AssertUnwindSafe(|| {
                rt.block_on(async {
                    while !shared.done.load(SeqCst) {
                        steps().await;
                        shared.stepped(thread);
                    }
                })
            }));
            if let Err(panic) = ran {
                shared.panicked(&*panic);
            }
        });
    }
    for thread in LOAD..LOAD + BUILDERS {
        let shared = shared.clone();
        std::thread::spawn(move || {
            while !shared.done.load(SeqCst) {
                let ran = catch_unwind(|| {
                    let rt = test_runtime();
                    rt.block_on(wheel::sleep(Duration::from_secs(1)));
                });
                match ran {
                    Ok(()) => shared.stepped(thread),
                    Err(panic) => shared.panicked(&*panic),
                }
            }
        });
    }

    let mut stalled = None;
    while shared.start.elapsed() < TRYING
        && shared.armed_late.load(SeqCst) + shared.other_panics.load(SeqCst) == 0
        && stalled.is_none()
    {
        std::thread::sleep(Duration::from_millis(100));
        let now = shared.start.elapsed().as_millis() as u64;
        stalled = (0..LOAD + BUILDERS).find(|&thread| {
            now.saturating_sub(shared.stepped[thread].load(SeqCst)) > STALLED.as_millis() as u64
        });
    }
    shared.done.store(true, SeqCst);
    let (late, other) = (
        shared.armed_late.load(SeqCst),
        shared.other_panics.load(SeqCst),
    );
    assert!(
        (late, other, stalled) == (0, 0, None),
        "after {:.1?}: {late} `armed a millisecond ahead` panics, {other} other panics, \
         stepping thread {stalled:?} stopped for {STALLED:?} (0-3 load, 4-5 builders)",
        shared.start.elapsed()
    );
}
