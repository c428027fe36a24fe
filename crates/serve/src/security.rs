//! Headers every response carries: a strict same-origin Content-Security-Policy (the
//! page may load scripts, styles, fonts and data only from this server; images also
//! from `data:`/`blob:` URLs, which canvas snapshots and downloads use), no MIME
//! sniffing, no referrer, no framing, and `Cache-Control: no-cache` unless the handler
//! chose otherwise.

use axum::extract::Request;
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::Response;

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
