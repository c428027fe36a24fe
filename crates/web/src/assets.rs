//! The web UI's files, embedded in the binary from `crates/web/web/` (in debug builds
//! rust-embed reads them from that folder on each request, so pages can be edited
//! without rebuilding): `/` answers `index.html` (and begins what its address names,
//! see [`crate::prefetch`]), `/static/PATH` answers `web/PATH`.
//!
//! The one design decision to know: a requested path is checked segment by segment
//! (no `..`, `.`, empty, hidden or backslashed segment) before it is looked up among
//! the embedded files, so nothing outside `web/` can be named. Files are revalidated
//! on every load (`Cache-Control: no-cache` with a content-hash `ETag`, answered with
//! 304 when unchanged), so an upgraded binary never serves stale scripts.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use rust_embed::RustEmbed;

use crate::error::ApiError;
use crate::state::AppState;

#[derive(RustEmbed)]
#[folder = "web/"]
struct Web;

/// `GET /`: the single-page app, with the work its address names begun
/// ([`crate::prefetch`]).
pub async fn index(State(state): State<Arc<AppState>>, uri: Uri, headers: HeaderMap) -> Response {
    crate::prefetch::begin_for_page(&state, &uri);
    embedded("index.html", &headers)
}

/// `GET /static/{*path}`: one file of the app.
pub async fn static_file(Path(path): Path<String>, headers: HeaderMap) -> Response {
    if !is_plain_relative(&path) {
        return ApiError::not_found(format!("no file static/{path}")).into_response();
    }
    embedded(&path, &headers)
}

/// Whether `path` names a file inside the folder: `/`-separated segments, none of
/// them empty, `.`, `..`, hidden (`.name`), or holding a backslash, colon or NUL.
fn is_plain_relative(path: &str) -> bool {
    !path.is_empty()
        && path
            .split('/')
            .all(|segment| !segment.is_empty() && !segment.starts_with('.') && !segment.contains(['\\', ':', '\0']))
}

/// The embedded file at `path`, or 304 when the client's copy is current.
fn embedded(path: &str, headers: &HeaderMap) -> Response {
    let Some(file) = Web::get(path) else {
        return ApiError::not_found(format!("no file static/{path}")).into_response();
    };
    let etag = etag(&file.metadata.sha256_hash());
    let cache = HeaderValue::from_static("no-cache");
    let fresh = headers.get(header::IF_NONE_MATCH).and_then(|v| v.to_str().ok()).is_some_and(|tags| {
        tags.split(',').any(|tag| {
            let tag = tag.trim();
            tag == "*" || tag.strip_prefix("W/").unwrap_or(tag) == etag
        })
    });
    let etag_value = HeaderValue::from_str(&etag).unwrap_or_else(|_| HeaderValue::from_static("\"\""));
    if fresh {
        return (StatusCode::NOT_MODIFIED, [(header::ETAG, etag_value), (header::CACHE_CONTROL, cache)])
            .into_response();
    }
    let content_type = content_type(file.metadata.mimetype());
    (
        [(header::CONTENT_TYPE, content_type), (header::ETAG, etag_value), (header::CACHE_CONTROL, cache)],
        Body::from(file.data.into_owned()),
    )
        .into_response()
}

/// A strong entity tag from a content hash: its first 16 bytes in hex, quoted.
fn etag(hash: &[u8; 32]) -> String {
    let hex: String = hash.iter().take(16).map(|b| format!("{b:02x}")).collect();
    format!("\"{hex}\"")
}

/// The `Content-Type` for a guessed MIME type; text types say they are UTF-8.
fn content_type(mime: &str) -> HeaderValue {
    let textual = mime.starts_with("text/") || matches!(mime, "application/json" | "image/svg+xml");
    let value = if textual && !mime.contains("charset") { format!("{mime}; charset=utf-8") } else { mime.to_string() };
    HeaderValue::from_str(&value).unwrap_or_else(|_| HeaderValue::from_static("application/octet-stream"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_relative_paths_are_looked_up() {
        assert!(is_plain_relative("app.js"));
        assert!(is_plain_relative("trace/viewer.js"));
        for bad in ["", "../Cargo.toml", "a/../../b", "/etc/passwd", "a//b", "./a", ".hidden", "a\\..\\b", "C:/x"] {
            assert!(!is_plain_relative(bad), "{bad:?}");
        }
    }

    #[test]
    fn text_types_carry_utf8() {
        assert_eq!(content_type("text/javascript"), "text/javascript; charset=utf-8");
        assert_eq!(content_type("image/png"), "image/png");
    }
}
