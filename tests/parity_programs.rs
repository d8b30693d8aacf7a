//! Random programs run on the wheel and on tokio, on one paused clock,
//! their results compared exactly: tokio-util's
//! `DelayQueue` (every operation of the API, `peek` checked against what
//! comes out next and the drain through `Stream`; entries that come out in one
//! drain compared as sets, as within one instant the two order
//! differently; tokio-util's deadlines are rounded up to its millisecond,
//! the wheel's are as given), tokio's `Sleep` polled and reset by hand,
//! and tokio's `Interval` with sub-millisecond advances, every reset and
//! missed tick behaviour changed mid-stream.

use std::task::Poll;
use std::time::Duration;

use proptest::prelude::*;
use tokio::time;
use tokio_test::task;
use wheel::delay_queue::{DelayQueue, Key};
use wheel::Instant;

mod common;
use common::paused_rt;

#[derive(Debug, Clone)]
enum QOp {
    Insert(u64),
    /// Relative to now, in µs; negative is in the past.
    InsertAt(i64),
    Reset(usize, u64),
    ResetAt(usize, i64),
    Remove(usize),
    TryRemoveStale(usize),
    Deadline(usize),
    Clear,
    Compact,
    ShrinkToFit,
    Reserve(usize),
    Advance(u64),
    Drain,
}

fn micros() -> impl Strategy<Value = u64> {
    prop_oneof![
        2 => 0u64..5_000,
        2 => (0u64..70).prop_map(|ms| ms * 1000),
        2 => 0u64..300_000,
        1 => (0u64..20).prop_map(|s| s * 1_000_000),
        1 => 0u64..10_000_000_000,
        1 => prop_oneof![Just(63_000u64), Just(64_000), Just(65_000), Just(4_095_000), Just(4_096_000), Just(262_144_000)],
        1 => Just(0u64),
    ]
}

fn signed() -> impl Strategy<Value = i64> {
    prop_oneof![
        4 => micros().prop_map(|us| us as i64),
        1 => (0i64..50_000).prop_map(|us| -us),
    ]
}

fn qop() -> impl Strategy<Value = QOp> {
    prop_oneof![
        4 => micros().prop_map(QOp::Insert),
        2 => signed().prop_map(QOp::InsertAt),
        2 => (any::<usize>(), micros()).prop_map(|(p, d)| QOp::Reset(p, d)),
        2 => (any::<usize>(), signed()).prop_map(|(p, d)| QOp::ResetAt(p, d)),
        2 => any::<usize>().prop_map(QOp::Remove),
        1 => any::<usize>().prop_map(QOp::TryRemoveStale),
        1 => any::<usize>().prop_map(QOp::Deadline),
        1 => Just(QOp::Clear),
        1 => Just(QOp::Compact),
        1 => Just(QOp::ShrinkToFit),
        1 => (0usize..3000).prop_map(QOp::Reserve),
        4 => micros().prop_map(QOp::Advance),
        3 => Just(QOp::Drain),
    ]
}

fn at(now: Instant, us: i64) -> Instant {
    if us >= 0 {
        now + Duration::from_micros(us as u64)
    } else {
        now - Duration::from_micros(us.unsigned_abs())
    }
}

type Ours = task::Spawn<DelayQueue<u32>>;
type Theirs = task::Spawn<tokio_util::time::DelayQueue<u32>>;

