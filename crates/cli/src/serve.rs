//! `mlprof serve`: the web UI over the profiles under a path, until Ctrl-C.
//!
//! The first line on stdout is always `mlprof serve: http://HOST:PORT/` with the port
//! actually bound (so `--port 0` works); scripts and the browser tests read it.
//!
//! Stopping: the first Ctrl-C stops accepting connections and lets open requests
//! finish; a second one exits at once with code 130. Work still running on blocking
//! threads then (a trace index being built) gets [`BLOCKING_WORK_GRACE`] before the
//! process ends without it.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use mlprof_web::{Config, ServeError, Server};

use crate::Failure;

/// `mlprof serve` arguments.
#[derive(clap::Args)]
pub struct ServeArgs {
    /// The profiles to serve: a TensorBoard log directory, a session directory, an
    /// .xplane.pb file, a Kineto trace or a directory of per-rank traces.
    path: PathBuf,
    /// The port to listen on (0 picks a free one).
    #[arg(long, default_value_t = 6006)]
    port: u16,
    /// The address to listen on; the default only accepts connections from this machine.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Where the trace viewer keeps its indexes (default: $XDG_CACHE_HOME/mlprof or
    /// ~/.cache/mlprof).
    #[arg(long)]
    cache_dir: Option<PathBuf>,
}

/// How long blocking work (an index build) may go on after the server has stopped.
const BLOCKING_WORK_GRACE: Duration = Duration::from_secs(2);

/// The exit code after a second Ctrl-C (128 + SIGINT, as shells report it).
const INTERRUPTED_EXIT_CODE: i32 = 130;

/// Serves until Ctrl-C.
pub fn run(args: ServeArgs, verbose: bool) -> Result<(), Failure> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::input(format!("starting the server runtime: {e}")))?;
    let served = runtime.block_on(serve(args, verbose));
    runtime.shutdown_timeout(BLOCKING_WORK_GRACE);
    served
}

/// Binds, prints the URL and serves until Ctrl-C.
async fn serve(args: ServeArgs, verbose: bool) -> Result<(), Failure> {
    let config = Config { host: args.host, port: args.port, cache_dir: args.cache_dir, ..Config::new(args.path) };
    let server = Server::bind(config).await.map_err(failure)?;
    // Watched before the URL is printed, so a Ctrl-C right after it stops cleanly.
    let presses = CtrlC::watch();
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "mlprof serve: {}", server.url())
        .and_then(|()| stdout.flush())
        .map_err(|e| Failure::input(format!("writing the output: {e}")))?;
    drop(stdout);
    let catalog = server.state().catalog();
    for refused in catalog.refused() {
        eprintln!(
            "mlprof serve: not serving {}: it lies outside {} (a symbolic link)",
            refused.display(),
            catalog.root().display()
        );
    }
    for skipped in catalog.skipped() {
        eprintln!("mlprof serve: skipped {}: {}", skipped.path.display(), skipped.reason);
    }
    if verbose {
        eprintln!("serving {} run(s); caches in {}", catalog.runs().len(), server.state().cache_dir().display());
    }
    server.run_until(first_ctrl_c(presses)).await.map_err(failure)
}

/// Completes on the first Ctrl-C, after which a second one exits the process at once.
async fn first_ctrl_c(presses: std::io::Result<CtrlC>) {
    let Ok(mut presses) = presses else {
        // The signal cannot be watched: serve until the process is killed.
        return std::future::pending().await;
    };
    presses.next().await;
    eprintln!("mlprof serve: stopping once open requests finish (Ctrl-C again to stop now)");
    tokio::spawn(async move {
        presses.next().await;
        std::process::exit(INTERRUPTED_EXIT_CODE);
    });
}

/// The Ctrl-C presses from the moment it is created: one that comes between two
/// [`CtrlC::next`] calls is not lost.
struct CtrlC {
    #[cfg(unix)]
    signal: tokio::signal::unix::Signal,
}

impl CtrlC {
    /// Starts watching (within the runtime).
    fn watch() -> std::io::Result<CtrlC> {
        #[cfg(unix)]
        return Ok(CtrlC { signal: tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())? });
        #[cfg(not(unix))]
        return Ok(CtrlC {});
    }

    /// Waits for the next press (for ever if the signal can no longer be received).
    async fn next(&mut self) {
        #[cfg(unix)]
        let received = self.signal.recv().await.is_some();
        #[cfg(not(unix))]
        let received = tokio::signal::ctrl_c().await.is_ok();
        if !received {
            std::future::pending::<()>().await;
        }
    }
}

fn failure(error: ServeError) -> Failure {
    Failure::input(error.to_string())
}
