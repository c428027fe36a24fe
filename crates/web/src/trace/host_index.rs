//! One level-of-detail index per (run, host): opened from the disk cache when a valid
//! one is there, else built from the loaded session and written to the cache.
//!
//! Indexes live in the state's bounded cache ([`AppState::trace_indexes`], keyed by
//! [`HostKey`]), so concurrent requests for one host wait for a single open or build,
//! which runs to its end even when they go away, and a failed one is retried by the
//! next request; the state forgets a run's indexes when its files change.
//! Opening (checksum pass) and building are [`crate::blocking::heavy`] jobs. The
//! cache file name comes from the run and host; its key holds the profile file's path,
//! size and modification time and [`recipe`], so a changed profile or a new way of
//! building is rebuilt, never misread. When the cache cannot
//! be written, the index is kept in memory for this server's life. An index file
//! truncated or rewritten by another process while it is open reads as zeros rather
//! than killing the server (`mlprof_mapped`); every endpoint asks [`still_intact`]
//! after answering, and a changed index is dropped and answered with 409, so the next
//! request rebuilds it.

use std::path::PathBuf;
use std::sync::Arc;

use mlprof_model::Session;
use mlprof_timeline::{BuildProgress, BuildStage, CacheKey, MAPPING_VERSION, TimelineBuilder, TimelineIndex};

use super::derived::add_derived_lines;
use super::steps::add_profiler_steps;
use super::together;
use crate::blocking::{heavy, on_blocking_thread};
use crate::error::ApiError;
use crate::run_work::Work;
use crate::state::{AppState, HostKey};

/// What this server adds to a host's events, and its version. Change it whenever the
/// index built here would differ; [`recipe`] adds the versions of the rest.
const SERVE_RECIPE: &str = "mlprof serve trace v3: host planes, Kineto ProfilerStep steps section, XProf-derived GPU line \
                            sections; every host together on one axis";

/// The cache key's variant: [`SERVE_RECIPE`], this mlprof's version (a new release may
/// read profiles differently, moving model events) and mlprof-timeline's
/// [`MAPPING_VERSION`].
pub(crate) fn recipe() -> String {
    format!("{SERVE_RECIPE}; mlprof {}; timeline mapping v{MAPPING_VERSION}", env!("CARGO_PKG_VERSION"))
}

/// The index of `host` of `run` (both checked against the catalog by the caller),
/// opened or built to the end even if every request waiting for it goes away.
/// An open index whose file changed since (see [`still_intact`]) is dropped and opened
/// or built again.
pub(crate) async fn host_index(state: &Arc<AppState>, run: &str, host: &str) -> Result<Arc<TimelineIndex>, ApiError> {
    let index = open_index(state, run, host).await?;
    if index.changed().is_none() {
        return Ok(index);
    }
    discard_host_index(state, run, host).await?;
    open_index(state, run, host).await
}

/// The index of `host` of `run` from the open indexes, opened or built if not there.
async fn open_index(state: &Arc<AppState>, run: &str, host: &str) -> Result<Arc<TimelineIndex>, ApiError> {
    let owned = (Arc::clone(state), run.to_string(), host.to_string());
    state
        .trace_indexes()
        .get_or_compute(&HostKey::new(run, host), move || async move {
            let (state, run, host) = owned;
            open_or_build(&state, &run, &host).await
        })
        .await
}

/// Ok when `index` (of `host` of `run`) still holds what it was opened with, so an
/// answer just read from it can be sent; otherwise the index file was truncated or
/// rewritten under the server: the index is dropped, memory and disk, and the answer
/// is a 409 asking to try again (the next request rebuilds it).
pub(crate) async fn still_intact(
    state: &Arc<AppState>,
    run: &str,
    host: &str,
    index: &TimelineIndex,
) -> Result<(), ApiError> {
    let Some(change) = index.changed() else { return Ok(()) };
    discard_host_index(state, run, host).await?;
    Err(ApiError::conflict(format!(
        "the trace index of host {host} of run {run}: {change}; it will be rebuilt, ask again"
    )))
}

/// Forgets the index of `host` of `run` — the open one and its cache file — because
/// it disagrees with the profile, so the next request builds it again. An open or
/// build still running is left alone (it reads the profile as it is now).
pub(crate) async fn discard_host_index(state: &Arc<AppState>, run: &str, host: &str) -> Result<(), ApiError> {
    let (key, path) = cache_file(state, run, host).await?;
    let removed = on_blocking_thread("removing a stale trace index", move || std::fs::remove_file(&path)).await?;
    // The file first: a request opening the index after this builds a fresh one.
    state.trace_indexes().invalidate(&HostKey::new(run, host));
    match removed {
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
            Err(ApiError::internal(format!("{}: removing the stale trace index: {error}", key.source_path)))
        }
        _ => Ok(()),
    }
}

