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
