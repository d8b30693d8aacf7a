//! Explicit timers (`Timer::builder()`): their tick and rounding, the
//! builder's errors, and a timer's lifetime (what keeps it alive, what
//! frees it).

use std::future::pending;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use tokio::runtime::{Builder as RtBuilder, Handle};
use tokio::time;
use tokio_test::{assert_pending, assert_ready, task};
use wheel::{Instant, Timer};

mod common;
use common::{ms, panic_message, paused_rt, poll_once, real_rt, secs};

/// Lets spawned tasks (such as a timer's sentinel) run.
async fn settle() {
    for _ in 0..8 {
        tokio::task::yield_now().await;
    }
}

/// The round-up rule: the first instant at or after `deadline` that is a
/// whole number of ticks after `origin`.
fn rounded_up(origin: Instant, tick: Duration, deadline: Instant) -> Instant {
    let since = (deadline - origin).as_nanos();
    let tick_ns = tick.as_nanos();
    let ticks = since.div_ceil(tick_ns);
    origin + Duration::from_nanos(u64::try_from(ticks * tick_ns).unwrap())
}

// ---------------------------------------------------------------------------

// Explicit timers
// ---------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn explicit_timers_complete_at_the_deadline_rounded_up_to_their_tick() {
    let _guard = common::guard();
    let t0 = Instant::now();
    let ten = Timer::builder().tick(ms(10)).build().unwrap();
    let seven = Timer::builder().tick(ms(7)).build().unwrap();
    let start = Instant::now();
    ten.sleep(ms(25)).await;
    assert_eq!(start.elapsed(), ms(30));
    // 30 ms after seven's origin: 25 more ms rounds up to 56 (8 ticks).
    seven.sleep(ms(25)).await;
    assert_eq!(t0.elapsed(), ms(56));
    let out = seven.timeout(ms(1), pending::<()>()).await;
    assert!(out.is_err());
    assert_eq!(t0.elapsed(), ms(63));
    let deadline = t0 + ms(71);
    ten.sleep_until(deadline).await;
    assert_eq!(t0.elapsed(), ms(80));
    let mut every = seven.interval(ms(14));
    assert_eq!(every.tick().await, t0 + ms(80));
    assert_eq!(every.tick().await, t0 + ms(94));
    assert_eq!(t0.elapsed(), ms(98));
}

#[tokio::test(start_paused = true)]
async fn explicit_ticks_never_fire_early_and_fire_at_the_tick_exactly() {
    let _guard = common::guard();
    for tick in [7u64, 10] {
        let origin = Instant::now();
        let timer = Timer::builder().tick(ms(tick)).build().unwrap();
        let delays = [
            1,
            2,
            tick - 1,
            tick,
            tick + 1,
            2 * tick,
            3 * tick + 2,
            100,
            1000,
            5000,
        ];
        for delay in delays {
            let start = Instant::now();
            let deadline = start + ms(delay);
            let fires = rounded_up(origin, ms(tick), deadline);
            assert!(fires >= deadline && fires - deadline < ms(tick));
            let mut s = task::spawn(timer.sleep(ms(delay)));
            assert_pending!(s.poll());
            time::advance(fires - start - ms(1)).await;
            assert!(
                !s.is_woken(),
                "tick {tick}, delay {delay}: fired a millisecond early"
            );
            assert_pending!(s.poll());
            time::advance(ms(1)).await;
            assert!(
                s.is_woken(),
                "tick {tick}, delay {delay}: not fired at {fires:?}"
            );
            assert_ready!(s.poll());
            // Move off the tick grid before the next one.
            time::advance(ms(delay % 3 + 1)).await;
        }
        let stats = timer.stats();
        assert_eq!((stats.pending, stats.entries), (0, 0));
        assert_eq!(stats.fired, delays.len() as u64);
    }
}

#[test]
fn builder_runtime_builds_a_timer_outside_any_runtime() {
    let _guard = common::guard();
    let rt = paused_rt();
    let timer = Timer::builder()
        .tick(ms(10))
        .slots_per_level(8)
        .runtime(rt.handle().clone())
        .build()
        .unwrap();
    assert_eq!((timer.tick(), timer.slots_per_level()), (ms(10), 8));
    rt.block_on(async {
        let start = Instant::now();
        timer.sleep(ms(25)).await;
        assert_eq!(start.elapsed(), ms(30));
        timer.sleep(ms(1)).await;
        assert_eq!(start.elapsed(), ms(40));
    });
    assert_eq!(timer.stats().fired, 2);
    drop(rt);
    assert!(timer.is_shut_down());
}

