//! The server against hostile clients, each a scripted socket on 127.0.0.1: connections
//! that send nothing or send their headers a byte at a time are closed after the header
//! timeout while others are served; beyond the connection cap, the connection idle the
//! longest makes room for a new one; `Host` values that only look like an IPv6 address
//! are refused; an address other machines can reach is bound only when allowed.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use mlprof_web::testing::{TestServer, get};
use mlprof_web::{Config, ServeError, Server};

fn data(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data").join(relative)
}

const TF_LOGDIR: &str = "xspace/tf_keras2_input_bound/logdir";

/// How long the polling loops below look, at most, for a socket to be closed.
const CLOSE_WAIT: Duration = Duration::from_secs(15);

/// One step of those loops.
const POLL_STEP: Duration = Duration::from_millis(100);

struct Fixture {
    server: TestServer,
    _cache: tempfile::TempDir,
}

fn serve(adjust: impl FnOnce(&mut Config)) -> Fixture {
    let cache = tempfile::tempdir().expect("temp dir");
    let server = TestServer::start_with(&data(TF_LOGDIR), cache.path(), adjust).expect("server starts");
    Fixture { server, _cache: cache }
}

impl Fixture {
    /// `127.0.0.1:PORT`.
    fn authority(&self) -> String {
        self.server.url().trim_start_matches("http://").trim_end_matches('/').to_string()
    }

    fn connect(&self) -> TcpStream {
        let stream = TcpStream::connect(self.authority()).expect("connected");
        stream.set_nonblocking(true).expect("non-blocking");
        stream
    }

    /// `GET /api/runs` answers 200 with the one run.
    fn assert_served(&self) {
        let runs = self.server.get("/api/runs", &[]).expect("answered while the others are open");
        assert_eq!(runs.status, 200, "{}", runs.text());
        assert!(runs.text().contains("2026_11_21_19_24_08"), "{}", runs.text());
    }
}

/// Whether the server has closed `stream` (end of stream or reset); anything it sent
/// before is read and dropped.
fn is_closed(stream: &mut TcpStream) -> bool {
    let mut buffer = [0u8; 4096];
    loop {
        match stream.read(&mut buffer) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(error) if error.kind() == ErrorKind::WouldBlock => return false,
            Err(error) if error.kind() == ErrorKind::Interrupted => continue,
            Err(_) => return true,
        }
    }
}

/// Polls `streams` every [`POLL_STEP`] for at most [`CLOSE_WAIT`], calling `each_step`
/// on the ones still open first, until the server has closed them all; returns how
/// many are still open then.
fn wait_until_closed(streams: &mut Vec<TcpStream>, mut each_step: impl FnMut(&mut TcpStream)) -> usize {
    let rounds = CLOSE_WAIT.as_millis() / POLL_STEP.as_millis();
    for _ in 0..rounds {
        streams.iter_mut().for_each(&mut each_step);
        streams.retain_mut(|stream| !is_closed(stream));
        if streams.is_empty() {
            return 0;
        }
        std::thread::sleep(POLL_STEP);
    }
    streams.len()
}

#[test]
fn silent_and_slowloris_connections_are_closed_after_the_header_timeout_and_others_served_meanwhile() {
    let fixture = serve(|config| config.header_read_timeout = Duration::from_secs(1));
    let mut silent: Vec<TcpStream> = (0..40).map(|_| fixture.connect()).collect();
    let mut slow: Vec<TcpStream> = (0..40).map(|_| fixture.connect()).collect();
    for stream in &mut slow {
        stream.write_all(b"GET /api/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ").expect("sent");
    }
    fixture.assert_served();
    // A byte at a time, never the end of the headers; a write fails once closed.
    let still_open = wait_until_closed(&mut slow, |stream| {
        let _ = stream.write(b"a");
    });
    assert_eq!(still_open, 0, "connections sending their headers a byte at a time stay open");
    assert_eq!(wait_until_closed(&mut silent, |_| ()), 0, "connections sending nothing stay open");
    fixture.assert_served();
}

#[test]
fn keep_alive_connections_are_served_again_and_closed_once_idle_past_the_timeout() {
    let fixture = serve(|config| config.header_read_timeout = Duration::from_secs(1));
    let mut stream = TcpStream::connect(fixture.authority()).expect("connected");
    stream.set_read_timeout(Some(Duration::from_secs(30))).expect("timeout set");
    let request = format!("GET /api/runs HTTP/1.1\r\nHost: {}\r\n\r\n", fixture.authority());
    for _ in 0..2 {
        stream.write_all(request.as_bytes()).expect("sent");
        let head = read_head(&mut stream);
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        skip_body(&mut stream, &head);
    }
    stream.set_nonblocking(true).expect("non-blocking");
    let mut idle = vec![stream];
    assert_eq!(wait_until_closed(&mut idle, |_| ()), 0, "an idle keep-alive connection stays open");
}

