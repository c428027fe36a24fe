//! The routes: the page, its static files, and the JSON API under `/api` (see API.md),
//! behind the `Host` check, wrapped in the security headers and response compression
//! (gzip or brotli, as the client accepts).

use std::sync::Arc;

use axum::Router;
use axum::middleware;
use axum::response::IntoResponse;
use axum::routing::get;
use tower_http::compression::CompressionLayer;

use crate::error::ApiError;
use crate::security::AllowedHosts;
use crate::state::AppState;
use crate::{api, assets, security, trace};

/// The whole application over `state`, answering the `Host` names `allowed_hosts` allows.
pub fn router(state: Arc<AppState>, allowed_hosts: AllowedHosts) -> Router {
    let api = Router::new()
        .route("/runs", get(api::runs::runs))
        .route("/run", get(api::runs::run))
        .route("/tools", get(api::tools::tools))
        .route("/options", get(api::tools::options))
        .route("/tool", get(api::tool::tool))
        .route("/csv", get(api::tool::csv))
        .route("/python/flame", get(api::python::flame))
        .route("/progress", get(api::progress::progress))
        .nest("/trace", trace::routes());
    Router::new()
        .route("/", get(assets::index))
        .route("/static/{*path}", get(assets::static_file))
        .nest("/api", api)
        .fallback(unknown_endpoint)
        .with_state(state)
        .layer(middleware::from_fn_with_state(Arc::new(allowed_hosts), security::check_host))
        .layer(middleware::from_fn(security::headers))
        .layer(CompressionLayer::new())
}

/// An unknown path: for a browser asking for a page outside `/api`, a short page that
/// says so and links to the viewer; for everything else, the API's JSON error.
async fn unknown_endpoint(uri: axum::http::Uri, headers: axum::http::HeaderMap) -> axum::response::Response {
    let path = uri.path();
    let wants_page = headers
        .get(axum::http::header::ACCEPT)
        .and_then(|accept| accept.to_str().ok())
        .is_some_and(|accept| accept.contains("text/html"));
    if wants_page && !path.starts_with("/api/") {
        let page = format!(
            "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Not found · mlprof</title></head>\
             <body><h1>No page at {}</h1><p>mlprof serves its profile viewer at <a href=\"/\">/</a>; \
             runs, tools and hosts are chosen there (or in its address: <code>/?run=…&amp;tool=…</code>).</p></body></html>",
            html_escape(path)
        );
        return (axum::http::StatusCode::NOT_FOUND, axum::response::Html(page)).into_response();
    }
    ApiError::not_found(format!("no such page or endpoint: {path}")).into_response()
}

/// `text` with the characters HTML gives meaning to written as entities.
fn html_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            other => out.push(other),
        }
    }
    out
}