#[test]
fn build_errors() {
    let _guard = common::guard();
    // Outside a runtime, with no runtime given.
    assert!(Timer::builder().build().unwrap_err().is_no_runtime());
    assert!(Timer::try_current().unwrap_err().is_no_runtime());

    let rt = real_rt();
    let builder = || Timer::builder().runtime(rt.handle().clone());
    let err = builder().tick(Duration::ZERO).build().unwrap_err();
    assert!(err.is_invalid_tick() && !err.is_invalid_slots() && !err.is_no_runtime());
    assert!(builder()
        .tick(Duration::MAX)
        .build()
        .unwrap_err()
        .is_invalid_tick());
    for slots in [0, 1, 3, 6, 100, 4097, 8192] {
        let err = builder().slots_per_level(slots).build().unwrap_err();
        assert!(err.is_invalid_slots(), "{slots}: {err}");
        assert!(!err.is_invalid_tick() && !err.is_timers_disabled());
    }
    for slots in [2, 4, 64, 4096] {
        let timer = builder().slots_per_level(slots).build().unwrap();
        assert_eq!(timer.slots_per_level(), slots);
    }
    assert!(builder().tick(Duration::from_nanos(1)).build().is_ok());
    for shards in [0, 3, 6, 128] {
        let err = builder().shards(shards).build().unwrap_err();
        assert!(
            err.is_invalid_shards() && !err.is_invalid_slots(),
            "{shards}: {err}"
        );
        assert!(err.to_string().contains("power of two"), "{err}");
    }
    for shards in [1, 2, 64] {
        assert_eq!(builder().shards(shards).build().unwrap().shards(), shards);
    }
    // A limit is counted under one lock: more shards are refused, and the
    // default is one.
    let err = builder().max_pending(10).shards(2).build().unwrap_err();
    assert!(
        err.is_invalid_shards() && err.to_string().contains("max_pending"),
        "{err}"
    );
    assert_eq!(
        builder()
            .max_pending(10)
            .shards(1)
            .build()
            .unwrap()
            .shards(),
        1
    );

    // A runtime without `enable_time()`.
    let no_time = RtBuilder::new_current_thread().build().unwrap();
    let err = Timer::builder()
        .runtime(no_time.handle().clone())
        .build()
        .unwrap_err();
    assert!(err.is_timers_disabled(), "{err}");
    assert!(err.to_string().contains("enable_time"), "{err}");
    no_time.block_on(async {
        assert!(Timer::builder().build().unwrap_err().is_timers_disabled());
        assert!(Timer::try_current().unwrap_err().is_timers_disabled());
        let mut sleep = wheel::sleep(ms(5));
        let err = catch_unwind(AssertUnwindSafe(|| poll_once(&mut sleep))).unwrap_err();
        assert!(panic_message(&*err).contains("timers disabled"));
    });
}

#[test]
fn try_current_outside_a_runtime_is_no_runtime() {
    let _guard = common::guard();
    let err = Timer::try_current().unwrap_err();
    assert!(err.is_no_runtime());
    assert!(!err.is_timers_disabled() && !err.is_invalid_slots() && !err.is_invalid_tick());
    // Also on a thread that has used (and outlived) a runtime.
    paused_rt().block_on(async { wheel::sleep(ms(1)).await });
    assert!(Timer::try_current().unwrap_err().is_no_runtime());
    let err = catch_unwind(Timer::current).unwrap_err();
    assert!(panic_message(&*err).contains("no tokio runtime"));
}

