//! Pacing: a sender that must emit 20,000 events a second, one every 50 µs,
//! to a consumer, for one second: QUIC pacing, media, a load generator.
//! Once with `tokio::time::sleep_until`, once with a precise wheel timer
//! (`Builder::precise`, a 50 µs tick, no slack), each printing how evenly
//! the events went out and how many went out late.
//!
//! Run it with `cargo run --release --features precise --example pacing`
//! (Linux). It takes about two seconds.

use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;

/// One event every this long.
const SPACING: Duration = Duration::from_micros(50);
/// Events sent in each run: one second's worth.
const EVENTS: u32 = 20_000;
/// An event sent more than this after its slot counts as late.
const LATE: Duration = Duration::from_micros(100);

#[tokio::main]
async fn main() {
    println!(
        "pacing {EVENTS} events, one every {} µs, for one second\n",
        SPACING.as_micros()
    );
    let tokio = pace("tokio::time::sleep_until", None).await;
    // A pacer wants every tick: with the default slack (100 µs), events
    // due soon after a wake-up would wait for the next one and go out in
    // small bursts, which saves CPU where many timers share the timer.
    let timer = wheel::Timer::builder()
        .tick(SPACING)
        .precise()
        .slack(Duration::ZERO)
        .build()
        .expect("a precise timer (Linux, and a runtime with IO)");
    let precise = pace("wheel, precise 50 µs timer", Some(timer)).await;
    println!(
        "\nlate events: tokio {tokio}, precise wheel {precise} (of {EVENTS}; late: over {} µs after its slot)",
        LATE.as_micros()
    );
}

/// Sends [`EVENTS`] events [`SPACING`] apart, each at its slot, on `timer`
/// (or `tokio::time` if `None`), to a consumer task that notes when each
/// arrives; prints the spacing the consumer saw, and returns how many were
/// sent late.
async fn pace(name: &str, timer: Option<wheel::Timer>) -> u32 {
    let (tx, mut rx) = mpsc::channel::<Instant>(1024);
    let consumer = tokio::spawn(async move {
        let mut arrivals = Vec::with_capacity(EVENTS as usize);
        while let Some(_sent) = rx.recv().await {
            arrivals.push(Instant::now());
        }
        arrivals
    });
    let start = Instant::now() + Duration::from_millis(10);
    let mut late = 0;
    for i in 0..EVENTS {
        let slot = start + SPACING * i;
        match &timer {
            Some(timer) => timer.sleep_until(slot).await,
            None => tokio::time::sleep_until(slot).await,
        }
        let sent = Instant::now();
        assert!(sent >= slot, "sent before its slot");
        late += u32::from(sent - slot > LATE);
        tx.send(sent).await.expect("the consumer is there");
    }
    drop(tx);
    let arrivals = consumer.await.expect("the consumer finished");
    let mut gaps: Vec<Duration> = arrivals.windows(2).map(|w| w[1] - w[0]).collect();
    gaps.sort_unstable();
    let at = |p: usize| gaps[(gaps.len() * p / 100).min(gaps.len() - 1)];
    println!(
        "{name:28} spacing p50 {:>6.1} µs, p99 {:>7.1} µs; took {:.3} s; sent late: {late}",
        at(50).as_secs_f64() * 1e6,
        at(99).as_secs_f64() * 1e6,
        (arrivals[arrivals.len() - 1] - start).as_secs_f64(),
    );
    late
}
