//! What protects the user's profiles from other web pages.
//!
//! Headers every response carries: a strict same-origin Content-Security-Policy (the
//! page may load scripts, styles, fonts and data only from this server; images also
//! from `data:`/`blob:` URLs, which canvas snapshots and downloads use), no MIME
//! sniffing, no referrer, no framing, and `Cache-Control: no-cache` unless the handler
//! chose otherwise.
//!
//! DNS rebinding: a page from another site can point its own host name at 127.0.0.1
//! (or at a LAN address) and read a server as if it were same-origin. A server
//! therefore answers only requests whose `Host` is one it can be reached by without a
//! foreign name ([`AllowedHosts`]): bound to a loopback address, `localhost`, a
//! loopback address or the `--host` it was given; bound to another address, also any
//! IP address. Others get 403.
//!
//! Cross-site reads: browsers mark requests a page of another site makes with
//! `Sec-Fetch-Site: cross-site`; `/api/*` refuses them (403) whatever the address
//! bound, so no other site's page can read the profiles through the user's browser.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
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
    /// Bound to a loopback address: `localhost`, `*.localhost`, loopback addresses, and
    /// this name (the `--host` value, lowercase).
    Local(String),
    /// Bound to another address on purpose: `localhost`, `*.localhost`, any IP address,
    /// and this name (the `--host` value, lowercase) — never a foreign name, which is
    /// what a DNS-rebinding page would send.
    Exposed(String),
}

impl AllowedHosts {
    /// The rule for a server bound to `address` as `--host configured`.
    pub fn for_listener(address: SocketAddr, configured: &str) -> AllowedHosts {
        let configured = configured.to_ascii_lowercase();
        if address.ip().is_loopback() { AllowedHosts::Local(configured) } else { AllowedHosts::Exposed(configured) }
    }

    /// Whether a request with this `Host` header (none for HTTP/1.0) is answered.
    pub fn allows(&self, host_header: Option<&str>) -> bool {
        let Some(value) = host_header else { return true };
        let (AllowedHosts::Local(configured) | AllowedHosts::Exposed(configured)) = self;
        match parse_host(value) {
            Some(HostPart::Address(ip)) => {
                let any_address = matches!(self, AllowedHosts::Exposed(_));
                any_address || ip.is_loopback() || configured_address(configured) == Some(ip)
            }
            Some(HostPart::Name(name)) => name == "localhost" || name.ends_with(".localhost") || name == *configured,
            None => false,
        }
    }
}

/// The host of a `Host` header value, its port left out.
#[derive(Clone, Debug, PartialEq, Eq)]
enum HostPart {
    /// An IPv4 address, or an IPv6 address written in brackets.
    Address(IpAddr),
    /// Anything else, lowercase.
    Name(String),
}

/// The host of a `Host` header value (`host`, `host:port`, `[IPv6]` or `[IPv6]:port`),
/// or `None` when it is malformed: brackets around anything but an IPv6 address, or
/// anything but `:port` after the closing bracket (`[::1].evil.example` is not `::1`).
fn parse_host(value: &str) -> Option<HostPart> {
    let value = value.trim();
    let is_port = |port: &str| port.bytes().all(|b| b.is_ascii_digit());
    if let Some(rest) = value.strip_prefix('[') {
        let (inside, after) = rest.split_once(']')?;
        if !(after.is_empty() || after.strip_prefix(':').is_some_and(is_port)) {
            return None;
        }
        return inside.parse::<Ipv6Addr>().ok().map(|ip| HostPart::Address(IpAddr::V6(ip)));
    }
    let name = match value.rsplit_once(':') {
        Some((name, port)) if is_port(port) => name,
        Some(_) => return None,
        None => value,
    };
    Some(match name.parse::<Ipv4Addr>() {
        Ok(ip) => HostPart::Address(IpAddr::V4(ip)),
        Err(_) => HostPart::Name(name.to_ascii_lowercase()),
    })
}

/// The `--host` value as an IP address (brackets allowed around IPv6), if it is one.
fn configured_address(configured: &str) -> Option<IpAddr> {
    let unbracketed = configured.strip_prefix('[').and_then(|rest| rest.strip_suffix(']')).unwrap_or(configured);
    unbracketed.parse().ok()
}

