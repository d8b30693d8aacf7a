//! A tour of `wheel`: sleep, timeout and interval on the default timer,
//! tower's request timeout on the wheel, an explicit timer with its own
//! tick, callbacks, a manual clock and a test clock, and the stats each
//! timer keeps; then a measure of why one would switch.
//!
//! Run it with `cargo run --release --features tower --example tour` (the
//! README's command: `Cargo.toml` declares the example with
//! `required-features = ["tower"]`, so cargo names the feature if it is
//! left out). It uses real time and takes about a second.

use std::future::Future;
use std::pin::pin;
use std::time::Duration;

use wheel::{Instant, MissedTickBehavior, Timer};

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    println!("tiered-wheel tour: a hierarchical timing wheel behind tokio::time's API\n");

    // 1. sleep: 20,000 tasks, each sleeping 1-500 ms, none may wake early.
    let n = 20_000u64;
    let start = Instant::now();
    let tasks: Vec<_> = (0..n)
        .map(|i| {
            let delay = Duration::from_millis(1 + (i * 7919) % 500);
            tokio::spawn(async move {
                let deadline = Instant::now() + delay;
                wheel::sleep_until(deadline).await;
                let woke = Instant::now();
                (woke < deadline, woke.saturating_duration_since(deadline))
            })
        })
        .collect();
    let mut late = Vec::with_capacity(tasks.len());
    let mut early = 0;
    for task in tasks {
        let (was_early, lateness) = task.await.expect("sleeper panicked");
        early += usize::from(was_early);
        late.push(lateness);
    }
    late.sort();
    println!(
        "sleep:    {n} sleeps of 1-500 ms done in {:?}; early: {early}; lateness p50 {:?}, p99 {:?}, max {:?}",
        start.elapsed(),
        late[late.len() / 2],
        late[late.len() * 99 / 100],
        late[late.len() - 1],
    );

    // 2. timeout: a fast future wins, a slow one is cut off.
    let fast = wheel::timeout(Duration::from_millis(50), async { "fast" }).await;
    let slow = wheel::timeout(
        Duration::from_millis(50),
        wheel::sleep(Duration::from_secs(10)),
    )
    .await;
    println!(
        "timeout:  fast future -> {fast:?}; slow future -> {}",
        slow.unwrap_err()
    );

    // 2b. tower's request timeout on the wheel (feature `tower`).
    tower_timeout().await;

    // 3. interval: five ticks 20 ms apart, skipping any that are missed.
    let mut every = wheel::interval(Duration::from_millis(20));
    every.set_missed_tick_behavior(MissedTickBehavior::Skip);
    let first = every.tick().await;
    let mut offsets = Vec::new();
    for _ in 0..4 {
        offsets.push(every.tick().await - first);
    }
    println!("interval: ticks at +{offsets:?} after the first");

    // 4. an explicit timer: 10 ms ticks, 16 slots per level, its own stats.
    let coarse = Timer::builder()
        .tick(Duration::from_millis(10))
        .slots_per_level(16)
        .build()
        .expect("valid geometry");
    let t0 = Instant::now();
    coarse.sleep(Duration::from_millis(25)).await;
    println!(
        "explicit: a 25 ms sleep on a 10 ms-tick timer took {:?} (rounded up to a tick, never down)",
        t0.elapsed()
    );
    // Register 1000 timeouts and cancel them all, as a server does.
    let pending: Vec<_> = (0..1000)
        .map(|i| Box::pin(coarse.sleep(Duration::from_secs(60 + i))))
        .collect();
    for mut sleep in pending {
        futures::poll!(sleep.as_mut())
            .is_pending()
            .then_some(())
            .expect("a minute away");
    }

    // 5. a callback timer (no task, no future) and its cancel handle.
    let (tx, rx) = tokio::sync::oneshot::channel();
    let retry = coarse.schedule(Duration::from_millis(20), move || {
        let _ = tx.send("retry ran");
    });
    let never = coarse.schedule(Duration::from_millis(20), || unreachable!("cancelled"));
    let cancelled = never.cancel();
    println!(
        "callback: {}; the other cancelled: {cancelled}; expired: {}",
        rx.await.expect("the callback ran"),
        retry.is_expired()
    );

    // 6. a manual clock: nothing moves until the test says so.
    let manual = Timer::builder().manual().build().expect("valid geometry");
    let mut test_sleep = Box::pin(manual.sleep(Duration::from_secs(3600)));
    let before = futures::poll!(test_sleep.as_mut()).is_pending();
    manual.advance(Duration::from_secs(3600));
    let after = futures::poll!(test_sleep.as_mut()).is_ready();
    println!("manual:   an hour-long sleep pending before advance: {before}; ready after: {after}");

    // 6b. a test clock for a whole runtime, multi-thread too: every
    // wheel::sleep in its tasks waits on it, and auto-advance jumps to the
    // next deadline once the runtime is idle. (Built and dropped outside
    // this runtime's async context, as any runtime must be.)
    let (hour, real) = tokio::task::spawn_blocking(|| {
        let rt = wheel::TestClock::new()
            .auto_advance(true)
            .build(
                tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all(),
            )
            .expect("a test runtime");
        let (start, real) = (rt.now(), std::time::Instant::now());
        rt.block_on(async {
            let task = tokio::spawn(async { wheel::sleep(Duration::from_secs(3600)).await });
            task.await.expect("the task slept");
        });
        (rt.now() - start, real.elapsed())
    })
    .await
    .expect("the test runtime ran");
    println!("test clock: an hour-long sleep on a 2-worker runtime: {hour:?} on its clock, {real:?} of yours");

    println!("\nstats, default timer:  {}", Timer::current().stats());
    println!("stats, explicit timer: {}", coarse.stats());

    // 7. Why switch: a server makes a timeout per request and cancels it
    // almost always. Both workers at it, as on a busy server; the CPU time
    // every thread spent, as `cargo bench --bench compare` counts it.
    let n = 100_000;
    let measured = tokio::task::spawn_blocking(move || request_timeouts(n)).await;
    match measured.expect("the measure ran") {
        Some(Some((tokio_ns, wheel_ns))) => println!(
            "\nwhy:      {n} request timeouts (1-5 s) made and cancelled on 2 busy workers, CPU per \
             timeout: tokio::time {tokio_ns:.0} ns, wheel {wheel_ns:.0} ns ({:.2}x), on {}.\n          \
             Median of 3 runs of this one; `cargo bench --bench compare` measures properly \
             (benches/README.md).",
            wheel_ns / tokio_ns,
            cpu_model()
        ),
        Some(None) => println!(
            "\nwhy:      (skipped: the two workers did not get a core each at once, 5 tries \
             running; `cargo bench --bench compare` waits for a quiet machine)"
        ),
        None => println!("\nwhy:      (skipped: it reads each thread's CPU time from Linux's /proc)"),
    }
    println!(
        "\nMore: cargo run --release --example idle_reaper (a TCP server reaping idle clients \
         with wheel::DelayQueue), cargo run --release --example callbacks (Netty-style retries \
         with backoff and cancellation), cargo run --release --features precise --example \
         pacing (timers finer than a millisecond), cargo test --all-features (the guarantees), \
         and the README."
    );
}

