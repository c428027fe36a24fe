//! The `tensorflow.ProfilerService` implementation: `Profile` records this process for
//! the requested duration and answers with the XSpace; `Terminate` ends a running
//! `Profile` early; `Monitor` is UNIMPLEMENTED, as in TensorFlow's open-source server.
//! Of the request's options it honours the duration, `start_timestamp_ns`, `max_events`,
//! `override_hostname` and a host tracer level of 0 (nothing recorded: annotations are
//! all a Rust program records); device and Python levels have nothing to act on here.
//!
//! The design decision to know: everything a call holds — its place among the bounded
//! sessions, its `Terminate` registration and its recorder session — is owned by values
//! whose `Drop` releases it, so a call the client cancels (tonic then drops the handler
//! future) ends cleanly at whatever `await` it was waiting on.
//!
//! Unlike TensorFlow's server, this one never writes to its own disk: the reference
//! server saves to the `repository_root` the request names when `emit_xspace` is
//! unset, which lets anyone who can reach the port choose a path to write. Here the
//! XSpace always travels in the response: in `xspace` when the client asked with
//! `emit_xspace` (mlprof's client), else as one `tool_data` entry `xplane.pb`, which
//! TensorFlow's `client.trace` and TensorBoard's Capture Profile save on the client's
//! side as `<host_port>.xplane.pb`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use tonic::{Request, Response, Status};

use super::profiler::{Profiler, ProfilerOptions};
use super::recorder::{self, Collected};
use super::xspace::XSpace;
use crate::proto::{
    AdvancedConfig, MonitorRequest, MonitorResponse, ProfileOptions, ProfileRequest, ProfileResponse, ProfileToolData,
    TerminateRequest, TerminateResponse,
};
use crate::service::profiler_service_server::ProfilerService;

/// Longest `Profile` duration honoured; longer requests are shortened to it.
pub const MAX_DURATION_MS: u64 = 60 * 60 * 1000;
/// Longest wait for a `start_timestamp_ns` in the future; a later start begins after it.
pub const MAX_START_DELAY_MS: u64 = 5 * 60 * 1000;
/// Largest response the server sends: protobuf messages (and TF's gRPC clients) stop at
/// 2 GiB.
pub const MAX_RESPONSE_BYTES: usize = i32::MAX as usize;

/// State shared by the calls of one server.
#[derive(Debug)]
pub(crate) struct ServiceState {
    max_sessions: usize,
    hostname: String,
    next_key: AtomicU64,
    sessions: Mutex<Vec<SessionSlot>>,
}

