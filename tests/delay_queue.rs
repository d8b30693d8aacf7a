//! `DelayQueue` under tokio's paused clock: one regression test per
//! tokio-util `DelayQueue` bug (named after it) and the queue's own
//! promises. The model test is in `delay_queue_model.rs`.

use std::future::poll_fn;
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;

use futures::StreamExt;
use tokio::time;
use tokio_test::task;
use tokio_test::{assert_pending, assert_ready, assert_ready_eq};
use wheel::delay_queue::{DelayQueue, Expired, Key};
use wheel::{Instant, Timer};

mod common;
use common::{drain_queue, ms, poll_queue};

// ---------------------------------------------------------------------------
// The tokio-util bugs.

/// tokio#4161: after removing the only entry, `poll_expired` returned
/// `Pending` (its delay still pointed at the removed entry) instead of the
/// documented `Ready(None)`.
#[tokio::test(start_paused = true)]
async fn tokio_4161_ready_none_once_the_last_entry_is_removed() {
    let _guard = common::guard();
    let mut queue = task::spawn(DelayQueue::new());
    let key = queue.insert(0, Duration::from_secs(10));
    assert_pending!(poll_queue(&mut queue));
    queue.remove(&key);
    assert!(assert_ready!(poll_queue(&mut queue)).is_none());
    // The same through the Stream impl, with entries removed in any order.
    let a = queue.insert(1, ms(5));
    let b = queue.insert(2, ms(7));
    assert_pending!(queue.poll_next());
    queue.remove(&b);
    queue.remove(&a);
    assert_ready_eq!(queue.poll_next().map(|e| e.map(Expired::into_inner)), None);
}

/// tokio#6751: removing the last entry did not wake the task waiting in
/// `poll_expired`, which then slept until the removed entry's deadline.
#[tokio::test(start_paused = true)]
async fn tokio_6751_removing_the_last_entry_wakes_the_waiting_task() {
    let _guard = common::guard();
    let mut queue = task::spawn(DelayQueue::new());
    let a = queue.insert("a", Duration::from_secs(100));
    let b = queue.insert("b", Duration::from_secs(200));
    assert_pending!(poll_queue(&mut queue));
    queue.remove(&a);
    // Not the last: the next poll would still be `Pending`.
    assert_pending!(poll_queue(&mut queue));
    assert_eq!(queue.try_remove(&b).map(Expired::into_inner), Some("b"));
    assert!(
        queue.is_woken(),
        "removing the last entry must wake the task"
    );
    assert!(assert_ready!(poll_queue(&mut queue)).is_none());
}

/// tokio#6751, the issue's own reproduction: one task awaits the queue
/// behind a mutex, another removes the entry; the first must finish long
/// before the entry's 100 s deadline.
#[tokio::test(start_paused = true)]
async fn tokio_6751_a_consumer_task_sees_the_removal() {
    let _guard = common::guard();
    let mut queue = DelayQueue::new();
    let key = queue.insert("foo", Duration::from_secs(100));
    let consumer = Arc::new(Mutex::new(queue));
    let remover = consumer.clone();
    let start = Instant::now();
    let waiting =
        tokio::spawn(async move { poll_fn(|cx| consumer.lock().unwrap().poll_expired(cx)).await });
    let removing = tokio::spawn(async move {
        time::sleep(ms(100)).await;
        remover.lock().unwrap().remove(&key);
    });
    let got = time::timeout(ms(500), waiting)
        .await
        .expect("the consumer was never woken")
        .unwrap();
    assert!(got.is_none());
    assert_eq!(start.elapsed(), ms(100));
    removing.await.unwrap();
}

/// tokio PR #8274: resetting an entry to a deadline already passed did not
/// wake the waiting task (the entry moved to the expired list, the sleep
/// stayed armed for the old deadline).
#[tokio::test(start_paused = true)]
async fn tokio_8274_reset_into_the_past_wakes_and_is_ready_at_once() {
    let _guard = common::guard();
    let mut queue = task::spawn(DelayQueue::new());
    let key = queue.insert("late", Duration::from_secs(60));
    let other = queue.insert("other", Duration::from_secs(30));
    assert_pending!(poll_queue(&mut queue));
    time::advance(ms(5)).await;
    assert!(!queue.is_woken());

    queue.reset_at(&key, Instant::now() - ms(3));
    assert!(queue.is_woken(), "a reset into the past must wake the task");
    let expired = assert_ready!(poll_queue(&mut queue)).unwrap();
    assert_eq!((expired.key(), *expired.get_ref()), (key, "late"));
    assert_pending!(poll_queue(&mut queue));

    // A zero timeout is "now", and an insert into the past is the same case.
    queue.reset(&other, Duration::ZERO);
    assert!(queue.is_woken());
    assert_eq!(drain_queue(&mut queue), vec!["other"]);
    queue.insert("keep", Duration::from_secs(9));
    assert_pending!(poll_queue(&mut queue));
    queue.insert_at("past", Instant::now() - Duration::from_secs(1));
    assert!(queue.is_woken());
    assert_eq!(drain_queue(&mut queue), vec!["past"]);
}

