//! Model-based property test of `Sleep` under tokio's paused clock: random
//! create / drop / reset / advance sequences checked against a reference model.
//!
//! Every sleep that is not dropped completes exactly once per arming, never
//! before its deadline, and exactly at its deadline rounded up to its
//! timer's tick (so at most one tick late). Timers range from a 1 ns tick
//! with 2 slots per level (64 levels: deadlines decades away are ~2^60
//! ticks, so jumps cross every level) to 10 ms with 64 slots; deadlines and
//! jumps reach decades, `Duration::MAX`, and past the 1 ns wheel's 584-year
//! range, where a sleep never fires.
//!
//! Failures are saved to `proptest-regressions/tests/model.txt` (committed),
//! and the shrunk ones are kept below as named tests.

use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use tokio::time;
use tokio_test::task::{self, Spawn};
use wheel::{Instant, Sleep, Timer};

mod common;
use common::{ms, paused_rt_far};

/// A year, in milliseconds.
const YEAR_MS: u64 = 365 * 86_400_000;

/// The longest a duration waits (tokio's cap, and what the crate makes of
/// a sum that overflows `Instant`): 30 years.
const FAR: Duration = Duration::from_secs(86_400 * 365 * 30);

/// `delay` ms after `now`; `u64::MAX` stands for `Duration::MAX`.
fn duration(delay: u64) -> Duration {
    if delay == u64::MAX {
        Duration::MAX
    } else {
        ms(delay)
    }
}

/// `now + duration(delay)`, clamped as the crate clamps it.
fn after(now: Instant, delay: u64) -> Instant {
    now.checked_add(duration(delay)).unwrap_or(now + FAR)
}

/// The deadline of `sleep(duration(delay))` made at `now`: a duration over
/// 30 years counts as 30 years, as with `tokio::time::sleep`.
fn sleep_deadline(now: Instant, delay: u64) -> Instant {
    now + duration(delay).min(FAR)
}

/// An explicit timer to build, `built_at` ms after the case starts.
#[derive(Debug, Clone)]
struct TimerSpec {
    /// The tick in ms; 0 means 1 ns.
    tick_ms: u64,
    slots: usize,
    built_at: u64,
}

#[derive(Debug, Clone)]
enum Op {
    /// A sleep of `delay` ms (`u64::MAX`: `Duration::MAX`) on timer
    /// `timer % timers` (0 is the default timer), made with `sleep` or
    /// `sleep_until`, and polled at once.
    Create {
        timer: usize,
        delay: u64,
        until: bool,
    },
    /// Drops the live sleep `pick % live`.
    Drop { pick: usize },
    /// Resets the live sleep `pick % live` to `delay` ms from now, or ago
    /// if `past`.
    Reset { pick: usize, delay: u64, past: bool },
    /// Advances the paused clock by `by` ms, then polls every live sleep
    /// (or, when `poll` is false, leaves fired sleeps uncollected).
    Advance { by: u64, poll: bool },
}

fn timer_spec() -> impl Strategy<Value = TimerSpec> {
    (
        // 0 stands for a 1 ns tick.
        prop::sample::select(vec![0u64, 1, 3, 10]),
        prop::sample::select(vec![2usize, 4, 64]),
        0u64..20,
    )
        .prop_map(|(tick_ms, slots, built_at)| TimerSpec {
            tick_ms,
            slots,
            built_at,
        })
}

/// Delays: mostly anywhere in 5 s, often within a few ticks, sometimes
/// zero, sometimes decades, `Duration::MAX`, or past a 1 ns wheel's range.
fn delay() -> impl Strategy<Value = u64> {
    prop_oneof![
        12 => 0u64..5000,
        8 => 0u64..30,
        4 => Just(0),
        1 => 0u64..40 * YEAR_MS,
        1 => Just(u64::MAX),
        1 => Just(700 * YEAR_MS),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0usize..8, delay(), any::<bool>())
            .prop_map(|(timer, delay, until)| Op::Create { timer, delay, until }),
        1 => any::<usize>().prop_map(|pick| Op::Drop { pick }),
        2 => (any::<usize>(), delay(), prop::bool::weighted(0.2))
            .prop_map(|(pick, delay, past)| Op::Reset { pick, delay, past }),
        3 => (
            prop_oneof![
                20 => 0u64..3000,
                20 => 0u64..20,
                2 => 0u64..40 * YEAR_MS,
                1 => Just(600 * YEAR_MS),
            ],
            prop::bool::weighted(0.7),
        )
            .prop_map(|(by, poll)| Op::Advance { by, poll }),
    ]
}