#[derive(Debug)]
struct SessionSlot {
    key: u64,
    session_id: String,
    stop: Arc<Notify>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl ServiceState {
    /// A server allowing `max_sessions` concurrent `Profile` calls (at least 1), naming
    /// its profiles `hostname`.
    pub(crate) fn new(max_sessions: usize, hostname: String) -> ServiceState {
        ServiceState {
            max_sessions: max_sessions.max(1),
            hostname,
            next_key: AtomicU64::new(0),
            sessions: Mutex::new(Vec::new()),
        }
    }

    /// Takes one of the session places, or fails with ALREADY_EXISTS (which the
    /// reference client retries on).
    fn claim(self: &Arc<Self>, session_id: String) -> Result<Claim, Status> {
        let mut sessions = lock(&self.sessions);
        if sessions.len() >= self.max_sessions {
            return Err(Status::already_exists(format!(
                "{} profiling session(s) already running on this server (its limit); retry later",
                sessions.len()
            )));
        }
        let key = self.next_key.fetch_add(1, Ordering::Relaxed);
        let stop = Arc::new(Notify::new());
        sessions.push(SessionSlot { key, session_id, stop: Arc::clone(&stop) });
        Ok(Claim { state: Arc::clone(self), key, stop })
    }

    /// Ends the running `Profile` calls whose session id is `session_id`.
    fn terminate(&self, session_id: &str) {
        for slot in lock(&self.sessions).iter().filter(|s| s.session_id == session_id) {
            // `notify_one` keeps a permit when the call is not waiting yet.
            slot.stop.notify_one();
        }
    }

    /// Ends every running `Profile` call (server shutdown).
    pub(crate) fn terminate_all(&self) {
        for slot in lock(&self.sessions).iter() {
            slot.stop.notify_one();
        }
    }

    /// Number of `Profile` calls holding a session place.
    pub(crate) fn active_sessions(&self) -> usize {
        lock(&self.sessions).len()
    }
}

/// One call's session place; released on drop (also when the call is cancelled).
struct Claim {
    state: Arc<ServiceState>,
    key: u64,
    stop: Arc<Notify>,
}

impl Drop for Claim {
    fn drop(&mut self) {
        lock(&self.state.sessions).retain(|s| s.key != self.key);
    }
}

/// The `ProfilerService` of one server.
#[derive(Debug)]
pub(crate) struct Service {
    state: Arc<ServiceState>,
}

impl Service {
    pub(crate) fn new(state: Arc<ServiceState>) -> Service {
        Service { state }
    }
}

/// Nanoseconds from now until `start_ns` (Unix epoch), 0 when it has passed.
fn delay_until(start_ns: u64) -> Duration {
    let now = u64::try_from(recorder::now_ns()).unwrap_or(0);
    Duration::from_nanos(start_ns.saturating_sub(now))
}

/// Whether the request leaves host tracing on. From `version` 1 on, a zero level means
/// off; older clients leave every level 0 meaning "default" (on).
fn host_tracing_on(opts: &ProfileOptions) -> bool {
    opts.version == 0 || opts.host_tracer_level > 0
}

/// The host name the client asked the profile to carry: `override_hostname`, as an
/// option or in `advanced_configuration` (TensorFlow's clients use either).
fn requested_hostname(opts: &ProfileOptions) -> Option<String> {
    let advanced = opts.advanced_configuration.get("override_hostname").and_then(|v| match &v.value {
        Some(AdvancedConfig::StringValue(name)) => Some(name.clone()),
        _ => None,
    });
    advanced.or_else(|| Some(opts.override_hostname.clone())).filter(|name| !name.trim().is_empty())
}

#[tonic::async_trait]
impl ProfilerService for Service {
    async fn profile(&self, request: Request<ProfileRequest>) -> Result<Response<ProfileResponse>, Status> {
        let request = request.into_inner();
        let opts = request.opts.unwrap_or_default();
        let duration_ms = if opts.duration_ms > 0 { opts.duration_ms } else { request.duration_ms };
        let duration = Duration::from_millis(duration_ms.min(MAX_DURATION_MS));
        let session_id = if request.session_id.is_empty() { opts.session_id.clone() } else { request.session_id };
        let max_events = usize::try_from(request.max_events).unwrap_or(usize::MAX);
        let claim = self.state.claim(session_id)?;

        let mut terminated = false;
        if opts.start_timestamp_ns > 0 {
            let delay = delay_until(opts.start_timestamp_ns).min(Duration::from_millis(MAX_START_DELAY_MS));
            tokio::select! {
                () = tokio::time::sleep(delay) => {}
                () = claim.stop.notified() => terminated = true,
            }
        }
        let hostname = requested_hostname(&opts).unwrap_or_else(|| self.state.hostname.clone());
        let space = if terminated {
            XSpace::from_collected(Collected::empty(recorder::now_ns(), max_events), &hostname)
        } else if !host_tracing_on(&opts) {
            // Annotations are all this process records, and the client turned host tracing
            // off: the session lasts as asked and holds nothing.
            tokio::select! {
                () = tokio::time::sleep(duration) => {}
                () = claim.stop.notified() => {}
            }
            XSpace::from_collected(Collected::empty(recorder::now_ns(), max_events), &hostname)
        } else {
            let options = ProfilerOptions { max_events, hostname: Some(hostname) };
            // The process-wide bound (other servers, in-process profilers): the same answer
            // as this server's bound, which clients retry on.
            let profiler = Profiler::start_with(options).map_err(|e| Status::already_exists(e.to_string()))?;
            tokio::select! {
                () = tokio::time::sleep(duration) => {}
                () = claim.stop.notified() => {}
            }
            // Stopping and encoding walk every event: keep them off the async threads.
            tokio::task::spawn_blocking(move || profiler.stop())
                .await
                .map_err(|e| Status::internal(format!("collecting the profile failed: {e}")))?
        };
        drop(claim);
        let empty_trace = space.is_empty();
        let bytes = tokio::task::spawn_blocking(move || space.encode())
            .await
            .map_err(|e| Status::internal(format!("encoding the profile failed: {e}")))?;
        if bytes.len() > MAX_RESPONSE_BYTES {
            return Err(Status::resource_exhausted(format!(
                "the profile is {} bytes, over protobuf's 2 GiB limit; profile for less time or lower max_events",
                bytes.len()
            )));
        }
        let response = if request.emit_xspace {
            ProfileResponse { tool_data: Vec::new(), empty_trace, xspace: Some(bytes) }
        } else {
            ProfileResponse {
                tool_data: vec![ProfileToolData { name: "xplane.pb".to_string(), data: bytes }],
                empty_trace,
                xspace: None,
            }
        };
        Ok(Response::new(response))
    }

    async fn terminate(&self, request: Request<TerminateRequest>) -> Result<Response<TerminateResponse>, Status> {
        self.state.terminate(&request.into_inner().session_id);
        Ok(Response::new(TerminateResponse {}))
    }

    async fn monitor(&self, _request: Request<MonitorRequest>) -> Result<Response<MonitorResponse>, Status> {
        Err(Status::unimplemented("Monitor is not implemented (as in TensorFlow's open-source profiler server)"))
    }
}
