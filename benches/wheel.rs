//! `cargo bench --bench wheel`: the bare timing wheel, without the driver,
//! the mutex or any future: what the data structure itself costs.
//!
//! The wheel is crate-private; `wheel::__private` exposes it for this bench
//! only. Entries hold `Option<Waker>` (always `None`), so they have the size
//! the driver's entries have. Ticks are 1 ms (the default timer's are
//! 125 µs).
//!
//! ```text
//! cargo bench --bench wheel             # n = 1,000,000
//! cargo bench --bench wheel -- quick    # a quarter (or WHEEL_BENCH_SIZE=quick)
//! ```

#[path = "support/mod.rs"]
mod support;

use std::hint::black_box;
use std::task::Waker;
use std::time::Instant;

use support::{median, Rng, Size};
use wheel::__private::{Key, Wheel};

type BareWheel = Wheel<Option<Waker>>;

const N: usize = 1_000_000;
const RUNS: usize = 5;
const SLOTS: usize = 64;
/// One hour and one second, in 1 ms ticks.
const HOUR: u64 = 3_600_000;
const SECOND: u64 = 1_000;
/// Empty hours crossed per run of `advance (jump)`.
const HOURS: usize = 10_000;

fn main() {
    let mut size = Size::from_env();
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--bench" => {}
            word => {
                size = Size::parse(word).unwrap_or_else(|| {
                    eprintln!("usage: wheel [quick|full|<scale>]");
                    std::process::exit(2)
                })
            }
        }
    }
    let n = size.of(N, 1000);
    let hours = size.of(HOURS, 100);
    println!("# tiered-wheel: the bare wheel ({SLOTS} slots per level, 1 ms ticks)");
    println!();
    println!("- machine: {}", support::machine());
    println!(
        "- size: {} (scale {}), n = {n}; median of {RUNS} runs",
        size.name, size.scale
    );
    println!();
    println!("| {:<44} | {:<10} | {:>9} |", "operation", "unit", "wheel");
    println!(
        "|{}|{}|{}:|",
        "-".repeat(46),
        "-".repeat(12),
        "-".repeat(10)
    );
    let deadlines = spread(n);
    let row = |op: String, unit: &str, run: &mut dyn FnMut() -> f64| {
        let value = median((0..RUNS).map(|_| run()).collect());
        println!("| {op:<44} | {unit:<10} | {value:>9.1} |");
    };
    row(format!("insert {n}, 1 s-1 h"), "ns/insert", &mut || {
        insert(&deadlines)
    });
    for (order, shuffled) in [("insertion", false), ("random", true)] {
        for (how, discard) in [("remove", false), ("discard", true)] {
            row(
                format!("cancel {n} (in {order} order), {how}"),
                "ns/cancel",
                &mut || cancel(&deadlines, shuffled, discard),
            );
        }
    }
    row(
        format!("reset {n}, 1 ms-1 s later"),
        "ns/reset",
        &mut || reset(&deadlines),
    );
    row(
        format!("advance over an empty hour (jump), x{hours}"),
        "ns/hour",
        &mut || advance_jump(hours),
    );
    row(
        "advance over an empty hour, every tick".to_owned(),
        "ns/tick",
        &mut advance_every_tick,
    );
    row(format!("expire {n}, 1 s-1 h"), "ns/entry", &mut || {
        expire(&deadlines)
    });
}

/// Deadlines uniform over 1 s to 1 h, in ticks.
fn spread(n: usize) -> Vec<u64> {
    let mut rng = Rng::new(0xb0a7);
    (0..n).map(|_| rng.between(SECOND, HOUR)).collect()
}

fn per(start: Instant, n: usize) -> f64 {
    start.elapsed().as_nanos() as f64 / n as f64
}

fn filled(deadlines: &[u64]) -> (BareWheel, Vec<Key>) {
    let mut wheel = BareWheel::new(SLOTS);
    let keys = deadlines
        .iter()
        .map(|&d| wheel.try_insert(d, None).expect("a future deadline"))
        .collect();
    (wheel, keys)
}

