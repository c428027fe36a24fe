//! Starting the server: discover the runs, bind, and serve until told to stop.
//!
//! [`Server::bind`] does everything that can fail for a reason the user should see
//! before the URL is printed (no profile at the path, port taken); [`Server::run_until`]
//! then serves. [`spawn_local`] starts one on an ephemeral port of 127.0.0.1 in the
//! background, for tests.

use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::catalog::Catalog;
use crate::connections::{self, DEFAULT_HEADER_READ_TIMEOUT, DEFAULT_MAX_CONNECTIONS, Limits};
use crate::error::ServeError;
use crate::rescan::DEFAULT_RESCAN_INTERVAL;
use crate::router::router;
use crate::security::AllowedHosts;
use crate::state::{AppState, DEFAULT_LOADED_RUNS};

/// What `mlprof serve` was asked for.
#[derive(Clone, Debug)]
pub struct Config {
    /// The profiles to serve: any path `mlprof analyze` accepts.
    pub path: PathBuf,
    /// The address or name to bind (default `127.0.0.1`).
    pub host: String,
    /// The port (default 6006; 0 picks a free one).
    pub port: u16,
    /// The directory for on-disk caches (default [`default_cache_dir`]).
    pub cache_dir: Option<PathBuf>,
    /// How many runs stay loaded in memory at once.
    pub loaded_runs: usize,
    /// The shortest time between two discoveries of the runs (`/api/runs` rediscovers
    /// them when the last one is older; zero: every time).
    pub rescan_interval: Duration,
    /// How long a connection may take to send complete request headers, counted from
    /// its opening or the end of its previous answer (default
    /// [`DEFAULT_HEADER_READ_TIMEOUT`], 10 s); the time a request then takes is not limited.
    pub header_read_timeout: Duration,
    /// How many connections are open at once, at most (default
    /// [`DEFAULT_MAX_CONNECTIONS`], 512); beyond it the one idle the longest is closed.
    pub max_connections: usize,
    /// Whether an address other machines can reach (not loopback) may be bound; without
    /// it, [`Server::bind`] refuses one with [`ServeError::RemoteNotAllowed`].
    pub allow_remote: bool,
    /// What the page names as the profiles' place (default: the path; the store's URL
    /// when the path is a mirror of one).
    pub shown_as: Option<String>,
}

impl Config {
    /// Serving `path` on 127.0.0.1:6006 with the default cache directory.
    pub fn new(path: impl Into<PathBuf>) -> Config {
        Config {
            path: path.into(),
            host: "127.0.0.1".into(),
            port: 6006,
            cache_dir: None,
            loaded_runs: DEFAULT_LOADED_RUNS,
            rescan_interval: DEFAULT_RESCAN_INTERVAL,
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            allow_remote: false,
            shown_as: None,
        }
    }
}

/// `$XDG_CACHE_HOME/mlprof`, else `$HOME/.cache/mlprof`, else `mlprof` in the
/// temporary directory.
pub fn default_cache_dir() -> PathBuf {
    let from_env = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(cache) = from_env("XDG_CACHE_HOME") {
        return cache.join("mlprof");
    }
    if let Some(home) = from_env("HOME") {
        return home.join(".cache").join("mlprof");
    }
    std::env::temp_dir().join("mlprof")
}

/// A server with its runs discovered and its port bound, not serving yet.
pub struct Server {
    listener: TcpListener,
    address: SocketAddr,
    allowed_hosts: AllowedHosts,
    state: Arc<AppState>,
    limits: Limits,
}

impl Server {
    /// Discovers the runs under `config.path` and binds `config.host:config.port`;
    /// refuses an address other machines can reach unless `config.allow_remote`.
    pub async fn bind(config: Config) -> Result<Server, ServeError> {
        let address_text = format_address(&config.host, config.port);
        if !config.allow_remote {
            refuse_remote(&config.host, config.port, &address_text).await?;
        }
        let path = config.path.clone();
        let catalog = tokio::task::spawn_blocking(move || Catalog::discover(&path))
            .await
            .map_err(|join| ServeError::Serve(std::io::Error::other(join.to_string())))??;
        let cache_dir = config.cache_dir.clone().unwrap_or_else(default_cache_dir);
        let state = Arc::new(
            AppState::new(catalog, cache_dir, config.loaded_runs)
                .with_rescan_interval(config.rescan_interval)
                .shown_as(config.shown_as),
        );
        let listener = TcpListener::bind((config.host.as_str(), config.port))
            .await
            .map_err(|source| ServeError::Bind { address: address_text.clone(), source })?;
        let address = listener.local_addr().map_err(|source| ServeError::Bind { address: address_text, source })?;
        if !config.allow_remote && !address.ip().is_loopback() {
            return Err(ServeError::RemoteNotAllowed { address: address.to_string() });
        }
        let allowed_hosts = AllowedHosts::for_listener(address, &config.host);
        let limits =
            Limits { header_read_timeout: config.header_read_timeout, max_connections: config.max_connections };
        Ok(Server { listener, address, allowed_hosts, state, limits })
    }

