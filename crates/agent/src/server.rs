//! The agent's HTTP endpoints: `/` (the live page), `/api/jobs` (every job, JSON, as
//! `mlprof top` reads it; `/api/jobs/stream` sends it every second as server-sent events),
//! `/metrics` (Prometheus) and `POST /api/jobs/PID/capture?duration_ms=2000` (a full
//! profile of one job: what `mlprof attach` records, saved as a normal session under
//! the agent's data directory; several jobs may be captured at once, up to
//! [`MAX_CAPTURES`]). The view is refreshed every [`TICK`] on a blocking thread (reading
//! `/proc` blocks) and requests read the last one, so a request costs a copy, never a
//! scan. `POST /api/register` is where `mlprof run --agent` registers its job every
//! second ([`crate::registry`]); captures and probes of such a job go through its run.
//! With a profiler port, `node_profiler` serves `tensorflow.ProfilerService` beside them.
//!
//! Exposure: a loopback address needs nothing; any other address needs a token, made
//! at start and required on every request (`Authorization: Bearer TOKEN`), compared in
//! constant time.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Path as UrlPath, Query, RawQuery, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};
use tokio_stream::StreamExt;

use crate::history::{History, Retain};
use crate::jobs::{JobView, Jobs, WatchOptions};
use crate::probe::{self, ProbeView};
use crate::registry::Registry;

mod node_profiler;
mod recording;
mod turns;

use recording::{Recording, record_job};
use turns::{Purpose, Turns};

/// How often the node is looked at.
pub const TICK: Duration = Duration::from_secs(1);
/// Captures running at once, at most.
pub const MAX_CAPTURES: usize = 8;
/// The longest capture asked for.
pub const MAX_CAPTURE: Duration = Duration::from_secs(600);
/// How long the agent, stopping, waits for the profiler service's calls in flight.
const PROFILER_DRAIN: Duration = Duration::from_secs(5);
/// How much longer than its duration a capture may take, its wait for the job's turn
/// included: a PyTorch job's Kineto trace starts at its next poll and is written after,
/// which in a busy job took minutes (a run waits as long for one).
pub const CAPTURE_GRACE: Duration = Duration::from_secs(120);
/// As [`CAPTURE_GRACE`], for a probe: probes run one after another, and one that takes
/// long is worth less than the next job's.
const PROBE_GRACE: Duration = Duration::from_secs(60);
/// The least time between two captures of one job that its slowdowns start.
pub const SLOWDOWN_COOLDOWN: Duration = Duration::from_secs(600);
/// Python stack samples per second during a capture (`mlprof attach`'s default).
const CAPTURE_HZ: u32 = 100;
/// The agent's default address: loopback, a port of its own.
pub const DEFAULT_LISTEN: &str = mlprof_run::agent_link::DEFAULT_AGENT;

/// What `/api/jobs` answers.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Snapshot {
    /// The agent's pid.
    pub agent_pid: u32,
    /// Seconds the agent has run.
    pub uptime_s: f64,
    /// CPU time the agent has used, seconds (user plus system).
    pub agent_cpu_s: f64,
    /// Why there are no GPU counters, when there are none (no NVIDIA driver).
    #[serde(default)]
    pub gpu_note: Option<String>,
    /// Where every mlprof tool serves the agent's captures (`mlprof serve` of its data
    /// directory, on loopback), when it does.
    #[serde(default)]
    pub tools_url: Option<String>,
    /// Where captures are uploaded and how that went, with `--upload`.
    #[serde(default)]
    pub uploads: Option<crate::upload::UploadView>,
    /// Every job, the most CPU first.
    pub jobs: Vec<JobView>,
}

/// What a capture answers.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct CaptureOutcome {
    /// The job.
    pub pid: u32,
    /// The session directory written, when anything was recorded.
    pub session: Option<PathBuf>,
    /// What the capture said, a line each (as `mlprof attach` says it).
    pub lines: Vec<String>,
    /// The session in every mlprof tool (the agent's tools page), when it serves them.
    #[serde(default)]
    pub tools_link: Option<String>,
}

