//! What every request handler shares: the catalog of runs, the loaded sessions, the
//! cached tool results and trace indexes, and the cache directory.
//!
//! The one design decision to know: handlers get runs and sessions only through
//! [`AppState::run`] and [`AppState::session`], which look names up in the catalog —
//! discovered at start and again by [`AppState::rediscover_if_due`] (see
//! [`crate::rescan`]); nothing here turns a request parameter into a path. Each cache
//! is a field of its own, a [`OnceCache`] with a typed key that names its run
//! ([`RunKey`]): a new catalog replaces the old one whole, and the sessions, tool
//! lists, tool results and trace indexes of runs it no longer has, or has with other
//! files, are forgotten, those of the unchanged runs kept. This module sits below the
//! handlers: it holds what they compute, never calls them.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use mlprof_analysis::counters::CounterSeries;
use mlprof_analysis::python_flame::FlameIndex;
use mlprof_analysis::tool_availability::tools_with_data;
use mlprof_formats::discover::{HostFile, load_session_counting};
use mlprof_formats::progress::LoadProgress;
use mlprof_model::Session;
use mlprof_timeline::TimelineIndex;

use crate::blocking::heavy;
use crate::catalog::{Catalog, Run, RunLookup};
use crate::once_cache::{OnceCache, RunKey};
use crate::placements::Placements;
use crate::rescan::{DEFAULT_RESCAN_INTERVAL, Due, EndOnDrop, Rescan};
use crate::run_work::{RunWork, Work};
use crate::tool_request::ToolRequest;
use crate::tool_result::ToolOutput;

pub use crate::error::ApiError;

/// How many runs stay loaded at once by default.
pub const DEFAULT_LOADED_RUNS: usize = 3;

/// How many tool results stay cached at once.
const CACHED_RESULTS: usize = 32;

/// How many hosts' trace indexes stay open at once (they are memory-mapped, so cheap).
const OPEN_TRACE_INDEXES: usize = 8;

/// How many runs' (or hosts') flame-graph indexes stay in memory at once.
const FLAME_INDEXES: usize = 4;
/// Hosts whose counter series (the trace viewer's counter tracks) are kept.
const COUNTER_SERIES: usize = 8;
/// Runs whose hosts' placements on one time axis are kept (per alignment).
const PLACEMENTS: usize = 8;

/// One host of one run: the key of its trace index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostKey {
    /// The run (a name of the catalog).
    pub run: String,
    /// The host (a host of the run).
    pub host: String,
}

impl HostKey {
    /// The key of `host` of `run`.
    pub fn new(run: &str, host: &str) -> HostKey {
        HostKey { run: run.to_string(), host: host.to_string() }
    }
}

impl RunKey for HostKey {
    fn run(&self) -> &str {
        &self.run
    }
}

/// A tool's result belongs to the run it was asked of.
impl RunKey for ToolRequest {
    fn run(&self) -> &str {
        &self.run
    }
}

/// The state shared by every request.
pub struct AppState {
    /// The path the server was given, as given.
    root: PathBuf,
    /// What the page names as the profiles' place, when not the path.
    shown_as: Option<String>,
    catalog: Mutex<Arc<Catalog>>,
    rescan: Rescan,
    cache_dir: PathBuf,
    /// The loaded sessions, by run name.
    sessions: OnceCache<String, Arc<Session>>,
    /// The tools with data of every run read so far (kept when the session is dropped).
    tools: Mutex<HashMap<String, Vec<&'static str>>>,
    /// The tool results, by the request that asked for them.
    results: OnceCache<ToolRequest, Arc<ToolOutput>>,
    /// The trace viewer's open indexes, by run and host.
    trace_indexes: OnceCache<HostKey, Arc<TimelineIndex>>,
    /// The sampled Python stacks of the flame graph, by the `python` tool request
    /// (run and host) they are of.
    flame_indexes: OnceCache<ToolRequest, Arc<FlameIndex>>,
    /// The trace viewer's counter series, by run and host.
    counter_series: OnceCache<HostKey, Arc<Vec<CounterSeries>>>,
    /// Every host of a run on one time axis, by run and `all` / `all@steps`.
    placements: OnceCache<HostKey, Arc<Placements>>,
    /// What is being read or built for each run, for `/api/progress`.
    work: RunWork,
}

