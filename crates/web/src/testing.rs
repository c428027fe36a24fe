//! Helpers for tests of the server (this crate's, the CLI's, the trace endpoints'):
//! [`TestServer`] serves a path on an ephemeral port of 127.0.0.1 from its own tokio
//! runtime, and [`get`] is a minimal blocking HTTP/1.1 client that sends the request
//! target exactly as given (so tests can send `..` segments no real client would).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;

use crate::error::ServeError;
use crate::server::{Config, RunningServer, spawn_local_with};
use crate::state::AppState;

/// A server for tests, serving until dropped.
pub struct TestServer {
    // Fields drop in order: the server is told to stop, then its runtime ends.
    server: RunningServer,
    _runtime: tokio::runtime::Runtime,
}

impl TestServer {
    /// Serves `path` on 127.0.0.1 (an ephemeral port), caching on disk in `cache_dir`.
    pub fn start(path: &Path, cache_dir: &Path) -> Result<TestServer, ServeError> {
        TestServer::start_with(path, cache_dir, |_| ())
    }

    /// As [`TestServer::start`], with the rest of the configuration (the rescan
    /// interval, the runs kept loaded) changed by `adjust` first.
    pub fn start_with(
        path: &Path,
        cache_dir: &Path,
        adjust: impl FnOnce(&mut Config),
    ) -> Result<TestServer, ServeError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(ServeError::Serve)?;
        let server = runtime.block_on(spawn_local_with(path, cache_dir, adjust))?;
        Ok(TestServer { server, _runtime: runtime })
    }

    /// The base URL, `http://127.0.0.1:PORT/`.
    pub fn url(&self) -> &str {
        self.server.url()
    }

    /// The state the handlers share.
    pub fn state(&self) -> &AppState {
        self.server.state()
    }

    /// `GET target` (a path with its query, e.g. `/api/runs`) with `headers`.
    pub fn get(&self, target: &str, headers: &[(&str, &str)]) -> std::io::Result<HttpResponse> {
        get(self.url(), target, headers)
    }
}

/// A response: status, headers (names lowercased) and the body with any chunked
/// transfer coding removed (but not decompressed).
#[derive(Clone, Debug)]
pub struct HttpResponse {
    /// The status code.
    pub status: u16,
    /// Header names (lowercase) and values, in order.
    pub headers: Vec<(String, String)>,
    /// The body bytes.
    pub body: Vec<u8>,
}

impl HttpResponse {
    /// The first value of header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// The body as text (invalid UTF-8 replaced).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body parsed as JSON.
    pub fn json(&self) -> serde_json::Result<serde_json::Value> {
        serde_json::from_slice(&self.body)
    }
}

/// Sends `GET target` to the server at `base_url` (`http://HOST:PORT/…`) with
/// `headers` (a `Host` among them replaces the URL's) and `Connection: close`, and
/// reads the whole response (60 s timeout).
pub fn get(base_url: &str, target: &str, headers: &[(&str, &str)]) -> std::io::Result<HttpResponse> {
    let authority = base_url
        .strip_prefix("http://")
        .and_then(|rest| rest.split('/').next())
        .ok_or_else(|| invalid(format!("not an http:// URL: {base_url}")))?;
    let mut stream = TcpStream::connect(authority)?;
    stream.set_read_timeout(Some(Duration::from_secs(60)))?;
    let mut request = format!("GET {target} HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|(name, _)| name.eq_ignore_ascii_case("host")) {
        request.push_str(&format!("Host: {authority}\r\n"));
    }
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes())?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    parse_response(&raw)
}

fn invalid(message: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, message)
}

fn parse_response(raw: &[u8]) -> std::io::Result<HttpResponse> {
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").ok_or_else(|| invalid("no end of headers".into()))?;
    let head = std::str::from_utf8(&raw[..split]).map_err(|e| invalid(format!("headers: {e}")))?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| invalid(format!("status line {status_line:?}")))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_string()))
        .collect();
    let body = &raw[split + 4..];
    let chunked = headers.iter().any(|(n, v)| n == "transfer-encoding" && v.eq_ignore_ascii_case("chunked"));
    let body = if chunked { dechunk(body)? } else { body.to_vec() };
    Ok(HttpResponse { status, headers, body })
}

/// Removes the chunked transfer coding.
fn dechunk(mut body: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line_end = body.windows(2).position(|w| w == b"\r\n").ok_or_else(|| invalid("chunk size".into()))?;
        let size_text = std::str::from_utf8(&body[..line_end]).map_err(|e| invalid(format!("chunk size: {e}")))?;
        let size_text = size_text.split(';').next().unwrap_or_default().trim();
        let size =
            usize::from_str_radix(size_text, 16).map_err(|e| invalid(format!("chunk size {size_text:?}: {e}")))?;
        body = &body[line_end + 2..];
        if size == 0 {
            return Ok(out);
        }
        let chunk = body.get(..size).ok_or_else(|| invalid("truncated chunk".into()))?;
        out.extend_from_slice(chunk);
        body = body.get(size + 2..).ok_or_else(|| invalid("truncated chunk".into()))?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunked_bodies_are_joined() {
        let raw =
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-A: b\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n";
        let response = parse_response(raw).expect("parses");
        assert_eq!(response.status, 200);
        assert_eq!(response.header("x-a"), Some("b"));
        assert_eq!(response.body, b"abcde");
    }
}
