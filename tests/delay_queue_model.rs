//! `DelayQueue` against a model: random inserts, resets and removes, into
//! the future and the past, compactions, and clock advances, against a list
//! of (deadline, id), checking the keys yielded and that keys of entries
//! gone stay stale. With the default tick (which divides 1 ms) and
//! whole-millisecond deadlines, an entry must come out exactly when the
//! clock reaches its deadline: never early, never late.

use std::future::poll_fn;
use std::task::Poll;
use std::time::Duration;

use proptest::prelude::*;
use tokio::time;
use tokio_test::task;
use tokio_test::{assert_pending, assert_ready};
use wheel::delay_queue::{DelayQueue, Expired, Key};
use wheel::{Instant, Timer};

mod common;
use common::{ms, paused_rt, poll_queue};

#[derive(Debug, Clone)]
enum Op {
    Insert {
        delay: u64,
        past: bool,
    },
    Reset {
        pick: usize,
        delay: u64,
        past: bool,
    },
    Remove {
        pick: usize,
    },
    Clear,
    Advance {
        by: u64,
    },
    /// `compact`: moves entries, and every key must still work.
    Compact,
}

fn delay() -> impl Strategy<Value = u64> {
    prop_oneof![3 => 0u64..5000, 2 => 0u64..70, 1 => Just(0)]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (delay(), prop::bool::weighted(0.15)).prop_map(|(delay, past)| Op::Insert { delay, past }),
        2 => (any::<usize>(), delay(), prop::bool::weighted(0.15))
            .prop_map(|(pick, delay, past)| Op::Reset { pick, delay, past }),
        2 => any::<usize>().prop_map(|pick| Op::Remove { pick }),
        1 => Just(Op::Clear),
        1 => Just(Op::Compact),
        4 => prop_oneof![0u64..3000, 0u64..70].prop_map(|by| Op::Advance { by }),
    ]
}

/// The model's entry: its id, key and deadline.
struct Live {
    id: u64,
    key: Key,
    deadline: Instant,
}