/// Refuses requests whose `Host` the server does not answer to, and API requests a
/// page of another site made (`Sec-Fetch-Site: cross-site`): 403, JSON, one line.
pub async fn check_host(State(allowed): State<Arc<AllowedHosts>>, request: Request, next: Next) -> Response {
    let host = request.headers().get(header::HOST).map(|v| v.to_str().unwrap_or("\u{fffd}"));
    if !allowed.allows(host) {
        return forbidden(format!(
            "this server answers only requests for its own address or localhost (Host was {:?}): a page from \
             another site may be trying to read it",
            host.unwrap_or_default()
        ));
    }
    if is_api(request.uri().path()) && is_cross_site(request.headers()) {
        return forbidden(
            "this server does not answer API requests made by another site's page (Sec-Fetch-Site: cross-site)"
                .to_string(),
        );
    }
    next.run(request).await
}

/// Whether `path` is under `/api/`.
fn is_api(path: &str) -> bool {
    path == "/api" || path.starts_with("/api/")
}

/// Whether the browser says another site's page made this request.
fn is_cross_site(headers: &axum::http::HeaderMap) -> bool {
    headers.get("sec-fetch-site").is_some_and(|value| value.as_bytes().eq_ignore_ascii_case(b"cross-site"))
}

/// A 403 answer with `message`.
fn forbidden(message: String) -> Response {
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
    }

    #[test]
    fn a_server_bound_elsewhere_answers_ip_addresses_localhost_and_its_name_only() {
        let exposed = AllowedHosts::for_listener("0.0.0.0:6006".parse().expect("address"), "0.0.0.0");
        for ok in [None, Some("192.168.1.20:6006"), Some("[fe80::1]:6006"), Some("localhost:6006"), Some("127.0.0.1")] {
            assert!(exposed.allows(ok), "{ok:?}");
        }
        for refused in [Some("evil.example"), Some("evil.example:6006"), Some("192.168.1.20.evil.example")] {
            assert!(!exposed.allows(refused), "{refused:?}");
        }
        let named = AllowedHosts::for_listener("10.0.0.5:6006".parse().expect("address"), "Profiler.Lab");
        assert!(named.allows(Some("profiler.lab:6006")));
        assert!(!named.allows(Some("other.lab:6006")));
    }

    #[test]
    fn only_real_bracketed_ipv6_literals_count_as_addresses() {
        let local = AllowedHosts::for_listener("127.0.0.1:6006".parse().expect("address"), "127.0.0.1");
        let exposed = AllowedHosts::for_listener("0.0.0.0:6006".parse().expect("address"), "0.0.0.0");
        for ok in [Some("[::1]"), Some("[::1]:6006"), Some("[::1]:"), Some(" [0:0:0:0:0:0:0:1]:80 ")] {
            assert!(local.allows(ok), "{ok:?}");
            assert!(exposed.allows(ok), "{ok:?}");
        }
        assert!(exposed.allows(Some("[fe80::1]")) && !local.allows(Some("[fe80::1]")));
        for refused in [
            "[::1].evil.example",
            "[::1].evil.example:6006",
            "[::1]evil",
            "[::1]:80.evil.example",
            "[::1]:80:80",
            "[::1",
            "[127.0.0.1]",
            "[localhost]",
            "[evil.example]",
            "[fe80::1]@evil.example",
            "::1",
            "localhost:port",
        ] {
            assert!(!local.allows(Some(refused)), "{refused:?}");
            assert!(!exposed.allows(Some(refused)), "{refused:?}");
        }
        let named_v6 = AllowedHosts::for_listener("[::1]:6006".parse().expect("address"), "::1");
        assert!(named_v6.allows(Some("[::1]:6006")) && !named_v6.allows(Some("[::1].evil.example")));
    }

    #[test]
    fn only_api_requests_marked_cross_site_are_refused() {
        let mut headers = axum::http::HeaderMap::new();
        assert!(!is_cross_site(&headers));
        for (value, cross) in [("cross-site", true), ("Cross-Site", true), ("same-origin", false), ("none", false)] {
            headers.insert("sec-fetch-site", HeaderValue::from_static(value));
            assert_eq!(is_cross_site(&headers), cross, "{value}");
        }
        assert!(is_api("/api/runs") && is_api("/api"));
        assert!(!is_api("/") && !is_api("/static/app.js") && !is_api("/apiary"));
    }
}