/// Where and how the agent keeps what it captures.
#[derive(Clone, Debug)]
pub struct AgentConfig {
    /// What is watched.
    pub watch: WatchOptions,
    /// How often each traceable job is probed for its steps (`None`: never); probes go
    /// to `<data_dir>/probes/`.
    pub probe_every: Option<Duration>,
    /// Capture a job (2 s, as `mlprof agent capture`) when its probed step time is this
    /// many percent above the median of its earlier probes (`None`: never); at most
    /// once per [`SLOWDOWN_COOLDOWN`] per job.
    pub capture_on_slowdown: Option<f64>,
    /// Captures go to `<data_dir>/<job>-<pid>/plugins/profile/<session>/`, each job's
    /// folder a TensorBoard log directory.
    pub data_dir: PathBuf,
    /// What of the data directory is kept (history and captures).
    pub retain: Retain,
    /// This machine's name, for file names.
    pub host: String,
    /// Where captures are also uploaded (`--upload`), in TensorBoard's layout.
    pub upload: Option<mlprof_objects::Store>,
}

/// What the agent keeps of a job's probes.
struct ProbeState {
    /// When the last probe ended.
    at: Instant,
    /// What it found, or why it found nothing.
    last: Result<ProbeView, String>,
    /// The mean step times of the last probes that found steps, oldest first, ms.
    history: Vec<f64>,
    /// The last capture a slowdown started, and when.
    slowdown_capture: Option<(Instant, PathBuf)>,
}

/// Every job's probes, by pid.
type Probes = Arc<Mutex<HashMap<u32, ProbeState>>>;

#[derive(Clone)]
struct Shared {
    snapshot: Arc<Mutex<Snapshot>>,
    probes: Probes,
    /// Held while a Kineto endpoint is bound (a probe, a capture): the node-wide
    /// `@dynolog` can be bound once at a time.
    kineto: Arc<tokio::sync::Mutex<()>>,
    token: Option<Arc<str>>,
    data_dir: Arc<Path>,
    host: Arc<str>,
    captures: Arc<tokio::sync::Semaphore>,
    /// Jobs started by `mlprof run --agent`.
    registry: Arc<Mutex<Registry>>,
    /// Whose turn it is to record each job.
    turns: Turns,
    /// Only jobs of this user are watched and may register.
    only_uid: Option<u32>,
    /// Captures saved, by job.
    captured: Arc<Mutex<HashMap<u32, u64>>>,
    /// The tools on the data directory, once started (at start where it holds a
    /// profile, else at the first capture); `None` inside for a non-loopback agent.
    tools: Option<Arc<tokio::sync::Mutex<Option<mlprof_web::RunningServer>>>>,
    /// Their address, once started.
    tools_url: Arc<Mutex<Option<String>>>,
    /// Where saved captures are uploaded, with `--upload`.
    uploads: Option<crate::upload::Uploads>,
}

/// Why the agent could not start.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The address cannot be bound.
    #[error("cannot listen on {address}: {error}")]
    Bind {
        /// The address.
        address: SocketAddr,
        /// Why.
        error: std::io::Error,
    },
    /// No token could be made for a non-loopback address.
    #[error("cannot make an access token (/dev/urandom): {0}")]
    Token(std::io::Error),
}

/// A bound agent, not yet serving.
pub struct Agent {
    listener: tokio::net::TcpListener,
    token: Option<Arc<str>>,
    /// The node's `tensorflow.ProfilerService`, when asked for, and the token its calls
    /// must carry (a non-loopback port).
    profiler: Option<(tokio::net::TcpListener, Option<Arc<str>>)>,
}

impl Agent {
    /// Binds `address`; a non-loopback one gets a token.
    pub async fn bind(address: SocketAddr) -> Result<Agent, AgentError> {
        let token =
            if address.ip().is_loopback() { None } else { Some(new_token().map_err(AgentError::Token)?.into()) };
        let listener =
            tokio::net::TcpListener::bind(address).await.map_err(|error| AgentError::Bind { address, error })?;
        Ok(Agent { listener, token, profiler: None })
    }

    /// Also serves `tensorflow.ProfilerService` on `address`: a `Profile` call records
    /// every job the agent sees. A non-loopback address needs the agent's token (made
    /// now if the agent has none). Returns the address bound.
    pub async fn serve_profiler(&mut self, address: SocketAddr) -> Result<SocketAddr, AgentError> {
        let listener =
            tokio::net::TcpListener::bind(address).await.map_err(|error| AgentError::Bind { address, error })?;
        let bound = listener.local_addr().map_err(|error| AgentError::Bind { address, error })?;
        let token = match (node_profiler::open_without_token(bound), &self.token) {
            (true, _) => None,
            (false, Some(token)) => Some(Arc::clone(token)),
            (false, None) => Some(Arc::from(new_token().map_err(AgentError::Token)?)),
        };
        self.profiler = Some((listener, token));
        Ok(bound)
    }

