//! One `mlprof run`: prepare the private run directory, launch the job, then until it
//! exits answer Kineto's polls, capture a framework profiler server the hook started,
//! record the GPU activity of CUDA processes through `mlprof-inject`, sample the Python
//! stacks and `/proc` counters of the job's processes, and move every trace into
//! `LOGDIR/plugins/profile/<session>/`. With `--agent`, it also registers with the
//! node's agent ([`crate::agent_link`]) and records a round whenever the agent asks,
//! into the log directory the agent names.
//!
//! The job comes first: nothing here can stop or slow it. If a part of mlprof cannot be
//! set up (the socket, the hook), the job runs without it and one line says so; mlprof
//! never kills the job, only passes on signals ([`crate::launch`]), and its exit code is
//! the job's. Traces of one round share one session directory, named like TensorFlow's
//! client names sessions, so `mlprof analyze LOGDIR` reads them like any capture.

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use mlprof_capture::address::Target;
use mlprof_capture::client::{CaptureOptions, NoProgress, SessionIds, WorkerOutcome, capture};
use tokio::task::JoinHandle;

use crate::agent_link::{AgentLink, Ask, AskOutcome, Registration};
use crate::cupti_collector::{CuptiListener, CuptiProcesses, Delivery, Window};
use crate::kineto_daemon::{KinetoDaemon, Received, TraceEnding, TraceStarted, kineto_output_path, trace_ending};
use crate::kineto_ipc::{KINETO_START_DELAY, TraceWindow};
use crate::launch::{self, JobCommand};
use crate::python_hook::{Hook, StartedServer};
use crate::sample_windows::{SampleWindow, SampleWindows};
use crate::sampling::{Sampler, SamplerOptions};
use crate::schedule::{Rounds, Schedule, is_asked};
use crate::torch_fallback::TorchFallback;

/// How often files and the hook's reports are looked at.
const TICK: Duration = Duration::from_millis(250);
/// The most processes of one job traced through Kineto.
pub const MAX_TRACED_PROCESSES: usize = 16;
/// How long past its window a Kineto trace may take to appear (Kineto warms up for a few
/// seconds, then writes the JSON).
const KINETO_GRACE: Duration = Duration::from_secs(120);
/// How long a trace of `--steps` may take to appear.
const KINETO_STEPS_DEADLINE: Duration = Duration::from_secs(600);
/// How long a PyTorch process polls, or a profiler server listens, before its first
/// trace is asked for: earlier traces catch the job starting (see [`crate::schedule`];
/// on an H200 a JAX job captured 3 s after launch was still compiling).
const SETTLE: Duration = Duration::from_secs(5);
/// How often the profiler server is asked for a round the agent asked for, at most (a
/// server ends its last session a moment after answering it).
const ASKED_SERVER_TRIES: u32 = 3;
/// How long after the job exits mlprof still waits for traces it asked for.
const AFTER_EXIT_WAIT: Duration = Duration::from_secs(2);

/// What to run and what to record.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// The job's program and arguments.
    pub argv: Vec<OsString>,
    /// The TensorBoard log directory the sessions go to.
    pub logdir: PathBuf,
    /// How long each trace records.
    pub duration: Duration,
    /// With PyTorch: trace this many optimizer steps instead of `duration`.
    pub steps: Option<u32>,
    /// From launch to the first trace.
    pub delay: Duration,
    /// Trace again every this long, until the job exits.
    pub every: Option<Duration>,
    /// This machine's name, for file names.
    pub host: String,
    /// Who records the GPU work of framework processes.
    pub device_tracer: DeviceTracer,
    /// Python stack samples per second per thread (0: none; `/proc` counters are
    /// still read).
    pub sample_hz: u32,
    /// Whether native stacks are sampled too.
    pub native_stacks: bool,
    /// The node's agent to register with (`--agent`).
    pub agent: Option<AgentAddress>,
}

/// Where the node's agent listens, and its token where it needs one. Its `Debug` form
/// leaves the token out.
#[derive(Clone)]
pub struct AgentAddress {
    /// Its address.
    pub address: std::net::SocketAddr,
    /// The token of an agent on a non-loopback address.
    pub token: Option<String>,
}

impl std::fmt::Debug for AgentAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let token = self.token.as_ref().map(|_| "<redacted>");
        f.debug_struct("AgentAddress").field("address", &self.address).field("token", &token).finish()
    }
}

/// Who records a process's GPU activity.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DeviceTracer {
    /// The framework's own tracer where there is one (Kineto on demand, the JAX and
    /// TensorFlow profiler servers), `mlprof-inject` in every other CUDA process.
    #[default]
    Auto,
    /// `mlprof-inject` in every CUDA process, frameworks included; their own tracers are
    /// not driven (they would compete for CUPTI, which CUPTI 13.0 gives to one).
    Cupti,
}

/// What a run produced.
#[derive(Debug)]
pub struct RunOutcome {
    /// How the job ended.
    pub status: ExitStatus,
    /// Session directories that received at least one trace.
    pub sessions: Vec<PathBuf>,
}

