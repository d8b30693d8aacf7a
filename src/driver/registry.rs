//! The default timer of each tokio runtime, used by the free functions
//! (`wheel::sleep`, `wheel::timeout`, ...), and how a `Sleep` finds its
//! shard of it without touching a line another worker writes.
//!
//! Each runtime gets its own timer, created on first use and kept here,
//! keyed by `tokio::runtime::Handle::id()`, so parallel `#[tokio::test]`s
//! (each with its own runtime and paused clock) never share a wheel. The
//! registry holds the timer until the runtime shuts down; the timer's
//! shutdown removes it.
//!
//! Asking tokio which runtime is current (`Handle::try_current`) clones the
//! runtime's handle: an atomic add and subtract on a count every worker
//! touches, about 100 ns when two busy workers take turns at it. So each
//! thread caches its shard of the last runtime's default timer, weakly (a
//! shut-down runtime's timer is not kept alive), and whether the thread is a
//! *worker* of that runtime: it asked from inside a task (`tokio::task::
//! try_id`, a thread-local read) of a multi-thread runtime, whose tasks run
//! only on its workers, and a worker serves one runtime for its life. A
//! sleep first polled in a task on a worker then asks tokio nothing: a
//! thread-local read or two, and the shard's own count. Outside a task
//! (`block_on`'s own future), and on a current-thread runtime, it asks
//! every time: there the question costs no contention, and a test may enter
//! one runtime's context (and paused clock) from a task of another.
//!
//! The exception: a worker of a multi-thread runtime that polls another
//! runtime's task (inside `block_in_place`, a current-thread runtime's
//! `block_on` running its spawned tasks), or a task that makes sleeps inside
//! another runtime's `Handle::enter`, gets its own runtime's default timer
//! (its clock is the real one either way).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use tokio::runtime::{Handle, Id};

use super::{Driver, Shard};
use crate::error::BuildError;
use crate::sync::{Arc, Weak};
use crate::Timer;

/// A plain std mutex even under `cfg(loom)`: the registry belongs to runtime
/// timers, which the loom models do not use, and loom has no `static` mutex.
static REGISTRY: Mutex<Option<HashMap<Id, Timer>>> = Mutex::new(None);

fn registry() -> MutexGuard<'static, Option<HashMap<Id, Timer>>> {
    REGISTRY.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A thread's view of the last runtime whose default timer it used.
struct Cached {
    runtime: Id,
    driver: Weak<Driver>,
    /// This thread's shard of that timer.
    shard: Weak<Shard>,
    /// That runtime is a multi-thread one.
    multi_thread: bool,
}

thread_local! {
    static CACHE: RefCell<Option<Cached>> = const { RefCell::new(None) };
    /// The thread is a worker of the cached runtime, a multi-thread one: the
    /// tasks it polls are that runtime's. Apart from the cache, so that a
    /// thread that is not (a current-thread runtime's) pays one read for it.
    static WORKER: Cell<bool> = const { Cell::new(false) };
}

/// The calling thread's shard of the current runtime's default timer,
/// creating the timer on first use.
#[inline]
pub(crate) fn default_shard() -> Result<Arc<Shard>, BuildError> {
    let on_worker = WORKER.try_with(Cell::get).unwrap_or(false) && tokio::task::try_id().is_some();
    match on_worker.then(|| with_cache(Cached::shard)).flatten() {
        Some(shard) => Ok(shard),
        None => ask_tokio(),
    }
}

/// [`default_shard`] on a thread not known to be a worker: asks tokio
/// which runtime is current, and remembers the thread as its worker if it
/// asks from a task of a multi-thread runtime.
#[inline(never)]
fn ask_tokio() -> Result<Arc<Shard>, BuildError> {
    let handle = Handle::try_current().map_err(|_| BuildError::no_runtime())?;
    let id = handle.id();
    let cached = CACHE
        .try_with(|cache| {
            let mut cache = cache.borrow_mut();
            let cached = cache.as_mut().filter(|cached| cached.runtime == id)?;
            let shard = cached.shard()?;
            if cached.multi_thread && tokio::task::try_id().is_some() {
                let _ = WORKER.try_with(|worker| worker.set(true));
            }
            Some(shard)
        })
        .ok()
        .flatten();
    match cached {
        Some(shard) => Ok(shard),
        None => refill(handle, id).map(|(_, shard)| shard),
    }
}

/// The current runtime's default timer, creating it on first use.
pub(crate) fn current() -> Result<Timer, BuildError> {
    let handle = Handle::try_current().map_err(|_| BuildError::no_runtime())?;
    let id = handle.id();
    let cached = with_cache(|cached| {
        let alive = cached.runtime == id && cached.shard().is_some();
        alive.then(|| cached.driver.upgrade()).flatten()
    });
    match cached {
        Some(driver) => Ok(Timer::from_driver(driver)),
        None => refill(handle, id).map(|(timer, _)| timer),
    }
}