    /// The address bound (the port chosen for port 0).
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// The token requests must carry, for a non-loopback address (the agent's or its
    /// profiler port's).
    pub fn token(&self) -> Option<&str> {
        self.token.as_deref().or_else(|| self.profiler.as_ref().and_then(|(_, token)| token.as_deref()))
    }

    /// Watches the node and serves until `stop` completes.
    pub async fn run(self, config: AgentConfig, stop: impl std::future::Future<Output = ()> + Send + 'static) {
        let mut shared = Shared {
            snapshot: Arc::default(),
            probes: Arc::default(),
            kineto: Arc::default(),
            token: self.token,
            data_dir: config.data_dir.into(),
            host: config.host.into(),
            captures: Arc::new(tokio::sync::Semaphore::new(MAX_CAPTURES)),
            registry: Arc::default(),
            turns: Turns::default(),
            captured: Arc::default(),
            tools: None,
            tools_url: Arc::default(),
            only_uid: config.watch.only_uid,
            uploads: None,
        };
        if let Some(store) = config.upload {
            shared.uploads = Some(crate::upload::Uploads::start(store, shared.data_dir.to_path_buf()));
        }
        // Every tool on the captures, on loopback beside a loopback agent (a remote one's
        // users open captures with their own `mlprof serve`).
        if self.listener.local_addr().is_ok_and(|a| a.ip().is_loopback()) {
            shared.tools = Some(Arc::default());
            tools_url(&shared).await;
        }
        let history = match History::open(&shared.data_dir, config.retain) {
            Ok(history) => Some(history),
            Err(error) => {
                eprintln!(
                    "mlprof agent: no history: cannot write in {}: {error}",
                    shared.data_dir.join(crate::history::FOLDER).display()
                );
                None
            }
        };
        let watcher = tokio::spawn(watch(config.watch, history, shared.clone()));
        let slowdown = config.capture_on_slowdown;
        let prober = config.probe_every.map(|every| tokio::spawn(probe_jobs(shared.clone(), every, slowdown)));
        let router = axum::Router::new()
            .route("/", get(live_page))
            .route("/static/{*path}", get(mlprof_web::static_file))
            .route("/api/jobs", get(jobs))
            .route("/api/jobs/stream", get(stream))
            .route("/api/history", get(history_points))
            .route("/api/jobs/{pid}/capture", post(capture))
            .route(mlprof_run::agent_link::REGISTER_PATH, post(register))
            .route("/metrics", get(metrics))
            .with_state(shared.clone());
        let (stopping, stopped) = tokio::sync::watch::channel(false);
        tokio::spawn(async move {
            stop.await;
            let _ = stopping.send(true);
        });
        let wait = |mut stopped: tokio::sync::watch::Receiver<bool>| async move {
            // An error means the sender is gone, which also asks to stop.
            let _ = stopped.wait_for(|&s| s).await;
        };
        let profiler = self.profiler.map(|(listener, token)| {
            let shared = Shared { token, ..shared };
            tokio::spawn(node_profiler::serve(listener, shared, wait(stopped.clone())))
        });
        let _ = axum::serve(self.listener, router).with_graceful_shutdown(wait(stopped)).await;
        if let Some(profiler) = profiler {
            // Its calls in flight end with the recordings they wait for; not past this.
            let _ = tokio::time::timeout(PROFILER_DRAIN, profiler).await;
        }
        watcher.abort();
        if let Some(prober) = prober {
            prober.abort();
        }
    }
}

