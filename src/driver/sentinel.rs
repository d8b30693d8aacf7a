//! A task whose only job is to be dropped when its runtime shuts down.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use super::shutdown::Leftovers;
use super::{Driver, Shard};
use crate::sync::{Arc, Ordering, Weak};

/// Spawned once per runtime timer on the timer's runtime. It stays pending
/// while any shard of the timer lives and runs; it finishes once every shard
/// is gone or shut down (a shard going wakes it). If the runtime shuts down
/// first, its drop shuts the timer down: tokio drops every task before it
/// shuts its time driver down, so the shards drop their alarms before tokio
/// could fire or refuse them. It holds the shards themselves, weakly, and
/// not only the timer: a `Sleep` outliving every handle of its timer keeps
/// its shard, which must learn of the shutdown too.
#[derive(Debug)]
pub(crate) struct Sentinel {
    driver: Weak<Driver>,
    shards: Vec<Weak<Shard>>,
}

impl Sentinel {
    pub(crate) fn new(driver: &Arc<Driver>) -> Sentinel {
        Sentinel {
            driver: Arc::downgrade(driver),
            shards: driver.shards().iter().map(Arc::downgrade).collect(),
        }
    }
}

impl Future for Sentinel {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut watching = false;
        for shard in self.shards.iter().filter_map(Weak::upgrade) {
            watching |= shard.watch(cx.waker());
        }
        if watching {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    }
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        // The timer, if a handle is left (it unregisters a default timer);
        // otherwise the shards that sleeps still hold.
        let shards: Vec<_> = self.shards.iter().filter_map(Weak::upgrade).collect();
        let leftovers = match self.driver.upgrade() {
            Some(driver) => driver.shut_down(),
            None => {
                let mut leftovers = Leftovers::default();
                shards
                    .iter()
                    .for_each(|shard| shard.shut_down(&mut leftovers));
                leftovers
            }
        };
        // The callbacks that never ran are dropped here, every sleep woken
        // first, each on its own: a closure whose drop panics is counted, as
        // a panicking callback is, and the others are still dropped.
        for (_, callback) in leftovers.callbacks {
            if super::pass::contain(|| drop(callback)) {
                if let Some(shard) = shards.first() {
                    shard.panicked.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }
}
