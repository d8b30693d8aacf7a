//! The integration tests, one module per file, in one test binary, but for
//! the feature-gated ones, `test_clock_leaks.rs` (which counts the
//! process's threads, file descriptors and memory) and
//! `test_clock_parity.rs` (beside the other tests it waited past the 60 s
//! watchdog in 2 full runs of 4; alone it takes 12 s). Each file used to be
//! a binary of its own, linking the crate and every dependency again: most
//! of a cold `cargo test`'s build, and the binaries ran one after another.
//! Here they build once and their tests run in parallel.
//!
//! `Cargo.toml` sets `autotests = false` and declares this binary, the two
//! `test_clock_*` ones and the feature-gated ones (`hyper`, `precise`,
//! `tower`, each with `required-features`: `tests/features.rs`). A new file
//! in `tests/` is added below or declared there; `every_test_file_is_built`
//! fails until it is. One file's tests: `cargo test --test suite sleep::`.

// `#[path]`: each file is loaded as a directory's `mod.rs` would be, so its
// own `mod common;` finds `tests/common/mod.rs`. Each file keeps that
// declaration, as when it was a binary of its own: the helpers are a module
// of each (a few hundred lines, compiled again for each file that uses them).
#![allow(clippy::duplicate_mod)]

#[path = "bad_input.rs"]
mod bad_input;
#[path = "binding_rule.rs"]
mod binding_rule;
#[path = "bounded_work.rs"]
mod bounded_work;
#[path = "callback_edges.rs"]
mod callback_edges;
#[path = "callback_races.rs"]
mod callback_races;
#[path = "callbacks.rs"]
mod callbacks;
#[path = "crossing_threads.rs"]
mod crossing_threads;
#[path = "delay_queue.rs"]
mod delay_queue;
#[path = "delay_queue_edges.rs"]
mod delay_queue_edges;
#[path = "delay_queue_model.rs"]
mod delay_queue_model;
#[path = "delay_queue_programs.rs"]
mod delay_queue_programs;
#[path = "differences.rs"]
mod differences;
#[path = "docs.rs"]
mod docs;
#[path = "drop_in_parity.rs"]
mod drop_in_parity;
#[path = "drop_in_programs.rs"]
mod drop_in_programs;
#[path = "explicit_timers.rs"]
mod explicit_timers;
#[path = "features.rs"]
mod features;
#[path = "graceful_shutdown.rs"]
mod graceful_shutdown;
#[path = "interval.rs"]
mod interval;
#[path = "interval_programs.rs"]
mod interval_programs;
#[path = "interval_schedule.rs"]
mod interval_schedule;
#[path = "limited_timer_model.rs"]
mod limited_timer_model;
#[path = "manual_clock.rs"]
mod manual_clock;
#[path = "max_pending.rs"]
mod max_pending;
#[path = "memory.rs"]
mod memory;
#[path = "model.rs"]
mod model;
#[path = "parity_programs.rs"]
mod parity_programs;
#[path = "paused_clock.rs"]
mod paused_clock;
#[path = "readme.rs"]
mod readme;
#[path = "runtime_binding.rs"]
mod runtime_binding;
#[path = "runtime_shutdown.rs"]
mod runtime_shutdown;
#[path = "runtimes.rs"]
mod runtimes;
#[path = "shutdown.rs"]
mod shutdown;
#[path = "sleep.rs"]
mod sleep;
#[path = "stats_model.rs"]
mod stats_model;
#[path = "stress.rs"]
mod stress;
#[path = "test_clock.rs"]
mod test_clock;
#[path = "test_clock_gaps.rs"]
mod test_clock_gaps;
#[path = "test_clock_idle.rs"]
mod test_clock_idle;
#[path = "test_clock_probe_repro.rs"]
mod test_clock_probe_repro;
#[path = "test_clock_workers.rs"]
mod test_clock_workers;
#[path = "timeout.rs"]
mod timeout;
#[path = "tokio_assumptions.rs"]
mod tokio_assumptions;
#[path = "tokio_parity.rs"]
mod tokio_parity;
#[path = "waker_identity.rs"]
mod waker_identity;
#[path = "worst_case.rs"]
mod worst_case;

/// Every `tests/*.rs` file is a module above or a `[[test]]` target of its
/// own in `Cargo.toml`: with `autotests = false`, a file that is neither
/// would never run.
#[test]
fn every_test_file_is_built() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let suite = std::fs::read_to_string(root.join("tests/suite.rs")).unwrap();
    let mut files = 0;
    for entry in std::fs::read_dir(root.join("tests")).unwrap() {
        let path = entry.unwrap().path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let Some(stem) = name.strip_suffix(".rs") else {
            continue;
        };
        if stem == "suite" {
            continue;
        }
        files += 1;
        let module = suite.contains(&format!("#[path = \"{name}\"]\nmod {stem};"));
        let target = manifest.contains(&format!("[[test]]\nname = \"{stem}\"\n"));
        assert!(
            module != target,
            "tests/{name}: a module of tests/suite.rs ({module}) or a [[test]] in Cargo.toml \
             ({target}), exactly one"
        );
    }
    assert!(files > 30, "found the test files ({files})");
}
