//! A real server's timeouts, tested on the test clock in no real time: a
//! hyper HTTP/1 server on 127.0.0.1 and its client, on a 2-worker
//! `TestRuntime` with auto-advance.
//!
//! The server has three timeouts, all on the runtime's default timer (the
//! test clock, inside a `TestRuntime`):
//!
//! - hyper's `header_read_timeout` of 30 s, with [`wheel::Timer`] as hyper's
//!   timer (feature `hyper`);
//! - a [`wheel::tower::TimeoutLayer`] of 10 s (feature `tower`) around the
//!   handler, whose `/slow` route waits 60 s and whose `/fast` route answers
//!   at once; tower's `Elapsed` becomes `408 Request Timeout`, as
//!   tower-http's timeout layer answers;
//! - an idle-connection reaper on a [`wheel::DelayQueue`]: each accepted
//!   connection has an entry of 5 min, reset by each request, whose expiry
//!   closes the connection.
//!
//! hyper's header-read timeout counts from when hyper starts reading a
//! head, and hyper reads the next head as soon as a response is written, so
//! it is also a keep-alive connection's idle timeout. A connection is
//! handed to hyper once its first bytes arrive (as Go's `IdleTimeout` and
//! `ReadHeaderTimeout` split the wait): before that, it is the reaper's.
//!
//! The client, on the same runtime, checks each on the test clock
//! ([`wheel::now()`], read before and after; `Instant::now()` would read
//! real time):
//!
//! - `/fast`, three times on one connection: each answer comes with the
//!   clock where it was before the client connected;
//! - `/slow`: the 408 comes exactly 10 s after the clock's reading just
//!   before the request was sent;
//! - half a head: the connection closes, with no answer, exactly 30 s
//!   after the reading just before the bytes were written;
//! - a connection that says nothing closes exactly 5 min after the reading
//!   just before it connected.
//!
//! **Why exactly.** The test clock moves only when the runtime is idle, and
//! a request's loopback I/O in flight (the connect, the client's write,
//! the server's read, the answer) keeps it busy. So the server accepts the
//! connection, hyper reads the first bytes (and takes its header deadline
//! from its timer's `now`), and tower's layer is called (taking its
//! deadline) all at the instant the client read just before it acted. The
//! clock then moves only to deadlines: it starts at the wheel's tick 0 and
//! is moved to the end of a deadline's tick (125 µs each), so it is always
//! on the tick grid; a deadline 10 s, 30 s or 5 min (whole numbers of
//! ticks) after such an instant is on the grid too and does not round.
//! Each check so reads its timeout to the nanosecond. (A timeout that is
//! not a whole number of ticks would end at the end of its tick, up to
//! 125 µs later.) Were the clock to move while a request's I/O was in
//! flight, it would jump to the next deadline pending (hyper's 30 s, the
//! reaper's 5 min), and the check would see it.
//!
//! Run it with `cargo run --release --features hyper,tower --example
//! server_test_clock`: 5 min 40 s of the server's time in a few
//! milliseconds. `tests/server_test_clock.rs` runs each check on 1, 2 and
//! 4 workers, with this file as a module.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::poll_fn;
use std::net::SocketAddr;
use std::pin::Pin;
use std::time::Duration;

use hyper::body::{Body as _, Incoming};
use hyper::client::conn::http1::SendRequest;
use hyper::header::HOST;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};
use tokio::task::AbortHandle;
use tower::timeout::error::Elapsed;
use tower::{BoxError, ServiceBuilder};
use wheel::delay_queue::Key;
use wheel::{DelayQueue, TestClock, TestRuntime, Timer};

/// hyper's limit on reading a request head, from its first byte.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// tower's limit on answering a request.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// How long `/slow` takes: longer than [`REQUEST_TIMEOUT`].
pub const SLOW: Duration = Duration::from_secs(60);
/// A connection that starts no request for this long is closed.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(5 * 60);

/// A test runtime of `workers` workers whose clock jumps to the next
/// deadline whenever the runtime is idle.
pub fn runtime(workers: usize) -> TestRuntime {
    TestClock::new()
        .auto_advance(true)
        .build(
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(workers)
                .enable_all(),
        )
        .expect("a test runtime")
}

// ---- the server ----

/// The server, listening on 127.0.0.1; dropped, it stops accepting.
pub struct Server {
    /// Where it listens.
    pub addr: SocketAddr,
    accepting: AbortHandle,
}