    /// The address actually bound (the real port when 0 was asked for).
    pub fn local_addr(&self) -> SocketAddr {
        self.address
    }

    /// Whether other machines can reach the address bound (it is not a loopback address).
    pub fn is_remote(&self) -> bool {
        !self.address.ip().is_loopback()
    }

    /// The page's URL: `http://ADDRESS:PORT/`.
    pub fn url(&self) -> String {
        format!("http://{}/", self.address)
    }

    /// The state the handlers share.
    pub fn state(&self) -> &Arc<AppState> {
        &self.state
    }

    /// Serves until `shutdown` completes, then lets open requests finish (a request
    /// still being received gets until the header-read timeout to arrive). Connections
    /// are bounded as [`crate::connections`] says.
    pub async fn run_until(self, shutdown: impl Future<Output = ()> + Send + 'static) -> Result<(), ServeError> {
        connections::serve(self.listener, router(self.state, self.allowed_hosts), self.limits, shutdown).await;
        Ok(())
    }

    /// Serves in a background task of the current tokio runtime until the returned
    /// handle is stopped or dropped.
    pub fn spawn(self) -> RunningServer {
        let url = self.url();
        let state = Arc::clone(&self.state);
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(self.run_until(async move {
            let _ = stopped.await;
        }));
        RunningServer { url, state, stop: Some(stop), task }
    }
}

/// Fails with [`ServeError::RemoteNotAllowed`] if `host` is or names an address other
/// machines can reach (any address but a loopback one, `0.0.0.0` and `::` included), so
/// that nothing is discovered or bound for it. A name that does not resolve is left to
/// the bind to report.
async fn refuse_remote(host: &str, port: u16, address_text: &str) -> Result<(), ServeError> {
    let Ok(mut addresses) = tokio::net::lookup_host((host, port)).await else { return Ok(()) };
    match addresses.find(|address| !address.ip().is_loopback()) {
        Some(address) if address.ip().to_string() == host => {
            Err(ServeError::RemoteNotAllowed { address: address_text.to_string() })
        }
        Some(address) => Err(ServeError::RemoteNotAllowed { address: format!("{address_text} ({address})") }),
        None => Ok(()),
    }
}

/// `host:port`, with brackets around an IPv6 address.
fn format_address(host: &str, port: u16) -> String {
    if host.contains(':') { format!("[{host}]:{port}") } else { format!("{host}:{port}") }
}

/// A server serving in the background (see [`Server::spawn`]); dropping it stops it.
pub struct RunningServer {
    url: String,
    state: Arc<AppState>,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<Result<(), ServeError>>,
}

impl RunningServer {
    /// The base URL, `http://127.0.0.1:PORT/`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The state the handlers share.
    pub fn state(&self) -> &Arc<AppState> {
        &self.state
    }

    /// Stops accepting connections and waits for open requests to finish.
    pub async fn stop(mut self) -> Result<(), ServeError> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match (&mut self.task).await {
            Ok(result) => result,
            Err(join) => Err(ServeError::Serve(std::io::Error::other(join.to_string()))),
        }
    }
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// Starts a server for `path` on an ephemeral port of 127.0.0.1 in the background of
/// the current tokio runtime, with its on-disk caches in `cache_dir`; for tests.
pub async fn spawn_local(path: &Path, cache_dir: &Path) -> Result<RunningServer, ServeError> {
    spawn_local_with(path, cache_dir, |_| ()).await
}

/// As [`spawn_local`], with the rest of the configuration changed by `adjust` first.
pub async fn spawn_local_with(
    path: &Path,
    cache_dir: &Path,
    adjust: impl FnOnce(&mut Config),
) -> Result<RunningServer, ServeError> {
    let mut config =
        Config { host: "127.0.0.1".into(), port: 0, cache_dir: Some(cache_dir.to_path_buf()), ..Config::new(path) };
    adjust(&mut config);
    Ok(Server::bind(config).await?.spawn())
}