/// tokio#5536: tokio-util's wheel had six levels (2^36 ms); once the queue
/// was that old, inserting panicked with an index out of bounds (and, after
/// a first fix, with "invalid deadline"). Here the wheel covers every `u64`
/// tick, so age is irrelevant; the entries still expire exactly on time.
#[tokio::test(start_paused = true)]
async fn tokio_5536_a_queue_older_than_2_pow_36_ms_does_not_panic() {
    let _guard = common::guard();
    // The reproduction, with the queue's clock started at once.
    let mut queue = DelayQueue::new();
    let first = queue.insert(0, Duration::ZERO);
    queue.remove(&first);
    for _ in 0..2 {
        time::advance(ms(1 << 35)).await;
        queue.insert(0, Duration::ZERO);
        assert_eq!(queue.next().await.map(Expired::into_inner), Some(0));
    }
    let start = Instant::now();
    queue.insert(1, ms(1));
    // The follow-up report's panic: insert_at 10 s ahead of a 2^36 ms queue.
    queue.insert_at(2, Instant::now() + Duration::from_secs(10));
    // And much older still, with the longest delays there are.
    queue.insert(3, Duration::MAX);
    assert_eq!(queue.next().await.map(Expired::into_inner), Some(1));
    assert_eq!(start.elapsed(), ms(1));
    assert_eq!(queue.next().await.map(Expired::into_inner), Some(2));
    assert_eq!(start.elapsed(), Duration::from_secs(10));

    time::advance(ms(1 << 37)).await;
    let key = queue.insert(4, ms(3));
    let mut queue = task::spawn(queue);
    assert_pending!(poll_queue(&mut queue));
    time::advance(ms(2)).await;
    assert_pending!(poll_queue(&mut queue));
    time::advance(ms(1)).await;
    assert!(queue.is_woken());
    let expired = assert_ready!(poll_queue(&mut queue)).unwrap();
    assert_eq!(expired.key(), key);
    assert_pending!(
        poll_queue(&mut queue),
        "the Duration::MAX entry is 30 years away"
    );
}

/// tokio PR #8320: `clear` did not wake the waiting task, which then never
/// saw `Ready(None)`.
#[tokio::test(start_paused = true)]
async fn tokio_8320_clear_wakes_the_waiting_task() {
    let _guard = common::guard();
    let mut queue = task::spawn(DelayQueue::new());
    queue.insert(1, Duration::from_secs(10));
    assert_pending!(poll_queue(&mut queue));
    queue.clear();
    assert!(queue.is_woken());
    assert!(assert_ready!(poll_queue(&mut queue)).is_none());
}

/// tokio#1700 and tokio#849: an insert (or a reset) earlier than the
/// deadline the queue was sleeping for was only yielded at that later
/// deadline.
#[tokio::test(start_paused = true)]
async fn tokio_1700_and_849_an_earlier_deadline_wakes_at_its_time() {
    let _guard = common::guard();
    let mut queue = task::spawn(DelayQueue::new());
    queue.insert(5, Duration::from_secs(5));
    assert_pending!(poll_queue(&mut queue));
    queue.insert(1, Duration::from_secs(1));
    assert!(
        queue.is_woken(),
        "an earlier insert must wake the task to re-arm"
    );
    assert_pending!(poll_queue(&mut queue));
    time::advance(Duration::from_secs(1)).await;
    assert!(queue.is_woken());
    assert_eq!(drain_queue(&mut queue), vec![1]);

    let key = queue.insert(200, ms(200));
    assert_pending!(poll_queue(&mut queue));
    time::advance(ms(1)).await;
    queue.reset_at(&key, Instant::now() + ms(4));
    assert!(queue.is_woken());
    assert_pending!(poll_queue(&mut queue));
    time::advance(ms(3)).await;
    assert!(!queue.is_woken(), "never early");
    time::advance(ms(1)).await;
    assert!(queue.is_woken());
    assert_eq!(drain_queue(&mut queue), vec![200]);
}