/// Drains both queues; compares what came out, as sets, and the final
/// poll (`Pending` or `Ready(None)`).
fn drain(ours: &mut Ours, theirs: &mut Theirs, ctx: &str) -> Vec<u32> {
    let mut a = Vec::new();
    let end_a = loop {
        // `peek` names what comes out next, as tokio-util promises; the
        // `Stream` impl yields what `poll_expired` would.
        let peeked = ours.peek();
        match ours.poll_next() {
            Poll::Ready(Some(e)) => {
                assert_eq!(Some(e.key()), peeked, "peek at {ctx}");
                a.push((e.deadline(), *e.get_ref()))
            }
            other => break other.map(|_| ()),
        }
    };
    let mut b = Vec::new();
    let end_b = loop {
        match theirs.enter(|cx, mut q| q.poll_expired(cx)) {
            Poll::Ready(Some(e)) => b.push((e.deadline(), *e.get_ref())),
            other => break other.map(|_| ()),
        }
    };
    let now = Instant::now();
    for (d, id) in &a {
        assert!(*d <= now, "{id} early at {ctx}");
    }
    let mut ids_a: Vec<u32> = a.iter().map(|e| e.1).collect();
    let mut ids_b: Vec<u32> = b.iter().map(|e| e.1).collect();
    ids_a.sort();
    ids_b.sort();
    assert_eq!(ids_a, ids_b, "drained at {ctx}");
    assert_eq!(end_a, end_b, "end of drain at {ctx}");
    ids_a
}

fn drain_ours(q: &mut Ours) -> Vec<u32> {
    let mut out = Vec::new();
    while let Poll::Ready(Some(e)) = q.enter(|cx, mut q| q.poll_expired(cx)) {
        out.push(e.into_inner());
    }
    out
}

fn drain_theirs(q: &mut Theirs) -> Vec<u32> {
    let mut out = Vec::new();
    while let Poll::Ready(Some(e)) = q.enter(|cx, mut q| q.poll_expired(cx)) {
        out.push(e.into_inner());
    }
    out
}

