//! The synchronisation primitives the crate uses, in one place.
//!
//! Everything concurrent goes through these names so that a model checker
//! (loom, under `cfg(loom)`) can be swapped in here without touching the
//! driver; the loom models themselves are not written yet. The mutex
//! ignores poisoning: nothing that can panic runs while the driver's lock is
//! held except `Waker::clone`/`will_wake`, and both run before any state is
//! changed, so a poisoned lock still guards consistent state.

pub(crate) use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
pub(crate) use std::sync::{Arc, Weak};

/// `std::sync::Mutex` without poisoning.
#[derive(Debug, Default)]
pub(crate) struct Mutex<T>(std::sync::Mutex<T>);

impl<T> Mutex<T> {
    pub(crate) const fn new(value: T) -> Mutex<T> {
        Mutex(std::sync::Mutex::new(value))
    }

    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, T> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn get_mut(&mut self) -> &mut T {
        self.0
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
