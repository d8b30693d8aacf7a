//! A task whose only job is to be dropped when its runtime shuts down.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use super::Shared;
use crate::sync::Weak;

/// Spawned once per timer on the timer's runtime. It stays pending while the
/// timer lives; it finishes when every handle to the timer is gone (the
/// timer's `Drop` wakes it), and if the runtime shuts down first, its drop
/// shuts the timer down. Tokio drops all tasks before it shuts its time
/// driver down, so the timer learns of the shutdown before its alarm could.
#[derive(Debug)]
pub(crate) struct Sentinel {
    shared: Weak<Shared>,
}

impl Sentinel {
    pub(crate) fn new(shared: Weak<Shared>) -> Sentinel {
        Sentinel { shared }
    }
}

impl Future for Sentinel {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        match self.shared.upgrade() {
            Some(shared) if shared.set_sentinel(cx.waker()) => Poll::Pending,
            _ => Poll::Ready(()),
        }
    }
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        if let Some(shared) = self.shared.upgrade() {
            drop(shared.shut_down());
        }
    }
}