/// A timer and what the model expects of its counters.
struct ModelTimer {
    timer: Timer,
    origin: Instant,
    tick: Duration,
    fired: u64,
    cancelled: u64,
}

impl ModelTimer {
    /// When the timer fires a registered `deadline`: rounded up to a whole
    /// number of ticks after the timer's origin; never if that is tick
    /// `u64::MAX` or beyond, where the wheel clamps what it cannot count.
    fn fires_at(&self, deadline: Instant) -> Option<Instant> {
        let since = deadline.saturating_duration_since(self.origin).as_nanos();
        let tick = self.tick.as_nanos();
        let ticks = since.div_ceil(tick);
        if ticks >= u128::from(u64::MAX) {
            return None;
        }
        let nanos = ticks * tick;
        let offset = Duration::new(
            u64::try_from(nanos / 1_000_000_000).unwrap(),
            (nanos % 1_000_000_000) as u32,
        );
        Some(self.origin + offset)
    }

    /// Whether a registered `deadline` has fired by `now`.
    fn due(&self, deadline: Instant, now: Instant) -> bool {
        self.fires_at(deadline).is_some_and(|at| at <= now)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// In the wheel, waiting for its deadline.
    Pending,
    /// Fired by the timer; the next poll returns `Ready`.
    Fired,
    /// Returned `Ready` (no wheel entry).
    Done,
}

/// A live sleep and its model.
struct LiveSleep {
    id: usize,
    task: Spawn<Sleep>,
    timer: usize,
    deadline: Instant,
    state: State,
    /// The wheel holds this sleep's waker (from its last pending poll; firing
    /// takes it).
    has_waker: bool,
    /// The wheel holds this sleep's entry: it belongs to the sleep, from its
    /// registration until its completing poll frees it (a fire leaves it),
    /// or a reset to a deadline already due (which completes it there).
    holds_entry: bool,
    /// The task has been woken since it was last entered (polled or reset).
    woken: bool,
    /// Times it returned `Ready`, and times it was armed (created, or reset
    /// after completing): every arming completes exactly once.
    completions: u32,
    armings: u32,
}

struct Model {
    timers: Vec<ModelTimer>,
    live: Vec<LiveSleep>,
}

impl Model {
    /// The timer fires sleep `i` now: its waker, if the wheel holds one, is
    /// woken. A pass leaves the entry, for the sleep's next poll to free; a
    /// reset to a deadline already due frees it (`freed`).
    fn fire(&mut self, i: usize, freed: bool) {
        let s = &mut self.live[i];
        s.state = State::Fired;
        s.holds_entry &= !freed;
        s.woken |= s.has_waker;
        s.has_waker = false;
        self.timers[s.timer].fired += 1;
    }

    /// Polls sleep `i`, and checks the result against the model.
    fn poll(&mut self, i: usize) {
        let now = Instant::now();
        let s = &mut self.live[i];
        let ready = s.task.poll().is_ready();
        s.woken = false;
        match s.state {
            State::Pending => {
                assert!(!ready, "sleep {}: ready before its tick", s.id);
                s.has_waker = true;
            }
            State::Fired => {
                assert!(ready, "sleep {}: fired but not ready", s.id);
                assert!(now >= s.deadline, "sleep {}: completed early", s.id);
                s.state = State::Done;
                s.holds_entry = false;
                s.completions += 1;
            }
            State::Done => unreachable!("completed sleeps are not polled again"),
        }
    }

