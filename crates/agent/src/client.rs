//! The client side of the agent's HTTP endpoints, for `mlprof top` and `mlprof agent
//! capture`: one request over a plain TCP connection (HTTP/1.1, `Connection: close`),
//! bounded in time and size, the body decoded whether it comes with a length, in
//! chunks, or until the close.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use crate::{CaptureOutcome, Snapshot};

/// How long a connection, a write or a read may take.
const TIMEOUT: Duration = Duration::from_secs(3);
/// The largest response read (a node with thousands of jobs stays far below).
const MAX_RESPONSE: u64 = 64 * 1024 * 1024;

/// `GET path` from the agent at `address`: the status code and the body.
pub fn get(address: SocketAddr, path: &str, token: Option<&str>) -> Result<(u16, Vec<u8>), String> {
    request("GET", address, path, token, TIMEOUT)
}

/// `METHOD path` (no body) to the agent at `address`, the answer awaited `wait` at most.
fn request(
    method: &str,
    address: SocketAddr,
    path: &str,
    token: Option<&str>,
    wait: Duration,
) -> Result<(u16, Vec<u8>), String> {
    let mut stream = TcpStream::connect_timeout(&address, TIMEOUT)
        .map_err(|e| format!("no agent at {address}: {e} (start one with `mlprof agent`)"))?;
    let _ = stream.set_read_timeout(Some(wait));
    let _ = stream.set_write_timeout(Some(TIMEOUT));
    let auth = token.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
    let request =
        format!("{method} {path} HTTP/1.1\r\nHost: {address}\r\n{auth}Content-Length: 0\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).map_err(|e| format!("agent at {address}: {e}"))?;
    let mut response = Vec::new();
    stream
        .take(MAX_RESPONSE + 1)
        .read_to_end(&mut response)
        .map_err(|e| format!("agent at {address}: reading the answer: {e}"))?;
    if response.len() as u64 > MAX_RESPONSE {
        return Err(format!("agent at {address}: the answer is over {} MB", MAX_RESPONSE / 1_000_000));
    }
    parse_response(&response).ok_or_else(|| format!("agent at {address}: not an HTTP answer (is it an mlprof agent?)"))
}

/// The agent's jobs.
pub fn snapshot(address: SocketAddr, token: Option<&str>) -> Result<Snapshot, String> {
    let (status, body) = get(address, "/api/jobs", token)?;
    if status != 200 {
        let text = String::from_utf8_lossy(&body);
        return Err(format!("agent at {address}: HTTP {status}: {}", text.trim()));
    }
    serde_json::from_slice(&body).map_err(|e| format!("agent at {address}: an answer mlprof cannot read: {e}"))
}

/// Asks the agent for a capture of job `pid` over `duration` and waits for it: the
/// session written and what the capture said.
pub fn capture(
    address: SocketAddr,
    pid: u32,
    duration: Duration,
    token: Option<&str>,
) -> Result<CaptureOutcome, String> {
    let path = format!("/api/jobs/{pid}/capture?duration_ms={}", duration.as_millis());
    // A PyTorch trace starts at the job's next poll and is written after: give it time.
    let wait = duration + crate::server::CAPTURE_GRACE;
    let (status, body) = request("POST", address, &path, token, wait)?;
    match serde_json::from_slice::<CaptureOutcome>(&body) {
        Ok(outcome) if status == 200 || status == 409 => Ok(outcome),
        _ => Err(format!("agent at {address}: HTTP {status}: {}", String::from_utf8_lossy(&body).trim())),
    }
}

/// The status code and body of a whole HTTP/1.1 response.
fn parse_response(response: &[u8]) -> Option<(u16, Vec<u8>)> {
    let end = response.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&response[..end]).ok()?;
    let body = &response[end + 4..];
    let mut lines = head.split("\r\n");
    let status: u16 = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let chunked = lines.any(|line| {
        let (name, value) = line.split_once(':').unwrap_or((line, ""));
        name.eq_ignore_ascii_case("transfer-encoding") && value.trim().eq_ignore_ascii_case("chunked")
    });
    let body = if chunked { dechunk(body)? } else { body.to_vec() };
    Some((status, body))
}

/// A chunked body's bytes.
fn dechunk(mut body: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line_end = body.windows(2).position(|w| w == b"\r\n")?;
        let size_text = std::str::from_utf8(&body[..line_end]).ok()?;
        let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
        body = &body[line_end + 2..];
        if size == 0 {
            return Some(out);
        }
        out.extend_from_slice(body.get(..size)?);
        body = body.get(size + 2..)?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_with_a_length_or_in_chunks() {
        let plain = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}";
        assert_eq!(parse_response(plain), Some((200, b"{}".to_vec())));
        let chunked =
            b"HTTP/1.1 401 Unauthorized\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n";
        assert_eq!(parse_response(chunked), Some((401, b"abcde".to_vec())));
        assert_eq!(parse_response(b"SSH-2.0-OpenSSH_9.2\r\n"), None);
        assert_eq!(parse_response(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"), None);
        assert_eq!(parse_response(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab"), None);
    }
}
