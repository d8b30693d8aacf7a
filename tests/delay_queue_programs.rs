//! `DelayQueue` (and `Interval`) where the other tests do not look: a
//! queue fed by one task and awaited by another on tokio's auto-advancing
//! paused clock against tokio-util's, deadlines decades and centuries out,
//! queues on coarse runtime timers, what a dropped or emptied queue or
//! interval leaves for auto-advance, and a queue shared by producer tasks
//! on a multi-thread runtime.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;

use futures::StreamExt;
use proptest::prelude::*;
use tokio::time;
use tokio_test::task;
use wheel::Instant;

mod common;
use common::paused_unguarded;

fn us(n: u64) -> Duration {
    Duration::from_micros(n)
}

fn at(now: Instant, us: i64) -> Instant {
    if us >= 0 {
        now + Duration::from_micros(us as u64)
    } else {
        now - Duration::from_micros(us.unsigned_abs())
    }
}

/// Both sides of a long wait: a tick and an entry decades and centuries out
/// (past tokio's 30-year cap for durations, past the 292 years an entry's
/// deadline fits in) are due when tokio's clock reaches them, not before.
#[test]
fn ticks_and_entries_centuries_out_come_at_their_deadlines() {
    let _guard = common::guard();
    for years in [1, 29, 31, 100, 300, 1000] {
        let far = Duration::from_secs(86_400 * 365 * years);
        paused_unguarded().block_on(tokio::task::unconstrained(async {
            let mut w = task::spawn(wheel::interval(Duration::from_millis(10)));
            let mut t = task::spawn(time::interval(Duration::from_millis(10)));
            let mut q = task::spawn(wheel::DelayQueue::new());
            let target = Instant::now() + far;
            let key = q.insert_at(1, target);
            q.insert(2, Duration::from_secs(1));
            assert_eq!(q.deadline(&key), target);
            w.reset_at(target);
            t.reset_at(target);
            let steps = [
                Duration::ZERO,
                far - Duration::from_millis(1),
                Duration::from_millis(2),
            ];
            let wants: [&[u32]; 3] = [&[], &[2], &[1]];
            for (advance, want) in steps.into_iter().zip(wants) {
                time::advance(advance).await;
                let ctx = format!("{years} years, {:?} on", Instant::now() + far - target);
                assert_eq!(w.is_woken(), t.is_woken(), "{ctx}");
                for _ in 0..2 {
                    let got = w.enter(|cx, mut w| w.poll_tick(cx));
                    assert_eq!(got, t.enter(|cx, mut t| t.poll_tick(cx)), "{ctx}");
                }
                let mut out = Vec::new();
                while let Poll::Ready(Some(e)) = q.enter(|cx, mut q| q.poll_expired(cx)) {
                    out.push((e.deadline(), e.into_inner()));
                }
                let got: Vec<_> = out.iter().map(|e| e.1).collect();
                assert_eq!(got, want, "{ctx}");
                if got == [1] {
                    assert_eq!(out[0].0, target, "{ctx}");
                }
            }
        }));
    }
}

#[derive(Debug, Clone)]
enum QOp {
    Insert(u64),
    InsertAt(i64),
    Reset(usize, u64),
    ResetAt(usize, i64),
    Remove(usize),
    /// Drain what comes out for this long.
    Wait(u64),
}

fn micros() -> impl Strategy<Value = u64> {
    prop_oneof![
        3 => 0u64..5_000,
        2 => (0u64..70).prop_map(|ms| ms * 1000),
        2 => 0u64..300_000,
        1 => 0u64..100_000_000,
        1 => Just(0u64),
    ]
}

fn qop() -> impl Strategy<Value = QOp> {
    prop_oneof![
        4 => micros().prop_map(QOp::Insert),
        2 => (-20_000i64..200_000).prop_map(QOp::InsertAt),
        2 => (any::<usize>(), micros()).prop_map(|(p, d)| QOp::Reset(p, d)),
        2 => (any::<usize>(), -20_000i64..200_000).prop_map(|(p, d)| QOp::ResetAt(p, d)),
        2 => any::<usize>().prop_map(QOp::Remove),
        4 => micros().prop_map(QOp::Wait),
    ]
}