/// Inserts into a new wheel (the slab grows as it would in a server).
fn insert(deadlines: &[u64]) -> f64 {
    let mut wheel = BareWheel::new(SLOTS);
    let mut keys = Vec::with_capacity(deadlines.len());
    let start = Instant::now();
    for &d in deadlines {
        keys.push(wheel.try_insert(d, None).expect("a future deadline"));
    }
    let ns = per(start, deadlines.len());
    assert_eq!(wheel.scheduled(), deadlines.len());
    black_box(keys);
    ns
}

/// Cancels every entry, in the order they were inserted or shuffled, with
/// `remove` (unlink now) or `discard` (what the driver does with a sleep
/// not yet due: leave the entry unread, to be unlinked with a batch; see
/// `src/wheel/discard.rs`), the values a batch lets go of taken as the
/// driver takes them. Without the driver's lock between cancels the
/// processor already overlaps some of consecutive removes' misses, so
/// batching gains less here than under the driver.
fn cancel(deadlines: &[u64], shuffled: bool, discard: bool) -> f64 {
    let (mut wheel, mut keys) = filled(deadlines);
    if shuffled {
        let mut rng = Rng::new(0xca7);
        for i in (1..keys.len()).rev() {
            keys.swap(i, rng.between(0, i as u64) as usize);
        }
    }
    let start = Instant::now();
    let mut dead = Vec::new();
    for &key in &keys {
        if discard {
            black_box(wheel.discard(key));
            wheel.move_dead_into(&mut dead);
            dead.clear();
        } else {
            black_box(wheel.remove(key).expect("a live key"));
        }
    }
    let ns = per(start, keys.len());
    assert_eq!(wheel.scheduled(), 0);
    ns
}

fn reset(deadlines: &[u64]) -> f64 {
    let (mut wheel, keys) = filled(deadlines);
    let mut rng = Rng::new(0x5e7);
    let later: Vec<u64> = deadlines
        .iter()
        .map(|&d| d + rng.between(1, SECOND))
        .collect();
    let start = Instant::now();
    for (&key, &d) in keys.iter().zip(&later) {
        assert_eq!(wheel.reset(key, d), Some(true));
    }
    let ns = per(start, keys.len());
    assert_eq!(wheel.scheduled(), keys.len());
    ns
}

/// The driver's way across idle time: ask for the next expiration, advance
/// to it, repeat until the one timer, an hour away, expires.
fn advance_jump(hours: usize) -> f64 {
    let mut wheel = BareWheel::new(SLOTS);
    let mut now = 0;
    let start = Instant::now();
    for _ in 0..hours {
        let key = wheel
            .try_insert(now + HOUR, None)
            .expect("a future deadline");
        loop {
            let next = wheel.next_expiration().expect("one timer pending");
            if let Some(expired) = wheel.pop_expired(next) {
                assert_eq!(expired, key);
                wheel.remove(expired);
                now = next;
                break;
            }
        }
    }
    per(start, hours)
}

/// A caller that advances the wheel on every tick of an hour with one timer
/// at its end: what skipping empty slots saves is visible per tick.
fn advance_every_tick() -> f64 {
    let mut wheel = BareWheel::new(SLOTS);
    let key = wheel.try_insert(HOUR, None).expect("a future deadline");
    let start = Instant::now();
    for tick in 1..HOUR {
        assert!(wheel.pop_expired(black_box(tick)).is_none());
    }
    assert_eq!(wheel.pop_expired(HOUR), Some(key));
    per(start, HOUR as usize)
}

/// Expires every entry the way the driver does (jump to the next expiration,
/// pop what is due, free it), cascades included.
fn expire(deadlines: &[u64]) -> f64 {
    let (mut wheel, _keys) = filled(deadlines);
    let mut expired = 0;
    let start = Instant::now();
    while let Some(next) = wheel.next_expiration() {
        while let Some(key) = wheel.pop_expired(next) {
            wheel.remove(key);
            expired += 1;
        }
    }
    let ns = per(start, expired);
    assert_eq!(expired, deadlines.len());
    ns
}
