//! `DelayQueue`: a queue made before its runtime, and random programs on
//! queues `with_timer` (manual timers of any tick) against a model: every
//! method, deadlines into the past and centuries ahead, `Duration::MAX`,
//! clock jumps of centuries; never early, at most a tick late, `peek`
//! naming what comes out next, keys stale once their entry is gone, and
//! no lost wake-up.

use std::task::Poll;
use std::time::Duration;

use proptest::prelude::*;
use tokio::time;
use tokio_test::task;
use wheel::delay_queue::{DelayQueue, Key};
use wheel::Instant;

mod common;
use common::poll_queue;

/// A queue made by `new` before its runtime, on a running clock, binds
/// (builds the default timer) at its first insert: it must count tokio's
/// own milliseconds, from then, so each entry comes out no later than a
/// tokio `Sleep` until its deadline completes. Counted from its creation,
/// off tokio's grid, a deadline was rounded up twice, up to a millisecond
/// later, as with tokio-util's queue.
#[test]
fn a_new_queue_made_before_its_runtime_rounds_once_to_tokios_millisecond() {
    let _guard = common::guard();
    let mut queue = task::spawn(DelayQueue::new());
    // Off tokio's grid, which starts with the runtime.
    std::thread::sleep(Duration::from_micros(400));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        // Deadlines 5 µs apart over a millisecond: some in the part of
        // tokio's millisecond the queue's off-grid one ends before.
        let n = 200;
        let keys: Vec<Key> = (0..n)
            .map(|i| queue.insert(i, Duration::from_micros(5_000 + 5 * i as u64)))
            .collect();
        time::pause();
        let deadlines: Vec<Instant> = keys.iter().map(|key| queue.deadline(key)).collect();
        let mut sleeps: Vec<_> = deadlines
            .iter()
            .map(|&at| Box::pin(time::sleep_until(at)))
            .collect();
        let mut queue_step = vec![None; n];
        let mut sleep_step = vec![None; n];
        for step in 0..200 {
            time::advance(Duration::from_micros(50)).await;
            while let Poll::Ready(Some(expired)) = poll_queue(&mut queue) {
                assert!(expired.deadline() <= Instant::now(), "early");
                queue_step[*expired.get_ref()] = Some(step);
            }
            for (i, sleep) in sleeps.iter_mut().enumerate() {
                if sleep_step[i].is_none() && futures::poll!(sleep.as_mut()).is_ready() {
                    sleep_step[i] = Some(step);
                }
            }
        }
        for i in 0..n {
            let (q, s) = (queue_step[i], sleep_step[i]);
            assert!(
                q.is_some() && s.is_some() && q <= s,
                "{i}: queue {q:?}, tokio {s:?}"
            );
        }
    });
}

#[derive(Debug, Clone)]
enum Op {
    Insert(u64),
    /// Relative to now, in µs; negative is in the past.
    InsertAt(i64),
    /// Years ahead, or `u64::MAX` for `insert(Duration::MAX)`.
    InsertFar(u64),
    Reset(usize, u64),
    ResetAt(usize, i64),
    ResetFar(usize, u64),
    Remove(usize),
    Compact,
    ShrinkToFit,
    Clear,
    Advance(u64),
    /// Polls once.
    Poll,
    Drain,
}

const YEAR: u64 = 86_400 * 365;

fn micros() -> impl Strategy<Value = u64> {
    prop_oneof![
        2 => 0u64..50_000,
        1 => 0u64..5_000_000,
        1 => Just(0u64),
        1 => (0u64..100).prop_map(|ticks| ticks * 10_000),
    ]
}

fn signed() -> impl Strategy<Value = i64> {
    prop_oneof![
        3 => micros().prop_map(|us| us as i64),
        1 => (0i64..50_000).prop_map(|us| -us),
    ]
}

fn years() -> impl Strategy<Value = u64> {
    prop_oneof![Just(u64::MAX), 290u64..300, 1000u64..2000]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => micros().prop_map(Op::Insert),
        2 => signed().prop_map(Op::InsertAt),
        1 => years().prop_map(Op::InsertFar),
        2 => (any::<usize>(), micros()).prop_map(|(p, us)| Op::Reset(p, us)),
        2 => (any::<usize>(), signed()).prop_map(|(p, us)| Op::ResetAt(p, us)),
        1 => (any::<usize>(), years()).prop_map(|(p, y)| Op::ResetFar(p, y)),
        2 => any::<usize>().prop_map(Op::Remove),
        1 => Just(Op::Compact),
        1 => Just(Op::ShrinkToFit),
        1 => Just(Op::Clear),
        4 => micros().prop_map(Op::Advance),
        1 => (1u64..1200).prop_map(|y| y * YEAR * 1_000_000).prop_map(Op::Advance),
        1 => Just(Op::Poll),
        3 => Just(Op::Drain),
    ]
}

fn at(now: Instant, us: i64) -> Instant {
    if us >= 0 {
        now + Duration::from_micros(us as u64)
    } else {
        now - Duration::from_micros(us.unsigned_abs())
    }
}

/// One entry of the model: its value, key and deadline.
type Live = (u32, Key, Instant);

