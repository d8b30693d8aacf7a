//! Process counters from /proc, std only: CPU time and context switches,
//! summed over threads, at nanosecond resolution.
//!
//! Each thread's `/proc/self/task/<tid>/schedstat` starts with the time it
//! has run on a CPU, in ns (the scheduler's `sum_exec_runtime`); its
//! `status` has `voluntary_ctxt_switches` and `nonvoluntary_ctxt_switches`.
//! `/proc/self/stat`'s `utime`/`stime` count 10 ms ticks, too coarse for a
//! run of a few hundred ms, and `getrusage` would need `libc`.
//!
//! Two caveats, both handled here or by the callers:
//!
//! - The kernel updates a thread's `sum_exec_runtime` when the thread stops
//!   running (and at each scheduler tick), so a thread that is *running*
//!   when read shows its time up to one tick (1-10 ms) stale. The thread
//!   that reads is always running, so [`sampled`] reads from a thread of
//!   its own while the caller blocks: every thread being measured is then
//!   off the CPU (or, for the server bench, the error is a tick in seconds).
//! - A thread that exits between two readings takes its counts with it, so
//!   callers read both ends while the threads they measure are alive (a
//!   runtime is dropped after its last reading).

use std::fs;
use std::sync::mpsc::{channel, Sender};
use std::sync::{Mutex, OnceLock};

/// The sampler thread's name, which [`sampled`] leaves out of its sums.
const SAMPLER: &str = "proc-sampler";

/// What a set of threads has used so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// CPU time, ns.
    pub cpu_ns: u64,
    /// Context switches, voluntary (blocked) plus involuntary (preempted).
    pub switches: u64,
}

impl std::ops::Sub for Usage {
    type Output = Usage;
    fn sub(self, earlier: Usage) -> Usage {
        Usage {
            cpu_ns: self.cpu_ns.saturating_sub(earlier.cpu_ns),
            switches: self.switches.saturating_sub(earlier.switches),
        }
    }
}

/// CPU time and context switches of the live threads whose name
/// (`/proc/.../comm`, at most 15 bytes) `select` accepts; `|_| true` for
/// the whole process.
pub fn usage_of(select: impl Fn(&str) -> bool) -> Usage {
    let mut usage = Usage::default();
    let Ok(tasks) = fs::read_dir("/proc/self/task") else {
        return usage;
    };
    for task in tasks.flatten() {
        let dir = task.path();
        // A thread may exit while we look: skip what has gone.
        let Ok(comm) = fs::read_to_string(dir.join("comm")) else {
            continue;
        };
        if !select(comm.trim_end()) {
            continue;
        }
        if let Some(ns) = fs::read_to_string(dir.join("schedstat"))
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        {
            usage.cpu_ns += ns;
        }
        if let Ok(status) = fs::read_to_string(dir.join("status")) {
            usage.switches += status
                .lines()
                .filter(|l| l.contains("ctxt_switches:"))
                .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
                .sum::<u64>();
        }
    }
    usage
}

/// A filter on thread names, sent to the sampler thread.
type Select = Box<dyn Fn(&str) -> bool + Send>;
/// A request to the sampler: the filter, and where to send the answer.
type Request = (Select, Sender<Usage>);

/// [`usage_of`], read by a sampler thread while the calling thread blocks,
/// so that the caller's own CPU time is exact (see the module's docs); the
/// sampler itself is left out.
pub fn sampled(select: impl Fn(&str) -> bool + Send + 'static) -> Usage {
    static SAMPLER_TX: OnceLock<Mutex<Sender<Request>>> = OnceLock::new();
    let tx = SAMPLER_TX.get_or_init(|| {
        let (tx, rx) = channel::<Request>();
        std::thread::Builder::new()
            .name(SAMPLER.to_owned())
            .spawn(move || {
                for (select, reply) in rx {
                    let _ = reply.send(usage_of(|name| name != SAMPLER && select(name)));
                }
            })
            .expect("spawn the sampler thread");
        Mutex::new(tx)
    });
    let (reply, answer) = channel();
    tx.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .send((Box::new(select), reply))
        .expect("the sampler runs for the whole process");
    answer.recv().expect("the sampler answers")
}

/// CPU time the rest of the machine has used: every CPU's busy time in
/// /proc/stat less this process's own (its threads' and its waited-for
/// children's, /proc/self/stat), both in clock ticks (`USER_HZ`, 100 a
/// second), so coarse: for telling whether something else (a build, a test
/// run) shared the machine with a measurement, not for measuring.
#[derive(Debug, Clone, Copy)]
pub struct Machine {
    busy_ticks: u64,
    own_ticks: u64,
    at: std::time::Instant,
}

