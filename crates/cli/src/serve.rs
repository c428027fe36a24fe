//! `mlprof serve`: the web UI over the profiles under a path, until Ctrl-C.
//!
//! The first line on stdout is always `mlprof serve: http://HOST:PORT/` with the port
//! actually bound (so `--port 0` works); scripts and the browser tests read it.

use std::io::Write;
use std::path::PathBuf;

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

/// Serves until Ctrl-C.
pub fn run(args: ServeArgs, verbose: bool) -> Result<(), Failure> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::input(format!("starting the server runtime: {e}")))?;
    runtime.block_on(async {
        let config = Config { host: args.host, port: args.port, cache_dir: args.cache_dir, ..Config::new(args.path) };
        let server = Server::bind(config).await.map_err(failure)?;
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
        if verbose {
            eprintln!("serving {} run(s); caches in {}", catalog.runs().len(), server.state().cache_dir().display());
        }
        server
            .run_until(async {
                // If the signal cannot be watched, serve until the process is killed.
                if tokio::signal::ctrl_c().await.is_err() {
                    std::future::pending::<()>().await;
                }
            })
            .await
            .map_err(failure)
    })
}

fn failure(error: ServeError) -> Failure {
    Failure::input(error.to_string())
}
