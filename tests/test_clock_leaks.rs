//! A dropped `TestRuntime` gives everything back: its runtime's threads,
//! file descriptors and memory (the park hooks once held the runtime's
//! handle, a cycle that kept each one alive). One test in its own binary,
//! so no other test's runtimes move the counts.
#![cfg(target_os = "linux")]

mod common;

use tokio::runtime::Builder;
use wheel::TestClock;

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// Resident memory, from `/proc/self/statm` (pages of 4 KiB).
fn rss_bytes() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: usize = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

fn build_use_drop(workers: Option<usize>) {
    let clock = TestClock::new().auto_advance(true);
    let rt = match workers {
        Some(workers) => clock.build(
            Builder::new_multi_thread()
                .worker_threads(workers)
                .enable_all(),
        ),
        None => clock.build(Builder::new_current_thread().enable_all()),
    }
    .unwrap();
    rt.block_on(async {
        tokio::spawn(wheel::sleep(std::time::Duration::from_secs(60)))
            .await
            .unwrap();
    });
}

#[test]
fn dropped_test_runtimes_keep_no_file_descriptor_and_no_memory() {
    let _guard = common::guard();
    // Warm up: the allocator's arenas, the registry, thread-locals.
    for _ in 0..50 {
        build_use_drop(None);
        build_use_drop(Some(2));
    }
    let (fds, rss) = (open_fds(), rss_bytes());
    for _ in 0..500 {
        build_use_drop(None);
        build_use_drop(Some(2));
    }
    assert_eq!(open_fds(), fds, "file descriptors kept");
    let grown = rss_bytes().saturating_sub(rss);
    // The cycle kept about 30 KB a runtime: 30 MB here.
    assert!(grown < 5 << 20, "resident memory grew by {grown} bytes");
}
