//! `GET /api/python/flame` (see API.md): the `python` tool's flame graph of the sampled
//! Python stacks, for one thread or all, one step, a time range or the whole recording,
//! with or without waiting threads' samples.
//!
//! The one design decision to know: the stacks are read once per run and host into a
//! [`FlameIndex`] (cached in the state like a tool result, keyed by the `python` tool's
//! request), and every thread, step or waiting-threads choice is counted from that
//! index on a blocking thread, without the profile; the answers themselves are small
//! (the tree is bounded) and not cached.

use std::str::FromStr;
use std::sync::Arc;

use axum::extract::State;
use axum::response::Response;
use mlprof_analysis::python_flame::{FlameIndex, FlameOptions, Window};
use mlprof_analysis::tool::{Analysis, Options};
use serde::Deserialize;

use crate::blocking::on_blocking_thread;
use crate::error::ApiError;
use crate::params::ApiQuery;
use crate::select;
use crate::state::AppState;
use crate::streamed;
use crate::tool_output::from_session;
use crate::tool_request::{ToolQuery, ToolRequest};

/// The query of `/api/python/flame`, as sent.
#[derive(Debug, Default, Deserialize)]
pub struct FlameQuery {
    /// Run name (required).
    run: Option<String>,
    /// Host name or `all` (default all).
    host: Option<String>,
    /// One thread: its name as `threads` lists it, or its tid (default all threads).
    thread: Option<String>,
    /// A step number (from `steps`).
    step: Option<String>,
    /// With `end_ps`: the start of a time range, ps.
    start_ps: Option<String>,
    /// With `start_ps`: the end of a time range, ps.
    end_ps: Option<String>,
    /// `1` to count waiting threads' samples too (default `0`).
    idle: Option<String>,
}

/// `GET /api/python/flame?run&host&thread&step|start_ps&end_ps&idle`.
pub async fn flame(
    State(state): State<Arc<AppState>>,
    ApiQuery(query): ApiQuery<FlameQuery>,
) -> Result<Response, ApiError> {
    let python = ToolQuery {
        run: query.run.clone(),
        host: query.host.clone(),
        tool: Some("python".into()),
        ..ToolQuery::default()
    };
    let request = ToolRequest::parse(&python, state.as_ref())?;
    let options = flame_options(&query)?;
    let index = flame_index(&state, &request).await?;
    let flame = on_blocking_thread("drawing the flame graph", move || index.flame(&options)).await?;
    Ok(streamed::json(flame.map_err(|e| ApiError::bad_request(e.to_string()))?))
}

/// The filter `query` asks for (400 for a malformed or contradictory parameter).
fn flame_options(query: &FlameQuery) -> Result<FlameOptions, ApiError> {
    let include_idle = match query.idle.as_deref() {
        None | Some("") | Some("0") => false,
        Some("1") => true,
        Some(other) => return Err(ApiError::bad_request(format!("idle={other:?}: use 0 or 1"))),
    };
    let step: Option<i64> = parsed(&query.step, "step")?;
    let range = (parsed::<i64>(&query.start_ps, "start_ps")?, parsed::<i64>(&query.end_ps, "end_ps")?);
    let window = match (step, range) {
        (None, (None, None)) => Window::All,
        (Some(num), (None, None)) => Window::Step(num),
        (None, (Some(begin_ps), Some(end_ps))) => Window::Range { begin_ps, end_ps },
        (None, _) => return Err(ApiError::bad_request("start_ps and end_ps go together")),
        (Some(_), _) => return Err(ApiError::bad_request("step or start_ps/end_ps, not both")),
    };
    let thread = query.thread.clone().filter(|t| !t.is_empty());
    Ok(FlameOptions { thread, window, include_idle })
}

/// Parameter `name` as a `T`, `None` when absent (400 when malformed).
fn parsed<T: FromStr>(value: &Option<String>, name: &str) -> Result<Option<T>, ApiError> {
    match value.as_deref().map(str::trim) {
        None | Some("") => Ok(None),
        Some(text) => {
            text.parse().map(Some).map_err(|_| ApiError::bad_request(format!("{name}={text:?} is not a whole number")))
        }
    }
}

/// The index of the sampled stacks `request` (the `python` tool on a run and host)
/// covers: cached, or read from the session on a blocking thread.
async fn flame_index(state: &Arc<AppState>, request: &ToolRequest) -> Result<Arc<FlameIndex>, ApiError> {
    let what = "reading the sampled Python stacks".to_string();
    from_session(state, state.flame_indexes(), request, what, |session, request| {
        let hosts = select::hosts(session, request.host.as_deref())?;
        Ok(FlameIndex::of(&Analysis::new(hosts, Options::default())))
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(pairs: &[(&str, &str)]) -> Result<FlameOptions, ApiError> {
        let mut query = FlameQuery::default();
        for &(key, value) in pairs {
            let slot = match key {
                "thread" => &mut query.thread,
                "step" => &mut query.step,
                "start_ps" => &mut query.start_ps,
                "end_ps" => &mut query.end_ps,
                "idle" => &mut query.idle,
                _ => panic!("{key}"),
            };
            *slot = Some(value.to_string());
        }
        flame_options(&query)
    }

    #[test]
    fn parameters_are_checked() {
        assert_eq!(options(&[]), Ok(FlameOptions::default()));
        let step = options(&[("step", "3"), ("idle", "1"), ("thread", "42")]).expect("good");
        assert_eq!(step, FlameOptions { thread: Some("42".into()), window: Window::Step(3), include_idle: true });
        let range = options(&[("start_ps", "10"), ("end_ps", "20")]).expect("good");
        assert_eq!(range.window, Window::Range { begin_ps: 10, end_ps: 20 });
        for bad in [
            &[("idle", "yes")][..],
            &[("step", "x")],
            &[("start_ps", "10")],
            &[("step", "1"), ("start_ps", "1"), ("end_ps", "2")],
            &[("end_ps", "1.5"), ("start_ps", "1")],
        ] {
            assert!(matches!(options(bad), Err(ApiError::BadRequest(_))), "{bad:?}");
        }
    }
}
