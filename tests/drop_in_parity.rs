//! More differential checks of the drop-in API against `tokio::time` on a
//! paused clock (beside `tests/tokio_parity.rs` and
//! `tests/parity_programs.rs`): nested timeouts due at one instant,
//! `IntoFuture` inputs, polls after completion, `select!` with `biased;`,
//! tokio's pinning patterns (compiled against both), the coop budget in
//! busy loops, and a clock paused mid-run (`tests/drop_in_programs.rs`
//! has the random programs).

use std::future::Future;
use std::pin::{pin, Pin};
use std::time::Duration;

mod common;

use common::differential;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}
fn us(n: u64) -> Duration {
    Duration::from_micros(n)
}

differential!(nested_same_deadline, |t| {
    let start = t::Instant::now();
    let r = t::timeout(ms(10), t::timeout(ms(10), std::future::pending::<()>())).await;
    (format!("{r:?}"), start.elapsed())
});

differential!(nested_same_deadline_at, |t| {
    let start = t::Instant::now();
    let d = start + us(10_500);
    let r = t::timeout_at(d, t::timeout_at(d, std::future::pending::<()>())).await;
    (format!("{r:?}"), start.elapsed())
});

differential!(nested_outer_earlier_sub_ms, |t| {
    let start = t::Instant::now();
    let r = t::timeout(
        us(10_200),
        t::timeout(us(10_700), std::future::pending::<()>()),
    )
    .await;
    (format!("{r:?}"), start.elapsed())
});

differential!(nested_inner_earlier_sub_ms, |t| {
    let start = t::Instant::now();
    let r = t::timeout(
        us(10_700),
        t::timeout(us(10_200), std::future::pending::<()>()),
    )
    .await;
    (format!("{r:?}"), start.elapsed())
});

differential!(timeout_vs_sleep_same_deadline, |t| {
    let start = t::Instant::now();
    let r = t::timeout(ms(10), t::sleep(ms(10))).await;
    (format!("{r:?}"), start.elapsed())
});

differential!(timeout_vs_sleep_same_deadline_off_grid, |t| {
    tokio::time::advance(us(300)).await;
    let start = t::Instant::now();
    let r = t::timeout(us(1_500), t::sleep(us(1_500))).await;
    let r2 = t::timeout(us(1_500), t::sleep(us(1_400))).await;
    let r3 = t::timeout(us(1_400), t::sleep(us(1_500))).await;
    (format!("{r:?} {r2:?} {r3:?}"), start.elapsed())
});

differential!(timeout_vs_tokio_sleep_same_deadline_off_grid, |t| {
    tokio::time::advance(us(300)).await;
    let start = t::Instant::now();
    let r = t::timeout(us(1_500), tokio::time::sleep(us(1_500))).await;
    let r2 = t::timeout(us(1_500), tokio::time::sleep(us(1_400))).await;
    let r3 = t::timeout(us(1_400), tokio::time::sleep(us(1_500))).await;
    (format!("{r:?} {r2:?} {r3:?}"), start.elapsed())
});

differential!(timeout_past_deadline_ready_inner, |t| {
    tokio::time::advance(ms(10)).await;
    let r = t::timeout_at(t::Instant::now() - ms(5), async { 3 }).await;
    let r2 = t::timeout_at(t::Instant::now() - ms(5), std::future::pending::<u8>()).await;
    format!("{r:?} {r2:?}")
});

differential!(timeout_poll_after_elapsed, |t| {
    let mut f = pin!(t::timeout(ms(1), std::future::pending::<()>()));
    let a = (&mut f).await;
    let b = futures::poll!(f.as_mut());
    let c = futures::poll!(f.as_mut());
    format!("{a:?} {b:?} {c:?}")
});

differential!(timeout_into_future_input, |t| {
    struct Later;
    impl std::future::IntoFuture for Later {
        type Output = u8;
        type IntoFuture = Pin<Box<dyn Future<Output = u8> + Send>>;
        fn into_future(self) -> Self::IntoFuture {
            Box::pin(async {
                tokio::time::sleep(Duration::from_millis(3)).await;
                7
            })
        }
    }
    let r = t::timeout(ms(5), Later).await;
    let r2 = t::timeout(ms(2), Later).await;
    format!("{r:?} {r2:?}")
});

differential!(sleep_select_biased, |t| {
    let start = t::Instant::now();
    let mut log = vec![];
    let s = t::sleep(ms(10));
    tokio::pin!(s);
    let mut iv = t::interval(ms(3));
    loop {
        tokio::select! {
            biased;
            () = &mut s => { log.push(("sleep", start.elapsed())); break; }
            i = iv.tick() => { log.push(("tick", i - start)); }
        }
    }
    log
});

