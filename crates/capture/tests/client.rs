//! The capture client end to end against a scripted `tensorflow.ProfilerService` on
//! loopback, and against ports that refuse, stay silent or answer garbage.

mod support;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use mlprof_capture::address::Target;
use mlprof_capture::client::{
    CaptureError, CaptureOptions, Captured, NoProgress, Progress, WorkerOutcome, WorkerState, capture,
};
use support::{Reply, empty_trace, nothing, serve, tool_data, xspace};
use tonic::Code;

const SESSION: &str = "2026_03_07_09_05_01";

fn options(logdir: &Path) -> CaptureOptions {
    let mut options = CaptureOptions::new(logdir, SESSION);
    options.duration = Duration::from_millis(20);
    options.retry_pause = Duration::from_millis(10);
    options
}

fn target(addr: impl std::fmt::Display) -> Target {
    Target::parse(&addr.to_string()).expect("valid address")
}

async fn capture_one(target: Target, options: &CaptureOptions) -> WorkerOutcome {
    let mut outcomes = capture(&[target], options, Arc::new(NoProgress)).await.expect("valid options");
    assert_eq!(outcomes.len(), 1);
    outcomes.remove(0)
}

/// Every file below `dir`, relative to it.
fn files_below(dir: &Path) -> Vec<PathBuf> {
    fn walk(dir: &Path, root: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, root, out);
            } else {
                out.push(path.strip_prefix(root).map(Path::to_path_buf).unwrap_or(path));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// Records every progress call.
#[derive(Default)]
struct Recorder {
    states: Mutex<Vec<WorkerState>>,
    finished: Mutex<Vec<String>>,
}

impl Progress for Recorder {
    fn update(&self, _: &Target, state: WorkerState) {
        self.states.lock().unwrap().push(state);
    }

    fn finished(&self, outcome: &WorkerOutcome) {
        self.finished.lock().unwrap().push(outcome.to_string());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_xspace_answer_is_written_byte_identical() {
    // Larger than tonic's 4 MiB default limit, which the client must lift.
    let bytes = support::padded_xspace(5 << 20);
    assert_eq!(bytes.len(), 5 << 20);
    let (addr, fake) = serve(vec![xspace(bytes.clone())]).await;
    let logdir = tempfile::tempdir().unwrap();
    let recorder = Arc::new(Recorder::default());
    let outcomes = capture(&[target(addr)], &options(logdir.path()), recorder.clone()).await.unwrap();
    let outcome = &outcomes[0];
    let expected = logdir.path().join(format!("plugins/profile/{SESSION}/127.0.0.1_{}.xplane.pb", addr.port()));
    assert_eq!(
        outcome.result.as_ref().unwrap(),
        &Captured::Written { files: vec![expected.clone()], bytes: bytes.len() as u64, tool_data: false }
    );
    assert_eq!(outcome.attempts, 1);
    assert!(std::fs::read(&expected).unwrap() == bytes, "byte for byte");
    assert_eq!(files_below(logdir.path()).len(), 1, "no temporary file left");
    let requests = fake.requests();
    assert_eq!(requests.len(), 1);
    let request = &requests[0];
    assert!(request.emit_xspace);
    assert_eq!(request.host_name, format!("127.0.0.1:{}", addr.port()));
    assert_eq!(request.session_id, SESSION);
    assert_eq!(request.duration_ms, 20);
    let root = std::path::absolute(logdir.path()).unwrap().join("plugins/profile");
    assert_eq!(Path::new(&request.repository_root), root, "absolute, so the server's path means something");
    let states = recorder.states.lock().unwrap().clone();
    assert_eq!(states.first(), Some(&WorkerState::Connecting { attempt: 1, attempts: 3 }));
    assert!(states.contains(&WorkerState::Tracing) && states.last() == Some(&WorkerState::Writing), "{states:?}");
    let received = states.iter().rev().find_map(|s| match s {
        WorkerState::Receiving { bytes } => Some(*bytes),
        _ => None,
    });
    // The counting body saw the whole gRPC message: the XSpace plus its protobuf and gRPC framing.
    assert!(received.is_some_and(|b| b > bytes.len() as u64 && b < bytes.len() as u64 + 64), "{received:?}");
    let finished = recorder.finished.lock().unwrap().clone();
    assert_eq!(finished, [outcome.to_string()]);
    assert!(finished[0].starts_with(&format!("127.0.0.1:{}: wrote {}", addr.port(), expected.display())));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_data_from_old_servers_is_written_per_tool() {
    let gz: &[u8] = &[0x1f, 0x8b, 8, 0, 9, 9];
    let (addr, _) = serve(vec![tool_data(&[("xplane.pb", &support::tiny_xspace()), ("trace.json.gz", gz)])]).await;
    let logdir = tempfile::tempdir().unwrap();
    let outcome = capture_one(target(addr), &options(logdir.path())).await;
    let captured = outcome.result.unwrap();
    assert!(matches!(captured, Captured::Written { bytes: 9, tool_data: true, .. }), "{captured:?}");
    let session = logdir.path().join("plugins/profile").join(SESSION);
    let stem = format!("127.0.0.1_{}", addr.port());
    assert_eq!(std::fs::read(session.join(format!("{stem}.xplane.pb"))).unwrap(), support::tiny_xspace());
    assert_eq!(std::fs::read(session.join(format!("{stem}.trace.json.gz"))).unwrap(), gz, "stored as sent");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_for_an_xspace_is_an_error_and_writes_nothing() {
    let (addr, fake) = serve(vec![xspace(support::noise(4096, 7))]).await;
    let logdir = tempfile::tempdir().unwrap();
    let outcome = capture_one(target(addr), &options(logdir.path())).await;
    assert!(matches!(outcome.result, Err(CaptureError::InvalidXspace { bytes: 4096, .. })), "{outcome}");
    assert_eq!((outcome.attempts, fake.requests().len()), (1, 1), "not retried");
    let line = outcome.to_string();
    assert!(line.contains(": the server sent an invalid XSpace (4096 bytes: byte offset "), "{line}");
    assert!(files_below(logdir.path()).is_empty(), "no file, no session directory");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_with_neither_says_where_the_server_wrote_it() {
    let (addr, _) = serve(vec![nothing()]).await;
    let logdir = tempfile::tempdir().unwrap();
    let outcome = capture_one(target(addr), &options(logdir.path())).await;
    let server_path = std::path::absolute(logdir.path())
        .unwrap()
        .join(format!("plugins/profile/{SESSION}/127.0.0.1_{}.xplane.pb", addr.port()));
    assert_eq!(outcome.result.as_ref().unwrap(), &Captured::ServerWroteRemote { path: server_path.clone() });
    assert!(outcome.local_files().is_empty());
    let line = outcome.to_string();
    assert!(line.contains(&format!("wrote it to its own disk, at {} on that server's machine", server_path.display())));
    assert!(line.contains("log directory both machines share"), "{line}");
    assert!(files_below(logdir.path()).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_trace_is_an_error_after_the_reference_attempts() {
    let (addr, fake) = serve(vec![empty_trace()]).await;
    let logdir = tempfile::tempdir().unwrap();
    let outcome = capture_one(target(addr), &options(logdir.path())).await;
    assert!(matches!(outcome.result, Err(CaptureError::EmptyTrace)), "{outcome}");
    assert_eq!(outcome.attempts, 3);
    assert_eq!(fake.requests().len(), 3, "the reference retries an empty trace (UNAVAILABLE)");
    assert!(outcome.to_string().contains("no trace events were collected"));
    assert!(files_below(logdir.path()).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unavailable_twice_then_success_is_retried() {
    let replies = vec![
        Reply::Fail(Code::Unavailable, "profiler busy"),
        Reply::Fail(Code::Unknown, "Stream removed"),
        xspace(support::tiny_xspace()),
    ];
    let (addr, fake) = serve(replies).await;
    let logdir = tempfile::tempdir().unwrap();
    let recorder = Arc::new(Recorder::default());
    let outcomes = capture(&[target(addr)], &options(logdir.path()), recorder.clone()).await.unwrap();
    assert_eq!(outcomes[0].attempts, 3);
    assert_eq!(outcomes[0].local_files().len(), 1, "{}", outcomes[0]);
    let requests = fake.requests();
    assert_eq!(requests.len(), 3);
    assert!(requests.iter().all(|r| r.session_id == SESSION), "one session across attempts");
    let retries: Vec<_> =
        recorder.states.lock().unwrap().iter().filter(|s| matches!(s, WorkerState::Retrying { .. })).cloned().collect();
    assert_eq!(retries.len(), 2);
    assert!(
        matches!(&retries[0], WorkerState::Retrying { attempt: 1, reason } if reason.contains("UNAVAILABLE: profiler busy"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_are_bounded_and_other_statuses_are_not_retried() {
    let (busy, busy_fake) = serve(vec![Reply::Fail(Code::AlreadyExists, "a session is running")]).await;
    let (broken, broken_fake) = serve(vec![Reply::Fail(Code::Internal, "no tracer")]).await;
    let logdir = tempfile::tempdir().unwrap();
    let mut options = options(logdir.path());
    options.retries = 1;
    let outcomes = capture(&[target(busy), target(broken)], &options, Arc::new(NoProgress)).await.unwrap();
    assert_eq!((outcomes[0].attempts, busy_fake.requests().len()), (2, 2));
    assert_eq!((outcomes[1].attempts, broken_fake.requests().len()), (1, 1));
    assert_eq!(
        outcomes[1].to_string(),
        format!("127.0.0.1:{}: the server answered INTERNAL: no tracer", broken.port())
    );
    assert!(files_below(logdir.path()).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_workers_one_failing_give_one_profile_and_one_error() {
    let (good, _) = serve(vec![xspace(support::tiny_xspace())]).await;
    let refused = support::refused_port();
    let logdir = tempfile::tempdir().unwrap();
    let targets = [target(good), target(format!("127.0.0.1:{refused}"))];
    let outcomes = capture(&targets, &options(logdir.path()), Arc::new(NoProgress)).await.unwrap();
    assert_eq!(outcomes.len(), 2);
    assert_eq!(outcomes[0].target, targets[0], "outcomes in the order given");
    assert_eq!(outcomes[0].local_files().len(), 1);
    assert!(matches!(outcomes[1].result, Err(CaptureError::ConnectionRefused)), "{}", outcomes[1]);
    let stem = format!("127.0.0.1_{}.xplane.pb", good.port());
    assert_eq!(files_below(logdir.path()), [Path::new("plugins/profile").join(SESSION).join(stem)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_share_one_session_and_one_start_time() {
    let (a, fake_a) = serve(vec![xspace(support::tiny_xspace())]).await;
    let (b, fake_b) = serve(vec![xspace(support::tiny_xspace())]).await;
    let logdir = tempfile::tempdir().unwrap();
    let mut options = options(logdir.path());
    options.delay = Duration::from_millis(300);
    let before_ns = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64;
    let outcomes = capture(&[target(a), target(b)], &options, Arc::new(NoProgress)).await.unwrap();
    assert!(outcomes.iter().all(|o| o.local_files().len() == 1));
    let (ra, rb) = (&fake_a.requests()[0], &fake_b.requests()[0]);
    let (oa, ob) = (ra.opts.as_ref().unwrap(), rb.opts.as_ref().unwrap());
    assert_eq!(oa.start_timestamp_ns, ob.start_timestamp_ns);
    assert!(oa.start_timestamp_ns >= before_ns + 300_000_000, "start = now + delay");
    assert_eq!((ra.session_id.as_str(), rb.session_id.as_str()), (SESSION, SESSION));
}

/// Captures `address` with per-attempt deadline `timeout`, expecting no file to be left.
async fn capture_failing(address: String, timeout: Duration) -> WorkerOutcome {
    let logdir = tempfile::tempdir().unwrap();
    let mut options = options(logdir.path());
    options.timeout = Some(timeout);
    let outcome = capture_one(target(address), &options).await;
    assert!(outcome.result.is_err(), "{outcome}");
    assert!(files_below(logdir.path()).is_empty(), "no file left");
    outcome
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_listening_is_connection_refused() {
    let port = support::refused_port();
    let outcome = capture_failing(format!("localhost:{port}"), Duration::from_secs(10)).await;
    assert!(matches!(outcome.result, Err(CaptureError::ConnectionRefused)), "{outcome}");
    assert_eq!(outcome.attempts, 3, "UNAVAILABLE is retried");
    assert_eq!(
        outcome.to_string(),
        format!(
            "localhost:{port}: connection refused (is the job serving the profiler? \
             tf.profiler.experimental.server.start(port) / jax.profiler.start_server(port)) (after 3 attempts)"
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_never_answers_hits_the_deadline() {
    let outcome = capture_failing(support::silent_listener().to_string(), Duration::from_secs(1)).await;
    assert!(matches!(outcome.result, Err(CaptureError::Timeout { .. })), "{outcome}");
    assert_eq!(outcome.attempts, 1, "DEADLINE_EXCEEDED is not retried");
    assert!(outcome.to_string().ends_with(": no answer within 1.0 s (the deadline of one attempt)"), "{outcome}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_on_the_port_is_a_protocol_error() {
    let outcome = capture_failing(support::garbage_listener().to_string(), Duration::from_secs(10)).await;
    assert!(matches!(outcome.result, Err(CaptureError::Protocol { .. })), "{outcome}");
    assert!(outcome.to_string().contains("did not answer as an HTTP/2 gRPC server"), "{outcome}");
}

/// An HTTP/2 server (prior knowledge, as gRPC clients connect) answering every request
/// with `status` and a JSON body: a web API on the port, not a gRPC service.
async fn http2_json_server(status: u16) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind 127.0.0.1");
    let address = listener.local_addr().expect("local address");
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let answer = hyper::service::service_fn(move |_| async move {
                    hyper::Response::builder()
                        .status(status)
                        .header("content-type", "application/json")
                        .body(http_body_util::Full::new(hyper::body::Bytes::from_static(b"{\"error\": \"no route\"}")))
                });
                let connection = hyper::server::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new());
                let _ = connection.serve_connection(hyper_util::rt::TokioIo::new(stream), answer).await;
            });
        }
    });
    address
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_web_server_on_the_port_is_said_to_be_no_profiler() {
    for status in [200, 404] {
        let address = http2_json_server(status).await;
        let outcome = capture_failing(address.to_string(), Duration::from_secs(10)).await;
        assert!(matches!(outcome.result, Err(CaptureError::Protocol { .. })), "{outcome}");
        assert!(
            outcome.to_string().contains(&format!(
                "the port did not answer as an HTTP/2 gRPC server (HTTP {status}, content-type application/json); \
                 is it the profiler's port?"
            )),
            "{outcome}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_options_contact_no_worker() {
    let (addr, fake) = serve(vec![xspace(support::tiny_xspace())]).await;
    let logdir = tempfile::tempdir().unwrap();
    let mut options = options(logdir.path());
    options.device_tracer_level = 2;
    assert!(capture(&[target(addr)], &options, Arc::new(NoProgress)).await.is_err());
    assert!(fake.requests().is_empty());
}