/// Probes every traceable job when its probe is due, one at a time, and captures a job
/// whose step time rose by more than `slowdown` percent.
async fn probe_jobs(shared: Shared, every: Duration, slowdown: Option<f64>) {
    let dir = shared.data_dir.join("probes");
    let mut ticker = tokio::time::interval(TICK);
    loop {
        ticker.tick().await;
        let jobs = shared.snapshot.lock().unwrap_or_else(std::sync::PoisonError::into_inner).jobs.clone();
        let due: Vec<JobView> = {
            let mut probes = shared.probes.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            probes.retain(|pid, _| jobs.iter().any(|job| job.pid == *pid));
            jobs.into_iter()
                .filter(|job| probe::probeable(job) && job.seen_for_s >= probe::FIRST_AFTER.as_secs_f64())
                .filter(|job| probes.get(&job.pid).is_none_or(|state| state.at.elapsed() >= every))
                .collect()
        };
        for job in due {
            let steps = {
                let probes = shared.probes.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                probe::kineto_steps_after(probes.get(&job.pid).and_then(|state| state.last.as_ref().ok()))
            };
            let found = match probe::harms(&job) {
                Some(why) => Err(why),
                None => match recording::probe_job(&shared, &job, &dir, steps).await {
                    Some(found) => found,
                    None => continue,
                },
            };
            let slowed = {
                let mut probes = shared.probes.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                let state = probes.entry(job.pid).or_insert_with(|| ProbeState {
                    at: Instant::now(),
                    last: Err(String::new()),
                    history: Vec::new(),
                    slowdown_capture: None,
                });
                if let Ok(found) = &found
                    && found.steps > 0
                {
                    state.history.push(found.step_time_ms);
                    if state.history.len() > probe::HISTORY {
                        state.history.remove(0);
                    }
                }
                state.at = Instant::now();
                state.last = found;
                let cooled = state.slowdown_capture.as_ref().is_none_or(|(at, _)| at.elapsed() >= SLOWDOWN_COOLDOWN);
                let trend = probe::trend_percent(&state.history);
                slowdown.zip(trend).filter(|(limit, trend)| trend > limit && cooled).map(|(_, trend)| trend)
            };
            if let Some(trend) = slowed {
                capture_slowdown(&shared, &job, trend).await;
            }
        }
    }
}

/// Where every mlprof tool serves the data directory (`mlprof serve DIR`, on a loopback
/// port of its own), started now if it is not yet: `None` for a non-loopback agent, or
/// while the directory holds no profile (the server needs one).
async fn tools_url(shared: &Shared) -> Option<String> {
    let mut tools = shared.tools.as_ref()?.lock().await;
    if tools.is_none() {
        let cache = mlprof_web::default_cache_dir();
        let server = mlprof_web::spawn_local(&shared.data_dir, &cache).await.ok()?;
        let url = server.url().trim_end_matches('/').to_string();
        *shared.tools_url.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(url);
        *tools = Some(server);
    }
    tools.as_ref().map(|server| server.url().trim_end_matches('/').to_string())
}

/// The tools' page of `session` (under the data directory): `TOOLS/?run=<job>/<session>`.
async fn tools_link(shared: &Shared, session: Option<&Path>) -> Option<String> {
    let session = session?;
    let base = tools_url(shared).await?;
    let relative = session.strip_prefix(&*shared.data_dir).ok()?;
    let parts: Vec<String> = relative.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    let [job, plugins, profile, session] = parts.as_slice() else { return None };
    if plugins != "plugins" || profile != "profile" {
        return None;
    }
    let run: String = format!("{job}/{session}")
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'/' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect();
    Some(format!("{base}/?run={run}"))
}

/// Counts a capture that saved a session, and queues its upload (saying so in its lines).
fn saved(shared: &Shared, outcome: &mut CaptureOutcome) {
    let Some(session) = &outcome.session else { return };
    *shared.captured.lock().unwrap_or_else(std::sync::PoisonError::into_inner).entry(outcome.pid).or_default() += 1;
    if let Some(uploads) = &shared.uploads {
        let line = uploads.enqueue(session);
        outcome.lines.push(line);
    }
}

/// Captures `job`, which got `trend` percent slower, and says so on stderr.
async fn capture_slowdown(shared: &Shared, job: &JobView, trend: f64) {
    let Ok(_permit) = shared.captures.clone().try_acquire_owned() else { return };
    let logdir = shared.data_dir.join(job.folder());
    let kineto = job.kineto_endpoint.is_some();
    let recording = Recording {
        pid: job.pid,
        logdir: &logdir,
        kineto,
        duration: Duration::from_secs(2),
        kineto_steps: None,
        purpose: Purpose::Capture,
    };
    let mut recorded = record_job(shared, recording).await;
    if let Ok(outcome) = &mut recorded {
        saved(shared, outcome);
    }
    let session = recorded.ok().and_then(|outcome| outcome.session);
    let what =
        session.as_ref().map_or_else(|| "nothing was recorded".to_string(), |s| format!("captured {}", s.display()));
    eprintln!(
        "mlprof agent: pid {} ({}): step time {trend:+.0}% against its earlier probes: {what}",
        job.pid, job.name
    );
    if let Some(session) = session {
        let mut probes = shared.probes.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(state) = probes.get_mut(&job.pid) {
            state.slowdown_capture = Some((Instant::now(), session));
        }
    }
}

