//! The whole node behind one `tensorflow.ProfilerService`: a `Profile` call to the agent's
//! profiler port records every job the agent sees at once, each as `mlprof agent capture`
//! would (through its run, its profiler server, its Kineto client, its sampled stacks), and
//! answers with all their files (one node capture at a time, at most 1 GiB). So `mlprof capture node1:PORT,node2:PORT`, TensorFlow's
//! `client.trace` or TensorBoard's Capture Profile take one session of every job of many
//! nodes, with no port per job to know.
//!
//! The design decisions: the files travel as `tool_data` entries named
//! `<job>-<pid>.<file>` (TensorFlow's clients, and mlprof's, write each as
//! `<host_port>.<name>` in the session, so every job stays its own host there); each
//! recording is also kept in the agent's data directory as a capture of that job; and the
//! port, like the agent's own, is open only on loopback unless a token was made for it,
//! which a call must then carry as `authorization: Bearer TOKEN` (`mlprof capture
//! --token-file`).

use std::net::SocketAddr;
use std::time::Duration;

use mlprof_capture::proto::{
    MonitorRequest, MonitorResponse, ProfileRequest, ProfileResponse, ProfileToolData, TerminateRequest,
    TerminateResponse,
};
use mlprof_capture::service::profiler_service_server::{ProfilerService, ProfilerServiceServer};
use tonic::{Request, Response, Status};

use super::{MAX_CAPTURE, Shared, constant_time_eq};

/// Largest answer sent, bytes: protobuf messages (and TensorFlow's gRPC clients) stop at
/// 2 GiB, and the agent holds an answer in memory twice while it is encoded.
const MAX_ANSWER_BYTES: u64 = 1 << 30;
/// Largest request read.
const MAX_REQUEST_BYTES: usize = 4 << 20;
/// The recording asked for when a request names no duration.
const DEFAULT_DURATION: Duration = Duration::from_secs(2);

/// The service.
struct NodeProfiler {
    shared: Shared,
    /// One node capture at a time: each holds its whole answer in memory.
    busy: tokio::sync::Semaphore,
}

