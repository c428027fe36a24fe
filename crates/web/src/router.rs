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

async fn unknown_endpoint(uri: axum::http::Uri) -> impl IntoResponse {
    ApiError::not_found(format!("no such page or endpoint: {}", uri.path()))
}