/// A tower service behind `wheel::tower::TimeoutLayer`: a fast handler
/// answers, a slow one gets tower's own `Elapsed` error.
async fn tower_timeout() {
    use tower::{service_fn, BoxError, ServiceBuilder, ServiceExt};

    let svc = ServiceBuilder::new()
        .layer(wheel::tower::TimeoutLayer::new(Duration::from_millis(50)))
        .service(service_fn(|delay: Duration| async move {
            wheel::sleep(delay).await;
            Ok::<_, BoxError>("answered")
        }));
    let fast = svc.clone().oneshot(Duration::ZERO).await;
    let slow = svc.oneshot(Duration::from_secs(10)).await.unwrap_err();
    println!(
        "tower:    fast handler -> {fast:?}; slow handler -> {slow} (tower's Elapsed: {})",
        slow.is::<tower::timeout::error::Elapsed>()
    );
}

/// CPU ns per timeout for `tokio::time::timeout` and `wheel::timeout` (1-5
/// s, as the bench's `churn` row, on a request still pending when first
/// polled, then dropped: registered and cancelled), `n` of each spread over
/// 4 tasks per worker, which yield every 256 so that both workers stay
/// busy. As `cargo bench --bench compare` does, each run has a fresh
/// 2-worker runtime (`enable_all`) and warms up first; the median of 3
/// runs a side, alternating. A run counts only if both workers ran at once
/// (see [`BOTH_BUSY`]); one that did not is run again, up to 5 times, and
/// then the measure gives up (`Some(None)`). `None` without `/proc`.
fn request_timeouts(n: usize) -> Option<Option<(f64, f64)>> {
    fn tokio_side(d: Duration) -> impl Future<Output = Result<(), tokio::time::error::Elapsed>> {
        tokio::time::timeout(d, std::future::pending())
    }
    fn wheel_side(d: Duration) -> impl Future<Output = Result<(), wheel::error::Elapsed>> {
        wheel::timeout(d, std::future::pending())
    }
    fn run<F: Future + Send + 'static>(n: usize, make: fn(Duration) -> F) -> Option<Option<f64>> {
        for _ in 0..5 {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("a runtime");
            let (cpu_ns, busy) = runtime.block_on(churn_timeouts(n, make))?;
            if busy >= BOTH_BUSY {
                return Some(Some(cpu_ns));
            }
        }
        Some(None)
    }
    let (mut tokio_runs, mut wheel_runs) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        let (Some(tokio_ns), Some(wheel_ns)) = (run(n, tokio_side)?, run(n, wheel_side)?) else {
            return Some(None);
        };
        tokio_runs.push(tokio_ns);
        wheel_runs.push(wheel_ns);
    }
    let median = |mut runs: Vec<f64>| {
        runs.sort_by(f64::total_cmp);
        runs[runs.len() / 2]
    };
    Some(Some((median(tokio_runs), median(wheel_runs))))
}

