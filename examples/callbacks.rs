//! Retry with exponential backoff, Netty style: every step is a callback on
//! the wheel, and every pending step can be cancelled through its
//! `TimerHandle`.
//!
//! Each of 300 jobs calls a flaky operation. The first attempt is scheduled
//! at once; an attempt that fails schedules the next one after an
//! exponential backoff with jitter (10 ms, 20 ms, 40 ms, ... capped at
//! 160 ms, each drawn between half and all of that). Alongside, each job has
//! a deadline callback, 600 ms out: if it fires first, the job gives up and
//! cancels its pending retry. At 150 ms the "user" cancels every seventh
//! job, which cancels both its retry and its deadline. A job that succeeds
//! cancels its deadline and caches its result for a minute, with one more
//! callback to evict it.
//!
//! So every job holds at most two live callbacks, each guarded by its
//! `TimerHandle`, and the job's mutex makes the races (a retry firing while
//! the deadline cancels it, the user cancelling a job that just succeeded)
//! come out one way or the other, never both. Nothing blocks, no task sleeps
//! per job: the timer's driver runs the attempts.
//!
//! The operation is scripted, not random: job `i` fails a fixed number of
//! times (0 to 7) before it succeeds, or always fails (one job in five), from
//! a hash of `i`. Which jobs give up still depends on the jitter, which is
//! hashed too, and on real time.
//!
//! At the end the run waits for the timer to finish the callbacks it had
//! already taken, then calls `timer.shutdown()`, which hands back what never
//! ran: the cache evictions, due in a minute. It runs them now (a flush).
//!
//! Run it with `cargo run --release --example callbacks`. It takes well
//! under a second, prints one summary line, and exits non-zero if the counts
//! do not add up (every job ended exactly one way, no callback ran before
//! its deadline, the timer's counters agree with the jobs' own).

use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use wheel::{Timer, TimerHandle};

const JOBS: u64 = 300;
const FIRST_BACKOFF: Duration = Duration::from_millis(10);
const MAX_BACKOFF: Duration = Duration::from_millis(160);
/// A job still failing this long after it started gives up.
const JOB_DEADLINE: Duration = Duration::from_millis(600);
/// When the user cancels every `CANCEL_EVERY`th job.
const USER_CANCELS_AT: Duration = Duration::from_millis(150);
const CANCEL_EVERY: usize = 7;
/// How long a success is cached before its eviction callback runs.
const CACHE_FOR: Duration = Duration::from_secs(60);
/// The whole run must be over by then, or it counts as a failure.
const RUN_LIMIT: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Succeeded,
    GaveUp,
    Cancelled,
}

/// What the callbacks count, to check against the timer's own counters.
#[derive(Debug, Default)]
struct Counters {
    /// Retry callbacks run (an attempt each, unless the job had just ended).
    retries: AtomicU64,
    /// Deadline callbacks run.
    deadlines: AtomicU64,
    /// `cancel()` calls that stopped a callback (returned `true`).
    cancels: AtomicU64,
    /// Callbacks that ran before their deadline (must stay 0).
    early: AtomicU64,
    evicted: AtomicU64,
}

struct Job {
    id: u64,
    timer: Timer,
    counters: Arc<Counters>,
    done: mpsc::UnboundedSender<Outcome>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    outcome: Option<Outcome>,
    attempts: u32,
    /// The next attempt: pending, or running right now.
    retry: Option<TimerHandle>,
    /// The give-up callback.
    deadline: Option<TimerHandle>,
}

impl Job {
    fn start(
        id: u64,
        timer: &Timer,
        counters: &Arc<Counters>,
        done: &mpsc::UnboundedSender<Outcome>,
    ) -> Arc<Job> {
        let job = Arc::new(Job {
            id,
            timer: timer.clone(),
            counters: counters.clone(),
            done: done.clone(),
            state: Mutex::new(State::default()),
        });
        // Holding the lock while scheduling is fine: a callback never runs
        // on the stack that schedules it, only on the timer's driver.
        let mut state = job.state.lock().unwrap();
        let (on_deadline, on_retry) = (job.clone(), job.clone());
        state.deadline = Some(timer.schedule(JOB_DEADLINE, move || on_deadline.give_up()));
        state.retry = Some(timer.schedule(Duration::ZERO, move || on_retry.attempt()));
        drop(state);
        job
    }

    /// A retry callback: one call of the operation.
    fn attempt(self: Arc<Self>) {
        let mut state = self.state.lock().unwrap();
        self.check_not_early(state.retry.as_ref());
        self.counters.retries.fetch_add(1, Ordering::Relaxed);
        if state.outcome.is_some() {
            // The deadline or the user got the lock first, and found this
            // callback already started: too late to cancel, so it stops here.
            return;
        }
        state.attempts += 1;
        if operation_succeeds(self.id, state.attempts) {
            self.finish(&mut state, Outcome::Succeeded);
        } else {
            let next = self.clone();
            let delay = backoff(self.id, state.attempts);
            state.retry = Some(self.timer.schedule(delay, move || next.attempt()));
        }
    }

    /// The deadline callback: give up, cancelling the pending retry.
    fn give_up(&self) {
        let mut state = self.state.lock().unwrap();
        self.check_not_early(state.deadline.as_ref());
        self.counters.deadlines.fetch_add(1, Ordering::Relaxed);
        if state.outcome.is_none() {
            self.finish(&mut state, Outcome::GaveUp);
        }
    }

    /// The user's cancel: `false` if the job had already ended.
    fn cancel(&self) -> bool {
        let mut state = self.state.lock().unwrap();
        if state.outcome.is_some() {
            return false;
        }
        self.finish(&mut state, Outcome::Cancelled);
        true
    }

