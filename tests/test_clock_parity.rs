//! The test clock against tokio's paused clock: the same program, generated
//! by proptest from a fixed seed, on a `TestRuntime` of 1, 2 and 4 workers
//! with auto-advance and on a paused current-thread tokio runtime, each
//! task recording the instant (counted from the program's start) and the
//! result of every step. The records must be equal.
//!
//! The steps cover what decides when the test clock may move: a sleep, a
//! `timeout` over a message another task sends (or never sends), one over a
//! TCP round trip on loopback, `block_in_place`, and a callback; task 0 runs
//! in `block_on`'s own future, which the others wake. On tokio, a callback
//! is a task that sleeps and then runs it, and `block_in_place` (which a
//! current-thread runtime refuses) blocks inline: neither moves its clock.

mod common;

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{FileFailurePersistence, RngSeed};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::{Builder, Runtime};
use wheel::{TestClock, TestRuntime};

#[derive(Debug, Clone)]
enum Step {
    Sleep(u64),
    /// A helper task sends after `send_after` ms (never, if `None`); the
    /// step waits for the message under a timeout of `limit` ms.
    Message {
        limit: u64,
        send_after: Option<u64>,
    },
    /// A byte to the echo server and back, under a timeout of `limit` ms.
    Ping {
        limit: u64,
    },
    BlockInPlace,
    /// A callback due in this many ms, which sends the time it ran at.
    Callback(u64),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (1..50u64).prop_map(Step::Sleep),
        // The message never comes at the timeout's own instant: which of
        // the two would win then is left to the runtime's order.
        (1..30u64, prop::option::of(0..30u64))
            .prop_filter("no tie", |(limit, after)| *after != Some(*limit))
            .prop_map(|(limit, send_after)| Step::Message { limit, send_after }),
        (1..10u64).prop_map(|limit| Step::Ping { limit }),
        Just(Step::BlockInPlace),
        (1..40u64).prop_map(Step::Callback),
    ]
}

/// Per task, what each step saw: when it ended, in ms from the program's
/// start, and its result.
type Record = Vec<Vec<(u64, String)>>;

/// The clock a side reads, and how it runs each step.
trait Side: Clone + Send + Sync + 'static {
    fn now(&self) -> tokio::time::Instant;
    fn sleep(&self, ms: u64) -> Pin<Box<dyn Future<Output = ()> + Send>>;
    fn timeout<'a, F: Future + Send + 'a>(
        &self,
        ms: u64,
        future: F,
    ) -> Pin<Box<dyn Future<Output = Option<F::Output>> + Send + 'a>>
    where
        F::Output: Send;
    fn block(&self);
    fn callback(&self, ms: u64, run: Box<dyn FnOnce(tokio::time::Instant) + Send>);
}

#[derive(Clone)]
struct Wheel;

impl Side for Wheel {
    fn now(&self) -> tokio::time::Instant {
        wheel::now()
    }
    fn sleep(&self, ms: u64) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        Box::pin(wheel::sleep(Duration::from_millis(ms)))
    }
    fn timeout<'a, F: Future + Send + 'a>(
        &self,
        ms: u64,
        future: F,
    ) -> Pin<Box<dyn Future<Output = Option<F::Output>> + Send + 'a>>
    where
        F::Output: Send,
    {
        let timeout = wheel::timeout(Duration::from_millis(ms), future);
        Box::pin(async move { timeout.await.ok() })
    }
    fn block(&self) {
        // Longer than a probe takes to fire.
        tokio::task::block_in_place(|| std::thread::sleep(Duration::from_millis(3)));
    }
    fn callback(&self, ms: u64, run: Box<dyn FnOnce(tokio::time::Instant) + Send>) {
        let timer = wheel::Timer::current();
        let clock = timer.clone();
        timer.schedule(Duration::from_millis(ms), move || run(clock.now()));
    }
}

#[derive(Clone)]
struct Tokio;

impl Side for Tokio {
    fn now(&self) -> tokio::time::Instant {
        tokio::time::Instant::now()
    }
    fn sleep(&self, ms: u64) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        Box::pin(tokio::time::sleep(Duration::from_millis(ms)))
    }
    fn timeout<'a, F: Future + Send + 'a>(
        &self,
        ms: u64,
        future: F,
    ) -> Pin<Box<dyn Future<Output = Option<F::Output>> + Send + 'a>>
    where
        F::Output: Send,
    {
        let timeout = tokio::time::timeout(Duration::from_millis(ms), future);
        Box::pin(async move { timeout.await.ok() })
    }
    fn block(&self) {
        std::thread::sleep(Duration::from_millis(3));
    }
    fn callback(&self, ms: u64, run: Box<dyn FnOnce(tokio::time::Instant) + Send>) {
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            run(tokio::time::Instant::now());
        });
    }
}

