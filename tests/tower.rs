//! `wheel::tower::{Timeout, TimeoutLayer}` (the `tower` feature): tower's
//! timeout behaviour (ready, pending, elapsed, inner errors, `poll_ready`
//! passed through, the paused clock), against `tower::timeout` as an oracle;
//! proof that the deadlines are on the wheel (the default timer's or a given
//! `Timer`'s stats and clock); a `ServiceBuilder` stack; and a real hyper
//! HTTP/1 server on 127.0.0.1 whose slow handler times out.
//!
//! Every test but the last runs on tokio's paused clock or a manual clock;
//! the HTTP test asserts only never-early and a generous upper bound.

use std::convert::Infallible;
use std::future::{poll_fn, Future};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time;
use tokio_test::{assert_pending, assert_ready, assert_ready_ok, task};
use tower::timeout::error::Elapsed;
use tower::{service_fn, BoxError, Layer, Service, ServiceBuilder, ServiceExt};
use wheel::tower::{Timeout, TimeoutLayer};
use wheel::{Instant, Timer};

const TIMEOUT: Duration = Duration::from_millis(100);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A service answering each request with the value its oneshot sender
/// sends, or `Err("dropped")` if the sender goes.
fn replies() -> impl Service<
    oneshot::Receiver<u32>,
    Response = u32,
    Error = &'static str,
    Future = impl Future<Output = Result<u32, &'static str>>,
> {
    service_fn(|rx: oneshot::Receiver<u32>| async move { rx.await.map_err(|_| "dropped") })
}

/// The inner error of `errors_are_passed_through`: a type of the test's own,
/// which callers downcast to.
#[derive(Debug, PartialEq)]
struct Refused(u32);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "refused {}", self.0)
    }
}

impl std::error::Error for Refused {}

fn pending_timers() -> usize {
    Timer::current().stats().pending
}

#[tokio::test(start_paused = true)]
async fn a_ready_response_passes_and_never_touches_the_timer() {
    let mut svc =
        TimeoutLayer::new(TIMEOUT).layer(service_fn(
            |n: u32| async move { Ok::<_, Infallible>(n + 1) },
        ));
    assert_ready_ok!(task::spawn(()).enter(|cx, _| svc.poll_ready(cx)));
    let mut response = task::spawn(svc.call(1));
    assert_eq!(assert_ready_ok!(response.poll()), 2);
    let stats = Timer::current().stats();
    assert_eq!((stats.pending, stats.entries, stats.fired), (0, 0, 0));

    // A zero timeout still lets a ready response win, as tower's does.
    let svc = Timeout::new(service_fn(|()| async { Ok::<_, Infallible>("now") }), ms(0));
    assert_eq!(svc.oneshot(()).await.unwrap(), "now");
}

#[tokio::test(start_paused = true)]
async fn a_pending_response_waits_on_the_wheel_and_cancels_its_entry() {
    let start = Instant::now();
    let mut svc = TimeoutLayer::new(TIMEOUT).layer(replies());
    let (tx, rx) = oneshot::channel();
    let mut response = task::spawn(svc.call(rx));
    assert_pending!(response.poll());
    assert_eq!(pending_timers(), 1, "the deadline is a wheel entry");

    time::advance(ms(60)).await;
    assert!(!response.is_woken());
    tx.send(7).unwrap();
    assert!(response.is_woken());
    assert_eq!(assert_ready_ok!(response.poll()), 7);
    assert_eq!(start.elapsed(), ms(60));
    drop(response);
    let stats = Timer::current().stats();
    assert_eq!((stats.pending, stats.fired, stats.cancelled), (0, 0, 1));
}

