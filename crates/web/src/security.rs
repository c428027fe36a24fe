//! What protects the user's profiles from other web pages.
//!
//! Headers every response carries: a strict same-origin Content-Security-Policy (the
//! page may load scripts, styles, fonts and data only from this server; images also
//! from `data:`/`blob:` URLs, which canvas snapshots and downloads use), no MIME
//! sniffing, no referrer, no framing, and `Cache-Control: no-cache` unless the handler
//! chose otherwise.
//!
//! DNS rebinding: a page from another site can point its own host name at 127.0.0.1
//! and read a local server as if it were same-origin. A server bound to a loopback
//! address therefore answers only requests whose `Host` is `localhost`, a loopback
//! address, or the `--host` it was given ([`AllowedHosts`]); others get 403.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::Json;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// The Content-Security-Policy of every response. Inline `<script>` and `style="…"`
/// attributes are refused: pages use their own files and set styles through the DOM.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; img-src 'self' data: blob:; object-src 'none'; \
     base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// Adds the security and caching headers to the response.
pub async fn headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.entry(header::CACHE_CONTROL).or_insert(HeaderValue::from_static("no-cache"));
    response
}

/// The `Host` header values a server answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AllowedHosts {
    /// Any: the server listens on a non-loopback address on purpose.
    Any,
    /// `localhost`, `*.localhost`, loopback addresses, and this name (lowercase).
    Local(String),
}

impl AllowedHosts {
    /// The rule for a server bound to `address` as `--host configured`.
    pub fn for_listener(address: SocketAddr, configured: &str) -> AllowedHosts {
        if address.ip().is_loopback() {
            AllowedHosts::Local(configured.to_ascii_lowercase())
        } else {
            AllowedHosts::Any
        }
    }

    /// Whether a request with this `Host` header (none for HTTP/1.0) is answered.
    pub fn allows(&self, host_header: Option<&str>) -> bool {
        let AllowedHosts::Local(configured) = self else { return true };
        let Some(value) = host_header else { return true };
        let name = host_name(value).to_ascii_lowercase();
        let unbracketed = name.trim_start_matches('[').trim_end_matches(']');
        name == "localhost"
            || name.ends_with(".localhost")
            || unbracketed.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
            || name == *configured
            || unbracketed == configured.trim_start_matches('[').trim_end_matches(']')
    }
}

/// The host part of a `Host` header value: without the port, brackets kept on IPv6.
fn host_name(value: &str) -> &str {
    let value = value.trim();
    if value.starts_with('[') {
        return value.find(']').map_or(value, |end| &value[..=end]);
    }
    match value.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => value,
    }
}

/// Refuses requests whose `Host` the server does not answer to (403, JSON).
pub async fn check_host(State(allowed): State<Arc<AllowedHosts>>, request: Request, next: Next) -> Response {
    let host = request.headers().get(header::HOST).map(|v| v.to_str().unwrap_or("\u{fffd}"));
    if allowed.allows(host) {
        return next.run(request).await;
    }
    let message = format!(
        "this server answers only requests for localhost (Host was {:?}): a page from another site may be \
         trying to read it",
        host.unwrap_or_default()
    );
    (StatusCode::FORBIDDEN, Json(serde_json::json!({ "error": message }))).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loopback_server_answers_only_local_names() {
        let local = AllowedHosts::for_listener("127.0.0.1:6006".parse().expect("address"), "127.0.0.1");
        for ok in [
            None,
            Some("127.0.0.1:6006"),
            Some("localhost:6006"),
            Some("LOCALHOST"),
            Some("[::1]:80"),
            Some("a.localhost"),
        ] {
            assert!(local.allows(ok), "{ok:?}");
        }
        for refused in
            [Some("evil.example:6006"), Some("evil.example"), Some("10.0.0.1:6006"), Some("localhost.evil.example")]
        {
            assert!(!local.allows(refused), "{refused:?}");
        }
        let named = AllowedHosts::for_listener("127.0.0.1:6006".parse().expect("address"), "MyBox");
        assert!(named.allows(Some("mybox:6006")));
        let exposed = AllowedHosts::for_listener("0.0.0.0:6006".parse().expect("address"), "0.0.0.0");
        assert!(exposed.allows(Some("evil.example")));
    }
}