/// Runs the job to its end, reporting each event as one line through `say`. Fails only
/// when the job cannot be started at all.
pub async fn run_job(options: &RunOptions, say: &(dyn Fn(String) + Sync)) -> io::Result<RunOutcome> {
    let logdir = std::path::absolute(&options.logdir).unwrap_or_else(|_| options.logdir.clone());
    let window = match options.steps {
        Some(steps) => TraceWindow::Iterations(steps),
        None => TraceWindow::Duration(options.duration),
    };
    let mut env = Vec::new();
    let run_dir = private_directory(say);
    let frameworks = options.device_tracer == DeviceTracer::Auto;
    // MLPROF_PYTORCH_TRACER=hook: PyTorch is traced through the start-up hook alone.
    let kineto = frameworks && !TorchFallback::forced_by_environment();
    let mut daemon =
        run_dir.as_ref().filter(|_| kineto).and_then(|dir| start_kineto_daemon(dir.path(), window, &mut env, say));
    let hook = run_dir.as_ref().filter(|_| frameworks).and_then(|dir| install_hook(dir.path(), &mut env, say));
    let mut cupti = run_dir.as_ref().and_then(|dir| start_cupti(dir.path(), options, &mut env, say));
    let launched = Instant::now();
    let mut flush_requests = route_flushes_before_signals();
    let mut child = launch::spawn(&JobCommand { argv: options.argv.clone(), env })?;
    let sampler = Sampler::start_or_say(
        child.id(),
        SamplerOptions { hz: options.sample_hz, native: options.native_stacks, counters: true },
        say,
    );
    let mut link = options.agent.as_ref().and_then(|agent| {
        let tracers = [
            (daemon.is_some(), "kineto"),
            (hook.is_some(), "hook"),
            (cupti.is_some(), "cupti"),
            (sampler.is_some(), "samples"),
        ];
        let registration = Registration {
            run_pid: std::process::id(),
            pid: child.id(),
            command: options.argv.iter().map(|a| a.to_string_lossy()).collect::<Vec<_>>().join(" "),
            logdir: logdir.clone(),
            tracers: tracers.iter().filter(|(on, _)| *on).map(|(_, name)| name.to_string()).collect(),
            ..Registration::default()
        };
        link_to_agent(agent, registration, say)
    });
    let mut exited = tokio::task::spawn_blocking(move || child.wait());
    let schedule = Schedule { first: launched + options.delay, every: options.every };
    let mut state = State::new(schedule, options, &logdir, window, sampler);
    let mut tick = tokio::time::interval(TICK);
    let status = loop {
        tokio::select! {
            joined = &mut exited => break joined.map_err(io::Error::other)??,
            received = serve(&mut daemon, &mut state) => {
                if let Some(received) = received {
                    state.received(received, hook.as_ref(), say);
                } else {
                    say("Kineto on-demand tracing stopped: its socket failed".to_string());
                    daemon = None;
                }
            }
            delivery = next_delivery(&mut cupti) => state.cupti_delivered(delivery, options.duration, say).await,
            Some(done) = flush_requests.recv() => state.flush_for_signal(done).await,
            ask = next_ask(&mut link) => state.ask(ask, say),
            _ = tick.tick() => {
                state.tick(hook.as_ref(), options, say).await;
                state.finish_asks(link.as_ref(), false, say);
                state.tell_agent_cupti_stays(link.as_ref());
            }
        }
    };
    launch::job_ended();
    launch::flush_before_signals(false);
    state.after_exit(hook.as_ref(), daemon.as_ref(), cupti.as_mut(), options.duration, say).await;
    if let Some(link) = link {
        state.finish_asks(Some(&link), true, say);
        for note in link.take_notes() {
            say(note);
        }
        let _ = tokio::task::spawn_blocking(move || link.close()).await;
    }
    Ok(RunOutcome { status, sessions: state.sessions.with_anything() })
}

/// The run's private directory (sockets, the start-up hook); without it mlprof traces
/// nothing and says so, but the job still runs.
fn private_directory(say: &(dyn Fn(String) + Sync)) -> Option<tempfile::TempDir> {
    match tempfile::Builder::new().prefix("mlprof-run-").tempdir() {
        Ok(dir) => Some(dir),
        Err(error) => {
            say(format!(
                "tracing is off: cannot make a private directory in {}: {error}",
                std::env::temp_dir().display()
            ));
            None
        }
    }
}

/// A signal passed on to the job while CUDA processes record waits for their flush
/// (see `launch`): the signal thread asks through the returned channel, each ask
/// carrying where to answer, and waits for the answer.
fn route_flushes_before_signals() -> tokio::sync::mpsc::Receiver<std::sync::mpsc::Sender<()>> {
    let (flush_asked, flush_requests) = tokio::sync::mpsc::channel::<std::sync::mpsc::Sender<()>>(4);
    launch::set_flusher(Box::new(move |wait| {
        let (done, answer) = std::sync::mpsc::channel();
        if flush_asked.try_send(done).is_ok() {
            let _ = answer.recv_timeout(wait);
        }
    }));
    flush_requests
}

/// Installs the JAX/TensorFlow start-up hook in `run_dir` and adds what the job's
/// environment needs for it to `env`; says why not when it cannot.
fn install_hook(run_dir: &Path, env: &mut Vec<(OsString, OsString)>, say: &(dyn Fn(String) + Sync)) -> Option<Hook> {
    match Hook::install(run_dir) {
        Ok(hook) => {
            env.extend(hook.environment(std::env::var_os("PYTHONPATH")));
            Some(hook)
        }
        Err(error) => {
            say(format!("the JAX/TensorFlow start-up hook is off: {error}"));
            None
        }
    }
}

/// Registers the job with the agent at `agent`; says why not when the link's thread
/// cannot start.
fn link_to_agent(agent: &AgentAddress, registration: Registration, say: &(dyn Fn(String) + Sync)) -> Option<AgentLink> {
    match AgentLink::start(agent.address, agent.token.clone(), registration) {
        Ok(link) => Some(link),
        Err(error) => {
            say(format!("the agent is not told about this job: cannot start its thread: {error}"));
            None
        }
    }
}

fn start_kineto_daemon(
    run_dir: &Path,
    window: TraceWindow,
    env: &mut Vec<(OsString, OsString)>,
    say: &(dyn Fn(String) + Sync),
) -> Option<KinetoDaemon> {
    let socket_dir = run_dir.join("kineto");
    let bound = std::fs::create_dir(&socket_dir)
        .and_then(|()| KinetoDaemon::bind(crate::kineto_daemon::Endpoint::Dir(socket_dir.clone()), window));
    match bound {
        Ok(daemon) => {
            env.push(("KINETO_USE_DAEMON".into(), "1".into()));
            env.push(("KINETO_IPC_SOCKET_DIR".into(), socket_dir.into_os_string()));
            Some(daemon)
        }
        Err(error) => {
            say(format!("PyTorch on-demand tracing is off: {}: {error}", socket_dir.display()));
            None
        }
    }
}