#[tokio::test(start_paused = true)]
async fn a_slow_response_times_out_with_towers_elapsed() {
    let start = Instant::now();
    let mut svc = TimeoutLayer::new(TIMEOUT).layer(replies());
    let (tx, rx) = oneshot::channel();
    let mut response = task::spawn(svc.call(rx));
    assert_pending!(response.poll());

    time::advance(TIMEOUT - ms(1)).await;
    assert!(!response.is_woken(), "never early");
    time::advance(ms(1)).await;
    assert!(response.is_woken());
    let err = assert_ready!(response.poll()).unwrap_err();
    assert!(err.is::<Elapsed>(), "{err:?} is tower's Elapsed");
    assert!(err.downcast_ref::<Elapsed>().is_some());
    assert_eq!(err.to_string(), "request timed out");
    assert_eq!(start.elapsed(), TIMEOUT);
    assert_eq!(Timer::current().stats().fired, 1, "the wheel fired it");
    assert!(
        !tx.is_closed(),
        "the inner future goes with the response future"
    );
    drop(response);
    assert!(tx.is_closed());

    // Awaited, with auto-advance: exactly the timeout.
    let start = Instant::now();
    let (_tx, rx) = oneshot::channel();
    let err = svc.ready().await.unwrap().call(rx).await.unwrap_err();
    assert!(err.is::<Elapsed>());
    assert_eq!(start.elapsed(), TIMEOUT);
}

#[tokio::test(start_paused = true)]
async fn the_deadline_is_taken_at_call_not_at_first_poll() {
    let mut svc = TimeoutLayer::new(TIMEOUT).layer(replies());
    let (_tx, rx) = oneshot::channel();
    let mut response = task::spawn(svc.call(rx));
    time::advance(TIMEOUT).await;
    let err = assert_ready!(response.poll()).unwrap_err();
    assert!(err.is::<Elapsed>());
}

#[tokio::test(start_paused = true)]
async fn errors_are_passed_through_boxed() {
    // An inner error that is already a `BoxError` comes back as it was.
    let svc = TimeoutLayer::new(TIMEOUT).layer(service_fn(|n: u32| async move {
        Err::<(), BoxError>(Box::new(Refused(n)))
    }));
    let err = svc.oneshot(3).await.unwrap_err();
    assert_eq!(err.downcast_ref::<Refused>(), Some(&Refused(3)));
    assert!(!err.is::<Elapsed>());

    // One of another type is boxed, as tower's `Into<BoxError>` boxes it.
    let svc = Timeout::new(
        service_fn(|()| async {
            time::sleep(ms(10)).await;
            Err::<(), _>(Refused(4))
        }),
        TIMEOUT,
    );
    let err = svc.oneshot(()).await.unwrap_err();
    assert_eq!(err.downcast_ref::<Refused>(), Some(&Refused(4)));
    assert_eq!(Timer::current().stats().pending, 0);
}

/// A service whose readiness the test sets: pending, ready, or failed.
#[derive(Clone, Default)]
struct Readiness {
    state: Arc<AtomicUsize>,
    polls: Arc<AtomicUsize>,
}

const NOT_READY: usize = 0;
const READY: usize = 1;
const FAILED: usize = 2;

impl Service<()> for Readiness {
    type Response = ();
    type Error = Refused;
    type Future = std::future::Ready<Result<(), Refused>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Refused>> {
        self.polls.fetch_add(1, Ordering::SeqCst);
        match self.state.load(Ordering::SeqCst) {
            NOT_READY => Poll::Pending,
            READY => Poll::Ready(Ok(())),
            _ => Poll::Ready(Err(Refused(9))),
        }
    }

    fn call(&mut self, (): ()) -> Self::Future {
        std::future::ready(Ok(()))
    }
}

#[tokio::test(start_paused = true)]
async fn poll_ready_is_the_inner_services_with_its_error_boxed() {
    let inner = Readiness::default();
    let mut svc = TimeoutLayer::new(TIMEOUT).layer(inner.clone());
    let mut cx = task::spawn(());

    assert_pending!(cx.enter(|cx, _| svc.poll_ready(cx)));
    assert_eq!(inner.polls.load(Ordering::SeqCst), 1);
    // Waiting for readiness has no deadline, as with tower's: only calls do.
    time::advance(TIMEOUT * 10).await;
    assert_pending!(cx.enter(|cx, _| svc.poll_ready(cx)));
    assert_eq!(pending_timers(), 0);

    inner.state.store(READY, Ordering::SeqCst);
    assert_ready_ok!(cx.enter(|cx, _| svc.poll_ready(cx)));

    inner.state.store(FAILED, Ordering::SeqCst);
    let err = assert_ready!(cx.enter(|cx, _| svc.poll_ready(cx))).unwrap_err();
    assert_eq!(err.downcast_ref::<Refused>(), Some(&Refused(9)));
    assert_eq!(inner.polls.load(Ordering::SeqCst), 4);
}

