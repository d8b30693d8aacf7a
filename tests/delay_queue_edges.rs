//! `DelayQueue` edge cases found by review: a queue made before its
//! runtime, far deadlines and the memory they take.

use std::task::Poll;
use std::time::Duration;

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
            assert!(q.is_some() && s.is_some() && q <= s, "{i}: queue {q:?}, tokio {s:?}");
        }
    });
}