differential!(sleep_select_biased_reset_in_loop, |t| {
    let start = t::Instant::now();
    let mut log = vec![];
    let s = t::sleep(ms(10));
    tokio::pin!(s);
    let mut n = 0;
    loop {
        tokio::select! {
            biased;
            () = &mut s => {
                log.push(("sleep", start.elapsed(), s.is_elapsed()));
                n += 1;
                if n == 3 { break; }
                s.as_mut().reset(t::Instant::now() + us(1_700));
            }
            () = t::sleep(ms(4)) => { log.push(("other", start.elapsed(), s.is_elapsed())); }
        }
    }
    log
});

differential!(box_pin_sleep_patterns, |t| {
    let mut s = Box::pin(t::sleep(ms(5)));
    let start = t::Instant::now();
    s.as_mut().await;
    let e1 = s.is_elapsed();
    s.as_mut().reset(t::Instant::now() + ms(3));
    let e2 = s.is_elapsed();
    s.as_mut().await;
    (e1, e2, start.elapsed(), s.deadline() - start)
});

differential!(sleep_poll_after_completion, |t| {
    let mut s = pin!(t::sleep(ms(1)));
    (&mut s).await;
    let a = futures::poll!(s.as_mut());
    let b = futures::poll!(s.as_mut());
    (a, b, s.is_elapsed())
});

differential!(elapsed_io_error, |t| {
    let e = t::timeout(ms(1), std::future::pending::<()>())
        .await
        .unwrap_err();
    let io: std::io::Error = e.into();
    (format!("{io}"), format!("{io:?}"), io.kind())
});

differential!(interval_long_stall_each_behavior, |t| {
    let mut out = vec![];
    for b in [
        t::MissedTickBehavior::Burst,
        t::MissedTickBehavior::Delay,
        t::MissedTickBehavior::Skip,
    ] {
        let start = t::Instant::now();
        let mut iv = t::interval(ms(10));
        iv.set_missed_tick_behavior(b);
        iv.tick().await;
        tokio::time::advance(us(3_600_500)).await;
        for _ in 0..5 {
            let i = iv.tick().await;
            out.push((i - start, start.elapsed()));
        }
    }
    out
});

differential!(interval_reset_variants_off_grid, |t| {
    let start = t::Instant::now();
    let mut out = vec![];
    let mut iv = t::interval(us(2_500));
    iv.tick().await;
    tokio::time::advance(us(700)).await;
    iv.reset();
    out.push((iv.tick().await - start, start.elapsed()));
    tokio::time::advance(us(300)).await;
    iv.reset_after(us(100));
    out.push((iv.tick().await - start, start.elapsed()));
    tokio::time::advance(us(450)).await;
    iv.reset_immediately();
    out.push((iv.tick().await - start, start.elapsed()));
    iv.reset_at(start);
    out.push((iv.tick().await - start, start.elapsed()));
    out.push((iv.tick().await - start, start.elapsed()));
    out
});

#[test]
fn zero_period_panic_messages() {
    let rt = common::paused_rt();
    let _g = rt.enter();
    let a = common::panic_of(|| tokio::time::interval(Duration::ZERO));
    let b = common::panic_of(|| wheel::interval(Duration::ZERO));
    assert_eq!(a, b);
    let now = tokio::time::Instant::now();
    let a = common::panic_of(|| tokio::time::interval_at(now, Duration::ZERO));
    let b = common::panic_of(|| wheel::interval_at(now, Duration::ZERO));
    assert_eq!(a, b);
}

differential!(timeout_inner_wakes_at_deadline_instant, |t| {
    // inner completes exactly at deadline via a tokio sleep
    let start = t::Instant::now();
    let r = t::timeout(ms(5), tokio::time::sleep(ms(5))).await;
    let r2 = t::timeout(us(5_300), tokio::time::sleep(us(5_300))).await;
    (format!("{r:?} {r2:?}"), start.elapsed())
});

/// Durations across tokio's millisecond grid.
fn across_the_grid() -> [std::time::Duration; 7] {
    [us(1), us(500), us(999), ms(1), us(1_500), ms(10), ms(1000)]
}

/// On a paused clock, a wheel sleep and then a tokio sleep of each
/// duration across the grid: each takes as long as the other.
async fn sequential_sleeps_end_alike() {
    for d in across_the_grid() {
        let start = tokio::time::Instant::now();
        wheel::sleep(d).await;
        let a = start.elapsed();
        let start = tokio::time::Instant::now();
        tokio::time::sleep(d).await;
        assert_eq!(a, start.elapsed(), "{d:?} sequential");
    }
}

