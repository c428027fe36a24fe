//! A small bounded cache of values computed once per typed key: loaded sessions
//! (keyed by run name), tool results (keyed by the checked request) and trace indexes
//! (keyed by run and host). Every key names its run ([`RunKey`]), so a run's entries
//! are forgotten by comparing run names, never by matching text.
//!
//! The one design decision to know: the first request for a key starts the
//! computation in a task of its own and every request — the first included — only
//! waits for that task's outcome. A request that goes away (the client disconnected)
//! therefore neither cancels the computation nor makes the next request start a second
//! one. A failed computation is dropped when it ends, so the next request tries again
//! (a profile may have been completed since). Entries beyond the capacity are dropped
//! least recently used first, but never one whose computation is still running (the
//! cache may exceed its capacity until it ends); requests still holding a dropped
//! entry finish with their copy.

use std::fmt::Debug;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::watch;

use crate::error::ApiError;

/// A computation's outcome as its waiters see it: `None` while it runs.
type Outcome<V> = watch::Receiver<Option<Result<V, ApiError>>>;

/// A cache key that belongs to one run: what [`OnceCache::forget_run`] compares.
pub trait RunKey {
    /// The name of the run this key's value was computed from.
    fn run(&self) -> &str;
}

/// A run name is the key of a value computed from the whole run (its session).
impl RunKey for String {
    fn run(&self) -> &str {
        self
    }
}

/// One key's computation.
struct Entry<K, V> {
    key: K,
    /// Tells this entry from a later one of the same key.
    id: u64,
    outcome: Outcome<V>,
}

impl<K, V> Entry<K, V> {
    /// Whether the computation has ended (with a value, an error, or a panic).
    fn finished(&self) -> bool {
        self.outcome.borrow().is_some() || self.outcome.has_changed().is_err()
    }
}

/// At most `capacity` values by key, least recently used dropped first. Keys are few
/// (a capacity of tens), so they are found by comparison in recency order.
pub struct OnceCache<K, V> {
    shared: Arc<Shared<K, V>>,
}

/// What the cache and its running computations share.
struct Shared<K, V> {
    capacity: usize,
    next_id: AtomicU64,
    /// Least recently used first.
    entries: Mutex<Vec<Entry<K, V>>>,
}

impl<K, V> OnceCache<K, V>
where
    K: Clone + Eq + Debug + Send + Sync + 'static,
    V: Clone + Send + Sync + 'static,
{
    /// A cache of at most `capacity` values (at least one).
    pub fn new(capacity: usize) -> OnceCache<K, V> {
        OnceCache {
            shared: Arc::new(Shared {
                capacity: capacity.max(1),
                next_id: AtomicU64::new(0),
                entries: Mutex::default(),
            }),
        }
    }

    /// The value of `key`: cached, or awaited from the computation already running, or
    /// computed by `compute` in a task of its own (which runs to its end even when no
    /// request waits for it any more). Must be called within a tokio runtime.
    pub async fn get_or_compute<F, Fut>(&self, key: &K, compute: F) -> Result<V, ApiError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<V, ApiError>> + Send + 'static,
    {
        let (id, mut outcome) = self.entry_or_start(key, compute);
        let result = match outcome.wait_for(Option::is_some).await {
            Ok(finished) => {
                (*finished).clone().unwrap_or_else(|| Err(ApiError::internal(format!("{key:?}: not computed"))))
            }
            // The task ended without an outcome: it panicked, or the runtime is stopping.
            Err(_) => Err(ApiError::internal(format!("computing {key:?} stopped before it ended"))),
        };
        if result.is_err() {
            self.shared.forget(key, id);
        }
        result
    }

    /// The keys cached or being computed, least recently used first.
    pub fn keys(&self) -> Vec<K> {
        self.shared.lock().iter().map(|entry| entry.key.clone()).collect()
    }

    /// Drops `key`'s entry if its computation has ended, so the next request computes it
    /// again (a running computation is kept: its waiters would otherwise start another).
    pub fn invalidate(&self, key: &K) {
        self.invalidate_where(|other| other == key);
    }

    /// Drops the entries whose key satisfies `pred` and whose computation has ended (as
    /// [`OnceCache::invalidate`] does for one key).
    pub fn invalidate_where(&self, pred: impl Fn(&K) -> bool) {
        self.shared.lock().retain(|entry| !(pred(&entry.key) && entry.finished()));
    }

    /// `key`'s entry, marked most recently used, with its computation started by
    /// `compute` when there was none.
    fn entry_or_start<F, Fut>(&self, key: &K, compute: F) -> (u64, Outcome<V>)
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<V, ApiError>> + Send + 'static,
    {
        let (id, sender, outcome) = {
            let mut entries = self.shared.lock();
            if let Some(index) = entries.iter().position(|entry| entry.key == *key) {
                let entry = entries.remove(index);
                let found = (entry.id, entry.outcome.clone());
                entries.push(entry);
                return found;
            }
            let id = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
            let (sender, outcome) = watch::channel(None);
            entries.push(Entry { key: key.clone(), id, outcome: outcome.clone() });
            trim(&mut entries, self.shared.capacity);
            (id, sender, outcome)
        };
        let computation = compute();
        let shared = Arc::clone(&self.shared);
        let key = key.clone();
        tokio::spawn(async move {
            let result = computation.await;
            let failed = result.is_err();
            // Sending fails only when nobody can read it any more (the entry dropped).
            let _ = sender.send(Some(result));
            if failed {
                shared.forget(&key, id);
            }
            trim(&mut shared.lock(), shared.capacity);
        });
        (id, outcome)
    }
}