fn run_queue_program(capacity: usize, ops: &[QOp]) {
    let rt = paused_rt();
    rt.block_on(tokio::task::unconstrained(async move {
        let mut ours: Ours = task::spawn(DelayQueue::with_capacity(capacity));
        let mut theirs: Theirs = task::spawn(tokio_util::time::DelayQueue::with_capacity(capacity));
        assert!(ours.capacity() >= capacity);
        // (id, our key, their key)
        let mut live: Vec<(u32, Key, tokio_util::time::delay_queue::Key)> = Vec::new();
        let mut gone: Vec<Key> = Vec::new();
        let mut next_id = 0u32;
        // Whether our task waits (its last poll was not `Ready(Some)`).
        let mut waiting = false;
        for (n, op) in ops.iter().enumerate() {
            let ctx = format!("op {n} ({op:?}) of {ops:?}");
            let now = Instant::now();
            match *op {
                QOp::Insert(us) => {
                    let d = Duration::from_micros(us);
                    let k = ours.insert(next_id, d);
                    let t = theirs.insert(next_id, d);
                    live.push((next_id, k, t));
                    next_id += 1;
                }
                QOp::InsertAt(us) => {
                    let d = at(now, us);
                    let k = ours.insert_at(next_id, d);
                    let t = theirs.insert_at(next_id, d);
                    live.push((next_id, k, t));
                    next_id += 1;
                }
                QOp::Reset(p, us) if !live.is_empty() => {
                    let (_, k, t) = live[p % live.len()];
                    let d = Duration::from_micros(us);
                    ours.reset(&k, d);
                    theirs.reset(&t, d);
                }
                QOp::ResetAt(p, us) if !live.is_empty() => {
                    let (_, k, t) = live[p % live.len()];
                    let d = at(now, us);
                    ours.reset_at(&k, d);
                    theirs.reset_at(&t, d);
                }
                QOp::Remove(p) if !live.is_empty() => {
                    let (id, k, t) = live.remove(p % live.len());
                    let a = ours.remove(&k);
                    let b = theirs.remove(&t);
                    // tokio-util's deadline is rounded up to its ms.
                    assert!(a.deadline() <= b.deadline(), "{ctx}");
                    assert_eq!((*a.get_ref(), a.key()), (*b.get_ref(), k), "{ctx}");
                    assert_eq!(*a.get_ref(), id);
                    gone.push(k);
                }
                QOp::TryRemoveStale(p) if !gone.is_empty() => {
                    let k = gone[p % gone.len()];
                    assert!(ours.try_remove(&k).is_none(), "{ctx}");
                }
                QOp::Deadline(p) if !live.is_empty() => {
                    let (_, k, t) = live[p % live.len()];
                    let (a, b) = (ours.deadline(&k), theirs.deadline(&t));
                    assert!(
                        a <= b && b - a < Duration::from_millis(1) || a < now,
                        "{ctx}: {a:?} {b:?}"
                    );
                }
                QOp::Clear => {
                    ours.clear();
                    theirs.clear();
                    gone.extend(live.drain(..).map(|(_, k, _)| k));
                }
                QOp::Compact => {
                    ours.compact();
                    theirs.compact();
                    assert_eq!(ours.capacity(), ours.len(), "{ctx}");
                }
                QOp::ShrinkToFit => {
                    ours.shrink_to_fit();
                    theirs.shrink_to_fit();
                }
                QOp::Reserve(n) => {
                    ours.reserve(n);
                    theirs.reserve(n);
                    assert!(ours.capacity() >= ours.len() + n, "{ctx}");
                }
                QOp::Advance(us) => time::advance(Duration::from_micros(us)).await,
                QOp::Drain => {
                    let out = drain(&mut ours, &mut theirs, &ctx);
                    for id in out {
                        let i = live.iter().position(|l| l.0 == id).expect("live");
                        gone.push(live.remove(i).1);
                    }
                    waiting = true;
                }
                _ => {}
            }
            assert_eq!(ours.len(), theirs.len(), "len after {ctx}");
            assert_eq!(ours.is_empty(), live.is_empty(), "is_empty after {ctx}");
            if live.len() == 1 {
                assert_eq!(ours.peek(), Some(live[0].1), "peek after {ctx}");
            }
            // No lost wake-up: a waiting task not woken finds nothing new.
            if waiting && !ours.is_woken() {
                let before = ours.len();
                let polled =
                    ours.enter(|cx, mut q| q.poll_expired(cx).map(|e| e.map(|e| *e.get_ref())));
                match polled {
                    Poll::Pending => {}
                    Poll::Ready(None) if before == 0 => {}
                    other => panic!("lost wake-up after {ctx}: a poll gave {other:?}"),
                }
            }
        }
        drain(&mut ours, &mut theirs, "the end");
        // Everything left comes out at the same instants: wait for the
        // first of either, then both must give the same.
        loop {
            let (a, b) = std::future::poll_fn(|cx| {
                let a = ours.enter(|_, mut q| q.poll_expired(cx).map(|e| e.map(|e| *e.get_ref())));
                let b =
                    theirs.enter(|_, mut q| q.poll_expired(cx).map(|e| e.map(|e| *e.get_ref())));
                if a.is_pending() && b.is_pending() {
                    Poll::Pending
                } else {
                    Poll::Ready((a, b))
                }
            })
            .await;
            if let (Poll::Ready(None), Poll::Ready(None)) = (a, b) {
                break;
            }
            let ctx = format!("the rest, at {:?}, of {ops:?}", Instant::now());
            let mut got = drain_ours(&mut ours);
            if let Poll::Ready(Some(id)) = a {
                got.push(id);
            }
            let mut want = drain_theirs(&mut theirs);
            if let Poll::Ready(Some(id)) = b {
                want.push(id);
            }
            got.sort();
            want.sort();
            assert_eq!(got, want, "{ctx}");
        }
    }));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

    #[test]
    fn delay_queue_programs_match_tokio_util(
        capacity in prop_oneof![Just(0usize), 0usize..2000],
        ops in prop::collection::vec(qop(), 1..60),
    ) {
        let _guard = common::guard();
        run_queue_program(capacity, &ops);
    }
}

#[derive(Debug, Clone)]
enum SOp {
    Advance(u64),
    Poll,
    /// Relative to now, in µs; negative is in the past.
    Reset(i64),
}

fn sop() -> impl Strategy<Value = SOp> {
    prop_oneof![
        3 => micros().prop_map(SOp::Advance),
        3 => Just(SOp::Poll),
        2 => signed().prop_map(SOp::Reset),
    ]
}