impl AppState {
    /// The state for `catalog`, keeping at most `loaded_runs` runs in memory, with the
    /// on-disk cache (trace-viewer indexes) in `cache_dir`; the runs are discovered
    /// again at most every [`DEFAULT_RESCAN_INTERVAL`] (see
    /// [`AppState::with_rescan_interval`]).
    pub fn new(catalog: Catalog, cache_dir: PathBuf, loaded_runs: usize) -> AppState {
        AppState {
            root: catalog.root().to_path_buf(),
            shown_as: None,
            catalog: Mutex::new(Arc::new(catalog)),
            rescan: Rescan::new(DEFAULT_RESCAN_INTERVAL),
            cache_dir,
            sessions: OnceCache::new(loaded_runs),
            tools: Mutex::new(HashMap::new()),
            results: OnceCache::new(CACHED_RESULTS),
            trace_indexes: OnceCache::new(OPEN_TRACE_INDEXES),
            flame_indexes: OnceCache::new(FLAME_INDEXES),
            counter_series: OnceCache::new(COUNTER_SERIES),
            placements: OnceCache::new(PLACEMENTS),
            work: RunWork::default(),
        }
    }

    /// This state with the runs discovered again at most every `interval` (zero: on
    /// every `/api/runs`).
    pub fn with_rescan_interval(mut self, interval: Duration) -> AppState {
        self.rescan = Rescan::new(interval);
        self
    }

    /// This state with the profiles' place named `shown` on the page (`None`: the path).
    pub fn shown_as(mut self, shown: Option<String>) -> AppState {
        self.shown_as = shown;
        self
    }

