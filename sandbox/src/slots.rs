//! A bound on code runs at once: each run holds one of N slots while it executes.
//!
//! A server shares one [`RunSlots`] among every request's [`crate::ToolLoop`]: the loop takes a
//! slot before a `run_python` / `run_javascript` call starts and gives it back when the call
//! ends, so no more than N guests run at any moment, whatever the surface. The server also asks
//! [`RunSlots::free`] when a request arrives, to turn one away (429) while all are taken.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// N slots for code runs, shared by clones.
#[derive(Clone, Debug)]
pub struct RunSlots {
    sem: Arc<Semaphore>,
    size: usize,
}

/// One taken slot; dropping it frees the slot.
#[derive(Debug)]
pub struct RunSlot {
    _permit: OwnedSemaphorePermit,
}

impl RunSlots {
    /// `size` slots (at least one).
    pub fn new(size: usize) -> Self {
        let size = size.max(1);
        RunSlots {
            sem: Arc::new(Semaphore::new(size)),
            size,
        }
    }

    /// One slot per CPU core (what runs truly at once).
    pub fn per_core() -> Self {
        RunSlots::new(std::thread::available_parallelism().map_or(1, |n| n.get()))
    }

    /// How many slots there are.
    pub fn size(&self) -> usize {
        self.size
    }

    /// How many slots are free now.
    pub fn free(&self) -> usize {
        self.sem.available_permits()
    }

    /// A slot if one is free now.
    pub fn try_take(&self) -> Option<RunSlot> {
        self.sem
            .clone()
            .try_acquire_owned()
            .ok()
            .map(|p| RunSlot { _permit: p })
    }

    /// A slot, waiting at most `wait` for one to free up.
    pub async fn take(&self, wait: Duration) -> Option<RunSlot> {
        match tokio::time::timeout(wait, self.sem.clone().acquire_owned()).await {
            Ok(Ok(p)) => Some(RunSlot { _permit: p }),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_taken_and_given_back() {
        let s = RunSlots::new(2);
        assert_eq!((s.size(), s.free()), (2, 2));
        let a = s.try_take().unwrap();
        let b = s.clone().try_take().unwrap();
        assert_eq!(s.free(), 0);
        assert!(s.try_take().is_none());
        drop(a);
        assert_eq!(s.free(), 1);
        drop(b);
        assert_eq!(s.free(), 2);
    }

    #[test]
    fn zero_means_one() {
        assert_eq!(RunSlots::new(0).size(), 1);
        assert!(RunSlots::per_core().size() >= 1);
    }

    #[tokio::test]
    async fn waiting_ends_with_a_freed_slot_or_not_at_all() {
        let s = RunSlots::new(1);
        let held = s.try_take().unwrap();
        // Nothing frees the slot: the wait gives up (tokio's paused clock is not used, so
        // keep it short).
        assert!(s.take(Duration::from_millis(20)).await.is_none());
        let s2 = s.clone();
        let waiter = tokio::spawn(async move { s2.take(Duration::from_secs(600)).await.is_some() });
        drop(held);
        assert!(waiter.await.unwrap());
    }
}
