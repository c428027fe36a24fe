//! What can go wrong capturing from one worker ([`CaptureError`]) or before any worker is
//! contacted ([`OptionsError`]).
//!
//! Every message is one line that reads after `"<host:port>: "` and says what to do where
//! there is something to do, because the CLI prints exactly that, one line per worker.
//! Transport failures are classified by walking the error's source chain
//! ([`CaptureError::from_transport`]), not by matching message text, except for the one
//! status the reference client itself matches by text (UNKNOWN "Stream removed"). Text
//! that came from the network (a status message, a transport detail) is kept raw in the
//! variant and escaped by [`display_safe`] when shown, so a hostile server cannot send
//! terminal escape sequences to the user's screen.

use std::error::Error as StdError;
use std::path::PathBuf;
use std::time::Duration;

use mlprof_formats::FormatError;
use tonic::Code;

use crate::untrusted::display_safe;

/// Why capturing from one worker failed.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    /// Nothing listens on the port.
    #[error(
        "connection refused (is the job serving the profiler? \
         tf.profiler.experimental.server.start(port) / jax.profiler.start_server(port))"
    )]
    ConnectionRefused,
    /// The connection could not be made for another reason (unknown host, no route …).
    #[error("cannot connect: {}", display_safe(detail))]
    Connect {
        /// The operating system's or resolver's words.
        detail: String,
    },
    /// No complete answer within the deadline of one attempt.
    #[error("no answer within {:.1} s (the deadline of one attempt)", after.as_secs_f64())]
    Timeout {
        /// The deadline that passed.
        after: Duration,
    },
    /// Something answered, but not as an HTTP/2 gRPC server.
    #[error(
        "protocol error: the port did not answer as an HTTP/2 gRPC server ({}); is it the profiler's port?",
        display_safe(detail)
    )]
    Protocol {
        /// What the HTTP/2 layer saw.
        detail: String,
    },
    /// The server answered with a gRPC error status.
    #[error("the server answered {}: {}", code_name(*code), display_safe(message))]
    Status {
        /// The gRPC status code.
        code: Code,
        /// The server's message.
        message: String,
    },
    /// The server's session recorded no events (`empty_trace = true`).
    #[error(
        "no trace events were collected (empty_trace): is the job running steps while it is \
         captured? Try a longer duration or a delay"
    )]
    EmptyTrace,
    /// The server's XSpace (or its `xplane.pb` tool data) is empty or does not decode as
    /// an XSpace; nothing was written.
    #[error(
        "the server sent an invalid XSpace ({}: {}); nothing was written",
        size_of_answer(*bytes),
        display_safe(reason)
    )]
    InvalidXspace {
        /// Its size, in bytes.
        bytes: u64,
        /// What the decoder found (byte offset and problem).
        reason: String,
    },
    /// Writing the profile failed (the error names the file).
    #[error("{0}")]
    Write(#[from] FormatError),
    /// The worker's task ended abnormally (a bug, reported rather than propagated).
    #[error("internal error: {}", display_safe(detail))]
    Internal {
        /// What happened.
        detail: String,
    },
}

impl CaptureError {
    /// Whether TensorFlow's client would try again after this failure: gRPC UNAVAILABLE
    /// (which is what a refused or failed connection is), ALREADY_EXISTS, UNKNOWN
    /// "Stream removed", and an empty trace (the reference turns it into UNAVAILABLE).
    pub fn is_retryable(&self) -> bool {
        match self {
            CaptureError::ConnectionRefused | CaptureError::Connect { .. } | CaptureError::EmptyTrace => true,
            CaptureError::Status { code, message } => is_retryable_status(*code, message),
            _ => false,
        }
    }

    /// Classifies a failed call from its error's source chain: a gRPC status the server
    /// sent, a refused or failed connection, the call's `deadline` passing (tonic's own
    /// timer, set from `grpc-timeout`, may fire first), or an HTTP/2 failure (the peer is
    /// not a gRPC server).
    pub fn from_transport(error: &(dyn StdError + 'static), deadline: Duration) -> CaptureError {
        let mut source: Option<&(dyn StdError + 'static)> = Some(error);
        let mut connect = false;
        while let Some(e) = source {
            if let Some(io) = e.downcast_ref::<std::io::Error>()
                && io.kind() == std::io::ErrorKind::ConnectionRefused
            {
                return CaptureError::ConnectionRefused;
            }
            if e.is::<tonic::TimeoutExpired>() {
                return CaptureError::Timeout { after: deadline };
            }
            connect |= e.is::<tonic::ConnectError>();
            source = e.source();
        }
        let detail = root_cause(error);
        if connect {
            return CaptureError::Connect { detail };
        }
        match error.downcast_ref::<tonic::Status>() {
            // A status that carries a transport error came from this side, not the server.
            Some(status) if status.source().is_none() => {
                CaptureError::Status { code: status.code(), message: status.message().to_string() }
            }
            _ => CaptureError::Protocol { detail },
        }
    }
}

/// `"empty"`, `"1 byte"` or `"12 bytes"`, for [`CaptureError::InvalidXspace`].
fn size_of_answer(bytes: u64) -> String {
    match bytes {
        0 => "empty".to_string(),
        1 => "1 byte".to_string(),
        n => format!("{n} bytes"),
    }
}

/// The reference client's retry rule for a gRPC status (`ShouldRetryTracing`).
pub fn is_retryable_status(code: Code, message: &str) -> bool {
    match code {
        Code::Unavailable | Code::AlreadyExists => true,
        Code::Unknown => message.contains("Stream removed"),
        _ => false,
    }
}

/// The canonical upper-case name of a gRPC status code (`DEADLINE_EXCEEDED`).
pub fn code_name(code: Code) -> String {
    let camel = format!("{code:?}");
    let mut name = String::with_capacity(camel.len() + 4);
    for (i, c) in camel.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            name.push('_');
        }
        name.push(c.to_ascii_uppercase());
    }
    name
}

