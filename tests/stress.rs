//! Stress: many tasks on a two-worker runtime, in real time, creating,
//! resetting, cancelling and awaiting timers at random on three timers (the
//! default one, 3 ms × 4 slots, 1 ms × 2 slots).
//!
//! Luck-free assertions only:
//!
//! - no early completion: after a timer completes, `Instant::now()` is at or
//!   after its deadline (the driver fires a tick only once the clock has
//!   reached it, so this holds however the threads are scheduled);
//! - no lost completion: every await of a timer due within 50 ms finishes
//!   within 5 s, checked with tokio's own timer (tokio's `timeout` polls the
//!   inner future first, so a stalled runtime cannot fake a loss);
//! - at the end, once every future is gone, every timer has nothing pending,
//!   no entries, and no more than its trim floor allocated in each shard.
//!
//! It runs in real time, so these are the only things it asserts: never
//! early, and a generous bound (5 s) on a timer due within 50 ms. In `cargo
//! test` it runs small: 64 tasks for 2 seconds. Run it large with
//!
//! ```sh
//! WHEEL_STRESS_TASKS=2000 WHEEL_STRESS_SECS=120 cargo test --release --test suite stress:: -- --nocapture
//! ```
//!
//! Each task draws its steps from its own xorshift generator, seeded from
//! `WHEEL_STRESS_SEED` (by default a fixed seed, [`DEFAULT_SEED`]); a
//! failure prints the seed, and the same seed replays the same steps
//! (though not the same thread interleaving). Vary it to explore:
//! `WHEEL_STRESS_SEED=$RANDOM`.

use std::future::pending;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::join_all;
use wheel::{Instant, Sleep, Timer};

mod common;

/// The seed of every run that does not set `WHEEL_STRESS_SEED`: fixed, so
/// that `cargo test` draws the same steps each time.
const DEFAULT_SEED: u64 = 0x5eed_2026;
/// The bound after which an await of a timer due within 50 ms is lost.
const LOST_AFTER: Duration = Duration::from_secs(5);
/// Deadlines are drawn from 0 to this many microseconds ahead.
const MAX_DELAY_US: u64 = 50_000;

fn env_u64(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v:?} is not a number")),
        Err(_) => default,
    }
}

/// xorshift64*: tiny, deterministic, good enough to pick steps.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        // Never zero, and seeds 1, 2, 3 ... spread apart.
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn delay(&mut self) -> Duration {
        Duration::from_micros(self.below(MAX_DELAY_US + 1))
    }
}

/// What the tasks saw; failures carry the task and step.
#[derive(Default)]
struct Log {
    failures: Mutex<Vec<String>>,
    completions: AtomicU64,
    steps: AtomicU64,
}

impl Log {
    fn fail(&self, what: String) {
        self.failures.lock().unwrap().push(what);
    }

    /// Records a completion of something due at `deadline`.
    fn completed(&self, deadline: Instant, what: &str) {
        let now = Instant::now();
        if now < deadline {
            self.fail(format!("{what}: completed {:?} early", deadline - now));
        }
        self.completions.fetch_add(1, Ordering::Relaxed);
    }
}

/// Awaits `f`, logging a loss if it takes longer than [`LOST_AFTER`].
async fn bounded<F: std::future::Future>(log: &Log, what: &str, f: F) -> Option<F::Output> {
    match tokio::time::timeout(LOST_AFTER, f).await {
        Ok(out) => Some(out),
        Err(_) => {
            log.fail(format!("{what}: not complete after {LOST_AFTER:?}"));
            None
        }
    }
}

/// Polls `sleep` once, so that it registers (or completes, if already due).
async fn poll_once(sleep: &mut Sleep) -> bool {
    futures::poll!(sleep).is_ready()
}

