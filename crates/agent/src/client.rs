//! The client side of the agent's HTTP endpoints, for `mlprof top` and `mlprof agent
//! capture`: one request each ([`mlprof_run::http1`]), its failures said as the agent's.

use std::net::SocketAddr;
use std::time::Duration;

use mlprof_run::http1::{self, HttpError};

use crate::{CaptureOutcome, Snapshot};

/// How long an answer may take.
const TIMEOUT: Duration = Duration::from_secs(3);

/// How much longer than the agent's own limit on a capture the client waits, so that
/// the agent's answer (what was recorded, or why not) arrives before the client gives up.
const CAPTURE_ANSWER_MARGIN: Duration = Duration::from_secs(15);

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
        HttpError::Io(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
            format!("agent at {address}: no answer within {} s", wait.as_secs_f64())
        }
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
    let wait = duration + crate::server::CAPTURE_GRACE + CAPTURE_ANSWER_MARGIN;
    let (status, body) = request("POST", address, &path, token, wait)?;
    match serde_json::from_slice::<CaptureOutcome>(&body) {
        Ok(outcome) if status == 200 || status == 409 => Ok(outcome),
        _ => Err(format!("agent at {address}: HTTP {status}: {}", String::from_utf8_lossy(&body).trim())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_agent_that_never_answers_is_said_so_after_the_wait() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
        let address = listener.local_addr().expect("its address");
        let silent = std::thread::spawn(move || {
            let (_stream, _) = listener.accept().expect("the request");
            std::thread::sleep(Duration::from_millis(500));
        });
        let error = request("GET", address, "/api/jobs", None, Duration::from_millis(200)).expect_err("no answer");
        assert_eq!(error, format!("agent at {address}: no answer within 0.2 s"));
        silent.join().expect("the silent agent");
    }
}