/// Prepares `mlprof-inject`: the socket CUDA processes connect to, and the environment
/// that makes the CUDA driver load the injection. Off (one line says why) when the
/// library is not found.
fn start_cupti(
    run_dir: &Path,
    options: &RunOptions,
    env: &mut Vec<(OsString, OsString)>,
    say: &(dyn Fn(String) + Sync),
) -> Option<CuptiListener> {
    let Some(library) = injection_library() else {
        say(format!(
            "GPU activity of CUDA programs is off: {INJECTION_LIBRARY} is not next to mlprof (cargo build --release \
             builds it) and MLPROF_INJECT_LIBRARY is not set"
        ));
        return None;
    };
    let listener = match CuptiListener::bind(run_dir) {
        Ok(listener) => listener,
        Err(error) => {
            say(format!("GPU activity of CUDA programs is off: {}: {error}", run_dir.display()));
            return None;
        }
    };
    // A tool the user already injects (Nsight Systems, ...) is initialised first and
    // keeps CUPTI; mlprof-inject then steps aside.
    if let Some(previous) = std::env::var_os("CUDA_INJECTION64_PATH").filter(|p| !p.is_empty() && *p != library) {
        env.push(("MLPROF_INJECT_CHAIN".into(), previous));
    }
    // NVTX ranges: the job's NVTX library hands its first call to the injection, which
    // passes it on to libcupti. A tool the user already named keeps NVTX.
    if std::env::var_os("NVTX_INJECTION64_PATH").is_none_or(|p| p.is_empty()) {
        env.push(("NVTX_INJECTION64_PATH".into(), library.clone().into_os_string()));
    }
    env.push(("CUDA_INJECTION64_PATH".into(), library.into_os_string()));
    env.push(("MLPROF_INJECT_SOCKET".into(), listener.path().as_os_str().to_os_string()));
    if options.device_tracer == DeviceTracer::Cupti {
        env.push(("MLPROF_INJECT_FRAMEWORKS".into(), "1".into()));
    }
    if options.delay.is_zero() {
        // The first window is due at launch: a CUDA program records from its first
        // kernel, without waiting for mlprof's answer (short programs end first).
        env.push(("MLPROF_INJECT_RECORD_AT_START".into(), "1".into()));
    }
    Some(listener)
}

/// The injection library's file name.
pub const INJECTION_LIBRARY: &str = "libmlprof_inject.so";

/// `MLPROF_INJECT_LIBRARY`, else `libmlprof_inject.so` next to the running mlprof or in
/// its `deps/` (where cargo leaves the library of a dependency; building the injection
/// alone also copies it next to mlprof, where it may then be the older): the newer of
/// the two.
pub fn injection_library() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("MLPROF_INJECT_LIBRARY").filter(|p| !p.is_empty()) {
        let path = PathBuf::from(path);
        return path.is_file().then(|| std::path::absolute(&path).unwrap_or(path));
    }
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    [dir.join(INJECTION_LIBRARY), dir.join("deps").join(INJECTION_LIBRARY)]
        .into_iter()
        .filter_map(|p| std::fs::metadata(&p).ok().filter(|m| m.is_file()).map(|m| (m.modified().ok(), p)))
        .max_by_key(|(modified, _)| *modified)
        .map(|(_, p)| p)
}

/// The next ask of the node's agent; pending forever without one.
async fn next_ask(link: &mut Option<AgentLink>) -> Ask {
    match link {
        Some(link) => link.next_ask().await,
        None => std::future::pending().await,
    }
}

/// The next delivery from a CUDA process; pending forever without the injection.
async fn next_delivery(cupti: &mut Option<CuptiListener>) -> Delivery {
    match cupti {
        Some(listener) => listener.next().await,
        None => std::future::pending().await,
    }
}

/// The next datagram, or `None` when the socket failed; pending forever without a daemon.
async fn serve(daemon: &mut Option<KinetoDaemon>, state: &mut State) -> Option<Received> {
    let Some(daemon) = daemon else { return std::future::pending().await };
    let State { rounds, sessions, host, .. } = state;
    daemon.serve_one(rounds, |pid, round| sessions.dir(round).join(format!(".{host}_{pid}.kineto.json"))).await.ok()
}

/// Session directories by round, created when first needed.
struct Sessions {
    logdir: PathBuf,
    ids: SessionIds,
    by_round: HashMap<u32, PathBuf>,
    /// The log directories of rounds the agent asked for, where it named its own.
    asked_logdirs: HashMap<u32, PathBuf>,
    /// Sessions with a framework or GPU trace.
    with_traces: Vec<PathBuf>,
    /// Sessions with samples (and perhaps nothing else).
    with_samples: Vec<PathBuf>,
}

impl Sessions {
    fn new(logdir: &Path) -> Sessions {
        Sessions {
            logdir: logdir.to_path_buf(),
            ids: SessionIds::new(),
            by_round: HashMap::new(),
            asked_logdirs: HashMap::new(),
            with_traces: Vec::new(),
            with_samples: Vec::new(),
        }
    }

    /// The session id of `round`.
    fn id(&mut self, round: u32) -> String {
        let dir = self.dir(round);
        dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
    }

    /// The session directory of `round` (created; a failure shows when the trace is
    /// missing).
    fn dir(&mut self, round: u32) -> PathBuf {
        let logdir = self.asked_logdirs.get(&round).unwrap_or(&self.logdir);
        let root = mlprof_formats::output::profile_root(logdir);
        let Sessions { ids, by_round, .. } = self;
        let dir = by_round.entry(round).or_insert_with(|| root.join(ids.next_now(&root))).clone();
        let _ = std::fs::create_dir_all(&dir);
        dir
    }

    fn add_trace(&mut self, dir: &Path) {
        if !self.with_traces.iter().any(|d| d == dir) {
            self.with_traces.push(dir.to_path_buf());
        }
    }

    fn add_samples(&mut self, dir: &Path) {
        if !self.with_samples.iter().any(|d| d == dir) {
            self.with_samples.push(dir.to_path_buf());
        }
    }

    /// Removes the session directories that received nothing (a trace that never came).
    fn remove_empty(&self) {
        for dir in self.by_round.values() {
            // Fails, as it should, on a directory that holds anything.
            let _ = std::fs::remove_dir(dir);
        }
    }

    /// Round `round` (asked by the agent) goes to a session under `logdir`, where that can
    /// be made (else under the run's own).
    fn ask_into(&mut self, round: u32, logdir: &Path) {
        if std::fs::create_dir_all(mlprof_formats::output::profile_root(logdir)).is_ok() {
            self.asked_logdirs.insert(round, logdir.to_path_buf());
        }
    }

    /// Whether `dir` received anything.
    fn has(&self, dir: &Path) -> bool {
        self.with_traces.iter().chain(&self.with_samples).any(|d| d == dir)
    }

    /// Sessions with anything in them, but those of rounds the agent asked for (the
    /// agent reports them).
    fn with_anything(&self) -> Vec<PathBuf> {
        let asked: Vec<&PathBuf> =
            self.by_round.iter().filter(|(round, _)| is_asked(**round)).map(|(_, dir)| dir).collect();
        let mut dirs: Vec<PathBuf> =
            self.with_traces.iter().chain(&self.with_samples).filter(|d| !asked.contains(d)).cloned().collect();
        dirs.sort();
        dirs.dedup();
        dirs
    }
}