/// Runtime `id`'s default timer from the registry (or a new one), and this
/// thread's shard of it, now in the cache with no task known yet.
fn refill(handle: Handle, id: Id) -> Result<(Timer, Arc<Shard>), BuildError> {
    let multi_thread = handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread;
    let timer = registered(handle, id)?;
    let shard = timer.driver().home().clone();
    let _ = CACHE.try_with(|cache| {
        *cache.borrow_mut() = Some(Cached {
            runtime: id,
            driver: Arc::downgrade(timer.driver_arc()),
            shard: Arc::downgrade(&shard),
            multi_thread,
        });
    });
    let worker = multi_thread && tokio::task::try_id().is_some();
    let _ = WORKER.try_with(|cell| cell.set(worker));
    Ok((timer, shard))
}

/// `read` of this thread's cache, if it has one. (A thread-local being
/// destroyed: none.)
#[inline]
fn with_cache<R>(read: impl FnOnce(&Cached) -> Option<R>) -> Option<R> {
    CACHE
        .try_with(|cache| cache.borrow().as_ref().and_then(read))
        .ok()
        .flatten()
}

impl Cached {
    /// The cached shard, if it is alive and running: its own count is the
    /// only shared state this touches.
    #[inline]
    fn shard(&self) -> Option<Arc<Shard>> {
        self.shard.upgrade().filter(|shard| !shard.is_shut_down())
    }
}

/// Runtime `id`'s default timer from the registry, or a new one.
fn registered(handle: Handle, id: Id) -> Result<Timer, BuildError> {
    if let Some(timer) = registry().as_ref().and_then(|map| map.get(&id)).cloned() {
        if !timer.is_shut_down() {
            return Ok(timer);
        }
    }
    // Built outside the registry lock: building spawns the sentinel, and a
    // runtime that is shutting down drops it on the spot, which shuts the
    // timer down, which takes the lock.
    let built = Timer::builder().runtime(handle).build_default(id)?;
    let mut registry = registry();
    let map = registry.get_or_insert_with(HashMap::new);
    match map.get(&id) {
        // Another thread won the race; ours is dropped (outside the lock).
        Some(timer) if !timer.is_shut_down() => {
            let winner = timer.clone();
            drop(registry);
            drop(built);
            Ok(winner)
        }
        _ => {
            if !built.is_shut_down() {
                map.insert(id, built.clone());
            }
            Ok(built)
        }
    }
}

/// Unregisters `driver` as the default timer of runtime `id`.
pub(super) fn forget(id: Id, driver: &Driver) {
    let removed = {
        let mut registry = registry();
        let map = registry.get_or_insert_with(HashMap::new);
        match map.get(&id) {
            Some(timer) if std::ptr::eq(timer.driver(), driver) => map.remove(&id),
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
        let _watchdog = crate::driver::tests::watchdog();
        // A thread of its own, so its cache starts empty and ends with this.
        std::thread::spawn(|| {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .start_paused(true)
                .build()
                .unwrap();
            let (timer, shard) = rt.block_on(async {
                // Under tokio's timeout: a sleep never fired fails at once.
                let slept = crate::sleep(std::time::Duration::from_millis(1));
                tokio::time::timeout(std::time::Duration::from_secs(1), slept)
                    .await
                    .expect("never completed: a 1 ms sleep");
                let timer = current().unwrap();
                (
                    Arc::downgrade(timer.driver_arc()),
                    Arc::downgrade(&default_shard().unwrap()),
                )
            });
            assert!(timer.upgrade().is_some(), "the registry holds it");
            drop(rt);
            assert!(timer.upgrade().is_none(), "kept alive after its runtime");
            assert!(shard.upgrade().is_none(), "its shard kept alive");
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_worker_binds_without_asking_tokio_once_it_has_asked() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_time()
            .build()
            .unwrap();
        rt.block_on(async {
            tokio::spawn(async {
                let first = default_shard().unwrap();
                let worker = WORKER.with(Cell::get).then(|| with_cache(Cached::shard));
                let shard = worker.flatten().expect("a worker after its first sleep");
                assert!(Arc::ptr_eq(&first, &shard));
            })
            .await
            .unwrap();
            // The thread `block_on` runs on is no worker: it asks each time.
            let _ = default_shard().unwrap();
            assert!(!WORKER.with(Cell::get));
        });
    }

    /// On a current-thread runtime the cache asks tokio every time, so a
    /// task of one runtime that enters another's context (a test's paused
    /// clock, say) gets that runtime's timer there, and its own outside.
    #[test]
    fn a_current_thread_task_entering_another_runtime_gets_that_runtimes_timer() {
        let rt = |paused| {
            tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .start_paused(paused)
                .build()
                .unwrap()
        };
        let (a, b) = (rt(false), rt(true));
        let b_handle = b.handle().clone();
        let theirs = b.block_on(async { default_shard().unwrap() });
        a.block_on(async move {
            tokio::spawn(async move {
                let own = default_shard().unwrap();
                let entered = {
                    let _b = b_handle.enter();
                    default_shard().unwrap()
                };
                assert!(Arc::ptr_eq(&entered, &theirs), "not the entered runtime's");
                assert!(Arc::ptr_eq(&own, &default_shard().unwrap()));
                assert!(!Arc::ptr_eq(&own, &theirs));
            })
            .await
            .unwrap();
        });
    }
}
