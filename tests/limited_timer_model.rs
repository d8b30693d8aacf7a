//! A manual timer with a `max_pending` limit against a model, on random
//! programs of sleeps (made, polled, reset, dropped), callbacks (scheduled,
//! cancelled) and advances: what is pending, what is refused, each
//! callback run exactly once unless a cancel stopped it, and the counters.

use std::time::Duration;

use proptest::prelude::*;
use tokio_test::task;
use wheel::Instant;

#[derive(Debug, Clone)]
enum TOp {
    TrySleep(u64),
    Poll(usize),
    Reset(usize, u64),
    Drop(usize),
    Schedule(u64),
    Cancel(usize),
    Advance(u64),
}

fn top() -> impl Strategy<Value = TOp> {
    let d = prop_oneof![0u64..3, 0u64..200, Just(1000u64)];
    prop_oneof![
        3 => d.clone().prop_map(TOp::TrySleep),
        2 => any::<usize>().prop_map(TOp::Poll),
        2 => (any::<usize>(), d.clone()).prop_map(|(i, d)| TOp::Reset(i, d)),
        1 => any::<usize>().prop_map(TOp::Drop),
        3 => d.clone().prop_map(TOp::Schedule),
        2 => any::<usize>().prop_map(TOp::Cancel),
        3 => d.prop_map(TOp::Advance),
    ]
}

/// A manual timer with a `max_pending` limit against a model: what is
/// pending (sleeps registered and not fired, callbacks not run or
/// cancelled), what is refused, each callback run exactly once unless a
/// cancel said it stopped it, and the counters.
fn run_timer_program(max: usize, ops: &[TOp]) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let timer = wheel::Timer::builder()
        .manual()
        .max_pending(max)
        .build()
        .unwrap();
    let ms = Duration::from_millis;
    // (sleep, deadline, completed by a poll, refused by a reset)
    let mut sleeps: Vec<(task::Spawn<wheel::Sleep>, Instant, bool, bool)> = Vec::new();
    // (handle, runs, cancelled)
    let mut callbacks: Vec<(wheel::TimerHandle, Arc<AtomicUsize>, bool)> = Vec::new();
    let mut cancels = 0u64;
    for (n, op) in ops.iter().enumerate() {
        let ctx = format!("op {n} ({op:?}) of {max}, {ops:?}");
        let now = timer.now();
        let pending_model = sleeps.iter().filter(|s| s.1 > now && !s.2 && !s.3).count()
            + callbacks
                .iter()
                .filter(|c| !c.2 && c.1.load(Ordering::SeqCst) == 0)
                .count();
        match *op {
            TOp::TrySleep(d) => match timer.try_sleep(ms(d)) {
                Ok(s) => sleeps.push((task::spawn(s), now + ms(d), false, false)),
                Err(e) => {
                    assert!(e.is_at_capacity(), "{ctx}: {e}");
                    assert!(
                        pending_model >= max,
                        "{ctx}: refused with {pending_model} pending"
                    );
                }
            },
            TOp::Poll(i) if !sleeps.is_empty() && !sleeps[i % sleeps.len()].3 => {
                let i = i % sleeps.len();
                let s = &mut sleeps[i];
                let r = s.0.poll();
                assert_eq!(r.is_ready(), s.1 <= now, "{ctx}");
                s.2 |= r.is_ready();
            }
            TOp::Reset(i, d) if !sleeps.is_empty() => {
                let i = i % sleeps.len();
                let s = &mut sleeps[i];
                let held = s.1 > now && !s.2 && !s.3;
                std::pin::Pin::new(&mut *s.0).reset(now + ms(d));
                s.1 = now + ms(d);
                s.2 = false;
                // Refused at capacity: its next poll says so.
                s.3 = d > 0 && !held && pending_model >= max;
            }
            TOp::Drop(i) if !sleeps.is_empty() => {
                let i = i % sleeps.len();
                drop(sleeps.remove(i));
            }
            TOp::Schedule(d) => {
                let runs = Arc::new(AtomicUsize::new(0));
                let r = runs.clone();
                match timer.try_schedule(ms(d), move || {
                    r.fetch_add(1, Ordering::SeqCst);
                }) {
                    Ok(h) => callbacks.push((h, runs, false)),
                    Err(e) => {
                        assert!(e.is_at_capacity(), "{ctx}: {e}");
                        assert!(
                            pending_model >= max,
                            "{ctx}: refused with {pending_model} pending"
                        );
                    }
                }
            }
            TOp::Cancel(i) if !callbacks.is_empty() => {
                let i = i % callbacks.len();
                let c = &mut callbacks[i];
                let ran = c.1.load(Ordering::SeqCst) > 0;
                let stopped = c.0.cancel();
                assert_eq!(stopped, !ran && !c.2, "{ctx}");
                if stopped {
                    cancels += 1;
                }
                c.2 |= stopped;
                assert_eq!(c.0.is_cancelled(), c.2, "{ctx}");
            }
            TOp::Advance(d) => timer.advance(ms(d)),
            _ => {}
        }
        let now = timer.now();
        for c in &callbacks {
            let runs = c.1.load(Ordering::SeqCst);
            let due = c.0.deadline() <= now;
            // One scheduled already due runs at the next pass, never on
            // the caller's stack.
            assert!(
                runs <= usize::from(due && !c.2),
                "callback runs after {ctx}"
            );
            if matches!(op, TOp::Advance(d) if *d > 0) {
                assert_eq!(runs, usize::from(due && !c.2), "callback runs after {ctx}");
            }
            assert_eq!(c.0.is_expired(), runs == 1, "is_expired after {ctx}");
        }
        let stats = timer.stats();
        // Sleeps registered (try_sleep registers at once; a reset
        // re-registers) and not yet due.
        let pending = sleeps.iter().filter(|s| s.1 > now && !s.3).count()
            + callbacks
                .iter()
                .filter(|c| !c.2 && c.1.load(Ordering::SeqCst) == 0)
                .count();
        assert_eq!(stats.pending, pending, "pending after {ctx}: {stats:?}");
        assert_eq!(
            stats.callbacks,
            callbacks
                .iter()
                .filter(|c| !c.2 && c.1.load(Ordering::SeqCst) == 0)
                .count(),
            "callbacks after {ctx}"
        );
        assert!(stats.pending <= max, "over the limit after {ctx}");
        assert!(
            stats.cancelled >= cancels,
            "cancelled after {ctx}: {stats:?}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2048, ..ProptestConfig::default() })]

    #[test]
    fn timer_programs_match_a_model(max in 1usize..5, ops in prop::collection::vec(top(), 1..40)) {
        run_timer_program(max, &ops);
    }
}
