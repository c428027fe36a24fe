//! Running synchronous work off the async threads: [`on_blocking_thread`] for any of
//! it, [`heavy`] for the work that reads or builds whole profiles (session loads, trace
//! index opens and builds), of which at most [`HEAVY_WORK_PERMITS`] run at once in this
//! process so that a burst of requests for different runs cannot hold several
//! multi-gigabyte profiles in memory at the same time.

use std::fmt::Display;

use tokio::sync::Semaphore;

use crate::error::ApiError;

/// How many heavy jobs (see [`heavy`]) run at once in this process.
pub const HEAVY_WORK_PERMITS: usize = 2;

/// The permits of [`heavy`], shared by every server of this process.
static HEAVY_WORK: Semaphore = Semaphore::const_new(HEAVY_WORK_PERMITS);

/// Runs `work` on a blocking thread; a panic in it answers 500 naming `what`.
pub async fn on_blocking_thread<T: Send + 'static>(
    what: impl Display,
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(work).await.map_err(|join| ApiError::internal(format!("{what}: {join}")))
}

/// Runs `work` on a blocking thread once one of the [`HEAVY_WORK_PERMITS`] is free,
/// holding the permit until `work` has returned (not merely until the caller stops
/// waiting). Call it only around the blocking work itself, never while awaiting other
/// heavy work, or two jobs could wait on each other's permits.
pub async fn heavy<T: Send + 'static>(
    what: impl Display,
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ApiError> {
    // The semaphore is never closed, so acquiring fails only in theory.
    let permit =
        HEAVY_WORK.acquire().await.map_err(|e| ApiError::internal(format!("{what}: waiting for a turn: {e}")))?;
    let result = tokio::task::spawn_blocking(move || {
        let _held = permit;
        work()
    })
    .await;
    result.map_err(|join| ApiError::internal(format!("{what}: {join}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn at_most_the_permitted_heavy_jobs_run_at_once_even_when_their_callers_give_up() {
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let job = |running: Arc<AtomicUsize>, most: Arc<AtomicUsize>| {
            move || {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(40));
                running.fetch_sub(1, Ordering::SeqCst);
            }
        };
        // A caller that stops waiting does not free its permit before its job is done.
        let given_up = tokio::spawn(heavy("given up", job(running.clone(), most.clone())));
        tokio::time::sleep(Duration::from_millis(5)).await;
        given_up.abort();
        let jobs: Vec<_> = (0..2 * HEAVY_WORK_PERMITS + 1)
            .map(|i| tokio::spawn(heavy(format!("job {i}"), job(running.clone(), most.clone()))))
            .collect();
        for job in jobs {
            job.await.expect("joined").expect("ran");
        }
        assert!(most.load(Ordering::SeqCst) <= HEAVY_WORK_PERMITS, "{} at once", most.load(Ordering::SeqCst));
        assert_eq!(running.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn a_panic_answers_500_naming_the_work() {
        let error = on_blocking_thread("reading x", || panic!("broken")).await.expect_err("panicked");
        assert!(error.to_string().starts_with("reading x: "), "{error}");
    }
}