/// The deepest cause of `error` as one line (the outer levels of a transport error only
/// say "transport error" or repeat a status in debug form); a status shows its message.
fn root_cause(error: &(dyn StdError + 'static)) -> String {
    let mut deepest = error;
    while let Some(source) = deepest.source() {
        deepest = source;
    }
    match deepest.downcast_ref::<tonic::Status>() {
        Some(status) => status.message().to_string(),
        None => deepest.to_string(),
    }
}

/// Why the capture options were rejected before contacting any worker.
#[derive(Debug, thiserror::Error)]
pub enum OptionsError {
    /// A tracer level beyond what the server understands.
    #[error("{name} must be from 0 to {max}, not {value}")]
    Level {
        /// The option (`host_tracer_level`, …).
        name: &'static str,
        /// The value given.
        value: u32,
        /// The highest level.
        max: u32,
    },
    /// A zero capture duration.
    #[error("the capture duration must be longer than 0 ms")]
    ZeroDuration,
    /// A session id that is empty or not a plain directory name.
    #[error("session id {0:?} is not a plain directory name")]
    SessionId(String),
    /// The log directory cannot be made absolute or is not UTF-8 (it travels in the request
    /// as a string).
    #[error("log directory {}: {reason}", path.display())]
    Logdir {
        /// The directory given.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
}

#[cfg(test)]
mod tests {
    use super::{CaptureError, code_name, is_retryable_status};
    use std::time::Duration;
    use tonic::Code;

    const SECOND: Duration = Duration::from_secs(1);

    #[test]
    fn retries_what_the_reference_retries() {
        assert!(is_retryable_status(Code::Unavailable, "Socket closed"));
        assert!(is_retryable_status(Code::AlreadyExists, "another session is running"));
        assert!(is_retryable_status(Code::Unknown, "Stream removed"));
        assert!(!is_retryable_status(Code::Unknown, "boom"));
        for code in
            [Code::DeadlineExceeded, Code::Internal, Code::Unimplemented, Code::Cancelled, Code::InvalidArgument]
        {
            assert!(!is_retryable_status(code, "Stream removed"), "{code:?}");
        }
        assert!(CaptureError::ConnectionRefused.is_retryable());
        assert!(CaptureError::EmptyTrace.is_retryable());
        assert!(!CaptureError::Timeout { after: std::time::Duration::from_secs(1) }.is_retryable());
        assert!(!CaptureError::Protocol { detail: String::new() }.is_retryable());
    }

    #[test]
    fn statuses_from_the_server_keep_code_and_message() {
        let status = tonic::Status::new(Code::Unimplemented, "no Profile here");
        let error = CaptureError::from_transport(&status, SECOND);
        assert!(
            matches!(&error, CaptureError::Status { code: Code::Unimplemented, message } if message == "no Profile here")
        );
        assert_eq!(error.to_string(), "the server answered UNIMPLEMENTED: no Profile here");
    }

    #[test]
    fn network_text_is_shown_escaped_and_kept_raw() {
        let hostile = "\u{1b}[2J\u{1b}[31mFAKE: credentials accepted\r\n\u{202e}";
        let error = CaptureError::Status { code: Code::Internal, message: hostile.to_string() };
        let shown = error.to_string();
        assert_eq!(shown, "the server answered INTERNAL: \\x1b[2J\\x1b[31mFAKE: credentials accepted\\r\\n\\u{202e}");
        assert!(matches!(error, CaptureError::Status { message, .. } if message == hostile));
        for error in [
            CaptureError::Protocol { detail: "\u{1b}c".into() },
            CaptureError::Connect { detail: "\u{9b}2J".into() },
            CaptureError::Internal { detail: "\r".into() },
            CaptureError::InvalidXspace { bytes: 3, reason: "\u{1b}]0;x\u{7}".into() },
        ] {
            assert!(!error.to_string().chars().any(char::is_control), "{error:?}");
        }
    }

    #[test]
    fn refused_connections_are_found_deep_in_the_chain() {
        let io = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let status = tonic::Status::from_error(Box::new(tonic::ConnectError(Box::new(io))));
        assert_eq!(status.code(), Code::Unavailable);
        assert!(matches!(CaptureError::from_transport(&status, SECOND), CaptureError::ConnectionRefused));
        let other = tonic::ConnectError(Box::new(std::io::Error::other("dns error")));
        assert!(matches!(CaptureError::from_transport(&other, SECOND), CaptureError::Connect { .. }));
        let expired = tonic::Status::from_error(Box::new(tonic::TimeoutExpired(())));
        assert!(matches!(CaptureError::from_transport(&expired, SECOND), CaptureError::Timeout { after: SECOND }));
    }

    #[test]
    fn code_names_are_canonical() {
        assert_eq!(code_name(Code::DeadlineExceeded), "DEADLINE_EXCEEDED");
        assert_eq!(code_name(Code::Unavailable), "UNAVAILABLE");
        assert_eq!(code_name(Code::Ok), "OK");
    }
}
