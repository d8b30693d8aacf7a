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
//! The binding rule: a timer made inside a runtime's context belongs to
//! that runtime's default timer. Every lookup asks tokio which runtime is
//! current (`Handle::try_current`), whatever the thread or task has seen
//! before, so `Handle::enter`, `block_in_place`, `spawn_blocking` and a
//! nested `block_on` all get the runtime whose context they are in. Asking
//! clones the runtime's handle: an atomic add and subtract on a count every
//! worker touches, which tokio's own `Sleep` pays too. What the cache saves
//! is the rest: each thread keeps its shard of the last runtime's default
//! timer, weakly (a shut-down runtime's timer is not kept alive), keyed by
//! that runtime's id, so a lookup for the same runtime touches the registry's
//! lock and map not at all, and the shard's own count, which only this
//! thread's timers touch, once. A cache holds until any default timer shuts
//! down ([`SHUTDOWNS`], read with a plain load): the one cached may be it,
//! to be replaced, so every thread asks the registry once more.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
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

/// How many default timers have shut down ([`forget`]), ever. A `Timeout`
/// takes its runtime's default timer from this thread's cache without
/// touching it ([`default_runtime`]); a cache filled before the latest
/// shutdown is looked up again first, since its timer may be the one that
/// shut down, to be replaced. A plain load, where asking the cached timer
/// whether it has shut down takes a count of it at every timeout. A std
/// atomic even under `cfg(loom)`, as [`REGISTRY`].
static SHUTDOWNS: AtomicUsize = AtomicUsize::new(0);

/// Which runtime's default timer this thread's cache holds, as of when:
/// what every lookup compares. [`Cached`] holds it beside the references;
/// [`NAMED`], a copy, serves the lookups that need no reference (a
/// `Timeout`'s), from a thread-local with nothing to drop, which is read
/// directly: one that owns a `Weak` is read through a check that it is
/// alive (registering its destructor first), and a `RefCell` through its
/// borrow flag (callgrind: 14 instructions of a `timeout` whose future is
/// ready, 200 in all). A sleep's lookup reads [`CACHE`] alone.
#[derive(Clone, Copy)]
struct Named {
    runtime: Id,
    /// Whether that timer runs on a test clock (a `TestRuntime`'s).
    manual: bool,
    /// [`SHUTDOWNS`] when the cache was filled, read before the lookup.
    shutdowns: usize,
}

impl Named {
    /// Whether this names runtime `id`'s default timer as it is now: filled
    /// after the latest default timer's shutdown ([`SHUTDOWNS`]). A timer
    /// that shut down since may have been replaced ([`is_default`]), so the
    /// registry is asked again.
    #[inline]
    fn names(self, id: Id) -> bool {
        self.runtime == id && self.shutdowns == SHUTDOWNS.load(Ordering::Acquire)
    }
}

/// A thread's view of the last runtime whose default timer it used: which,
/// and references to that timer, weak (a shut-down runtime's timer is not
/// kept alive).
struct Cached {
    named: Named,
    driver: Weak<Driver>,
    /// This thread's shard of that timer.
    shard: Weak<Shard>,
}

thread_local! {
    static NAMED: Cell<Option<Named>> = const { Cell::new(None) };
    static CACHE: RefCell<Option<Cached>> = const { RefCell::new(None) };
    /// The last runtime this thread found it can never time, and whether
    /// because it has shut down (`true`) or was built without timers: its
    /// lookups fail at once after the first, where building its default
    /// timer again made tokio panic again (caught, but the process's panic
    /// hook reports it) at every `wheel::sleep` or `timeout`. A runtime's
    /// timers are on or off for its life, a shut-down runtime stays so (a
    /// thread can still enter it by a handle kept), and ids are never
    /// reused.
    static TIMERLESS: Cell<Option<(Id, bool)>> = const { Cell::new(None) };
}

/// The calling thread's shard of the current runtime's default timer,
/// creating the timer on first use.
#[inline]
pub(crate) fn default_shard() -> Result<Arc<Shard>, BuildError> {
    let handle = Handle::try_current().map_err(|_| BuildError::no_runtime())?;
    let id = handle.id();
    match cached_shard(id) {
        Some(shard) => Ok(shard),
        None => refill(handle, id).map(|(_, shard)| shard),
    }
}

