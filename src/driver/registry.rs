//! The default timer of each tokio runtime, used by the free functions
//! (`wheel::sleep`, `wheel::timeout`, ...).
//!
//! Each runtime gets its own timer, created on first use, keyed by
//! `tokio::runtime::Handle::id()`, so parallel `#[tokio::test]`s (each with
//! its own runtime and paused clock) never share a wheel. The registry holds
//! a strong handle until the runtime shuts down; the timer's sentinel then
//! removes it. A per-thread cache of the last (runtime, timer) pair keeps the
//! global lock off the hot path; it holds the timer weakly, so a thread that
//! used a runtime's timer does not keep it, and with it the runtime's
//! driver (its file descriptors, its own timer), alive once the runtime has
//! shut down.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError, Weak};

use tokio::runtime::{Handle, Id};

use super::Shared;
use crate::error::BuildError;
use crate::Timer;

/// A plain std mutex even under `cfg(loom)`: the registry belongs to runtime
/// timers, which the loom models do not use, and loom has no `static` mutex.
static REGISTRY: Mutex<Option<HashMap<Id, Timer>>> = Mutex::new(None);

fn registry() -> MutexGuard<'static, Option<HashMap<Id, Timer>>> {
    REGISTRY.lock().unwrap_or_else(PoisonError::into_inner)
}

thread_local! {
    static CACHE: RefCell<Option<(Id, Weak<Shared>)>> = const { RefCell::new(None) };
}

/// The current runtime's default timer, creating it on first use.
pub(crate) fn current() -> Result<Timer, BuildError> {
    let handle = Handle::try_current().map_err(|_| BuildError::no_runtime())?;
    let id = handle.id();
    let cached = CACHE
        .try_with(|cache| match &*cache.borrow() {
            Some((cached, timer)) if *cached == id => timer
                .upgrade()
                .filter(|shared| !shared.is_shut_down())
                .map(Timer::from_shared),
            _ => None,
        })
        .ok()
        .flatten();
    if let Some(timer) = cached {
        return Ok(timer);
    }
    let timer = match lookup(id) {
        Some(timer) => timer,
        None => {
            // Built outside the registry lock: building spawns the sentinel,
            // and a runtime that is shutting down drops it on the spot, which
            // calls `forget`, which takes the lock.
            let built = Timer::builder().runtime(handle).build_default(id)?;
            let mut registry = registry();
            let map = registry.get_or_insert_with(HashMap::new);
            match map.get(&id) {
                // Another thread won the race; ours is dropped (outside the lock).
                Some(timer) if !timer.shared().is_shut_down() => {
                    let winner = timer.clone();
                    drop(registry);
                    drop(built);
                    winner
                }
                _ => {
                    if !built.shared().is_shut_down() {
                        map.insert(id, built.clone());
                    }
                    built
                }
            }
        }
    };
    let _ = CACHE.try_with(|cache| *cache.borrow_mut() = Some((id, timer.downgrade())));
    Ok(timer)
}

fn lookup(id: Id) -> Option<Timer> {
    let registry = registry();
    let timer = registry.as_ref()?.get(&id)?;
    (!timer.shared().is_shut_down()).then(|| timer.clone())
}

/// Unregisters `shared` as the default timer of runtime `id`.
pub(super) fn forget(id: Id, shared: &Shared) {
    let removed = {
        let mut registry = registry();
        let map = registry.get_or_insert_with(HashMap::new);
        match map.get(&id) {
            Some(timer) if std::ptr::eq(timer.shared(), shared) => map.remove(&id),
            _ => None,
        }
    };
    // Dropped outside the registry lock.
    drop(removed);
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn the_cache_does_not_keep_a_shut_down_runtimes_timer_alive() {
        // A thread of its own, so its cache starts empty and ends with this.
        std::thread::spawn(|| {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .start_paused(true)
                .build()
                .unwrap();
            let timer = rt.block_on(async {
                crate::sleep(std::time::Duration::from_millis(1)).await;
                current().unwrap().downgrade()
            });
            assert!(timer.upgrade().is_some(), "the registry holds it");
            drop(rt);
            assert!(timer.upgrade().is_none(), "kept alive after its runtime");
        })
        .join()
        .unwrap();
    }
}
