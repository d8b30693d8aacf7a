//! Helpers shared by the integration tests (each test file is its own crate
//! and uses only some of them).
#![allow(dead_code)]

use std::any::Any;
use std::time::Duration;

use tokio::runtime::{Builder, Runtime};
use wheel::Timer;

pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

pub fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// A current-thread runtime with timers and a paused clock.
pub fn paused_rt() -> Runtime {
    Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap()
}

/// A timer on a manual clock, with the default geometry.
pub fn manual() -> Timer {
    Timer::builder().manual().build().unwrap()
}

/// A timer on a manual clock whose tick is `tick`.
pub fn manual_ticking(tick: Duration) -> Timer {
    Timer::builder().manual().tick(tick).build().unwrap()
}

/// The message of a caught panic, whatever its payload type.
pub fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "<non-string panic payload>".to_owned()
    }
}
