//! The profiler server over real gRPC: a server on a free loopback port, called with the
//! generated `ProfilerServiceClient`, while threads of this process record annotations.
//!
//! The recorder is process-wide, so the tests take turns (`SERIAL`).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use mlprof_capture::proto::{
    AdvancedConfig, AdvancedConfigValue, MonitorRequest, ProfileOptions, ProfileRequest, ProfileResponse,
    TerminateRequest,
};
use mlprof_capture::server::{self, ServerBuilder, ServerError, ServerHandle, step, trace};
use mlprof_capture::service::profiler_service_client::ProfilerServiceClient;
use mlprof_formats::xspace::read_xspace;
use mlprof_model::{Host, StatValue, names};
use tokio::task::JoinHandle;
use tonic::transport::Channel;
use tonic::{Code, Status};

static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Generous bound for things that should happen at once; only a hang reaches it.
const PATIENCE: Duration = Duration::from_secs(20);

async fn client(server: &ServerHandle) -> ProfilerServiceClient<Channel> {
    let url = format!("http://{}", server.local_addr());
    let channel = Channel::from_shared(url).expect("a valid URI").connect().await.expect("connect");
    ProfilerServiceClient::new(channel).max_decoding_message_size(usize::MAX)
}

/// A request as TensorFlow's client sends it, with the duration in `opts`.
fn request(duration_ms: u64, session_id: &str, emit_xspace: bool) -> ProfileRequest {
    ProfileRequest {
        duration_ms,
        max_events: 1_000_000,
        tools: vec!["trace_viewer".into(), "xplane.pb".into()],
        opts: Some(ProfileOptions { version: 1, host_tracer_level: 2, duration_ms, ..ProfileOptions::default() }),
        repository_root: "/must/not/be/written/plugins/profile".into(),
        session_id: session_id.into(),
        host_name: "localhost:6009".into(),
        emit_xspace,
        ..ProfileRequest::default()
    }
}

/// A thread named `stepper` that runs `train` steps with a nested `forward` scope until
/// the returned flag is set.
fn stepper() -> (Arc<AtomicBool>, std::thread::JoinHandle<()>) {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    let thread = std::thread::Builder::new()
        .name("stepper".into())
        .spawn(move || {
            let mut n = 0u64;
            while !flag.load(Ordering::Relaxed) {
                let _step = step("train", n);
                let _fwd = trace("forward", &[("batch", 32)]);
                std::thread::sleep(Duration::from_millis(2));
                n += 1;
            }
        })
        .expect("spawn");
    (stop, thread)
}

/// Shuts the server down off the test's runtime thread: shutdown blocks until the
/// server's graceful close, which needs this runtime to answer for the client side.
async fn shut_down(server: ServerHandle) {
    tokio::task::spawn_blocking(move || server.shutdown()).await.unwrap().unwrap();
}