impl<K, V> OnceCache<K, V>
where
    K: RunKey + Clone + Eq + Debug + Send + Sync + 'static,
    V: Clone + Send + Sync + 'static,
{
    /// Drops the finished entries of run `run` (its files changed or it is gone), as
    /// [`OnceCache::invalidate`] does for one key.
    pub fn forget_run(&self, run: &str) {
        self.invalidate_where(|key| key.run() == run);
    }
}

impl<K: Eq, V> Shared<K, V> {
    /// Drops `key`'s entry if it is still the one numbered `id`.
    fn forget(&self, key: &K, id: u64) {
        self.lock().retain(|entry| !(entry.key == *key && entry.id == id));
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Entry<K, V>>> {
        // Every change to the list is one Vec operation, so a panic elsewhere while the
        // lock was held cannot leave it inconsistent: a poisoned lock is used as is.
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Drops the least recently used finished entries until at most `capacity` are left
/// (or only running ones are).
fn trim<K, V>(entries: &mut Vec<Entry<K, V>>, capacity: usize) {
    let mut excess = entries.len().saturating_sub(capacity);
    entries.retain(|entry| {
        if excess > 0 && entry.finished() {
            excess -= 1;
            return false;
        }
        true
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;
    use tokio::sync::Notify;

    #[tokio::test]
    async fn concurrent_requests_share_one_computation_and_old_keys_are_dropped() {
        let cache: OnceCache<&str, Arc<String>> = OnceCache::new(2);
        let computed = Arc::new(AtomicUsize::new(0));
        let compute = |text: &'static str| {
            let computed = Arc::clone(&computed);
            move || async move {
                computed.fetch_add(1, Ordering::SeqCst);
                tokio::task::yield_now().await;
                Ok(Arc::new(text.to_string()))
            }
        };
        let (a, b) = tokio::join!(cache.get_or_compute(&"a", compute("A")), cache.get_or_compute(&"a", compute("B")));
        assert!(Arc::ptr_eq(&a.expect("computes"), &b.expect("computes")));
        assert_eq!(computed.load(Ordering::SeqCst), 1);
        cache.get_or_compute(&"b", compute("B")).await.expect("computes");
        cache.get_or_compute(&"c", compute("C")).await.expect("computes");
        assert_eq!(cache.keys(), ["b", "c"]);
    }

    #[tokio::test]
    async fn a_failed_computation_is_not_kept() {
        let cache: OnceCache<&str, u32> = OnceCache::new(2);
        let error = cache.get_or_compute(&"a", || async { Err(ApiError::internal("broken")) }).await;
        assert_eq!(error, Err(ApiError::internal("broken")));
        assert!(cache.keys().is_empty());
        assert_eq!(cache.get_or_compute(&"a", || async { Ok(7) }).await, Ok(7));
    }

    /// A computation that counts its starts and ends only when `release` is notified.
    fn gated(
        started: &Arc<AtomicUsize>,
        release: &Arc<Notify>,
        value: u32,
    ) -> impl FnOnce() -> std::pin::Pin<Box<dyn Future<Output = Result<u32, ApiError>> + Send>> + use<> {
        let (started, release) = (Arc::clone(started), Arc::clone(release));
        move || {
            Box::pin(async move {
                started.fetch_add(1, Ordering::SeqCst);
                release.notified().await;
                Ok(value)
            })
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_request_that_goes_away_neither_cancels_nor_restarts_the_computation() {
        let cache: Arc<OnceCache<&str, u32>> = Arc::new(OnceCache::new(2));
        let started = Arc::new(AtomicUsize::new(0));
        let release = Arc::new(Notify::new());
        let first = tokio::spawn({
            let (cache, compute) = (Arc::clone(&cache), gated(&started, &release, 1));
            async move { cache.get_or_compute(&"a", compute).await }
        });
        while started.load(Ordering::SeqCst) == 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        first.abort();
        assert!(first.await.expect_err("aborted").is_cancelled());
        let second = tokio::spawn({
            let (cache, compute) = (Arc::clone(&cache), gated(&started, &release, 2));
            async move { cache.get_or_compute(&"a", compute).await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        release.notify_one();
        assert_eq!(second.await.expect("joined"), Ok(1), "the first computation's value");
        assert_eq!(started.load(Ordering::SeqCst), 1, "computed once");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_running_computation_is_never_evicted() {
        let cache: OnceCache<&str, u32> = OnceCache::new(2);
        let started = Arc::new(AtomicUsize::new(0));
        let release = Arc::new(Notify::new());
        let (running, _) = cache.entry_or_start(&"slow", gated(&started, &release, 1));
        assert_eq!(cache.get_or_compute(&"b", || async { Ok(2) }).await, Ok(2));
        assert_eq!(cache.get_or_compute(&"c", || async { Ok(3) }).await, Ok(3));
        assert_eq!(cache.keys(), ["slow", "c"], "`b` dropped, not the older `slow`, which runs");
        cache.invalidate(&"slow");
        assert_eq!(cache.keys(), ["slow", "c"], "not invalidated while running");
        let (again, _) = cache.entry_or_start(&"slow", gated(&started, &release, 9));
        assert_eq!(again, running, "the same computation");
        release.notify_one();
        assert_eq!(cache.get_or_compute(&"slow", || async { Ok(9) }).await, Ok(1));
        assert_eq!(started.load(Ordering::SeqCst), 1);
        cache.invalidate(&"slow");
        assert_eq!(cache.keys(), ["c"], "invalidated once it ended");
    }

    /// A key of one run, as the trace indexes' (run, host).
    #[derive(Clone, Debug, PartialEq, Eq)]
    struct Pair(&'static str, &'static str);

    impl RunKey for Pair {
        fn run(&self) -> &str {
            self.0
        }
    }

    #[tokio::test]
    async fn forgetting_a_run_drops_its_keys_only() {
        let cache: OnceCache<Pair, u32> = OnceCache::new(4);
        for (key, value) in [(Pair("a", "x"), 1), (Pair("ab", "x"), 2), (Pair("a", "y"), 3), (Pair("b", "a"), 4)] {
            assert_eq!(cache.get_or_compute(&key, || async move { Ok(value) }).await, Ok(value));
        }
        cache.forget_run("a");
        assert_eq!(cache.keys(), [Pair("ab", "x"), Pair("b", "a")], "not a run whose name starts with `a`");
    }
}
