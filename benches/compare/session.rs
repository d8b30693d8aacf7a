//! `delay_queue_session`, the `DelayQueue` group's other workload: 100,000
//! sessions on a paused clock, each resetting its key on a 1 s heartbeat it
//! misses at random, and expired (then reconnected under a new key) once
//! it misses two. The columns are `queue.rs`'s, as in `delay_queue.rs`.

use std::task::Poll;
use std::time::Duration;

use crate::delay_queue::{paused_runtime, per_op, Mark, PAUSED};
use crate::measure::{columns, Group, PerColumn, PerOp};
use crate::queue::QueueSide;
use crate::report::{label, Row};
use crate::support::Rng;
use crate::Config;

/// Sessions, and the heartbeat seconds timed.
const SESSIONS_N: usize = 100_000;
const SESSION_EPOCHS: usize = 10;

/// What one session run reports.
#[derive(Debug)]
struct SessionOut {
    per_beat: PerOp,
    expired: usize,
}

/// Heartbeats: every session beats once a second, at its own phase (one
/// of ten 100 ms steps).
const BEAT: Duration = Duration::from_secs(1);
const STEPS: usize = 10;
/// A session expires this long after its last beat: past two missed beats
/// (3 s), not one (2 s), and between two steps, so it expires at a step
/// whatever the queue's rounding.
const SESSION_TIMEOUT: Duration = Duration::from_millis(2550);
/// How often a session misses a beat, in percent.
const MISS_PERCENT: u64 = 10;

/// `delay_queue_session`: 100,000 sessions, each key reset on its heartbeat
/// unless it misses it (at random); those that miss two expire, and
/// reconnect under a new key. ns per heartbeat, everything included: the
/// resets, the expirations, the reinserts, and the clock stepping.
pub(crate) fn delay_queue_session(cfg: &Config) {
    let n = cfg.size.of(SESSIONS_N, 1000);
    let name = label("delay_queue_session", n, SESSIONS_N);
    let runs = columns!(cfg, cfg.heavy_runs, Group::Ct, |T| session_run::<T>(n));
    let beats = PerColumn(
        runs.0
            .each_ref()
            .map(|v| v.iter().map(|r| r.per_beat).collect()),
    );
    per_op(&format!("{name}: per heartbeat"), PAUSED, "ns/beat", &beats);
    Row::of(
        format!("{name}: expired"),
        PAUSED.to_owned(),
        "count, all runs",
        &runs,
        |v| v.iter().map(|r| r.expired as f64).sum(),
    )
    .without_ratio()
    .print();
}

fn session_run<T: QueueSide>(n: usize) -> SessionOut {
    let mut rng = Rng::new(0x5e55);
    let phases: Vec<Vec<u32>> = {
        let mut phases = vec![Vec::new(); STEPS];
        for i in 0..n {
            phases[rng.between(0, STEPS as u64 - 1) as usize].push(i as u32);
        }
        phases
    };
    paused_runtime().block_on(tokio::task::unconstrained(async {
        let timer = T::timer();
        let mut queue = T::queue(&timer);
        let keys: Vec<T::Key> = (0..n)
            .map(|i| T::insert(&mut queue, i as u64, SESSION_TIMEOUT))
            .collect();
        let mut sessions = Sessions::<T> {
            timer,
            queue,
            keys,
            phases,
            rng,
        };
        // One epoch to settle (every session's first beat), untimed.
        sessions.epoch().await;
        let (mut beats, mut expired) = (0, 0);
        let start = Mark::now();
        for _ in 0..SESSION_EPOCHS {
            let (b, e) = sessions.epoch().await;
            beats += b;
            expired += e;
        }
        let end = Mark::now();
        assert_eq!(
            T::len(&sessions.queue),
            n,
            "{}: sessions lost",
            T::COLUMN.name()
        );
        SessionOut {
            per_beat: start.per_op(&end, beats),
            expired,
        }
    }))
}

/// The state of a session run.
struct Sessions<T: QueueSide> {
    timer: T::Timer,
    queue: T::Queue,
    /// Each session's current key, by session.
    keys: Vec<T::Key>,
    /// The sessions that beat at each step of a second.
    phases: Vec<Vec<u32>>,
    rng: Rng,
}

impl<T: QueueSide> Sessions<T> {
    /// One second: at each step, that step's sessions beat, the clock moves
    /// on a step (the column's own sleep), and what expired is taken.
    /// Returns the beats and the expirations.
    async fn epoch(&mut self) -> (usize, usize) {
        let (mut beats, mut expired) = (0, 0);
        for step in 0..STEPS {
            beats += beat_loop::<T>(
                &mut self.queue,
                &self.keys,
                &self.phases[step],
                &mut self.rng,
            );
            T::sleep(&self.timer, BEAT / STEPS as u32).await;
            expired += expire_ready::<T>(&mut self.queue, &mut self.keys);
        }
        (beats, expired)
    }
}

/// The beats of one step's sessions: each resets its key unless it misses.
#[inline(never)]
fn beat_loop<T: QueueSide>(
    queue: &mut T::Queue,
    keys: &[T::Key],
    sessions: &[u32],
    rng: &mut Rng,
) -> usize {
    let mut beats = 0;
    for &s in sessions {
        if rng.between(0, 99) >= MISS_PERCENT {
            T::reset_entry(queue, &keys[s as usize], SESSION_TIMEOUT);
            beats += 1;
        }
    }
    beats
}

/// Takes what has expired without waiting; each expired session
/// reconnects under a new key.
#[inline(never)]
fn expire_ready<T: QueueSide>(queue: &mut T::Queue, keys: &mut [T::Key]) -> usize {
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    let mut expired = 0;
    while let Poll::Ready(Some((session, _))) = T::poll_expired(queue, &mut cx) {
        keys[session as usize] = T::insert(queue, session, SESSION_TIMEOUT);
        expired += 1;
    }
    expired
}