/// [`default_shard`], and the time on that timer's clock, read as a sleep
/// made now reads its deadline's start: a test clock's (a `TestRuntime`'s),
/// else tokio's, inside the runtime just found current.
#[inline]
pub(crate) fn default_binding() -> Result<(Arc<Shard>, Instant), BuildError> {
    let shard = default_shard()?;
    let now = if shard.is_manual() {
        shard.now()
    } else {
        Instant::now()
    };
    Ok((shard, now))
}

/// The current runtime, whose default timer a `Timeout` made now belongs
/// to, its timer now in this thread's cache (looked up again if any default
/// timer has shut down since the cache was filled, so that one shut down by
/// hand is replaced, as by every lookup); the shard waits for the first
/// wait ([`shard_of`]), so that a timeout whose future is ready at once
/// touches no count of the timer's.
#[inline]
pub(crate) fn default_runtime() -> Result<Id, BuildError> {
    let handle = Handle::try_current().map_err(|_| BuildError::no_runtime())?;
    let id = handle.id();
    if named(id).is_none() {
        refill(handle, id)?;
    }
    Ok(id)
}

/// [`default_runtime`] (`None` where it fails), and the time on that
/// timer's clock, as a `Timeout` made now reads its deadline's start: a
/// test clock's (a `TestRuntime`'s), else tokio's, inside the runtime just
/// found current; where it fails, the real clock's
/// ([`real_now`](super::real_now)). One look at this thread's cache
/// answers both.
#[inline]
pub(crate) fn default_runtime_now() -> (Option<Id>, Instant) {
    let Ok(handle) = Handle::try_current() else {
        return (None, super::real_now());
    };
    let id = handle.id();
    if named(id) == Some(false) {
        return (Some(id), Instant::now());
    }
    runtime_now_through_shard(handle, id)
}

/// [`default_runtime_now`] where the cache does not name a timer on tokio's
/// clock: a test clock's time, read through its shard, or the lookup
/// filling the cache (a thread whose cache is destroyed, as it exits, asks
/// the registry every time here; see [`refill`] for [`NAMED`] there).
#[cold]
#[inline(never)]
fn runtime_now_through_shard(handle: Handle, id: Id) -> (Option<Id>, Instant) {
    let shard = match cached_shard(id) {
        Some(shard) => shard,
        None => match refill(handle, id) {
            Ok((_, shard)) => shard,
            // No timer (a runtime without timers, or shut down): unbound,
            // as outside any runtime, so counted on the real clock, not
            // on this runtime's, which may be paused.
            Err(_) => return (None, super::real_now()),
        },
    };
    let now = if shard.is_manual() {
        shard.now()
    } else {
        Instant::now()
    };
    (Some(id), now)
}

/// This thread's shard of runtime `id`'s default timer, for a `Timeout`
/// made in that runtime's context ([`default_runtime`]): none if that
/// runtime, or its timer, has shut down since, unless it is a test
/// runtime, whose timer stays its default ([`is_default`]) and answers by
/// its own clock.
#[inline]
pub(crate) fn shard_of(id: Id) -> Option<Arc<Shard>> {
    cached_shard(id).or_else(|| {
        let timer = registry().as_ref()?.get(&id)?.clone();
        is_default(&timer).then(|| timer.driver().home().clone())
    })
}

/// Whether a registered timer is still its runtime's default: it is unless
/// it has shut down, and a test runtime's is even then (sleeps made
/// afterwards report the shutdown), since a new one would keep tokio's
/// time, the real clock there, not the test clock.
fn is_default(timer: &Timer) -> bool {
    !timer.is_shut_down() || timer.is_manual()
}

/// The current runtime's default timer, creating it on first use.
pub(crate) fn current() -> Result<Timer, BuildError> {
    let handle = Handle::try_current().map_err(|_| BuildError::no_runtime())?;
    let id = handle.id();
    let cached = with_cache(|cached| {
        (cached.named.names(id))
            .then(|| cached.driver.upgrade())
            .flatten()
    });
    match cached {
        Some(driver) => Ok(Timer::from_driver(driver)),
        None => refill(handle, id).map(|(timer, _)| timer),
    }
}

