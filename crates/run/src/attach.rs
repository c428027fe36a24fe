//! `mlprof attach PID`: profile a running process without restarting it. Its Python
//! stacks and those of its children are sampled, its `/proc` counters and the GPUs'
//! read, for `--duration`; where it already serves `tensorflow.ProfilerService` (a JAX
//! or TensorFlow job that started a profiler server) on a port this machine can reach,
//! that server is captured over the same window; where it is a PyTorch process whose
//! Kineto on-demand mode is on, Kineto traces it ([`crate::attach_kineto`]).
//! Everything lands in one session of the log directory.
//!
//! The process may be a wrapper of the job (a shell, `srun`, a launcher that is not
//! Python): its tree is sampled as it is, and the framework is looked for in its first
//! Python descendant.
//!
//! Refusals are one line each, before anything is recorded: no such process, a process
//! that neither is Python nor started one, memory that cannot be read (with what would
//! allow it).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mlprof_capture::address::Target;
use mlprof_capture::client::{CaptureOptions, NoProgress, SessionIds, capture};

use crate::attach_kineto::{self, KinetoAttach, KinetoOutcome};
use crate::kineto_ipc::TraceWindow;
use crate::listening;
use crate::sampling::python::PythonProcess;
use crate::sampling::{Sampler, SamplerOptions, file, interval_ns, procfs};

/// What to attach to and record.
#[derive(Clone, Debug)]
pub struct AttachOptions {
    /// The process.
    pub pid: u32,
    /// How long to record.
    pub duration: Duration,
    /// The TensorBoard log directory the session goes to.
    pub logdir: PathBuf,
    /// This machine's name, for file names.
    pub host: String,
    /// Python stack samples per second per thread.
    pub sample_hz: u32,
    /// Whether native stacks are sampled too.
    pub native_stacks: bool,
}

/// Why `mlprof attach` recorded nothing.
#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    /// No process has the pid.
    #[error("no process with pid {0}")]
    NoProcess(u32),
    /// Neither the process nor any process it started runs a Python interpreter.
    #[error(
        "pid {pid} ({name}) is not a Python process, nor did it start one: mlprof attach reads Python stacks (start \
         other programs under `mlprof run -- CMD`)"
    )]
    NotPython {
        /// The pid.
        pid: u32,
        /// Its name.
        name: String,
    },
    /// Its Python stacks cannot be read.
    #[error("pid {pid}: cannot read its Python stacks: {reason}")]
    Unreadable {
        /// The pid.
        pid: u32,
        /// Why, with what would allow it.
        reason: String,
    },
    /// The session directory cannot be made.
    #[error("cannot make the session directory {}: {error}", path.display())]
    Output {
        /// The directory.
        path: PathBuf,
        /// The error.
        error: std::io::Error,
    },
}

/// What an attach recorded.
#[derive(Debug)]
pub struct AttachOutcome {
    /// The session directory, when anything was written to it.
    pub session: Option<PathBuf>,
}

/// Checks that `pid` can be sampled: it exists, it runs Python or is a wrapper of a
/// process that does (its first Python descendant), and that Python's memory is
/// readable. The Python process: `pid`, or that descendant.
pub fn check(pid: u32) -> Result<u32, AttachError> {
    let stat = procfs::process_stat(pid).ok_or(AttachError::NoProcess(pid))?;
    // py-spy first: it also finds an interpreter linked into a program of another name.
    let python = match PythonProcess::attach(pid) {
        Ok(_) => return Ok(pid),
        Err(reason) if procfs::maps_python(pid) => return Err(unreadable(pid, &reason)),
        Err(_) => procfs::process_tree(pid).into_iter().skip(1).find(|&descendant| procfs::maps_python(descendant)),
    };
    let python = python.ok_or(AttachError::NotPython { pid, name: stat.comm })?;
    PythonProcess::attach(python).map(|_| python).map_err(|reason| unreadable(python, &reason))
}

/// Why the Python stacks of `pid` cannot be read: `reason`, and what would allow it.
fn unreadable(pid: u32, reason: &str) -> AttachError {
    AttachError::Unreadable { pid, reason: format!("{reason}{}", crate::sampling::ptrace_hint(reason)) }
}