    /// Polls a sleep that is in no wheel (just created): like a registered one, it completes iff its deadline's
    /// tick has come (so never before the deadline itself), and otherwise
    /// registers and fires at that tick. The crate does not read the clock
    /// to complete a deadline that passed within the current tick sooner,
    /// any more than `tokio::time` does.
    fn poll_fresh(&mut self, i: usize) {
        let now = Instant::now();
        let due = self.timers[self.live[i].timer].due(self.live[i].deadline, now);
        let s = &mut self.live[i];
        let ready = s.task.poll().is_ready();
        s.woken = false;
        assert_eq!(
            ready, due,
            "sleep {}: first poll at {now:?}, deadline {:?}",
            s.id, s.deadline
        );
        assert!(
            !ready || s.deadline <= now,
            "sleep {}: completed early",
            s.id
        );
        if ready {
            s.state = State::Done;
            s.completions += 1;
        } else {
            s.state = State::Pending;
            s.has_waker = true;
            s.holds_entry = true;
        }
    }

    /// Fires every pending sleep whose rounded-up deadline has come.
    fn fire_due(&mut self) {
        let now = Instant::now();
        for i in 0..self.live.len() {
            let s = &self.live[i];
            if s.state == State::Pending && self.timers[s.timer].due(s.deadline, now) {
                self.fire(i, false);
            }
        }
    }

    fn poll_all(&mut self) {
        for i in 0..self.live.len() {
            if self.live[i].state != State::Done {
                self.poll(i);
            }
        }
    }

    /// Compares every sleep and every timer's counters with the model.
    fn check(&self) {
        let now = Instant::now();
        for s in &self.live {
            let t = &self.timers[s.timer];
            let at = |i: Instant| i.saturating_duration_since(t.origin);
            let what = format!(
                "sleep {} on timer {} ({:?} tick) at {:?}: {:?}, deadline {:?}, fires {:?}",
                s.id,
                s.timer,
                t.tick,
                at(now),
                s.state,
                at(s.deadline),
                t.fires_at(s.deadline).map(at)
            );
            assert_eq!(s.task.is_woken(), s.woken, "woken: {what}");
            assert_eq!(
                s.task.is_elapsed(),
                s.state != State::Pending,
                "is_elapsed: {what}"
            );
            assert_eq!(s.task.deadline(), s.deadline, "deadline: {what}");
            if s.state == State::Pending {
                // Never fires before its deadline, and always by a tick after
                // (unless its deadline is beyond the wheel's range).
                assert!(!t.due(s.deadline, now), "not fired: {what}");
                if t.fires_at(s.deadline).is_some() {
                    assert!(now < s.deadline + t.tick, "not fired: {what}");
                }
            }
            let open = u32::from(s.state != State::Done);
            assert_eq!(s.completions + open, s.armings, "completions: {what}");
        }
        for (i, t) in self.timers.iter().enumerate() {
            let mine = || self.live.iter().filter(move |s| s.timer == i);
            let pending = mine().filter(|s| s.state == State::Pending).count();
            let stats = t.timer.stats();
            assert_eq!(stats.pending, pending, "timer {i}: pending, {stats:?}");
            // A fired sleep keeps its entry until it is polled: it is the
            // sleep's to free.
            let entries = mine().filter(|s| s.holds_entry).count();
            assert_eq!(stats.entries, entries, "timer {i}: entries, {stats:?}");
            assert_eq!(stats.fired, t.fired, "timer {i}: fired, {stats:?}");
            assert_eq!(
                stats.cancelled, t.cancelled,
                "timer {i}: cancelled, {stats:?}"
            );
        }
    }