/// Runtime `id`'s default timer from the registry (or a new one), and this
/// thread's shard of it, now in the cache.
fn refill(handle: Handle, id: Id) -> Result<(Timer, Arc<Shard>), BuildError> {
    if let Some((_, shut_down)) = TIMERLESS
        .try_with(Cell::get)
        .ok()
        .flatten()
        .filter(|&(known, _)| known == id)
    {
        return Err(if shut_down {
            BuildError::runtime_shut_down()
        } else {
            BuildError::timers_disabled()
        });
    }
    // Read first: a shutdown during the lookup leaves the cache one behind,
    // so it is looked up again.
    let shutdowns = SHUTDOWNS.load(Ordering::Acquire);
    let timer = registered(handle, id).inspect_err(|error| {
        if error.is_timers_disabled() || error.is_runtime_shut_down() {
            let known = Some((id, error.is_runtime_shut_down()));
            let _ = TIMERLESS.try_with(|timerless| timerless.set(known));
        }
    })?;
    let shard = timer.driver().home().clone();
    let named = Named {
        runtime: id,
        manual: timer.is_manual(),
        shutdowns,
    };
    let filled = CACHE.try_with(|cache| {
        *cache.borrow_mut() = Some(Cached {
            named,
            driver: Arc::downgrade(timer.driver_arc()),
            shard: Arc::downgrade(&shard),
        });
    });
    // Named only where cached: a thread whose cache is destroyed (it is
    // exiting) asks the registry at every lookup but one. `NAMED` has no
    // destructor, so what it named when the cache went stays named: a
    // timeout made there in that runtime takes tokio's clock without
    // asking. That answer holds while `SHUTDOWNS` has not moved (the timer
    // is still registered, and still not manual), as the cache's did.
    NAMED.set(filled.is_ok().then_some(named));
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

/// Whether this thread's cache holds runtime `id`'s default timer as it is
/// now ([`Named::names`]), and if so, whether it runs on a test clock.
#[inline]
fn named(id: Id) -> Option<bool> {
    NAMED
        .get()
        .filter(|named| named.names(id))
        .map(|named| named.manual)
}

/// This thread's cached shard of runtime `id`'s default timer, if the cache
/// names that timer as it is now and the shard is alive: its own count is
/// the only shared state this touches.
#[inline]
fn cached_shard(id: Id) -> Option<Arc<Shard>> {
    with_cache(|cached| {
        (cached.named.names(id))
            .then(|| cached.shard.upgrade())
            .flatten()
    })
}

/// Runtime `id`'s default timer from the registry ([`is_default`]), or a
/// new one.
fn registered(handle: Handle, id: Id) -> Result<Timer, BuildError> {
    if let Some(timer) = registry().as_ref().and_then(|map| map.get(&id)).cloned() {
        if is_default(&timer) {
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
        // Another thread won the race (or a test runtime installed its
        // timer); ours is dropped (outside the lock).
        Some(timer) if is_default(timer) => {
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

/// Unregisters `driver` as the default timer of runtime `id`, which has
/// shut down, and counts the shutdown in [`SHUTDOWNS`].
pub(super) fn forget(id: Id, driver: &Driver) {
    let removed = {
        let mut registry = registry();
        let map = registry.get_or_insert_with(HashMap::new);
        match map.get(&id) {
            Some(timer) if std::ptr::eq(timer.driver(), driver) => map.remove(&id),
            _ => None,
        }
    };
    SHUTDOWNS.fetch_add(1, Ordering::Release);
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

    /// The copy a timeout's lookup reads names what the cache holds: the
    /// runtime, whether its clock is a test clock, and no runtime once a
    /// default timer has shut down since (so the lookup asks again).
    #[test]
    fn the_named_copy_follows_the_cache() {
        let _watchdog = crate::driver::tests::watchdog();
        // A thread of its own, so its cache starts empty.
        std::thread::spawn(|| {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .build()
                .unwrap();
            let id = rt.handle().id();
            assert_eq!(named(id), None, "named before any lookup");
            let made_in = rt.block_on(async { default_runtime_now().0 });
            assert_eq!(made_in, Some(id));
            assert_eq!(named(id), Some(false));
            // The cache holds the shard the lookup found, for the next one.
            let shard = rt.block_on(async { default_shard().unwrap() });
            assert!(cached_shard(id).is_some_and(|cached| Arc::ptr_eq(&cached, &shard)));
            let test = crate::TestClock::new()
                .build(tokio::runtime::Builder::new_current_thread().enable_time())
                .unwrap();
            let test_id = test.handle().id();
            test.block_on(async { default_runtime_now() });
            assert_eq!((named(test_id), named(id)), (Some(true), None));
            // Any default timer's shutdown (the test runtime's, dropped):
            // the copy no longer names the runtime, as the cache does not.
            drop(test);
            assert_eq!(named(test_id), None, "named across a shutdown");
            assert!(with_cache(|cached| cached.named.names(test_id).then_some(())).is_none());
            assert!(
                cached_shard(test_id).is_none(),
                "a shard cached across a shutdown"
            );
            rt.block_on(async { default_runtime_now() });
            assert_eq!(named(id), Some(false));
        })
        .join()
        .unwrap();
    }

    /// A timeout made in a thread-local's destructor that runs after the
    /// cache's (tokio's context still there, the runtime entered) reads
    /// its runtime's clock: `NAMED`, which has no destructor, still names
    /// the runtime the cache held (tokio's clock, read in the runtime's
    /// context) or the lookup asks the registry (a test clock's).
    #[test]
    fn a_timeout_made_after_the_threads_cache_is_destroyed_reads_its_runtimes_clock() {
        use std::time::Duration;

        struct AtExit(Option<Box<dyn FnOnce()>>);
        impl Drop for AtExit {
            fn drop(&mut self) {
                if let Some(run) = self.0.take() {
                    run()
                }
            }
        }
        thread_local! {
            static AT_EXIT: RefCell<Option<AtExit>> = const { RefCell::new(None) };
        }
        // Made on a thread of its own, in a destructor that runs after the
        // cache's and before tokio's: (runtime, time, cache gone, named).
        fn made_at_exit(handle: Handle) -> (Option<Id>, Instant, bool, Option<bool>) {
            let (sender, receiver) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                // Destructors run in reverse order of first use: tokio's
                // context first, then `AT_EXIT`, then the cache.
                let _ = Handle::try_current();
                let inside = handle.clone();
                AT_EXIT.with(|at_exit| {
                    *at_exit.borrow_mut() = Some(AtExit(Some(Box::new(move || {
                        let _entered = inside.enter();
                        let gone = CACHE.try_with(|_| ()).is_err();
                        let named = named(inside.id());
                        let (made_in, now) = default_runtime_now();
                        sender.send((made_in, now, gone, named)).unwrap();
                    }))));
                });
                let _entered = handle.enter();
                default_runtime_now();
            })
            .join()
            .unwrap();
            receiver.recv().unwrap()
        }
        let _watchdog = crate::driver::tests::watchdog();
        let hour = Duration::from_secs(3600);

        let paused = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        let start = paused.block_on(async {
            let start = Instant::now();
            tokio::time::advance(hour).await;
            start
        });
        let (made_in, now, gone, was_named) = made_at_exit(paused.handle().clone());
        assert!(gone, "the cache was not destroyed first");
        assert_eq!(was_named, Some(false));
        assert_eq!(made_in, Some(paused.handle().id()));
        assert_eq!(now, start + hour, "not the paused runtime's clock");

        let test = crate::TestClock::new()
            .build(tokio::runtime::Builder::new_current_thread().enable_time())
            .unwrap();
        let start = test.now();
        test.advance(hour);
        let (made_in, now, gone, was_named) = made_at_exit(test.handle().clone());
        assert!(gone, "the cache was not destroyed first");
        assert_eq!(was_named, Some(true));
        assert_eq!(made_in, Some(test.handle().id()));
        assert_eq!(now, start + hour, "not the test clock");
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