/// Records `options.pid` for `options.duration` (or until `stop` resolves), saying what
/// happens through `say`.
pub async fn attach(
    options: &AttachOptions,
    stop: impl std::future::Future<Output = ()>,
    say: &(dyn Fn(String) + Sync),
) -> Result<AttachOutcome, AttachError> {
    let python = check(options.pid)?;
    // The framework's parts (its server, Kineto) are looked for in the Python process.
    let framework = &AttachOptions { pid: python, ..options.clone() };
    if python != options.pid {
        let name = |pid| procfs::process_stat(pid).map_or_else(String::new, |stat| stat.comm);
        say(format!(
            "pid {} ({}) is not Python: recording it and every process it started, the framework in its Python \
             process {python} ({})",
            options.pid,
            name(options.pid),
            name(python)
        ));
    }
    let logdir = std::path::absolute(&options.logdir).unwrap_or_else(|_| options.logdir.clone());
    let root = mlprof_formats::output::profile_root(&logdir);
    let session_id = SessionIds::new().next_now(&root);
    let session = root.join(&session_id);
    std::fs::create_dir_all(&session).map_err(|error| AttachError::Output { path: session.clone(), error })?;

    let begin_ns = mlprof_cupti::wire::realtime_ns();
    let started = Instant::now();
    let sampler = Sampler::start_or_say(
        options.pid,
        SamplerOptions { hz: options.sample_hz, native: options.native_stacks, counters: true },
        say,
    );
    let ports = listening::local_ports(python);
    let captures = start_captures(&ports, &logdir, &session_id, options.duration);
    let torch = procfs::maps_library(python, "libtorch");
    if ports.is_empty() && !torch {
        say(format!(
            "pid {python}: no framework trace: it listens on no port this machine reaches (a JAX or TensorFlow job \
             that calls jax.profiler.start_server / tf.profiler.experimental.server.start can be captured)"
        ));
    }
    let kineto = if torch { start_kineto(framework, &session, say) } else { None };
    let kineto_started = kineto.is_some();
    say(format!("pid {}: recording for {} s", options.pid, options.duration.as_secs_f64()));
    let (kineto_outcome, stopped) = record_window(kineto, framework, stop, say).await;
    let mut wrote = report_kineto(kineto_outcome, stopped && kineto_started, framework, say);
    if stopped {
        say(format!("stopped after {:.1} s", started.elapsed().as_secs_f64()));
    }
    let end_ns = mlprof_cupti::wire::realtime_ns();
    if let Some(sampler) = sampler {
        wrote |= write_samples(sampler, options, (begin_ns, end_ns), &session, say).await;
    }
    wrote |= report_captures(captures, python, say).await;
    if !wrote {
        let _ = std::fs::remove_dir(&session);
    }
    Ok(AttachOutcome { session: wrote.then_some(session) })
}

/// Starts tracing a PyTorch process through Kineto's on-demand endpoint when its
/// environment turned that mode on; otherwise says why there is no Kineto trace.
fn start_kineto(options: &AttachOptions, session: &Path, say: &(dyn Fn(String) + Sync)) -> Option<KinetoAttach> {
    let pid = options.pid;
    let endpoint = match attach_kineto::endpoint(pid) {
        Ok(Some(endpoint)) => endpoint,
        Ok(None) => {
            say(format!(
                "pid {pid}: PyTorch: no Kineto trace: its on-demand mode is off (start it with KINETO_USE_DAEMON=1, \
                 from any launcher, or under `mlprof run`)"
            ));
            return None;
        }
        Err(error) => {
            say(format!("pid {pid}: PyTorch: no Kineto trace: cannot read /proc/{pid}/environ: {error}"));
            return None;
        }
    };
    match KinetoAttach::bind(endpoint, pid, TraceWindow::Duration(options.duration), session, &options.host) {
        Ok(kineto) => Some(kineto),
        Err(why) => {
            say(format!("pid {pid}: PyTorch: no Kineto trace: {why}"));
            None
        }
    }
}