/// A window of GPU activity, written.
struct WrittenWindow {
    /// Its session directory.
    dir: PathBuf,
    /// The file was written.
    written: bool,
    /// It holds samples, not a framework's or the GPU's trace.
    samples: bool,
    /// What to say about it.
    lines: Vec<String>,
}

/// A Kineto trace asked for and not yet written.
struct PendingTrace {
    started: TraceStarted,
    /// Where Kineto writes it.
    written_to: PathBuf,
    /// Its size at the last tick, to see it has stopped growing.
    last_size: Option<u64>,
    /// Ticks in a row its size has not changed.
    stable_ticks: u32,
    deadline: Instant,
}

impl PendingTrace {
    /// Removes what the tracer left of a trace it never finished: a partial file, and the
    /// temporary file Kineto (and the hook) write before renaming it into place.
    fn remove_unfinished(&self) {
        let mut temporary = self.written_to.clone().into_os_string();
        temporary.push(".tmp");
        for leftover in [self.written_to.as_path(), Path::new(&temporary)] {
            // Nothing there, or not ours to remove: either way nothing more to do.
            let _ = std::fs::remove_file(leftover);
        }
    }
}

/// Ticks a trace without Kineto's closing `traceName` must stay the same size before it
/// counts as written (1 s).
const STABLE_TICKS: u32 = 4;

/// The framework profiler server started by the hook, and its captures.
enum ServerState {
    NotSeen,
    /// `next_round`: the first scheduled round still to capture (`None`: none is left;
    /// rounds the agent asks for still are).
    Ready {
        server: StartedServer,
        next_round: Option<u32>,
        settled_at: Instant,
    },
    Capturing {
        server: StartedServer,
        round: u32,
        next_round: Option<u32>,
        task: JoinHandle<Option<WorkerOutcome>>,
    },
    Done,
}

struct State {
    rounds: Rounds,
    cupti_rounds: Rounds,
    cupti: CuptiProcesses,
    /// Windows of GPU activity being written.
    writing: Vec<JoinHandle<WrittenWindow>>,
    sessions: Sessions,
    pending: Vec<PendingTrace>,
    server: ServerState,
    host: String,
    window: TraceWindow,
    /// Python stacks and `/proc` counters of the job's processes.
    sampler: Option<Sampler>,
    /// Which samples each session gets.
    sample_windows: SampleWindows,
    sample_interval_ns: i64,
    /// Which PyTorch processes the hook's torch.profiler traces.
    torch: TorchFallback,
    /// PyTorch processes whose first trace has started and whose CUPTI teardown was
    /// looked at (see [`State::say_if_cupti_stays`]).
    cupti_looked_at: HashSet<i32>,
    /// Why Kineto keeps CUPTI attached in one of the announced PyTorch processes, until
    /// the agent is told (see [`State::tell_agent_cupti_stays`]); then `Told`.
    cupti_stays_for_agent: CuptiStays,
    /// Signals waiting for the CUDA processes' flush (see `launch`).
    flush_waiters: Vec<std::sync::mpsc::Sender<()>>,
    /// Rounds the agent asked for, not yet reported.
    asks: Vec<OpenAsk>,
    /// Captures of the profiler server tried, by round.
    server_tries: HashMap<u32, u32>,
}

/// What the agent is to hear of CUPTI staying attached in the job's processes.
enum CuptiStays {
    NotSeen,
    Seen(String),
    Told,
}

/// A round the agent asked for.
struct OpenAsk {
    id: u64,
    round: u32,
    /// When its duration is over.
    due: Instant,
}

impl State {
    /// The state of a job just launched: traces due by `schedule`, written under
    /// `logdir`, `sampler` sampling it (when it could start).
    fn new(
        schedule: Schedule,
        options: &RunOptions,
        logdir: &Path,
        window: TraceWindow,
        sampler: Option<Sampler>,
    ) -> State {
        State {
            rounds: Rounds::new(schedule, SETTLE, MAX_TRACED_PROCESSES),
            // CUDA programs have no framework warming up: their window may start when CUDA
            // does (with --delay 0, from the first kernel, as Nsight Systems).
            cupti_rounds: Rounds::new(schedule, Duration::ZERO, MAX_TRACED_PROCESSES),
            cupti: CuptiProcesses::default(),
            writing: Vec::new(),
            sessions: Sessions::new(logdir),
            pending: Vec::new(),
            server: ServerState::NotSeen,
            host: options.host.clone(),
            window,
            sampler,
            sample_windows: SampleWindows::default(),
            sample_interval_ns: crate::sampling::interval_ns(options.sample_hz),
            torch: TorchFallback::new(TorchFallback::forced_by_environment()),
            cupti_looked_at: HashSet::new(),
            cupti_stays_for_agent: CuptiStays::NotSeen,
            flush_waiters: Vec::new(),
            asks: Vec::new(),
            server_tries: HashMap::new(),
        }
    }

    /// Takes note of what the Kineto daemon did; a timed trace handed out is announced
    /// to the start-up hook in the process, when there is one (see
    /// [`Hook::announce_kineto_trace`]).
    fn received(&mut self, received: Received, hook: Option<&Hook>, say: &(dyn Fn(String) + Sync)) {
        match received {
            Received::Started(started) => {
                self.torch.polled(started.pid);
                let window = self.rounds.kineto_window_of(started.round).unwrap_or(self.window);
                if started.attempt > 1 {
                    self.pending.retain(|t| (t.started.pid, t.started.round) != (started.pid, started.round));
                    say(format!("PyTorch process {}: {}", started.pid, crate::kineto_retry::asked_again(&started)));
                }
                say(format!("PyTorch process {}: tracing {window} (Kineto on demand)", started.pid));
                if let Some(hook) = hook {
                    self.say_if_cupti_stays(hook, started.pid, say);
                }
                let budget = match window {
                    TraceWindow::Duration(d) => d + KINETO_GRACE,
                    TraceWindow::Iterations(_) => KINETO_STEPS_DEADLINE,
                };
                let written_to = kineto_output_path(&started.log_file, started.pid);
                if let (Some(hook), TraceWindow::Duration(duration)) = (hook, window) {
                    let starts = SystemTime::now() + KINETO_START_DELAY;
                    if let Err(error) = hook.announce_kineto_trace(started.pid, starts, starts + duration, &written_to)
                    {
                        say(format!(
                            "PyTorch process {}: telling the start-up hook about its trace: {error}",
                            started.pid
                        ));
                    }
                }
                let deadline = started.at + budget;
                self.pending.push(PendingTrace { deadline, written_to, last_size: None, stable_ticks: 0, started });
            }
            Received::Malformed(error) => say(format!("ignored a datagram on the Kineto socket: {error}")),
            Received::Polled { pid } => {
                if let Some(pid) = pid {
                    self.torch.polled(pid);
                }
            }
            Received::Registered => {}
        }
    }

