//! Random programs run on `tokio::time` and on `wheel` side by side, on
//! one paused clock, every poll, wake and `is_elapsed` compared: a
//! `timeout`/`timeout_at` of a channel or a tokio sleep, and several sleeps
//! and timeouts at once, made, reset and dropped at random
//! (`tests/parity_programs.rs` runs one sleep at a time).

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

mod common;

mod timeout_programs {
    use super::*;
    use proptest::prelude::*;
    use tokio::time;
    use tokio_test::task;

    #[derive(Debug, Clone)]
    enum Op {
        Advance(u64),
        Poll,
        Send,
        Yield,
    }

    fn micros() -> impl Strategy<Value = u64> {
        prop_oneof![
            2 => 0u64..3_000,
            2 => (0u64..20).prop_map(|ms| ms * 1000),
            1 => 0u64..100_000,
            1 => Just(0u64),
        ]
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => micros().prop_map(Op::Advance),
            3 => Just(Op::Poll),
            1 => Just(Op::Send),
            1 => Just(Op::Yield),
        ]
    }

    fn run(pre: u64, limit: u64, inner_sleep: Option<u64>, at: bool, ops: &[Op]) {
        let rt = common::paused_rt();
        rt.block_on(tokio::task::unconstrained(async move {
            time::advance(Duration::from_micros(pre)).await;
            let (tx1, rx1) = tokio::sync::oneshot::channel::<u8>();
            let (tx2, rx2) = tokio::sync::oneshot::channel::<u8>();
            let mut txs = Some((tx1, tx2));
            let limit = Duration::from_micros(limit);
            let now = time::Instant::now();
            let inner1: Pin<Box<dyn Future<Output = u8> + Send>> = match inner_sleep {
                Some(us) => Box::pin(async move { time::sleep(Duration::from_micros(us)).await; 9 }),
                None => Box::pin(async move { rx1.await.unwrap_or(0) }),
            };
            let inner2: Pin<Box<dyn Future<Output = u8> + Send>> = match inner_sleep {
                Some(us) => Box::pin(async move { time::sleep(Duration::from_micros(us)).await; 9 }),
                None => Box::pin(async move { rx2.await.unwrap_or(0) }),
            };
            let (mut ours, mut theirs) = if at {
                (task::spawn(wheel::timeout_at(now + limit, inner1)), task::spawn(Box::pin(time::timeout_at(now + limit, inner2))))
            } else {
                (task::spawn(wheel::timeout(limit, inner1)), task::spawn(Box::pin(time::timeout(limit, inner2))))
            };
            let mut done = false;
            for (n, op) in ops.iter().enumerate() {
                let ctx = format!("op {n} {op:?} of pre {pre} limit {limit:?} inner {inner_sleep:?} at {at} {ops:?}");
                match op {
                    Op::Advance(us) => time::advance(Duration::from_micros(*us)).await,
                    Op::Yield => tokio::task::yield_now().await,
                    Op::Send => {
                        if let Some((a, b)) = txs.take() {
                            let _ = a.send(1);
                            let _ = b.send(1);
                        }
                    }
                    Op::Poll => {
                        if done { continue; }
                        let a = ours.poll().map(|r| r.map_err(|_| ()));
                        let b = theirs.poll().map(|r| r.map_err(|_| ()));
                        assert_eq!(a, b, "poll at {ctx}");
                        done = a.is_ready();
                    }
                }
                if !done {
                    assert_eq!(ours.is_woken(), theirs.is_woken(), "woken at {ctx}");
                }
            }
        }));
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]
        #[test]
        fn timeout_programs_match_tokio(
            pre in micros(),
            limit in micros(),
            inner_sleep in prop::option::of(micros()),
            at in any::<bool>(),
            ops in prop::collection::vec(op(), 1..25),
        ) {
            run(pre, limit, inner_sleep, at, &ops);
        }
    }
}

mod multi_sleep_programs {
    use super::*;
    use proptest::prelude::*;
    use tokio::time;
    use tokio_test::task;
    use wheel::Instant;

    #[derive(Debug, Clone)]
    enum Op {
        Advance(u64),
        Poll(usize),
        Reset(usize, i64),
        New(usize, u64),
        Drop(usize),
        Timeout(usize, u64),
    }

