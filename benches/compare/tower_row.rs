//! The `tower` workloads: a tower `Timeout` service around an inner service,
//! `tower::timeout::Timeout` on the `tokio` and `tokio-alt` columns,
//! `wheel::tower::Timeout` on the `wheel` (default timer) and `timer`
//! (`Timeout::with_timer`) columns. Needs `--features tower`; without it the
//! rows are left out (and a note says so when asked for by `--only`).
//!
//! - `tower_ready`: `poll_ready`, `call` and one poll of the response, whose
//!   inner future is ready: what a request costs its timeout layer when the
//!   handler answers at once (it never registers).
//! - `tower_yield`: the same with an inner future that yields once: the
//!   first poll registers the deadline, the second completes and cancels it.

#[cfg(not(feature = "tower"))]
use crate::Config;

/// Prints why the rows are missing, if they were asked for by name.
#[cfg(not(feature = "tower"))]
fn skipped(cfg: &Config, name: &str) {
    if cfg.only.iter().any(|w| w == name) {
        eprintln!("compare: {name} needs `--features tower`; skipped");
    }
}

/// See the module's comment.
#[cfg(not(feature = "tower"))]
pub(crate) fn tower_ready(cfg: &Config) {
    skipped(cfg, "tower_ready");
}

/// See the module's comment.
#[cfg(not(feature = "tower"))]
pub(crate) fn tower_yield(cfg: &Config) {
    skipped(cfg, "tower_yield");
}

#[cfg(feature = "tower")]
pub(crate) use on::{tower_ready, tower_yield};

#[cfg(feature = "tower")]
mod on {
    use std::convert::Infallible;
    use std::future::Future;
    use std::hint::black_box;
    use std::pin::pin;
    use std::task::{Context, Poll};
    use std::time::Duration;

    use tower::{service_fn, BoxError, Service, ServiceExt};

    use crate::measure::{chunked, run_tasks, Group, PerOp};
    use crate::micro::per_op_rows;
    use crate::report::label;
    use crate::side::{Side, Tokio, TokioAlt, Wheel, WheelTimer};
    use crate::Config;

    /// The timeout every request gets, as `timeout_ready`'s.
    const TIMEOUT: Duration = Duration::from_secs(5);
    const TOWER_READY_N: usize = 2_000_000;
    const TOWER_YIELD_N: usize = 200_000;

    /// Each column's tower timeout middleware.
    pub(crate) trait TowerSide: Side {
        fn wrap<S>(
            timer: &Self::Timer,
            timeout: Duration,
            inner: S,
        ) -> impl Service<usize, Response = usize, Error = BoxError, Future: Send> + Send
        where
            S: Service<usize, Response = usize, Error = Infallible, Future: Send> + Send;
    }

    /// A column's middleware: only the expression that wraps `inner`
    /// differs (`$timer` the column's timer).
    macro_rules! tower_side {
        ($side:ty, $timer:pat_param, $timer_ty:ty, |$inner:ident, $timeout:ident| $wrap:expr) => {
            impl TowerSide for $side {
                #[inline]
                fn wrap<S>(
                    $timer: &$timer_ty,
                    $timeout: Duration,
                    $inner: S,
                ) -> impl Service<usize, Response = usize, Error = BoxError, Future: Send> + Send
                where
                    S: Service<usize, Response = usize, Error = Infallible, Future: Send> + Send,
                {
                    $wrap
                }
            }
        };
    }

    tower_side!(Tokio, _, (), |inner, timeout| tower::timeout::Timeout::new(
        inner, timeout
    ));
    // The runtime decides which tokio timer tower's `Sleep` is on.
    tower_side!(TokioAlt, _, (), |inner, timeout| {
        tower::timeout::Timeout::new(inner, timeout)
    });
    tower_side!(Wheel, _, (), |inner, timeout| wheel::tower::Timeout::new(
        inner, timeout
    ));
    tower_side!(WheelTimer, timer, wheel::Timer, |inner, timeout| {
        wheel::tower::Timeout::with_timer(inner, timer.clone(), timeout)
    });

    /// `Timeout(5 s, ready service)`: `poll_ready`, `call`, one poll.
    pub(crate) fn tower_ready(cfg: &Config) {
        let n = cfg.size.of(TOWER_READY_N, 1000);
        let name = label("tower_ready", n, TOWER_READY_N);
        per_op_rows!(cfg, name, "ns/call", |T, group| tower_ready_run::<T>(
            cfg, group, n
        ));
    }

    fn tower_ready_run<T: TowerSide>(cfg: &Config, group: Group, n: usize) -> PerOp {
        let (snaps, _) = run_tasks::<T, _, _>(cfg, group, 1, |ctx| async move {
            let inner = service_fn(|i: usize| std::future::ready(Ok::<_, Infallible>(i)));
            let mut svc = T::wrap(&ctx.timer, TIMEOUT, inner);
            let share = ctx.share(n);
            let warm = share.start..share.start + share.len() / 10;
            chunked(ctx.tasks, warm, |cx, r| tower_ready_loop(cx, &mut svc, r)).await;
            ctx.lines.cross().await;
            chunked(ctx.tasks, share, |cx, r| tower_ready_loop(cx, &mut svc, r)).await;
        });
        PerOp::between(&snaps[0], &snaps[1], n)
    }

    /// What a server does per request with the inner handler ready at once.
    #[inline(never)]
    fn tower_ready_loop<S>(cx: &mut Context<'_>, svc: &mut S, range: std::ops::Range<usize>)
    where
        S: Service<usize, Response = usize, Error = BoxError>,
    {
        for i in range {
            match svc.poll_ready(cx) {
                Poll::Ready(Ok(())) => {}
                other => panic!("a ready service's timeout gave {other:?}"),
            }
            let response = pin!(svc.call(black_box(i)));
            match response.poll(cx) {
                Poll::Ready(Ok(v)) if v == i => {}
                Poll::Ready(Err(e)) => panic!("a ready response gave {e}"),
                _ => panic!("a ready response was not ready"),
            }
        }
    }

    /// `Timeout(5 s, a service whose response yields once)`, awaited.
    pub(crate) fn tower_yield(cfg: &Config) {
        let n = cfg.size.of(TOWER_YIELD_N, 1000);
        let name = label("tower_yield", n, TOWER_YIELD_N);
        per_op_rows!(cfg, name, "ns/call", |T, group| tower_yield_run::<T>(
            cfg, group, n
        ));
    }

    fn tower_yield_run<T: TowerSide>(cfg: &Config, group: Group, n: usize) -> PerOp {
        let (snaps, _) = run_tasks::<T, _, _>(cfg, group, 1, |ctx| async move {
            let inner = service_fn(|i: usize| async move {
                tokio::task::yield_now().await;
                Ok::<_, Infallible>(i)
            });
            let mut svc = T::wrap(&ctx.timer, TIMEOUT, inner);
            let share = ctx.share(n).len();
            tower_yield_loop(&mut svc, share / 10).await;
            ctx.lines.cross().await;
            tower_yield_loop(&mut svc, share).await;
        });
        snaps[1].expect_pending(0, "tower_yield left timers behind");
        PerOp::between(&snaps[0], &snaps[1], n)
    }

    async fn tower_yield_loop<S>(svc: &mut S, n: usize)
    where
        S: Service<usize, Response = usize, Error = BoxError>,
    {
        for i in 0..n {
            let out = svc.ready().await.expect("always ready").call(i).await;
            assert_eq!(out.ok(), Some(i), "a yield outlasted 5 s");
        }
    }
}
