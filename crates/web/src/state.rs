//! What every request handler shares: the catalog of runs, the loaded sessions, the
//! cached tool results and the cache directory.
//!
//! The one design decision to know: handlers get runs and sessions only through
//! [`AppState::run`] and [`AppState::session`], which look names up in the catalog —
//! discovered at start and again by [`AppState::rediscover_if_due`] (see
//! [`crate::rescan`]); nothing here turns a request parameter into a path. A new
//! catalog replaces the old one whole; the loaded sessions, tool lists and tool results
//! of runs it no longer has, or has with other files, are forgotten, those of the
//! unchanged runs kept.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use mlprof_formats::discover::{HostFile, load_session_within};
use mlprof_model::Session;

use crate::blocking::heavy;
use crate::catalog::{Catalog, Run};
use crate::once_cache::OnceCache;
use crate::rescan::{DEFAULT_RESCAN_INTERVAL, Due, EndOnDrop, Rescan};
use crate::tool_output::ToolOutput;
use mlprof_analysis::tool_availability::tools_with_data;

pub use crate::error::ApiError;

/// How many runs stay loaded at once by default.
pub const DEFAULT_LOADED_RUNS: usize = 3;

/// How many tool results stay cached at once.
const CACHED_RESULTS: usize = 32;

/// The state shared by every request.
pub struct AppState {
    /// The path the server was given, as given.
    root: PathBuf,
    catalog: Mutex<Arc<Catalog>>,
    rescan: Rescan,
    cache_dir: PathBuf,
    sessions: OnceCache<Arc<Session>>,
    /// The tools with data of every run read so far (kept when the session is dropped).
    tools: Mutex<HashMap<String, Vec<&'static str>>>,
    results: OnceCache<Arc<ToolOutput>>,
    /// One shared value per type, for modules with their own state (the trace viewer's
    /// indexes); see [`AppState::extension`].
    extensions: Mutex<HashMap<TypeId, Arc<dyn Any + Send + Sync>>>,
}

impl AppState {
    /// The state for `catalog`, keeping at most `loaded_runs` runs in memory, with the
    /// on-disk cache (trace-viewer indexes) in `cache_dir`; the runs are discovered
    /// again at most every [`DEFAULT_RESCAN_INTERVAL`] (see
    /// [`AppState::with_rescan_interval`]).
    pub fn new(catalog: Catalog, cache_dir: PathBuf, loaded_runs: usize) -> AppState {
        AppState {
            root: catalog.root().to_path_buf(),
            catalog: Mutex::new(Arc::new(catalog)),
            rescan: Rescan::new(DEFAULT_RESCAN_INTERVAL),
            cache_dir,
            sessions: OnceCache::new(loaded_runs),
            tools: Mutex::new(HashMap::new()),
            results: OnceCache::new(CACHED_RESULTS),
            extensions: Mutex::new(HashMap::new()),
        }
    }

    /// This state with the runs discovered again at most every `interval` (zero: on
    /// every `/api/runs`).
    pub fn with_rescan_interval(mut self, interval: Duration) -> AppState {
        self.rescan = Rescan::new(interval);
        self
    }

