//! `mlprof agent` and `mlprof top`: the node's jobs, live. The agent's first stdout line
//! is `mlprof agent: http://ADDR/` with the port bound (so `--listen 127.0.0.1:0`
//! works; scripts and tests read it), then the profiler service's address when one was
//! asked for, then, for a non-loopback address, the token every request needs. `top` reads the agent's `/api/jobs` once (`--once`) or every second;
//! `mlprof agent capture PID` asks it for a capture and prints the session.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::ValueEnum;
use mlprof_agent::{Agent, AgentConfig, DEFAULT_LISTEN, WatchOptions, client};

use crate::Failure;

/// Arguments of `mlprof agent`.
#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct AgentArgs {
    /// Ask a running agent for something instead of running one.
    #[command(subcommand)]
    action: Option<AgentAction>,
    /// The address to serve on: loopback needs nothing, any other address a token
    /// (printed at start).
    #[arg(long, default_value = DEFAULT_LISTEN, value_name = "ADDR")]
    listen: SocketAddr,
    /// Also serve `tensorflow.ProfilerService` here (e.g. 127.0.0.1:6009): a capture of
    /// this port (`mlprof capture`, TensorBoard's Capture Profile) records every job the
    /// agent sees in one session. Loopback needs nothing; any other address the token.
    #[arg(long, value_name = "ADDR")]
    profiler_listen: Option<SocketAddr>,
    /// Python stack samples per second of each job's threads (0: none): enough to name
    /// the frames a job runs most, light enough to leave on.
    #[arg(long, value_name = "HZ", default_value_t = 5,
          value_parser = clap::value_parser!(u32).range(0..=i64::from(mlprof_run::sampling::MAX_HZ)))]
    sample_hz: u32,
    /// Watch every user's jobs (root only; otherwise only the agent's user's).
    #[arg(long)]
    all_users: bool,
    /// How often each job with a framework trace to take (a profiler server it listens
    /// on, Kineto's on-demand mode) is probed for 1 s of it, for its step time, input
    /// share and top op (0: never).
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = crate::capture::parse_duration)]
    probe_every: Duration,
    /// Capture a job for 2 s (into --data, as `mlprof agent capture`) when its probed
    /// step time is PCT percent above the median of its earlier probes; at most once in
    /// 10 minutes per job. Off unless given.
    #[arg(long, value_name = "PCT", value_parser = slowdown_percent)]
    capture_on_slowdown: Option<f64>,
    /// Where captures go: DIR/<job>-<pid>/ is a TensorBoard log directory per job
    /// (default: $XDG_DATA_HOME/mlprof/agent or ~/.local/share/mlprof/agent).
    #[arg(long, value_name = "DIR")]
    data: Option<PathBuf>,
    /// What is kept in --data: every job's signals each second (DIR/history/, the live
    /// page's history) and the captures, the oldest going first past a size (B, KB, MB,
    /// GB, TB) and anything older than an age (s, m, h, d); one or both, as `1GB,7d`.
    #[arg(long, value_name = "SIZE,AGE", default_value = "1GB,7d")]
    retain: mlprof_agent::history::Retain,
    /// Also upload every capture to an object store, in TensorBoard's layout
    /// (URL/<job>-<pid>/plugins/profile/<session>/), for XProf, TensorBoard and
    /// `mlprof serve URL`: s3://BUCKET/PREFIX (S3 or a compatible store) or
    /// gs://BUCKET/PREFIX (GCS, with HMAC keys); credentials and endpoint from the AWS_*
    /// variables. Give each node its own prefix.
    #[arg(long, value_name = "URL", value_parser = store_url)]
    upload: Option<mlprof_objects::StoreUrl>,
}

/// An object store URL (`s3://BUCKET/PREFIX`, `gs://BUCKET/PREFIX`).
pub(crate) fn store_url(text: &str) -> Result<mlprof_objects::StoreUrl, String> {
    mlprof_objects::StoreUrl::parse(text).map_err(|e| e.to_string())
}

/// What to ask a running agent.
#[derive(clap::Subcommand)]
enum AgentAction {
    /// Record one job the agent sees, as `mlprof attach` would (Python and native stacks
    /// at 100 Hz, counters, its profiler server, its Kineto trace), into the agent's data
    /// directory; prints the session. Several jobs may be captured at once.
    Capture(CaptureArgs),
}

