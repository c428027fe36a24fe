//! `mlprof capture ADDR[,ADDR…]`: profile running jobs over TensorFlow's profiler gRPC API
//! (`tf.profiler.experimental.server.start(port)`, `jax.profiler.start_server(port)`) into
//! a TensorBoard log directory, once or every `--every` with `--watch`.
//!
//! This module only parses arguments, shows progress and decides the exit code; the
//! capture itself is `mlprof_capture::client::capture`, and `--analyze` renders the new
//! session with the same code as `mlprof analyze`. Each worker ends in one line on stderr
//! (what was written, or why nothing was); the exit code is non-zero only when nothing at
//! all reached this machine. Everything printed passes through
//! `mlprof_capture::untrusted` (the servers' words, and the analysis of what they sent),
//! so no escape sequence from the network reaches the terminal.

use std::collections::HashMap;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use mlprof_capture::address::Target;
use mlprof_capture::client::{CaptureOptions, Progress, SessionIds, WorkerOutcome, WorkerState, capture};
use mlprof_capture::untrusted::{display_safe, display_safe_lines};
use mlprof_model::duration::parse_duration_ps;
use mlprof_model::human;

use crate::{AnalyzeFormat, Failure, analyze};

/// Arguments of `mlprof capture`.
#[derive(Args)]
pub struct CaptureArgs {
    /// Profiler servers: host:port, grpc://host:port or [::1]:port, comma-separated or as
    /// separate arguments; all are captured in parallel over the same time window.
    #[arg(required = true, value_name = "ADDR[,ADDR…]")]
    addresses: Vec<String>,
    /// How long to trace: a number with its unit (1500ms, 2s, 1m).
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    duration: Duration,
    /// TensorBoard log directory: profiles go to DIR/plugins/profile/<session>/<host_port>.xplane.pb.
    #[arg(long, value_name = "DIR", default_value = ".")]
    logdir: PathBuf,
    /// Host tracer level: 0 off, 1 user annotations, 2 also high-level ops, 3 verbose.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(0..=3))]
    host_tracer_level: u32,
    /// Device (GPU/TPU) tracer level: 0 off, 1 on.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(0..=1))]
    device_tracer_level: u32,
    /// Python tracer level: 0 off, 1 on.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=1))]
    python_tracer_level: u32,
    /// Start tracing this long from now on every worker (a number with its unit: 500ms, 2s).
    #[arg(long, value_name = "DURATION", default_value = "0", value_parser = parse_duration)]
    delay: Duration,
    /// Extra attempts after UNAVAILABLE (a refused connection included), ALREADY_EXISTS,
    /// UNKNOWN "Stream removed" or an empty trace; 2 gives TensorFlow's 3 attempts.
    #[arg(long, value_name = "N", default_value_t = 2)]
    retries: u32,
    /// A file whose first line is sent to every server as `authorization: Bearer TOKEN`:
    /// what an `mlprof agent`'s profiler port on a non-loopback address needs (the token
    /// it printed at start). It goes to every address given, so give it only when they are
    /// your own agents; a file keeps it out of the process list.
    #[arg(long, value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// Deadline of each attempt, connecting included (default: as TensorFlow's client,
    /// max(60s, 2 × duration) + delay).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    timeout: Option<Duration>,
    /// Then print the overview of the captured session (and the pod viewer when several
    /// workers were captured), as `mlprof analyze` does.
    #[arg(long)]
    analyze: bool,
    /// Capture again and again, each time into a new session, until Ctrl-C.
    #[arg(long)]
    watch: bool,
    /// With --watch: from the start of one capture to the start of the next (default 60s).
    #[arg(long, value_name = "DURATION", requires = "watch", value_parser = parse_duration)]
    every: Option<Duration>,
}

/// The period of `--watch` when `--every` is not given.
const DEFAULT_EVERY: Duration = Duration::from_secs(60);

/// Parses a duration argument: a number with its unit (`1500ms`, `2s`), or 0.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let ps = parse_duration_ps(text)?;
    Ok(Duration::from_nanos(u64::try_from(ps / 1000).unwrap_or(0)))
}

