//! Unit tests of the shard that need its insides: its capacity, and keys
//! whose generation comes round.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Waker};
use std::time::Duration;

use super::shard::Registration;
use super::*;
use crate::wheel::Wheel;
use crate::Timer;

/// `timer`'s (fresh) only shard, given a wheel of `2^bits` generations, so
/// that a test can make them come round quickly.
fn limit_generations(timer: &Timer, bits: u32) {
    let shards = timer.driver().shards();
    assert_eq!(shards.len(), 1);
    let mut wheel = Wheel::new(timer.slots_per_level());
    wheel.limit_generations(bits);
    shards[0].lock().wheel = wheel;
}

/// Fails the run, naming the test, should it still be running after 10 s
/// (each takes milliseconds): a broken pass leaves `advance` going
/// round for ever, or a sleep never woken, and the run would hang with no
/// word of which test. It cannot make the test panic, so the process
/// exits. Hold it for the test: `let _watchdog = watchdog();`.
pub(super) fn watchdog() -> std::sync::mpsc::Sender<()> {
    use std::sync::mpsc::{channel, RecvTimeoutError};
    let what = std::thread::current()
        .name()
        .unwrap_or("a unit test")
        .to_owned();
    let (stand_down, told) = channel::<()>();
    std::thread::spawn(move || {
        if let Err(RecvTimeoutError::Timeout) = told.recv_timeout(Duration::from_secs(10)) {
            use std::io::Write;
            // Not `eprintln!`: libtest captures it, and the exit loses it.
            let _ = writeln!(
                std::io::stderr(),
                "never completed: {what} (watchdog: 10 s)"
            );
            std::process::exit(101);
        }
    });
    stand_down
}

fn register(shard: &Arc<Shard>, deadline: Deadline) -> Registration {
    shard.register(deadline, shard.clock().tick_of(deadline), Registrant::Eager)
}

#[test]
fn a_full_shard_refuses_with_an_error_that_names_the_shard() {
    let _watchdog = watchdog();
    let timer = Timer::builder().manual().build().unwrap();
    let mut driver = Driver::new_manual(Geometry {
        clock: *timer.driver().clock(),
        slots_per_level: 64,
        max_pending: usize::MAX,
        shards: 1,
    });
    Arc::get_mut(&mut driver.shards[0]).unwrap().capacity = 2;
    let shard = driver.shards[0].clone();
    let deadline = Deadline::from_instant(shard.now() + Duration::from_secs(1));
    let keys: Vec<_> = (0..2)
        .map(|_| match register(&shard, deadline) {
            Registration::Pending(key, _) => key,
            other => panic!("refused below capacity: {other:?}"),
        })
        .collect();
    let Registration::Refused(error) = register(&shard, deadline) else {
        panic!("a full shard took a third entry");
    };
    assert!(error.is_at_capacity(), "{error}");
    let message = error.to_string();
    assert!(
        message.contains("shard") && message.contains("2 entries"),
        "{message}"
    );
    assert!(!message.contains("max_pending"), "{message}");
    // A cancelled entry, freed only with its batch, still makes room.
    shard.cancel(keys[0], shard.clock().tick_of(deadline));
    assert!(matches!(
        register(&shard, deadline),
        Registration::Pending(..)
    ));
}

/// A fired sleep keeps its entry until it is polled, so however often the
/// generations come round (a callback can insert 2^24 times within one
/// pass), its key never names a newer entry: here the wheel has 4
/// generations, and sixteen sleeps registered and dropped meanwhile leave
/// the fired one's entry, and theirs, alone.
#[test]
fn a_fired_sleeps_key_names_its_own_entry_however_the_generations_come_round() {
    let _watchdog = watchdog();
    let timer = Timer::builder().manual().build().unwrap();
    limit_generations(&timer, 2);
    let start = timer.now();
    let mut fired = timer.sleep_until(start + Duration::from_millis(10));
    let mut cx = Context::from_waker(Waker::noop());
    assert!(Pin::new(&mut fired).poll(&mut cx).is_pending());
    timer.advance_to(start + Duration::from_millis(10));
    let mut newer: Vec<_> = (0..16)
        .map(|_| timer.sleep_until(start + Duration::from_secs(3600)))
        .collect();
    for sleep in &mut newer {
        assert!(Pin::new(sleep).poll(&mut cx).is_pending());
    }
    newer.truncate(1);
    assert!(Pin::new(&mut fired).poll(&mut cx).is_ready());
    drop(fired);
    let stats = timer.stats();
    assert_eq!((stats.pending, stats.entries, stats.cancelled), (1, 1, 15));
    assert!(Pin::new(&mut newer[0]).poll(&mut cx).is_pending());
}

/// Cancelling a callback that a pass has already taken into its batch must
/// leave alone whatever entry its slot holds by then (a callback refilling
/// it until the generation came round): here a sleep due in an hour, which
/// then completed at once.
#[test]
fn cancelling_a_batched_callback_leaves_a_newer_entry_in_its_slot_alone() {
    let _watchdog = watchdog();
    let timer = Timer::builder().manual().build().unwrap();
    limit_generations(&timer, 2);
    let start = timer.now();
    let second = Arc::new(std::sync::Mutex::new(None::<crate::TimerHandle>));
    let kept = Arc::new(std::sync::Mutex::new(None::<crate::Sleep>));
    let (t, s, k) = (timer.clone(), second.clone(), kept.clone());
    let hour = start + Duration::from_secs(3600);
    timer.schedule_at(start + Duration::from_millis(10), move || {
        for _ in 0..(1u32 << 2) - 1 {
            drop(t.try_sleep_until(hour).unwrap());
        }
        *k.lock().unwrap() = Some(t.try_sleep_until(hour).unwrap());
        assert!(s.lock().unwrap().as_ref().unwrap().cancel());
    });
    *second.lock().unwrap() = Some(timer.schedule_at(start + Duration::from_millis(10), || {}));
    timer.advance_to(start + Duration::from_millis(10));
    let mut sleep = kept.lock().unwrap().take().unwrap();
    let polled = Pin::new(&mut sleep).poll(&mut Context::from_waker(Waker::noop()));
    assert!(polled.is_pending(), "due in an hour, completed now");
    let stats = timer.stats();
    assert_eq!((stats.callbacks, stats.pending), (0, 1), "{stats:?}");
}

/// Where tokio's clock can be paused, a cancel that empties a shard leaves
/// its alarm armed only while the clock runs: paused, the sentinel disarms
/// it before the runtime parks (auto-advance would jump to it); running,
/// it stays, and fires into a pass that re-arms for what is left, so a
/// server does not re-arm tokio's timer for every timeout it cancels.
#[test]
fn only_a_paused_clock_has_its_alarm_disarmed_when_the_shard_empties() {
    let _watchdog = watchdog();
    for paused in [true, false] {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(paused)
            .build()
            .unwrap();
        let promise = rt.block_on(async {
            let timer = Timer::current();
            let shard = timer.driver().shards()[0].clone();
            let mut sleep = crate::sleep(Duration::from_secs(3600));
            let pending = Pin::new(&mut sleep).poll(&mut Context::from_waker(Waker::noop()));
            assert!(pending.is_pending());
            assert_ne!(shard.lock().wake_at, NEVER, "armed");
            drop(sleep);
            // The runtime's next turn runs the sentinel, if it was asked.
            tokio::task::yield_now().await;
            tokio::task::yield_now().await;
            shard.lock().wake_at
        });
        assert_eq!(promise == NEVER, paused, "paused: {paused}");
    }
}