/// The clock paused mid-run, off tokio's millisecond grid: a wheel sleep
/// and a tokio sleep with the same deadline complete at the same instant.
#[test]
fn pause_mid_run_same_instant() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async {
        // Use the default timer on the running clock first.
        wheel::sleep(us(1_300)).await;
        tokio::time::sleep(us(700)).await;
        std::thread::sleep(us(333));
        tokio::time::pause();
        for d in across_the_grid() {
            let start = tokio::time::Instant::now();
            let (a, b) = tokio::join!(
                async {
                    wheel::sleep(d).await;
                    start.elapsed()
                },
                async {
                    tokio::time::sleep(d).await;
                    start.elapsed()
                },
            );
            assert_eq!(a, b, "{d:?}");
        }
        sequential_sleeps_end_alike().await;
    });
}

/// First use of the default timer after pausing mid-run.
#[test]
fn pause_mid_run_first_use_after() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async {
        tokio::time::sleep(us(700)).await;
        std::thread::sleep(us(333));
        tokio::time::pause();
        sequential_sleeps_end_alike().await;
    });
}

/// Resumed, then paused again.
#[test]
fn pause_resume_pause() {
    let rt = common::paused_unguarded();
    rt.block_on(async {
        wheel::sleep(us(1_300)).await;
        tokio::time::resume();
        tokio::time::sleep(us(700)).await;
        wheel::sleep(us(1_300)).await;
        std::thread::sleep(us(333));
        tokio::time::pause();
        sequential_sleeps_end_alike().await;
    });
}

differential!(interval_created_off_grid, |t| {
    let mut out = vec![];
    for off in [1u64, 300, 999] {
        tokio::time::advance(us(off)).await;
        let start = t::Instant::now();
        let mut iv = t::interval(us(2_500));
        for _ in 0..4 {
            let i = iv.tick().await;
            out.push((i - start, start.elapsed()));
        }
        let start = t::Instant::now();
        let mut iv = t::interval_at(start + us(100), us(700));
        for _ in 0..4 {
            let i = iv.tick().await;
            out.push((i - start, start.elapsed()));
        }
    }
    out
});

differential!(sleep_zero_off_grid_elapsed, |t| {
    let mut out = vec![];
    for off in [1u64, 300, 999, 1000] {
        tokio::time::advance(us(off)).await;
        let start = t::Instant::now();
        t::sleep(Duration::ZERO).await;
        out.push(start.elapsed());
        let start = t::Instant::now();
        let r = t::timeout(Duration::ZERO, std::future::pending::<()>()).await;
        assert!(r.is_err());
        out.push(start.elapsed());
    }
    out
});

differential!(busy_loop_yielding_via_sleep_zero, |t| {
    let mut out = vec![];
    for off in [0u64, 300, 1000] {
        tokio::time::advance(us(off)).await;
        let start = t::Instant::now();
        let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let f2 = flag.clone();
        tokio::spawn(async move { f2.store(true, std::sync::atomic::Ordering::SeqCst) });
        let mut n = 0;
        while !flag.load(std::sync::atomic::Ordering::SeqCst) {
            t::sleep(Duration::ZERO).await;
            n += 1;
        }
        out.push((n, start.elapsed()));
    }
    out
});

differential!(busy_loop_yielding_via_timeout_zero, |t| {
    let mut out = vec![];
    for off in [0u64, 300, 1000] {
        tokio::time::advance(us(off)).await;
        let start = t::Instant::now();
        let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let f2 = flag.clone();
        tokio::spawn(async move { f2.store(true, std::sync::atomic::Ordering::SeqCst) });
        let mut n = 0;
        while !flag.load(std::sync::atomic::Ordering::SeqCst) {
            let _ = t::timeout(Duration::ZERO, std::future::pending::<()>()).await;
            n += 1;
        }
        out.push((n, start.elapsed()));
    }
    out
});

differential!(busy_loop_yielding_via_interval, |t| {
    let mut out = vec![];
    for off in [0u64, 300, 1000] {
        tokio::time::advance(us(off)).await;
        let start = t::Instant::now();
        let mut iv = t::interval(us(10));
        tokio::time::advance(ms(50)).await;
        let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let f2 = flag.clone();
        tokio::spawn(async move { f2.store(true, std::sync::atomic::Ordering::SeqCst) });
        let mut n = 0;
        while !flag.load(std::sync::atomic::Ordering::SeqCst) {
            iv.tick().await;
            n += 1;
        }
        out.push((n, start.elapsed()));
    }
    out
});