    fn micros() -> impl Strategy<Value = u64> {
        prop_oneof![
            2 => 0u64..5_000,
            2 => (0u64..70).prop_map(|ms| ms * 1000),
            1 => 0u64..300_000,
            1 => (0u64..20).prop_map(|s| s * 1_000_000),
            1 => prop_oneof![Just(63_000u64), Just(64_000), Just(65_000), Just(4_095_000), Just(4_096_000)],
            1 => Just(0u64),
        ]
    }
    fn signed() -> impl Strategy<Value = i64> {
        prop_oneof![4 => micros().prop_map(|u| u as i64), 1 => (0i64..50_000).prop_map(|u| -u)]
    }
    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => micros().prop_map(Op::Advance),
            4 => (0..4usize).prop_map(Op::Poll),
            2 => (0..4usize, signed()).prop_map(|(i, u)| Op::Reset(i, u)),
            1 => (0..4usize, micros()).prop_map(|(i, u)| Op::New(i, u)),
            1 => (0..4usize).prop_map(Op::Drop),
            1 => (0..4usize, micros()).prop_map(|(i, u)| Op::Timeout(i, u)),
        ]
    }
    fn at(now: Instant, us: i64) -> Instant {
        if us >= 0 {
            now + us_(us as u64)
        } else {
            now - us_(us.unsigned_abs())
        }
    }
    fn us_(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    type Ours = task::Spawn<Pin<Box<dyn Future<Output = ()> + Send>>>;

    enum Slot {
        Empty,
        Sleep(
            task::Spawn<wheel::Sleep>,
            task::Spawn<Pin<Box<time::Sleep>>>,
            bool,
            bool,
        ),
        Timeout(Ours, Ours, bool),
    }

    fn run(ops: &[Op]) {
        let rt = common::paused_rt();
        rt.block_on(tokio::task::unconstrained(async move {
            let mut slots: Vec<Slot> = (0..4).map(|_| Slot::Empty).collect();
            for (n, op) in ops.iter().enumerate() {
                let ctx = format!("op {n} ({op:?}) of {ops:?}");
                match *op {
                    Op::Advance(u) => time::advance(us_(u)).await,
                    Op::New(i, u) => {
                        slots[i] = Slot::Sleep(
                            task::spawn(wheel::sleep(us_(u))),
                            task::spawn(Box::pin(time::sleep(us_(u)))),
                            false,
                            false,
                        )
                    }
                    Op::Timeout(i, u) => {
                        let a: Pin<Box<dyn Future<Output = ()> + Send>> = Box::pin(async move {
                            let _ = wheel::timeout(us_(u), std::future::pending::<()>()).await;
                        });
                        let b: Pin<Box<dyn Future<Output = ()> + Send>> = Box::pin(async move {
                            let _ = time::timeout(us_(u), std::future::pending::<()>()).await;
                        });
                        slots[i] = Slot::Timeout(task::spawn(a), task::spawn(b), false);
                    }
                    Op::Drop(i) => slots[i] = Slot::Empty,
                    Op::Poll(i) => match &mut slots[i] {
                        Slot::Empty => {}
                        Slot::Sleep(o, t, ready, tainted) => {
                            let a = o.poll();
                            let b = t.poll();
                            assert_eq!(a, b, "poll {i} at {ctx}");
                            *ready = a.is_ready();
                            *tainted = false;
                        }
                        Slot::Timeout(o, t, done) => {
                            if !*done {
                                let a = o.poll();
                                let b = t.poll();
                                assert_eq!(a, b, "poll {i} at {ctx}");
                                *done = a.is_ready();
                            }
                        }
                    },
                    Op::Reset(i, u) => {
                        if let Slot::Sleep(o, t, ready, tainted) = &mut slots[i] {
                            let d = at(Instant::now(), u);
                            Pin::new(&mut **o).reset(d);
                            t.as_mut().reset(d);
                            *tainted |= *ready;
                        }
                    }
                }
                for (i, slot) in slots.iter_mut().enumerate() {
                    match slot {
                        Slot::Empty => {}
                        Slot::Sleep(o, t, _, tainted) => {
                            assert_eq!(
                                o.is_elapsed(),
                                t.is_elapsed(),
                                "is_elapsed {i} after {ctx}"
                            );
                            if !*tainted {
                                assert_eq!(o.is_woken(), t.is_woken(), "is_woken {i} after {ctx}");
                            }
                        }
                        Slot::Timeout(o, t, done) => {
                            if !*done {
                                assert_eq!(
                                    o.is_woken(),
                                    t.is_woken(),
                                    "timeout is_woken {i} after {ctx}"
                                );
                            }
                        }
                    }
                }
            }
        }));
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]
        #[test]
        fn multi_sleep_programs_match_tokio(ops in prop::collection::vec(op(), 1..40)) {
            run(&ops);
        }
    }
}