/// Polls once: what came out must be live, due, and what `peek` named.
fn poll_once(
    queue: &mut task::Spawn<DelayQueue<u32>>,
    live: &mut Vec<Live>,
    now: Instant,
    ctx: &str,
) -> Poll<Option<Key>> {
    let peeked = queue.peek();
    poll_queue(queue).map(|expired| {
        expired.map(|e| {
            assert_eq!(Some(e.key()), peeked, "peek: {ctx}");
            let i = live
                .iter()
                .position(|l| l.1 == e.key())
                .expect("a live key");
            assert_eq!(
                (live[i].0, live[i].2),
                (*e.get_ref(), e.deadline()),
                "{ctx}"
            );
            assert!(e.deadline() <= now, "early: {ctx}");
            live.remove(i).1
        })
    })
}

fn run_timer_program(tick_us: u64, ops: &[Op]) {
    let tick = Duration::from_micros(tick_us);
    let timer = common::manual_ticking(tick);
    let mut queue = task::spawn(DelayQueue::with_timer(timer.clone()));
    let mut live: Vec<Live> = Vec::new();
    let mut gone: Vec<Key> = Vec::new();
    let mut next = 0u32;
    // Whether the task waits: its last poll was not `Ready(Some)`.
    let mut waiting = false;
    for (n, op) in ops.iter().enumerate() {
        let ctx = format!("op {n} ({op:?}) of {tick_us} µs, {ops:?}");
        let now = timer.now();
        let far = |years: u64| now + Duration::from_secs(years * YEAR);
        match *op {
            Op::Insert(us) => {
                let key = queue.insert(next, Duration::from_micros(us));
                live.push((next, key, now + Duration::from_micros(us)));
                next += 1;
            }
            Op::InsertAt(us) => {
                let key = queue.insert_at(next, at(now, us));
                live.push((next, key, at(now, us)));
                next += 1;
            }
            Op::InsertFar(years) => {
                let key = match years {
                    u64::MAX => queue.insert(next, Duration::MAX),
                    _ => queue.insert_at(next, far(years)),
                };
                let deadline = queue.deadline(&key);
                assert!(deadline >= now + Duration::from_secs(29 * YEAR), "{ctx}");
                live.push((next, key, deadline));
                next += 1;
            }
            Op::Reset(p, us) if !live.is_empty() => {
                let i = p % live.len();
                queue.reset(&live[i].1, Duration::from_micros(us));
                live[i].2 = now + Duration::from_micros(us);
            }
            Op::ResetAt(p, us) if !live.is_empty() => {
                let i = p % live.len();
                queue.reset_at(&live[i].1, at(now, us));
                live[i].2 = at(now, us);
            }
            Op::ResetFar(p, years) if !live.is_empty() => {
                let i = p % live.len();
                match years {
                    u64::MAX => queue.reset(&live[i].1, Duration::MAX),
                    _ => queue.reset_at(&live[i].1, far(years)),
                }
                live[i].2 = queue.deadline(&live[i].1);
            }
            Op::Remove(p) if !live.is_empty() => {
                let (value, key, deadline) = live.remove(p % live.len());
                let e = queue.remove(&key);
                assert_eq!(
                    (e.key(), e.deadline(), e.into_inner()),
                    (key, deadline, value),
                    "{ctx}"
                );
                gone.push(key);
            }
            Op::Compact => {
                queue.compact();
                assert_eq!(queue.capacity(), live.len(), "{ctx}");
            }
            Op::ShrinkToFit => queue.shrink_to_fit(),
            Op::Clear => {
                queue.clear();
                gone.extend(live.drain(..).map(|l| l.1));
            }
            Op::Advance(us) => timer.advance(Duration::from_micros(us)),
            Op::Poll => {
                let polled = poll_once(&mut queue, &mut live, now, &ctx);
                waiting = !matches!(polled, Poll::Ready(Some(_)));
                if let Poll::Ready(Some(key)) = polled {
                    gone.push(key);
                }
            }
            Op::Drain => {
                loop {
                    match poll_once(&mut queue, &mut live, now, &ctx) {
                        Poll::Ready(Some(key)) => gone.push(key),
                        Poll::Ready(None) => {
                            assert!(live.is_empty(), "{ctx}");
                            break;
                        }
                        Poll::Pending => break,
                    }
                }
                // At most a tick late.
                for l in &live {
                    assert!(l.2 + tick > now, "{l:?} late at {now:?}: {ctx}");
                }
                waiting = true;
            }
            _ => {}
        }
        assert_eq!(queue.len(), live.len(), "{ctx}");
        for l in &live {
            assert_eq!(queue.deadline(&l.1), l.2, "{ctx}");
        }
        for key in gone.iter().rev().take(3) {
            assert!(queue.try_remove(key).is_none(), "{key:?} is stale: {ctx}");
        }
        // No lost wake-up: a waiting task not woken finds nothing new.
        if waiting && !queue.is_woken() {
            let polled = poll_once(&mut queue, &mut live, timer.now(), &ctx);
            assert!(
                polled.is_pending() || polled == Poll::Ready(None) && live.is_empty(),
                "lost wake-up: {polled:?} after {ctx}"
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

    #[test]
    fn with_timer_programs_match_the_model(
        tick in prop_oneof![Just(1u64), Just(125), Just(1000), Just(10_000), 1u64..30_000],
        ops in prop::collection::vec(op(), 1..60),
    ) {
        let _guard = common::guard();
        run_timer_program(tick, &ops);
    }
}