#[tokio::test(start_paused = true)]
async fn outcomes_match_tower_timeout_on_the_paused_clock() {
    // (how long the response takes, the timeout), kept 2 ms apart: both
    // crates poll the response first, so a tie is decided by wake order.
    let cases = [
        (0, 0),
        (0, 50),
        (10, 50),
        (48, 50),
        (52, 50),
        (50, 10),
        (500, 1),
        (3, 1000),
        (1000, 3),
    ];
    for (takes, timeout) in cases {
        let inner = service_fn(move |()| async move {
            if takes > 0 {
                time::sleep(ms(takes)).await;
            }
            Ok::<_, Infallible>(takes)
        });
        let start = Instant::now();
        let ours = Timeout::new(inner, ms(timeout)).oneshot(()).await;
        let ours_took = start.elapsed();
        let start = Instant::now();
        let theirs = tower::timeout::Timeout::new(inner, ms(timeout))
            .oneshot(())
            .await;
        let theirs_took = start.elapsed();
        let describe = |r: &Result<u64, BoxError>| match r {
            Ok(v) => format!("Ok({v})"),
            Err(e) => format!("Err(elapsed: {})", e.is::<Elapsed>()),
        };
        assert_eq!(
            describe(&ours),
            describe(&theirs),
            "takes {takes} ms, timeout {timeout} ms"
        );
        assert_eq!(
            ours_took, theirs_took,
            "takes {takes} ms, timeout {timeout} ms"
        );
    }
    assert_eq!(pending_timers(), 0);
}

#[tokio::test(start_paused = true)]
async fn an_explicit_timer_holds_the_deadlines_and_its_clock_decides() {
    let manual = Timer::builder().manual().build().unwrap();
    let mut svc = TimeoutLayer::with_timer(manual.clone(), TIMEOUT).layer(replies());
    let (_tx, rx) = oneshot::channel();
    let mut response = task::spawn(svc.call(rx));
    assert_pending!(response.poll());
    assert_eq!(manual.stats().pending, 1);
    assert_eq!(pending_timers(), 0, "nothing on the default timer");

    // tokio's clock does not move the manual timer's deadlines...
    time::advance(TIMEOUT * 10).await;
    assert_pending!(response.poll());
    // ...the manual clock does.
    manual.advance(TIMEOUT - ms(1));
    assert!(!response.is_woken());
    manual.advance(ms(1));
    assert!(response.is_woken());
    assert!(assert_ready!(response.poll()).unwrap_err().is::<Elapsed>());
    assert_eq!(manual.stats().fired, 1);

    // `Timeout::with_timer` is the same service.
    let built = Timer::builder().tick(ms(10)).build().unwrap();
    let svc = Timeout::with_timer(replies(), built.clone(), ms(25));
    let start = Instant::now();
    let (_tx, rx) = oneshot::channel();
    assert!(svc.oneshot(rx).await.unwrap_err().is::<Elapsed>());
    // A 10 ms tick rounds 25 ms up to 30, never down.
    assert_eq!(start.elapsed(), ms(30));
    assert_eq!(built.stats().fired, 1);
}

