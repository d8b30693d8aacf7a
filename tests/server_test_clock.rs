//! A real server's timeouts on the test clock (features `hyper` and
//! `tower`): `examples/server_test_clock.rs`'s hyper server and its
//! client's four checks, each on a fresh `TestRuntime` of 1, 2 and 4
//! workers with auto-advance. `/fast` answers with the clock unmoved,
//! `/slow` answers 408 after exactly 10 s, half a head is cut off after
//! exactly 30 s, a silent connection is closed after exactly 5 min (the
//! example's docs say why exactly); and the four at once on one server,
//! each at its own instant of the one clock.
//!
//! The instants are the test clock's (`wheel::now()`), asserted inside the
//! example's checks; real time is only printed (`--nocapture`) and bounded
//! by the watchdog (`common::guard`). Each test takes a few milliseconds.
//! On a machine loaded far beyond its cores, a test could once fail (or the
//! binary abort) with `armed a millisecond ahead`: a test-clock defect, now
//! fixed, reproduced by `tests/test_clock_probe_repro.rs`.

#[allow(dead_code)] // the example's `main`
#[path = "../examples/server_test_clock.rs"]
mod server;

mod common;

use std::future::Future;
use std::net::SocketAddr;

/// Runs `check` against a fresh server on a fresh `workers`-worker test
/// runtime, and prints the real time it took.
fn on<F: Future>(workers: usize, check: impl FnOnce(SocketAddr) -> F) {
    let _guard = common::guard();
    let real = std::time::Instant::now();
    let rt = server::runtime(workers);
    rt.block_on(async {
        let server = server::Server::start().await;
        check(server.addr).await;
    });
    drop(rt);
    println!(
        "{}: {:.1?} of real time",
        std::thread::current().name().unwrap_or("?"),
        real.elapsed()
    );
}

macro_rules! on_workers {
    ($($module:ident: $workers:expr;)*) => {$(
        mod $module {
            use super::{on, server};

            #[test]
            fn the_fast_route_answers_with_the_clock_unmoved() {
                on($workers, server::fast_route_answers_at_once);
            }

            #[test]
            fn the_slow_route_answers_408_after_exactly_10_s() {
                on($workers, server::slow_route_times_out);
            }

            #[test]
            fn half_a_header_is_cut_off_after_exactly_30_s() {
                on($workers, server::half_a_header_is_cut_off);
            }

            #[test]
            fn a_silent_connection_is_closed_after_exactly_5_min() {
                on($workers, server::idle_connection_is_reaped);
            }

            #[test]
            fn the_four_at_once_on_one_server_each_at_its_instant() {
                on($workers, |addr| async move {
                    tokio::join!(
                        server::fast_route_answers_at_once(addr),
                        server::slow_route_times_out(addr),
                        server::half_a_header_is_cut_off(addr),
                        server::idle_connection_is_reaped(addr),
                    )
                });
            }
        }
    )*};
}

on_workers! {
    one_worker: 1;
    two_workers: 2;
    four_workers: 4;
}