/// Captures every port as a profiler server over the window; a port that serves
/// something else fails at once.
/// Waits out the recording window, answering Kineto's polls meanwhile, then for
/// Kineto's trace (which starts at the process's next poll) until it is written;
/// returns what Kineto gave and whether `stop` came first.
async fn record_window(
    kineto: Option<KinetoAttach>,
    options: &AttachOptions,
    stop: impl std::future::Future<Output = ()>,
    say: &(dyn Fn(String) + Sync),
) -> (Option<KinetoOutcome>, bool) {
    let mut kineto =
        kineto.map(|kineto| Box::pin(kineto.record(Instant::now() + attach_kineto::POLL_WAIT, &options.host, say)));
    let mut outcome = None;
    tokio::pin!(stop);
    let window = tokio::time::sleep(options.duration);
    tokio::pin!(window);
    let mut stopped = false;
    loop {
        tokio::select! {
            () = &mut window => break,
            () = &mut stop => { stopped = true; break }
            done = async { kineto.as_mut()?.await.into() }, if kineto.is_some() => {
                outcome = done;
                kineto = None;
            }
        }
    }
    if let (Some(recording), false) = (kineto.as_mut(), stopped) {
        say(format!("pid {}: waiting for its Kineto trace", options.pid));
        tokio::select! {
            done = recording => outcome = Some(done),
            () = &mut stop => stopped = true,
        }
    }
    (outcome, stopped)
}

/// Says what Kineto gave (`stopped_early`: the recording was stopped while Kineto had
/// started), and when its trace holds no op, that the job ran none while it was traced;
/// returns whether a trace was written.
fn report_kineto(
    outcome: Option<KinetoOutcome>,
    stopped_early: bool,
    options: &AttachOptions,
    say: &(dyn Fn(String) + Sync),
) -> bool {
    let pid = options.pid;
    match outcome {
        Some(KinetoOutcome::Written(path)) => {
            let size = std::fs::metadata(&path).map_or(0, |m| m.len());
            say(format!("pid {pid}: PyTorch: wrote {} ({})", path.display(), mlprof_model::human::bytes(size as f64)));
            if !crate::kineto_daemon::holds_op(&path) {
                say(format!(
                    "pid {pid}: PyTorch: its trace holds no op: the job ran no PyTorch op in the {} s traced (it was \
                     waiting, or not given a CPU); its Python stacks say on what",
                    options.duration.as_secs_f64()
                ));
            }
            return true;
        }
        Some(KinetoOutcome::Missing(why)) => say(format!("pid {pid}: PyTorch: no Kineto trace: {why}")),
        None if stopped_early => say(format!("pid {pid}: PyTorch: no Kineto trace: stopped before it was written")),
        None => {}
    }
    false
}

/// Stops `sampler` and writes what it recorded from `begin_ns` to `end_ns` into
/// `session`; returns whether a file was written.
async fn write_samples(
    sampler: Sampler,
    options: &AttachOptions,
    (begin_ns, end_ns): (i64, i64),
    session: &Path,
    say: &(dyn Fn(String) + Sync),
) -> bool {
    let recorded = sampler.window(begin_ns, end_ns);
    for note in sampler.take_notes() {
        say(note);
    }
    sampler.stop();
    let host = options.host.clone();
    let interval = interval_ns(options.sample_hz);
    let dir = session.to_path_buf();
    let written =
        tokio::task::spawn_blocking(move || file::write(&recorded, &host, (begin_ns, end_ns), interval, &dir))
            .await
            .ok();
    let Some(written) = written else { return false };
    written.lines.into_iter().for_each(say);
    written.path.is_some()
}

/// Says what each profiler-server capture gave; returns whether one wrote files.
async fn report_captures(captures: Vec<(u16, CaptureTask)>, pid: u32, say: &(dyn Fn(String) + Sync)) -> bool {
    let mut wrote = false;
    for (port, task) in captures {
        match task.await.ok().flatten() {
            Some(outcome) if !outcome.local_files().is_empty() => {
                wrote = true;
                say(format!("pid {pid}: profiler server {outcome}"));
            }
            Some(outcome) => say(format!("pid {pid}: port {port} gave no trace: {outcome}")),
            None => say(format!("pid {pid}: port {port}: the capture did not run")),
        }
    }
    wrote
}

/// A capture of one profiler server running in the background.
type CaptureTask = tokio::task::JoinHandle<Option<mlprof_capture::client::WorkerOutcome>>;

fn start_captures(ports: &[u16], logdir: &Path, session_id: &str, duration: Duration) -> Vec<(u16, CaptureTask)> {
    ports
        .iter()
        .map(|&port| {
            let mut options = CaptureOptions::new(logdir, session_id);
            options.duration = duration;
            // One try: a port that is not a profiler server is not worth a second.
            options.retries = 0;
            let target = Target::parse_list(&format!("127.0.0.1:{port}")).ok().and_then(|t| t.into_iter().next());
            let task = tokio::spawn(async move {
                let target = target?;
                capture(&[target], &options, Arc::new(NoProgress)).await.ok()?.into_iter().next()
            });
            (port, task)
        })
        .collect()
}