    /// The runs the server serves now.
    pub fn catalog(&self) -> Arc<Catalog> {
        Arc::clone(&self.catalog.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// The path the server was given, as given.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Discovers the runs again when the last discovery is older than the rescan
    /// interval, on a blocking thread; waits for it (or for one already running) at
    /// most [`Rescan::WAIT`], after which it goes on in the background.
    pub async fn rediscover_if_due(self: &Arc<Self>) {
        let finished = match self.rescan.begin() {
            Due::No => return,
            Due::Running(finished) => finished,
            Due::Start(finished) => {
                let state = Arc::clone(self);
                tokio::spawn(async move {
                    let _ending = EndOnDrop(&state.rescan);
                    let root = state.root.clone();
                    if let Ok(catalog) = tokio::task::spawn_blocking(move || Catalog::rediscover(&root)).await {
                        state.replace_catalog(catalog);
                    }
                });
                finished
            }
        };
        finished.wait().await;
    }

    /// Serves `catalog` from now on, forgetting what was loaded or computed for the
    /// runs it no longer has or has with other files.
    fn replace_catalog(&self, catalog: Catalog) {
        let forgotten = {
            let mut current = self.catalog.lock().unwrap_or_else(PoisonError::into_inner);
            let forgotten = current.gone_or_changed(&catalog);
            *current = Arc::new(catalog);
            forgotten
        };
        if forgotten.is_empty() {
            return;
        }
        let mut tools = self.tools.lock().unwrap_or_else(PoisonError::into_inner);
        for run in &forgotten {
            self.sessions.invalidate(run);
            tools.remove(run);
            self.results.invalidate_where(|key| crate::tool_request::is_key_of_run(key, run));
            crate::trace::forget_run_indexes(self, run);
        }
    }

    /// The directory for on-disk caches; it may not exist yet (create it on first write).
    pub fn cache_dir(&self) -> &Path {
        &self.cache_dir
    }

    /// The run called `name` (404 naming the known runs otherwise).
    pub fn run(&self, name: &str) -> Result<Arc<Run>, ApiError> {
        let catalog = self.catalog();
        catalog.run(name).cloned().ok_or_else(|| {
            let known: Vec<&str> = catalog.runs().iter().map(|r| r.name.as_str()).collect();
            ApiError::not_found(format!("no run named {name:?}; runs: {}", known.join(", ")))
        })
    }

    /// The file of host `host` of run `run` (404 otherwise): what the trace viewer's
    /// disk cache is keyed by.
    pub fn host_file(&self, run: &str, host: &str) -> Result<HostFile, ApiError> {
        let entry = self.run(run)?;
        entry.files.hosts.iter().find(|file| file.host_name == host).cloned().ok_or_else(|| {
            let known: Vec<&str> = entry.host_names().collect();
            ApiError::not_found(format!("no host named {host:?} in run {run}; hosts: {}", known.join(", ")))
        })
    }

    /// The loaded session of run `run`, read on a blocking thread the first time it is
    /// asked for (one of the [`crate::blocking::heavy`] jobs); concurrent requests share
    /// one load, which runs to its end even if every request waiting for it goes away.
    /// 404 for an unknown run, 500 (the file and position) for a profile that fails to
    /// load.
    pub async fn session(self: &Arc<Self>, run: &str) -> Result<Arc<Session>, ApiError> {
        let entry = self.run(run)?;
        let state = Arc::clone(self);
        let name = entry.name.clone();
        let files = entry.files.clone();
        let root = self.catalog().canonical_root().to_path_buf();
        self.sessions
            .get_or_compute(&entry.name, move || async move {
                let shown = format!("{}: reading the profile", files.path.display());
                let (session, tools) = heavy(shown, move || {
                    load_session_within(&files, Some(&root)).map(|session| {
                        let tools = tools_with_data(&session);
                        (Arc::new(session), tools)
                    })
                })
                .await?
                .map_err(|error| ApiError::internal(error.to_string()))?;
                state.tools.lock().unwrap_or_else(PoisonError::into_inner).insert(name, tools);
                Ok(session)
            })
            .await
    }

    /// The tools with data of run `run`, when it has been read since the start.
    pub fn known_tools(&self, run: &str) -> Option<Vec<&'static str>> {
        self.tools.lock().unwrap_or_else(PoisonError::into_inner).get(run).cloned()
    }

    /// The one shared `T` of this server, created with `T::default()` on first use: the
    /// place for a module's own state (e.g. the trace viewer's loaded indexes) without
    /// a field here.
    pub fn extension<T: Default + Send + Sync + 'static>(&self) -> Arc<T> {
        let mut extensions = self.extensions.lock().unwrap_or_else(PoisonError::into_inner);
        let value = extensions.entry(TypeId::of::<T>()).or_insert_with(|| Arc::new(T::default()));
        match Arc::clone(value).downcast::<T>() {
            Ok(typed) => typed,
            // Entries are keyed by their own type id, so this cannot differ; a fresh
            // value keeps the server going if it ever did.
            Err(_) => {
                let fresh = Arc::new(T::default());
                *value = fresh.clone();
                fresh
            }
        }
    }

    /// The cached tool results, keyed by [`crate::tool_request::ToolRequest::cache_key`].
    pub(crate) fn results(&self) -> &OnceCache<Arc<ToolOutput>> {
        &self.results
    }

    /// The names of the runs in memory (or being read), least recently used first.
    pub fn loaded_runs(&self) -> Vec<String> {
        self.sessions.keys()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn each_extension_type_has_one_shared_value() {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/xspace/jax_profile/logdir");
        let catalog = Catalog::discover(&root).expect("fixture");
        let state = AppState::new(catalog, std::env::temp_dir(), 1);
        state.extension::<AtomicUsize>().fetch_add(2, Ordering::SeqCst);
        assert_eq!(state.extension::<AtomicUsize>().load(Ordering::SeqCst), 2);
        assert!(state.extension::<Mutex<Vec<u8>>>().lock().expect("unpoisoned").is_empty());
    }
}