// ---------------------------------------------------------------------------
// The queue's own promises.

#[tokio::test(start_paused = true)]
async fn entries_come_out_in_deadline_order_exactly_on_time() {
    let _guard = common::guard();
    let mut queue = task::spawn(DelayQueue::new());
    for d in [30u64, 10, 20, 10, 1000, 7_000] {
        queue.insert(d, ms(d));
    }
    let start = Instant::now();
    let mut got = Vec::new();
    while got.len() < 6 {
        match poll_queue(&mut queue) {
            Poll::Ready(Some(e)) => {
                assert!(e.deadline() <= Instant::now(), "early: {e:?}");
                assert_eq!(start.elapsed(), ms(*e.get_ref()), "late or early");
                got.push(e.into_inner());
            }
            Poll::Ready(None) => panic!("ended early"),
            Poll::Pending => {
                time::advance(ms(1)).await;
            }
        }
    }
    assert_eq!(got, vec![10, 10, 20, 30, 1000, 7_000]);
    assert!(assert_ready!(poll_queue(&mut queue)).is_none());
}

/// Within one tick entries come out as `peek` names them, not by deadline
/// (the `Stream` impl's docs said "in deadline order").
#[test]
fn entries_due_in_one_tick_come_out_as_peek_names_them_not_by_deadline() {
    let timer = Timer::builder().manual().tick(ms(1)).build().unwrap();
    let mut queue = task::spawn(DelayQueue::with_timer(timer.clone()));
    let start = timer.now();
    queue.insert_at("late", start + Duration::from_micros(900));
    queue.insert_at("early", start + Duration::from_micros(100));
    timer.advance(ms(1));
    let mut got = Vec::new();
    while let Some(next) = queue.peek() {
        let expired = assert_ready!(poll_queue(&mut queue)).unwrap();
        assert_eq!(expired.key(), next);
        got.push(expired.into_inner());
    }
    assert_eq!(got, ["late", "early"]);
}

/// The queue's ticks are its timer's: a queue made 3 ms after a 10 ms-tick
/// timer rounds a 15 ms delay (due at 18 ms) up to the timer's 20 ms tick,
/// once; rounding on the queue's own grid and then the timer's would give
/// 30 ms.
#[tokio::test(start_paused = true)]
async fn a_coarse_timer_rounds_up_once_never_down() {
    let _guard = common::guard();
    let timer = Timer::builder().tick(ms(10)).build().unwrap();
    let start = Instant::now();
    time::advance(ms(3)).await;
    let mut queue = task::spawn(DelayQueue::with_timer(timer));
    queue.insert("a", ms(15));
    assert_pending!(poll_queue(&mut queue));
    time::advance(ms(15)).await;
    assert_eq!(start.elapsed(), ms(18));
    assert!(!queue.is_woken());
    assert_pending!(
        poll_queue(&mut queue),
        "due at 18 ms, but the tick is 20 ms"
    );
    time::advance(ms(2)).await;
    assert!(queue.is_woken());
    assert_eq!(drain_queue(&mut queue), vec!["a"]);
}

#[tokio::test(start_paused = true)]
async fn a_later_reset_is_not_yielded_at_the_old_deadline() {
    let _guard = common::guard();
    let mut queue = task::spawn(DelayQueue::new());
    let key = queue.insert("conn", ms(300));
    assert_pending!(poll_queue(&mut queue));
    for _ in 0..5 {
        time::advance(ms(200)).await;
        queue.reset(&key, ms(300)); // a heartbeat
        assert_pending!(poll_queue(&mut queue));
    }
    time::advance(ms(299)).await;
    assert_pending!(poll_queue(&mut queue));
    time::advance(ms(1)).await;
    assert!(queue.is_woken());
    assert_eq!(drain_queue(&mut queue), vec!["conn"]);
}

#[tokio::test(start_paused = true)]
async fn an_empty_queue_is_ready_none_and_an_insert_wakes_it() {
    let _guard = common::guard();
    let mut queue = task::spawn(DelayQueue::<u8>::new());
    assert!(assert_ready!(poll_queue(&mut queue)).is_none());
    assert!(assert_ready!(queue.poll_next()).is_none());
    queue.insert(1, ms(10));
    assert!(
        queue.is_woken(),
        "an insert into an empty queue wakes its task"
    );
    assert_pending!(poll_queue(&mut queue));
    time::advance(ms(10)).await;
    assert!(queue.is_woken());
    assert_eq!(drain_queue(&mut queue), vec![1]);
}

