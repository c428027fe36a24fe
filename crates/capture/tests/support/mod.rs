//! Test peers for the capture client: a scripted `tensorflow.ProfilerService` (tonic,
//! on 127.0.0.1) and TCP listeners that misbehave (never answer, answer garbage).
//! Shared by `crates/capture/tests/` and, through `#[path]`, by the CLI's tests.
//! Everything listens on loopback only and stops by itself.

#![allow(dead_code)]

use std::collections::VecDeque;
use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mlprof_capture::proto::{
    MonitorRequest, MonitorResponse, ProfileRequest, ProfileResponse, ProfileToolData, TerminateRequest,
    TerminateResponse,
};
use mlprof_capture::service::profiler_service_server::{ProfilerService, ProfilerServiceServer};
use tonic::transport::server::TcpIncoming;
use tonic::{Code, Request, Response, Status};

/// How long a misbehaving listener stays up.
const LISTENER_LIFETIME: Duration = Duration::from_secs(60);

/// One scripted answer to `Profile`.
#[derive(Clone, Debug)]
pub enum Reply {
    /// Answer with this response.
    Answer(ProfileResponse),
    /// Fail with this status.
    Fail(Code, &'static str),
}

/// An answer carrying `xspace` (as servers that honour `emit_xspace` send it).
pub fn xspace(bytes: Vec<u8>) -> Reply {
    Reply::Answer(ProfileResponse { xspace: Some(bytes), ..Default::default() })
}

/// An answer carrying `tool_data` entries (as old servers send it).
pub fn tool_data(entries: &[(&str, &[u8])]) -> Reply {
    let tool_data =
        entries.iter().map(|(name, data)| ProfileToolData { name: name.to_string(), data: data.to_vec() }).collect();
    Reply::Answer(ProfileResponse { tool_data, ..Default::default() })
}

/// An answer with neither (the server wrote the XSpace to its own disk).
pub fn nothing() -> Reply {
    Reply::Answer(ProfileResponse::default())
}

/// An answer saying the session recorded nothing.
pub fn empty_trace() -> Reply {
    Reply::Answer(ProfileResponse { empty_trace: true, ..Default::default() })
}

/// The smallest XSpace the client accepts: one `hostnames` entry (field 4) naming "h".
pub fn tiny_xspace() -> Vec<u8> {
    vec![0x22, 1, b'h']
}

/// A valid XSpace of exactly `len` bytes (at least 3): one `hostnames` entry (field 4)
/// padded with `h`, for answers larger than some limit.
pub fn padded_xspace(len: usize) -> Vec<u8> {
    let mut text_len = len.saturating_sub(2).max(1);
    loop {
        let mut bytes = vec![0x22];
        let mut n = text_len;
        while n >= 0x80 {
            bytes.push((n as u8 & 0x7f) | 0x80);
            n >>= 7;
        }
        bytes.push(n as u8);
        if bytes.len() + text_len <= len.max(3) || text_len == 1 {
            bytes.resize(bytes.len() + text_len, b'h');
            return bytes;
        }
        text_len -= 1;
    }
}

/// `len` bytes that look like nothing in particular (xorshift), reproducibly.
pub fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// A scripted server: answers `Profile` calls with the replies in order (the last one
/// for every further call), after waiting the request's `duration_ms`.
#[derive(Clone)]
pub struct Fake {
    replies: Arc<Mutex<VecDeque<Reply>>>,
    requests: Arc<Mutex<Vec<ProfileRequest>>>,
}

impl Fake {
    /// The requests received so far.
    pub fn requests(&self) -> Vec<ProfileRequest> {
        self.requests.lock().map(|r| r.clone()).unwrap_or_default()
    }

    fn next_reply(&self) -> Reply {
        let mut replies = self.replies.lock().expect("replies lock");
        if replies.len() > 1 { replies.pop_front() } else { replies.front().cloned() }
            .unwrap_or(Reply::Fail(Code::Internal, "no reply scripted"))
    }
}

#[tonic::async_trait]
impl ProfilerService for Fake {
    async fn profile(&self, request: Request<ProfileRequest>) -> Result<Response<ProfileResponse>, Status> {
        let request = request.into_inner();
        let wait = Duration::from_millis(request.duration_ms);
        self.requests.lock().expect("requests lock").push(request);
        tokio::time::sleep(wait).await;
        match self.next_reply() {
            Reply::Answer(response) => Ok(Response::new(response)),
            Reply::Fail(code, message) => Err(Status::new(code, message)),
        }
    }

    async fn terminate(&self, _: Request<TerminateRequest>) -> Result<Response<TerminateResponse>, Status> {
        Ok(Response::new(TerminateResponse {}))
    }

    async fn monitor(&self, _: Request<MonitorRequest>) -> Result<Response<MonitorResponse>, Status> {
        Err(Status::unimplemented("Monitor is not supported"))
    }
}

/// Starts a scripted server on 127.0.0.1 (inside a tokio runtime); returns its address and
/// a handle to what it received. It runs until the runtime ends.
pub async fn serve(replies: Vec<Reply>) -> (SocketAddr, Fake) {
    let fake = Fake { replies: Arc::new(Mutex::new(replies.into())), requests: Arc::default() };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind 127.0.0.1");
    let addr = listener.local_addr().expect("local address");
    let service = ProfilerServiceServer::new(fake.clone());
    tokio::spawn(
        tonic::transport::Server::builder().add_service(service).serve_with_incoming(TcpIncoming::from(listener)),
    );
    (addr, fake)
}

/// A port on 127.0.0.1 where nothing listens (bound, then released).
pub fn refused_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
    listener.local_addr().expect("local address").port()
}

/// A listener that accepts connections and never sends a byte.
pub fn silent_listener() -> SocketAddr {
    listener(|_| {})
}

/// A listener that answers every connection with bytes that are not HTTP/2.
pub fn garbage_listener() -> SocketAddr {
    listener(|stream| {
        let _ = stream.write_all(&noise(4096, 0x5eed));
    })
}

/// Accepts connections on 127.0.0.1 for [`LISTENER_LIFETIME`], greeting each with
/// `greet` and holding it open until then.
fn listener(greet: impl Fn(&mut TcpStream) + Send + 'static) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
    let addr = listener.local_addr().expect("local address");
    listener.set_nonblocking(true).expect("non-blocking listener");
    std::thread::spawn(move || {
        let started = Instant::now();
        let mut held = Vec::new();
        while started.elapsed() < LISTENER_LIFETIME {
            match listener.accept() {
                Ok((mut stream, _)) => {
                    greet(&mut stream);
                    held.push(stream);
                }
                Err(_) => std::thread::sleep(Duration::from_millis(10)),
            }
        }
    });
    addr
}
