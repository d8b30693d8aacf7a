//! A manual timer's `Timer::stats` against a model, exactly: random
//! programs of sleeps (made lazily or eagerly, polled, reset, dropped),
//! callbacks (scheduled, cancelled), advances and a shutdown.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;
use tokio_test::task;
use wheel::{Instant, Timer};

#[derive(Debug, Clone)]
enum Op {
    Sleep(u64),
    TrySleep(u64),
    Poll(usize),
    Reset(usize, u64),
    Drop(usize),
    Schedule(u64),
    Cancel(usize),
    Advance(u64),
    Shutdown,
    /// Registers 70 sleeps far off (kept, and droppable as any other): the
    /// sleeps made before are no longer among the last 64 registered, so
    /// their cancels are batched (`wheel/discard.rs`), not done at once.
    Crowd,
}

/// [`op`], with [`Op::Crowd`] now and then.
fn crowded_op() -> impl Strategy<Value = Op> {
    prop_oneof![10 => op(), 1 => Just(Op::Crowd)]
}

fn op() -> impl Strategy<Value = Op> {
    let d = prop_oneof![0u64..3, 0u64..50, Just(5000u64)];
    prop_oneof![
        2 => d.clone().prop_map(Op::Sleep),
        2 => d.clone().prop_map(Op::TrySleep),
        3 => any::<usize>().prop_map(Op::Poll),
        2 => (any::<usize>(), d.clone()).prop_map(|(i, d)| Op::Reset(i, d)),
        1 => any::<usize>().prop_map(Op::Drop),
        2 => d.clone().prop_map(Op::Schedule),
        2 => any::<usize>().prop_map(Op::Cancel),
        3 => d.prop_map(Op::Advance),
        1 => Just(Op::Shutdown),
    ]
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum S {
    /// Made, not registered.
    Idle,
    /// Registered, not fired.
    Pending,
    /// Fired, not yet polled: holds its entry.
    Fired,
    /// Completed (or, after a refused poll, nothing held).
    Done,
}

struct Model {
    fired: u64,
    cancelled: u64,
    shut_down: bool,
}

fn run(ops: &[Op]) {
    let timer: Timer = Timer::builder().manual().build().unwrap();
    let ms = Duration::from_millis;
    let mut sleeps: Vec<(task::Spawn<wheel::Sleep>, Instant, S)> = Vec::new();
    // (handle, runs, state: 0 pending, 1 ran, 2 cancelled)
    let mut callbacks: Vec<(wheel::TimerHandle, Arc<AtomicUsize>, u8)> = Vec::new();
    let mut m = Model {
        fired: 0,
        cancelled: 0,
        shut_down: false,
    };
    for (n, op) in ops.iter().enumerate() {
        let ctx = format!("op {n} ({op:?}) of {ops:?}");
        let now = timer.now();
        match *op {
            Op::Sleep(d) if !m.shut_down => {
                sleeps.push((task::spawn(timer.sleep(ms(d))), now + ms(d), S::Idle));
            }
            Op::TrySleep(d) if !m.shut_down => {
                let s = timer.try_sleep(ms(d)).unwrap();
                let state = if d == 0 { S::Done } else { S::Pending };
                sleeps.push((task::spawn(s), now + ms(d), state));
            }
            Op::Poll(i) if !sleeps.is_empty() && !m.shut_down => {
                let i = i % sleeps.len();
                let s = &mut sleeps[i];
                let r = s.0.poll();
                assert_eq!(r.is_ready(), s.1 <= now, "{ctx}");
                s.2 = if r.is_ready() { S::Done } else { S::Pending };
            }
            // After a shutdown, only the polls that complete (the others
            // panic, as `tests/shutdown.rs` shows).
            Op::Poll(i) if !sleeps.is_empty() => {
                let i = i % sleeps.len();
                let s = &mut sleeps[i];
                if s.2 == S::Fired || s.1 <= now {
                    assert!(s.0.poll().is_ready(), "{ctx}");
                    if s.2 == S::Pending {
                        // Due by the clock, though no pass fired it.
                        m.fired += 1;
                    }
                    s.2 = S::Done;
                }
            }
            Op::Reset(i, d) if !sleeps.is_empty() => {
                let i = i % sleeps.len();
                let s = &mut sleeps[i];
                std::pin::Pin::new(&mut *s.0).reset(now + ms(d));
                s.1 = now + ms(d);
                if d == 0 {
                    // Completes at once: no entry left.
                    m.fired += 1;
                    s.2 = S::Done;
                } else if m.shut_down && matches!(s.2, S::Idle | S::Done | S::Fired) {
                    // Refused: nothing registered (a fired entry is freed:
                    // nothing would fire it again).
                    s.2 = S::Idle;
                } else {
                    s.2 = S::Pending;
                }
            }
            Op::Drop(i) if !sleeps.is_empty() => {
                let i = i % sleeps.len();
                let s = sleeps.remove(i);
                if s.2 == S::Pending {
                    m.cancelled += 1;
                }
            }
            Op::Schedule(d) if !m.shut_down => {
                let runs = Arc::new(AtomicUsize::new(0));
                let r = runs.clone();
                let h = timer.schedule(ms(d), move || {
                    r.fetch_add(1, Ordering::SeqCst);
                });
                callbacks.push((h, runs, 0));
            }
            Op::Cancel(i) if !callbacks.is_empty() => {
                let i = i % callbacks.len();
                let c = &mut callbacks[i];
                let stopped = c.0.cancel();
                assert_eq!(stopped, c.2 == 0 && !m.shut_down, "{ctx}");
                if stopped {
                    m.cancelled += 1;
                    c.2 = 2;
                }
            }
            Op::Advance(d) if !m.shut_down => {
                timer.advance(ms(d));
                let now = timer.now();
                for s in &mut sleeps {
                    if s.2 == S::Pending && s.1 <= now {
                        s.2 = S::Fired;
                        m.fired += 1;
                    }
                }
                for c in &mut callbacks {
                    if c.2 == 0 && c.0.deadline() <= now && d > 0 {
                        c.2 = 1;
                        m.fired += 1;
                    }
                    assert_eq!(c.1.load(Ordering::SeqCst), usize::from(c.2 == 1), "{ctx}");
                }
            }
            Op::Advance(d) => timer.advance(ms(d)),
            Op::Crowd if !m.shut_down => {
                for _ in 0..70 {
                    let s = timer.try_sleep(ms(1_000_000)).unwrap();
                    sleeps.push((task::spawn(s), now + ms(1_000_000), S::Pending));
                }
            }
            Op::Shutdown if !m.shut_down => {
                let unfired = timer.shutdown();
                m.shut_down = true;
                let pending_cb = callbacks.iter().filter(|c| c.2 == 0).count();
                assert_eq!(unfired.callbacks.len(), pending_cb, "{ctx}");
                m.cancelled += pending_cb as u64;
                for c in &mut callbacks {
                    if c.2 == 0 {
                        c.2 = 2;
                    }
                }
                let pending_sleeps = sleeps.iter().filter(|s| s.2 == S::Pending).count();
                assert_eq!(unfired.sleeps, pending_sleeps, "{ctx}");
            }
            _ => {}
        }
        let stats = timer.stats();
        let pending_sleeps = sleeps.iter().filter(|s| s.2 == S::Pending).count();
        let fired_sleeps = sleeps.iter().filter(|s| s.2 == S::Fired).count();
        let pending_cb = callbacks.iter().filter(|c| c.2 == 0).count();
        assert_eq!(
            stats.pending,
            pending_sleeps + pending_cb,
            "pending after {ctx}: {stats:?}"
        );
        assert_eq!(
            stats.callbacks, pending_cb,
            "callbacks after {ctx}: {stats:?}"
        );
        assert_eq!(
            stats.entries,
            pending_sleeps + fired_sleeps + pending_cb,
            "entries after {ctx}: {stats:?}"
        );
        assert_eq!(stats.fired, m.fired, "fired after {ctx}: {stats:?}");
        assert_eq!(
            stats.cancelled, m.cancelled,
            "cancelled after {ctx}: {stats:?}"
        );
        assert_eq!(stats.panicked, 0, "{ctx}");
    }
    drop(sleeps);
    let stats = timer.stats();
    let pending_cb = callbacks.iter().filter(|c| c.2 == 0).count();
    assert_eq!(stats.entries, pending_cb, "{stats:?}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2048, ..ProptestConfig::default() })]

    #[test]
    fn stats_match_a_model(ops in prop::collection::vec(op(), 1..40)) {
        let _guard = common::guard();
        run(&ops);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// As above, with crowds, so that cancels are batched.
    #[test]
    fn stats_match_a_model_with_batched_cancels(ops in prop::collection::vec(crowded_op(), 1..60)) {
        let _guard = common::guard();
        run(&ops);
    }
}