fn run_sleep_program(first: u64, ops: &[SOp]) {
    let rt = paused_rt();
    rt.block_on(tokio::task::unconstrained(async move {
        let mut ours = task::spawn(wheel::sleep(Duration::from_micros(first)));
        let mut theirs = task::spawn(Box::pin(time::sleep(Duration::from_micros(first))));
        // The last poll was ready, and a reset since: tokio's wakes the task
        // at the new deadline, the wheel's does not (see
        // `sleep_completed_then_reset_wakes_the_task_as_tokios_does`).
        let mut ready = false;
        let mut tainted = false;
        for (n, op) in ops.iter().enumerate() {
            let ctx = format!("op {n} ({op:?}) of {first}, {ops:?}");
            match *op {
                SOp::Advance(us) => time::advance(Duration::from_micros(us)).await,
                SOp::Poll => {
                    let a = ours.poll();
                    let b = theirs.poll();
                    assert_eq!(a, b, "poll at {ctx}");
                    ready = a.is_ready();
                    tainted = false;
                }
                SOp::Reset(us) => {
                    let d = at(Instant::now(), us);
                    std::pin::Pin::new(&mut *ours).reset(d);
                    theirs.as_mut().reset(d);
                    tainted |= ready;
                }
            }
            assert_eq!(ours.deadline(), theirs.deadline(), "deadline after {ctx}");
            assert_eq!(
                ours.is_elapsed(),
                theirs.is_elapsed(),
                "is_elapsed after {ctx}"
            );
            if !tainted {
                assert_eq!(ours.is_woken(), theirs.is_woken(), "is_woken after {ctx}");
            }
        }
    }));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

    #[test]
    fn sleep_programs_match_tokio(first in micros(), ops in prop::collection::vec(sop(), 1..30)) {
        let _guard = common::guard();
        run_sleep_program(first, &ops);
    }
}

#[derive(Debug, Clone)]
pub(crate) enum IOp {
    Advance(u64),
    Poll,
    Reset,
    ResetImmediately,
    ResetAfter(u64),
    ResetAt(i64),
    Behavior(usize),
}

fn iop() -> impl Strategy<Value = IOp> {
    prop_oneof![
        5 => micros().prop_map(IOp::Advance),
        5 => Just(IOp::Poll),
        1 => Just(IOp::Reset),
        1 => Just(IOp::ResetImmediately),
        1 => micros().prop_map(IOp::ResetAfter),
        1 => signed().prop_map(IOp::ResetAt),
        1 => (0..3usize).prop_map(IOp::Behavior),
    ]
}

fn run_interval_program(start: i64, period: u64, behavior: usize, ops: &[IOp]) {
    let ours_b = [
        wheel::MissedTickBehavior::Burst,
        wheel::MissedTickBehavior::Delay,
        wheel::MissedTickBehavior::Skip,
    ];
    let tokios = [
        time::MissedTickBehavior::Burst,
        time::MissedTickBehavior::Delay,
        time::MissedTickBehavior::Skip,
    ];
    let rt = paused_rt();
    rt.block_on(tokio::task::unconstrained(async move {
        let start = at(Instant::now(), start);
        let period = Duration::from_micros(period);
        let mut w = wheel::interval_at(start, period);
        w.set_missed_tick_behavior(ours_b[behavior]);
        let mut t = time::interval_at(start, period);
        t.set_missed_tick_behavior(tokios[behavior]);
        let (mut w, mut t) = (task::spawn(w), task::spawn(t));
        for (n, op) in ops.iter().enumerate() {
            let ctx = format!("op {n} ({op:?}) of {start:?} {period:?} {behavior} {ops:?}");
            match *op {
                IOp::Advance(us) => time::advance(Duration::from_micros(us)).await,
                IOp::Poll => {
                    for _ in 0..1000 {
                        let got = w.enter(|cx, mut w| w.poll_tick(cx));
                        let want = t.enter(|cx, mut t| t.poll_tick(cx));
                        assert_eq!(got, want, "{ctx}");
                        if got.is_pending() {
                            break;
                        }
                    }
                }
                IOp::Reset => {
                    w.reset();
                    t.reset();
                }
                IOp::ResetImmediately => {
                    w.reset_immediately();
                    t.reset_immediately();
                }
                IOp::ResetAfter(us) => {
                    w.reset_after(Duration::from_micros(us));
                    t.reset_after(Duration::from_micros(us));
                }
                IOp::ResetAt(us) => {
                    let d = at(Instant::now(), us);
                    w.reset_at(d);
                    t.reset_at(d);
                }
                IOp::Behavior(b) => {
                    w.set_missed_tick_behavior(ours_b[b]);
                    t.set_missed_tick_behavior(tokios[b]);
                }
            }
            assert_eq!(w.is_woken(), t.is_woken(), "woken after {ctx}");
        }
    }));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

    #[test]
    fn interval_programs_match_tokio(
        start in signed(),
        period in prop_oneof![1u64..5_000, (1u64..200).prop_map(|m| m * 1000), 1u64..10_000_000],
        behavior in 0..3usize,
        ops in prop::collection::vec(iop(), 1..30),
    ) {
        let _guard = common::guard();
        run_interval_program(start, period, behavior, &ops);
    }
}