/// Reads up to the end of an answer's headers.
fn read_head(stream: &mut TcpStream) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        let read = stream.read(&mut byte).expect("read");
        assert_eq!(read, 1, "closed before the end of the headers: {}", String::from_utf8_lossy(&head));
        head.push(byte[0]);
    }
    String::from_utf8_lossy(&head).into_owned()
}

/// Reads and drops the body that follows `head` (with a Content-Length, or chunked).
fn skip_body(stream: &mut TcpStream, head: &str) {
    let header = |name: &str| {
        head.lines()
            .filter_map(|line| line.split_once(':'))
            .find(|(n, _)| n.trim().eq_ignore_ascii_case(name))
            .map(|(_, value)| value.trim().to_string())
    };
    if let Some(length) = header("content-length") {
        let mut body = vec![0u8; length.parse().expect("a length")];
        stream.read_exact(&mut body).expect("the body");
        return;
    }
    assert_eq!(header("transfer-encoding").as_deref(), Some("chunked"), "{head}");
    let mut tail = Vec::new();
    let mut byte = [0u8; 1];
    while !tail.ends_with(b"\r\n0\r\n\r\n") && tail != b"0\r\n\r\n" {
        assert_eq!(stream.read(&mut byte).expect("read"), 1, "closed inside the body");
        tail.push(byte[0]);
    }
}

#[test]
fn beyond_the_cap_the_connection_idle_the_longest_makes_room_for_a_new_one() {
    // Idle connections are not closed by the timeout during this test: only to make room.
    let fixture = serve(|config| {
        config.header_read_timeout = Duration::from_secs(600);
        config.max_connections = 4;
    });
    let mut idle: Vec<TcpStream> = (0..4).map(|_| fixture.connect()).collect();
    // The cap is full; the next connection is served, after one idle connection is closed.
    fixture.assert_served();
    let rounds = CLOSE_WAIT.as_millis() / POLL_STEP.as_millis();
    let mut closed = 0;
    for _ in 0..rounds {
        closed += idle.iter_mut().map(is_closed).filter(|&c| c).count();
        if closed > 0 {
            break;
        }
        std::thread::sleep(POLL_STEP);
    }
    assert_eq!(closed, 1, "one idle connection made room");
    idle.retain_mut(|stream| !is_closed(stream));
    assert_eq!(idle.len(), 3, "only one idle connection was closed");
    // Again, now that the served one is gone: its slot is free, so nothing else closes.
    // The server frees a slot when its connection task ends, just after the client has
    // read the answer and seen the close; give that task a moment (a CI run saw the
    // next connection arrive first and close an idle one).
    std::thread::sleep(Duration::from_millis(300));
    fixture.assert_served();
    assert_eq!(idle.iter_mut().map(is_closed).filter(|&c| c).count(), 0, "a free slot was used");
}

#[test]
fn hosts_that_only_look_like_an_ipv6_literal_are_refused() {
    let fixture = serve(|_| ());
    let port = fixture.authority().rsplit_once(':').map(|(_, port)| port.to_string()).expect("a port");
    for refused in ["[::1].evil.example", "[::1].evil.example:80", "[::1]evil", "[127.0.0.1]"] {
        let response = fixture.server.get("/api/runs", &[("Host", refused)]).expect("answered");
        assert_eq!(response.status, 403, "{refused}");
    }
    for allowed in [format!("[::1]:{port}"), "[::1]".to_string(), format!("127.0.0.1:{port}")] {
        let response = fixture.server.get("/api/runs", &[("Host", &allowed)]).expect("answered");
        assert_eq!(response.status, 200, "{allowed}");
    }
}

#[test]
fn an_address_other_machines_can_reach_is_refused_unless_allowed() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    let cache = tempfile::tempdir().expect("temp dir");
    let config = |host: &str| Config {
        host: host.into(),
        port: 0,
        cache_dir: Some(cache.path().to_path_buf()),
        ..Config::new(data(TF_LOGDIR))
    };
    for host in ["0.0.0.0", "::"] {
        let refused = runtime.block_on(Server::bind(config(host))).err();
        let Some(ServeError::RemoteNotAllowed { address }) = refused else {
            panic!("{host}: bound without allow_remote");
        };
        assert!(address.contains(host), "{address}");
    }
    for host in ["127.0.0.1", "localhost"] {
        let server = runtime.block_on(Server::bind(config(host))).expect("loopback needs no permission");
        assert!(!server.is_remote(), "{host}");
    }
    // Allowed: bound on every interface, and talked to through loopback only.
    let server =
        runtime.block_on(Server::bind(Config { allow_remote: true, ..config("0.0.0.0") })).expect("bound when allowed");
    assert!(server.is_remote());
    let port = server.local_addr().port();
    let _running = runtime.block_on(async { server.spawn() });
    let url = format!("http://127.0.0.1:{port}/");
    let runs = runtime.block_on(async {
        let url = url.clone();
        tokio::task::spawn_blocking(move || get(&url, "/api/runs", &[])).await.expect("the client ran")
    });
    assert_eq!(runs.expect("answered").status, 200);
}
