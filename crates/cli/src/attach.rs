//! `mlprof attach PID`: record a running process without restarting it or changing its
//! code: its Python stacks and its children's, its `/proc` and the GPUs' counters, and a
//! profiler server it already serves. Parses the arguments and prints mlprof's lines
//! on stderr; the work is `mlprof_run::attach`.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use mlprof_run::attach::{AttachOptions, attach};

use crate::Failure;
use crate::capture::parse_duration;

/// Arguments of `mlprof attach`.
#[derive(Args)]
pub struct AttachArgs {
    /// The process to record (its child processes are sampled too).
    pid: u32,
    /// How long to record: a number with its unit (1500ms, 10s, 1m);
    /// Ctrl-C ends it sooner and keeps what was recorded.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    duration: Duration,
    /// TensorBoard log directory: the session goes to DIR/plugins/profile/<session>/
    /// (samples as <host>_python.xplane.pb, a captured profiler server as <host_port>.xplane.pb,
    /// a PyTorch process's Kineto trace as <host>_<pid>.pt.trace.json).
    #[arg(long, value_name = "DIR", default_value = ".")]
    logdir: PathBuf,
    /// Python stack samples per second of every thread.
    #[arg(long, value_name = "HZ", default_value_t = mlprof_run::sampling::DEFAULT_HZ,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(mlprof_run::sampling::MAX_HZ)))]
    sample_hz: u32,
    /// Do not sample native (C/C++) stacks with perf_event_open.
    #[arg(long)]
    no_native: bool,
}

/// Runs `mlprof attach`.
pub fn run(args: AttachArgs) -> Result<(), Failure> {
    if args.duration.is_zero() {
        return Err(Failure::input("--duration must be at least 1ms"));
    }
    let options = AttachOptions {
        pid: args.pid,
        duration: args.duration,
        logdir: args.logdir,
        host: mlprof_capture::server::hostname(),
        sample_hz: args.sample_hz,
        native_stacks: !args.no_native,
    };
    let runtime = crate::run::runtime()?;
    let began = std::time::Instant::now();
    let say = crate::run::say;
    let stop = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    let outcome = runtime.block_on(attach(&options, stop, &say)).map_err(|e| Failure::input(e.to_string()))?;
    if let Some(own) = mlprof_run::own_use::OwnUse::now(began) {
        say(own.to_string());
    }
    match outcome.session {
        Some(session) => {
            say(format!("analyze with: mlprof analyze {}", session.display()));
            Ok(())
        }
        None => Err(Failure::nothing(format!("nothing was recorded from pid {}", options.pid))),
    }
}