async fn run_task(id: u64, seed: u64, timers: Arc<Vec<Timer>>, log: Arc<Log>, until: Instant) {
    let mut rng = Rng::new(seed ^ id.wrapping_mul(0xd1b5_4a32_d192_ed03));
    let mut step = 0u64;
    while Instant::now() < until {
        step += 1;
        let timer = &timers[rng.below(timers.len() as u64) as usize];
        let kind = rng.below(10);
        let what = format!("seed {seed} task {id} step {step} kind {kind}");
        match kind {
            // Sleep for a duration.
            0 => {
                let sleep = timer.sleep(rng.delay());
                let deadline = sleep.deadline();
                if bounded(&log, &what, sleep).await.is_some() {
                    log.completed(deadline, &what);
                }
            }
            // Sleep until an instant, on the free function when the timer
            // is the default one.
            1 => {
                let deadline = Instant::now() + rng.delay();
                let sleep = if rng.below(2) == 0 {
                    wheel::sleep_until(deadline)
                } else {
                    timer.sleep_until(deadline)
                };
                if bounded(&log, &what, sleep).await.is_some() {
                    log.completed(deadline, &what);
                }
            }
            // A timeout around tokio's sleep or a future that never ends.
            2 => {
                let deadline = Instant::now() + rng.delay();
                let inner = rng.delay();
                let never = rng.below(2) == 0;
                let out = if never {
                    bounded(&log, &what, timer.timeout_at(deadline, pending::<()>())).await
                } else {
                    bounded(
                        &log,
                        &what,
                        timer.timeout_at(deadline, tokio::time::sleep(inner)),
                    )
                    .await
                };
                match out {
                    Some(Err(_)) => log.completed(deadline, &what),
                    Some(Ok(())) if never => log.fail(format!("{what}: pending() finished")),
                    _ => {}
                }
            }
            // Register, wait a little elsewhere, reset (earlier, later or
            // into the past), then await the new deadline.
            3 => {
                let mut sleep = timer.sleep(rng.delay());
                poll_once(&mut sleep).await;
                tokio::time::sleep(Duration::from_micros(rng.below(5_000))).await;
                let deadline = if rng.below(5) == 0 {
                    Instant::now() - Duration::from_micros(rng.below(5_000))
                } else {
                    Instant::now() + rng.delay()
                };
                std::pin::Pin::new(&mut sleep).reset(deadline);
                if bounded(&log, &what, &mut sleep).await.is_some() {
                    log.completed(deadline, &what);
                }
            }
            // Register, then drop before (probably) firing.
            4 => {
                let mut sleep = timer.sleep(rng.delay() + Duration::from_millis(5));
                poll_once(&mut sleep).await;
                if rng.below(2) == 0 {
                    tokio::task::yield_now().await;
                } else {
                    tokio::time::sleep(Duration::from_micros(rng.below(3_000))).await;
                }
                drop(sleep);
            }
            // Complete, then reset the completed sleep and await it again.
            5 => {
                let mut sleep = timer.sleep(rng.delay() / 4);
                let first = sleep.deadline();
                if bounded(&log, &what, &mut sleep).await.is_some() {
                    log.completed(first, &what);
                    let again = Instant::now() + rng.delay();
                    std::pin::Pin::new(&mut sleep).reset(again);
                    if bounded(&log, &what, &mut sleep).await.is_some() {
                        log.completed(again, &what);
                    }
                }
            }
            // Registered here, awaited by another task (another waker,
            // maybe another worker).
            6 => {
                let mut sleep = timer.sleep(rng.delay());
                let deadline = sleep.deadline();
                poll_once(&mut sleep).await;
                let (log2, what2) = (log.clone(), what.clone());
                let handle = tokio::spawn(async move {
                    if bounded(&log2, &what2, sleep).await.is_some() {
                        log2.completed(deadline, &what2);
                    }
                });
                if bounded(&log, &what, handle).await.is_none() {
                    log.fail(format!("{what}: the awaiting task hangs"));
                }
            }
            // Several at once on the same task.
            7 => {
                let n = 2 + rng.below(7);
                let group = (0..n).map(|_| {
                    let sleep = timer.sleep(rng.delay());
                    let deadline = sleep.deadline();
                    let (log, what) = (&log, &what);
                    async move {
                        sleep.await;
                        log.completed(deadline, what);
                    }
                });
                bounded(&log, &what, join_all(group)).await;
            }
            // An interval: its ticks never come before they are due.
            8 => {
                let period = Duration::from_micros(1_000 + rng.below(9_000));
                let mut every = timer.interval(period);
                for _ in 0..3 {
                    match bounded(&log, &what, every.tick()).await {
                        Some(due) => log.completed(due, &what),
                        None => break,
                    }
                }
            }
            // The first of two sleeps wins; the other is cancelled.
            _ => {
                let mut a = timer.sleep(rng.delay());
                let mut b = timers[0].sleep(rng.delay());
                let (da, db) = (a.deadline(), b.deadline());
                let race = async {
                    tokio::select! {
                        _ = &mut a => log.completed(da, &what),
                        _ = &mut b => log.completed(db, &what),
                    }
                };
                bounded(&log, &what, race).await;
            }
        }
    }
    log.steps.fetch_add(step, Ordering::Relaxed);
}

#[test]
fn random_timers_on_a_multi_thread_runtime_are_never_early_never_lost_and_leave_nothing() {
    let _guard = common::guard();
    let tasks = env_u64("WHEEL_STRESS_TASKS", 64);
    let secs = env_u64("WHEEL_STRESS_SECS", 2);
    let seed = env_u64("WHEEL_STRESS_SEED", DEFAULT_SEED);
    eprintln!(
        "stress: WHEEL_STRESS_SEED={seed} WHEEL_STRESS_TASKS={tasks} WHEEL_STRESS_SECS={secs}"
    );

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let log = Arc::new(Log::default());
    let timers = rt.block_on(async {
        let timers = Arc::new(vec![
            Timer::current(),
            Timer::builder()
                .tick(Duration::from_millis(3))
                .slots_per_level(4)
                .build()
                .unwrap(),
            Timer::builder().slots_per_level(2).build().unwrap(),
        ]);
        let until = Instant::now() + Duration::from_secs(secs);
        let handles: Vec<_> = (0..tasks)
            .map(|id| tokio::spawn(run_task(id, seed, timers.clone(), log.clone(), until)))
            .collect();
        for handle in handles {
            if let Err(e) = handle.await {
                log.fail(format!("seed {seed}: a task failed: {e}"));
            }
        }
        timers
    });

    let failures = log.failures.lock().unwrap();
    let steps = log.steps.load(Ordering::Relaxed);
    let completions = log.completions.load(Ordering::Relaxed);
    eprintln!("stress: {steps} steps, {completions} completions");
    assert!(
        failures.is_empty(),
        "WHEEL_STRESS_SEED={seed}: {} failures, first ones: {:#?}",
        failures.len(),
        &failures[..failures.len().min(20)]
    );
    assert!(completions > tasks, "seed {seed}: barely ran");
    for (i, timer) in timers.iter().enumerate() {
        let stats = timer.stats();
        assert_eq!(
            (stats.pending, stats.entries),
            (0, 0),
            "seed {seed}: timer {i} kept timers: {stats:?}"
        );
        // The trim floor is per shard, and the stats add the shards up.
        assert!(
            stats.allocated_entries <= 1_024 * timer.shards(),
            "seed {seed}: timer {i}: {stats:?}"
        );
    }
}
