//! `mlprof serve`: the web UI over the profiles under a path, until Ctrl-C.
//!
//! The first line on stdout is always `mlprof serve: http://HOST:PORT/` with the port
//! actually bound (so `--port 0` works); scripts and the browser tests read it.
//!
//! Exposure: only a loopback address is bound unless `--allow-remote` is given, since the
//! UI has no authentication; with it, a warning says so on stderr. Connections are
//! bounded as `mlprof_web::connections` says (a header-read timeout, a connection cap),
//! and the soft limit on open files is raised to the hard one at start, so that open
//! connections do not starve the profiles of file descriptors.
//!
//! Stopping: the first Ctrl-C stops accepting connections and lets open requests
//! finish; a second one exits at once with code 130. Work still running on blocking
//! threads then (a trace index being built) gets [`BLOCKING_WORK_GRACE`] before the
//! process ends without it.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use mlprof_web::{Config, DEFAULT_MAX_CONNECTIONS, ServeError, Server};

use crate::Failure;

/// `mlprof serve` arguments.
#[derive(clap::Args)]
pub struct ServeArgs {
    /// The profiles to serve: a TensorBoard log directory, a session directory, an
    /// .xplane.pb file, a Kineto trace or a directory of per-rank traces; or an object
    /// store's log directory, s3://BUCKET/PREFIX or gs://BUCKET/PREFIX (mirrored into the
    /// cache directory and kept in step; credentials from the AWS_* variables).
    path: PathBuf,
    /// The port to listen on (0 picks a free one).
    #[arg(long, default_value_t = 6006)]
    port: u16,
    /// The address to listen on; the default only accepts connections from this machine
    /// (one other machines can reach needs --allow-remote).
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Allow an address other machines can reach (e.g. `--host 0.0.0.0`): anyone who can
    /// reach it can read the profiles, with no authentication.
    #[arg(long)]
    allow_remote: bool,
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
    let open_files = raise_open_file_limit(verbose);
    // Each connection is an open file: half of them at most, the rest for the profiles.
    let max_connections = open_files
        .and_then(|limit| usize::try_from(limit / 2).ok())
        .map_or(DEFAULT_MAX_CONNECTIONS, |half| half.clamp(1, DEFAULT_MAX_CONNECTIONS));
    let mut path = args.path;
    let mut mirror = None;
    let mut shown_as = None;
    if let Some(url) = path.to_str().filter(|p| mlprof_objects::StoreUrl::is_store_url(p)).map(str::to_string) {
        let cache = args.cache_dir.clone().unwrap_or_else(mlprof_web::default_cache_dir);
        let (served, mirrored) = crate::serve_store::mirror(&url, &cache).await?;
        path = served;
        mirror = Some(mirrored);
        shown_as = Some(url);
    }
    let config = Config {
        host: args.host,
        port: args.port,
        cache_dir: args.cache_dir,
        allow_remote: args.allow_remote,
        max_connections,
        shown_as,
        ..Config::new(path)
    };
    let server = Server::bind(config).await.map_err(failure)?;
    if server.is_remote() {
        eprintln!(
            "mlprof serve: warning: listening on {}, which other machines can reach: anyone who can reach it can \
             read the profiles (there is no authentication)",
            server.local_addr()
        );
    }
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
    if let Some(mirror) = mirror {
        crate::serve_store::keep_in_step(mirror);
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
    match error {
        ServeError::RemoteNotAllowed { .. } => {
            Failure::input(format!("{error}; add --allow-remote to listen there anyway"))
        }
        error => Failure::input(error.to_string()),
    }
}

/// Raises the soft limit on open files to the hard limit and returns the soft limit in
/// force then (`None` where it cannot be read); says so on stderr with `-v`.
#[cfg(unix)]
fn raise_open_file_limit(verbose: bool) -> Option<libc::rlim_t> {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes one `rlimit` into the valid, exclusive pointer it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return None;
    }
    if limit.rlim_cur >= limit.rlim_max {
        return Some(limit.rlim_cur);
    }
    let before = limit.rlim_cur;
    // macOS refuses a soft limit above OPEN_MAX (10,240) even when the hard one is
    // unlimited; that one is the next best.
    let candidates = [limit.rlim_max, limit.rlim_max.min(MACOS_OPEN_MAX)];
    for candidate in candidates.into_iter().filter(|&candidate| candidate > before) {
        let raised = libc::rlimit { rlim_cur: candidate, rlim_max: limit.rlim_max };
        // SAFETY: setrlimit only reads the valid pointer it is given.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            if verbose {
                eprintln!("mlprof serve: open-file limit raised from {before} to {candidate}");
            }
            return Some(candidate);
        }
    }
    Some(before)
}

/// Elsewhere the limit is left as it is, and not known.
#[cfg(not(unix))]
fn raise_open_file_limit(_verbose: bool) -> Option<u64> {
    None
}

/// macOS's OPEN_MAX: the highest soft limit on open files it accepts.
#[cfg(unix)]
const MACOS_OPEN_MAX: libc::rlim_t = 10_240;
