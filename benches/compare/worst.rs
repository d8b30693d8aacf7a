//! `worst_drop`: the longest single drop among a million pending sleeps,
//! beside the mean. A mean hides a drop that does O(timers) work (freeing
//! or shrinking a slab) under the shard's lock; this row shows it.

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use crate::measure::{alternate, columns, run_tasks, with_context, Group};
use crate::pending::spread;
use crate::report::{label, Row};
use crate::side::{Column, Side};
use crate::support::Rng;
use crate::Config;

const N: usize = 1_000_000;

/// The orders the sleeps are dropped in, one row pair each.
const ORDERS: [&str; 3] = ["oldest first", "newest first", "shuffled"];

/// Where each measurement's drops sit in a run's results: the orders', then
/// the empty op's, then the registrations'.
const EMPTY: usize = ORDERS.len();
const REGISTRATIONS: usize = EMPTY + 1;

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
/// newest first; then again, shuffled. Each registration (a sleep's first
/// poll) is timed too, over the three bursts: issue 39 bounds a
/// registration as it does a drop. Each drop is timed: the mean
/// includes its two clock reads, on every column alike. Each sleep is
/// dropped in its box, which is freed after the timing (freeing a million
/// boxes makes `free` return heap to the system now and then, the same on
/// every column). The million boxes are made before any is registered (as
/// in issue 39's reproduction), so that what a timer allocates as they
/// register (the wheel's slab chunks) lies in one stretch of the heap, not
/// between the boxes: the drop that frees the last of it then also pays
/// for glibc handing the stretch back to the system (`brk`), which boxes
/// made and registered in turn kept apart. A drop slower than [`SLOW`]
/// during which the thread was switched out (its involuntary context
/// switches, from `/proc`, went up) measures the machine's scheduler, not
/// the timer, and is left out of the worst. Each column warms up first
/// with a burst of 4096 sleeps, made and dropped, so that nothing done once
/// per timer counts as a drop. Each measurement runs in a fresh child
/// process: in one that has already made and freed a million boxes, the
/// slab's chunks go into the holes they left, and the stretch is never
/// handed back (measured: 104-146 µs worst where a fresh process took
/// 1-2 ms).
pub(crate) fn worst_drop(cfg: &Config) {
    if !cfg.groups.contains(&Group::Ct) {
        return;
    }
    let n = cfg.size.of(N, 1000);
    let name = label("worst_drop", n, N);
    let group = Group::Ct;
    let runs = alternate(cfg, cfg.heavy_runs, group, |column| in_child(column, n));
    // The empty op's worst is what the machine does to any loop of `n`
    // timed steps (interrupts, a hypervisor): a drop's worst near it is
    // noise, not the timer's.
    Row::median(
        format!("{name}, an empty op timed alike: worst"),
        group,
        "µs",
        &runs,
        |r| r[EMPTY].worst_us,
    )
    .print();
    Row::median(
        format!("{name}, registering (first polls): mean"),
        group,
        "ns/op",
        &runs,
        |r| r[REGISTRATIONS].mean_ns,
    )
    .print();
    Row::median(
        format!("{name}, registering: worst single registration"),
        group,
        "µs",
        &runs,
        |r| r[REGISTRATIONS].worst_us,
    )
    .print();
    for (i, order) in ORDERS.into_iter().enumerate() {
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

fn worst_run<T: Side>(cfg: &Config, group: Group, n: usize) -> [Drops; 5] {
    let (_, outs) = run_tasks::<T, _, _>(cfg, group, 0, |ctx| async move {
        let mut rng = Rng::new(0xd20b);
        let (warm, _) = register::<T>(&ctx.timer, 4096, &mut rng).await;
        drop(warm);
        let mut out = [None; 5];
        let mut registering = Vec::new();
        for (i, order) in ORDERS.into_iter().enumerate() {
            let (mut held, polls) = register::<T>(&ctx.timer, n, &mut rng).await;
            registering.push(polls);
            match order {
                "newest first" => held.reverse(),
                "shuffled" => shuffle(&mut held, &mut rng),
                _ => {}
            }
            out[i] = Some(timed_each(&mut held, |sleep| sleep.set(None)));
            drop(held);
        }
        let mut nothing = vec![(); n];
        out[EMPTY] = Some(timed_each(&mut nothing, |unit| {
            std::hint::black_box(unit);
        }));
        out[REGISTRATIONS] = Some(Drops {
            mean_ns: registering.iter().map(|r| r.mean_ns).sum::<f64>() / registering.len() as f64,
            worst_us: registering.iter().map(|r| r.worst_us).fold(0.0, f64::max),
        });
        out.map(|drops| drops.expect("every loop ran"))
    });
    outs[0]
}

/// One measurement of `column` in a fresh process (see [`worst_drop`]).
fn in_child(column: Column, n: usize) -> [Drops; 5] {
    let stdout = crate::measure::child_stdout(&["worst_drop", column.name(), &n.to_string()]);
    let numbers: Vec<f64> = stdout
        .split_whitespace()
        .find_map(|kv| kv.strip_prefix("drops="))
        .map(|v| v.split(',').filter_map(|x| x.parse().ok()).collect())
        .unwrap_or_default();
    assert_eq!(
        numbers.len(),
        10,
        "worst_drop child printed no drops: {stdout}"
    );
    std::array::from_fn(|i| Drops {
        mean_ns: numbers[2 * i],
        worst_us: numbers[2 * i + 1],
    })
}

/// The child's side: `--child worst_drop <column> <n>`.
pub(crate) fn child(args: &[String]) {
    let (column, n) = crate::measure::column_and_n("worst_drop", args);
    let cfg = Config::default();
    // Not retried here: the parent retries a disturbed run.
    let drops = columns!(&cfg, 1, Group::Ct, |T| {
        (column == T::COLUMN).then(|| worst_run::<T>(&cfg, Group::Ct, n))
    })
    .0
    .into_iter()
    .flatten()
    .flatten()
    .next()
    .expect("the child's column ran");
    let numbers: Vec<String> = drops
        .iter()
        .flat_map(|d| [d.mean_ns.to_string(), d.worst_us.to_string()])
        .collect();
    println!("drops={}", numbers.join(","));
}

/// Fisher-Yates, from `rng`: the same order on every column.
fn shuffle<X>(items: &mut [X], rng: &mut Rng) {
    for i in (1..items.len()).rev() {
        items.swap(i, rng.between(0, i as u64) as usize);
    }
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

/// `n` sleeps spread over 10 s to 1 h, each in a box of its own that
/// outlives it; all are made first, then each is polled once (registered),
/// each poll timed.
async fn register<T: Side>(
    timer: &T::Timer,
    n: usize,
    rng: &mut Rng,
) -> (Vec<Pin<Box<Option<T::Sleep>>>>, Drops) {
    let mut sleeps: Vec<Pin<Box<Option<T::Sleep>>>> = (0..n)
        .map(|_| Box::pin(Some(T::sleep(timer, spread(rng)))))
        .collect();
    let polls = with_context(|cx| {
        timed_each(&mut sleeps, |sleep| {
            let polled = sleep.as_mut().as_pin_mut().expect("a sleep").poll(cx);
            assert!(polled.is_pending());
        })
    })
    .await;
    (sleeps, polls)
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