    /// The agent asks for a capture: a round of its own, now, for every tracer.
    fn ask(&mut self, ask: Ask, say: &(dyn Fn(String) + Sync)) {
        let Some(duration) = ask.duration() else { return };
        let now = Instant::now();
        let round = self.rounds.ask(now, duration);
        if let Some(steps) = ask.kineto_steps() {
            self.rounds.trace_steps_of(round, steps);
        }
        self.cupti_rounds.ask_as(round, now, duration);
        self.sessions.ask_into(round, &ask.logdir);
        if self.sampler.is_some() {
            let now_ns = realtime_ns();
            let until = now_ns.saturating_add(duration.as_nanos() as i64);
            self.sample_windows.open_asked(round, now_ns, until);
        }
        let kineto =
            ask.kineto_steps().map(|steps| format!(" ({} where Kineto traces)", TraceWindow::Iterations(steps)));
        say(format!(
            "the agent asked for {}{}: recording it",
            TraceWindow::Duration(duration),
            kineto.unwrap_or_default()
        ));
        self.asks.push(OpenAsk { id: ask.id, round, due: now + duration });
    }

    /// Reports the asks whose rounds are over (every one, once the job has `ended`) to
    /// the agent.
    fn finish_asks(&mut self, link: Option<&AgentLink>, ended: bool, say: &(dyn Fn(String) + Sync)) {
        let now = Instant::now();
        let (done, open): (Vec<OpenAsk>, Vec<OpenAsk>) =
            std::mem::take(&mut self.asks).into_iter().partition(|ask| ended || self.ask_is_over(ask, now));
        self.asks = open;
        for ask in done {
            let dir = self.sessions.by_round.get(&ask.round).cloned();
            let session = dir.filter(|dir| self.sessions.has(dir));
            let lines = match &session {
                Some(dir) => session_files(dir),
                None if ended => vec!["the job ended before anything of it was recorded".to_string()],
                None => vec!["nothing was recorded (no trace came and nothing was sampled)".to_string()],
            };
            if let Some(link) = link {
                link.finished(AskOutcome { id: ask.id, session, lines });
            }
        }
        if let Some(link) = link {
            for note in link.take_notes() {
                say(note);
            }
        }
    }

    /// Whether an asked round is over: its time is up, no trace of it is coming or being
    /// written, and its samples are written.
    fn ask_is_over(&self, ask: &OpenAsk, now: Instant) -> bool {
        let capturing = matches!(&self.server, ServerState::Capturing { round, .. } if *round == ask.round);
        now >= ask.due
            && !capturing
            && !self.rounds.may_still_join(ask.round, now)
            && !self.cupti_rounds.may_still_join(ask.round, now)
            && !self.pending.iter().any(|t| t.started.round == ask.round)
            && !self.cupti.busy_with(ask.round)
            && !self.sample_windows.is_open(ask.round)
            && self.writing.is_empty()
    }

    async fn tick(&mut self, hook: Option<&Hook>, options: &RunOptions, say: &(dyn Fn(String) + Sync)) {
        self.collect_kineto(Instant::now(), say);
        self.tick_sampling(say);
        let (started, abandoned) = self.cupti.tick(&mut self.cupti_rounds, options.duration).await;
        for (pid, _) in started {
            let steps = if options.steps.is_some() {
                " (--steps counts PyTorch steps; CUDA programs use --duration)"
            } else {
                ""
            };
            say(format!(
                "CUDA process {pid}: recording GPU activity for {} (CUPTI){steps}",
                TraceWindow::Duration(options.duration)
            ));
        }
        for window in abandoned {
            self.file_cupti_window(window);
        }
        launch::flush_before_signals(self.cupti.recording());
        self.collect_written(say).await;
        if let Some(hook) = hook {
            self.drive_server(hook, options, say).await;
            self.drive_torch_hook(hook, options, say);
        }
    }

    /// A signal is about to be passed on: every recording CUDA process flushes first;
    /// `done` hears when they all have (the signal thread forwards at its deadline anyway).
    async fn flush_for_signal(&mut self, done: std::sync::mpsc::Sender<()>) {
        if self.cupti.flush_recording().await {
            self.flush_waiters.push(done);
        } else {
            let _ = done.send(());
        }
    }

    async fn cupti_delivered(&mut self, delivery: Delivery, duration: Duration, say: &(dyn Fn(String) + Sync)) {
        let (lines, window) = self.cupti.deliver(delivery, &mut self.cupti_rounds, duration).await;
        if self.cupti.flushed() {
            for waiter in self.flush_waiters.drain(..) {
                let _ = waiter.send(());
            }
        }
        for line in lines {
            say(line);
        }
        if let Some(window) = window {
            self.file_cupti_window(window);
        }
    }

    /// Writes one window of GPU activity into its session, on a blocking thread: laying
    /// out and encoding a busy window takes long enough to hold up the run loop, and the
    /// processes exiting meanwhile.
    fn file_cupti_window(&mut self, window: Window) {
        self.cupti_rounds.finished(window.pid as i32);
        self.sample_windows.traced(window.round, realtime_ns());
        let dir = self.sessions.dir(window.round);
        let target = dir.join(format!("{}_{}.xplane.pb", self.host, window.pid));
        let host = self.host.clone();
        let pid = window.pid;
        self.writing.push(tokio::task::spawn_blocking(move || {
            let profile = window.to_host(&host);
            let bytes = mlprof_formats::xspace::encode_xspace(&profile);
            let c = window.counts;
            let mut lines = Vec::new();
            let written = match mlprof_formats::output::write_bytes_atomically(&target, &bytes) {
                Ok(()) => {
                    lines.push(format!(
                        "CUDA process {pid}: wrote {} ({}; {} kernels, {} of kernel time, {} copies, {} memsets, \
                         {} synchronizations, {} API calls{})",
                        target.display(),
                        mlprof_model::human::bytes(bytes.len() as f64),
                        c.kernels,
                        mlprof_model::human::duration_us(c.kernel_ns as f64 / 1e3),
                        c.memcpys,
                        c.memsets,
                        c.synchronizations,
                        c.api_calls,
                        if window.cut_short { "; ended with the process" } else { "" }
                    ));
                    lines.extend(profile.warnings.iter().map(|w| format!("CUDA process {pid}: {w}")));
                    true
                }
                Err(error) => {
                    lines.push(format!("CUDA process {pid}: writing {}: {error}", target.display()));
                    false
                }
            };
            WrittenWindow { dir, written, samples: false, lines }
        }));
    }