impl Server {
    /// Binds 127.0.0.1 (port 0) and serves there. Call it inside the
    /// runtime: the server's timeouts are on its default timer.
    pub async fn start() -> Server {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1");
        let addr = listener.local_addr().expect("a local address");
        let (events, inbox) = mpsc::unbounded_channel();
        tokio::spawn(reaper(inbox));
        let accepting = tokio::spawn(accept(listener, events)).abort_handle();
        Server { addr, accepting }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

/// What a connection tells the reaper.
enum Event {
    /// Accepted: closed by sending on `kill`.
    Open { id: u64, kill: oneshot::Sender<()> },
    /// A request came in.
    Active { id: u64 },
    /// Gone by itself.
    Closed { id: u64 },
}

/// Owns the idle timeouts: one `DelayQueue` entry per open connection.
/// Ends when the listener and every connection are gone.
async fn reaper(mut events: mpsc::UnboundedReceiver<Event>) {
    let mut idle = DelayQueue::new();
    let mut keys: HashMap<u64, Key> = HashMap::new();
    loop {
        tokio::select! {
            Some(expired) = poll_fn(|cx| idle.poll_expired(cx)), if !idle.is_empty() => {
                let (id, kill): (u64, oneshot::Sender<()>) = expired.into_inner();
                keys.remove(&id);
                let _ = kill.send(());
            }
            event = events.recv() => match event {
                Some(Event::Open { id, kill }) => {
                    keys.insert(id, idle.insert((id, kill), IDLE_TIMEOUT));
                }
                Some(Event::Active { id }) => {
                    if let Some(key) = keys.get(&id) {
                        idle.reset(key, IDLE_TIMEOUT);
                    }
                }
                Some(Event::Closed { id }) => {
                    if let Some(key) = keys.remove(&id) {
                        idle.remove(&key);
                    }
                }
                None => return,
            },
        }
    }
}

/// Accepts connections until aborted, each served by a task of its own.
async fn accept(listener: TcpListener, events: mpsc::UnboundedSender<Event>) {
    for id in 0.. {
        match listener.accept().await {
            Ok((stream, _)) => {
                tokio::spawn(connection(stream, id, events.clone()));
            }
            Err(e) => {
                eprintln!("server_test_clock: accept: {e}");
                wheel::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

/// The handler: `/slow` takes [`SLOW`], anything else answers at once.
async fn handle(request: Request<Incoming>) -> Result<Response<String>, Infallible> {
    let path = request.uri().path();
    if path == "/slow" {
        wheel::sleep(SLOW).await;
    }
    Ok(Response::new(format!("hello {path}")))
}

/// tower's `Elapsed` as `408 Request Timeout`; other errors pass.
fn timed_out_as_408(
    result: Result<Response<String>, BoxError>,
) -> Result<Response<String>, BoxError> {
    match result {
        Err(e) if e.is::<Elapsed>() => {
            let mut response = Response::new(String::from("timed out"));
            *response.status_mut() = StatusCode::REQUEST_TIMEOUT;
            Ok(response)
        }
        other => other,
    }
}

/// One connection: the reaper's until its first bytes, then hyper's, until
/// it ends or the reaper closes it.
async fn connection(stream: TcpStream, id: u64, events: mpsc::UnboundedSender<Event>) {
    let (kill, killed) = oneshot::channel();
    if events.send(Event::Open { id, kill }).is_err() {
        return;
    }
    let active = events.clone();
    let service = ServiceBuilder::new()
        .map_request(move |request: Request<Incoming>| {
            let _ = active.send(Event::Active { id });
            request
        })
        .map_result(timed_out_as_408)
        .layer(wheel::tower::TimeoutLayer::new(REQUEST_TIMEOUT))
        .service_fn(handle);
    let serve = async move {
        // hyper's header timer starts when hyper starts reading: at the
        // first byte, not at the connect. (`peek`, not `readable`, which
        // may report a fresh socket readable with nothing to read.)
        if stream.peek(&mut [0; 1]).await.is_err() {
            return;
        }
        let _ = hyper::server::conn::http1::Builder::new()
            .timer(Timer::current())
            .header_read_timeout(HEADER_READ_TIMEOUT)
            .serve_connection(TokioIo::new(stream), TowerToHyperService::new(service))
            .await;
    };
    tokio::select! {
        () = serve => {
            let _ = events.send(Event::Closed { id });
        }
        // Reaped: dropping `serve` closes the socket.
        Ok(()) = killed => {}
    }
}

// ---- the client's checks, each on a connection of its own ----

/// A response's status and body.
async fn get(sender: &mut SendRequest<String>, path: &str) -> (StatusCode, String) {
    sender.ready().await.expect("the connection is ready");
    let request = Request::get(path)
        .header(HOST, "127.0.0.1")
        .body(String::new())
        .expect("a request");
    let response = sender.send_request(request).await.expect("a response");
    let status = response.status();
    let mut body = response.into_body();
    let mut bytes = Vec::new();
    while let Some(frame) = poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
        if let Ok(data) = frame.expect("a body frame").into_data() {
            bytes.extend_from_slice(&data);
        }
    }
    (status, String::from_utf8(bytes).expect("a text body"))
}

/// A hyper client connection to `addr`.
async fn connect(addr: SocketAddr) -> SendRequest<String> {
    let stream = TcpStream::connect(addr).await.expect("connect");
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .expect("an HTTP/1 handshake");
    tokio::spawn(connection);
    sender
}

/// Waits until the server closes `stream`, which must say nothing first.
async fn closed_by_the_server(stream: &mut TcpStream) {
    let mut byte = [0u8; 1];
    match stream.read(&mut byte).await {
        Ok(0) => {}
        // Closed with unread bytes: a reset.
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        other => panic!("expected the server to close the connection, read {other:?}"),
    }
}

/// `/fast`, three times on one connection: answered each time with the
/// test clock where it was.
pub async fn fast_route_answers_at_once(addr: SocketAddr) {
    let start = wheel::now();
    let mut sender = connect(addr).await;
    for _ in 0..3 {
        let answer = get(&mut sender, "/fast").await;
        assert_eq!(answer, (StatusCode::OK, "hello /fast".to_owned()));
        assert_eq!(wheel::now(), start, "the clock moved during a request");
    }
}

/// `/slow`: answered 408 exactly [`REQUEST_TIMEOUT`] after it was sent.
pub async fn slow_route_times_out(addr: SocketAddr) -> Duration {
    let mut sender = connect(addr).await;
    let sent = wheel::now();
    let answer = get(&mut sender, "/slow").await;
    let took = wheel::now() - sent;
    assert_eq!(
        answer,
        (StatusCode::REQUEST_TIMEOUT, "timed out".to_owned())
    );
    assert_eq!(
        took, REQUEST_TIMEOUT,
        "the request timeout, on the test clock"
    );
    took
}

/// Half a head: the connection is closed, with no answer, exactly
/// [`HEADER_READ_TIMEOUT`] after the client sent it.
pub async fn half_a_header_is_cut_off(addr: SocketAddr) -> Duration {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    let sent = wheel::now();
    stream
        .write_all(b"GET /fast HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .await
        .expect("half a head sent");
    closed_by_the_server(&mut stream).await;
    let took = wheel::now() - sent;
    assert_eq!(
        took, HEADER_READ_TIMEOUT,
        "hyper's header-read timeout, on the test clock"
    );
    took
}

/// A connection that says nothing: closed exactly [`IDLE_TIMEOUT`] after
/// it connected.
pub async fn idle_connection_is_reaped(addr: SocketAddr) -> Duration {
    let connected = wheel::now();
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    closed_by_the_server(&mut stream).await;
    let took = wheel::now() - connected;
    assert_eq!(
        took, IDLE_TIMEOUT,
        "the reaper's idle timeout, on the test clock"
    );
    took
}

fn main() {
    let real = std::time::Instant::now();
    let rt = runtime(2);
    let start = rt.now();
    rt.block_on(async {
        let server = Server::start().await;
        fast_route_answers_at_once(server.addr).await;
        println!("/fast: 200 three times, the clock unmoved");
        let took = slow_route_times_out(server.addr).await;
        println!("/slow: 408 after {took:?}");
        let took = half_a_header_is_cut_off(server.addr).await;
        println!("half a head: closed after {took:?}");
        let took = idle_connection_is_reaped(server.addr).await;
        println!("a silent connection: closed after {took:?}");
    });
    println!(
        "server_test_clock: {:?} on the test clock in {:.1?} of real time",
        rt.now() - start,
        real.elapsed()
    );
}