/// Refreshes the snapshot every [`TICK`], with each job's last probe and its run, and
/// appends it to the history.
async fn watch(options: WatchOptions, mut history: Option<History>, shared: Shared) {
    let started = Instant::now();
    let mut jobs = Some(Jobs::new(options));
    let mut ticker = tokio::time::interval(TICK);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        ticker.tick().await;
        let Some(mut watched) = jobs.take() else { return };
        let (probes, registry, captured) = (shared.probes.clone(), shared.registry.clone(), shared.captured.clone());
        let tools_url = shared.tools_url.clone();
        let uploads = shared.uploads.as_ref().map(crate::upload::Uploads::view);
        let mut writing = history.take();
        let Ok((watched, writing, next)) = tokio::task::spawn_blocking(move || {
            watched.tick(Instant::now());
            let next = Snapshot {
                agent_pid: std::process::id(),
                uptime_s: started.elapsed().as_secs_f64(),
                agent_cpu_s: mlprof_run::own_use::OwnUse::now(started).map_or(0.0, |own| own.cpu_s),
                gpu_note: watched.gpu_note(),
                tools_url: tools_url.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone(),
                uploads,
                jobs: with_counts(with_runs(with_probes(watched.views(), &probes), &registry), &captured),
            };
            if let Some(Err(error)) = writing.as_mut().map(|h| h.record(std::time::SystemTime::now(), &next.jobs)) {
                eprintln!("mlprof agent: the history stops: {error}");
                writing = None;
            }
            (watched, writing, next)
        })
        .await
        else {
            return;
        };
        *shared.snapshot.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = next;
        jobs = Some(watched);
        history = writing;
    }
}

/// The longest history asked for.
const MAX_HISTORY: Duration = Duration::from_secs(31 * 86_400);

/// `GET /api/history?seconds=3600[&pid=N]`: every job's points over the last `seconds`
/// (default an hour), by pid, each job's thinned to `history::MAX_POINTS`.
async fn history_points(
    State(shared): State<Shared>,
    headers: HeaderMap,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let token = query.get("token").map(|t| format!("token={t}"));
    if !authorized(&shared, &headers, token.as_deref()) {
        return refused();
    }
    let seconds = match query.get("seconds").map(|s| s.parse::<u64>()) {
        None => 3600,
        Some(Ok(s)) if s > 0 && s <= MAX_HISTORY.as_secs() => s,
        Some(_) => {
            let why = format!("seconds: a whole number from 1 to {}\n", MAX_HISTORY.as_secs());
            return (StatusCode::BAD_REQUEST, why).into_response();
        }
    };
    let pid = match query.get("pid").map(|p| p.parse::<u32>()) {
        None => None,
        Some(Ok(pid)) => Some(pid),
        Some(Err(_)) => return (StatusCode::BAD_REQUEST, "pid: a process id\n").into_response(),
    };
    let data_dir = shared.data_dir.clone();
    let since = crate::history::unix_seconds(std::time::SystemTime::now()) - seconds as f64;
    match tokio::task::spawn_blocking(move || crate::history::read(&data_dir, since, pid)).await {
        Ok(points) => axum::Json(serde_json::json!({ "jobs": points })).into_response(),
        Err(_) => (StatusCode::INTERNAL_SERVER_ERROR, "reading the history failed\n").into_response(),
    }
}

/// `views` with each job's last probe.
fn with_probes(mut views: Vec<JobView>, probes: &Probes) -> Vec<JobView> {
    let probes = probes.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    for view in &mut views {
        let Some(state) = probes.get(&view.pid) else { continue };
        match &state.last {
            Ok(found) => view.probe = Some(found.clone()),
            Err(why) => view.probe_note = Some(why.clone()).filter(|why| !why.is_empty()),
        }
        view.step_history_ms = state.history.clone();
        view.step_trend_percent = probe::trend_percent(&state.history);
        view.slowdown_capture = state.slowdown_capture.as_ref().map(|(_, session)| session.clone());
    }
    views
}

/// `views` with how many captures of each were saved; the counts of jobs gone are
/// dropped.
fn with_counts(mut views: Vec<JobView>, captured: &Mutex<HashMap<u32, u64>>) -> Vec<JobView> {
    let mut captured = captured.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    captured.retain(|pid, _| views.iter().any(|v| v.pid == *pid));
    for view in &mut views {
        view.captures = captured.get(&view.pid).copied().unwrap_or(0);
    }
    views
}

