//! The client side of the agent's HTTP endpoints, for `mlprof top` and `mlprof agent
//! capture`: one request each ([`mlprof_run::http1`]), its failures said as the agent's.

use std::net::SocketAddr;
use std::time::Duration;

use mlprof_run::http1::{self, HttpError};

use crate::{CaptureOutcome, Snapshot};

/// How long an answer may take.
const TIMEOUT: Duration = Duration::from_secs(3);

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
    http1::request(method, address, path, token, None, wait).map_err(|error| match error {
        HttpError::Connect(e) => format!("no agent at {address}: {e} (start one with `mlprof agent`)"),
        HttpError::NotHttp => format!("agent at {address}: not an HTTP answer (is it an mlprof agent?)"),
        other => format!("agent at {address}: {other}"),
    })
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