/// `reset_immediately` (and `reset_at` a passed instant, `reset_after(0)`)
/// with tokio's paused clock between two of its milliseconds: tokio's
/// interval ticks at its next millisecond; the wheel's ticked at once (it
/// took the coarse-timer path, which completes a passed reset at once). So
/// does one on a timer whose tick is tokio's millisecond, no coarser.
#[test]
fn reset_immediately_mid_millisecond_ticks_when_tokios_does() {
    type Reset = fn(&mut wheel::Interval, &mut time::Interval, Instant);
    let resets: [Reset; 3] = [
        |w, t, _| {
            w.reset_immediately();
            t.reset_immediately();
        },
        |w, t, now| {
            w.reset_at(now - Duration::from_micros(300));
            t.reset_at(now - Duration::from_micros(300));
        },
        |w, t, _| {
            w.reset_after(Duration::ZERO);
            t.reset_after(Duration::ZERO);
        },
    ];
    for (reset, tick) in resets.into_iter().flat_map(|r| [(r, None), (r, Some(1))]) {
        let rt = paused_rt();
        rt.block_on(tokio::task::unconstrained(async {
            let start = Instant::now();
            let timer = tick.map(|ms| {
                let tick = Duration::from_millis(ms);
                wheel::Timer::builder().tick(tick).build().unwrap()
            });
            let period = Duration::from_millis(5);
            let mut w = task::spawn(match &timer {
                Some(timer) => timer.interval(period),
                None => wheel::interval(period),
            });
            let mut t = task::spawn(time::interval(Duration::from_millis(5)));
            assert_eq!(w.enter(|cx, mut w| w.poll_tick(cx)), Poll::Ready(start));
            assert_eq!(t.enter(|cx, mut t| t.poll_tick(cx)), Poll::Ready(start));
            assert!(w.enter(|cx, mut w| w.poll_tick(cx)).is_pending());
            assert!(t.enter(|cx, mut t| t.poll_tick(cx)).is_pending());
            time::advance(Duration::from_micros(400)).await;
            let now = Instant::now();
            reset(&mut w, &mut t, now);
            assert_eq!(w.is_woken(), t.is_woken(), "woken by the reset");
            assert_eq!(
                w.enter(|cx, mut w| w.poll_tick(cx)),
                t.enter(|cx, mut t| t.poll_tick(cx)),
                "polled at once"
            );
            time::advance(Duration::from_micros(600)).await;
            assert_eq!(
                w.is_woken(),
                t.is_woken(),
                "woken at tokio's next millisecond"
            );
            let a = w.enter(|cx, mut w| w.poll_tick(cx));
            let b = t.enter(|cx, mut t| t.poll_tick(cx));
            assert!(a.is_ready(), "the tick has come");
            assert_eq!(a, b);
        }));
    }
}