/// The cache key of `host` of `run` as its profile is now, and its cache file's path.
/// For every host together ([`together`]) the key is the first host's file and the
/// variant names every host's file with its size and modification time.
async fn cache_file(state: &AppState, run: &str, host: &str) -> Result<(CacheKey, PathBuf), ApiError> {
    let names: Vec<String> = if together::is_together(host) {
        state.run(run)?.host_names().map(str::to_string).collect()
    } else {
        vec![host.to_string()]
    };
    let sources =
        names.iter().map(|name| Ok(state.host_file(run, name)?.path)).collect::<Result<Vec<_>, ApiError>>()?;
    let dir = state.cache_dir().to_path_buf();
    let stem = format!("{run}-{host}");
    let together = together::is_together(host).then(|| host.to_string());
    on_blocking_thread("trace index key", move || {
        let internal = |e: &dyn std::fmt::Display| ApiError::internal(e.to_string());
        let mut variant = recipe();
        if let Some(host) = together {
            variant.push_str(&format!("; {host}"));
            for source in &sources {
                let key = CacheKey::for_file(source, "").map_err(|e| internal(&e))?;
                variant.push_str(&format!("; {} {} {}", key.source_path, key.source_bytes, key.source_modified_ns));
            }
        }
        let first = sources.first().ok_or_else(|| ApiError::not_found(format!("run {stem} has no host")))?;
        let key = CacheKey::for_file(first, &variant).map_err(|e| internal(&e))?;
        let path = dir.join(key.file_name(&stem));
        Ok((key, path))
    })
    .await?
}

async fn open_or_build(state: &Arc<AppState>, run: &str, host: &str) -> Result<Arc<TimelineIndex>, ApiError> {
    let (key, path) = cache_file(state, run, host).await?;
    let what = format!("{}: trace index", key.source_path);
    let (key, path, cached) = heavy(&what, move || {
        // Missing, stale or damaged: rebuilt below, over the same name.
        let cached = TimelineIndex::open(&path, &key).ok();
        (key, path, cached)
    })
    .await?;
    if let Some(index) = cached {
        return Ok(Arc::new(index));
    }
    // Loaded before taking a heavy-work permit for the build: the load takes its own.
    let session = state.session(run).await?;
    let progress = Arc::new(BuildProgress::default());
    let _indexing = state.work().begin(run, Work::Indexing { host: host.to_string(), progress: Arc::clone(&progress) });
    let host = host.to_string();
    heavy(&what, move || build(&session, &host, &key, path, progress).map(Arc::new)).await?
}

/// Builds the index of `host_name` of `session` (or of every host together) and writes
/// it to `path`, telling `progress` how far it has come.
fn build(
    session: &Session,
    host_name: &str,
    key: &CacheKey,
    path: PathBuf,
    progress: Arc<BuildProgress>,
) -> Result<TimelineIndex, ApiError> {
    let failed = |e: &dyn std::fmt::Display| ApiError::internal(format!("{}: trace index: {e}", key.source_path));
    let mut builder = TimelineBuilder::new();
    if together::is_together(host_name) {
        let events = session.hosts.iter().map(|h| h.event_count() as u64).sum();
        builder.report_to(Arc::clone(&progress), events);
        for placement in together::placements(session, host_name).hosts {
            let Some(host) = session.hosts.get(placement.host) else { continue };
            builder.place_host(&together::section_prefix(host), placement.offset_ps, placement.plane_base);
            add_host_sections(&mut builder, host).map_err(|e| failed(&e))?;
        }
    } else {
        let host = session
            .hosts
            .iter()
            .find(|h| h.name == host_name)
            .ok_or_else(|| ApiError::not_found(format!("no host named {host_name:?} in {}", session.path)))?;
        builder.report_to(Arc::clone(&progress), host.event_count() as u64);
        add_host_sections(&mut builder, host).map_err(|e| failed(&e))?;
    }
    let built = builder.finish().map_err(|e| failed(&e))?;
    progress.enter(BuildStage::Writing, 0);
    if built.write(&path, key).is_err() {
        return built.into_index().map_err(|e| failed(&e));
    }
    drop(built);
    TimelineIndex::open(&path, key).map_err(|e| failed(&e))
}

/// A host's sections: its steps (PyTorch), XProf's derived GPU lines, then its planes.
fn add_host_sections(
    builder: &mut TimelineBuilder,
    host: &mlprof_model::Host,
) -> Result<(), mlprof_timeline::BuildError> {
    add_profiler_steps(builder, host)?;
    add_derived_lines(builder, host)?;
    builder.add_host(host)
}
