//! Starting and stopping the profiler server: [`serve`], [`ServerBuilder`] and the
//! [`ServerHandle`] that owns the running server.
//!
//! The design decision to know: the server runs on its own thread with its own
//! single-threaded tokio runtime, so a program that is not async (a training loop) can
//! start it with one call and never see tokio. The socket is bound on the caller's
//! thread, so a port in use is reported by `start()` and the bound address (port 0 →
//! a free port) is known when it returns. It binds 127.0.0.1 unless told otherwise: the
//! service hands this process's trace to whoever connects.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::sync::watch;
use tonic::transport::Server;
use tonic::transport::server::TcpIncoming;

use super::error::ServerError;
use super::platform;
use super::service::{MAX_RESPONSE_BYTES, Service, ServiceState};
use crate::service::profiler_service_server::ProfilerServiceServer;

/// TensorBoard's usual profiler port; what `mlprof capture` and the example default to.
pub const DEFAULT_PORT: u16 = 6009;
/// Concurrent `Profile` calls a server accepts unless told otherwise.
pub const DEFAULT_MAX_SESSIONS: usize = 4;
/// Largest request the server decodes: requests are small, so tonic's default is kept
/// (only responses, which carry the XSpace, need more).
const MAX_REQUEST_BYTES: usize = 4 << 20;
/// How long shutdown waits for calls to finish after it has terminated them.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Starts a profiler server on `127.0.0.1:port` (0: any free port) with the default
/// settings; keep the returned handle alive as long as the server should run.
pub fn serve(port: u16) -> Result<ServerHandle, ServerError> {
    ServerBuilder::new().port(port).start()
}

/// Settings of a profiler server before it starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerBuilder {
    ip: IpAddr,
    port: u16,
    max_sessions: usize,
    hostname: Option<String>,
}

impl Default for ServerBuilder {
    fn default() -> ServerBuilder {
        ServerBuilder::new()
    }
}

impl ServerBuilder {
    /// `127.0.0.1`, [`DEFAULT_PORT`], [`DEFAULT_MAX_SESSIONS`], the machine's host name.
    pub fn new() -> ServerBuilder {
        ServerBuilder {
            ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
            port: DEFAULT_PORT,
            max_sessions: DEFAULT_MAX_SESSIONS,
            hostname: None,
        }
    }

    /// The port to listen on (0: a free port, see [`ServerHandle::local_addr`]).
    pub fn port(mut self, port: u16) -> ServerBuilder {
        self.port = port;
        self
    }

    /// The address to listen on, e.g. `0.0.0.0` to accept remote captures (anyone who
    /// reaches the port can then read this process's trace).
    pub fn ip(mut self, ip: IpAddr) -> ServerBuilder {
        self.ip = ip;
        self
    }

    /// Address and port at once.
    pub fn addr(self, addr: SocketAddr) -> ServerBuilder {
        self.ip(addr.ip()).port(addr.port())
    }

    /// How many `Profile` calls may record at once (at least 1; the process-wide
    /// recorder allows [`super::MAX_SESSIONS`]); more get ALREADY_EXISTS,
    /// which TensorFlow's client retries on.
    pub fn max_sessions(mut self, max_sessions: usize) -> ServerBuilder {
        self.max_sessions = max_sessions.max(1);
        self
    }

    /// The host name written into the profiles this server returns (default: the
    /// machine's).
    pub fn hostname(mut self, hostname: impl Into<String>) -> ServerBuilder {
        self.hostname = Some(hostname.into());
        self
    }

    /// Binds the socket and starts serving on a new thread.
    pub fn start(self) -> Result<ServerHandle, ServerError> {
        let addr = SocketAddr::new(self.ip, self.port);
        let bind_error = |source| ServerError::Bind { addr, source };
        let listener = TcpListener::bind(addr).map_err(bind_error)?;
        let local_addr = listener.local_addr().map_err(bind_error)?;
        listener.set_nonblocking(true).map_err(bind_error)?;
        let runtime =
            tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(ServerError::Runtime)?;
        let hostname = self.hostname.unwrap_or_else(platform::hostname);
        let state = Arc::new(ServiceState::new(self.max_sessions, hostname));
        let (stop_tx, stop_rx) = watch::channel(false);
        let thread_state = Arc::clone(&state);
        let thread = std::thread::Builder::new()
            .name("mlprof-profiler-server".into())
            .spawn(move || runtime.block_on(run(listener, thread_state, stop_rx)))
            .map_err(ServerError::Runtime)?;
        Ok(ServerHandle { addr: local_addr, state, stop: stop_tx, thread: Some(thread) })
    }
}

/// Serves until `stop` turns true, then terminates running calls and gives them
/// [`SHUTDOWN_GRACE`] to answer.
async fn run(listener: TcpListener, state: Arc<ServiceState>, stop: watch::Receiver<bool>) -> Result<(), String> {
    let listener = tokio::net::TcpListener::from_std(listener).map_err(|e| e.to_string())?;
    let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
    let service = ProfilerServiceServer::new(Service::new(Arc::clone(&state)))
        .max_encoding_message_size(MAX_RESPONSE_BYTES)
        .max_decoding_message_size(MAX_REQUEST_BYTES);
    let stopped = |mut stop: watch::Receiver<bool>| async move {
        // An error means the handle is gone, which also asks to stop.
        let _ = stop.wait_for(|&s| s).await;
    };
    let signal = {
        let stop = stop.clone();
        let state = Arc::clone(&state);
        async move {
            stopped(stop).await;
            state.terminate_all();
        }
    };
    let server = Server::builder().add_service(service).serve_with_incoming_shutdown(incoming, signal);
    tokio::select! {
        result = server => result.map_err(|e| e.to_string()),
        () = async { stopped(stop).await; tokio::time::sleep(SHUTDOWN_GRACE).await } => Ok(()),
    }
}

/// A running profiler server. Dropping it shuts the server down, like
/// [`ServerHandle::shutdown`].
#[must_use = "the server shuts down when its handle is dropped"]
#[derive(Debug)]
pub struct ServerHandle {
    addr: SocketAddr,
    state: Arc<ServiceState>,
    stop: watch::Sender<bool>,
    thread: Option<JoinHandle<Result<(), String>>>,
}

impl ServerHandle {
    /// The address the server listens on (with the actual port when 0 was asked for).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Number of `Profile` calls recording right now.
    pub fn active_sessions(&self) -> usize {
        self.state.active_sessions()
    }

    /// Stops accepting calls, ends the running ones early (they answer with what they
    /// recorded so far) and waits for the server thread to finish: until clients have
    /// acknowledged the close, at most about 5 s. It blocks the calling thread; from
    /// async code, call it inside `spawn_blocking`.
    pub fn shutdown(mut self) -> Result<(), ServerError> {
        self.stop_and_join()
    }

    fn stop_and_join(&mut self) -> Result<(), ServerError> {
        let Some(thread) = self.thread.take() else { return Ok(()) };
        self.stop.send_replace(true);
        match thread.join() {
            Ok(result) => result.map_err(ServerError::Serve),
            Err(_) => Err(ServerError::Serve("the server thread panicked".into())),
        }
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        // Nobody is left to report a failure to.
        let _ = self.stop_and_join();
    }
}
