//! One level-of-detail index per (run, host): opened from the disk cache when a valid
//! one is there, else built from the loaded session and written to the cache.
//!
//! Indexes live in a bounded [`OnceCache`] kept as an [`AppState::extension`], so
//! concurrent requests for one host wait for a single open or build, which runs to its
//! end even when they go away, and a failed one is retried by the next request.
//! Opening (checksum pass) and building are [`crate::blocking::heavy`] jobs. The
//! cache file name comes from the run and host; its key holds the profile file's path,
//! size and modification time and [`RECIPE`], so a changed profile or a new way of
//! building is rebuilt, never misread. When the cache cannot
//! be written, the index is kept in memory for this server's life.

use std::path::PathBuf;
use std::sync::Arc;

use mlprof_model::Session;
use mlprof_timeline::{CacheKey, TimelineBuilder, TimelineIndex};

use super::steps::add_profiler_steps;
use crate::blocking::heavy;
use crate::error::ApiError;
use crate::once_cache::OnceCache;
use crate::state::AppState;

/// What this server adds to a host's events, and its version: part of every cache key.
/// Change it whenever the index built here would differ.
pub(crate) const RECIPE: &str = "mlprof serve trace v1: host planes, Kineto ProfilerStep steps section";

/// How many hosts' indexes stay open at once (they are memory-mapped, so cheap).
const OPEN_INDEXES: usize = 8;

/// The open indexes of this server, keyed by run and host.
pub(crate) struct TraceIndexes {
    open: OnceCache<Arc<TimelineIndex>>,
}

impl Default for TraceIndexes {
    fn default() -> Self {
        TraceIndexes { open: OnceCache::new(OPEN_INDEXES) }
    }
}

/// The index of `host` of `run` (both checked against the catalog by the caller),
/// opened or built to the end even if every request waiting for it goes away.
pub(crate) async fn host_index(state: &Arc<AppState>, run: &str, host: &str) -> Result<Arc<TimelineIndex>, ApiError> {
    let indexes = state.extension::<TraceIndexes>();
    let owned = (Arc::clone(state), run.to_string(), host.to_string());
    indexes
        .open
        .get_or_compute(&index_key(run, host), move || async move {
            let (state, run, host) = owned;
            open_or_build(&state, &run, &host).await
        })
        .await
}

/// The key of `host` of `run` among the open indexes.
fn index_key(run: &str, host: &str) -> String {
    format!("{run}\n{host}")
}

async fn open_or_build(state: &Arc<AppState>, run: &str, host: &str) -> Result<Arc<TimelineIndex>, ApiError> {
    let source = state.host_file(run, host)?.path.clone();
    let what = format!("{}: trace index", source.display());
    let dir = state.cache_dir().to_path_buf();
    let stem = format!("{run}-{host}");
    let (key, path, cached) = heavy(&what, move || {
        let key = CacheKey::for_file(&source, RECIPE).map_err(|e| ApiError::internal(e.to_string()))?;
        let path = dir.join(key.file_name(&stem));
        // Missing, stale or damaged: rebuilt below, over the same name.
        let cached = TimelineIndex::open(&path, &key).ok();
        Ok::<_, ApiError>((key, path, cached))
    })
    .await??;
    if let Some(index) = cached {
        return Ok(Arc::new(index));
    }
    // Loaded before taking a heavy-work permit for the build: the load takes its own.
    let session = state.session(run).await?;
    let host = host.to_string();
    heavy(&what, move || build(&session, &host, &key, path).map(Arc::new)).await?
}

/// Builds the index of `host_name` of `session` and writes it to `path`.
fn build(session: &Session, host_name: &str, key: &CacheKey, path: PathBuf) -> Result<TimelineIndex, ApiError> {
    let host = session
        .hosts
        .iter()
        .find(|h| h.name == host_name)
        .ok_or_else(|| ApiError::not_found(format!("no host named {host_name:?} in {}", session.path)))?;
    let failed = |e: &dyn std::fmt::Display| ApiError::internal(format!("{}: trace index: {e}", host.source_path));
    let mut builder = TimelineBuilder::new();
    add_profiler_steps(&mut builder, host).map_err(|e| failed(&e))?;
    builder.add_host(host).map_err(|e| failed(&e))?;
    let built = builder.finish().map_err(|e| failed(&e))?;
    if built.write(&path, key).is_err() {
        return built.into_index().map_err(|e| failed(&e));
    }
    drop(built);
    TimelineIndex::open(&path, key).map_err(|e| failed(&e))
}