// ---------------------------------------------------------------------------
// Timer lifetime
// ---------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn dropping_every_handle_frees_the_timer() {
    let _guard = common::guard();
    let metrics = Handle::current().metrics();
    settle().await;
    let base = metrics.num_alive_tasks();

    let timer = Timer::builder().tick(ms(5)).build().unwrap();
    let copy = timer.clone();
    settle().await;
    // The timer's sentinel task lives exactly as long as the timer.
    assert_eq!(metrics.num_alive_tasks(), base + 1);
    let mut sleep = task::spawn(copy.sleep(ms(50)));
    assert_pending!(sleep.poll());
    // A cancelled sleep leaves the alarm armed; that must not keep it alive.
    drop(sleep);
    drop(timer);
    drop(copy);
    settle().await;
    assert_eq!(metrics.num_alive_tasks(), base, "the timer was not freed");
    // The alarm's deadline passing later is harmless.
    time::advance(ms(100)).await;
    settle().await;
    assert_eq!(metrics.num_alive_tasks(), base);

    // Built and dropped before its sentinel task ever ran.
    drop(Timer::builder().build().unwrap());
    settle().await;
    assert_eq!(metrics.num_alive_tasks(), base, "the timer was not freed");
}

#[tokio::test(start_paused = true)]
async fn a_sleep_keeps_its_timer_alive() {
    let _guard = common::guard();
    let metrics = Handle::current().metrics();
    settle().await;
    let base = metrics.num_alive_tasks();

    let timer = Timer::builder().tick(ms(10)).build().unwrap();
    let start = Instant::now();
    let mut sleep = task::spawn(timer.sleep(ms(25)));
    let mut not_yet_polled = timer.sleep(ms(40));
    drop(timer);
    assert_pending!(sleep.poll());
    settle().await;
    assert_eq!(
        metrics.num_alive_tasks(),
        base + 1,
        "freed while a sleep holds it"
    );
    time::advance(ms(30)).await;
    assert!(sleep.is_woken());
    assert_ready!(sleep.poll());
    drop(sleep);
    settle().await;
    assert_eq!(
        metrics.num_alive_tasks(),
        base + 1,
        "freed while a sleep holds it"
    );
    (&mut not_yet_polled).await;
    assert_eq!(start.elapsed(), ms(40));
    drop(not_yet_polled);
    settle().await;
    assert_eq!(metrics.num_alive_tasks(), base, "the timer was not freed");
}

#[test]
fn a_runtime_whose_timers_were_dropped_shuts_down_cleanly() {
    let _guard = common::guard();
    let rt = paused_rt();
    rt.block_on(async {
        for tick in [1, 3, 10] {
            let timer = Timer::builder().tick(ms(tick)).build().unwrap();
            let mut pending_sleep = task::spawn(timer.sleep(secs(60)));
            assert_pending!(pending_sleep.poll());
            timer.sleep(ms(5)).await;
            drop(timer);
            drop(pending_sleep);
        }
        wheel::sleep(ms(5)).await;
    });
    let (done_tx, done_rx) = mpsc::channel();
    thread::spawn(move || {
        drop(rt);
        done_tx.send(()).unwrap();
    });
    done_rx
        .recv_timeout(secs(10))
        .expect("the runtime shuts down");
}

/// The driver can run on any thread that registers or resets a timer; it
/// must judge "due" by the clock of the timer's own runtime. Here that clock
/// is paused while the real clock runs ahead, and a reset from a thread with
/// no runtime must not fire the sleep by the real clock.
#[test]
fn the_driver_reads_its_own_runtimes_clock() {
    let _guard = common::guard();
    let rt = paused_rt();
    let (start, mut sleep) = rt.block_on(async {
        let timer = Timer::builder().build().unwrap();
        let start = Instant::now();
        let mut sleep = task::spawn(timer.sleep(secs(3600)));
        assert_pending!(sleep.poll());
        (start, sleep)
    });
    // The real clock moves at least 60 ms past the paused one.
    thread::sleep(ms(60));
    thread::scope(|s| {
        s.spawn(|| sleep.enter(|_, sleep| sleep.reset(start + ms(50))));
    });
    rt.block_on(async {
        assert!(
            !sleep.is_woken(),
            "fired by the real clock, 50 ms early on the paused one"
        );
        assert_pending!(sleep.poll());
        time::advance(ms(50)).await;
        assert!(sleep.is_woken());
        assert_ready!(sleep.poll());
    });
}