async fn wait_until(what: &str, cond: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !cond() {
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Starts a ten-minute `Profile` call named `session_id` on its own connection and
/// waits until it records.
async fn long_profile(server: &ServerHandle, session_id: &'static str) -> JoinHandle<Result<ProfileResponse, Status>> {
    let mut caller = client(server).await;
    let call = tokio::spawn(async move {
        caller.profile(request(600_000, session_id, true)).await.map(tonic::Response::into_inner)
    });
    wait_until("the session records", || server.active_sessions() == 1 && server::is_recording()).await;
    call
}

/// The (step_num, _r) stats of the `train` events on the `stepper` line, and the number
/// of `forward` events there.
fn steps(host: &Host) -> (Vec<(i64, i64)>, usize) {
    let plane = host.plane(names::HOST_PLANE).expect("a /host:CPU plane");
    let line = plane.lines.iter().find(|l| l.name == "stepper").expect("a line for the stepper thread");
    let (step_key, root_key) = (plane.find_stat_key("step_num").unwrap(), plane.find_stat_key("_r").unwrap());
    let int = |stats: &[mlprof_model::Stat], key| match stats.iter().find(|s| s.key() == key).map(|s| s.value()) {
        Some(StatValue::Int(v)) => v,
        other => panic!("expected an int64 stat, got {other:?}"),
    };
    let mut found = Vec::new();
    let mut forwards = 0;
    for event in line.iter() {
        match plane.metadata_of(&event).map(|m| m.name.as_str()) {
            Some("train") => found.push((int(event.stats(), step_key), int(event.stats(), root_key))),
            Some("forward") => forwards += 1,
            other => panic!("unexpected event {other:?}"),
        }
    }
    (found, forwards)
}

fn decode(bytes: &[u8]) -> Host {
    read_xspace(bytes, "response.xplane.pb", "response").expect("the XSpace decodes")
}

#[tokio::test]
async fn profile_with_emit_xspace_returns_the_recorded_steps() {
    let _serial = SERIAL.lock().await;
    let server = server::serve(0).unwrap();
    let (stop, thread) = stepper();
    let response = client(&server).await.profile(request(300, "a", true)).await.unwrap().into_inner();
    stop.store(true, Ordering::Relaxed);
    thread.join().unwrap();
    assert!(!response.empty_trace);
    assert!(response.tool_data.is_empty());
    let host = decode(response.xspace.as_deref().expect("xspace in the response"));
    assert!(host.plane(names::TASK_ENVIRONMENT_PLANE).is_some());
    assert_eq!(host.hostnames.len(), 1);
    let (steps, forwards) = steps(&host);
    assert!(steps.len() >= 2, "{steps:?}");
    assert!(steps.iter().all(|&(_, root)| root == 1));
    assert!(steps.windows(2).all(|w| w[1].0 == w[0].0 + 1), "consecutive step numbers: {steps:?}");
    assert!(forwards >= steps.len());
    assert!(!server::is_recording());
    shut_down(server).await;
}

#[tokio::test]
async fn profile_without_emit_xspace_returns_one_xplane_tool_data() {
    let _serial = SERIAL.lock().await;
    let server = server::serve(0).unwrap();
    let (stop, thread) = stepper();
    // Older clients put the duration only on the request itself.
    let mut req = request(0, "b", false);
    req.duration_ms = 200;
    let response: ProfileResponse = client(&server).await.profile(req).await.unwrap().into_inner();
    stop.store(true, Ordering::Relaxed);
    thread.join().unwrap();
    assert!(response.xspace.is_none());
    assert_eq!(response.tool_data.len(), 1);
    assert_eq!(response.tool_data[0].name, "xplane.pb");
    let host = decode(&response.tool_data[0].data);
    let window_ns = host.profile_stop_ns.unwrap() - host.profile_start_ns.unwrap();
    assert!(window_ns >= 200_000_000, "the request's duration_ms was honoured: {window_ns} ns");
    assert!(!steps(&host).0.is_empty());
    assert!(!response.empty_trace);
    assert!(!std::path::Path::new("/must").exists(), "the server wrote nothing to its disk");
    shut_down(server).await;
}

#[tokio::test]
async fn an_idle_program_gives_an_empty_trace() {
    let _serial = SERIAL.lock().await;
    let server = server::serve(0).unwrap();
    let response = client(&server).await.profile(request(20, "idle", true)).await.unwrap().into_inner();
    assert!(response.empty_trace);
    assert_eq!(decode(&response.xspace.unwrap()).event_count(), 0);
    shut_down(server).await;
}

#[tokio::test]
async fn host_tracer_level_zero_records_nothing_and_override_hostname_names_the_profile() {
    let _serial = SERIAL.lock().await;
    let server = server::serve(0).unwrap();
    let (stop, thread) = stepper();
    let mut off = request(100, "off", true);
    if let Some(opts) = off.opts.as_mut() {
        opts.host_tracer_level = 0;
    }
    let response = client(&server).await.profile(off).await.unwrap().into_inner();
    assert!(response.empty_trace, "host tracing off: nothing recorded");
    let mut renamed = request(100, "renamed", true);
    if let Some(opts) = renamed.opts.as_mut() {
        opts.advanced_configuration.insert(
            "override_hostname".into(),
            AdvancedConfigValue { value: Some(AdvancedConfig::StringValue("worker-7".into())) },
        );
    }
    let response = client(&server).await.profile(renamed).await.unwrap().into_inner();
    stop.store(true, Ordering::Relaxed);
    thread.join().unwrap();
    assert!(!response.empty_trace);
    let host = decode(response.xspace.as_deref().expect("xspace in the response"));
    assert_eq!(host.hostnames, vec!["worker-7".to_string()]);
    shut_down(server).await;
}

#[tokio::test]
async fn terminate_ends_a_long_profile_early() {
    let _serial = SERIAL.lock().await;
    let server = server::serve(0).unwrap();
    let call = long_profile(&server, "long").await;
    {
        let _t = trace("inside", &[("n", 1)]);
    }
    let mut other = client(&server).await;
    other.terminate(TerminateRequest { session_id: "some other session".into() }).await.unwrap();
    assert_eq!(server.active_sessions(), 1, "terminating another id leaves the call running");
    other.terminate(TerminateRequest { session_id: "long".into() }).await.unwrap();
    let response = tokio::time::timeout(PATIENCE, call).await.expect("Terminate ended the call").unwrap().unwrap();
    let host = decode(&response.xspace.unwrap());
    assert_eq!(host.event_count(), 1, "what was recorded until Terminate is returned");
    assert_eq!(server.active_sessions(), 0);
    assert!(!server::is_recording());
    shut_down(server).await;
}

#[tokio::test]
async fn a_cancelled_call_ends_its_session() {
    let _serial = SERIAL.lock().await;
    let server = ServerBuilder::new().port(0).max_sessions(1).start().unwrap();
    let call = long_profile(&server, "cancelled").await;
    call.abort(); // drops the client's call: the stream is reset
    assert!(call.await.unwrap_err().is_cancelled());
    wait_until("the server ends the session", || server.active_sessions() == 0).await;
    assert!(!server::is_recording());
    // The only place is free again.
    let response = client(&server).await.profile(request(10, "next", true)).await.unwrap();
    assert!(response.into_inner().xspace.is_some());
    shut_down(server).await;
}

#[tokio::test]
async fn sessions_beyond_the_bound_get_already_exists() {
    let _serial = SERIAL.lock().await;
    let server = ServerBuilder::new().port(0).max_sessions(1).start().unwrap();
    let call = long_profile(&server, "one").await;
    let status = client(&server).await.profile(request(10, "two", true)).await.unwrap_err();
    assert_eq!(status.code(), Code::AlreadyExists, "{status:?}");
    client(&server).await.terminate(TerminateRequest { session_id: "one".into() }).await.unwrap();
    assert!(tokio::time::timeout(PATIENCE, call).await.unwrap().unwrap().is_ok());
    shut_down(server).await;
}

#[tokio::test]
async fn a_future_start_timestamp_delays_the_session() {
    let _serial = SERIAL.lock().await;
    let server = server::serve(0).unwrap();
    let start_ns = server::now_ns() + 300_000_000;
    let mut req = request(50, "delayed", true);
    if let Some(opts) = req.opts.as_mut() {
        opts.start_timestamp_ns = u64::try_from(start_ns).unwrap();
    }
    let response = client(&server).await.profile(req).await.unwrap().into_inner();
    let host = decode(&response.xspace.unwrap());
    assert!(host.profile_start_ns.unwrap() >= start_ns, "recording began at the requested time");
    shut_down(server).await;
}

#[tokio::test]
async fn monitor_is_unimplemented() {
    let _serial = SERIAL.lock().await;
    let server = server::serve(0).unwrap();
    let status = client(&server).await.monitor(MonitorRequest::default()).await.unwrap_err();
    assert_eq!(status.code(), Code::Unimplemented);
    shut_down(server).await;
}

#[tokio::test]
async fn shutdown_ends_running_calls() {
    let _serial = SERIAL.lock().await;
    let server = server::serve(0).unwrap();
    let call = long_profile(&server, "running").await;
    shut_down(server).await;
    let result = tokio::time::timeout(PATIENCE, call).await.expect("the call ended").unwrap();
    assert!(result.is_ok(), "the call answered with what it had: {result:?}");
    assert!(!server::is_recording());
}

#[test]
fn the_server_binds_loopback_by_default_and_reports_a_busy_port() {
    let server = server::serve(0).unwrap();
    let addr = server.local_addr();
    assert_eq!(addr.ip(), IpAddr::V4(Ipv4Addr::LOCALHOST));
    assert_ne!(addr.port(), 0, "port 0 resolves to the bound port");
    match server::serve(addr.port()) {
        Err(ServerError::Bind { addr: busy, .. }) => assert_eq!(busy, addr),
        other => panic!("expected a bind error, got {other:?}"),
    }
    let any = ServerBuilder::new().addr(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0)).start().unwrap();
    assert!(any.local_addr().ip().is_unspecified());
    drop(any);
    server.shutdown().unwrap();
}
