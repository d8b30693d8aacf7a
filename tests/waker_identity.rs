//! A repeated poll must wake the task that polled last, whatever the waker's
//! clone looks like.
//!
//! A `Sleep` skips the lock on a repeated poll when the waker it is polled
//! with is the one its entry holds. `RawWakerVTable::clone` may return a
//! waker with another data pointer (here, a clone that boxes), and a task's
//! waker may be freed and its address reused by another task's. The wakers
//! below model that: a *slot* waker's data pointer is a fixed slot, standing
//! for an address that one task's waker had and the next task's has; its
//! clone boxes the task that lived in the slot when it was cloned. Task 1
//! polls a sleep and goes away; task 2, whose waker has the same address,
//! polls it: task 2 must be woken at the deadline, and task 1 never.
//!
//! Comparing the caller's waker with the identity of the caller's *previous*
//! waker (instead of the clone the entry holds) returns `Pending` to task 2
//! without registering it, and wakes task 1: every test here fails then.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, RawWaker, RawWakerVTable, Waker};

mod common;
use common::{manual, paused_rt, secs};

/// A task: how many times it has been woken.
type Task = Arc<AtomicUsize>;

/// An address that tasks' wakers take in turn: it holds the task that
/// lives there now.
struct Slot {
    task: Mutex<Task>,
}

impl Slot {
    /// A slot that lives for the rest of the test process, holding `task`.
    fn leak(task: &Task) -> &'static Slot {
        Box::leak(Box::new(Slot {
            task: Mutex::new(task.clone()),
        }))
    }

    /// The task that lives at this address now.
    fn task(&self) -> Task {
        self.task.lock().unwrap().clone()
    }

    /// The waker of whichever task lives in the slot when it is used.
    fn waker(&'static self) -> Waker {
        let data: *const Slot = self;
        // SAFETY: `data` points to a `Slot` that is never freed (`leak`),
        // which is all `SLOT`'s functions assume; they are thread-safe
        // (the slot's task is behind a mutex, counted by an atomic).
        unsafe { Waker::from_raw(RawWaker::new(data.cast(), &SLOT)) }
    }
}

/// A slot waker: wakes the slot's current task; its clone boxes that task.
static SLOT: RawWakerVTable = RawWakerVTable::new(
    |data| {
        // SAFETY: a slot waker's data is a leaked `Slot` (see `Slot::waker`).
        let slot = unsafe { &*data.cast::<Slot>() };
        boxed(slot.task())
    },
    |data| {
        // SAFETY: as above.
        let slot = unsafe { &*data.cast::<Slot>() };
        slot.task().fetch_add(1, Ordering::SeqCst);
    },
    |data| {
        // SAFETY: as above.
        let slot = unsafe { &*data.cast::<Slot>() };
        slot.task().fetch_add(1, Ordering::SeqCst);
    },
    |_| {},
);

/// A boxed clone: its data is a `Box<Task>` it owns.
fn boxed(task: Task) -> RawWaker {
    RawWaker::new(Box::into_raw(Box::new(task)).cast(), &BOXED)
}

static BOXED: RawWakerVTable = RawWakerVTable::new(
    |data| {
        // SAFETY: a boxed waker's data is a live `Box<Task>` from `boxed`,
        // freed only by `wake` or `drop`, which consume the waker.
        let task = unsafe { &*data.cast::<Task>() };
        boxed(task.clone())
    },
    |data| {
        // SAFETY: as above; `wake` consumes the waker, so the box is freed
        // exactly once.
        let task = unsafe { Box::from_raw(data.cast_mut().cast::<Task>()) };
        task.fetch_add(1, Ordering::SeqCst);
    },
    |data| {
        // SAFETY: as above; borrowed, not freed.
        let task = unsafe { &*data.cast::<Task>() };
        task.fetch_add(1, Ordering::SeqCst);
    },
    |data| {
        // SAFETY: as above; `drop` consumes the waker.
        drop(unsafe { Box::from_raw(data.cast_mut().cast::<Task>()) });
    },
);

fn poll_with<F: Future + Unpin>(future: &mut F, waker: &Waker) -> bool {
    Pin::new(future)
        .poll(&mut Context::from_waker(waker))
        .is_pending()
}

/// The scenario's first half, on a pending future due in a second: task 1
/// polls it and goes away, and task 2, whose waker has task 1's address,
/// polls it. Returns the two tasks, to count their wakes once it is due.
fn poll_as_task_one_then_task_two<F: Future + Unpin>(future: &mut F) -> (Task, Task) {
    let (one, two) = (Task::default(), Task::default());
    let slot = Slot::leak(&one);
    let waker = slot.waker();
    assert!(poll_with(future, &waker), "due in a second");
    *slot.task.lock().unwrap() = two.clone();
    assert!(poll_with(future, &waker), "due in a second");
    (one, two)
}

/// How many times each task has been woken.
fn wakes((one, two): &(Task, Task)) -> (usize, usize) {
    (one.load(Ordering::SeqCst), two.load(Ordering::SeqCst))
}

#[test]
fn a_manual_timers_sleep_wakes_the_task_that_polled_last() {
    let _guard = common::guard();
    let timer = manual();
    let mut sleep = timer.sleep(secs(1));
    let tasks = poll_as_task_one_then_task_two(&mut sleep);
    timer.advance(secs(1));
    assert_eq!(wakes(&tasks), (0, 1), "(task 1, task 2) woken");
}

#[test]
fn a_default_timer_sleep_wakes_the_task_that_polled_last() {
    let _guard = common::guard();
    paused_rt().block_on(async {
        let mut sleep = wheel::sleep(secs(1));
        let tasks = poll_as_task_one_then_task_two(&mut sleep);
        tokio::time::advance(secs(1)).await;
        assert_eq!(wakes(&tasks), (0, 1), "(task 1, task 2) woken");
    });
}

#[test]
fn a_timeout_wakes_the_task_that_polled_last() {
    let _guard = common::guard();
    let timer = manual();
    let mut timeout = Box::pin(timer.timeout(secs(1), std::future::pending::<()>()));
    let tasks = poll_as_task_one_then_task_two(&mut timeout);
    timer.advance(secs(1));
    assert_eq!(wakes(&tasks), (0, 1), "(task 1, task 2) woken");
}

#[test]
fn an_interval_wakes_the_task_that_polled_last() {
    let _guard = common::guard();
    let timer = manual();
    let mut interval = timer.interval_at(timer.now() + secs(1), secs(1));
    let mut tick = std::future::poll_fn(|cx| interval.poll_tick(cx));
    let tasks = poll_as_task_one_then_task_two(&mut tick);
    timer.advance(secs(1));
    assert_eq!(wakes(&tasks), (0, 1), "(task 1, task 2) woken");
}

#[test]
fn a_sleep_whose_waker_clones_to_the_same_address_still_repolls() {
    let _guard = common::guard();
    // The common case stays correct too: an `Arc` waker clones to itself.
    let timer = manual();
    let task = Task::default();
    struct Count(Task);
    impl std::task::Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let waker = Waker::from(Arc::new(Count(task.clone())));
    let mut sleep = timer.sleep(secs(1));
    for _ in 0..3 {
        assert!(poll_with(&mut sleep, &waker));
    }
    timer.advance(secs(1));
    assert_eq!(task.load(Ordering::SeqCst), 1);
    assert!(!poll_with(&mut sleep, &waker));
}