/// A runtime timer's clock is its runtime's, whichever context asks: with
/// a paused runtime, the real clock (outside it) is ahead, and reading that
/// would complete sleeps early.
#[test]
fn a_runtime_timers_clock_is_its_runtimes_from_any_context() {
    let _guard = common::guard();
    let rt = RtBuilder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    let (timer, start) = rt.block_on(async {
        time::advance(Duration::from_secs(3600)).await;
        (Timer::builder().build().unwrap(), Instant::now())
    });
    thread::sleep(Duration::from_millis(20));
    assert_eq!(timer.now(), start, "read outside the runtime");

    // Real time has moved on 20 ms; the timer's clock has not.
    let deadline = start + Duration::from_millis(10);
    let eager = timer.try_sleep_until(deadline).unwrap();
    assert!(!eager.is_elapsed(), "due in 10 ms on the timer's clock");
    let mut sleep = task::spawn(timer.sleep(Duration::from_millis(10)));
    assert_pending!(sleep.poll());
    assert_eq!(sleep.deadline(), deadline);
}

/// Runs the calling test again, alone, in a child process with `child` set
/// in its environment, and checks that it passed: `false`, the parent's
/// work done. In that child (`true`), the panic hook now notes each report
/// in `seen` instead of printing it.
fn in_a_child_noting_panics(child: &str, seen: &'static std::sync::Mutex<Vec<String>>) -> bool {
    if !common::in_a_child(child, &["--test-threads=1"]) {
        return false;
    }
    std::panic::set_hook(Box::new(|info| {
        seen.lock().unwrap().push(info.to_string());
    }));
    true
}

/// Building a timer on a runtime without timers returns an error. The
/// crate installs no panic hook: tokio's panic, which is how the build
/// finds out, reaches the process's own hook, and a timer built during an
/// unwind (where replacing the hook would abort) is built. Run in a child
/// process, whose panic hook is its own and whose first build is this one.
#[test]
fn a_build_leaves_the_panic_hook_alone() {
    let _guard = common::guard();
    static SEEN: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    if !in_a_child_noting_panics("WHEEL_HOOK_CHILD", &SEEN) {
        return;
    }
    struct BuildsWhenDropped(tokio::runtime::Handle);
    impl Drop for BuildsWhenDropped {
        fn drop(&mut self) {
            assert!(std::thread::panicking());
            let built = Timer::builder().runtime(self.0.clone()).build();
            assert!(built.is_ok(), "{built:?}");
        }
    }
    let with_time = RtBuilder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let unwound = std::panic::catch_unwind(|| {
        let _builds = BuildsWhenDropped(with_time.handle().clone());
        panic!("unwinding");
    });
    assert!(unwound.is_err());
    let no_time = RtBuilder::new_current_thread().build().unwrap();
    let err = Timer::builder()
        .runtime(no_time.handle().clone())
        .build()
        .unwrap_err();
    assert!(err.is_timers_disabled(), "{err}");
    let seen = SEEN.lock().unwrap().clone();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert!(seen[0].contains("unwinding"), "{seen:?}");
    assert!(seen[1].contains("timers are disabled"), "{seen:?}");
}

/// On a runtime without timers, the default timer is tried once a thread:
/// tokio's panic, caught, reaches the panic hook once, not at every
/// `wheel::timeout` or `wheel::sleep`, and each lookup still says why it
/// failed. Run in a child process, whose panic hook is its own.
#[test]
fn a_runtime_without_timers_is_tried_once_a_thread() {
    let _guard = common::guard();
    static SEEN: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    if !in_a_child_noting_panics("WHEEL_TIMERLESS_CHILD", &SEEN) {
        return;
    }
    let no_time = RtBuilder::new_current_thread().build().unwrap();
    no_time.block_on(async {
        for _ in 0..3 {
            assert_eq!(wheel::timeout(ms(5), async { 7 }).await, Ok(7));
            assert!(Timer::try_current().unwrap_err().is_timers_disabled());
            drop(wheel::sleep(ms(5)));
        }
    });
    another_runtime_here_gets_its_timer_and_the_hook_saw_one(&SEEN, "timers are disabled");
}

/// The end of the two tests above and below: the refusal remembered is
/// only that runtime's (another on the same thread gets its timer), and
/// the panic hook saw tokio's panic once, saying `why`.
fn another_runtime_here_gets_its_timer_and_the_hook_saw_one(
    seen: &std::sync::Mutex<Vec<String>>,
    why: &str,
) {
    let live = RtBuilder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    live.block_on(async { assert!(Timer::try_current().is_ok()) });
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert!(seen[0].contains(why), "{seen:?}");
}