/// Runs `mlprof capture`.
pub fn run(args: CaptureArgs, verbose: bool) -> Result<(), Failure> {
    let targets = Target::parse_list(&args.addresses.join(",")).map_err(|e| Failure::input(e.to_string()))?;
    if args.duration.as_millis() == 0 {
        return Err(Failure::input("--duration must be at least 1ms"));
    }
    let every = args.every.unwrap_or(DEFAULT_EVERY);
    if every.is_zero() {
        return Err(Failure::input("--every must be longer than 0"));
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::input(format!("starting the capture runtime: {e}")))?;
    let mut ids = SessionIds::new();
    let captured_rounds = runtime.block_on(async {
        let mut interrupted = std::pin::pin!(tokio::signal::ctrl_c());
        let mut captured_rounds = 0usize;
        let mut next = tokio::time::Instant::now();
        loop {
            let round = capture_round(&targets, &args, &mut ids, verbose);
            let outcome = tokio::select! {
                outcome = round => outcome?,
                _ = &mut interrupted => {
                    eprintln!("interrupted (Ctrl-C) during a capture: its session is incomplete");
                    break;
                }
            };
            if let Some(session_dir) = outcome {
                captured_rounds += 1;
                if args.analyze {
                    match print_analysis(&session_dir, verbose) {
                        // Watching goes on: the next session may analyse fine.
                        Err(failure) if args.watch => {
                            eprintln!("mlprof: analyze: {}", failure.message)
                        }
                        result => result?,
                    }
                }
            }
            if !args.watch {
                break;
            }
            next += every;
            tokio::select! {
                _ = tokio::time::sleep_until(next) => {}
                _ = &mut interrupted => break,
            }
            next = next.max(tokio::time::Instant::now());
        }
        Ok::<_, Failure>(captured_rounds)
    })?;
    if captured_rounds == 0 {
        return Err(Failure::nothing("nothing was captured on this machine"));
    }
    Ok(())
}

/// One capture into a new session; returns the session directory when at least one
/// worker's profile is on this machine.
async fn capture_round(
    targets: &[Target],
    args: &CaptureArgs,
    ids: &mut SessionIds,
    verbose: bool,
) -> Result<Option<PathBuf>, Failure> {
    let mut options = CaptureOptions::new(&args.logdir, String::new());
    options.session_id = ids.next_now(&options.repository_root());
    options.duration = args.duration;
    options.delay = args.delay;
    options.host_tracer_level = args.host_tracer_level;
    options.device_tracer_level = args.device_tracer_level;
    options.python_tracer_level = args.python_tracer_level;
    options.retries = args.retries;
    if let Some(path) = &args.token_file {
        options.token = Some(read_token_file(path)?);
    }
    options.timeout = args.timeout;
    if verbose {
        eprintln!(
            "capturing {} into {} (deadline {} per attempt)",
            human::duration(duration_ps(options.duration)),
            options.session_dir().display(),
            human::duration(duration_ps(options.deadline()))
        );
    }
    let display = Arc::new(WorkerDisplay::new(targets, options.duration));
    let outcomes = capture(targets, &options, display.clone()).await.map_err(|e| Failure::input(e.to_string()))?;
    Ok(outcomes.iter().any(|o| !o.local_files().is_empty()).then(|| options.session_dir()))
}

/// Prints the overview of the session in `session_dir`, and the pod viewer when it has
/// several hosts, exactly as `mlprof analyze` renders them.
fn print_analysis(session_dir: &Path, verbose: bool) -> Result<(), Failure> {
    // Error messages may quote the server's data (host or plane names).
    let escaped = |f: Failure| Failure { code: f.code, message: display_safe(&f.message).into_owned() };
    render_analysis(session_dir, verbose).map_err(escaped)
}