#[tokio::test(start_paused = true)]
async fn stale_keys_never_touch_another_entry() {
    let _guard = common::guard();
    let mut queue = task::spawn(DelayQueue::new());
    let a = queue.insert("a", ms(5));
    assert_eq!(queue.remove(&a).into_inner(), "a");
    let b = queue.insert("b", ms(5));
    assert_ne!(a, b, "the slot is reused under a new generation");
    assert!(queue.try_remove(&a).is_none());
    assert_eq!(queue.deadline(&b) - Instant::now(), ms(5));
    time::advance(ms(5)).await;
    let expired = assert_ready!(poll_queue(&mut queue)).unwrap();
    assert_eq!(expired.key(), b);
    assert!(queue.try_remove(&b).is_none(), "yielded: stale");
    let c = queue.insert("c", ms(1));
    queue.clear();
    assert!(queue.try_remove(&c).is_none(), "cleared: stale");
    assert!(queue.is_empty());
}

#[tokio::test(start_paused = true)]
#[should_panic(expected = "DelayQueue::remove with a stale key")]
async fn remove_with_a_stale_key_panics() {
    let _guard = common::guard();
    let mut queue = DelayQueue::new();
    let key = queue.insert((), ms(1));
    queue.remove(&key);
    queue.remove(&key);
}

#[tokio::test(start_paused = true)]
#[should_panic(expected = "DelayQueue::reset with a stale key")]
async fn reset_with_a_stale_key_panics() {
    let _guard = common::guard();
    let mut queue = DelayQueue::new();
    let key = queue.insert((), ms(1));
    queue.remove(&key);
    queue.insert((), ms(1)); // reuses the slot
    queue.reset(&key, ms(5));
}

#[tokio::test(start_paused = true)]
#[should_panic(expected = "DelayQueue::deadline with a stale key")]
async fn deadline_with_a_stale_key_panics() {
    let _guard = common::guard();
    let mut queue = DelayQueue::new();
    let key = queue.insert((), ms(1));
    queue.clear();
    queue.deadline(&key);
}

#[test]
#[should_panic(
    expected = "there is no runtime here: use the queue inside a runtime, \
                           or make it with DelayQueue::with_timer"
)]
fn a_queue_outside_a_runtime_is_empty_but_cannot_insert() {
    let mut queue = DelayQueue::new();
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    assert!(matches!(queue.poll_expired(&mut cx), Poll::Ready(None)));
    queue.insert((), ms(1));
}

#[tokio::test(start_paused = true)]
async fn an_empty_or_dropped_queue_holds_no_timer_entry() {
    let _guard = common::guard();
    let timer = Timer::builder().build().unwrap();
    let mut queue = task::spawn(DelayQueue::with_timer(timer.clone()));
    let keys: Vec<Key> = (0..100).map(|i| queue.insert(i, ms(1 + i))).collect();
    assert_pending!(poll_queue(&mut queue));
    assert_eq!(timer.stats().pending, 1, "one sleep for the whole queue");
    for key in &keys {
        queue.remove(key);
    }
    assert_eq!(timer.stats().pending, 0);
    queue.insert(0, ms(1));
    assert_pending!(poll_queue(&mut queue));
    assert_eq!(timer.stats().pending, 1);
    drop(queue);
    assert_eq!(timer.stats().pending, 0);
}

/// A queue emptied by yielding its last entry frees its timer entry too,
/// even one its sleep was moved back to, for a tick tokio has not yet
/// processed (here a zero timeout after an `advance` of a fraction of a
/// millisecond, due at once as the queue has reached its millisecond).
#[tokio::test(start_paused = true)]
async fn a_queue_emptied_by_yielding_holds_no_timer_entry() {
    let _guard = common::guard();
    tokio::time::advance(Duration::from_micros(300)).await;
    let mut queue = task::spawn(DelayQueue::new());
    let later = queue.insert("later", ms(10));
    assert_pending!(poll_queue(&mut queue));
    queue.insert("now", Duration::ZERO);
    queue.remove(&later);
    let expired = assert_ready!(poll_queue(&mut queue)).unwrap();
    assert_eq!(expired.into_inner(), "now");
    assert_eq!(Timer::current().stats().pending, 0);
}