/// Found by review: likewise a runtime that has shut down, entered by a
/// handle kept: its default timer is tried once a thread (the tokio panic
/// the build catches reaches the hook once), and every later lookup fails
/// at once, saying why: a timeout of a ready future still completes, a
/// sleep is still made.
#[test]
fn a_shut_down_runtime_is_tried_once_a_thread() {
    let _guard = common::guard();
    static SEEN: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    if !in_a_child_noting_panics("WHEEL_SHUT_DOWN_CHILD", &SEEN) {
        return;
    }
    let rt = RtBuilder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let handle = rt.handle().clone();
    drop(rt);
    let _entered = handle.enter();
    for _ in 0..3 {
        let ready = futures::executor::block_on(wheel::timeout(ms(5), async { 7 }));
        assert_eq!(ready, Ok(7));
        let refused = Timer::try_current().unwrap_err();
        assert!(refused.is_no_runtime(), "{refused}");
        assert!(refused.to_string().contains("shut down"), "{refused}");
        drop(wheel::sleep(ms(5)));
    }
    another_runtime_here_gets_its_timer_and_the_hook_saw_one(&SEEN, "being shutdown");
}

/// What the README says of a timer built off tokio's millisecond grid (here
/// 300 µs into a paused runtime): a sleep due on tokio's grid wakes at most
/// 1 ms after tokio's own, never before.
#[tokio::test(start_paused = true)]
async fn a_timer_built_off_tokios_grid_wakes_within_a_millisecond_of_tokio_never_before() {
    let _guard = common::guard();
    tokio::time::advance(Duration::from_micros(300)).await;
    let built = tokio::time::Instant::now();
    let deadline = built - Duration::from_micros(300) + Duration::from_millis(10);
    let mut ours = tokio_test::task::spawn(wheel::sleep_until(deadline));
    tokio_test::assert_pending!(ours.poll());
    tokio::time::advance(deadline - built - Duration::from_micros(1)).await;
    assert!(!ours.is_woken(), "woken before its deadline");
    tokio::time::advance(Duration::from_millis(1) + Duration::from_micros(1)).await;
    assert!(ours.is_woken(), "more than 1 ms after its deadline");
}

/// Found by review: a runtime kept in a thread-local is dropped by the
/// thread-local's destructor, and tokio's time driver, shutting down, fires
/// every timer, the wheel's alarm included. The alarm's wake reached the
/// driver's own thread-local (destroyed by then) and entered the runtime,
/// both of which panic there, and a panic in a thread-local destructor
/// aborts the process. With a paused clock, reading the time looks up
/// tokio's context thread-local, also destroyed by then (a second review
/// found the wake still read it). Run in a child process, since that is
/// an abort; once on tokio's real clock, once paused.
#[test]
fn a_runtime_dropped_by_a_thread_local_destructor_does_not_abort() {
    let _guard = common::guard();
    const CHILD: &str = "WHEEL_TLS_DROP_CHILD";
    let Some(clock) = std::env::var_os(CHILD) else {
        for clock in ["real", "paused"] {
            let out = common::rerun_alone(&[(CHILD, clock)], &[]);
            assert!(
                out.status.success(),
                "child on the {clock} clock failed: {:?}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
        }
        return;
    };
    let paused = clock == "paused";
    struct Held {
        rt: tokio::runtime::Runtime,
        timer: Option<wheel::Timer>,
    }
    std::thread_local! {
        static HELD: std::cell::RefCell<Option<Held>> = const { std::cell::RefCell::new(None) };
    }
    std::thread::spawn(move || {
        // `HELD` is used first, so it is destroyed last: after the
        // driver's own thread-local, which the sleep below uses first.
        HELD.with(|held| {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .start_paused(paused)
                .build()
                .unwrap();
            *held.borrow_mut() = Some(Held { rt, timer: None });
        });
        HELD.with(|held| {
            let mut held = held.borrow_mut();
            let held = held.as_mut().unwrap();
            let timer = held.rt.block_on(async {
                let timer = wheel::Timer::builder().build().unwrap();
                // Arms the alarm with tokio.
                let mut sleep = task::spawn(timer.sleep(Duration::from_secs(3600)));
                assert_pending!(sleep.poll());
                timer
            });
            held.timer = Some(timer);
        });
        // The thread exits: `HELD`'s destructor drops the runtime.
    })
    .join()
    .unwrap();
}