    fn apply(&mut self, op: Op, next_id: &mut usize) {
        let now = Instant::now();
        match op {
            Op::Create {
                timer,
                delay,
                until,
            } => {
                let timer = timer % self.timers.len();
                let deadline = if until {
                    after(now, delay)
                } else {
                    sleep_deadline(now, delay)
                };
                let sleep = match (timer, until) {
                    (0, false) => wheel::sleep(duration(delay)),
                    (0, true) => wheel::sleep_until(deadline),
                    (t, false) => self.timers[t].timer.sleep(duration(delay)),
                    (t, true) => self.timers[t].timer.sleep_until(deadline),
                };
                assert_eq!(sleep.deadline(), deadline, "{delay} ms");
                self.live.push(LiveSleep {
                    id: *next_id,
                    task: task::spawn(sleep),
                    timer,
                    deadline,
                    state: State::Done,
                    has_waker: false,
                    holds_entry: false,
                    woken: false,
                    completions: 0,
                    armings: 1,
                });
                *next_id += 1;
                self.poll_fresh(self.live.len() - 1);
            }
            Op::Drop { pick } => {
                if self.live.is_empty() {
                    return;
                }
                let s = self.live.swap_remove(pick % self.live.len());
                if s.state == State::Pending {
                    self.timers[s.timer].cancelled += 1;
                }
            }
            Op::Reset { pick, delay, past } => {
                if self.live.is_empty() {
                    return;
                }
                let i = pick % self.live.len();
                let deadline = if past {
                    now.checked_sub(duration(delay)).unwrap_or(now)
                } else {
                    after(now, delay)
                };
                let s = &mut self.live[i];
                s.deadline = deadline;
                s.task.enter(|_, sleep| sleep.reset(deadline));
                s.woken = false;
                let due = self.timers[s.timer].due(deadline, now);
                match s.state {
                    // Moved in the wheel, keeping its waker; fired (and
                    // woken) at once if the new deadline's tick has come.
                    State::Pending if due => self.fire(i, true),
                    State::Pending => {}
                    // Fired but uncollected: the entry is scheduled again,
                    // or fired again at once.
                    State::Fired if due => self.fire(i, true),
                    State::Fired => {
                        s.state = State::Pending;
                        s.holds_entry = true;
                    }
                    // Completed: registered again at once, with no waker,
                    // as tokio's reset does (fired at once, and counted, if
                    // the new deadline's tick has come); then polled.
                    State::Done => {
                        s.armings += 1;
                        s.has_waker = false;
                        if due {
                            self.fire(i, true);
                        } else {
                            s.state = State::Pending;
                            s.holds_entry = true;
                        }
                        self.poll(i);
                    }
                }
            }
            Op::Advance { poll, .. } => {
                // The caller has advanced the clock; `advance` returns after
                // the timers due by then have woken their tasks.
                self.fire_due();
                if poll {
                    self.poll_all();
                }
            }
        }
    }
}

fn run_case(specs: Vec<TimerSpec>, ops: Vec<Op>, finish: bool) {
    let rt = paused_rt_far();
    rt.block_on(async move {
        let start = Instant::now();
        let mut model = Model {
            timers: vec![ModelTimer {
                timer: Timer::current(),
                origin: start,
                tick: Timer::current().tick(),
                fired: 0,
                cancelled: 0,
            }],
            live: Vec::new(),
        };
        let mut specs = specs;
        specs.sort_by_key(|s| s.built_at);
        for spec in &specs {
            let at = start + ms(spec.built_at);
            time::advance(at - Instant::now()).await;
            assert_eq!(Instant::now(), at);
            let tick = match spec.tick_ms {
                0 => Duration::from_nanos(1),
                n => ms(n),
            };
            let timer = Timer::builder()
                .tick(tick)
                .slots_per_level(spec.slots)
                .build()
                .unwrap();
            model.timers.push(ModelTimer {
                timer,
                origin: at,
                tick,
                fired: 0,
                cancelled: 0,
            });
        }

        let mut next_id = 0;
        for op in ops {
            if let Op::Advance { by, .. } = op {
                time::advance(ms(by)).await;
            }
            model.apply(op, &mut next_id);
            model.check();
        }

        if finish {
            // On to the last moment a pending sleep is due; then every sleep
            // has completed but those beyond their wheel's range.
            let last = model
                .live
                .iter()
                .filter(|s| s.state == State::Pending)
                .filter_map(|s| model.timers[s.timer].fires_at(s.deadline))
                .max();
            if let Some(last) = last {
                time::advance(last.saturating_duration_since(Instant::now())).await;
            }
            model.apply(Op::Advance { by: 0, poll: true }, &mut next_id);
            model.check();
            for s in &model.live {
                let never = model.timers[s.timer].fires_at(s.deadline).is_none();
                assert!(
                    s.state == State::Done || never,
                    "sleep {} never completed",
                    s.id
                );
            }
        }

        let Model { mut timers, live } = model;
        for s in live {
            if s.state == State::Pending {
                timers[s.timer].cancelled += 1;
            }
        }
        for (i, t) in timers.iter().enumerate() {
            let stats = t.timer.stats();
            assert_eq!(
                (stats.pending, stats.entries),
                (0, 0),
                "timer {i}: {stats:?}"
            );
            // An empty wheel keeps at most its trim floor of 1024 entries.
            assert!(stats.allocated_entries <= 1024, "timer {i}: {stats:?}");
            assert_eq!(stats.fired, t.fired, "timer {i}: fired, {stats:?}");
            assert_eq!(
                stats.cancelled, t.cancelled,
                "timer {i}: cancelled, {stats:?}"
            );
        }
    });
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 64,
        // Source-parallel persistence looks for a lib.rs above the source
        // file, which tests/ lacks; name the file (cargo runs tests from the
        // package root).
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "proptest-regressions/tests/model.txt"
        ))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn sleeps_match_the_model(
        specs in prop::collection::vec(timer_spec(), 0..4),
        ops in prop::collection::vec(op(), 1..150),
        finish in any::<bool>(),
    ) {
        run_case(specs, ops, finish);
    }
}