#[tokio::test(start_paused = true)]
async fn a_service_builder_stack_maps_the_timeout_as_users_do() {
    // The handler of axum's `HandleErrorLayer`, in plain tower: a timeout
    // becomes a 504, another error a 500, found by downcasting.
    fn status(result: Result<&'static str, BoxError>) -> Result<u16, BoxError> {
        Ok(match result {
            Ok(_) => 200,
            Err(e) if e.is::<Elapsed>() => 504,
            Err(_) => 500,
        })
    }
    async fn route(path: &'static str) -> Result<&'static str, BoxError> {
        match path {
            "/slow" => time::sleep(TIMEOUT * 2).await,
            "/error" => return Err("broken".into()),
            _ => {}
        }
        Ok(path)
    }
    fn path_of(request: (u8, &'static str)) -> &'static str {
        request.1
    }
    let svc = ServiceBuilder::new()
        .map_result(status)
        .layer(TimeoutLayer::new(TIMEOUT))
        .map_request(path_of)
        .service_fn(route);
    let start = Instant::now();
    assert_eq!(svc.clone().oneshot((0, "/")).await.unwrap(), 200);
    assert_eq!(svc.clone().oneshot((1, "/error")).await.unwrap(), 500);
    assert_eq!(svc.clone().oneshot((2, "/slow")).await.unwrap(), 504);
    assert_eq!(start.elapsed(), TIMEOUT);

    // Nested with tower's own: the shorter timeout wins, whichever it is.
    let stack = |ours: Duration, theirs: Duration| {
        ServiceBuilder::new()
            .timeout(theirs)
            .layer(TimeoutLayer::new(ours))
            .service(replies())
    };
    let (_tx, rx) = oneshot::channel();
    let start = Instant::now();
    assert!(stack(ms(10), ms(20))
        .oneshot(rx)
        .await
        .unwrap_err()
        .is::<Elapsed>());
    assert_eq!(start.elapsed(), ms(10));
    assert_eq!(
        Timer::current().stats().fired,
        2,
        "the wheel fired the first"
    );
    let (_tx, rx) = oneshot::channel();
    let start = Instant::now();
    assert!(stack(ms(20), ms(10))
        .oneshot(rx)
        .await
        .unwrap_err()
        .is::<Elapsed>());
    assert_eq!(start.elapsed(), ms(10));
    assert_eq!(
        Timer::current().stats().fired,
        2,
        "tokio's timer fired this one"
    );
    assert_eq!(pending_timers(), 0);
}

#[tokio::test(start_paused = true)]
async fn response_future_and_layer_are_what_tower_names() {
    // The types users name in signatures: `Service::Future` is ours, the
    // layer is `Clone` for `ServiceBuilder`s made per connection.
    let layer = TimeoutLayer::new(TIMEOUT);
    let mut svc: Timeout<_> = layer.clone().layer(replies());
    let (tx, rx) = oneshot::channel();
    let response: wheel::tower::ResponseFuture<_> = svc.call(rx);
    tx.send(1).unwrap();
    assert_eq!(response.await.unwrap(), 1);
    assert!(format!("{layer:?}").contains("100ms"), "{layer:?}");
    let _inner = svc.get_mut();
    let _inner = svc.into_inner();
    poll_fn(|_| Poll::Ready(())).await;
}

#[test]
fn a_call_outside_a_runtime_binds_when_polled_in_one() {
    // tower's `call` makes a `tokio::time::Sleep`, which panics here.
    let mut svc = TimeoutLayer::new(TIMEOUT).layer(replies());
    let (_tx, rx) = oneshot::channel();
    let response = svc.call(rx);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    let err = rt.block_on(response).unwrap_err();
    assert!(err.is::<Elapsed>());
}

/// Found by review: a response `call`ed outside any runtime took its
/// deadline from the real clock and kept it when bound, at its first poll,
/// to a paused runtime's timer: on a paused clock an hour ahead it timed out
/// at that poll, with no time gone on either clock. It now counts what was
/// left of its timeout (less the real time since the call, at most `gap`) on
/// the clock it is polled on.
#[test]
fn a_call_outside_a_runtime_is_never_early_on_a_paused_clock_ahead() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    rt.block_on(time::advance(Duration::from_secs(3600)));
    let mut svc = TimeoutLayer::new(TIMEOUT).layer(replies());
    let (_tx, rx) = oneshot::channel();
    let before = std::time::Instant::now();
    let response = svc.call(rx);
    let (err, took) = rt.block_on(async {
        let start = Instant::now();
        let err = response.await.unwrap_err();
        (err, start.elapsed())
    });
    // At least the real time from the call to the first poll.
    let gap = before.elapsed();
    assert!(err.is::<Elapsed>());
    assert!(
        took <= TIMEOUT && took + gap >= TIMEOUT,
        "timed out {took:?} into a {TIMEOUT:?} timeout ({gap:?} real before)"
    );
}

#[tokio::test(start_paused = true)]
async fn duration_max_is_no_deadline_and_never_touches_the_timer() {
    let mut svc = TimeoutLayer::new(Duration::MAX).layer(replies());
    let (tx, rx) = oneshot::channel();
    let mut response = task::spawn(svc.call(rx));
    assert_pending!(response.poll());
    assert_eq!(pending_timers(), 0);
    time::advance(Duration::from_secs(86_400 * 365)).await;
    assert_pending!(response.poll());
    tx.send(5).unwrap();
    assert_eq!(assert_ready_ok!(response.poll()), 5);
}

// ---- a real HTTP/1 server on 127.0.0.1 ----

mod http {
    use super::*;

    use hyper::body::{Body as _, Incoming};
    use hyper::header::HOST;
    use hyper::{Request, Response, StatusCode};
    use hyper_util::rt::TokioIo;
    use hyper_util::service::TowerToHyperService;
    use tokio::net::{TcpListener, TcpStream};

    /// How long the real-time test may take at most: generous, for a
    /// loaded machine.
    const PATIENCE: Duration = Duration::from_secs(20);
    /// The server's request timeout, in real time.
    const REQUEST_TIMEOUT: Duration = Duration::from_millis(200);

    /// hyper's `service_fn` as a tower `Service`: always ready, each call
    /// the hyper service's.
    #[derive(Clone)]
    struct HyperToTower<S>(S);

    impl<S, R> Service<R> for HyperToTower<S>
    where
        S: hyper::service::Service<R>,
    {
        type Response = S::Response;
        type Error = S::Error;
        type Future = S::Future;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, request: R) -> S::Future {
            self.0.call(request)
        }
    }

    /// Serves HTTP/1 on `listener` with hyper's `service_fn` behind the
    /// wheel's `TimeoutLayer`, a timeout mapped to 504 as axum users map it.
    async fn serve(listener: TcpListener) {
        let handler = hyper::service::service_fn(|request: Request<Incoming>| async move {
            if request.uri().path() == "/slow" {
                time::sleep(Duration::from_secs(60)).await;
            }
            Ok::<_, Infallible>(Response::new(format!("hello {}", request.uri().path())))
        });
        let svc = ServiceBuilder::new()
            .map_result(|result: Result<Response<String>, BoxError>| match result {
                Err(e) if e.is::<Elapsed>() => {
                    let mut response = Response::new(String::from("timed out"));
                    *response.status_mut() = StatusCode::GATEWAY_TIMEOUT;
                    Ok::<_, BoxError>(response)
                }
                other => other,
            })
            .layer(TimeoutLayer::new(REQUEST_TIMEOUT))
            .service(HyperToTower(handler));
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let connection = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), TowerToHyperService::new(svc.clone()));
            tokio::spawn(connection);
        }
    }

    /// GETs `path` on a fresh connection: (status, body, how long it took).
    async fn get(addr: SocketAddr, path: &str) -> (StatusCode, String, Duration) {
        let stream = TcpStream::connect(addr).await.unwrap();
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .unwrap();
        let driver = tokio::spawn(connection);
        let request = Request::get(path)
            .header(HOST, "localhost")
            .body(String::new())
            .unwrap();
        let start = std::time::Instant::now();
        let response = sender.send_request(request).await.unwrap();
        let took = start.elapsed();
        let status = response.status();
        let mut body = response.into_body();
        let mut bytes = Vec::new();
        while let Some(frame) = poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
            if let Ok(data) = frame.unwrap().into_data() {
                bytes.extend_from_slice(&data);
            }
        }
        drop(sender);
        driver.await.unwrap().unwrap();
        (status, String::from_utf8(bytes).unwrap(), took)
    }

    #[tokio::test]
    async fn a_slow_handler_behind_the_layer_gets_a_504_over_loopback() {
        let listener = TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(serve(listener));

        let both = async {
            let fast = get(addr, "/fast").await;
            let slow = get(addr, "/slow").await;
            (fast, slow)
        };
        let (fast, slow) = time::timeout(PATIENCE, both)
            .await
            .expect("the server answered both requests within the patience bound");
        server.abort();

        assert_eq!((fast.0, fast.1.as_str()), (StatusCode::OK, "hello /fast"));
        assert_eq!(
            (slow.0, slow.1.as_str()),
            (StatusCode::GATEWAY_TIMEOUT, "timed out")
        );
        assert!(slow.2 >= REQUEST_TIMEOUT, "never early: {:?}", slow.2);
        let stats = Timer::current().stats();
        assert_eq!(
            stats.fired, 1,
            "the wheel timed the slow request out: {stats:?}"
        );
        assert_eq!(stats.pending, 0);
    }
}