/// Arguments of `mlprof agent capture`.
#[derive(clap::Args)]
struct CaptureArgs {
    /// The job (its pid, as `mlprof top` shows it).
    pid: u32,
    /// How long to record: a number with its unit (1500ms, 2s, 1m).
    #[arg(long, default_value = "2s", value_parser = crate::capture::parse_duration)]
    duration: Duration,
    /// The agent to ask.
    #[arg(long, default_value = DEFAULT_LISTEN, value_name = "ADDR")]
    agent: SocketAddr,
    /// The token of an agent on a non-loopback address (or MLPROF_AGENT_TOKEN); seen by
    /// anyone who lists processes, so prefer --token-file.
    #[arg(long, conflicts_with = "token_file")]
    token: Option<String>,
    /// A file whose first line is the token.
    #[arg(long, value_name = "FILE")]
    token_file: Option<PathBuf>,
}

/// Runs the agent until Ctrl-C or SIGTERM, or asks a running one.
pub fn run_agent(args: AgentArgs) -> Result<(), Failure> {
    if let Some(AgentAction::Capture(capture)) = args.action {
        return run_capture(capture);
    }
    // SAFETY: geteuid has no arguments and cannot fail.
    let euid = unsafe { libc::geteuid() };
    if args.all_users && euid != 0 {
        return Err(Failure::input("--all-users needs the agent to run as root"));
    }
    let data_dir = args
        .data
        .or_else(default_data_dir)
        .ok_or_else(|| Failure::input("no data directory: neither XDG_DATA_HOME nor HOME is set (give --data DIR)"))?;
    let upload = match &args.upload {
        Some(url) => Some(mlprof_objects::Store::open(url).map_err(|e| Failure::input(e.to_string()))?),
        None => None,
    };
    let config = AgentConfig {
        watch: WatchOptions { sample_hz: args.sample_hz, only_uid: (!args.all_users).then_some(euid) },
        probe_every: (!args.probe_every.is_zero()).then_some(args.probe_every),
        capture_on_slowdown: args.capture_on_slowdown,
        data_dir,
        retain: args.retain,
        host: mlprof_capture::server::hostname(),
        upload,
    };
    let runtime = crate::run::runtime()?;
    runtime.block_on(async {
        if let Some(store) = &config.upload {
            store.check().await.map_err(|e| Failure::input(format!("--upload: {e}")))?;
            eprintln!("mlprof agent: captures are also uploaded to {}", store.url());
        }
        let mut agent = Agent::bind(args.listen).await.map_err(|e| Failure::input(e.to_string()))?;
        let address = agent.local_addr().map_err(|e| Failure::input(format!("the bound address: {e}")))?;
        let profiler = match args.profiler_listen {
            Some(asked) => Some(agent.serve_profiler(asked).await.map_err(|e| Failure::input(e.to_string()))?),
            None => None,
        };
        let mut stdout = std::io::stdout().lock();
        let mut said = writeln!(stdout, "mlprof agent: http://{address}/ (jobs: /api/jobs, metrics: /metrics)");
        if let Some(profiler) = profiler {
            said = said.and_then(|()| {
                writeln!(
                    stdout,
                    "mlprof agent: profiler service on {profiler} (mlprof capture {profiler} records every job)"
                )
            });
        }
        if let Some(token) = agent.token() {
            let use_it = if address.ip().is_loopback() {
                "for the profiler port: mlprof capture --token-file FILE"
            } else {
                "send Authorization: Bearer TOKEN"
            };
            said = said.and_then(|()| writeln!(stdout, "mlprof agent: token: {token} ({use_it})"));
        }
        said.and_then(|()| stdout.flush()).map_err(|e| Failure::input(format!("writing the output: {e}")))?;
        drop(stdout);
        agent.run(config, stopped()).await;
        Ok(())
    })
}

/// A slowdown threshold: a positive number of percent (`25`, `25%`).
fn slowdown_percent(text: &str) -> Result<f64, String> {
    let number = text.trim().trim_end_matches('%').trim();
    match number.parse::<f64>() {
        Ok(percent) if percent.is_finite() && percent > 0.0 => Ok(percent),
        _ => Err(format!("{text:?} is not a positive percentage (e.g. 25)")),
    }
}

/// `$XDG_DATA_HOME/mlprof/agent`, else `~/.local/share/mlprof/agent`.
fn default_data_dir() -> Option<PathBuf> {
    let set = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    set("XDG_DATA_HOME")
        .or_else(|| set("HOME").map(|home| home.join(".local/share")))
        .map(|data| data.join("mlprof/agent"))
}