/// The program on a queue (tokio-util's or the wheel's, whose APIs match),
/// shared by two tasks: one runs the operations, waiting between them,
/// while the other awaits what comes out, so that an insert or reset must
/// wake it. Returns each value that came out, with when, sorted (within an
/// instant the two order differently). Removes and resets touch only
/// entries due over 2 ms later, so that they never race the consumer.
macro_rules! queue_program {
    ($queue:expr, $ops:expr) => {{
        let queue = Arc::new(Mutex::new($queue));
        let out = Arc::new(Mutex::new(Vec::new()));
        let start = Instant::now();
        let consumer = {
            let (queue, out) = (queue.clone(), out.clone());
            tokio::spawn(async move {
                let mut ended = false;
                loop {
                    let next = std::future::poll_fn(|cx| {
                        match queue.lock().unwrap().poll_expired(cx) {
                            // Empty: wait for an insert to wake us.
                            Poll::Ready(None) if !ended => Poll::Pending,
                            polled => polled.map(|e| e.map(|e| e.into_inner())),
                        }
                    });
                    match next.await {
                        Some(u32::MAX) => ended = true,
                        Some(id) => out.lock().unwrap().push((start.elapsed(), id)),
                        None => break,
                    }
                }
            })
        };
        let mut live: Vec<(u32, Instant, _)> = Vec::new();
        for (id, op) in $ops.iter().enumerate() {
            let (id, now) = (id as u32, Instant::now());
            live.retain(|(id, _, _)| !out.lock().unwrap().iter().any(|(_, x)| x == id));
            let movable: Vec<usize> = (0..live.len())
                .filter(|&i| live[i].1 > now + Duration::from_millis(2))
                .collect();
            let mut queue_ = queue.lock().unwrap();
            match *op {
                QOp::Wait(d) => {
                    drop(queue_);
                    time::sleep(us(d)).await;
                }
                QOp::Insert(d) => live.push((id, now + us(d), queue_.insert(id, us(d)))),
                QOp::InsertAt(d) => live.push((id, at(now, d), queue_.insert_at(id, at(now, d)))),
                QOp::Reset(p, d) if !movable.is_empty() => {
                    let entry = &mut live[movable[p % movable.len()]];
                    queue_.reset(&entry.2, us(d));
                    entry.1 = now + us(d);
                }
                QOp::ResetAt(p, d) if !movable.is_empty() => {
                    let entry = &mut live[movable[p % movable.len()]];
                    queue_.reset_at(&entry.2, at(now, d));
                    entry.1 = at(now, d);
                }
                QOp::Remove(p) if !movable.is_empty() => {
                    let (id, _, key) = live.remove(movable[p % movable.len()]);
                    assert_eq!(queue_.remove(&key).into_inner(), id);
                }
                _ => {}
            }
        }
        // The end: a last entry, which the consumer sees before `None`.
        queue.lock().unwrap().insert(u32::MAX, Duration::ZERO);
        consumer.await.unwrap();
        let mut out = out.lock().unwrap().clone();
        out.sort();
        out
    }};
}

