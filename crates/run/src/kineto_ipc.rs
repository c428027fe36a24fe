//! Kineto's on-demand IPC messages, as dynolog speaks them: decoding what a PyTorch job
//! sends and encoding the replies. Pure functions over bytes; the socket is
//! [`crate::kineto_daemon`]'s.
//!
//! A job started with `KINETO_USE_DAEMON=1` polls the daemon every few seconds with
//! datagrams of one layout (libkineto's `IpcFabricConfigClient`, dynolog's `ipcfabric`):
//! a header — the payload size as a little-endian `u64`, then a 32-byte NUL-padded type
//! name — followed by the payload, a plain C struct:
//! - `req` (a poll): `i32 config_types` (a bit set: 1 = event profiler, 2 = activity
//!   trace), `i32 n`, `i64 job_id` (`SLURM_JOB_ID`, 0 without), then `n` `i32` pids: the
//!   process first, then its ancestors. The reply has the same header with type `req`
//!   and a Kineto config string as payload (empty: nothing to do).
//! - `ctxt` (a registration some builds send): `i32 device`, `i32 pid`, `i64 job_id`;
//!   the reply is one `i32`.
//!
//! Verified against PyTorch 2.11 (CPU and CUDA builds, on an H200) and 2.15 (CPU): both
//! send only `req`, with `config_types` 3 while idle and 1 while a trace is running.
//! Everything here treats the bytes as hostile: sizes are checked, nothing is trusted to
//! be NUL-terminated, and a malformed message is an error, never a panic.

use std::fmt;
use std::time::Duration;

/// Bytes before the payload: the `u64` size and the 32-byte type name.
pub const HEADER_LEN: usize = 8 + TYPE_LEN;
/// Bytes of the NUL-padded type name.
pub const TYPE_LEN: usize = 32;
/// The largest pid list accepted in one poll (a process and its ancestors; Linux's
/// process trees are far shallower).
pub const MAX_PIDS: usize = 1024;
/// `config_types` bit asking for an activity (trace) config.
pub const ACTIVITY_CONFIG: i32 = 2;

/// Why a datagram is not a message mlprof understands.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum IpcError {
    /// Shorter than the header.
    #[error("a {0}-byte datagram is shorter than the {HEADER_LEN}-byte header")]
    ShortHeader(usize),
    /// The header's size disagrees with the bytes that follow it.
    #[error("the header announces {announced} payload bytes but {actual} follow")]
    SizeMismatch {
        /// Size written in the header.
        announced: u64,
        /// Bytes after the header.
        actual: usize,
    },
    /// The type name is not NUL-padded ASCII.
    #[error("the message type is not NUL-padded ASCII")]
    BadType,
    /// A `req` payload that does not hold its pid list.
    #[error("a `req` payload of {len} bytes cannot hold {pids} pids")]
    BadRequest {
        /// Payload bytes.
        len: usize,
        /// The pid count it announces.
        pids: i64,
    },
    /// A `ctxt` payload of the wrong size.
    #[error("a `ctxt` payload must be 16 bytes, not {0}")]
    BadContext(usize),
}

/// One decoded datagram.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    /// A poll for a config.
    Request(Request),
    /// A registration.
    Context(Context),
    /// A type this daemon does not know; answered with an empty payload of that type.
    Other(String),
}

impl Message {
    /// The type name to answer with.
    pub fn type_name(&self) -> &str {
        match self {
            Message::Request(_) => "req",
            Message::Context(_) => "ctxt",
            Message::Other(name) => name,
        }
    }
}

/// A `req` poll.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// Bit set of the configs asked for ([`ACTIVITY_CONFIG`] = a trace).
    pub config_types: i32,
    /// The job id (`SLURM_JOB_ID`), 0 without.
    pub job_id: i64,
    /// The polling process first, then its ancestors.
    pub pids: Vec<i32>,
}

impl Request {
    /// The process that polled.
    pub fn pid(&self) -> Option<i32> {
        self.pids.first().copied()
    }

    /// Whether the poll asks for a trace config.
    pub fn wants_trace(&self) -> bool {
        self.config_types & ACTIVITY_CONFIG != 0
    }
}

/// A `ctxt` registration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Context {
    /// The device the process uses.
    pub device: i32,
    /// The process.
    pub pid: i32,
    /// The job id, 0 without.
    pub job_id: i64,
}

/// Decodes one datagram.
pub fn decode(datagram: &[u8]) -> Result<Message, IpcError> {
    let (size_bytes, rest) = datagram.split_first_chunk::<8>().ok_or(IpcError::ShortHeader(datagram.len()))?;
    let (type_bytes, payload) = rest.split_first_chunk::<TYPE_LEN>().ok_or(IpcError::ShortHeader(datagram.len()))?;
    let announced = u64::from_le_bytes(*size_bytes);
    if announced != payload.len() as u64 {
        return Err(IpcError::SizeMismatch { announced, actual: payload.len() });
    }
    let type_name = decode_type(type_bytes)?;
    match type_name.as_str() {
        "req" => decode_request(payload).map(Message::Request),
        "ctxt" => decode_context(payload).map(Message::Context),
        _ => Ok(Message::Other(type_name)),
    }
}