/// Ties and sub-millisecond timeouts against `tower::timeout`, both run
/// side by side on the paused clock: the response a tokio or a wheel sleep
/// of `takes` µs, the timeout `timeout` µs, taken at `call`.
#[test]
fn ties_and_sub_millisecond_timeouts_match_tower_timeout() {
    let micros = [0u64, 1, 125, 999, 1_000, 1_001, 2_000, 2_400];
    for takes in micros {
        for timeout in micros {
            for on_wheel in [false, true] {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_time()
                    .start_paused(true)
                    .build()
                    .unwrap();
                rt.block_on(async move {
                    time::advance(Duration::from_micros(1_700)).await;
                    let inner = service_fn(move |()| async move {
                        if on_wheel {
                            wheel::sleep(Duration::from_micros(takes)).await;
                        } else {
                            time::sleep(Duration::from_micros(takes)).await;
                        }
                        Ok::<_, Infallible>(takes)
                    });
                    let start = Instant::now();
                    let describe = |r: Result<u64, BoxError>| match r {
                        Ok(v) => format!("Ok({v}) after {:?}", start.elapsed()),
                        Err(e) => format!(
                            "Err(elapsed: {}) after {:?}",
                            e.is::<Elapsed>(),
                            start.elapsed()
                        ),
                    };
                    let timeout_d = Duration::from_micros(timeout);
                    let ours = Timeout::new(inner, timeout_d).oneshot(());
                    let theirs = tower::timeout::Timeout::new(inner, timeout_d).oneshot(());
                    let (ours, theirs) = tokio::join!(async { describe(ours.await) }, async {
                        describe(theirs.await)
                    });
                    assert_eq!(
                        ours, theirs,
                        "takes {takes} µs, timeout {timeout} µs, on the wheel: {on_wheel}"
                    );
                });
            }
        }
    }
}