fn run_queue_program(ops: &[QOp]) {
    let ours = paused_unguarded().block_on(async {
        time::advance(us(333)).await;
        queue_program!(wheel::DelayQueue::new(), ops)
    });
    let theirs = paused_unguarded().block_on(async {
        time::advance(us(333)).await;
        queue_program!(tokio_util::time::DelayQueue::new(), ops)
    });
    assert_eq!(ours, theirs, "{ops:?}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Fed by one task and awaited by another, on an auto-advancing paused
    /// clock off tokio's grid: every entry comes out when tokio-util's does.
    #[test]
    fn an_awaited_queue_yields_when_tokio_utils_does(ops in prop::collection::vec(qop(), 1..40)) {
        let _guard = common::guard();
        run_queue_program(&ops);
    }
}

/// A queue on a coarse runtime timer, fed while it is drained, on an
/// auto-advancing paused clock: never early, and at most the timer's tick
/// plus the alarm's 2 ms late.
fn run_coarse_queue(tick_us: u64, before: u64, items: &[(u64, u64)]) {
    paused_unguarded().block_on(async {
        time::advance(us(before)).await;
        let timer = wheel::Timer::builder().tick(us(tick_us)).build().unwrap();
        let mut queue = wheel::DelayQueue::with_timer(timer);
        let mut pending = Vec::new();
        let check = |e: wheel::delay_queue::Expired<(usize, Instant)>| {
            let ((id, deadline), now) = (e.into_inner(), Instant::now());
            assert!(now >= deadline, "{id} early");
            let late = now - deadline;
            assert!(
                late <= us(tick_us) + Duration::from_millis(2),
                "{id} {late:?} late"
            );
            id
        };
        for (id, &(gap, timeout)) in items.iter().enumerate() {
            queue.insert((id, Instant::now() + us(timeout)), us(timeout));
            pending.push(id);
            let wait = time::sleep(us(gap));
            tokio::pin!(wait);
            loop {
                tokio::select! {
                    biased;
                    Some(e) = queue.next() => {
                        let id = check(e);
                        pending.retain(|x| *x != id);
                    }
                    _ = &mut wait => break,
                }
            }
        }
        while let Some(e) = queue.next().await {
            let id = check(e);
            pending.retain(|x| *x != id);
        }
        assert!(pending.is_empty(), "lost: {pending:?}");
    });
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn a_queue_on_a_coarse_runtime_timer_is_never_early_nor_a_tick_late(
        tick_us in prop_oneof![Just(125u64), Just(300), Just(1_000), Just(1_500), Just(10_000), Just(64_000)],
        before in 0u64..3_000,
        items in prop::collection::vec((0u64..30_000, 0u64..200_000), 1..20),
    ) {
        let _guard = common::guard();
        run_coarse_queue(tick_us, before, &items);
    }
}

/// Awaits an event from a thread outside the runtime.
async fn outside_event() {
    let (send, receive) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        let _ = send.send(());
    });
    receive.await.unwrap();
}

type Scenario = fn() -> Pin<Box<dyn Future<Output = ()>>>;

/// An interval or queue dropped or emptied while it waited leaves no timer
/// for tokio's auto-advance to jump the clock to while the runtime idles
/// for an outside event. (Whether the runtime idles before the event comes
/// is real time's call: a missed jump can only make this pass.)
#[test]
fn a_dropped_or_emptied_interval_or_queue_leaves_nothing_for_auto_advance() {
    let _guard = common::guard();
    let scenarios: [(&str, Scenario); 7] = [
        ("a waiting interval dropped", || {
            Box::pin(async {
                let mut every = task::spawn(wheel::interval(Duration::from_secs(3600)));
                assert!(every.enter(|cx, mut w| w.poll_tick(cx)).is_ready());
                assert!(every.enter(|cx, mut w| w.poll_tick(cx)).is_pending());
                every.reset_after(Duration::from_secs(10));
            })
        }),
        ("a waiting interval of a coarse timer dropped", || {
            Box::pin(async {
                let timer = wheel::Timer::builder()
                    .tick(Duration::from_millis(10))
                    .build();
                let mut every = task::spawn(timer.unwrap().interval(Duration::from_secs(3600)));
                assert!(every.enter(|cx, mut w| w.poll_tick(cx)).is_ready());
                assert!(every.enter(|cx, mut w| w.poll_tick(cx)).is_pending());
            })
        }),
        ("a new queue emptied by remove", || {
            Box::pin(async {
                let mut queue = task::spawn(wheel::DelayQueue::new());
                let key = queue.insert(1, Duration::from_secs(3600));
                assert!(queue.enter(|cx, mut q| q.poll_expired(cx)).is_pending());
                queue.remove(&key);
            })
        }),
        ("a new queue emptied by yielding", || {
            Box::pin(async {
                let mut queue = wheel::DelayQueue::new();
                queue.insert(1, Duration::from_millis(10));
                queue.next().await.unwrap();
            })
        }),
        ("a queue of the default timer emptied by remove", || {
            Box::pin(async {
                let mut queue = task::spawn(wheel::DelayQueue::with_timer(wheel::Timer::current()));
                let key = queue.insert(1, Duration::from_secs(3600));
                assert!(queue.enter(|cx, mut q| q.poll_expired(cx)).is_pending());
                queue.remove(&key);
            })
        }),
        ("a waiting queue of the default timer dropped", || {
            Box::pin(async {
                let mut queue = task::spawn(wheel::DelayQueue::with_timer(wheel::Timer::current()));
                queue.insert(1, Duration::from_secs(3600));
                assert!(queue.enter(|cx, mut q| q.poll_expired(cx)).is_pending());
            })
        }),
        ("a queue of a coarse timer cleared", || {
            Box::pin(async {
                let timer = wheel::Timer::builder()
                    .tick(Duration::from_millis(10))
                    .build();
                let mut queue = task::spawn(wheel::DelayQueue::with_timer(timer.unwrap()));
                queue.insert(1, Duration::from_secs(3600));
                queue.insert(2, Duration::from_secs(7));
                assert!(queue.enter(|cx, mut q| q.poll_expired(cx)).is_pending());
                queue.clear();
            })
        }),
    ];
    for (name, scenario) in scenarios {
        paused_unguarded().block_on(async {
            scenario().await;
            let before = Instant::now();
            outside_event().await;
            assert_eq!(Instant::now(), before, "{name}: the clock moved");
        });
    }
}