fn decode_type(bytes: &[u8; TYPE_LEN]) -> Result<String, IpcError> {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(TYPE_LEN);
    let (name, padding) = bytes.split_at(end);
    if name.is_empty() || !name.iter().all(|b| b.is_ascii_graphic()) || padding.iter().any(|&b| b != 0) {
        return Err(IpcError::BadType);
    }
    Ok(String::from_utf8_lossy(name).into_owned())
}

fn decode_request(payload: &[u8]) -> Result<Request, IpcError> {
    let bad = |pids: i64| IpcError::BadRequest { len: payload.len(), pids };
    let config_types = read_i32(payload, 0).ok_or(bad(-1))?;
    let n = read_i32(payload, 4).ok_or(bad(-1))?;
    let job_id = read_i64(payload, 8).ok_or(bad(i64::from(n)))?;
    let count = usize::try_from(n).ok().filter(|&n| n <= MAX_PIDS).ok_or(bad(i64::from(n)))?;
    let pids: Option<Vec<i32>> = (0..count).map(|i| read_i32(payload, 16 + 4 * i)).collect();
    let pids = pids.ok_or(bad(i64::from(n)))?;
    Ok(Request { config_types, job_id, pids })
}

fn decode_context(payload: &[u8]) -> Result<Context, IpcError> {
    if payload.len() != 16 {
        return Err(IpcError::BadContext(payload.len()));
    }
    let field = |at| read_i32(payload, at).ok_or(IpcError::BadContext(payload.len()));
    let job_id = read_i64(payload, 8).ok_or(IpcError::BadContext(payload.len()))?;
    Ok(Context { device: field(0)?, pid: field(4)?, job_id })
}

fn read_i32(bytes: &[u8], at: usize) -> Option<i32> {
    let chunk = bytes.get(at..at.checked_add(4)?)?;
    Some(i32::from_le_bytes(chunk.try_into().ok()?))
}

fn read_i64(bytes: &[u8], at: usize) -> Option<i64> {
    let chunk = bytes.get(at..at.checked_add(8)?)?;
    Some(i64::from_le_bytes(chunk.try_into().ok()?))
}

/// Encodes a reply: the header for `type_name` (at most [`TYPE_LEN`] bytes; longer
/// names are cut) and `payload`.
pub fn encode(type_name: &str, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + payload.len());
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    let mut name = [0u8; TYPE_LEN];
    let bytes = type_name.as_bytes();
    let len = bytes.len().min(TYPE_LEN);
    name[..len].copy_from_slice(&bytes[..len]);
    out.extend_from_slice(&name);
    out.extend_from_slice(payload);
    out
}

/// The reply to a `ctxt` registration: success.
pub fn context_reply() -> Vec<u8> {
    encode("ctxt", &0i32.to_le_bytes())
}

/// What one on-demand trace records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceWindow {
    /// From now, for this long (`ACTIVITIES_DURATION_MSECS`).
    Duration(Duration),
    /// This many whole steps: the next N + 1 optimizer steps (`ACTIVITIES_ITERATIONS`;
    /// Kineto counts one at each `torch.optim` optimizer `step()`), as the steps of a job
    /// without `ProfilerStep#N` markers run from one optimizer step's end to the next.
    Iterations(u32),
}

impl fmt::Display for TraceWindow {
    /// `2 s`, `5 steps`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TraceWindow::Duration(d) => write!(f, "{} ms", d.as_millis()),
            TraceWindow::Iterations(1) => write!(f, "1 step"),
            TraceWindow::Iterations(n) => write!(f, "{n} steps"),
        }
    }
}

/// How long after receiving a timed config Kineto starts its trace: the config names no
/// start time, so Kineto sets one at receipt plus its warmup (5 s) plus two ticks of its
/// profiler thread (1 s each).
pub const KINETO_START_DELAY: Duration = Duration::from_secs(7);