impl Machine {
    pub fn now() -> Machine {
        let stat = fs::read_to_string("/proc/stat").unwrap_or_default();
        // "cpu user nice system idle iowait irq softirq steal ...": busy is
        // all but idle and iowait.
        let busy_ticks = stat
            .lines()
            .next()
            .map(|cpu| {
                cpu.split_whitespace()
                    .skip(1)
                    .enumerate()
                    .filter(|(i, _)| *i != 3 && *i != 4)
                    .filter_map(|(_, v)| v.parse::<u64>().ok())
                    .sum()
            })
            .unwrap_or(0);
        let own = fs::read_to_string("/proc/self/stat").unwrap_or_default();
        // After the command name: state is field 3; utime 14, stime 15,
        // cutime 16, cstime 17.
        let own_ticks = own
            .rfind(')')
            .map(|i| {
                own[i + 1..]
                    .split_whitespace()
                    .skip(11)
                    .take(4)
                    .filter_map(|v| v.parse::<u64>().ok())
                    .sum()
            })
            .unwrap_or(0);
        Machine {
            busy_ticks,
            own_ticks,
            at: std::time::Instant::now(),
        }
    }

    /// The other processes' CPU use since `earlier`, in cores (1.0: one
    /// core's worth all the time).
    pub fn others_since(&self, earlier: &Machine) -> f64 {
        let secs = (self.at - earlier.at).as_secs_f64().max(1e-3);
        self.other_ticks(earlier) as f64 / 100.0 / secs
    }

    /// Whether other processes used more than `cores` on average since
    /// `earlier`. Two ticks (20 ms of CPU) are always allowed: the counts
    /// are in whole ticks, attributed at each tick to whatever ran then, so
    /// a run of a few tens of ms would otherwise fail on one stray tick.
    pub fn disturbed_since(&self, earlier: &Machine, cores: f64) -> bool {
        let secs = (self.at - earlier.at).as_secs_f64();
        let ticks = self.other_ticks(earlier);
        ticks > 2 && ticks as f64 > cores * secs * 100.0
    }

    fn other_ticks(&self, earlier: &Machine) -> u64 {
        self.busy_ticks
            .saturating_sub(earlier.busy_ticks)
            .saturating_sub(self.own_ticks.saturating_sub(earlier.own_ticks))
    }
}

/// Runs done again, and time spent waiting for a quiet machine, by
/// [`undisturbed`].
pub static REPEATED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
static WAITED_MS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Attempts at one run before the last is kept whatever the machine did.
const ATTEMPTS: usize = 6;
/// The most a whole bench waits for other processes to go quiet.
const WAIT_BUDGET: std::time::Duration = std::time::Duration::from_secs(300);

/// `run()`, done again while other processes used more than `limit` of a
/// core on average during it. The machine may be shared (a build or a test
/// run of other work): after a disturbed attempt this waits, in 200 ms
/// looks, until the others have used at most `limit` for a whole look (or
/// [`WAIT_BUDGET`] is spent over the bench), then tries again, up to
/// [`ATTEMPTS`] times; the last attempt is kept anyway.
pub fn undisturbed<R>(limit: f64, mut run: impl FnMut() -> R) -> R {
    use std::sync::atomic::Ordering::Relaxed;
    for _ in 1..ATTEMPTS {
        let before = Machine::now();
        let out = run();
        if !Machine::now().disturbed_since(&before, limit) {
            return out;
        }
        REPEATED.fetch_add(1, Relaxed);
        loop {
            if WAITED_MS.load(Relaxed) >= WAIT_BUDGET.as_millis() as u64 {
                break;
            }
            let look = Machine::now();
            std::thread::sleep(std::time::Duration::from_millis(200));
            WAITED_MS.fetch_add(200, Relaxed);
            if !Machine::now().disturbed_since(&look, limit) {
                break;
            }
        }
    }
    run()
}

/// What [`undisturbed`] did, for a bench's footer.
pub fn disturbance_note(limit: f64) -> String {
    use std::sync::atomic::Ordering::Relaxed;
    format!(
        "{} run(s) done again because other processes used over {limit} of a core during them; {:.1} s spent waiting for them to go quiet",
        REPEATED.load(Relaxed),
        WAITED_MS.load(Relaxed) as f64 / 1e3
    )
}