/// Serves `tensorflow.ProfilerService` on `listener` until `stop` completes.
pub(super) async fn serve(
    listener: tokio::net::TcpListener,
    shared: Shared,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) {
    let incoming = tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
    let service = ProfilerServiceServer::new(NodeProfiler { shared, busy: tokio::sync::Semaphore::new(1) })
        .max_encoding_message_size(i32::MAX as usize)
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
                "this agent's profiler port needs its token (printed by the agent at start; `mlprof capture --token-file FILE`)",
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
        let Ok(_busy) = self.busy.try_acquire() else {
            return Err(Status::already_exists("another capture of this node is running: try again when it ends"));
        };
        let outcomes = super::capture_every_job(&self.shared, duration).await;
        if outcomes.is_empty() {
            return Err(Status::not_found("no ML job on this node that this agent may capture (see its /api/jobs)"));
        }
        let mut files = Vec::new();
        let mut said = Vec::new();
        for (folder, outcome) in &outcomes {
            let session = outcome.as_ref().ok().and_then(|o| o.session.as_ref());
            let Some(session) = session else {
                let lines = match outcome {
                    Ok(o) | Err(o) => o.lines.join("; "),
                };
                said.push(format!("{folder}: {lines}"));
                continue;
            };
            match session_files(session, &self.shared.data_dir.join(folder)) {
                Ok(found) => {
                    files.extend(found.into_iter().map(|(name, path, bytes)| (format!("{folder}.{name}"), path, bytes)))
                }
                Err(why) => said.push(format!("{folder}: {why}")),
            }
        }
        for line in &said {
            eprintln!("mlprof agent: profiler service: nothing recorded of {line}");
        }
        if files.is_empty() {
            return Err(Status::unavailable(format!("nothing could be recorded: {}", said.join(" | "))));
        }
        let total: u64 = files.iter().map(|(_, _, bytes)| bytes).sum();
        if total > MAX_ANSWER_BYTES {
            return Err(Status::resource_exhausted(format!(
                "the node's recordings hold {}, more than one answer carries ({}): ask for a shorter \
                 duration (they are kept in the agent's data directory, {})",
                mlprof_model::human::bytes(total as f64),
                mlprof_model::human::bytes(MAX_ANSWER_BYTES as f64),
                self.shared.data_dir.display()
            )));
        }
        let mut tool_data = Vec::with_capacity(files.len());
        let mut left = MAX_ANSWER_BYTES;
        for (name, path, _) in files {
            let data = read_regular(&path, left).map_err(|e| Status::internal(format!("{}: {e}", path.display())))?;
            left -= data.len() as u64;
            tool_data.push(ProfileToolData { name, data });
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

/// The regular files of a session directory (name, path, size in bytes), by name. The
/// directory must lie inside `logdir`, the job's folder of the data directory: a run that
/// registered reports the session it wrote, and the agent reads only what is its own to
/// read. Links are left out.
fn session_files(
    session: &std::path::Path,
    logdir: &std::path::Path,
) -> Result<Vec<(String, std::path::PathBuf, u64)>, String> {
    let inside = match (session.canonicalize(), logdir.canonicalize()) {
        (Ok(session), Ok(logdir)) => session.starts_with(&logdir).then_some(session),
        _ => None,
    };
    let Some(session) = inside else {
        return Err(format!("its session {} is not in {}", session.display(), logdir.display()));
    };
    let mut files = Vec::new();
    let entries = std::fs::read_dir(&session).map_err(|e| format!("{}: {e}", session.display()))?;
    for entry in entries.filter_map(Result::ok) {
        let Ok(metadata) = entry.metadata() else { continue };
        let Some(name) = entry.file_name().to_str().map(str::to_string) else { continue };
        // `DirEntry::metadata` does not follow links.
        if metadata.is_file() {
            files.push((name, entry.path(), metadata.len()));
        }
    }
    files.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(files)
}

/// A regular file's bytes, never through a link (one swapped in since it was listed), and
/// at most `limit` of them: a file grown past that since it was listed is refused.
fn read_regular(path: &std::path::Path, limit: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW).open(path)?;
    let metadata = file.metadata()?;
    if !metadata.is_file() || metadata.len() > limit {
        return Err(std::io::Error::other("not a regular file of a session within the answer's size"));
    }
    let mut data = Vec::with_capacity(usize::try_from(metadata.len()).unwrap_or(0));
    file.take(limit.saturating_add(1)).read_to_end(&mut data)?;
    if data.len() as u64 > limit {
        return Err(std::io::Error::other("it grew past the answer's size while read"));
    }
    Ok(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_of_a_session_inside_the_jobs_folder_are_sent() {
        let data = tempfile::tempdir().expect("temp dir");
        let logdir = data.path().join("train.py-42");
        let session = logdir.join("plugins/profile/s1");
        std::fs::create_dir_all(&session).expect("dirs");
        std::fs::write(session.join("vm_python.xplane.pb"), b"xs").expect("write");
        let secret = data.path().join("secret");
        std::fs::write(&secret, b"root's").expect("write");
        std::os::unix::fs::symlink(&secret, session.join("linked.xplane.pb")).expect("link");
        let files = session_files(&session, &logdir).expect("a session inside");
        let names: Vec<&str> = files.iter().map(|(name, _, _)| name.as_str()).collect();
        assert_eq!(names, ["vm_python.xplane.pb"]);
        assert_eq!(read_regular(&files[0].1, 2).expect("read"), b"xs");
        assert!(read_regular(&files[0].1, 1).is_err(), "past the answer's size");
        assert!(read_regular(&session.join("linked.xplane.pb"), 100).is_err(), "never through a link");
        // A session a run reports outside the job's folder (its own, or /etc) is refused.
        assert!(session_files(data.path(), &logdir).unwrap_err().contains("is not in"));
        let outside = data.path().join("elsewhere");
        std::fs::create_dir(&outside).expect("dir");
        std::os::unix::fs::symlink(&outside, logdir.join("plugins/profile/s2")).expect("link");
        assert!(session_files(&logdir.join("plugins/profile/s2"), &logdir).is_err());
    }
}
