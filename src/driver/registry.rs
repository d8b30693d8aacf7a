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
//! shut-down runtime's timer is not kept alive), and the one *task* whose
//! lookups it may answer without asking. A task never changes runtime
//! (tokio's task ids are unique in the process), but what is current inside
//! it can: `Handle::enter` of another runtime, or a `block_on` nested in
//! `block_in_place` or `spawn_blocking`, whose future runs under the
//! enclosing task's id. So the cache trusts a task only once the thread has
//! seen two different tasks in a row find the same multi-thread runtime
//! current (its workers' tasks do; a task that keeps entering another
//! runtime does not, as its lookups all come from one task), and a lookup
//! that finds another runtime current starts the count again. A trusted
//! task's lookups ask tokio nothing: a thread-local read or two, and the
//! shard's own count. On a current-thread runtime every lookup asks: the
//! question costs no contention there, and tests enter paused runtimes. On
//! a `TestRuntime` every lookup asks too: a trusted task of one that made a
//! sleep inside another runtime's context would bind it to the test clock,
//! which auto-advance moves at will.
//!
//! What the cache cannot see: a trusted task that enters another runtime
//! (`Handle::enter`, or a nested `block_on`) and makes a default-timer
//! sleep there gets its own runtime's timer, and its clock: a multi-thread
//! runtime's, the real one, so the sleep is never early on either. Its
//! next task's lookup on the thread asks tokio again.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use tokio::runtime::{Handle, Id};
use tokio::time::Instant;

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
    /// The thread may come to trust a task of that runtime: it is a
    /// multi-thread one, and its default timer follows the real clock (a
    /// `TestRuntime`'s runs on a test clock, which a sleep made in another
    /// runtime's context must never read, so its lookups always ask).
    may_trust: bool,
    /// The task of the last lookup that found this runtime current, and
    /// whether two different tasks in a row have.
    last_task: Option<tokio::task::Id>,
    agreed: bool,
}

thread_local! {
    static CACHE: RefCell<Option<Cached>> = const { RefCell::new(None) };
    /// The task whose lookups the cache answers without asking tokio: see
    /// the module's docs. Apart from the cache, so that the fast path is
    /// one compare.
    static TRUSTED: Cell<Option<tokio::task::Id>> = const { Cell::new(None) };
}

/// The calling thread's shard of the current runtime's default timer,
/// creating the timer on first use.
pub(crate) fn default_shard() -> Result<Arc<Shard>, BuildError> {
    lookup().map(|(shard, _)| shard)
}

/// [`default_shard`], and the time on that timer's clock, read as a sleep
/// made now reads its deadline's start.
#[inline]
pub(crate) fn default_binding() -> Result<(Arc<Shard>, Instant), BuildError> {
    let (shard, asked) = lookup()?;
    let now = if shard.source.is_manual() {
        // A test clock's (a `TestRuntime`'s).
        shard.now()
    } else if asked {
        // Inside the runtime found current, whose clock this reads.
        Instant::now()
    } else {
        // A multi-thread runtime's clock is the real one, whatever context
        // the trusted task may have entered.
        Instant::from_std(std::time::Instant::now())
    };
    Ok((shard, now))
}

/// [`default_shard`], and whether tokio was asked which runtime is current
/// (so that its clock is the one `Instant::now` reads). No clock is read:
/// a sleep until a deadline needs none.
#[inline]
fn lookup() -> Result<(Arc<Shard>, bool), BuildError> {
    // Whom this thread trusts first: on a current-thread runtime, no one,
    // and the task's id need not be read.
    let trusted = TRUSTED
        .try_with(Cell::get)
        .ok()
        .flatten()
        .is_some_and(|trusted| tokio::task::try_id() == Some(trusted));
    Ok(match trusted.then(|| with_cache(Cached::shard)).flatten() {
        Some(shard) => (shard, false),
        None => (ask_tokio()?, true),
    })
}

/// [`default_shard`] for a lookup the cache may not answer: asks tokio
/// which runtime is current, and decides whether to trust the task.
#[inline(never)]
fn ask_tokio() -> Result<Arc<Shard>, BuildError> {
    let handle = Handle::try_current().map_err(|_| BuildError::no_runtime())?;
    let id = handle.id();
    let task = tokio::task::try_id();
    let cached = CACHE
        .try_with(|cache| {
            let mut cache = cache.borrow_mut();
            let cached = cache.as_mut().filter(|cached| cached.runtime == id)?;
            let shard = cached.shard()?;
            // A current-thread or test runtime's lookups always ask: no
            // trust kept.
            if cached.may_trust {
                cached.agreed |=
                    task.is_some() && cached.last_task.is_some_and(|last| Some(last) != task);
                cached.last_task = task;
                let trusted = cached.agreed.then_some(task).flatten();
                let _ = TRUSTED.try_with(|trust| trust.set(trusted));
            }
            Some(shard)
        })
        .ok()
        .flatten();
    match cached {
        Some(shard) => Ok(shard),
        None => refill(handle, id, task).map(|(_, shard)| shard),
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
        None => refill(handle, id, None).map(|(timer, _)| timer),
    }
}

