//! An idle-connection reaper: a TCP server on 127.0.0.1 that closes every
//! connection silent for 300 ms, with one keyed `DelayQueue` entry per
//! connection, reset on every heartbeat line.
//!
//! The design is the timing-wheel classic for connection managers: on
//! connect, a connection goes into the wheel; each heartbeat resets its
//! timer; when the timer runs out the connection is closed. Here
//!
//! - a *connection task* per socket reads lines and reports `Open`,
//!   `Heartbeat` and `Closed` over a bounded mpsc channel;
//! - one *reaper task* owns the `DelayQueue` (the value is the connection's
//!   kill switch, a oneshot sender) and a map from connection id to `Key`;
//!   an expired entry is a connection to close.
//!
//! The same process runs the load: 2,000 clients (pass another count as the
//! first argument), staggered over about a second. Four in five send a
//! heartbeat every 100 ms five times, then close; one in five goes silent
//! after 0 to 2 heartbeats and must be reaped, no sooner than 300 ms after
//! its last word. About half the clients are connected at once (the summary
//! prints the peak, about 1,000), each using two descriptors since both ends
//! live in this process: some 2,000 descriptors, which a default soft limit
//! of 1,024 (`ulimit -n`) would not allow, so the client count is lowered to
//! fit the limit when it is that small, and the run says so.
//!
//! Run it with `cargo run --release --example idle_reaper`. It takes about
//! 2 s, prints one summary line, and exits non-zero if the counts do not add
//! up (every client served, exactly the silent ones reaped, none early).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};
use wheel::delay_queue::{DelayQueue, Key};
use wheel::{Instant, Timer};

const CLIENTS: usize = 2_000;
/// A connection silent this long is closed.
const IDLE_TIMEOUT: Duration = Duration::from_millis(300);
/// How often a live client speaks, and how many times before it leaves.
const HEARTBEAT_EVERY: Duration = Duration::from_millis(100);
const HEARTBEATS: usize = 5;
/// Clients start this far apart, so connects do not all hit the backlog at
/// once.
const STAGGER: Duration = Duration::from_micros(500);
/// The whole run must finish within this, or it counts as a failure.
const DEADLINE: Duration = Duration::from_secs(30);
/// What the server says to a connection it reaps.
const BYE: &str = "bye: idle";

/// What a connection task tells the reaper.
enum Event {
    Open { id: u64, kill: oneshot::Sender<()> },
    Heartbeat { id: u64 },
    Closed { id: u64 },
}

/// What the reaper saw, returned when the last connection is gone.
#[derive(Debug, Default)]
struct Reaped {
    count: usize,
    closed_by_client: usize,
    heartbeats: usize,
    /// Reaped before its deadline (must stay 0).
    early: usize,
    /// How long after its deadline the latest reap came.
    max_late: Duration,
}

/// Owns the idle timeouts: one `DelayQueue` entry per open connection.
async fn reaper(mut events: mpsc::Receiver<Event>, timer: Timer) -> Reaped {
    let mut idle: DelayQueue<(u64, oneshot::Sender<()>)> = DelayQueue::with_timer(timer);
    let mut keys: HashMap<u64, Key> = HashMap::new();
    let mut seen = Reaped::default();
    loop {
        tokio::select! {
            // Expiries first: there are only so many due at once, so events
            // are never starved, whereas a steady stream of heartbeats
            // polled first could hold reaping off indefinitely. (A heartbeat
            // still in the channel at its connection's deadline means the
            // reaper is lagging by over 200 ms; it then counts as too late.)
            biased;
            Some(expired) = idle.next(), if !idle.is_empty() => {
                let now = Instant::now();
                if now < expired.deadline() {
                    seen.early += 1;
                }
                seen.max_late = seen.max_late.max(now.saturating_duration_since(expired.deadline()));
                let (id, kill) = expired.into_inner();
                keys.remove(&id);
                seen.count += 1;
                let _ = kill.send(());
            }
            event = events.recv() => match event {
                Some(Event::Open { id, kill }) => {
                    keys.insert(id, idle.insert((id, kill), IDLE_TIMEOUT));
                }
                Some(Event::Heartbeat { id }) => {
                    seen.heartbeats += 1;
                    // Absent if already reaped: its kill switch is on the way.
                    if let Some(key) = keys.get(&id) {
                        idle.reset(key, IDLE_TIMEOUT);
                    }
                }
                Some(Event::Closed { id }) => {
                    seen.closed_by_client += 1;
                    if let Some(key) = keys.remove(&id) {
                        idle.remove(&key);
                    }
                }
                // Every connection and the listener are gone.
                None => return seen,
            },
        }
    }
}