fn run_model(ops: Vec<Op>) {
    let rt = paused_rt();
    rt.block_on(async move {
        let mut queue = task::spawn(DelayQueue::new());
        let mut live: Vec<Live> = Vec::new();
        // Keys of entries yielded, removed or cleared: stale for good.
        let mut gone: Vec<Key> = Vec::new();
        let mut next_id = 0;
        // Whether the last poll left the task waiting (Pending, or Ready(None)).
        let mut waiting = false;
        for op in ops {
            let now = Instant::now();
            let at = |delay: u64, past: bool| {
                if past {
                    now.checked_sub(ms(delay)).unwrap_or(now)
                } else {
                    now + ms(delay)
                }
            };
            // Whether this op must wake a waiting task: it made an entry due,
            // or emptied the queue. (An insert or reset earlier than every
            // other entry may wake it too, or may leave that to the sleep
            // armed before it; either way `Advance` checks it wakes on time.)
            let must_wake = match op {
                Op::Insert { delay, past } => {
                    let deadline = at(delay, past);
                    let key = if past {
                        queue.insert_at(next_id, deadline)
                    } else {
                        queue.insert(next_id, ms(delay))
                    };
                    live.push(Live {
                        id: next_id,
                        key,
                        deadline,
                    });
                    next_id += 1;
                    deadline <= now
                }
                Op::Reset { pick, delay, past } => {
                    if live.is_empty() {
                        continue;
                    }
                    let i = pick % live.len();
                    let deadline = at(delay, past);
                    if past {
                        queue.reset_at(&live[i].key, deadline);
                    } else {
                        queue.reset(&live[i].key, ms(delay));
                    }
                    live[i].deadline = deadline;
                    deadline <= now
                }
                Op::Remove { pick } => {
                    if live.is_empty() {
                        continue;
                    }
                    let l = live.swap_remove(pick % live.len());
                    let removed = queue.remove(&l.key);
                    assert_eq!((removed.key(), removed.into_inner()), (l.key, l.id));
                    gone.push(l.key);
                    live.is_empty()
                }
                Op::Clear => {
                    let had = !live.is_empty();
                    queue.clear();
                    gone.extend(live.drain(..).map(|l| l.key));
                    had
                }
                Op::Compact => {
                    queue.compact();
                    assert_eq!(queue.capacity(), live.len(), "compacted");
                    false
                }
                Op::Advance { by } => {
                    time::advance(ms(by)).await;
                    let now = Instant::now();
                    live.iter().any(|l| l.deadline <= now)
                }
            };
            if waiting && must_wake {
                assert!(queue.is_woken(), "{op:?} did not wake the waiting task");
            }
            // Drain: exactly the entries due by now, in deadline order.
            let now = Instant::now();
            let mut got = Vec::new();
            let last = loop {
                match poll_queue(&mut queue) {
                    Poll::Ready(Some(e)) => {
                        assert!(e.deadline() <= now, "early: {e:?} at {now:?}");
                        got.push(e);
                    }
                    other => break other,
                }
            };
            waiting = true;
            assert_eq!(last.is_ready(), live.iter().all(|l| l.deadline <= now));
            for w in got.windows(2) {
                assert!(w[0].deadline() <= w[1].deadline(), "out of order");
            }
            let mut want: Vec<u64> = live
                .iter()
                .filter(|l| l.deadline <= now)
                .map(|l| l.id)
                .collect();
            let mut ids: Vec<u64> = got.iter().map(|e| *e.get_ref()).collect();
            want.sort();
            ids.sort();
            assert_eq!(ids, want, "after {op:?}: yielded vs due");
            for e in &got {
                let l = live.iter().find(|l| l.id == *e.get_ref()).unwrap();
                assert_eq!(e.key(), l.key, "yielded under another key");
                gone.push(l.key);
            }
            live.retain(|l| l.deadline > now);
            for key in gone.iter().rev().take(3) {
                assert!(queue.try_remove(key).is_none(), "{key:?} is stale");
            }
            assert_eq!(queue.len(), live.len());
            for l in &live {
                assert_eq!(queue.deadline(&l.key), l.deadline);
            }
            let first = live.iter().map(|l| l.deadline).min();
            assert_eq!(queue.peek().map(|k| queue.deadline(&k)), first);
            if let Some(peeked) = queue.peek() {
                assert!(
                    live.iter().any(|l| l.key == peeked),
                    "peek: a key not handed out"
                );
            }
        }
    });
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn model(ops in prop::collection::vec(op(), 1..120)) {
        run_model(ops);
    }
}

/// Capacity the user asked for is theirs until `shrink_to_fit`: the queue
/// does not give it back when it empties, as the driver's wheels do.
#[tokio::test(start_paused = true)]
async fn reserved_capacity_survives_the_queue_emptying() {
    let _guard = common::guard();
    let mut queue = DelayQueue::with_capacity(4096);
    let key = queue.insert(1, ms(1));
    queue.remove(&key);
    assert!(queue.capacity() >= 4096, "{}", queue.capacity());

    let mut queue = DelayQueue::new();
    queue.reserve(2000);
    let reserved = queue.capacity();
    queue.insert(1, ms(1));
    let expired = poll_fn(|cx| queue.poll_expired(cx)).await.unwrap();
    assert_eq!(expired.into_inner(), 1);
    assert_eq!(queue.capacity(), reserved);
    queue.shrink_to_fit();
    assert_eq!(queue.capacity(), 0);
}

/// A zero timeout, or a deadline already passed, is due at once even in
/// the middle of a tick, where rounding it up would hold it to the next.
#[tokio::test(start_paused = true)]
async fn a_passed_deadline_is_due_at_once_mid_tick() {
    let _guard = common::guard();
    let timer = Timer::builder().tick(ms(10)).build().unwrap();
    let mut queue = DelayQueue::with_timer(timer);
    let far = queue.insert("far", Duration::from_secs(60));
    time::advance(ms(3)).await;
    let mut poll = task::spawn(());

    queue.insert("zero", Duration::ZERO);
    let expired = assert_ready!(poll.enter(|cx, _| queue.poll_expired(cx))).unwrap();
    assert_eq!(expired.into_inner(), "zero");

    queue.insert_at("passed", Instant::now() - ms(1));
    let expired = assert_ready!(poll.enter(|cx, _| queue.poll_expired(cx))).unwrap();
    assert_eq!(expired.into_inner(), "passed");

    queue.reset_at(&far, Instant::now());
    let expired = assert_ready!(poll.enter(|cx, _| queue.poll_expired(cx))).unwrap();
    assert_eq!(expired.key(), far);

    let soon = queue.insert("soon", ms(1));
    assert_pending!(poll.enter(|cx, _| queue.poll_expired(cx)));
    time::advance(ms(1)).await;
    assert_pending!(
        poll.enter(|cx, _| queue.poll_expired(cx)),
        "a deadline not yet passed still rounds up to the tick"
    );
    time::advance(ms(6)).await;
    let expired = assert_ready!(poll.enter(|cx, _| queue.poll_expired(cx))).unwrap();
    assert_eq!(expired.key(), soon);
}