differential!(busy_loop_timeout_of_budget_spender, |t| {
    // the inner future is a tokio mpsc recv that is always ready
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<u32>();
    for i in 0..10_000 {
        tx.send(i).unwrap();
    }
    let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let f2 = flag.clone();
    tokio::spawn(async move { f2.store(true, std::sync::atomic::Ordering::SeqCst) });
    let mut n = 0;
    let mut errs = 0;
    while !flag.load(std::sync::atomic::Ordering::SeqCst) {
        match t::timeout(Duration::ZERO, rx.recv()).await {
            Ok(_) => n += 1,
            Err(_) => errs += 1,
        }
    }
    (n, errs)
});

macro_rules! compile_patterns {
    ($m:ident, $t:path) => {
        mod $m {
            use std::future::Future;
            use std::pin::Pin;
            use std::task::{Context, Poll};
            use std::time::Duration;
            use $t as t;

            pin_project_lite::pin_project! {
                pub struct HasSleep<F> { #[pin] pub sleep: t::Sleep, #[pin] pub fut: F }
            }
            impl<F: Future> Future for HasSleep<F> {
                type Output = Option<F::Output>;
                fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
                    let mut me = self.project();
                    if let Poll::Ready(v) = me.fut.poll(cx) {
                        return Poll::Ready(Some(v));
                    }
                    if me.sleep.as_mut().poll(cx).is_ready() {
                        let d = me.sleep.deadline() + Duration::from_millis(1);
                        me.sleep.as_mut().reset(d);
                        return Poll::Ready(None);
                    }
                    Poll::Pending
                }
            }
            pub struct Boxed {
                pub sleep: Pin<Box<t::Sleep>>,
                pub iv: t::Interval,
                pub to: Pin<Box<t::Timeout<std::future::Pending<()>>>>,
            }
            impl Future for Boxed {
                type Output = ();
                fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
                    let _ = self.iv.poll_tick(cx);
                    let _ = self.to.as_mut().poll(cx);
                    let _ = self.to.get_ref();
                    self.sleep.as_mut().poll(cx)
                }
            }
            pub async fn uses() -> Result<(), t::error::Elapsed> {
                let sleep = t::sleep(Duration::from_millis(1));
                tokio::pin!(sleep);
                (&mut sleep).await;
                sleep.as_mut().reset(t::Instant::now());
                let _e: bool = sleep.is_elapsed();
                let mut iv = t::interval_at(t::Instant::now(), Duration::from_millis(1));
                iv.set_missed_tick_behavior(t::MissedTickBehavior::Skip);
                let _: t::Instant = iv.tick().await;
                let r: Result<u8, t::error::Elapsed> =
                    t::timeout(Duration::from_millis(1), async { 1 }).await;
                let _io: std::io::Error = t::timeout(Duration::ZERO, std::future::pending::<()>())
                    .await
                    .unwrap_err()
                    .into();
                let b: Box<dyn std::error::Error + Send + Sync> = Box::new(
                    t::timeout(Duration::ZERO, std::future::pending::<()>())
                        .await
                        .unwrap_err(),
                );
                let _ = b;
                r.map(|_| ())?;
                let boxed: Pin<Box<dyn Future<Output = ()> + Send + Sync>> =
                    Box::pin(t::sleep(Duration::ZERO));
                boxed.await;
                let mut both = Boxed {
                    sleep: Box::pin(t::sleep(Duration::from_millis(1))),
                    iv: t::interval(Duration::from_millis(1)),
                    to: Box::pin(t::timeout(Duration::from_millis(1), std::future::pending())),
                };
                (&mut both).await;
                Ok(())
            }
        }
    };
}
compile_patterns!(tokio_patterns, tokio::time);
compile_patterns!(wheel_patterns, wheel);

#[test]
fn patterns_run() {
    common::paused(async {
        tokio_patterns::uses().await.unwrap();
        wheel_patterns::uses().await.unwrap();
    });
}

/// Registered on a running clock, the clock then paused: both complete at
/// the same paused instant.
#[test]
fn registered_before_pause() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async {
        for d in [us(1_500), ms(50), ms(70_000)] {
            let mut a = Box::pin(wheel::sleep(d));
            let mut b = Box::pin(tokio::time::sleep(d));
            let _ = futures::poll!(a.as_mut());
            let _ = futures::poll!(b.as_mut());
            std::thread::sleep(us(333));
            tokio::time::pause();
            let start = tokio::time::Instant::now();
            let (x, y) = tokio::join!(
                async {
                    a.await;
                    start.elapsed()
                },
                async {
                    b.await;
                    start.elapsed()
                },
            );
            assert_eq!(x, y, "{d:?}");
            tokio::time::resume();
        }
    });
}
