//! `impl hyper::rt::Timer for wheel::Timer` (the `hyper` feature): a real
//! hyper HTTP/1 server and client on 127.0.0.1 whose header-read timeout is
//! enforced by the wheel, and the trait's `now`, `sleep_until` and `reset`
//! on a manual clock.
//!
//! The socket tests drive hyper with a manual timer: hyper's deadlines are
//! taken from that clock and fire only when the test advances it, so whether
//! a connection has timed out never depends on how fast the machine is. Real
//! time appears only as an upper bound on waits for other tasks. A server
//! over an in-memory pipe, on tokio's paused clock, is compared with
//! hyper-util's `TokioTimer`.

#[path = "hyper/io.rs"]
mod io;

use std::convert::Infallible;
use std::future::{poll_fn, Future};
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::body::{Body as _, Incoming};
use hyper::header::HOST;
use hyper::rt::{Sleep as HyperSleep, Timer as HyperTimer};
use hyper::{Request, Response, StatusCode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_test::{assert_pending, assert_ready, task};
use wheel::Timer;

use io::TokioIo;

mod common;

/// The servers' header-read timeout.
const HEADER_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a test waits, in real time, for another task to get somewhere.
const PATIENCE: Duration = Duration::from_secs(10);
const MS: Duration = Duration::from_millis(1);

fn manual() -> Timer {
    Timer::builder().manual().build().unwrap()
}

/// A connected pair on 127.0.0.1: (client end, server end).
async fn connected_pair() -> (TcpStream, TcpStream) {
    let listener = TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .unwrap();
    let client = TcpStream::connect(listener.local_addr().unwrap())
        .await
        .unwrap();
    let (server, _) = listener.accept().await.unwrap();
    (client, server)
}

/// Serves one connection with hyper's HTTP/1 server on `timer`, answering
/// `hello <path>`; the task ends with the connection.
fn serve(timer: &Timer, stream: TcpStream) -> JoinHandle<Result<(), hyper::Error>> {
    let service = hyper::service::service_fn(|request: Request<Incoming>| async move {
        let body = format!("hello {}", request.uri().path());
        Ok::<_, Infallible>(Response::new(body))
    });
    let connection = hyper::server::conn::http1::Builder::new()
        .timer(timer.clone())
        .header_read_timeout(HEADER_TIMEOUT)
        .serve_connection(TokioIo(stream), service);
    tokio::spawn(connection)
}

/// Waits (real time, bounded) until `done` holds.
async fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    while !done() {
        assert!(start.elapsed() < PATIENCE, "gave up waiting until {what}");
        tokio::time::sleep(MS).await;
    }
}

/// Awaits another task (real time, bounded).
async fn join<T>(what: &str, task: JoinHandle<T>) -> T {
    tokio::time::timeout(PATIENCE, task)
        .await
        .unwrap_or_else(|_| panic!("{what} never finished"))
        .unwrap()
}

/// A response body as text, without http-body-util: frame by frame.
async fn text(mut body: Incoming) -> String {
    let mut bytes = Vec::new();
    while let Some(frame) = poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
        if let Ok(data) = frame.unwrap().into_data() {
            bytes.extend_from_slice(&data);
        }
    }
    String::from_utf8(bytes).unwrap()
}

