//! Memory returns to its baseline: after a million timers are registered
//! and then cancelled, or fire, a `Timer`'s wheel holds no more than it did
//! before (`Stats::allocated_entries`, `Stats::level_bytes`).
//!
//! Sleeps are registered by polling them once with a no-op waker, under
//! tokio's paused clock, so a million cost a second or two in a debug build.
//! The policy itself (chunks freed as they empty, a spare kept, stale keys)
//! is unit-tested in `src/wheel/tests/memory.rs` and
//! `src/wheel/tests/slots.rs`; no single call's share is in
//! `tests/worst_case.rs`.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Waker};
use std::time::Duration;

use tokio::time;
use wheel::{Instant, Sleep, Stats, Timer};

mod common;
use common::{ms, splitmix};

const MILLION: u64 = 1_000_000;

/// Polls every sleep once with a no-op waker; all must be pending.
fn register(sleeps: &mut [Sleep]) {
    let mut cx = Context::from_waker(Waker::noop());
    for sleep in sleeps {
        assert!(Pin::new(sleep).poll(&mut cx).is_pending());
    }
}

/// The deadline of sleep `i`: spread over 1 ms to ~17 minutes, so the
/// wheel needs four levels and the slab is filled out of deadline order.
fn delay(i: u64) -> Duration {
    ms(1 + i.wrapping_mul(2_654_435_761) % 1_000_000)
}

/// A deterministic shuffle (splitmix64).
fn shuffle<X>(items: &mut [X], mut seed: u64) {
    for i in (1..items.len()).rev() {
        items.swap(i, (splitmix(&mut seed) % (i as u64 + 1)) as usize);
    }
}

/// What must come back: the wheel's allocation and level storage.
fn footprint(stats: &Stats) -> (usize, usize, usize) {
    (stats.allocated_entries, stats.level_bytes, stats.levels)
}

#[tokio::test(start_paused = true)]
async fn a_million_cancelled_sleeps_give_back_the_wheels_memory() {
    let _guard = common::guard();
    let timer = Timer::builder().build().unwrap();
    let baseline = timer.stats();
    let mut sleeps: Vec<Sleep> = (0..MILLION).map(|i| timer.sleep(delay(i))).collect();
    register(&mut sleeps);
    let peak = timer.stats();
    assert_eq!(peak.pending, MILLION as usize);
    assert!(peak.allocated_entries >= MILLION as usize, "{peak:?}");
    assert!(peak.levels >= 4 && peak.level_bytes > baseline.level_bytes);

    // Dropped in a scattered order, as cancellations come.
    shuffle(&mut sleeps, 7);
    let half = sleeps.split_off(sleeps.len() / 2);
    drop(sleeps);
    let midway = timer.stats();
    assert!(midway.allocated_entries <= peak.allocated_entries);
    drop(half);

    let after = timer.stats();
    assert_eq!((after.pending, after.entries), (0, 0), "{after:?}");
    assert_eq!(after.cancelled, MILLION);
    assert_eq!(footprint(&after), footprint(&baseline), "{after:?}");
}

#[tokio::test(start_paused = true)]
async fn a_million_fired_sleeps_give_back_the_wheels_memory() {
    let _guard = common::guard();
    let timer = Timer::builder().build().unwrap();
    let baseline = timer.stats();
    let start = Instant::now();
    let mut sleeps: Vec<Sleep> = (0..MILLION).map(|i| timer.sleep(delay(i))).collect();
    register(&mut sleeps);
    assert!(timer.stats().allocated_entries >= MILLION as usize);

    // Everything fires; each sleep frees its entry when polled.
    time::advance(ms(1_000_001)).await;
    assert_eq!(timer.stats().fired, MILLION);
    // Unconstrained: completing a sleep spends tokio's coop budget, which
    // runs out after 128 in one poll of this task.
    tokio::task::unconstrained(async {
        let mut cx = Context::from_waker(Waker::noop());
        for sleep in &mut sleeps {
            assert!(Pin::new(sleep).poll(&mut cx).is_ready());
        }
    })
    .await;
    assert!(start.elapsed() >= ms(1_000_001));

    let after = timer.stats();
    assert_eq!((after.pending, after.entries), (0, 0), "{after:?}");
    assert_eq!(footprint(&after), footprint(&baseline), "{after:?}");
    drop(sleeps);
    assert_eq!(footprint(&timer.stats()), footprint(&baseline));
}

#[tokio::test(start_paused = true)]
async fn with_sleeps_still_live_the_wheel_holds_only_chunks_in_use() {
    let _guard = common::guard();
    let timer = Timer::builder().build().unwrap();
    let mut sleeps: Vec<Sleep> = (0..100_000).map(|i| timer.sleep(delay(i))).collect();
    register(&mut sleeps);
    // The first 1000 (the lowest slab slots) live on.
    let survivors: Vec<Sleep> = sleeps.drain(..1_000).collect();

    // Cancelled newest first: each chunk of 1024 entries is freed as it
    // empties (one is kept as a spare), so the slab shrinks behind them.
    while let Some(sleep) = sleeps.pop() {
        drop(sleep);
        let stats = timer.stats();
        assert!(
            stats.allocated_entries <= stats.entries + 3 * 1_024,
            "{stats:?}"
        );
    }
    let stats = timer.stats();
    assert_eq!(stats.entries, 1_000);

    // Another burst, cancelled oldest first: the same, from the bottom up.
    let mut burst: Vec<Sleep> = (0..99_000).map(|i| timer.sleep(delay(i))).collect();
    register(&mut burst);
    drop(burst);
    let stats = timer.stats();
    assert_eq!(stats.entries, 1_000);
    assert!(stats.allocated_entries <= 1_000 + 3 * 1_024, "{stats:?}");

    // Empty again, after a burst, the wheel holds nothing.
    drop(survivors);
    let stats = timer.stats();
    assert_eq!(
        (stats.entries, stats.allocated_entries),
        (0, 0),
        "{stats:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_small_wheel_stays_small_and_a_second_chunk_comes_whole() {
    let _guard = common::guard();
    let timer = Timer::builder().build().unwrap();
    // The first chunk grows like a `Vec`: 4, then 8 slots.
    let mut sleeps: Vec<Sleep> = (0..5).map(|i| timer.sleep(delay(i))).collect();
    register(&mut sleeps);
    assert_eq!(timer.stats().allocated_entries, 8);
    // Past 1024 entries, the second chunk is allocated at once, whole.
    let mut more: Vec<Sleep> = (5..1_100).map(|i| timer.sleep(delay(i))).collect();
    register(&mut more);
    assert_eq!(timer.stats().allocated_entries, 2 * 1_024);
}