    /// Opens the window of a round that came due, writes the windows that ended, lets
    /// the sampler forget what no window needs, and passes on its notes.
    fn tick_sampling(&mut self, say: &(dyn Fn(String) + Sync)) {
        let Some(sampler) = &self.sampler else { return };
        for note in sampler.take_notes() {
            say(note);
        }
        let now_ns = realtime_ns();
        if let Some(round) = self.rounds.schedule().due_round(Instant::now()) {
            for window in self.sample_windows.open(round, now_ns) {
                self.file_sample_window(window);
            }
        }
        let pending = &self.pending;
        let capturing = match &self.server {
            ServerState::Capturing { round, .. } => Some(*round),
            _ => None,
        };
        let (rounds, cupti_rounds, now) = (&self.rounds, &self.cupti_rounds, Instant::now());
        let busy = |round: u32| {
            capturing == Some(round)
                || pending.iter().any(|t| t.started.round == round)
                || rounds.may_still_join(round, now)
                || cupti_rounds.may_still_join(round, now)
        };
        for window in self.sample_windows.ended(now_ns, busy) {
            self.file_sample_window(window);
        }
        if let Some(sampler) = &self.sampler {
            sampler.forget_before(self.sample_windows.oldest_needed(now_ns));
        }
    }

    /// After the job: stops sampling and writes every window still open.
    fn finish_sampling(&mut self, say: &(dyn Fn(String) + Sync)) {
        let Some(sampler) = self.sampler.take() else { return };
        let now_ns = realtime_ns();
        // A job that ends before its first round is due has no window.
        let windows = self.sample_windows.close_all(now_ns);
        let cut: Vec<_> = windows.iter().map(|w| (*w, sampler.window(w.begin_ns, w.end_ns))).collect();
        for note in sampler.take_notes() {
            say(note);
        }
        sampler.stop();
        for (window, recorded) in cut {
            self.write_sample_window(window, recorded);
        }
    }

    /// Writes one window of samples into its session.
    fn file_sample_window(&mut self, window: SampleWindow) {
        let Some(sampler) = &self.sampler else { return };
        let recorded = sampler.window(window.begin_ns, window.end_ns);
        self.write_sample_window(window, recorded);
    }

    /// Lays out and writes a window of samples on a blocking thread (a busy window of a
    /// many-threaded job takes a moment to lay out).
    fn write_sample_window(&mut self, window: SampleWindow, recorded: crate::sampling::store::Recorded) {
        if recorded.samples.is_empty() && recorded.readings.is_empty() {
            return;
        }
        let dir = self.sessions.dir(window.round);
        let host = self.host.clone();
        let interval_ns = self.sample_interval_ns;
        self.writing.push(tokio::task::spawn_blocking(move || {
            let span = (window.begin_ns, window.end_ns);
            let written = crate::sampling::file::write(&recorded, &host, span, interval_ns, &dir);
            WrittenWindow { dir, written: written.path.is_some(), samples: true, lines: written.lines }
        }));
    }

    /// Prints what a window's writer said and counts its session.
    fn said_written(&mut self, written: WrittenWindow, say: &(dyn Fn(String) + Sync)) {
        for line in written.lines {
            say(line);
        }
        match (written.written, written.samples) {
            (true, false) => self.sessions.add_trace(&written.dir),
            (true, true) => self.sessions.add_samples(&written.dir),
            (false, _) => {}
        }
    }

    /// Windows whose files are written: their lines.
    async fn collect_written(&mut self, say: &(dyn Fn(String) + Sync)) {
        let (done, still): (Vec<_>, Vec<_>) =
            std::mem::take(&mut self.writing).into_iter().partition(|w| w.is_finished());
        self.writing = still;
        for writing in done {
            if let Ok(written) = writing.await {
                self.said_written(written, say);
            }
        }
    }

    /// Moves every finished Kineto trace into its session; gives up on late ones.
    fn collect_kineto(&mut self, now: Instant, say: &(dyn Fn(String) + Sync)) {
        let mut still = Vec::new();
        for mut trace in std::mem::take(&mut self.pending) {
            let size = std::fs::metadata(&trace.written_to).ok().map(|m| m.len());
            trace.stable_ticks = if size.is_some() && size == trace.last_size { trace.stable_ticks + 1 } else { 0 };
            let settled = trace.stable_ticks > 0
                && match trace_ending(&trace.written_to) {
                    TraceEnding::Named => true,
                    TraceEnding::Closed => trace.stable_ticks >= STABLE_TICKS,
                    TraceEnding::Open => false,
                };
            if settled {
                self.file_kineto_trace(&trace, say);
                self.rounds.finished(trace.started.pid);
            } else if now >= trace.deadline {
                say(format!(
                    "PyTorch process {}: no trace appeared within {} s of asking",
                    trace.started.pid,
                    (trace.deadline - trace.started.at).as_secs()
                ));
                self.rounds.finished(trace.started.pid);
            } else {
                trace.last_size = size;
                still.push(trace);
            }
        }
        self.pending = still;
    }

    fn file_kineto_trace(&mut self, trace: &PendingTrace, say: &(dyn Fn(String) + Sync)) {
        let dir = self.sessions.dir(trace.started.round);
        let target = dir.join(format!("{}_{}.pt.trace.json", self.host, trace.started.pid));
        match std::fs::rename(&trace.written_to, &target) {
            Ok(()) => {
                let size = std::fs::metadata(&target).map(|m| m.len()).unwrap_or(0);
                say(format!(
                    "PyTorch process {}: wrote {} ({})",
                    trace.started.pid,
                    target.display(),
                    mlprof_model::human::bytes(size as f64)
                ));
                self.sessions.add_trace(&dir);
                self.sample_windows.traced(trace.started.round, realtime_ns());
            }
            Err(error) => say(format!(
                "PyTorch process {}: moving {} to {}: {error}",
                trace.started.pid,
                trace.written_to.display(),
                target.display()
            )),
        }
    }