fn get(path: &str) -> Request<String> {
    Request::get(path)
        .header(HOST, "127.0.0.1")
        .body(String::new())
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_client_and_server_talk_http1_with_the_wheel_timing_headers() {
    let _guard = common::guard();
    let timer = manual();
    let (client, server) = connected_pair().await;
    let server = serve(&timer, server);
    // hyper arms its header timer on the wheel as soon as it waits for a head.
    wait_until("hyper armed its header timer", || {
        timer.stats().pending == 1
    })
    .await;

    let (mut send, connection) = hyper::client::conn::http1::handshake(TokioIo(client))
        .await
        .unwrap();
    let client = tokio::spawn(connection);

    let response = send.send_request(get("/first")).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(text(response.into_body()).await, "hello /first");
    // The head came in time: hyper dropped the timer, which never fired.
    let stats = timer.stats();
    assert_eq!((stats.fired, stats.cancelled), (0, 1));

    // Keep-alive: hyper re-arms for the next head. Just short of the timeout
    // on the timer's clock (hyper's clock too), the connection still serves.
    wait_until("hyper re-armed its header timer", || {
        timer.stats().pending == 1
    })
    .await;
    timer.advance(HEADER_TIMEOUT - MS);
    assert_eq!(timer.stats().fired, 0, "the header timeout fired early");
    // The client connection takes a moment to be ready for the next request.
    send.ready().await.unwrap();
    let response = send.send_request(get("/second")).await.unwrap();
    assert_eq!(text(response.into_body()).await, "hello /second");

    // The client hangs up: both ends close cleanly, nothing left in the wheel.
    drop(send);
    join("the client connection", client).await.unwrap();
    join("the server connection", server).await.unwrap();
    let stats = timer.stats();
    assert_eq!((stats.pending, stats.entries, stats.fired), (0, 0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_stalling_mid_head_is_cut_off_at_the_header_timeout() {
    let _guard = common::guard();
    let timer = manual();
    let (mut client, server) = connected_pair().await;
    let server = serve(&timer, server);
    // Part of a request head, without the blank line that would end it.
    client
        .write_all(b"GET /slow HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .await
        .unwrap();
    wait_until("hyper armed its header timer", || {
        timer.stats().pending == 1
    })
    .await;

    timer.advance(HEADER_TIMEOUT - MS);
    assert_eq!(timer.stats().fired, 0, "the header timeout fired early");
    assert!(!server.is_finished(), "the server gave up early");
    let mut byte = [0u8; 1];
    let still_open = client.try_read(&mut byte);
    assert!(
        matches!(&still_open, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the connection should be open and silent, read gave {still_open:?}"
    );

    timer.advance(MS);
    assert_eq!(timer.stats().fired, 1);
    let error = join("the server connection", server).await.unwrap_err();
    assert!(error.is_timeout(), "not a timeout: {error}");

    // The client sees the connection closed, with no response.
    let read = tokio::time::timeout(PATIENCE, client.read(&mut byte))
        .await
        .expect("the server never closed the connection");
    match read {
        Ok(n) => assert_eq!(n, 0, "the server answered a timed-out head"),
        Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset),
    }
    assert_eq!(timer.stats().entries, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtime_timer_enforces_the_header_timeout_in_real_time() {
    let _guard = common::guard();
    // The alarm-driven path, on the wall clock: nothing here can be early.
    let timer = Timer::builder().build().unwrap();
    let (mut client, server) = connected_pair().await;
    let start = timer.now();
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(timer.clone())
        .header_read_timeout(Duration::from_millis(50));
    let service = hyper::service::service_fn(|_: Request<Incoming>| async {
        Ok::<_, Infallible>(Response::new(String::new()))
    });
    let server = tokio::spawn(builder.serve_connection(TokioIo(server), service));
    client.write_all(b"GET / HTTP/1.1\r\n").await.unwrap();

    let error = join("the server connection", server).await.unwrap_err();
    assert!(error.is_timeout(), "not a timeout: {error}");
    assert!(timer.now() - start >= Duration::from_millis(50), "early");
    assert_eq!(timer.stats().fired, 1);
}

/// Where a boxed sleep lives: the same address means the same allocation.
fn address(sleep: &Pin<Box<dyn HyperSleep>>) -> *const () {
    std::ptr::from_ref::<dyn HyperSleep>(&**sleep).cast()
}

#[test]
fn reset_moves_a_pending_sleep_in_place() {
    let _guard = common::guard();
    let timer = manual();
    let start = HyperTimer::now(&timer);
    let mut sleep = task::spawn(HyperTimer::sleep(&timer, Duration::from_secs(10)));
    assert_pending!(sleep.poll());
    let before = address(&sleep);

    HyperTimer::reset(&timer, &mut sleep, start + Duration::from_secs(1));
    assert_eq!(address(&sleep), before, "reset allocated a new sleep");
    let stats = timer.stats();
    assert_eq!((stats.entries, stats.pending, stats.cancelled), (1, 1, 0));

    timer.advance(Duration::from_secs(1) - MS);
    assert!(!sleep.is_woken(), "woken before the new deadline");
    timer.advance(MS);
    // The waker registered before the reset is the one woken: hyper's task
    // need not poll the sleep again after resetting it.
    assert!(sleep.is_woken());
    assert_ready!(sleep.poll());
    let stats = timer.stats();
    assert_eq!((stats.entries, stats.fired, stats.cancelled), (0, 1, 0));
}

#[test]
fn reset_to_a_later_deadline_skips_the_old_one() {
    let _guard = common::guard();
    let timer = manual();
    let start = HyperTimer::now(&timer);
    let mut sleep = task::spawn(HyperTimer::sleep(&timer, Duration::from_secs(1)));
    assert_pending!(sleep.poll());
    HyperTimer::reset(&timer, &mut sleep, start + Duration::from_secs(5));
    timer.advance(Duration::from_secs(5) - MS);
    assert!(!sleep.is_woken());
    assert_eq!(timer.stats().fired, 0);
    timer.advance(MS);
    assert!(sleep.is_woken());
    assert_ready!(sleep.poll());
}

#[test]
fn reset_after_completion_completes_again_at_the_new_deadline() {
    let _guard = common::guard();
    let timer = manual();
    let mut sleep = task::spawn(HyperTimer::sleep(&timer, Duration::from_secs(1)));
    assert_pending!(sleep.poll());
    timer.advance(Duration::from_secs(1));
    assert_ready!(sleep.poll());

    let again = HyperTimer::now(&timer) + Duration::from_secs(2);
    HyperTimer::reset(&timer, &mut sleep, again);
    assert_pending!(sleep.poll());
    timer.advance(Duration::from_secs(2) - MS);
    assert_pending!(sleep.poll());
    timer.advance(MS);
    assert_ready!(sleep.poll());
}

#[test]
fn a_sleep_of_another_timer_is_replaced_not_reset() {
    let _guard = common::guard();
    let (ours, theirs) = (manual(), manual());
    let mut sleep = task::spawn(HyperTimer::sleep(&theirs, Duration::from_secs(10)));
    assert_pending!(sleep.poll());
    let before = address(&sleep);

    let deadline = HyperTimer::now(&ours) + Duration::from_secs(1);
    HyperTimer::reset(&ours, &mut sleep, deadline);
    assert_ne!(address(&sleep), before);
    assert_eq!(theirs.stats().pending, 0, "the old sleep was not dropped");
    assert_pending!(sleep.poll());
    assert_eq!(ours.stats().pending, 1);

    // Only our clock fires it: the deadline was read on ours.
    theirs.advance(Duration::from_secs(10));
    assert!(!sleep.is_woken());
    ours.advance(Duration::from_secs(1));
    assert!(sleep.is_woken());
    assert_ready!(sleep.poll());
}

/// Some other runtime's sleep, as hyper could hold after a timer swap.
struct Forever;

impl Future for Forever {
    type Output = ();

    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        Poll::Pending
    }
}

impl HyperSleep for Forever {}

/// Found by review: a sleep holds its shard, not its timer, so a timer
/// built after the first was dropped could sit at its address; telling the
/// timers apart by address, the new one took the old one's sleep for its
/// own and moved it in place, on the dead timer's clock. A sleep is the
/// timer's if its shard is, which the sleep keeps alive.
#[test]
fn a_sleep_of_a_dropped_timer_is_replaced_not_reset_by_another() {
    let _guard = common::guard();
    for _ in 0..100 {
        let first = manual();
        let mut sleep = HyperTimer::sleep(&first, Duration::from_secs(3600));
        drop(first);
        let second = manual();
        let deadline = HyperTimer::now(&second) + Duration::from_secs(1);
        HyperTimer::reset(&second, &mut sleep, deadline);
        second.advance(Duration::from_secs(1));
        let polled = sleep
            .as_mut()
            .poll(&mut Context::from_waker(std::task::Waker::noop()));
        assert!(polled.is_ready(), "left on the dropped timer's clock");
    }
}

#[test]
fn a_foreign_sleep_is_replaced_by_one_on_the_wheel() {
    let _guard = common::guard();
    let timer = manual();
    let mut sleep = task::spawn(Box::pin(Forever) as Pin<Box<dyn HyperSleep>>);
    assert_pending!(sleep.poll());
    let deadline = HyperTimer::now(&timer) + Duration::from_secs(1);
    HyperTimer::reset(&timer, &mut sleep, deadline);
    assert_pending!(sleep.poll());
    assert_eq!(timer.stats().pending, 1);
    timer.advance(Duration::from_secs(1));
    assert!(sleep.is_woken());
    assert_ready!(sleep.poll());
}

#[test]
fn now_follows_the_manual_clock() {
    let _guard = common::guard();
    let timer = manual();
    let start = HyperTimer::now(&timer);
    assert_eq!(start, timer.now().into_std());
    std::thread::sleep(Duration::from_millis(5));
    assert_eq!(HyperTimer::now(&timer), start, "moved with the wall clock");
    timer.advance(Duration::from_secs(30));
    assert_eq!(HyperTimer::now(&timer) - start, Duration::from_secs(30));
}

#[test]
fn sleep_until_fires_at_a_deadline_on_the_timers_clock() {
    let _guard = common::guard();
    let timer = manual();
    let deadline = HyperTimer::now(&timer) + Duration::from_millis(250);
    let mut sleep = task::spawn(HyperTimer::sleep_until(&timer, deadline));
    assert_pending!(sleep.poll());
    timer.advance(Duration::from_millis(249));
    assert!(!sleep.is_woken());
    timer.advance(MS);
    assert!(sleep.is_woken());
    assert_ready!(sleep.poll());
    assert_eq!(HyperTimer::now(&timer), deadline);
}

/// One step of a program run on a hyper timer's sleep.
#[derive(Debug, Clone, Copy)]
enum Step {
    /// Poll the sleep.
    Poll,
    /// Advance tokio's paused clock by this many µs.
    Advance(u64),
    /// `Timer::reset` to this many µs after the start (before it: in the past).
    Reset(i64),
    /// Replace the sleep by `sleep_until` this many µs after the start.
    SleepUntil(i64),
    /// Replace the sleep by `sleep` for this many µs.
    Sleep(u64),
}

/// A random program from `seed`, starting with a sleep.
fn program(seed: u64) -> Vec<Step> {
    let mut state = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
    let mut next = move |n: u64| {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (state >> 33) % n
    };
    let mut steps = vec![Step::Sleep(next(5_000))];
    for _ in 0..12 {
        let us = [0, 1, 125, 500, 999, 1_000, 1_001, 2_500, 7_000][next(9) as usize];
        steps.push(match next(10) {
            0..=3 => Step::Poll,
            4..=6 => Step::Advance(us),
            7 => Step::Reset(next(20_000) as i64 - 2_000),
            8 => Step::SleepUntil(next(20_000) as i64 - 2_000),
            _ => Step::Sleep(us),
        });
    }
    steps
}

/// What each step saw: the poll's outcome, and whether the task was woken.
fn run_program(steps: &[Step], wheel_timer: bool) -> Vec<String> {
    let rt = common::paused_unguarded();
    rt.block_on(async {
        let timer: Box<dyn HyperTimer> = if wheel_timer {
            Box::new(Timer::builder().build().unwrap())
        } else {
            Box::new(hyper_util::rt::TokioTimer::new())
        };
        let start = timer.now();
        let at = |us: i64| {
            if us >= 0 {
                start + Duration::from_micros(us as u64)
            } else {
                start - Duration::from_micros(us.unsigned_abs())
            }
        };
        let mut sleep = task::spawn(timer.sleep(Duration::MAX));
        let mut trace = Vec::new();
        // Whether the sleep has completed: a reset then wakes no one until
        // polled again (tokio's wakes the last poller), a listed difference.
        let mut completed = false;
        let mut masked = false;
        for step in steps {
            masked |= matches!(step, Step::Reset(_)) && completed;
            masked &= !matches!(step, Step::Sleep(_) | Step::SleepUntil(_));
            let reset_completed = masked;
            masked &= !matches!(step, Step::Poll);
            let seen = match *step {
                Step::Poll => {
                    let polled = sleep.poll();
                    completed = polled.is_ready();
                    format!("{polled:?}")
                }
                Step::Advance(us) => {
                    tokio::time::advance(Duration::from_micros(us)).await;
                    String::new()
                }
                Step::Reset(us) => {
                    timer.reset(&mut sleep, at(us));
                    completed = false;
                    String::new()
                }
                Step::SleepUntil(us) => {
                    sleep = task::spawn(timer.sleep_until(at(us)));
                    completed = false;
                    String::new()
                }
                Step::Sleep(us) => {
                    sleep = task::spawn(timer.sleep(Duration::from_micros(us)));
                    completed = false;
                    String::new()
                }
            };
            // Let the runtime's timers fire.
            tokio::task::yield_now().await;
            let woken = if reset_completed {
                let _ = sleep.is_woken();
                "-".to_owned()
            } else {
                sleep.is_woken().to_string()
            };
            trace.push(format!("{step:?} {seen} woken={woken}"));
        }
        trace
    })
}

#[test]
fn programs_on_a_paused_clock_match_hyper_utils_tokio_timer() {
    let _guard = common::guard();
    for seed in 0..3000 {
        let steps = program(seed);
        let wheel = run_program(&steps, true);
        let tokio = run_program(&steps, false);
        assert_eq!(wheel, tokio, "seed {seed}: {steps:?}");
    }
}

/// How long a server with `header_read_timeout` of `timeout` on `timer`
/// takes, on the paused clock, to close an in-memory connection that sent
/// half a head; after answering one request first if `keep_alive` (the
/// idle keep-alive connection is then closed by the same timeout).
async fn half_head_closed_after<T>(timer: T, timeout: Duration, keep_alive: bool) -> Duration
where
    T: HyperTimer + Send + Sync + 'static,
{
    let (mut client, server) = tokio::io::duplex(4096);
    let service = hyper::service::service_fn(|_: Request<Incoming>| async {
        Ok::<_, Infallible>(Response::new(String::from("ok")))
    });
    let connection = tokio::spawn(async move {
        let _ = hyper::server::conn::http1::Builder::new()
            .timer(timer)
            .header_read_timeout(timeout)
            .serve_connection(hyper_util::rt::TokioIo::new(server), service)
            .await;
    });
    let mut buf = [0u8; 256];
    let start = if keep_alive {
        client
            .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        assert!(client.read(&mut buf).await.unwrap() > 0, "an answer");
        tokio::time::Instant::now()
    } else {
        let start = tokio::time::Instant::now();
        client
            .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n")
            .await
            .unwrap();
        start
    };
    assert_eq!(client.read(&mut buf).await.unwrap(), 0, "closed, no answer");
    connection.await.unwrap();
    start.elapsed()
}

/// hyper's header-read timeout, on a whole server over an in-memory pipe
/// and tokio's paused clock, ends where it does with hyper-util's
/// `TokioTimer`: on the default timer and on a timer of its own, with
/// timeouts on and off the millisecond, and below one.
#[tokio::test(start_paused = true)]
async fn a_servers_header_timeout_on_a_paused_clock_matches_tokio_timer() {
    for keep_alive in [false, true] {
        for timeout in [1_000_000, 1_500_000, 5_000_000_000, 1].map(Duration::from_nanos) {
            let tokio =
                half_head_closed_after(hyper_util::rt::TokioTimer::new(), timeout, keep_alive)
                    .await;
            let default = half_head_closed_after(Timer::current(), timeout, keep_alive).await;
            let own =
                half_head_closed_after(Timer::builder().build().unwrap(), timeout, keep_alive)
                    .await;
            assert_eq!(
                (default, own),
                (tokio, tokio),
                "{timeout:?}, keep-alive {keep_alive}"
            );
        }
    }
}