/// How busy the workers must have been, together, for a run to count: its
/// CPU time over its wall time, where 2.0 is both workers running all
/// along. Where another process takes one of two cores, the workers take
/// turns and tokio's shared timer lock is not fought over: its figure
/// falls to a fifth, which is not what this line is about. On the Xeon VM,
/// quiet: tokio's runs 1.72-1.76 busy at 852-939 ns a timeout, the
/// wheel's 1.96-1.99 at 263-267; with `yes` running beside: tokio's
/// 0.54-1.00 busy at 118-224 ns (and one CI run printed 181 ns, 1.41x).
const BOTH_BUSY: f64 = 1.5;

/// Makes `n` timeouts of 1-5 s with `make` on 8 tasks, each polled once and
/// dropped; CPU ns per timeout, all threads', and that CPU time over the
/// wall time (how many threads ran at once, on average). Each task warms
/// up with a tenth of its share, then all start together. `unconstrained`,
/// or tokio's cooperative budget would stop its timeouts from registering
/// after 128 polls.
async fn churn_timeouts<F: Future + Send + 'static>(
    n: usize,
    make: fn(Duration) -> F,
) -> Option<(f64, f64)> {
    const TASKS: usize = 8;
    let share = (n / TASKS) as u64;
    let (ready, go) = (
        std::sync::Arc::new(tokio::sync::Barrier::new(TASKS + 1)),
        std::sync::Arc::new(tokio::sync::Barrier::new(TASKS + 1)),
    );
    let tasks: Vec<_> = (0..TASKS as u64)
        .map(|task| {
            let (ready, go) = (ready.clone(), go.clone());
            tokio::spawn(tokio::task::unconstrained(async move {
                churn(make, task, share / 10).await;
                ready.wait().await;
                go.wait().await;
                churn(make, task, share).await;
            }))
        })
        .collect();
    ready.wait().await;
    // Every task waits at the start line and the workers have parked.
    let before = cpu_ns()?;
    let start = std::time::Instant::now();
    go.wait().await;
    for task in tasks {
        task.await.expect("a churning task panicked");
    }
    let wall = start.elapsed();
    let cpu = (cpu_ns()? - before) as f64;
    Some((cpu / n as f64, cpu / wall.as_nanos() as f64))
}

/// Task `task`'s `count` timeouts of 1-5 s (spread by a multiplicative hash
/// of the count), made with `make`, each polled once and dropped; it
/// requeues itself every 256.
async fn churn<F: Future>(make: fn(Duration) -> F, task: u64, count: u64) {
    for i in 0..count {
        let step = (task << 32 | i).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32;
        let timeout = pin!(make(
            Duration::from_secs(1) + Duration::from_nanos(step % 4_000_000_000)
        ));
        assert!(futures::poll!(timeout).is_pending());
        if i % 256 == 255 {
            requeue().await;
        }
    }
}

/// Puts the task at the back of its worker's run queue, where the other
/// worker, should it run short, steals it (`tokio::task::yield_now` would
/// keep it on its worker).
async fn requeue() {
    let mut woken = false;
    std::future::poll_fn(|cx| {
        if std::mem::replace(&mut woken, true) {
            std::task::Poll::Ready(())
        } else {
            cx.waker().wake_by_ref();
            std::task::Poll::Pending
        }
    })
    .await
}

/// The CPU time every thread of the process but the calling one has run, in
/// ns (`/proc/self/task/*/schedstat`), read once they have had 3 ms to park:
/// a running thread's count lags by up to a scheduler tick, and the caller
/// (`main`'s, which only waits) is always running. `None` without `/proc`.
fn cpu_ns() -> Option<u64> {
    std::thread::sleep(Duration::from_millis(3));
    let me = std::fs::read_link("/proc/thread-self").ok()?;
    let me = me.file_name()?;
    let mut sum = 0;
    for task in std::fs::read_dir("/proc/self/task").ok()? {
        let task = task.ok()?;
        if task.file_name() == me {
            continue;
        }
        // A thread that has just exited has no file left: nothing to add.
        if let Ok(stat) = std::fs::read_to_string(task.path().join("schedstat")) {
            sum += stat.split_whitespace().next()?.parse::<u64>().ok()?;
        }
    }
    Some(sum)
}

/// The CPU's model, from `/proc/cpuinfo`.
fn cpu_model() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|line| line.strip_prefix("model name")?.split_once(':'))
        .map_or("an unknown CPU", |(_, model)| model.trim());
    format!(
        "{model} ({} threads)",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    )
}