    /// Ends the job: cancels whichever of its callbacks are still pending
    /// (the one running now, if any, reports `false`) and reports.
    fn finish(&self, state: &mut State, outcome: Outcome) {
        state.outcome = Some(outcome);
        for handle in [state.retry.take(), state.deadline.take()]
            .into_iter()
            .flatten()
        {
            if handle.cancel() {
                self.counters.cancels.fetch_add(1, Ordering::Relaxed);
            }
        }
        if outcome == Outcome::Succeeded {
            // Dropping the handle does not cancel the eviction.
            let counters = self.counters.clone();
            self.timer.schedule(CACHE_FOR, move || {
                counters.evicted.fetch_add(1, Ordering::Relaxed);
            });
        }
        // The receiver outlives every job; a send cannot fail.
        let _ = self.done.send(outcome);
    }

    fn check_not_early(&self, handle: Option<&TimerHandle>) {
        if handle.is_some_and(|handle| self.timer.now() < handle.deadline()) {
            self.counters.early.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The flaky operation: job `id` fails its first 0 to 7 attempts, or all of
/// them.
fn operation_succeeds(id: u64, attempt: u32) -> bool {
    let failures = mix(id) % 10;
    failures < 8 && u64::from(attempt) > failures
}

/// The wait after failed attempt number `attempt` (1-based): exponential,
/// capped, with "equal jitter" (half fixed, half drawn) so that jobs that
/// failed together do not retry together.
fn backoff(id: u64, attempt: u32) -> Duration {
    let exponential = FIRST_BACKOFF
        .saturating_mul(1 << (attempt - 1).min(16))
        .min(MAX_BACKOFF);
    let half = exponential / 2;
    let drawn = mix(id << 16 | u64::from(attempt)) % (half.as_micros() as u64 + 1);
    half + Duration::from_micros(drawn)
}

/// SplitMix64's finaliser: a cheap, well-spread hash for the script.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let timer = Timer::builder().build().expect("a runtime with timers");
    let start = timer.now();
    let counters = Arc::new(Counters::default());
    let (done, mut outcomes) = mpsc::unbounded_channel();
    let jobs: Vec<Arc<Job>> = (0..JOBS)
        .map(|id| Job::start(id, &timer, &counters, &done))
        .collect();
    drop(done);

    timer.sleep(USER_CANCELS_AT).await;
    let user_cancelled = jobs
        .iter()
        .step_by(CANCEL_EVERY)
        .filter(|job| job.cancel())
        .count();

    let mut tally = [0u64; 3];
    let all_ended = tokio::time::timeout(RUN_LIMIT, async {
        for _ in 0..JOBS {
            let outcome = outcomes.recv().await.expect("every job reports");
            tally[outcome as usize] += 1;
        }
    })
    .await;
    if all_ended.is_err() {
        eprintln!("callbacks: FAILED, jobs still running after {RUN_LIMIT:?}: {tally:?}");
        return ExitCode::FAILURE;
    }
    let elapsed = timer.now() - start;

    // A job may have ended while the timer was about to run one of its
    // callbacks (too late to cancel). Callbacks run one at a time in
    // deadline order, so one scheduled after them all runs after them all.
    let (ran, barrier) = oneshot::channel();
    timer.schedule(timer.tick(), move || {
        let _ = ran.send(());
    });
    barrier.await.expect("the timer runs the barrier");

    let stats = timer.stats();
    let unfired = timer.shutdown();
    let handed_back = unfired.callbacks.len() as u64;
    for eviction in unfired.callbacks {
        eviction.run();
    }

    let [succeeded, gave_up, cancelled] = tally;
    let load = |n: &AtomicU64| n.load(Ordering::Relaxed);
    let (retries, deadlines) = (load(&counters.retries), load(&counters.deadlines));
    let callbacks_run = retries + deadlines + 1;
    println!(
        "callbacks: {JOBS} jobs in {} ms: {succeeded} succeeded, {gave_up} gave up, \
         {cancelled} cancelled by the user; {callbacks_run} callbacks run ({retries} retries, \
         {deadlines} deadlines, 1 barrier), {} early; stats: fired {}, cancelled {}, pending {}; \
         shutdown handed back {handed_back} cache evictions, flushed",
        elapsed.as_millis(),
        load(&counters.early),
        stats.fired,
        stats.cancelled,
        stats.pending,
    );

    let mut wrong = Vec::new();
    if succeeded + gave_up + cancelled != JOBS {
        wrong.push(format!(
            "{} outcomes for {JOBS} jobs",
            tally.iter().sum::<u64>()
        ));
    }
    if cancelled != user_cancelled as u64 {
        wrong.push(format!(
            "{cancelled} cancelled, the user cancelled {user_cancelled}"
        ));
    }
    let early = load(&counters.early);
    if early > 0 {
        wrong.push(format!("{early} callbacks ran before their deadline"));
    }
    // The timer also fired the sleep that waited for the user.
    if stats.fired != callbacks_run + 1 {
        wrong.push(format!(
            "timer fired {}, expected {callbacks_run} + 1",
            stats.fired
        ));
    }
    if stats.cancelled != load(&counters.cancels) {
        wrong.push(format!(
            "timer cancelled {}, handles cancelled {}",
            stats.cancelled,
            load(&counters.cancels)
        ));
    }
    let evicted = load(&counters.evicted);
    if stats.pending as u64 != succeeded || handed_back != succeeded || evicted != succeeded {
        wrong.push(format!(
            "{succeeded} successes, but {} pending, {handed_back} handed back, {evicted} evicted",
            stats.pending
        ));
    }
    if wrong.is_empty() {
        ExitCode::SUCCESS
    } else {
        eprintln!("callbacks: FAILED: {}", wrong.join("; "));
        ExitCode::FAILURE
    }
}