/// One task's steps, on a connection of its own to the echo server.
async fn run_task<S: Side>(
    side: S,
    steps: Vec<Step>,
    start: tokio::time::Instant,
    server: std::net::SocketAddr,
) -> Vec<(u64, String)> {
    let at = |side: &S| (side.now() - start).as_millis() as u64;
    let mut connection = TcpStream::connect(server).await.unwrap();
    let mut seen = Vec::new();
    for step in steps {
        let result = match step {
            Step::Sleep(ms) => {
                side.sleep(ms).await;
                "slept".to_owned()
            }
            Step::Message { limit, send_after } => {
                let (tx, rx) = tokio::sync::oneshot::channel::<u8>();
                let helper = side.clone();
                let sender = tokio::spawn(async move {
                    match send_after {
                        Some(ms) => {
                            helper.sleep(ms).await;
                            let _ = tx.send(7);
                        }
                        None => {
                            helper.sleep(100).await;
                            drop(tx);
                        }
                    }
                });
                let got = side.timeout(limit, rx).await;
                sender.await.unwrap();
                format!("message {got:?}")
            }
            Step::Ping { limit } => {
                let connection = &mut connection;
                let round = async move {
                    connection.write_all(&[1]).await.unwrap();
                    let mut pong = [0u8];
                    connection.read_exact(&mut pong).await.unwrap();
                    pong[0]
                };
                let got = side.timeout(limit, round).await;
                format!("ping {got:?}")
            }
            Step::BlockInPlace => {
                side.block();
                "blocked".to_owned()
            }
            Step::Callback(ms) => {
                let (tx, rx) = tokio::sync::oneshot::channel();
                side.callback(
                    ms,
                    Box::new(move |ran_at| {
                        let _ = tx.send(ran_at);
                    }),
                );
                let ran_at = rx.await.unwrap();
                format!("callback at {}", (ran_at - start).as_millis())
            }
        };
        seen.push((at(&side), result));
    }
    seen
}

/// The program: task 0 in the calling future (`block_on`'s), the others
/// spawned; an echo server for the pings.
async fn program<S: Side>(side: S, tasks: Vec<Vec<Step>>) -> Record {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server = listener.local_addr().unwrap();
    let echo = tokio::spawn(async move {
        loop {
            let (mut socket, _) = listener.accept().await.unwrap();
            tokio::spawn(async move {
                let mut byte = [0u8];
                while socket.read_exact(&mut byte).await.is_ok() {
                    if socket.write_all(&byte).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    let start = side.now();
    let mut tasks = tasks.into_iter();
    let first = tasks.next().unwrap_or_default();
    let spawned: Vec<_> = tasks
        .map(|steps| tokio::spawn(run_task(side.clone(), steps, start, server)))
        .collect();
    let mut record = vec![run_task(side.clone(), first, start, server).await];
    for task in spawned {
        record.push(task.await.unwrap());
    }
    echo.abort();
    record
}

fn test_runtime(workers: usize) -> TestRuntime {
    TestClock::new()
        .auto_advance(true)
        .build(
            Builder::new_multi_thread()
                .worker_threads(workers)
                .enable_all(),
        )
        .unwrap()
}

fn tokio_runtime() -> Runtime {
    common::paused_rt_all()
}

thread_local! {
    static RUNTIMES: (Vec<TestRuntime>, Runtime) =
        ([1, 2, 4].map(test_runtime).into(), tokio_runtime());
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 500,
        rng_seed: RngSeed::Fixed(0x7e57_c10c),
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "proptest-regressions/tests/test_clock_parity.txt"
        ))),
        ..ProptestConfig::default()
    })]

    /// Each program runs on a test runtime of 1, 2 or 4 workers, as
    /// generated, and on tokio.
    #[test]
    fn the_test_clock_matches_tokios_paused_clock(
        tasks in prop::collection::vec(prop::collection::vec(step(), 1..5), 1..4),
        workers in 0..3usize,
    ) {
        let _guard = common::guard();
        let (wheel_record, tokio_record) = RUNTIMES.with(|(test, tokio)| {
            let rt = &test[workers];
            let wheel_record = rt.block_on(program(Wheel, tasks.clone()));
            let tokio_record = tokio.block_on(program(Tokio, tasks));
            (wheel_record, tokio_record)
        });
        prop_assert_eq!(wheel_record, tokio_record);
    }
}