/// The Kineto config text that starts one trace written to `log_file` (Kineto inserts
/// `_<pid>` before the file's extension). Shapes, memory and stacks are recorded, as
/// `torch.profiler` records them when asked; every thread is traced.
pub fn trace_config(log_file: &str, window: TraceWindow) -> String {
    let mut config = format!("ACTIVITIES_LOG_FILE={log_file}\n");
    match window {
        TraceWindow::Duration(d) => {
            let ms = d.as_millis().max(1);
            config.push_str(&format!("PROFILE_START_TIME=0\nACTIVITIES_DURATION_MSECS={ms}\n"));
        }
        TraceWindow::Iterations(n) => {
            // One optimizer step more than asked: steps are inferred between the ends of
            // consecutive optimizer steps, so N + 1 of them hold N whole steps.
            let iterations = n.max(1).saturating_add(1);
            config.push_str(&format!(
                "PROFILE_START_ITERATION=0\nPROFILE_START_ITERATION_ROUNDUP=1\nACTIVITIES_ITERATIONS={iterations}\n"
            ));
        }
    }
    config.push_str("PROFILE_REPORT_INPUT_SHAPES=true\nPROFILE_PROFILE_MEMORY=true\nPROFILE_WITH_STACK=false\n");
    config
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first poll PyTorch 2.11 sent on the H200 (pid 887 and its six ancestors).
    const POLL_HEX: &str = "030000000700000000000000000000007703000076030000730300001a020000190200001802000014020000";

    fn hex(text: &str) -> Vec<u8> {
        (0..text.len()).step_by(2).map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap()).collect()
    }

    fn datagram(type_name: &str, payload: &[u8]) -> Vec<u8> {
        encode(type_name, payload)
    }

    #[test]
    fn a_real_poll_decodes() {
        let message = decode(&datagram("req", &hex(POLL_HEX))).unwrap();
        let Message::Request(request) = message else { panic!("not a request: {message:?}") };
        assert_eq!(request.config_types, 3);
        assert!(request.wants_trace());
        assert_eq!(request.job_id, 0);
        assert_eq!(request.pid(), Some(887));
        assert_eq!(request.pids.len(), 7);
    }

    #[test]
    fn a_poll_while_tracing_does_not_want_a_trace() {
        let mut payload = hex(POLL_HEX);
        payload[0] = 1;
        let Message::Request(request) = decode(&datagram("req", &payload)).unwrap() else { panic!() };
        assert!(!request.wants_trace());
    }

    #[test]
    fn a_registration_decodes_and_is_answered_with_an_i32() {
        let mut payload = 0i32.to_le_bytes().to_vec();
        payload.extend_from_slice(&4242i32.to_le_bytes());
        payload.extend_from_slice(&7i64.to_le_bytes());
        assert_eq!(
            decode(&datagram("ctxt", &payload)).unwrap(),
            Message::Context(Context { device: 0, pid: 4242, job_id: 7 })
        );
        let reply = context_reply();
        assert_eq!(reply.len(), HEADER_LEN + 4);
        assert_eq!(decode(&reply), Err(IpcError::BadContext(4)));
    }

    #[test]
    fn replies_carry_the_size_and_type() {
        let reply = encode("req", b"ACTIVITIES_LOG_FILE=/x.json\n");
        assert_eq!(u64::from_le_bytes(reply[..8].try_into().unwrap()), 28);
        assert_eq!(&reply[8..11], b"req");
        assert!(reply[11..HEADER_LEN].iter().all(|&b| b == 0));
        assert_eq!(&reply[HEADER_LEN..], b"ACTIVITIES_LOG_FILE=/x.json\n");
    }

    #[test]
    fn malformed_datagrams_are_errors() {
        assert_eq!(decode(&[0; 10]), Err(IpcError::ShortHeader(10)));
        let mut wrong_size = datagram("req", &hex(POLL_HEX));
        wrong_size[0] = 200;
        assert!(matches!(decode(&wrong_size), Err(IpcError::SizeMismatch { announced: 200, actual: 44 })));
        let mut bad_type = datagram("req", &[]);
        bad_type[9] = 0xff;
        assert_eq!(decode(&bad_type), Err(IpcError::BadType));
        let mut junk_after_nul = datagram("req", &[]);
        junk_after_nul[20] = b'x';
        assert_eq!(decode(&junk_after_nul), Err(IpcError::BadType));
        assert_eq!(decode(&datagram("", &[])), Err(IpcError::BadType));
        // More pids announced than the payload holds, a negative count, an absurd count.
        let mut payload = hex(POLL_HEX);
        payload[4] = 8;
        assert!(matches!(decode(&datagram("req", &payload)), Err(IpcError::BadRequest { pids: 8, .. })));
        payload[4..8].copy_from_slice(&(-1i32).to_le_bytes());
        assert!(matches!(decode(&datagram("req", &payload)), Err(IpcError::BadRequest { pids: -1, .. })));
        payload[4..8].copy_from_slice(&i32::MAX.to_le_bytes());
        assert!(matches!(decode(&datagram("req", &payload)), Err(IpcError::BadRequest { .. })));
        assert!(matches!(decode(&datagram("req", &[1, 2, 3])), Err(IpcError::BadRequest { .. })));
        assert_eq!(decode(&datagram("xyz", b"anything")), Ok(Message::Other("xyz".into())));
    }

    #[test]
    fn configs_name_the_window() {
        let by_time = trace_config("/run/t.json", TraceWindow::Duration(Duration::from_millis(1500)));
        assert!(
            by_time
                .starts_with("ACTIVITIES_LOG_FILE=/run/t.json\nPROFILE_START_TIME=0\nACTIVITIES_DURATION_MSECS=1500\n")
        );
        let by_steps = trace_config("/run/t.json", TraceWindow::Iterations(3));
        assert!(by_steps.contains("ACTIVITIES_ITERATIONS=4\n") && by_steps.contains("PROFILE_START_ITERATION=0\n"));
        assert!(by_steps.contains("PROFILE_REPORT_INPUT_SHAPES=true\n"));
        assert_eq!(TraceWindow::Iterations(1).to_string(), "1 step");
        assert_eq!(TraceWindow::Duration(Duration::from_secs(2)).to_string(), "2000 ms");
    }
}