/// A queue whose timer's clock has passed the wheel's range (a 1 ns tick,
/// 600 years on): an entry clamped to the tick that never comes leaves the
/// task parked, as a plain `Sleep` would, rather than waking it on every
/// poll.
#[test]
fn a_queue_past_its_clocks_range_does_not_spin() {
    let _guard = common::guard();
    let timer = Timer::builder()
        .manual()
        .tick(Duration::from_nanos(1))
        .build()
        .unwrap();
    let mut queue = task::spawn(DelayQueue::with_timer(timer.clone()));
    timer.advance(Duration::from_secs(600 * 365 * 86_400));
    queue.insert("never", Duration::from_secs(1));
    for _ in 0..3 {
        assert_pending!(queue.enter(|cx, mut q| q.poll_expired(cx)));
        assert!(!queue.is_woken(), "the queue woke itself: a busy loop");
    }
}

#[tokio::test(start_paused = true)]
async fn remove_hands_back_the_entry_as_tokio_utils_does() {
    let _guard = common::guard();
    let mut queue = DelayQueue::new();
    let at = time::Instant::now() + ms(7);
    let key = queue.insert_at("conn", at);
    let removed: Expired<&str> = queue.remove(&key);
    assert_eq!((removed.key(), removed.deadline()), (key, at));
    assert_eq!(removed.into_inner(), "conn");
    let key = queue.insert("again", ms(1));
    let removed = queue.try_remove(&key).expect("pending");
    assert_eq!((removed.key(), *removed.get_ref()), (key, "again"));
    assert!(queue.try_remove(&key).is_none());
}

/// Found by review: `compact` did not move entries, so one left from the
/// top of a burst held the burst's room (tokio-util's `compact` shrinks to
/// `len`). The survivor's key still works, and new keys do not clash.
#[tokio::test(start_paused = true)]
async fn compact_after_a_burst_gives_the_room_back() {
    let _guard = common::guard();
    let mut queue = DelayQueue::new();
    let keys: Vec<Key> = (0..10_000)
        .map(|i| queue.insert(i, Duration::from_secs(60)))
        .collect();
    for key in &keys[..9_999] {
        queue.remove(key);
    }
    queue.compact();
    assert_eq!((queue.len(), queue.capacity()), (1, 1));
    let survivor = keys[9_999];
    assert_eq!(queue.peek(), Some(survivor));
    let newer = queue.insert(10_000, Duration::from_secs(30));
    assert_ne!(newer, survivor);
    queue.reset(&survivor, Duration::from_secs(10));
    assert_eq!(queue.peek(), Some(survivor));
    time::advance(Duration::from_secs(10)).await;
    let first = poll_fn(|cx| queue.poll_expired(cx)).await.unwrap();
    assert_eq!((first.key(), first.into_inner()), (survivor, 9_999));
    assert!(queue.try_remove(&survivor).is_none(), "stale once yielded");
    assert_eq!(queue.remove(&newer).into_inner(), 10_000);
}

/// A step of a program run on tokio-util's `DelayQueue` and on the wheel's,
/// each on a paused clock of its own (durations in microseconds).
#[derive(Debug, Clone)]
enum Step {
    /// `tokio::time::advance(d).await`, then the queue drained
    Advance(u64),
    /// `insert(id, d)`, then the queue drained
    Insert(u64),
}

