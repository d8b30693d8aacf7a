//! `worst_drop`: the longest single drop among a million pending sleeps,
//! beside the mean. A mean hides a drop that does O(timers) work (freeing
//! or shrinking a slab) under the shard's lock; this row shows it.

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use crate::measure::{columns, run_tasks, with_context, Group};
use crate::pending::spread;
use crate::report::{label, Row};
use crate::side::Side;
use crate::support::Rng;
use crate::Config;

const N: usize = 1_000_000;

/// One order's drops: their mean and the longest.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Drops {
    mean_ns: f64,
    worst_us: f64,
}

/// A drop at least this slow is checked for a preemption.
const SLOW: Duration = Duration::from_micros(20);

/// A million sleeps registered on one timer by one task (the `ct` group
/// only: one shard), then dropped one by one, oldest first; then again,
/// newest first. Each drop is timed: the mean includes its two clock
/// reads, on every column alike. Each sleep is dropped in its box, which
/// is freed after the timing (freeing a million boxes makes `free` return
/// heap to the system now and then, the same on every column). A drop
/// slower than [`SLOW`] during which the thread was switched out (its
/// involuntary context switches, from `/proc`, went up) measures the
/// machine's scheduler, not the timer, and is left out of the worst. Each
/// column warms up first with a burst of 4096 sleeps, made and dropped, so
/// that nothing done once per timer counts as a drop.
pub(crate) fn worst_drop(cfg: &Config) {
    if !cfg.groups.contains(&Group::Ct) {
        return;
    }
    let n = cfg.size.of(N, 1000);
    let name = label("worst_drop", n, N);
    let group = Group::Ct;
    let runs = columns!(cfg, cfg.heavy_runs, group, |T| worst_run::<T>(
        cfg, group, n
    ));
    // The empty op's worst is what the machine does to any loop of `n`
    // timed steps (interrupts, a hypervisor): a drop's worst near it is
    // noise, not the timer's.
    Row::median(
        format!("{name}, an empty op timed alike: worst"),
        group,
        "µs",
        &runs,
        |r| r[2].worst_us,
    )
    .print();
    for (i, order) in ["oldest first", "newest first"].into_iter().enumerate() {
        Row::median(
            format!("{name}, {order}: mean drop"),
            group,
            "ns/op",
            &runs,
            |r| r[i].mean_ns,
        )
        .print();
        Row::median(
            format!("{name}, {order}: worst single drop"),
            group,
            "µs",
            &runs,
            |r| r[i].worst_us,
        )
        .print();
    }
}

fn worst_run<T: Side>(cfg: &Config, group: Group, n: usize) -> [Drops; 3] {
    let (_, outs) = run_tasks::<T, _, _>(cfg, group, 0, |ctx| async move {
        let mut rng = Rng::new(0xd20b);
        let warm = register::<T>(&ctx.timer, 4096, &mut rng).await;
        drop(warm);
        let mut out = [None; 3];
        for (i, newest_first) in [false, true].into_iter().enumerate() {
            let mut held = register::<T>(&ctx.timer, n, &mut rng).await;
            if newest_first {
                held.reverse();
            }
            out[i] = Some(timed_each(&mut held, |sleep| sleep.set(None)));
            drop(held);
        }
        let mut nothing = vec![(); n];
        out[2] = Some(timed_each(&mut nothing, |unit| {
            std::hint::black_box(unit);
        }));
        out.map(|drops| drops.expect("every loop ran"))
    });
    outs[0]
}

/// Runs `op` on each item, timing each call: the mean and the worst,
/// leaving out a slow call during which the thread was switched out.
fn timed_each<X>(items: &mut [X], mut op: impl FnMut(&mut X)) -> Drops {
    let mut worst = Duration::ZERO;
    let mut switches = involuntary_switches();
    let start = Instant::now();
    for item in items.iter_mut() {
        let one = Instant::now();
        op(item);
        let took = one.elapsed();
        if took >= SLOW {
            let now = involuntary_switches();
            if now != switches {
                switches = now;
                continue;
            }
        }
        worst = worst.max(took);
    }
    Drops {
        mean_ns: start.elapsed().as_nanos() as f64 / items.len() as f64,
        worst_us: worst.as_secs_f64() * 1e6,
    }
}

/// `n` sleeps spread over 10 s to 1 h, each polled once, each in a box of
/// its own that outlives it.
async fn register<T: Side>(
    timer: &T::Timer,
    n: usize,
    rng: &mut Rng,
) -> Vec<Pin<Box<Option<T::Sleep>>>> {
    with_context(|cx| {
        (0..n)
            .map(|_| {
                let mut sleep = Box::pin(Some(T::sleep(timer, spread(rng))));
                let polled = sleep.as_mut().as_pin_mut().expect("a sleep").poll(cx);
                assert!(polled.is_pending());
                sleep
            })
            .collect()
    })
    .await
}

/// This thread's involuntary context switches so far (0 where `/proc`
/// does not say).
fn involuntary_switches() -> u64 {
    std::fs::read_to_string("/proc/thread-self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("nonvoluntary_ctxt_switches:"))
                .and_then(|count| count.trim().parse().ok())
        })
        .unwrap_or(0)
}