/// A response `call`ed inside one runtime and polled in another waits on
/// the default timer of the runtime `call` ran in, as a `wheel::timeout`
/// made there does (the binding rule), not on the polling runtime's (the
/// docs said "the default timer of the runtime each response is polled
/// on"); `call`ed outside any runtime, on the one that first polls it.
#[test]
fn a_response_waits_on_the_timer_of_the_runtime_call_ran_in() {
    let paused = || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .unwrap()
    };
    let (a, b) = (paused(), paused());
    let (timer_a, timer_b) = (
        a.block_on(async { Timer::current() }),
        b.block_on(async { Timer::current() }),
    );
    let mut svc = Timeout::new(
        service_fn(|()| std::future::pending::<Result<(), BoxError>>()),
        ms(100),
    );
    let mut response = {
        let _in_a = a.enter();
        task::spawn(svc.call(()))
    };
    b.block_on(async { assert_pending!(response.poll()) });
    assert_eq!((timer_a.stats().pending, timer_b.stats().pending), (1, 0));

    let mut outside = task::spawn(svc.call(()));
    b.block_on(async { assert_pending!(outside.poll()) });
    assert_eq!((timer_a.stats().pending, timer_b.stats().pending), (1, 1));
}

/// With an explicit timer, too, the deadline is taken at `call`, on that
/// timer's clock: a response first polled once that clock has passed it
/// times out at once, and one polled before waits out only what is left.
#[tokio::test(start_paused = true)]
async fn with_a_timer_the_deadline_is_taken_at_call_on_its_clock() {
    let manual = Timer::builder().manual().build().unwrap();
    let mut svc = Timeout::with_timer(replies(), manual.clone(), TIMEOUT);
    let (_tx, rx) = oneshot::channel();
    let mut late = task::spawn(svc.call(rx));
    let (_tx2, rx2) = oneshot::channel();
    let mut early = task::spawn(svc.call(rx2));
    manual.advance(TIMEOUT - ms(1));
    assert_pending!(early.poll());
    manual.advance(ms(1));
    assert!(early.is_woken());
    assert!(assert_ready!(early.poll()).unwrap_err().is::<Elapsed>());
    assert!(assert_ready!(late.poll()).unwrap_err().is::<Elapsed>());
}
