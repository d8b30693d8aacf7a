//! The synchronisation primitives the crate uses, in one place.
//!
//! Everything concurrent in the driver goes through these names, so that
//! under `cfg(loom)` the model checker's mutex and atomics replace std's and
//! the loom models (`src/driver/loom.rs`) explore every interleaving of the
//! real driver code. `Arc` and `Weak` stay std's even then: loom's `Arc` has
//! no `Weak`, and reference counts are not the races the models are about.
//!
//! The mutex ignores poisoning. Under a shard's lock the driver runs
//! `Waker::clone`/`will_wake` and, on a runtime timer, resets and polls its
//! tokio alarm (or spawns a task): each before or after the shard's state
//! is changed as a whole, never midway, so a poisoned lock still guards
//! consistent state.

pub(crate) use std::sync::{Arc, Weak};

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicU8, Ordering};
#[cfg(not(loom))]
use std::sync::{Mutex as Inner, MutexGuard as InnerGuard, PoisonError};

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicU8, Ordering};
#[cfg(loom)]
use loom::sync::{Mutex as Inner, MutexGuard as InnerGuard};
#[cfg(loom)]
use std::sync::PoisonError;

/// The guard [`Mutex::lock`] returns.
pub(crate) type MutexGuard<'a, T> = InnerGuard<'a, T>;

/// A mutex without poisoning: std's, or loom's under `cfg(loom)`.
#[derive(Debug)]
pub(crate) struct Mutex<T>(Inner<T>);

impl<T> Mutex<T> {
    pub(crate) fn new(value: T) -> Mutex<T> {
        Mutex(Inner::new(value))
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn get_mut(&mut self) -> &mut T {
        self.0.get_mut().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The calling thread's identity (loom's, under loom, whose threads are
/// not OS threads).
pub(crate) fn current_thread() -> ThreadId {
    #[cfg(not(loom))]
    return std::thread::current().id();
    #[cfg(loom)]
    return loom::thread::current().id();
}

#[cfg(loom)]
pub(crate) use loom::thread::ThreadId;
#[cfg(not(loom))]
pub(crate) use std::thread::ThreadId;