#[tokio::test(start_paused = true)]
async fn peek_deadline_and_expired_accessors() {
    let _guard = common::guard();
    let mut queue = DelayQueue::new();
    assert_eq!(queue.peek(), None);
    let at = Instant::now() + Duration::from_micros(2500);
    let late = queue.insert(String::from("late"), ms(80));
    let soon = queue.insert_at(String::from("soon"), at);
    assert_eq!(queue.peek(), Some(soon));
    assert_eq!(queue.deadline(&soon), at);
    assert_eq!(queue.len(), 2);
    let mut first = queue.next().await.unwrap();
    assert!(Instant::now() >= at);
    assert_eq!((first.key(), first.deadline()), (soon, at));
    first.get_mut().push('!');
    assert_eq!(first.into_inner(), "soon!");
    assert_eq!(queue.peek(), Some(late));
    let rest: Vec<String> = queue.by_ref().map(Expired::into_inner).collect().await;
    assert_eq!(rest, vec!["late"]);
}

#[tokio::test(start_paused = true)]
async fn capacity_reserve_and_shrink() {
    let _guard = common::guard();
    let mut queue = DelayQueue::with_capacity(1000);
    assert!(queue.capacity() >= 1000);
    let keys: Vec<Key> = (0..1000).map(|i| queue.insert(i, ms(i))).collect();
    for key in &keys[1..] {
        queue.remove(key);
    }
    queue.shrink_to_fit();
    assert!(queue.capacity() < 1000);
    assert_eq!(queue.remove(&keys[0]).into_inner(), 0);
    queue.reserve(10);
    assert!(queue.capacity() >= 10);
}

#[test]
fn public_types_are_send_sync_unpin() {
    let _guard = common::guard();
    fn check<T: Send + Sync + Unpin>() {}
    check::<DelayQueue<String>>();
    check::<Key>();
    check::<Expired<String>>();
    fn unpin<T: Unpin>() {}
    unpin::<DelayQueue<std::marker::PhantomPinned>>();
}

// ---------------------------------------------------------------------------
// What a queue made by `new` waits on.

/// A queue made by `new` waits on a tokio timer of its runtime, as
/// tokio-util's does: not on a `Sleep` of the default timer, whose stats
/// it is not in. Its entries still come out at tokio-util's instants
/// (`delay_queue_model.rs`).
#[tokio::test(start_paused = true)]
async fn a_new_queue_waits_on_a_tokio_timer_not_the_default_timers() {
    let _guard = common::guard();
    let mut queue = task::spawn(DelayQueue::new());
    queue.insert("a", ms(10));
    assert_pending!(poll_queue(&mut queue));
    assert_eq!(Timer::current().stats().pending, 0);
    time::advance(ms(10)).await;
    assert!(queue.is_woken(), "tokio's timer woke the queue");
    let expired = assert_ready!(poll_queue(&mut queue)).unwrap();
    assert_eq!(expired.into_inner(), "a");
    assert_eq!(Timer::current().stats().fired, 0);
}

/// Its timer's shutdown still stops it: polled before its next entry is
/// due, the queue panics as a pending `Sleep` of that timer does.
#[tokio::test(start_paused = true)]
#[should_panic(
    expected = "wheel: this DelayQueue can never yield its entries: the timer has shut down"
)]
async fn a_new_queue_whose_timer_has_shut_down_panics_when_it_must_wait() {
    let _guard = common::guard();
    let mut queue = task::spawn(DelayQueue::new());
    queue.insert("a", ms(10));
    assert_pending!(poll_queue(&mut queue));
    Timer::current().shutdown();
    let _ = poll_queue(&mut queue);
}

/// What is due when the timer shuts down still comes out, as a `Sleep`
/// whose deadline has passed still completes.
#[tokio::test(start_paused = true)]
async fn a_new_queue_yields_what_is_due_after_its_timer_shut_down() {
    let _guard = common::guard();
    let mut queue = task::spawn(DelayQueue::new());
    queue.insert("a", ms(10));
    assert_pending!(poll_queue(&mut queue));
    time::advance(ms(20)).await;
    Timer::current().shutdown();
    let expired = assert_ready!(poll_queue(&mut queue)).unwrap();
    assert_eq!(expired.into_inner(), "a");
    assert!(assert_ready!(poll_queue(&mut queue)).is_none());
}

