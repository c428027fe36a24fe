//! `mlprof agent` and `mlprof top`: the node's jobs, live. The agent's first stdout line
//! is `mlprof agent: http://ADDR/` with the port bound (so `--listen 127.0.0.1:0`
//! works; scripts and tests read it), then, for a non-loopback address, the token every
//! request needs. `top` reads the agent's `/api/jobs` once (`--once`) or every second.

use std::io::Write;
use std::net::SocketAddr;
use std::time::Duration;

use clap::ValueEnum;
use mlprof_agent::{Agent, DEFAULT_LISTEN, WatchOptions, client};

use crate::Failure;

/// Arguments of `mlprof agent`.
#[derive(clap::Args)]
pub struct AgentArgs {
    /// The address to serve on: loopback needs nothing, any other address a token
    /// (printed at start).
    #[arg(long, default_value = DEFAULT_LISTEN, value_name = "ADDR")]
    listen: SocketAddr,
    /// Python stack samples per second of each job's threads (0: none): enough to name
    /// the frames a job runs most, light enough to leave on.
    #[arg(long, value_name = "HZ", default_value_t = 5,
          value_parser = clap::value_parser!(u32).range(0..=i64::from(mlprof_run::sampling::MAX_HZ)))]
    sample_hz: u32,
    /// Watch every user's jobs (root only; otherwise only the agent's user's).
    #[arg(long)]
    all_users: bool,
}

/// Runs the agent until Ctrl-C or SIGTERM.
pub fn run_agent(args: AgentArgs) -> Result<(), Failure> {
    // SAFETY: geteuid has no arguments and cannot fail.
    let euid = unsafe { libc::geteuid() };
    if args.all_users && euid != 0 {
        return Err(Failure::input("--all-users needs the agent to run as root"));
    }
    let options = WatchOptions { sample_hz: args.sample_hz, only_uid: (!args.all_users).then_some(euid) };
    let runtime = crate::run::runtime()?;
    runtime.block_on(async {
        let agent = Agent::bind(args.listen).await.map_err(|e| Failure::input(e.to_string()))?;
        let address = agent.local_addr().map_err(|e| Failure::input(format!("the bound address: {e}")))?;
        let mut stdout = std::io::stdout().lock();
        let mut said = writeln!(stdout, "mlprof agent: http://{address}/ (jobs: /api/jobs, metrics: /metrics)");
        if let Some(token) = agent.token() {
            said =
                said.and_then(|()| writeln!(stdout, "mlprof agent: token: {token} (send Authorization: Bearer TOKEN)"));
        }
        said.and_then(|()| stdout.flush()).map_err(|e| Failure::input(format!("writing the output: {e}")))?;
        drop(stdout);
        agent.run(options, stopped()).await;
        Ok(())
    })
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
    /// The token of an agent on a non-loopback address (or MLPROF_AGENT_TOKEN).
    #[arg(long)]
    token: Option<String>,
    /// Print one snapshot and exit.
    #[arg(long)]
    once: bool,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    format: TopFormat,
}

/// Prints the agent's jobs once, or every second until Ctrl-C.
pub fn run_top(args: TopArgs) -> Result<(), Failure> {
    let token = args.token.or_else(|| std::env::var("MLPROF_AGENT_TOKEN").ok().filter(|t| !t.is_empty()));
    let width = std::env::var("COLUMNS").ok().and_then(|c| c.parse().ok()).unwrap_or(120);
    loop {
        let snapshot = client::snapshot(args.agent, token.as_deref()).map_err(Failure::nothing)?;
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