/// Connections served, open now, and open at the peak.
#[derive(Debug, Default)]
struct Counts {
    served: AtomicUsize,
    open: AtomicUsize,
    peak: AtomicUsize,
}

/// Accepts connections until aborted.
async fn accept_loop(listener: TcpListener, events: mpsc::Sender<Event>, counts: Arc<Counts>) {
    let mut next_id = 0;
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                tokio::spawn(serve(stream, next_id, events.clone(), counts.clone()));
                next_id += 1;
            }
            Err(e) => {
                eprintln!("idle_reaper: accept: {e}");
                wheel::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

/// One connection: heartbeats go to the reaper until the client closes or
/// the reaper pulls the kill switch.
async fn serve(stream: TcpStream, id: u64, events: mpsc::Sender<Event>, counts: Arc<Counts>) {
    let open = counts.open.fetch_add(1, Ordering::Relaxed) + 1;
    counts.peak.fetch_max(open, Ordering::Relaxed);
    let (kill, mut killed) = oneshot::channel();
    if events.send(Event::Open { id, kill }).await.is_err() {
        return;
    }
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read).lines();
    let reaped = loop {
        tokio::select! {
            Ok(()) = &mut killed => break true,
            line = lines.next_line() => match line {
                Ok(Some(_)) => {
                    let _ = events.send(Event::Heartbeat { id }).await;
                }
                Ok(None) | Err(_) => break false,
            },
        }
    };
    if reaped {
        let _ = write.write_all(format!("{BYE}\n").as_bytes()).await;
    } else {
        let _ = events.send(Event::Closed { id }).await;
    }
    counts.open.fetch_sub(1, Ordering::Relaxed);
    counts.served.fetch_add(1, Ordering::Relaxed);
}

/// How a client's connection ended.
#[derive(Debug)]
enum Outcome {
    /// Left after its heartbeats, and was not reaped.
    Left,
    /// Went silent and was reaped this long after its last word.
    Reaped(Duration),
    /// Something else: a refused connect, a reap of a live client, ...
    Failed(String),
}

/// A client: `silent_after` heartbeats (then silence), or all of them.
async fn client(addr: SocketAddr, silent_after: Option<usize>) -> Outcome {
    // Taken *before* connecting and before each write: the server can only
    // react after that, so its idle clock starts no earlier than ours.
    let mut last_word = Instant::now();
    let stream = match TcpStream::connect(addr).await {
        Ok(stream) => stream,
        Err(e) => return Outcome::Failed(format!("connect: {e}")),
    };
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read).lines();
    for _ in 0..silent_after.unwrap_or(HEARTBEATS) {
        wheel::sleep(HEARTBEAT_EVERY).await;
        last_word = Instant::now();
        if let Err(e) = write.write_all(b"heartbeat\n").await {
            return Outcome::Failed(format!("heartbeat: {e}"));
        }
    }
    if silent_after.is_none() {
        if let Err(e) = write.shutdown().await {
            return Outcome::Failed(format!("shutdown: {e}"));
        }
    }
    match (lines.next_line().await, silent_after) {
        (Ok(None), None) => Outcome::Left,
        (Ok(Some(line)), Some(_)) if line == BYE => Outcome::Reaped(last_word.elapsed()),
        (Ok(Some(line)), None) if line == BYE => Outcome::Failed("a live client was reaped".into()),
        (other, _) => Outcome::Failed(format!("unexpected end: {other:?}")),
    }
}

