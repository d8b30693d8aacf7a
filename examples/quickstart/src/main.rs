use std::time::Duration;

use futures::StreamExt; // a DelayQueue is a Stream

#[tokio::main]
async fn main() {
    // tokio::time's API: swap `tokio::time::` for `wheel::`.
    wheel::sleep(Duration::from_millis(10)).await;
    let answer = wheel::timeout(Duration::from_secs(1), async { 42 }).await;
    assert_eq!(answer, Ok(42));
    let mut every = wheel::interval(Duration::from_millis(10));
    every.tick().await; // the first tick completes at once
    every.tick().await;

    // A timer of your own: a coarse tick for idle timeouts.
    let idle = wheel::Timer::builder()
        .tick(Duration::from_millis(100))
        .build()
        .expect("valid geometry");
    idle.sleep(Duration::from_millis(150)).await; // rounded up to 200 ms, never down

    // A callback with a cancel handle, as Netty's newTimeout.
    let retry = idle.schedule(Duration::from_secs(5), || println!("retrying"));
    assert!(retry.cancel());

    // A keyed expiration queue, as tokio-util's DelayQueue.
    let mut sessions = wheel::DelayQueue::new();
    let first = sessions.insert("session 1", Duration::from_millis(30));
    sessions.insert("session 2", Duration::from_millis(20));
    sessions.reset(&first, Duration::from_millis(100)); // a heartbeat
    let expired = sessions.next().await.expect("session 2 is due");
    assert_eq!(expired.into_inner(), "session 2");

    println!("{}", idle.stats());
}
