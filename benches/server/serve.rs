//! The servers under test, generic over the column's timer ([`Side`]):
//!
//! - `tcp`: a request-response protocol on raw TCP, each connection with a
//!   60 s idle sleep reset per request, `timeout(30 s, read)` for each
//!   request and `timeout(30 s, write_all)` for each response, and, in the
//!   `+handler` variant, `timeout(5 s, handler)` around a handler that
//!   awaits once (a `yield_now`, standing for a call to another service),
//!   so that its timeout registers and is cancelled: 2 registrations and 2
//!   cancels per request, plus the idle reset.
//! - `tcp+handler+unpark` (diagnostic, only with `--only`): `+handler`, and
//!   each request also makes tokio's driver unpark (see
//!   [`unpark_tokio_driver`]).
//! - `http`: hyper's HTTP/1 server (keep-alive) with `header_read_timeout`
//!   on the column's timer: `hyper_util::rt::TokioTimer` for the tokio
//!   columns, a `wheel::Timer` (the runtime's default one, or the explicit
//!   one) for the wheel columns; needs the crate's `hyper` feature.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::pin;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;

use crate::side::{Column, Side};
use crate::{Proto, REQUEST_LEN, RESPONSE_LEN};

const IDLE: Duration = Duration::from_secs(60);
const IO_TIMEOUT: Duration = Duration::from_secs(30);
const HANDLER_TIMEOUT: Duration = Duration::from_secs(5);

/// Whether this build can serve `proto` on `column`: hyper on a wheel timer
/// needs the crate's `hyper` feature.
pub(crate) fn can_serve(proto: Proto, column: Column) -> bool {
    proto == Proto::Tcp
        || matches!(column, Column::Tokio | Column::TokioAlt)
        || cfg!(feature = "hyper")
}

/// Accepts `conns` connections on `listener` and serves each on its own
/// task until the client closes it.
pub(crate) async fn accept<T: Side>(
    listener: TcpListener,
    conns: usize,
    proto: Proto,
    handler: bool,
    unpark: bool,
    timer: T::Timer,
) {
    for _ in 0..conns {
        let (stream, _) = listener.accept().await.expect("accept");
        stream.set_nodelay(true).expect("TCP_NODELAY");
        let timer = timer.clone();
        match proto {
            Proto::Tcp => drop(tokio::spawn(tcp::<T>(stream, handler, unpark, timer))),
            Proto::Http => drop(tokio::spawn(http::<T>(stream, timer))),
        }
    }
}

/// A listener on an ephemeral loopback port.
pub(crate) async fn listen() -> (TcpListener, SocketAddr) {
    let listener = TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .expect("bind 127.0.0.1");
    let addr = listener.local_addr().expect("the listener's address");
    (listener, addr)
}

/// One raw-TCP connection; returns when the client closes it (or a
/// timeout closes it, which the run would report as an error).
async fn tcp<T: Side>(mut stream: TcpStream, handler: bool, unpark: bool, timer: T::Timer) {
    let mut idle = pin!(T::sleep(&timer, IDLE));
    let mut request = [0u8; REQUEST_LEN];
    loop {
        let read = T::timeout(&timer, IO_TIMEOUT, stream.read_exact(&mut request));
        let read = tokio::select! {
            biased;
            read = read => read,
            () = &mut idle => return,
        };
        match read {
            Ok(Ok(_)) => {}
            // End of stream (the run is over), an error, or a timeout.
            _ => return,
        }
        T::reset(idle.as_mut(), Instant::now() + IDLE);
        if unpark {
            unpark_tokio_driver().await;
        }
        let response = if handler {
            match T::timeout(&timer, HANDLER_TIMEOUT, handle(request)).await {
                Ok(response) => response,
                Err(_) => return,
            }
        } else {
            respond(&request)
        };
        match T::timeout(&timer, IO_TIMEOUT, stream.write_all(&response)).await {
            Ok(Ok(())) => {}
            _ => return,
        }
    }
}

/// Registers a 1 ms `tokio::time` sleep and drops it: earlier than any
/// deadline tokio's driver parked for, so tokio unparks the driver, an
/// eventfd write with IO enabled (`Handle::reregister`: the driver's
/// `next_wake` is only updated when it parks, so this happens on every
/// call). The diagnostic `+unpark` scenario adds it to each request.
async fn unpark_tokio_driver() {
    let mut sleep = pin!(tokio::time::sleep(Duration::from_millis(1)));
    std::future::poll_fn(|cx| {
        let _ = sleep.as_mut().poll(cx);
        std::task::Poll::Ready(())
    })
    .await;
}

/// A handler that awaits once before it answers.
async fn handle(request: [u8; REQUEST_LEN]) -> [u8; RESPONSE_LEN] {
    tokio::task::yield_now().await;
    respond(&request)
}

fn respond(request: &[u8; REQUEST_LEN]) -> [u8; RESPONSE_LEN] {
    let sum = request.iter().fold(0u8, |a, &b| a.wrapping_add(b));
    [sum; RESPONSE_LEN]
}

/// One HTTP/1 connection on hyper, answering `hello` to every request.
async fn http<T: Side>(stream: TcpStream, timer: T::Timer) {
    use hyper::service::service_fn;
    let service = service_fn(|_request| async {
        Ok::<_, std::convert::Infallible>(hyper::Response::new(String::from("hello")))
    });
    let io = hyper_util::rt::TokioIo::new(stream);
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.header_read_timeout(IO_TIMEOUT);
    match T::COLUMN {
        Column::Tokio | Column::TokioAlt => {
            builder.timer(hyper_util::rt::TokioTimer::new());
        }
        Column::Wheel | Column::Timer => wheel_timer::<T>(&mut builder, &timer),
    }
    // Ends with an error when the client closes mid-wait; either way the
    // connection is done.
    let _ = builder.serve_connection(io, service).await;
}

/// hyper on the column's wheel timer: the runtime's default one for
/// `wheel`, the explicit one for `timer`.
#[cfg(feature = "hyper")]
fn wheel_timer<T: Side>(builder: &mut hyper::server::conn::http1::Builder, timer: &T::Timer) {
    let explicit = (timer as &dyn std::any::Any).downcast_ref::<wheel::Timer>();
    builder.timer(explicit.cloned().unwrap_or_else(wheel::Timer::current));
}

#[cfg(not(feature = "hyper"))]
fn wheel_timer<T: Side>(_: &mut hyper::server::conn::http1::Builder, _: &T::Timer) {
    unreachable!("can_serve says no: http on a wheel timer needs --features hyper")
}