/// The token for a request: `--token-file`'s, `--token`, else `MLPROF_AGENT_TOKEN`.
fn token(given: Option<String>, file: Option<&std::path::Path>) -> Result<Option<String>, Failure> {
    if let Some(path) = file {
        return crate::capture::read_token_file(path).map(Some);
    }
    Ok(given.or_else(|| std::env::var(mlprof_run::agent_link::TOKEN_VARIABLE).ok().filter(|t| !t.is_empty())))
}

/// `mlprof agent capture`: prints what the capture said, then the session.
fn run_capture(args: CaptureArgs) -> Result<(), Failure> {
    let token = token(args.token, args.token_file.as_deref())?;
    let outcome = client::capture(args.agent, args.pid, args.duration, token.as_deref()).map_err(Failure::input)?;
    for line in &outcome.lines {
        eprintln!("mlprof: {line}");
    }
    if let Some(link) = &outcome.tools_link {
        eprintln!("mlprof: open it in every tool: {link}");
    }
    match outcome.session {
        Some(session) => crate::write_stdout(&format!("{}\n", session.display())),
        None => Err(Failure::nothing(format!("nothing was recorded from pid {}", args.pid))),
    }
}

/// Completes on Ctrl-C or SIGTERM.
async fn stopped() {
    use tokio::signal::unix::{SignalKind, signal};
    match (signal(SignalKind::interrupt()), signal(SignalKind::terminate())) {
        (Ok(mut interrupt), Ok(mut terminate)) => {
            tokio::select! {
                _ = interrupt.recv() => {}
                _ = terminate.recv() => {}
            }
        }
        _ => std::future::pending().await,
    }
}

/// How `mlprof top` prints.
#[derive(Clone, Copy, ValueEnum)]
enum TopFormat {
    /// A table for people.
    Table,
    /// The agent's `/api/jobs` answer.
    Json,
}

/// Arguments of `mlprof top`.
#[derive(clap::Args)]
pub struct TopArgs {
    /// The agent to ask.
    #[arg(long, default_value = DEFAULT_LISTEN, value_name = "ADDR")]
    agent: SocketAddr,
    /// The token of an agent on a non-loopback address (or MLPROF_AGENT_TOKEN); seen by
    /// anyone who lists processes, so prefer --token-file.
    #[arg(long, conflicts_with = "token_file")]
    token: Option<String>,
    /// A file whose first line is the token.
    #[arg(long, value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// Print one snapshot and exit.
    #[arg(long)]
    once: bool,
    /// Follow this job (its pid, as the list shows it): on a terminal, its detail from
    /// the start; printed, its line alone.
    #[arg(long, value_name = "PID")]
    follow: Option<u32>,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    format: TopFormat,
}

/// Shows the agent's jobs: on a terminal, the interactive screen (keys to sort, follow,
/// capture, open); otherwise (or with --once, or as JSON) printed once, or every second
/// until Ctrl-C.
pub fn run_top(args: TopArgs) -> Result<(), Failure> {
    let token = token(args.token, args.token_file.as_deref())?;
    if !args.once && matches!(args.format, TopFormat::Table) && mlprof_agent::top_screen::available() {
        return mlprof_agent::top_screen::run(args.agent, token, args.follow).map_err(Failure::nothing);
    }
    let width = std::env::var("COLUMNS").ok().and_then(|c| c.parse().ok()).unwrap_or(120);
    loop {
        let mut snapshot = client::snapshot(args.agent, token.as_deref()).map_err(Failure::nothing)?;
        if let Some(pid) = args.follow {
            snapshot.jobs.retain(|job| job.pid == pid);
            if snapshot.jobs.is_empty() {
                return Err(Failure::nothing(format!("the agent at {} sees no job with pid {pid}", args.agent)));
            }
        }
        let text = match args.format {
            TopFormat::Json => serde_json::to_string_pretty(&snapshot).map(|j| j + "\n").unwrap_or_default(),
            TopFormat::Table => mlprof_agent::top::render(&snapshot, width),
        };
        if args.once {
            return crate::write_stdout(&text);
        }
        // Home and clear, then the table: the screen shows the latest snapshot only.
        crate::write_stdout(&format!("\x1b[H\x1b[2J{text}"))?;
        std::thread::sleep(Duration::from_secs(1));
    }
}