/// tokio-util's queue or the wheel's, as a program uses it.
trait Queue: Unpin {
    fn new() -> Self;
    fn insert(&mut self, id: u32, timeout: Duration);
    fn poll_expired(&mut self, cx: &mut std::task::Context<'_>) -> Poll<Option<u32>>;
}

impl Queue for tokio_util::time::DelayQueue<u32> {
    fn new() -> Self {
        tokio_util::time::DelayQueue::new()
    }
    fn insert(&mut self, id: u32, timeout: Duration) {
        tokio_util::time::DelayQueue::insert(self, id, timeout);
    }
    fn poll_expired(&mut self, cx: &mut std::task::Context<'_>) -> Poll<Option<u32>> {
        tokio_util::time::DelayQueue::poll_expired(self, cx).map(|e| e.map(|e| e.into_inner()))
    }
}

impl Queue for DelayQueue<u32> {
    fn new() -> Self {
        DelayQueue::new()
    }
    fn insert(&mut self, id: u32, timeout: Duration) {
        DelayQueue::insert(self, id, timeout);
    }
    fn poll_expired(&mut self, cx: &mut std::task::Context<'_>) -> Poll<Option<u32>> {
        DelayQueue::poll_expired(self, cx).map(|e| e.map(Expired::into_inner))
    }
}

/// Runs `before` advances, makes the queue, runs `steps`, then awaits
/// every entry: each entry's id and the clock's reading when it came out,
/// in that order (ties broken by id: within one instant the two queues
/// order differently).
fn run_queue<Q: Queue>(before: &[u64], steps: &[Step]) -> Vec<(Duration, u32)> {
    paused_rt().block_on(async {
        let start = time::Instant::now();
        for &us in before {
            time::advance(Duration::from_micros(us)).await;
        }
        let mut queue = task::spawn(Q::new());
        let mut out = Vec::new();
        let drain = |queue: &mut task::Spawn<Q>, out: &mut Vec<(Duration, u32)>| {
            while let Poll::Ready(Some(id)) = queue.enter(|cx, mut q| q.poll_expired(cx)) {
                out.push((start.elapsed(), id));
            }
        };
        for (id, step) in steps.iter().enumerate() {
            match *step {
                Step::Advance(us) => time::advance(Duration::from_micros(us)).await,
                Step::Insert(us) => {
                    queue.enter(|_, mut q| q.insert(id as u32, Duration::from_micros(us)))
                }
            }
            drain(&mut queue, &mut out);
        }
        let mut queue = queue.into_inner();
        while let Some(id) = poll_fn(|cx| queue.poll_expired(cx)).await {
            out.push((start.elapsed(), id));
        }
        out.sort();
        out
    })
}

fn any_micros() -> impl Strategy<Value = u64> {
    prop_oneof![
        2 => 0u64..5_000,
        2 => (0u64..40).prop_map(|ms| ms * 1000),
        2 => 0u64..40_000,
        1 => Just(0u64),
    ]
}

fn queue_step() -> impl Strategy<Value = Step> {
    prop_oneof![
        1 => any_micros().prop_map(Step::Advance),
        2 => any_micros().prop_map(Step::Insert),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Every entry comes out at the instant tokio-util's does, the queue
    /// made before or after advances of any number of microseconds.
    #[test]
    fn entries_come_out_when_tokio_utils_do(
        before in prop::collection::vec(any_micros(), 0..3),
        steps in prop::collection::vec(queue_step(), 1..10),
    ) {
        let _guard = common::guard();
        prop_assert_eq!(
            run_queue::<DelayQueue<u32>>(&before, &steps),
            run_queue::<tokio_util::time::DelayQueue<u32>>(&before, &steps)
        );
    }
}

/// Issue 38's fourth scenario: off tokio's millisecond grid, tokio-util
/// rounds a deadline up twice, to the queue's millisecond and then to
/// tokio's, and the wheel's queue does too (it rounded once: 1.3 ms and
/// 36.854 ms).
#[test]
fn a_queue_made_off_the_grid_rounds_as_tokio_utils_does() {
    let _guard = common::guard();
    for (before, timeout, expected) in [(300, 700, 2_300), (1_854, 34_098, 37_854)] {
        let steps = [Step::Insert(timeout)];
        let expected = vec![(Duration::from_micros(expected), 0)];
        let tokio_util = run_queue::<tokio_util::time::DelayQueue<u32>>(&[before], &steps);
        assert_eq!(tokio_util, expected, "tokio-util");
        assert_eq!(run_queue::<DelayQueue<u32>>(&[before], &steps), expected);
    }
}
