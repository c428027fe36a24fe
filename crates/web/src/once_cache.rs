//! A small bounded cache of values computed once per key: loaded sessions (keyed by
//! run) and tool results (keyed by run, hosts, tool and options).
//!
//! The one design decision to know: an entry is created before its value is computed
//! and holds a [`tokio::sync::OnceCell`], so concurrent requests for one key wait on
//! one computation instead of starting their own; a failed computation is dropped, so
//! the next request tries again (a profile may have been completed since). Entries
//! beyond the capacity are dropped least recently used first; requests still holding
//! one finish with their copy.

use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::OnceCell;

use crate::error::ApiError;

type Slot<V> = Arc<OnceCell<Result<V, ApiError>>>;

/// At most `capacity` values by key, least recently used dropped first.
pub struct OnceCache<V> {
    capacity: usize,
    /// Least recently used first.
    entries: Mutex<Vec<(String, Slot<V>)>>,
}

impl<V: Clone> OnceCache<V> {
    /// A cache of at most `capacity` values (at least one).
    pub fn new(capacity: usize) -> OnceCache<V> {
        OnceCache { capacity: capacity.max(1), entries: Mutex::new(Vec::new()) }
    }

    /// The value of `key`, computed by `compute` unless it is cached or being computed.
    pub async fn get_or_compute<F, Fut>(&self, key: &str, compute: F) -> Result<V, ApiError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<V, ApiError>>,
    {
        let slot = self.slot(key);
        let result = slot.get_or_init(compute).await.clone();
        if result.is_err() {
            self.forget(key, &slot);
        }
        result
    }

    /// The keys cached or being computed, least recently used first.
    pub fn keys(&self) -> Vec<String> {
        self.lock().iter().map(|(key, _)| key.clone()).collect()
    }

    /// The entry of `key`, created when missing and marked most recently used.
    fn slot(&self, key: &str) -> Slot<V> {
        let mut entries = self.lock();
        let slot = match entries.iter().position(|(k, _)| k == key) {
            Some(index) => entries.remove(index).1,
            None => Arc::new(OnceCell::new()),
        };
        entries.push((key.to_string(), Arc::clone(&slot)));
        let excess = entries.len().saturating_sub(self.capacity);
        entries.drain(..excess);
        slot
    }

    /// Drops `key`'s entry if it is still `slot`.
    fn forget(&self, key: &str, slot: &Slot<V>) {
        self.lock().retain(|(k, s)| !(k == key && Arc::ptr_eq(s, slot)));
    }

    fn lock(&self) -> MutexGuard<'_, Vec<(String, Slot<V>)>> {
        // Every change to the list is one Vec operation, so a panic elsewhere while the
        // lock was held cannot leave it inconsistent: a poisoned lock is used as is.
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test]
    async fn concurrent_requests_share_one_computation_and_old_keys_are_dropped() {
        let cache: OnceCache<Arc<String>> = OnceCache::new(2);
        let computed = AtomicUsize::new(0);
        let compute = |text: &'static str| {
            let computed = &computed;
            move || async move {
                computed.fetch_add(1, Ordering::SeqCst);
                tokio::task::yield_now().await;
                Ok(Arc::new(text.to_string()))
            }
        };
        let (a, b) = tokio::join!(cache.get_or_compute("a", compute("A")), cache.get_or_compute("a", compute("B")));
        assert!(Arc::ptr_eq(&a.expect("computes"), &b.expect("computes")));
        assert_eq!(computed.load(Ordering::SeqCst), 1);
        cache.get_or_compute("b", compute("B")).await.expect("computes");
        cache.get_or_compute("c", compute("C")).await.expect("computes");
        assert_eq!(cache.keys(), ["b", "c"]);
    }

    #[tokio::test]
    async fn a_failed_computation_is_not_kept() {
        let cache: OnceCache<u32> = OnceCache::new(2);
        let error = cache.get_or_compute("a", || async { Err(ApiError::internal("broken")) }).await;
        assert_eq!(error, Err(ApiError::internal("broken")));
        assert!(cache.keys().is_empty());
        assert_eq!(cache.get_or_compute("a", || async { Ok(7) }).await, Ok(7));
    }
}
