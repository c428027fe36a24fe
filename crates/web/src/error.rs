//! The server's two error types: [`ApiError`], what a failed request answers (a status
//! and a one-line message, `{"error": "…"}`, see API.md), and [`ServeError`], why the
//! server could not start.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

/// Why a request failed, with the one line the client shows.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    /// A missing or malformed parameter (HTTP 400).
    #[error("{0}")]
    BadRequest(String),
    /// No such run, host, tool, event or file (HTTP 404).
    #[error("{0}")]
    NotFound(String),
    /// What the server had cached disagrees with the profile as it is now (HTTP 409): the
    /// stale copy has been dropped, so asking again answers from a fresh one.
    #[error("{0}")]
    Conflict(String),
    /// The server could not do it, e.g. a profile that fails to load (HTTP 500); the
    /// message names the file and position.
    #[error("{0}")]
    Internal(String),
}

impl ApiError {
    /// A 400 answer.
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::BadRequest(one_line(message.into()))
    }

    /// A 404 answer.
    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::NotFound(one_line(message.into()))
    }

    /// A 409 answer.
    pub fn conflict(message: impl Into<String>) -> ApiError {
        ApiError::Conflict(one_line(message.into()))
    }

    /// A 500 answer.
    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::Internal(one_line(message.into()))
    }

    /// The HTTP status this error answers with.
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::Conflict(_) => StatusCode::CONFLICT,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

/// `message` with line breaks turned into spaces, so every error is one line.
fn one_line(message: String) -> String {
    if message.contains(['\n', '\r']) {
        message.split(['\n', '\r']).filter(|part| !part.trim().is_empty()).collect::<Vec<_>>().join(" ")
    } else {
        message
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        (status, Json(serde_json::json!({ "error": self.to_string() }))).into_response()
    }
}

/// Why `mlprof serve` could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// No profile found at the path, or it could not be read.
    #[error(transparent)]
    Discover(#[from] mlprof_formats::FormatError),
    /// Profiles were found, but every one lies outside the served directory (reached
    /// through symbolic links), so none is served.
    #[error("{root}: every profile found lies outside it (through symbolic links), e.g. {first}")]
    NothingInside {
        /// The path given to the server.
        root: String,
        /// The first profile refused.
        first: String,
    },
    /// The address could not be bound.
    #[error("cannot listen on {address}: {source}")]
    Bind {
        /// `host:port` as asked.
        address: String,
        /// The operating system's reason.
        source: std::io::Error,
    },
    /// The address is one other machines can reach, and binding it was not allowed
    /// ([`crate::Config::allow_remote`]): the server has no authentication.
    #[error(
        "not listening on {address}: other machines can reach it, and the server has no authentication, so \
         anyone who can reach it could read the profiles"
    )]
    RemoteNotAllowed {
        /// `host:port` as asked (with the address it resolved to, for a name).
        address: String,
    },
    /// Serving failed after the start.
    #[error("serving: {0}")]
    Serve(std::io::Error),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_become_one_line_and_statuses_match_the_kind() {
        let error = ApiError::internal("reading x.json\nat line 3");
        assert_eq!(error.to_string(), "reading x.json at line 3");
        assert_eq!(error.status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(ApiError::bad_request("b").status(), StatusCode::BAD_REQUEST);
        assert_eq!(ApiError::not_found("n").status(), StatusCode::NOT_FOUND);
        assert_eq!(ApiError::conflict("c").status(), StatusCode::CONFLICT);
    }
}
