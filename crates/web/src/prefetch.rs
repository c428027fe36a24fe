//! Work a page will ask for, begun when the page itself is asked for. A page's address
//! names its run (and host and tool), but its script asks the API for them only once
//! its modules have loaded and it has the run's tools, a few hundred milliseconds later;
//! on a large profile not read yet, that is time the server could already have spent
//! reading it. So `GET /?run=R…` starts reading run `R`, and with
//! `tool=trace_viewer&host=H` also builds the trace viewer's index of `H` once it is
//! read. Both are the shared, run-once loads the API's own requests then wait on, so
//! nothing is done twice; an error is left for those requests to report.

use std::sync::Arc;

use axum::extract::Query;
use axum::http::Uri;
use serde::Deserialize;

use crate::state::AppState;
use crate::trace::host_index::host_index;
use crate::trace::query::run_and_host;

/// The page's own parameters that name work (the rest are the page's to read).
#[derive(Debug, Default, Deserialize)]
struct PageQuery {
    run: Option<String>,
    host: Option<String>,
    tool: Option<String>,
}

/// Begins, in the background, what the page at `uri` will ask for first: nothing when
/// its query names no known run (or cannot be read).
pub fn begin_for_page(state: &Arc<AppState>, uri: &Uri) {
    let Ok(Query(query)) = Query::<PageQuery>::try_from_uri(uri) else { return };
    let Some(run) = query.run.filter(|run| state.run(run).is_ok()) else { return };
    let state = Arc::clone(state);
    tokio::spawn(async move {
        if state.session(&run).await.is_err() || query.tool.as_deref() != Some("trace_viewer") {
            return;
        }
        if let Ok((run, host)) = run_and_host(&state, &Some(run), &query.host) {
            let _ = host_index(&state, &run, &host).await;
        }
    });
}