/// The soft open-file limit, where the platform says (Linux).
fn open_file_limit() -> Option<usize> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let mut clients = match std::env::args().nth(1) {
        Some(n) => n.parse().expect("the first argument is a client count"),
        None => CLIENTS,
    };
    // Two descriptors per connection (both ends live in this process), plus
    // room for the runtime.
    if let Some(limit) = open_file_limit() {
        let fits = limit.saturating_sub(64) / 2;
        if clients > fits {
            eprintln!("idle_reaper: open-file limit {limit} (ulimit -n): {fits} clients instead of {clients}");
            clients = fits;
        }
    }
    let silent = |i: usize| (i % 5 == 4).then_some(i % 3);

    // Connection timeouts need no millisecond precision: a 10 ms tick.
    let timer = Timer::builder()
        .tick(Duration::from_millis(10))
        .build()
        .expect("valid timer");
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1");
    let addr = listener.local_addr().expect("local address");
    let (events, inbox) = mpsc::channel(1024);
    let counts = Arc::new(Counts::default());
    let reaper = tokio::spawn(reaper(inbox, timer.clone()));
    let server = tokio::spawn(accept_loop(listener, events, counts.clone()));

    let start = Instant::now();
    let load = async {
        let tasks: Vec<_> = (0..clients)
            .map(|i| {
                tokio::spawn(async move {
                    wheel::sleep(STAGGER * i as u32).await;
                    client(addr, silent(i)).await
                })
            })
            .collect();
        let mut outcomes = Vec::with_capacity(tasks.len());
        for task in tasks {
            outcomes.push(
                task.await
                    .unwrap_or_else(|e| Outcome::Failed(e.to_string())),
            );
        }
        server.abort();
        let _ = server.await;
        let reaped = reaper.await.expect("the reaper panicked");
        (outcomes, reaped)
    };
    let Ok((outcomes, reaped)) = wheel::timeout(DEADLINE, load).await else {
        eprintln!("idle_reaper: FAILED: not done within {DEADLINE:?}");
        return ExitCode::FAILURE;
    };
    let took = start.elapsed();

    let served = counts.served.load(Ordering::Relaxed);
    let peak = counts.peak.load(Ordering::Relaxed);
    let want_silent = (0..clients).filter(|&i| silent(i).is_some()).count();
    let left = outcomes
        .iter()
        .filter(|o| matches!(o, Outcome::Left))
        .count();
    let idle: Vec<Duration> = outcomes
        .iter()
        .filter_map(|o| match o {
            Outcome::Reaped(after) => Some(*after),
            _ => None,
        })
        .collect();
    let failures: Vec<&String> = outcomes
        .iter()
        .filter_map(|o| match o {
            Outcome::Failed(why) => Some(why),
            _ => None,
        })
        .collect();
    let (min_idle, max_idle) = (
        idle.iter().min().copied().unwrap_or_default(),
        idle.iter().max().copied().unwrap_or_default(),
    );

    println!(
        "idle_reaper: {clients} clients ({want_silent} going silent): served {served}, reaped {}, \
         closed by the client {}, heartbeats {}, peak {peak} open; silent clients reaped {min_idle:.0?}-{max_idle:.0?} \
         after their last word (timeout {IDLE_TIMEOUT:?}, tick {:?}, reaps at most {:.0?} late); \
         {took:.2?}; timer: {}",
        reaped.count,
        reaped.closed_by_client,
        reaped.heartbeats,
        timer.tick(),
        reaped.max_late,
        timer.stats(),
    );

    let mut wrong = Vec::new();
    if served != clients {
        wrong.push(format!("served {served} of {clients}"));
    }
    if reaped.count != want_silent || idle.len() != want_silent {
        wrong.push(format!(
            "reaped {} (clients saw {}), expected {want_silent}",
            reaped.count,
            idle.len()
        ));
    }
    if left != clients - want_silent || reaped.closed_by_client != left {
        wrong.push(format!(
            "{left} clients left normally, the server saw {}, expected {}",
            reaped.closed_by_client,
            clients - want_silent
        ));
    }
    if reaped.early > 0 || min_idle < IDLE_TIMEOUT && !idle.is_empty() {
        wrong.push(format!(
            "reaped early: {} before their deadline; shortest silence {min_idle:?}",
            reaped.early
        ));
    }
    if let Some(first) = failures.first() {
        wrong.push(format!("{} clients failed, first: {first}", failures.len()));
    }
    if wrong.is_empty() {
        ExitCode::SUCCESS
    } else {
        eprintln!("idle_reaper: FAILED: {}", wrong.join("; "));
        ExitCode::FAILURE
    }
}