/// `views` with the run each was started by, where one registered it; runs that went
/// silent are forgotten first.
fn with_runs(mut views: Vec<JobView>, registry: &Mutex<Registry>) -> Vec<JobView> {
    let mut registry = registry.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    registry.expire(Instant::now());
    for view in &mut views {
        view.run = registry.registered_as(view.pid).and_then(|pid| registry.view(pid));
    }
    views
}

/// The live page: every job, updated each second from [`stream`], with a capture
/// button per job. It loads nothing from anywhere else: its one script import, the UI's
/// number formatting, comes from this server's `/static/` (the UI's own files).
async fn live_page() -> Response {
    let html = include_str!("live.html");
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8"), (header::CACHE_CONTROL, "no-store")], html).into_response()
}

/// The snapshot every [`TICK`] as server-sent events (`data: {…}`), for the live page.
async fn stream(State(shared): State<Shared>, headers: HeaderMap, RawQuery(query): RawQuery) -> Response {
    if !authorized(&shared, &headers, query.as_deref()) {
        return refused();
    }
    let mut ticker = tokio::time::interval(TICK);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let events = tokio_stream::wrappers::IntervalStream::new(ticker).map(move |_| {
        let snapshot = shared.snapshot.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        Event::default().json_data(&snapshot)
    });
    Sse::new(events).keep_alive(KeepAlive::default()).into_response()
}

async fn jobs(State(shared): State<Shared>, headers: HeaderMap, RawQuery(query): RawQuery) -> Response {
    if !authorized(&shared, &headers, query.as_deref()) {
        return refused();
    }
    let snapshot = shared.snapshot.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
    axum::Json(snapshot).into_response()
}

async fn metrics(State(shared): State<Shared>, headers: HeaderMap, RawQuery(query): RawQuery) -> Response {
    if !authorized(&shared, &headers, query.as_deref()) {
        return refused();
    }
    let snapshot = shared.snapshot.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
    let text = crate::metrics::render(&snapshot.jobs, snapshot.agent_cpu_s, snapshot.uploads.as_ref());
    ([(header::CONTENT_TYPE, crate::metrics::CONTENT_TYPE)], text).into_response()
}

/// Records one job for `?duration_ms=` (default 2 s) as `mlprof attach` would, into its
/// folder of the data directory.
async fn capture(
    State(shared): State<Shared>,
    headers: HeaderMap,
    UrlPath(pid): UrlPath<u32>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let token = query.get("token").map(|t| format!("token={t}"));
    if !authorized(&shared, &headers, token.as_deref()) {
        return refused();
    }
    let duration = match query.get("duration_ms").map(|ms| ms.parse::<u64>().map(Duration::from_millis)) {
        None => Duration::from_secs(2),
        Some(Ok(d)) if !d.is_zero() && d <= MAX_CAPTURE => d,
        Some(_) => {
            let why = format!("duration_ms: whole milliseconds from 1 to {}\n", MAX_CAPTURE.as_millis());
            return (StatusCode::BAD_REQUEST, why).into_response();
        }
    };
    let job = {
        let snapshot = shared.snapshot.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        snapshot.jobs.iter().find(|job| job.pid == pid).map(|job| (job.folder(), job.kineto_endpoint.is_some()))
    };
    let Some((folder, kineto)) = job else {
        return (StatusCode::NOT_FOUND, format!("no job with pid {pid} (see /api/jobs)\n")).into_response();
    };
    let Ok(_permit) = shared.captures.clone().try_acquire_owned() else {
        let why = format!("{MAX_CAPTURES} captures are running: try again when one ends\n");
        return (StatusCode::TOO_MANY_REQUESTS, why).into_response();
    };
    let logdir = shared.data_dir.join(folder);
    let recording = Recording { pid, logdir: &logdir, kineto, duration, kineto_steps: None, purpose: Purpose::Capture };
    match record_job(&shared, recording).await {
        Ok(mut outcome) => {
            saved(&shared, &mut outcome);
            outcome.tools_link = tools_link(&shared, outcome.session.as_deref()).await;
            axum::Json(outcome).into_response()
        }
        Err(outcome) => (StatusCode::CONFLICT, axum::Json(outcome)).into_response(),
    }
}

