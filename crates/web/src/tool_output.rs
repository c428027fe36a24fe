//! Computing one tool's result for a checked request, as `mlprof analyze` does, on a
//! blocking thread, cached per request (run, host, tool, options); [`from_session`]
//! does the same for any value a request's session gives (the flame graph's index).
//!
//! The one design decision to know: the cache is the state's, keyed by the checked
//! [`ToolRequest`] itself, and keeps a [`ToolOutput`] — the report and the result as a
//! JSON value, never references into the session — so a cached result outlives its
//! session being dropped from memory.

use std::fmt::Debug;
use std::sync::Arc;

use mlprof_analysis::tool::{Analysis, Options, ToolId};
use mlprof_model::Session;

use crate::blocking::on_blocking_thread;
use crate::error::ApiError;
use crate::once_cache::{OnceCache, RunKey};
use crate::select;
use crate::state::AppState;
use crate::tool_request::ToolRequest;

pub use crate::tool_result::ToolOutput;

/// The result of `request`, from the cache or computed on a blocking thread (to its
/// end, even if every request waiting for it goes away).
pub async fn tool_output(state: &Arc<AppState>, request: &ToolRequest) -> Result<Arc<ToolOutput>, ApiError> {
    let what = format!("{} failed", request.tool.name());
    from_session(state, state.results(), request, what, |session, request| {
        compute(session, request.host.as_deref(), request.tool, request.options)
    })
    .await
}

/// The value `cache` holds for `key` (a tool request, a run's host), or `make` of the
/// session of the key's run, computed on a blocking thread (to its end, even if every
/// request waiting for it goes away; a panic answers 500 naming `what`) and kept in
/// `cache`.
pub(crate) async fn from_session<K, V>(
    state: &Arc<AppState>,
    cache: &OnceCache<K, Arc<V>>,
    key: &K,
    what: String,
    make: impl FnOnce(&Session, K) -> Result<V, ApiError> + Send + 'static,
) -> Result<Arc<V>, ApiError>
where
    K: RunKey + Clone + Eq + Debug + Send + Sync + 'static,
    V: Send + Sync + 'static,
{
    let owned = (Arc::clone(state), key.clone());
    cache
        .get_or_compute(key, move || async move {
            let (state, key) = owned;
            let session = state.session(key.run()).await?;
            on_blocking_thread(what, move || make(&session, key)).await?.map(Arc::new)
        })
        .await
}

/// Runs `tool` with `options` on the hosts `host` selects (all for `None`).
pub fn compute(session: &Session, host: Option<&str>, tool: ToolId, options: Options) -> Result<ToolOutput, ApiError> {
    let hosts = select::hosts(session, host)?;
    let names = hosts.iter().map(|h| h.name.clone()).collect();
    let result = Analysis::new(hosts, options).run(tool).map_err(|e| ApiError::bad_request(e.message))?;
    let json =
        serde_json::to_value(&result).map_err(|e| ApiError::internal(format!("rendering the result as JSON: {e}")))?;
    Ok(ToolOutput { hosts: names, report: result.report(), result: json })
}