/// A fixed sequence through the model, so every kind of step is taken at
/// least once: resets into the past, resets of fired and of completed
/// sleeps, drops of fired sleeps, advances that stop just short of a tick.
#[test]
fn a_fixed_sequence_matches_the_model() {
    let _guard = common::guard();
    let specs = vec![
        TimerSpec {
            tick_ms: 10,
            slots: 2,
            built_at: 3,
        },
        TimerSpec {
            tick_ms: 3,
            slots: 4,
            built_at: 7,
        },
    ];
    let mut ops = Vec::new();
    for t in 0..3 {
        for delay in [0, 1, 9, 10, 11, 64, 65, 4099] {
            ops.push(Op::Create {
                timer: t,
                delay,
                until: delay % 2 == 0,
            });
        }
    }
    let advance = |by, poll| Op::Advance { by, poll };
    let reset = |pick, delay| Op::Reset {
        pick,
        delay,
        past: false,
    };
    let reset_back = |pick, delay| Op::Reset {
        pick,
        delay,
        past: true,
    };
    ops.extend([
        advance(5, true),
        reset(3, 0),
        reset(4, 3000),
        advance(9, false),
        reset(1, 0),
        reset(2, 40),
        Op::Drop { pick: 9 },
        advance(1, true),
        reset(0, 2),
        Op::Drop { pick: 5 },
        advance(1, true),
        advance(70, false),
        reset_back(0, 100),
        reset_back(4, 1),
        reset_back(8, 0),
        reset_back(12, 5),
        reset(5, 0),
        reset(1, 0),
        reset(2, 13),
        Op::Drop { pick: 6 },
        advance(2999, true),
        Op::Drop { pick: 7 },
        advance(1, true),
        Op::Drop { pick: 0 },
        Op::Drop { pick: 3 },
    ]);
    run_case(specs.clone(), ops.clone(), true);
    run_case(specs, ops, false);
}

/// Shrunk by proptest (seed in `proptest-regressions/tests/model.txt`)
/// before `now_tick` stopped at `u64::MAX - 1`: once the clock was past a
/// 1 ns wheel's 584-year range, a new 1 ms sleep, clamped to the last tick,
/// completed on its first poll, 1 ms early.
#[test]
fn regression_past_a_1ns_wheels_range_a_new_sleep_is_not_ready_at_once() {
    let _guard = common::guard();
    let specs = vec![TimerSpec {
        tick_ms: 0,
        slots: 2,
        built_at: 0,
    }];
    let ops = vec![
        Op::Create {
            timer: 1,
            delay: 1,
            until: false,
        },
        Op::Advance {
            by: 600 * YEAR_MS,
            poll: false,
        },
        Op::Create {
            timer: 1,
            delay: 1,
            until: false,
        },
    ];
    run_case(specs.clone(), ops.clone(), false);
    run_case(specs, ops, true);
}
