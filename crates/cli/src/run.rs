//! `mlprof run [OPTIONS] -- CMD ARGS…`: launch a job with no change to its code and
//! collect its framework's own traces (PyTorch through Kineto's on-demand mode, JAX and
//! TensorFlow through their profiler servers), and the GPU activity of other CUDA
//! programs (through `mlprof-inject`), into a TensorBoard log directory.
//!
//! This module parses the arguments, prints mlprof's lines on stderr (each starting
//! `mlprof:`, so they stand out among the job's) and returns the job's exit code as
//! mlprof's; the work is `mlprof_run::run_job`.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use mlprof_capture::untrusted::display_safe;
use mlprof_run::job::AgentAddress;
use mlprof_run::own_use::OwnUse;
use mlprof_run::{DeviceTracer, RunOptions, launch, run_job};

use crate::Failure;
use crate::capture::parse_duration;

/// Arguments of `mlprof run`.
#[derive(Args)]
pub struct RunArgs {
    /// TensorBoard log directory: traces go to DIR/plugins/profile/<session>/ (PyTorch as
    /// <host>_<pid>.pt.trace.json, JAX/TensorFlow as <host_port>.xplane.pb, other CUDA
    /// programs as <host>_<pid>.xplane.pb).
    #[arg(long, value_name = "DIR", default_value = ".")]
    logdir: PathBuf,
    /// How long each trace records: a number with a unit (1500ms, 2s, 1m) or plain
    /// milliseconds.
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    duration: Duration,
    /// PyTorch: trace this many whole training steps (N + 1 optimizer steps) instead of
    /// --duration (JAX and TensorFlow servers trace by time). Such a trace starts at the
    /// job's next step; a timed one first has Kineto warm up for 5 s with CUPTI on, which
    /// on a GPU slows the job about as much as tracing does.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=10_000))]
    steps: Option<u32>,
    /// From launch until the first trace may start. Each process is also given 5 s from
    /// when its framework is ready (PyTorch's first poll, the JAX/TensorFlow server up),
    /// so the first trace does not catch the job starting; Kineto then starts at its next
    /// poll (every few seconds).
    #[arg(long, value_name = "DURATION", default_value = "0", value_parser = parse_duration)]
    delay: Duration,
    /// Trace again every this long (from the start of one trace to the next), until the
    /// job exits; each trace is a new session.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    every: Option<Duration>,
    /// Who records the GPU work: `auto` drives PyTorch's, JAX's and TensorFlow's own
    /// tracers in their processes and records every other CUDA process with
    /// mlprof-inject (CUPTI); `cupti` records every CUDA process with mlprof-inject,
    /// frameworks included, and drives no framework tracer (for jobs that start no
    /// profiler of their own: one that does competes for CUPTI, and on an H200 the
    /// job's torch.profiler took the GPU activity from the injection).
    #[arg(long, value_name = "WHO", default_value = "auto", value_parser = ["auto", "cupti"])]
    device_tracer: String,
    /// Python stack samples per second of every thread of every Python process of the
    /// job (read from outside with py-spy, without stopping it); 0 turns stack sampling
    /// off (CPU, memory and I/O counters from /proc, and GPU counters from NVML, are
    /// still read, 10 per second). Each session's samples run from when its trace is due
    /// until its traces are written, the next --every, or the job's end: the whole run
    /// of a job nothing else traces.
    #[arg(long, value_name = "HZ", default_value_t = mlprof_run::sampling::DEFAULT_HZ,
          value_parser = clap::value_parser!(u32).range(0..=i64::from(mlprof_run::sampling::MAX_HZ)))]
    sample_hz: u32,
    /// Do not sample native (C/C++) stacks with perf_event_open.
    #[arg(long)]
    no_native: bool,
    /// Register the job with the node's agent (`mlprof agent`, by default on
    /// 127.0.0.1:7766): it lists the job as started by mlprof run and captures it through
    /// this run (from `mlprof agent capture`, its page, its probes). An agent on another
    /// address needs its token in MLPROF_AGENT_TOKEN. The job runs the same whether the
    /// agent is there or not; one that comes back later sees the job within a second.
    #[arg(long, value_name = "ADDR", num_args = 0..=1, require_equals = true,
          default_missing_value = mlprof_run::agent_link::DEFAULT_AGENT)]
    agent: Option<std::net::SocketAddr>,
    /// The job: a program and its arguments, after `--`.
    #[arg(required = true, last = true, value_name = "CMD")]
    command: Vec<OsString>,
}

/// Runs `mlprof run`: the job's exit code becomes mlprof's.
pub fn run(args: RunArgs, verbose: bool) -> Result<(), Failure> {
    if args.duration.is_zero() {
        return Err(Failure::input("--duration must be at least 1ms"));
    }
    if args.every.is_some_and(|every| every.is_zero()) {
        return Err(Failure::input("--every must be longer than 0"));
    }
    let agent = args.agent.map(|address| AgentAddress {
        address,
        token: std::env::var(mlprof_run::agent_link::TOKEN_VARIABLE).ok().filter(|t| !t.is_empty()),
    });
    let options = RunOptions {
        argv: args.command,
        logdir: args.logdir,
        duration: args.duration,
        steps: args.steps,
        delay: args.delay,
        every: args.every,
        host: mlprof_capture::server::hostname(),
        device_tracer: if args.device_tracer == "cupti" { DeviceTracer::Cupti } else { DeviceTracer::Auto },
        sample_hz: args.sample_hz,
        native_stacks: !args.no_native,
        agent,
    };
    let runtime = runtime()?;
    let began = std::time::Instant::now();
    let program = options.argv.first().map(|p| p.to_string_lossy().into_owned()).unwrap_or_default();
    let outcome = runtime.block_on(run_job(&options, &say)).map_err(|e| {
        // As a shell reports a command it cannot start: 127 not found, 126 not executable.
        let code = match e.kind() {
            std::io::ErrorKind::NotFound => 127,
            std::io::ErrorKind::PermissionDenied => 126,
            _ => 2,
        };
        Failure { code, message: format!("cannot run {}: {e}", display_safe(&program)) }
    })?;
    launch::restore_signals();
    if verbose || outcome.status.code() != Some(0) {
        say(format!("the job {}", launch::describe_exit(outcome.status)));
    }
    if let Some(own) = OwnUse::now(began) {
        say(own.to_string());
    }
    match outcome.sessions.as_slice() {
        [] => {}
        [one] => say(format!("analyze with: mlprof analyze {}", one.display())),
        _ => say(format!(
            "{} sessions; analyze with: mlprof analyze {}",
            outcome.sessions.len(),
            options.logdir.display()
        )),
    }
    match launch::exit_code(outcome.status) {
        0 => Ok(()),
        code => Err(Failure::quiet(code)),
    }
}

/// The runtime of `mlprof run` and `mlprof attach`: two worker threads (mlprof shares the
/// machine with the job), timers and sockets on.
pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Failure::input(format!("starting mlprof's runtime: {e}")))
}

/// Prints one of mlprof's lines on stderr, `mlprof: ` first so it stands out among the
/// job's; what the job or a process wrote, which lines may quote, is made safe to print.
pub(crate) fn say(line: String) {
    eprintln!("mlprof: {}", display_safe(&line));
}