    /// What the page names as the profiles' place: the store's URL for a mirror, else
    /// the path the server was given.
    pub fn shown_root(&self) -> String {
        self.shown_as.clone().unwrap_or_else(|| self.root.display().to_string())
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
            self.sessions.forget_run(run);
            tools.remove(run);
            self.results.forget_run(run);
            // Their cache files stay, and are only used again if they still match.
            self.trace_indexes.forget_run(run);
            self.flame_indexes.forget_run(run);
            self.counter_series.forget_run(run);
            self.placements.forget_run(run);
        }
    }

    /// The directory for on-disk caches; it may not exist yet (create it on first write).
    pub fn cache_dir(&self) -> &Path {
        &self.cache_dir
    }

    /// The run called `name` (404 naming the known runs otherwise).
    pub fn run(&self, name: &str) -> Result<Arc<Run>, ApiError> {
        self.catalog().find_run(name)
    }

    /// The file of host `host` of run `run` (404 otherwise): what the trace viewer's
    /// disk cache is keyed by.
    pub fn host_file(&self, run: &str, host: &str) -> Result<HostFile, ApiError> {
        self.catalog().find_host_file(run, host)
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
                let progress = Arc::new(LoadProgress::default());
                let _reading = state.work.begin(&name, Work::Reading(Arc::clone(&progress)));
                let (session, tools) = heavy(shown, move || {
                    load_session_counting(&files, Some(&root), Some(&progress)).map(|session| {
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

    /// What is being read or built for each run ([`RunWork`]).
    pub fn work(&self) -> &RunWork {
        &self.work
    }

    /// The tools with data of run `run`, when it has been read since the start.
    pub fn known_tools(&self, run: &str) -> Option<Vec<&'static str>> {
        self.tools.lock().unwrap_or_else(PoisonError::into_inner).get(run).cloned()
    }

    /// The cached tool results, keyed by the request that asked for them (computed by
    /// [`crate::tool_output`]).
    pub(crate) fn results(&self) -> &OnceCache<ToolRequest, Arc<ToolOutput>> {
        &self.results
    }

    /// The trace viewer's open indexes, keyed by run and host (opened or built by
    /// [`crate::trace`]).
    pub(crate) fn trace_indexes(&self) -> &OnceCache<HostKey, Arc<TimelineIndex>> {
        &self.trace_indexes
    }

    /// The trace viewer's counter series, keyed by run and host (read by
    /// [`crate::trace`]).
    pub(crate) fn counter_series(&self) -> &OnceCache<HostKey, Arc<Vec<CounterSeries>>> {
        &self.counter_series
    }

    /// Every host of a run placed on one time axis, keyed by run and `all` /
    /// `all@steps` (read by [`crate::trace`]).
    pub(crate) fn placements(&self) -> &OnceCache<HostKey, Arc<Placements>> {
        &self.placements
    }

    /// The flame graphs' indexes of sampled Python stacks, keyed by the `python` tool
    /// request of their run and host (built by [`crate::api::python`]).
    pub(crate) fn flame_indexes(&self) -> &OnceCache<ToolRequest, Arc<FlameIndex>> {
        &self.flame_indexes
    }

    /// The names of the runs in memory (or being read), least recently used first.
    pub fn loaded_runs(&self) -> Vec<String> {
        self.sessions.keys()
    }
}

/// Request parsing finds runs and hosts in the catalog served now.
impl RunLookup for AppState {
    fn run(&self, name: &str) -> Result<Arc<Run>, ApiError> {
        AppState::run(self, name)
    }

    fn host_file(&self, run: &str, host: &str) -> Result<HostFile, ApiError> {
        AppState::host_file(self, run, host)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool_request::ToolQuery;
    use mlprof_analysis::report::Report;
    use mlprof_timeline::TimelineBuilder;

    /// A log directory with one session per name, each with host `vm`.
    fn log_dir(sessions: &[&str]) -> tempfile::TempDir {
        let fixture = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/data/xspace/jax_profile/logdir/plugins/profile/2026_11_21_19_24_59/vm.xplane.pb");
        let root = tempfile::tempdir().expect("temp dir");
        for session in sessions {
            add_host(root.path(), session, "vm", &fixture);
        }
        root
    }

    fn add_host(root: &Path, session: &str, host: &str, fixture: &Path) {
        let dir = root.join("plugins/profile").join(session);
        std::fs::create_dir_all(&dir).expect("session dir");
        std::fs::copy(fixture, dir.join(format!("{host}.xplane.pb"))).expect("copied");
    }

    #[tokio::test]
    async fn a_changed_run_is_forgotten_by_every_cache_and_the_others_kept() {
        let (changed, kept) = ("2026_01_01_00_00_00", "2026_02_02_00_00_00");
        let root = log_dir(&[changed, kept]);
        let state = AppState::new(Catalog::discover(root.path()).expect("runs"), std::env::temp_dir(), 2);
        let output = Arc::new(ToolOutput { hosts: Vec::new(), report: Report::default(), result: Default::default() });
        let index = Arc::new(TimelineBuilder::new().finish().expect("empty").into_index().expect("in memory"));
        for run in [changed, kept] {
            let query = ToolQuery { run: Some(run.into()), tool: Some("overview_page".into()), ..ToolQuery::default() };
            let request = ToolRequest::parse(&query, &state).expect("a served tool");
            let output = Arc::clone(&output);
            state.results().get_or_compute(&request, || async move { Ok(output) }).await.expect("cached");
            let flames = Arc::new(FlameIndex::default());
            state.flame_indexes().get_or_compute(&request, || async move { Ok(flames) }).await.expect("cached");
            let index = Arc::clone(&index);
            let key = HostKey::new(run, "vm");
            state.trace_indexes().get_or_compute(&key, || async move { Ok(index) }).await.expect("cached");
        }

        let fixture = root.path().join("plugins/profile").join(changed).join("vm.xplane.pb");
        add_host(root.path(), changed, "vm2", &fixture);
        state.replace_catalog(Catalog::rediscover(root.path()));
        let result_runs: Vec<String> = state.results().keys().into_iter().map(|key| key.run).collect();
        assert_eq!(result_runs, [kept]);
        let flame_runs: Vec<String> = state.flame_indexes().keys().into_iter().map(|key| key.run).collect();
        assert_eq!(flame_runs, [kept]);
        assert_eq!(state.trace_indexes().keys(), [HostKey::new(kept, "vm")]);
    }
}