/// On a running clock a queue made by `new` counts tokio's own
/// milliseconds, so a deadline is rounded up once, to tokio's millisecond:
/// each entry comes out when a tokio `Sleep` until its deadline completes,
/// where tokio-util's queue, counting from its creation and rounded again
/// by its `Sleep`, can be a millisecond later. The clock runs while the
/// queue binds and takes its entries, then is paused to watch them come
/// out.
#[test]
fn a_new_queue_on_a_running_clock_rounds_once_to_tokios_millisecond() {
    let _guard = common::guard();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        // The default timer exists (its grid found) before the queue binds.
        wheel::sleep(Duration::from_micros(1)).await;
        let mut queue = task::spawn(DelayQueue::new());
        // Deadlines spread over a millisecond, so that without the one
        // rounding some would come out a millisecond after tokio's sleep.
        let keys: Vec<Key> = (0..20u64)
            .map(|i| queue.insert(i, Duration::from_micros(5_000 + 53 * i)))
            .collect();
        time::pause();
        let mut sleeps: Vec<_> = keys
            .iter()
            .map(|key| Box::pin(time::sleep_until(queue.deadline(key))))
            .collect();
        let mut queue_step = [None; 20];
        let mut sleep_step = [None; 20];
        for step in 0..200 {
            time::advance(Duration::from_micros(50)).await;
            while let Poll::Ready(Some(expired)) = poll_queue(&mut queue) {
                queue_step[*expired.get_ref() as usize] = Some(step);
            }
            for (i, sleep) in sleeps.iter_mut().enumerate() {
                if sleep_step[i].is_none() && futures::poll!(sleep.as_mut()).is_ready() {
                    sleep_step[i] = Some(step);
                }
            }
        }
        assert!(sleep_step.iter().all(Option::is_some), "{sleep_step:?}");
        assert_eq!(queue_step, sleep_step);
    });
}

/// An insert due at the tick the queue already waits for wakes nobody:
/// that wait will come anyway. One due earlier wakes the waiting task.
#[tokio::test(start_paused = true)]
async fn an_insert_at_the_awaited_tick_wakes_nobody() {
    let _guard = common::guard();
    let mut queue = task::spawn(DelayQueue::new());
    queue.insert("a", ms(10));
    assert_pending!(poll_queue(&mut queue));
    queue.insert("b", ms(10));
    assert!(!queue.is_woken(), "the same tick: no wake");
    queue.insert("c", ms(5));
    assert!(queue.is_woken(), "an earlier tick wakes");
}

/// `poll_expired` with a waker that does nothing, outside any task.
fn poll_plain<T>(queue: &mut DelayQueue<T>) -> Poll<Option<Expired<T>>> {
    queue.poll_expired(&mut std::task::Context::from_waker(std::task::Waker::noop()))
}

/// The runtime a `new` queue waits in has been dropped after its entry's
/// deadline passed: the entry is due, so it comes out, as a `Sleep` whose
/// deadline has passed completes after its timer's shutdown (tokio's
/// timer, polled there, would panic). On a paused and a running clock.
#[test]
fn a_new_queue_yields_a_due_entry_after_its_runtime_is_dropped() {
    let _guard = common::guard();
    let running = || {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap()
    };
    for (rt, paused) in [(common::paused_unguarded(), true), (running(), false)] {
        let mut queue = DelayQueue::new();
        rt.block_on(async {
            queue.insert("a", ms(1));
            assert!(poll_plain(&mut queue).is_pending());
            if paused {
                time::advance(ms(20)).await;
            }
        });
        drop(rt);
        if !paused {
            std::thread::sleep(ms(20));
        }
        let expired = assert_ready!(poll_plain(&mut queue)).unwrap();
        assert_eq!(expired.into_inner(), "a", "paused: {paused}");
    }
}

/// One that must wait once its runtime has been dropped panics with the
/// crate's message, whether or not it waited before the drop.
#[test]
fn a_new_queue_that_must_wait_after_its_runtime_is_dropped_says_so() {
    let _guard = common::guard();
    for waited in [true, false] {
        let rt = common::paused_unguarded();
        let mut queue = DelayQueue::new();
        rt.block_on(async {
            queue.insert("a", ms(10));
            if waited {
                assert!(poll_plain(&mut queue).is_pending());
            }
        });
        drop(rt);
        let polled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            poll_plain(&mut queue).is_pending()
        }));
        let message = common::panic_message(&*polled.unwrap_err());
        assert!(
            message.starts_with("wheel: this DelayQueue can never yield its entries")
                && message.contains("shut down"),
            "waited: {waited}: {message}"
        );
    }
}
