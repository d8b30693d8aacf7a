//! A tour of `wheel`: sleep, timeout and interval on the default timer,
//! tower's request timeout on the wheel, an explicit timer with its own
//! tick, callbacks, a manual clock and a test clock, and the stats each
//! timer keeps; then a rough measure of why one would switch.
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
    // almost always. Both workers at it, as on a busy server.
    let n = 100_000;
    let (tokio_ns, wheel_ns) = request_timeouts(n).await;
    println!(
        "\nwhy:      {n} request timeouts made and cancelled on 2 busy workers: \
         tokio::time {tokio_ns:.0} ns each, wheel {wheel_ns:.0} ns each ({:.2}x).\n          \
         A rough figure from this run; `cargo bench --bench compare` measures properly \
         (benches/README.md).",
        wheel_ns / tokio_ns
    );
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

/// Wall-clock ns per timeout for `tokio::time::timeout` and `wheel::timeout`
/// (30 s, on a request that is still pending when first polled, then
/// dropped: registered and cancelled), `n` of each spread over two tasks.
/// Each side runs twice, alternating, after a warm-up; the best run counts.
async fn request_timeouts(n: usize) -> (f64, f64) {
    fn tokio_side() -> impl Future<Output = Result<(), tokio::time::error::Elapsed>> {
        tokio::time::timeout(Duration::from_secs(30), std::future::pending())
    }
    fn wheel_side() -> impl Future<Output = Result<(), wheel::error::Elapsed>> {
        wheel::timeout(Duration::from_secs(30), std::future::pending())
    }
    let (mut tokio_best, mut wheel_best) = (f64::MAX, f64::MAX);
    churn_timeouts(n / 10, tokio_side).await;
    churn_timeouts(n / 10, wheel_side).await;
    for _ in 0..2 {
        tokio_best = tokio_best.min(churn_timeouts(n, tokio_side).await);
        wheel_best = wheel_best.min(churn_timeouts(n, wheel_side).await);
    }
    (tokio_best, wheel_best)
}

/// Makes `n` timeouts with `make` on two tasks, polls each once and drops
/// it; wall-clock ns per timeout. `unconstrained`, or tokio's cooperative
/// budget would stop its timeouts from registering after 128 polls.
async fn churn_timeouts<F: Future + Send + 'static>(n: usize, make: fn() -> F) -> f64 {
    let start = Instant::now();
    let tasks: Vec<_> = (0..2)
        .map(|_| {
            tokio::spawn(tokio::task::unconstrained(async move {
                for _ in 0..n / 2 {
                    let timeout = pin!(make());
                    assert!(futures::poll!(timeout).is_pending());
                }
            }))
        })
        .collect();
    for task in tasks {
        task.await.expect("a churning task panicked");
    }
    start.elapsed().as_nanos() as f64 / n as f64
}
