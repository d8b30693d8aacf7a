//! The load generator: N keep-alive connections to 127.0.0.1, each with one
//! request outstanding, in a closed loop (send when the last response came)
//! or at a fixed total rate (each connection sends on its own schedule, and
//! one that falls behind sends at once until it has caught up).
//!
//! Latency is from the moment the request is written to the moment its
//! whole response has been read.
//!
//! It runs on a thread of its own, named `load`, with a current-thread
//! runtime (`enable_all`): the same client for every column. A fixed rate
//! is paced by another thread, `pacer`, not by `tokio::time`, whose 1 ms
//! ticks would send the requests in bursts (50 at each millisecond at
//! 50,000 req/s) and make the server's workers run flat out for a moment
//! and then sleep, which is not how a service's requests arrive. The pacer
//! sleeps with `std::thread::sleep` (about 60 µs a step here, the kernel's
//! timer slack included) and at each step hands out, as semaphore permits,
//! the requests that have come due since the last; a connection with a
//! permit sends. So requests leave a few at a time (about 3 per step at
//! 50,000 req/s), and a connection still waiting for its last response
//! leaves the permit to another: a server that falls behind faces the
//! whole rate, up to N requests outstanding, as from N clients.
//!
//! Bounded in count and time: every phase ends at a deadline, each
//! connection sends at most [`MAX_PER_CONN`] requests, and only loopback
//! addresses are used.

use std::net::SocketAddr;
use std::time::Duration;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Semaphore;
use tokio::time::Instant;

use crate::proc_stats::{self, Usage};
use crate::{Proto, Shape, REQUEST_LEN, RESPONSE_LEN};

/// A hard cap on the requests one connection sends in a run.
const MAX_PER_CONN: u64 = 5_000_000;

/// What one run of the load reports.
#[derive(Debug)]
pub(crate) struct LoadOut {
    /// Requests answered within the measured window.
    pub(crate) completed: u64,
    /// Their latencies, ns.
    pub(crate) latencies: Vec<u64>,
    pub(crate) window: Duration,
    /// The server threads' use over the window.
    pub(crate) server: Usage,
}

/// Connects `shape`'s connections to `addr`, runs `warm` unmeasured, then
/// `window` measured, reading the server threads' counters (threads whose
/// name starts with `srv`) at both ends of the window.
pub(crate) fn drive(
    addr: SocketAddr,
    proto: Proto,
    shape: Shape,
    warm: Duration,
    window: Duration,
) -> LoadOut {
    std::thread::Builder::new()
        .name("load".to_owned())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("the load generator's runtime");
            rt.block_on(run(addr, proto, shape, warm, window))
        })
        .expect("spawn the load generator")
        .join()
        .expect("the load generator panicked")
}

async fn run(
    addr: SocketAddr,
    proto: Proto,
    shape: Shape,
    warm: Duration,
    window: Duration,
) -> LoadOut {
    let conns = shape.conns();
    let mut streams = Vec::with_capacity(conns);
    for _ in 0..conns {
        let stream = TcpStream::connect(addr)
            .await
            .expect("connect to the server");
        stream.set_nodelay(true).expect("TCP_NODELAY");
        streams.push(stream);
    }
    let start = Instant::now() + Duration::from_millis(10);
    let measure_from = start + warm;
    let end = measure_from + window;
    let permits = match shape {
        Shape::Closed { .. } => None,
        Shape::Rate { per_sec, .. } => Some(pace(per_sec, start, end)),
    };
    let tasks: Vec<_> = streams
        .into_iter()
        .map(|stream| {
            let permits = permits.as_ref().map(|(s, _)| Arc::clone(s));
            tokio::spawn(connection(stream, proto, permits, measure_from, end))
        })
        .collect();
    // The window's ends, read from this task while the connections run:
    // reading blocks this thread for a moment, which only delays requests
    // due just then, the same for every column.
    tokio::time::sleep_until(measure_from).await;
    let before = proc_stats::sampled(|name| name.starts_with("srv"));
    tokio::time::sleep_until(end).await;
    let after = proc_stats::sampled(|name| name.starts_with("srv"));
    let mut latencies = Vec::new();
    for task in tasks {
        latencies.extend(task.await.expect("a load connection panicked"));
    }
    if let Some((_, pacer)) = permits {
        pacer.join().expect("the pacer panicked");
    }
    LoadOut {
        completed: latencies.len() as u64,
        latencies,
        window,
        server: after - before,
    }
}