/// One queue behind a mutex, fed (inserts and removes) by four tasks and
/// drained by a fifth on two workers, on real time: every entry not
/// removed comes out, none early, none twice, on either kind of queue.
#[test]
fn a_shared_queue_fed_by_tasks_loses_nothing() {
    let _guard = common::guard();
    for own_timer in [false, true] {
        let rt = common::multi_rt();
        rt.block_on(async move {
            type Queue = wheel::DelayQueue<(u32, Instant)>;
            let queue: Arc<Mutex<Queue>> = Arc::new(Mutex::new(match own_timer {
                false => wheel::DelayQueue::new(),
                true => wheel::DelayQueue::with_timer(wheel::Timer::current()),
            }));
            let expected = Arc::new(Mutex::new(std::collections::HashSet::new()));
            let producers: Vec<_> = (0..4u32)
                .map(|p| {
                    let (queue, expected) = (queue.clone(), expected.clone());
                    tokio::spawn(async move {
                        let mut seed = 12_345 + u64::from(p);
                        let mut random = move || {
                            seed = seed
                                .wrapping_mul(6_364_136_223_846_793_005)
                                .wrapping_add(1_442_695_040_888_963_407);
                            seed >> 33
                        };
                        let mut keys = Vec::new();
                        for i in 0..400 {
                            let (id, timeout) = (p * 1000 + i, us(random() % 20_000));
                            {
                                let mut queue = queue.lock().unwrap();
                                let key = queue.insert((id, Instant::now() + timeout), timeout);
                                expected.lock().unwrap().insert(id);
                                keys.push((id, key));
                                if random() % 4 == 0 {
                                    let (id, key) =
                                        keys.swap_remove(random() as usize % keys.len());
                                    if queue.try_remove(&key).is_some() {
                                        expected.lock().unwrap().remove(&id);
                                    }
                                }
                            }
                            match random() % 10 {
                                0 => time::sleep(us(random() % 3000)).await,
                                1..=3 => tokio::task::yield_now().await,
                                _ => {}
                            }
                        }
                    })
                })
                .collect();
            let consumer = tokio::spawn(async move {
                let mut any = false;
                loop {
                    let next = std::future::poll_fn(|cx| queue.lock().unwrap().poll_expired(cx));
                    match next.await.map(|e| e.into_inner()) {
                        Some((id, deadline)) => {
                            assert!(Instant::now() >= deadline, "{id} early");
                            assert!(expected.lock().unwrap().remove(&id), "{id} again");
                            any = true;
                        }
                        None if any && expected.lock().unwrap().is_empty() => break,
                        None => tokio::task::yield_now().await,
                    }
                }
            });
            for producer in producers {
                producer.await.unwrap();
            }
            let drained = time::timeout(Duration::from_secs(10), consumer).await;
            drained.expect("entries lost").unwrap();
        });
    }
}