    /// Tells the agent, once, why Kineto keeps CUPTI attached in one of the job's PyTorch
    /// processes: it then does not probe the job (each probe would leave it slower).
    fn tell_agent_cupti_stays(&mut self, link: Option<&AgentLink>) {
        let Some(link) = link else { return };
        if let CuptiStays::Seen(why) = &self.cupti_stays_for_agent {
            link.cupti_stays(why.clone());
            self.cupti_stays_for_agent = CuptiStays::Told;
        }
    }

    /// Says, once per PyTorch process on a GPU as its first trace starts, where Kineto
    /// will keep CUPTI attached after it: the hook could not set `TEARDOWN_CUPTI=1`
    /// there, so the job's steps may stay slower until it exits.
    fn say_if_cupti_stays(&mut self, hook: &Hook, pid: i32, say: &(dyn Fn(String) + Sync)) {
        if self.cupti_looked_at.contains(&pid) {
            return;
        }
        let Some(stays) = hook.cupti_stays(pid) else { return };
        self.cupti_looked_at.insert(pid);
        // CUPTI records only where the process uses a GPU (maps NVIDIA's driver).
        let on_a_gpu = u32::try_from(pid).is_ok_and(|pid| crate::sampling::procfs::maps_library(pid, "libcuda.so"));
        if let Some(why) = stays.filter(|_| on_a_gpu) {
            say(format!(
                "PyTorch process {pid}: Kineto keeps CUPTI attached after this trace ({why}), so its steps may \
                 stay slower until it exits"
            ));
        }
    }

    /// Sends the PyTorch processes Kineto does not answer for to the hook, and asks the
    /// hook of each for its trace when its round is due.
    fn drive_torch_hook(&mut self, hook: &Hook, options: &RunOptions, say: &(dyn Fn(String) + Sync)) {
        let now = Instant::now();
        // A process that has exited (a short-lived helper that imported torch) is no
        // longer anyone's to trace.
        let alive = |pid: i32| u32::try_from(pid).is_ok_and(|pid| crate::sampling::procfs::process_stat(pid).is_some());
        let announced: Vec<_> = hook.torch_processes().into_iter().filter(|p| alive(p.pid)).collect();
        if let (CuptiStays::NotSeen, Some(why)) =
            (&self.cupti_stays_for_agent, announced.iter().find_map(|p| p.cupti_stays.clone()))
        {
            self.cupti_stays_for_agent = CuptiStays::Seen(why);
        }
        let changes = self.torch.announced(&announced, now);
        for pid in changes.silent {
            say(format!(
                "PyTorch process {pid}: no Kineto poll in {} s although its on-demand mode is on (a PyTorch build \
                 without it?): rerun with {}=hook to trace it with torch.profiler through the start-up hook",
                crate::torch_fallback::WAIT.as_secs(),
                crate::torch_fallback::FORCE_VARIABLE
            ));
        }
        for pid in changes.to_hook {
            let why = if TorchFallback::forced_by_environment() {
                format!("{}=hook", crate::torch_fallback::FORCE_VARIABLE)
            } else {
                format!(
                    "Kineto's on-demand mode is off in it, and it has not polled in {} s",
                    crate::torch_fallback::WAIT.as_secs()
                )
            };
            say(format!("PyTorch process {pid}: traced with torch.profiler through the start-up hook ({why})"));
        }
        for pid in self.torch.hook_pids().into_iter().filter(|&pid| alive(pid)) {
            let Some(round) = self.rounds.start(pid, now) else { continue };
            let duration = self.rounds.duration_of(round).unwrap_or(options.duration);
            let log_file = self.sessions.dir(round).join(format!(".{}_{pid}.hook.json", self.host));
            match hook.request_torch_trace(pid, duration, &log_file) {
                Ok(()) => {
                    let steps =
                        if options.steps.is_some() { " (--steps needs Kineto; this traces --duration)" } else { "" };
                    say(format!(
                        "PyTorch process {pid}: tracing {} (torch.profiler){steps}",
                        TraceWindow::Duration(duration)
                    ));
                    self.say_if_cupti_stays(hook, pid, say);
                    let started = TraceStarted { pid, round, log_file: log_file.clone(), at: now, attempt: 1 };
                    let deadline = now + duration + KINETO_GRACE;
                    self.pending.push(PendingTrace {
                        started,
                        written_to: log_file,
                        last_size: None,
                        stable_ticks: 0,
                        deadline,
                    });
                }
                Err(error) => {
                    say(format!("PyTorch process {pid}: asking the start-up hook for a trace: {error}"));
                    self.rounds.finished(pid);
                }
            }
        }
    }

    /// Starts, finishes and repeats captures of the hook's profiler server.
    async fn drive_server(&mut self, hook: &Hook, options: &RunOptions, say: &(dyn Fn(String) + Sync)) {
        match std::mem::replace(&mut self.server, ServerState::Done) {
            ServerState::NotSeen => match hook.started_server() {
                Some(server) => {
                    say(format!(
                        "{} process {}: profiler server on 127.0.0.1:{}",
                        server.framework_label(),
                        server.pid,
                        server.port
                    ));
                    if options.steps.is_some() {
                        say("--steps counts PyTorch optimizer steps; this server is traced for --duration".to_string());
                    }
                    self.server =
                        ServerState::Ready { server, next_round: Some(0), settled_at: Instant::now() + SETTLE };
                }
                None => self.server = ServerState::NotSeen,
            },
            ServerState::Ready { server, next_round, settled_at } => {
                let now = Instant::now();
                let settled = now >= settled_at;
                let asked = settled.then(|| self.rounds.join_asked(server.pid, now)).flatten();
                let scheduled = next_round
                    .and_then(|next| self.rounds.schedule().due_round(now).filter(|&due| due >= next && settled));
                self.server = match asked.or(scheduled) {
                    Some(round) => {
                        let task = self.start_capture(&server, round, options);
                        ServerState::Capturing { server, round, next_round, task }
                    }
                    None => ServerState::Ready { server, next_round, settled_at },
                };
            }
            ServerState::Capturing { server, round, next_round, task } if task.is_finished() => {
                let outcome = task.await.ok().flatten();
                let got = outcome.as_ref().is_some_and(|o| !o.local_files().is_empty());
                let tries = self.server_tries.entry(round).or_insert(0);
                *tries += 1;
                if !got && is_asked(round) && *tries < ASKED_SERVER_TRIES {
                    // The server may still be ending the session before (a probe just
                    // ended: "Another profiling session active"): the round is tried again.
                    self.rounds.cancel(server.pid, round);
                    self.server = ServerState::Ready { server, next_round, settled_at: Instant::now() + TICK * 4 };
                    return;
                }
                self.finish_capture(&server, outcome, say);
                self.sample_windows.traced(round, realtime_ns());
                let next_round = if is_asked(round) {
                    self.rounds.finished(server.pid);
                    next_round
                } else {
                    self.rounds.schedule().every.map(|_| round + 1)
                };
                self.server = ServerState::Ready { server, next_round, settled_at: Instant::now() };
            }
            capturing @ ServerState::Capturing { .. } => self.server = capturing,
            ServerState::Done => {}
        }
    }