/// Starts the pacer thread: from `start` to `end` it adds a permit to the
/// returned semaphore for each request due at `per_sec`, then closes it.
fn pace(
    per_sec: u64,
    start: Instant,
    end: Instant,
) -> (Arc<Semaphore>, std::thread::JoinHandle<()>) {
    let permits = Arc::new(Semaphore::new(0));
    let handed = Arc::clone(&permits);
    let (start, end) = (start.into_std(), end.into_std());
    let pacer = std::thread::Builder::new()
        .name("pacer".to_owned())
        .spawn(move || {
            let mut sent = 0u64;
            let done = AtomicBool::new(false);
            while !done.load(Ordering::Relaxed) {
                let now = std::time::Instant::now();
                if now >= end {
                    done.store(true, Ordering::Relaxed);
                } else if now >= start {
                    let due = ((now - start).as_secs_f64() * per_sec as f64) as u64;
                    if due > sent {
                        handed.add_permits((due - sent) as usize);
                        sent = due;
                    }
                }
                std::thread::sleep(Duration::from_micros(20));
            }
            handed.close();
        })
        .expect("spawn the pacer");
    (permits, pacer)
}

/// One connection: sends until `end`, when given a permit (a fixed rate)
/// or as soon as its last response came (closed loop); returns the
/// latencies of the requests sent within the measured window.
async fn connection(
    mut stream: TcpStream,
    proto: Proto,
    permits: Option<Arc<Semaphore>>,
    measure_from: Instant,
    end: Instant,
) -> Vec<u64> {
    let mut latencies = Vec::new();
    let mut buf = vec![0u8; 4096];
    for _ in 0..MAX_PER_CONN {
        if let Some(permits) = &permits {
            match permits.acquire().await {
                Ok(permit) => permit.forget(),
                // Closed: the run is over.
                Err(_) => break,
            }
        }
        let sent = Instant::now();
        if sent >= end {
            break;
        }
        if exchange(&mut stream, proto, &mut buf).await.is_err() {
            panic!("the server closed a connection during the run");
        }
        if sent >= measure_from {
            latencies.push((Instant::now() - sent).as_nanos() as u64);
        }
    }
    latencies
}

const HTTP_REQUEST: &[u8] = b"GET /hello HTTP/1.1\r\nhost: bench\r\n\r\n";

/// Sends one request and reads its whole response.
async fn exchange(stream: &mut TcpStream, proto: Proto, buf: &mut [u8]) -> std::io::Result<()> {
    match proto {
        Proto::Tcp => {
            stream.write_all(&[7u8; REQUEST_LEN]).await?;
            stream.read_exact(&mut buf[..RESPONSE_LEN]).await?;
        }
        Proto::Http => {
            stream.write_all(HTTP_REQUEST).await?;
            read_http_response(stream, buf).await?;
        }
    }
    Ok(())
}

/// Reads one HTTP/1.1 response with a `content-length` body (what hyper
/// sends for a `String` body). Responses never pipeline here, so whatever
/// was read belongs to this one.
async fn read_http_response(stream: &mut TcpStream, buf: &mut [u8]) -> std::io::Result<()> {
    let mut filled = 0;
    loop {
        let n = stream.read(&mut buf[filled..]).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        filled += n;
        let Some(head_end) = find(&buf[..filled], b"\r\n\r\n") else {
            continue;
        };
        let head = std::str::from_utf8(&buf[..head_end]).expect("an ASCII head");
        let body_len: usize = head
            .lines()
            .find_map(|line| {
                let (name, value) = line.split_once(':')?;
                name.eq_ignore_ascii_case("content-length")
                    .then(|| value.trim().parse().ok())?
            })
            .expect("a content-length");
        let total = head_end + 4 + body_len;
        while filled < total {
            let n = stream.read(&mut buf[filled..]).await?;
            if n == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            filled += n;
        }
        return Ok(());
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}