/// Records every job the agent sees at once for `duration`, each into its folder of the
/// data directory as `mlprof agent capture` would: each job's folder and what was
/// recorded, by folder. Jobs past the free capture places are left out, and say so; of
/// the jobs whose Kineto polls the node's endpoint (bound by one recording at a time),
/// only the first gets its Kineto trace, so that every recording runs at once. Each
/// recording runs on its own task: one the caller stops waiting for still completes and
/// is kept.
async fn capture_every_job(
    shared: &Shared,
    duration: Duration,
) -> Vec<(String, Result<CaptureOutcome, CaptureOutcome>)> {
    let jobs: Vec<(u32, String, bool)> = {
        let snapshot = shared.snapshot.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        snapshot.jobs.iter().map(|job| (job.pid, job.folder(), job.kineto_endpoint.is_some())).collect()
    };
    let mut outcomes = Vec::new();
    let mut running = Vec::new();
    let mut kineto_taken = false;
    for (pid, folder, kineto) in jobs {
        let Ok(permit) = shared.captures.clone().try_acquire_owned() else {
            let why = format!("left out: {MAX_CAPTURES} captures were running");
            outcomes.push((folder, Err(CaptureOutcome { pid, lines: vec![why], ..Default::default() })));
            continue;
        };
        let registered =
            shared.registry.lock().unwrap_or_else(std::sync::PoisonError::into_inner).registered_as(pid).is_some();
        let kineto = kineto && !registered && !std::mem::replace(&mut kineto_taken, true);
        let shared = shared.clone();
        let task = tokio::spawn(async move {
            let _permit = permit;
            let logdir = shared.data_dir.join(&folder);
            let recording =
                Recording { pid, logdir: &logdir, kineto, duration, kineto_steps: None, purpose: Purpose::Capture };
            let mut recorded = record_job(&shared, recording).await;
            if let Ok(outcome) = &mut recorded {
                saved(&shared, outcome);
            }
            (folder, recorded)
        });
        running.push((pid, task));
    }
    for (pid, task) in running {
        match task.await {
            Ok(done) => outcomes.push(done),
            Err(error) => eprintln!("mlprof agent: the recording of pid {pid} failed: {error}"),
        }
    }
    outcomes.sort_by(|a, b| a.0.cmp(&b.0));
    outcomes
}

/// Takes a heartbeat of `mlprof run --agent` (see [`crate::registry`]).
async fn register(
    State(shared): State<Shared>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
    body: axum::body::Bytes,
) -> Response {
    if !authorized(&shared, &headers, query.as_deref()) {
        return refused();
    }
    let registration: mlprof_run::agent_link::Registration = match serde_json::from_slice(&body) {
        Ok(registration) => registration,
        Err(error) => return (StatusCode::BAD_REQUEST, format!("not a registration: {error}\n")).into_response(),
    };
    let mut registry = shared.registry.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    // A run whose job has ended only says goodbye (its process may be gone already).
    let checked = if registration.ended { Ok(()) } else { registry.check(&registration, shared.only_uid) };
    if let Err(why) = checked {
        return (StatusCode::FORBIDDEN, format!("{why}\n")).into_response();
    }
    axum::Json(registry.register(registration, Instant::now())).into_response()
}

/// Whether a request may be answered: it carries the token, where one is needed, in
/// `Authorization: Bearer TOKEN` or as `?token=TOKEN` (a browser's event stream cannot
/// set headers).
fn authorized(shared: &Shared, headers: &HeaderMap, query: Option<&str>) -> bool {
    let Some(token) = &shared.token else { return true };
    let in_header =
        headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "));
    let in_query = query.and_then(|q| q.split('&').find_map(|pair| pair.strip_prefix("token=")));
    let given = in_header.or(in_query).unwrap_or("");
    constant_time_eq(given.as_bytes(), token.as_bytes())
}

/// The answer to a request without the token.
fn refused() -> Response {
    (StatusCode::UNAUTHORIZED, "mlprof agent: a token is needed (Authorization: Bearer TOKEN)\n").into_response()
}

/// Whether `a` equals `b`, taking the same time whatever their contents (their lengths
/// are not secret).
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

/// 128 random bits, hex.
fn new_token() -> std::io::Result<String> {
    use std::io::Read;
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_whole() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
        let token = new_token().unwrap();
        assert_eq!(token.len(), 32);
        assert_ne!(token, new_token().unwrap());
    }
}