fn render_analysis(session_dir: &Path, verbose: bool) -> Result<(), Failure> {
    let sessions = crate::load(session_dir, verbose)?;
    let hosts = sessions.first().map_or(0, |s| s.hosts.len());
    let tools: &[&str] = if hosts > 1 { &["overview_page", "pod_viewer"] } else { &["overview_page"] };
    for tool in tools {
        let request = analyze::Request::new(tool, AnalyzeFormat::Table);
        // Names in the report (ops, planes, hosts) come from the server's XSpace.
        crate::write_stdout(&display_safe_lines(&analyze::analyze(&sessions, &request)?))?;
    }
    Ok(())
}

fn duration_ps(d: Duration) -> i64 {
    i64::try_from(d.as_nanos().saturating_mul(1000)).unwrap_or(i64::MAX)
}

/// Shows the capture on stderr: live spinners when stderr is a terminal, otherwise one
/// plain line per worker when it is done.
enum WorkerDisplay {
    /// One spinner per worker, keyed by address; finished workers print their line above.
    Live { multi: MultiProgress, bars: HashMap<String, ProgressBar>, duration: Duration },
    /// Lines only.
    Plain,
}

impl WorkerDisplay {
    fn new(targets: &[Target], duration: Duration) -> WorkerDisplay {
        if !std::io::stderr().is_terminal() {
            return WorkerDisplay::Plain;
        }
        let multi = MultiProgress::new();
        let style = ProgressStyle::with_template("{spinner} {prefix}: {wide_msg}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner());
        let bars = targets
            .iter()
            .map(|t| {
                let bar = multi.add(ProgressBar::new_spinner().with_style(style.clone()).with_prefix(t.host_port()));
                bar.set_message("waiting");
                bar.enable_steady_tick(Duration::from_millis(120));
                (t.host_port(), bar)
            })
            .collect();
        WorkerDisplay::Live { multi, bars, duration }
    }
}

impl Progress for WorkerDisplay {
    fn update(&self, target: &Target, state: WorkerState) {
        let WorkerDisplay::Live { bars, duration, .. } = self else { return };
        let Some(bar) = bars.get(&target.host_port()) else { return };
        let message = match state {
            WorkerState::Connecting { attempt: 1, .. } => "connecting".to_string(),
            WorkerState::Connecting { attempt, attempts } => format!("connecting (attempt {attempt} of {attempts})"),
            WorkerState::Tracing => {
                format!("waiting: the job is tracing for {}", human::duration(duration_ps(*duration)))
            }
            WorkerState::Receiving { bytes } => format!("receiving {}", human::bytes(bytes as f64)),
            WorkerState::Writing => "writing".to_string(),
            WorkerState::Retrying { attempt, reason } => format!("attempt {attempt} failed: {reason}; retrying"),
        };
        bar.set_message(display_safe(&message).into_owned());
    }

    fn finished(&self, outcome: &WorkerOutcome) {
        // Already escaped where it came from the network; escaping again changes nothing.
        let line = display_safe(&outcome.to_string()).into_owned();
        match self {
            WorkerDisplay::Live { multi, bars, .. } => {
                if let Some(bar) = bars.get(&outcome.target.host_port()) {
                    bar.finish_and_clear();
                }
                if multi.println(&line).is_err() {
                    eprintln!("{line}");
                }
            }
            WorkerDisplay::Plain => eprintln!("{line}"),
        }
    }
}

/// The token on the first line of `path` (`--token-file`: a token in a file stays out of
/// the process list, where `ps` shows every argument).
pub(crate) fn read_token_file(path: &std::path::Path) -> Result<String, Failure> {
    let text =
        std::fs::read_to_string(path).map_err(|e| Failure::input(format!("--token-file {}: {e}", path.display())))?;
    let token = text.lines().next().unwrap_or("").trim();
    if token.is_empty() {
        return Err(Failure::input(format!("--token-file {}: its first line is empty", path.display())));
    }
    Ok(token.to_string())
}

#[cfg(test)]
mod tests {
    use super::parse_duration;
    use std::time::Duration;

    #[test]
    fn durations_take_units_or_plain_milliseconds() {
        assert_eq!(parse_duration("1500ms"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("1m"), Ok(Duration::from_secs(60)));
        assert!(parse_duration("250").is_err());
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("2 fortnights").is_err());
    }
}
