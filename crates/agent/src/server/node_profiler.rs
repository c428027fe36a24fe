//! The whole node behind one `tensorflow.ProfilerService`: a `Profile` call to the agent's
//! profiler port records every job the agent sees at once, each as `mlprof agent capture`
//! would (through its run, its profiler server, its Kineto client, its sampled stacks), and
//! answers with all their files. So `mlprof capture node1:PORT,node2:PORT`, TensorFlow's
//! `client.trace` or TensorBoard's Capture Profile take one session of every job of many
//! nodes, with no port per job to know.
//!
//! The design decisions: the files travel as `tool_data` entries named
//! `<job>-<pid>.<file>` (TensorFlow's clients, and mlprof's, write each as
//! `<host_port>.<name>` in the session, so every job stays its own host there); each
//! recording is also kept in the agent's data directory as a capture of that job; and the
//! port, like the agent's own, is open only on loopback unless a token was made for it,
//! which a call must then carry as `authorization: Bearer TOKEN`.

use std::net::SocketAddr;
use std::time::Duration;

use mlprof_capture::proto::{
    MonitorRequest, MonitorResponse, ProfileRequest, ProfileResponse, ProfileToolData, TerminateRequest,
    TerminateResponse,
};
use mlprof_capture::service::profiler_service_server::{ProfilerService, ProfilerServiceServer};
use tonic::{Request, Response, Status};

use super::{MAX_CAPTURE, Shared, constant_time_eq};

/// Largest answer sent: protobuf messages (and TensorFlow's gRPC clients) stop at 2 GiB.
const MAX_ANSWER_BYTES: usize = i32::MAX as usize;
/// Largest request read.
const MAX_REQUEST_BYTES: usize = 4 << 20;
/// The recording asked for when a request names no duration.
const DEFAULT_DURATION: Duration = Duration::from_secs(2);

/// The service.
struct NodeProfiler {
    shared: Shared,
}

/// Serves `tensorflow.ProfilerService` on `listener` until `stop` completes.
pub(super) async fn serve(
    listener: tokio::net::TcpListener,
    shared: Shared,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) {
    let incoming = tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
    let service = ProfilerServiceServer::new(NodeProfiler { shared })
        .max_encoding_message_size(MAX_ANSWER_BYTES)
        .max_decoding_message_size(MAX_REQUEST_BYTES);
    let served = tonic::transport::Server::builder().add_service(service).serve_with_incoming_shutdown(incoming, stop);
    if let Err(error) = served.await {
        eprintln!("mlprof agent: the profiler service stopped: {error}");
    }
}

/// Whether `address` may serve with no token.
pub(super) fn open_without_token(address: SocketAddr) -> bool {
    address.ip().is_loopback()
}

impl NodeProfiler {
    fn authorize<T>(&self, request: &Request<T>) -> Result<(), Status> {
        let Some(token) = &self.shared.token else { return Ok(()) };
        let given = request.metadata().get("authorization").and_then(|v| v.to_str().ok()).unwrap_or("");
        let expected = format!("Bearer {token}");
        if constant_time_eq(given.as_bytes(), expected.as_bytes()) {
            Ok(())
        } else {
            Err(Status::unauthenticated(
                "this agent's profiler port needs its token (`mlprof capture --token TOKEN`; printed by the agent at start)",
            ))
        }
    }
}

#[tonic::async_trait]
impl ProfilerService for NodeProfiler {
    async fn profile(&self, request: Request<ProfileRequest>) -> Result<Response<ProfileResponse>, Status> {
        self.authorize(&request)?;
        let request = request.into_inner();
        let asked = request.opts.as_ref().map_or(0, |o| o.duration_ms).max(request.duration_ms);
        let duration = if asked == 0 { DEFAULT_DURATION } else { Duration::from_millis(asked).min(MAX_CAPTURE) };
        let outcomes = super::capture_every_job(&self.shared, duration).await;
        if outcomes.is_empty() {
            return Err(Status::not_found("no ML job on this node that this agent may capture (see its /api/jobs)"));
        }
        let mut tool_data = Vec::new();
        let mut bytes = 0usize;
        let mut said = Vec::new();
        for (folder, outcome) in &outcomes {
            let Some(session) = outcome.as_ref().ok().and_then(|o| o.session.as_ref()) else {
                let lines = match outcome {
                    Ok(o) | Err(o) => o.lines.join("; "),
                };
                said.push(format!("{folder}: {lines}"));
                continue;
            };
            for (name, data) in session_files(session).map_err(|e| Status::internal(e.to_string()))? {
                bytes = bytes.saturating_add(data.len());
                if bytes > MAX_ANSWER_BYTES {
                    return Err(Status::resource_exhausted(format!(
                        "the node's recordings pass 2 GiB, more than one answer may carry: ask for a shorter \
                         duration (they are kept in the agent's data directory, {})",
                        self.shared.data_dir.display()
                    )));
                }
                tool_data.push(ProfileToolData { name: format!("{folder}.{name}"), data });
            }
        }
        for line in &said {
            eprintln!("mlprof agent: profiler service: nothing recorded of {line}");
        }
        if tool_data.is_empty() {
            return Err(Status::unavailable(format!("nothing could be recorded: {}", said.join(" | "))));
        }
        Ok(Response::new(ProfileResponse { tool_data, empty_trace: false, ..Default::default() }))
    }

    async fn terminate(&self, request: Request<TerminateRequest>) -> Result<Response<TerminateResponse>, Status> {
        self.authorize(&request)?;
        Err(Status::unimplemented("a node's capture cannot be ended early; it ends after the duration asked"))
    }

    async fn monitor(&self, request: Request<MonitorRequest>) -> Result<Response<MonitorResponse>, Status> {
        self.authorize(&request)?;
        Err(Status::unimplemented("Monitor is not served (as in TensorFlow's open-source server)"))
    }
}

/// The files of a session directory (name, bytes), by name.
fn session_files(session: &std::path::Path) -> std::io::Result<Vec<(String, Vec<u8>)>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(session)? {
        let entry = entry?;
        if !entry.file_type()?.is_file() {
            continue;
        }
        let Some(name) = entry.file_name().to_str().map(str::to_string) else { continue };
        files.push((name, std::fs::read(entry.path())?));
    }
    files.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(files)
}