/// Runtime `id`'s default timer from the registry (or a new one), and this
/// thread's shard of it, now in the cache, found by `task`, trusting none.
fn refill(
    handle: Handle,
    id: Id,
    task: Option<tokio::task::Id>,
) -> Result<(Timer, Arc<Shard>), BuildError> {
    let multi_thread = handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread;
    let timer = registered(handle, id)?;
    let may_trust = multi_thread && !timer.is_manual();
    let shard = timer.driver().home().clone();
    let _ = CACHE.try_with(|cache| {
        *cache.borrow_mut() = Some(Cached {
            runtime: id,
            driver: Arc::downgrade(timer.driver_arc()),
            shard: Arc::downgrade(&shard),
            may_trust,
            last_task: task,
            agreed: false,
        });
    });
    let _ = TRUSTED.try_with(|trust| trust.set(None));
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

/// Makes `timer` the default timer of runtime `id`, a new runtime with none
/// yet (a `TestRuntime`'s).
#[cfg(not(loom))]
pub(crate) fn install(id: Id, timer: Timer) {
    let previous = registry()
        .get_or_insert_with(HashMap::new)
        .insert(id, timer);
    // Dropped outside the registry lock.
    drop(previous);
}

/// Undoes [`install`].
#[cfg(not(loom))]
pub(crate) fn uninstall(id: Id, timer: &Timer) {
    forget(id, timer.driver());
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

    /// A test runtime's timer is its runtime's default timer while it lives,
    /// and the registry lets go of it when the runtime is dropped.
    #[test]
    fn a_test_runtime_installs_its_timer_and_takes_it_away() {
        let rt = crate::TestClock::new()
            .build(tokio::runtime::Builder::new_current_thread().enable_time())
            .unwrap();
        let id = rt.handle().id();
        let installed = |id| registry().as_ref().is_some_and(|map| map.contains_key(&id));
        assert!(installed(id));
        assert!(rt.block_on(async { current().unwrap().is_manual() }));
        drop(rt);
        assert!(
            !installed(id),
            "the registry still holds a dropped test runtime's timer"
        );
    }

    /// The task the thread trusts, if any.
    fn trusted() -> Option<tokio::task::Id> {
        TRUSTED.with(Cell::get)
    }

    #[test]
    fn a_worker_trusts_a_task_once_two_tasks_have_found_its_runtime() {
        let _watchdog = crate::driver::tests::watchdog();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_time()
            .build()
            .unwrap();
        rt.block_on(async {
            tokio::spawn(async {
                let first = default_shard().unwrap();
                let _ = default_shard().unwrap();
                assert_eq!(trusted(), None, "one task alone is not trusted");
                first
            })
            .await
            .unwrap();
            let first = tokio::spawn(async {
                let shard = default_shard().unwrap();
                assert_eq!(trusted(), tokio::task::try_id(), "the second task is");
                let again = with_cache(Cached::shard).unwrap();
                assert!(Arc::ptr_eq(&shard, &again));
                shard
            })
            .await
            .unwrap();
            // The thread `block_on` runs on is no worker: it asks each time.
            let _ = default_shard().unwrap();
            assert_eq!(trusted(), None);
            drop(first);
        });
    }

    /// A trusted task that enters another runtime and asks there is not
    /// answered from the cache for that runtime's timer afterwards: its
    /// lookups come from one task, and the thread trusts no one then.
    #[test]
    fn entering_another_runtime_does_not_rebind_its_workers() {
        let _watchdog = crate::driver::tests::watchdog();
        let rt = |flavor_multi: bool| {
            let mut builder = if flavor_multi {
                tokio::runtime::Builder::new_multi_thread()
            } else {
                tokio::runtime::Builder::new_current_thread()
            };
            builder.worker_threads(1).enable_time().build().unwrap()
        };
        let (one, two) = (rt(true), rt(true));
        let two_handle = two.handle().clone();
        let theirs = two.block_on(async {
            tokio::spawn(async { default_shard().unwrap() })
                .await
                .unwrap()
        });
        one.block_on(async move {
            for _ in 0..2 {
                tokio::spawn(async { drop(default_shard().unwrap()) })
                    .await
                    .unwrap();
            }
            // A task that enters the other runtime first: its lookups there
            // get that runtime's timer, and after it, its own.
            let theirs_too = theirs.clone();
            let two_too = two_handle.clone();
            tokio::spawn(async move {
                for _ in 0..3 {
                    let _in_two = two_too.enter();
                    let entered = default_shard().unwrap();
                    assert!(
                        Arc::ptr_eq(&entered, &theirs_too),
                        "not the entered runtime's"
                    );
                }
                let own = default_shard().unwrap();
                assert!(!Arc::ptr_eq(&own, &theirs_too));
                for _ in 0..3 {
                    assert!(
                        Arc::ptr_eq(&own, &default_shard().unwrap()),
                        "bound to the other"
                    );
                }
            })
            .await
            .unwrap();
            // What the cache cannot see (the module's docs): a trusted task
            // entering another runtime gets its own runtime's timer.
            tokio::spawn(async move {
                let own = default_shard().unwrap();
                assert_eq!(trusted(), tokio::task::try_id());
                let _in_two = two_handle.enter();
                assert!(Arc::ptr_eq(&own, &default_shard().unwrap()));
                assert!(!Arc::ptr_eq(&own, &theirs));
            })
            .await
            .unwrap();
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