    fn start_capture(
        &mut self,
        server: &StartedServer,
        round: u32,
        options: &RunOptions,
    ) -> JoinHandle<Option<WorkerOutcome>> {
        let session_id = self.sessions.id(round);
        let logdir = self.sessions.asked_logdirs.get(&round).unwrap_or(&self.sessions.logdir);
        let mut capture_options = CaptureOptions::new(logdir, session_id);
        capture_options.duration = self.rounds.duration_of(round).unwrap_or(options.duration);
        let target = Target::parse_list(&format!("127.0.0.1:{}", server.port)).ok().and_then(|t| t.into_iter().next());
        tokio::spawn(async move {
            let target = target?;
            let outcomes = capture(&[target], &capture_options, Arc::new(NoProgress)).await.ok()?;
            outcomes.into_iter().next()
        })
    }

    fn finish_capture(
        &mut self,
        server: &StartedServer,
        outcome: Option<WorkerOutcome>,
        say: &(dyn Fn(String) + Sync),
    ) {
        let label = format!("{} process {}", server.framework_label(), server.pid);
        match outcome {
            Some(outcome) => {
                if let Some(dir) = outcome.local_files().first().and_then(|f| f.parent()) {
                    self.sessions.add_trace(dir);
                }
                say(format!("{label}: {outcome}"));
            }
            None => say(format!("{label}: the capture did not run")),
        }
    }

    /// After the job: a last look for traces that were being written, then what is
    /// missing and why.
    async fn after_exit(
        &mut self,
        hook: Option<&Hook>,
        daemon: Option<&KinetoDaemon>,
        mut cupti: Option<&mut CuptiListener>,
        duration: Duration,
        say: &(dyn Fn(String) + Sync),
    ) {
        let until = Instant::now() + AFTER_EXIT_WAIT;
        // What the exiting processes flushed at exit is on its way: take it until every
        // process has closed its connection (or the wait is over: a CUDA process the job
        // left running).
        if let Some(listener) = cupti.as_deref_mut() {
            while Instant::now() < until {
                match listener.try_next() {
                    Some(delivery) => self.cupti_delivered(delivery, duration, say).await,
                    None if self.cupti.connected() > 0 => tokio::time::sleep(Duration::from_millis(20)).await,
                    None => break,
                }
            }
            for window in self.cupti.finish_all() {
                self.file_cupti_window(window);
            }
        }
        self.finish_sampling(say);
        for writing in std::mem::take(&mut self.writing) {
            if let Ok(written) = writing.await {
                self.said_written(written, say);
            }
        }
        while !self.pending.is_empty() && Instant::now() < until {
            tokio::time::sleep(TICK).await;
            self.collect_kineto(Instant::now(), say);
        }
        for trace in std::mem::take(&mut self.pending) {
            say(format!("PyTorch process {}: the job ended before its trace was written", trace.started.pid));
            trace.remove_unfinished();
        }
        if let ServerState::Capturing { server, task, .. } = std::mem::replace(&mut self.server, ServerState::Done) {
            self.finish_capture(&server, task.await.ok().flatten(), say);
        }
        if let Some(hook) = hook {
            for problem in hook.problems() {
                say(format!("start-up hook: {problem}"));
            }
        }
        let polls = daemon.map_or(0, KinetoDaemon::polls);
        let served = hook.is_some_and(|h| h.started_server().is_some());
        let asked = self.rounds.schedule().due_round(Instant::now()).is_some();
        if self.sessions.with_traces.is_empty() && (polls > 0 || served) && !asked {
            say("the job ended before its first trace was due (--delay)".to_string());
        } else if self.sessions.with_traces.is_empty() && polls == 0 && !served && (hook.is_some() || daemon.is_some())
        {
            say("no framework trace: no PyTorch process asked for one and no JAX/TensorFlow profiler server \
                 started (the job imported none of them, ended first, or its Python ignored PYTHONPATH: -E, -I)"
                .to_string());
        }
        if cupti.is_some() && self.cupti.seen == 0 && self.sessions.with_traces.is_empty() {
            say("no GPU activity to collect: no process of the job started CUDA (no NVIDIA driver, or the job \
                 did not use the GPU)"
                .to_string());
        }
        if self.rounds.refused() > 0 {
            say(format!("only the first {MAX_TRACED_PROCESSES} PyTorch processes were traced"));
        }
        self.sessions.remove_empty();
    }
}

/// What a session holds, a line per file: `wrote PATH (SIZE)`.
fn session_files(dir: &Path) -> Vec<String> {
    let mut files: Vec<(PathBuf, u64)> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| Some((e.path(), e.metadata().ok().filter(|m| m.is_file())?.len())))
                .filter(|(path, _)| !path.file_name().is_some_and(|n| n.to_string_lossy().starts_with('.')))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
        .into_iter()
        .map(|(path, size)| format!("wrote {} ({})", path.display(), mlprof_model::human::bytes(size as f64)))
        .collect()
}

/// Now, Unix epoch nanoseconds (the clock samples and GPU records are stamped with).
fn realtime_ns() -> i64 {
    mlprof_cupti::wire::realtime_ns()
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_agents_token_never_shows_in_debug_output() {
        let address = super::AgentAddress { address: ([10, 0, 0, 1], 7766).into(), token: Some("s3cr3t".into()) };
        let shown = format!("{address:?}");
        assert!(!shown.contains("s3cr3t") && shown.contains("10.0.0.1:7766"), "{shown}");
    }
}
