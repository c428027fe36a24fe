//! `GET /api/trace/counters?run&host&start_ps&end_ps&width_px`: the host's counter
//! series ([`mlprof_analysis::counters`]) in a window, at most about one point per pixel:
//! each pixel's readings as their first time, least, greatest and last value, after the
//! reading in force at the window's start. Series are read off the model once per host
//! and kept.

use std::sync::Arc;

use axum::extract::State;
use axum::response::Response;
use mlprof_analysis::counters::{CounterSeries, counter_series};
use serde::{Deserialize, Serialize};

use super::query::{self, run_and_host};
use super::together;
use crate::blocking::on_blocking_thread;
use crate::error::ApiError;
use crate::params::ApiQuery;
use crate::state::{AppState, HostKey};
use crate::tool_output::from_session;

/// The query of `counters`.
#[derive(Debug, Deserialize)]
pub(crate) struct CountersQuery {
    run: Option<String>,
    host: Option<String>,
    start_ps: Option<String>,
    end_ps: Option<String>,
    width_px: Option<String>,
}

/// The answer of `counters`.
#[derive(Debug, Serialize)]
pub(crate) struct CountersAnswer {
    start_ps: i64,
    end_ps: i64,
    series: Vec<SeriesAnswer>,
}

/// One series in the window.
#[derive(Debug, Serialize)]
struct SeriesAnswer {
    name: String,
    group: String,
    /// Least and greatest value over the whole profile (a track's scale does not jump
    /// as the window moves).
    min: f64,
    max: f64,
    /// `[time_ps, least, greatest, last]` per pixel with readings, in time order; the
    /// first is the reading in force at the window's start (at its own time).
    points: Vec<[f64; 4]>,
}

/// `GET /api/trace/counters`.
pub(crate) async fn counters(
    State(state): State<Arc<AppState>>,
    ApiQuery(query): ApiQuery<CountersQuery>,
) -> Result<Response, ApiError> {
    let (run, host) = run_and_host(&state, &query.run, &query.host)?;
    let (start_ps, end_ps, width_px) = query::window(&query.start_ps, &query.end_ps, &query.width_px)?;
    let series = host_series(&state, &run, &host).await?;
    let answer = on_blocking_thread("trace counters", move || CountersAnswer {
        start_ps,
        end_ps,
        series: series.iter().map(|s| in_window(s, start_ps, end_ps, width_px)).collect(),
    })
    .await?;
    Ok(crate::streamed::json(answer))
}

/// The counter series of `host` of `run`: kept, or read off its session.
async fn host_series(state: &Arc<AppState>, run: &str, host: &str) -> Result<Arc<Vec<CounterSeries>>, ApiError> {
    let what = "reading the counters".to_string();
    from_session(state, state.counter_series(), &HostKey::new(run, host), what, |session, key| {
        if together::is_together(&key.host) {
            return Ok(together::counters(session, &together::placements(session, &key.host).hosts));
        }
        let model = session
            .hosts
            .iter()
            .find(|h| h.name == key.host)
            .ok_or_else(|| ApiError::not_found(format!("no host named {:?} in run {}", key.host, key.run)))?;
        Ok(counter_series(model))
    })
    .await
}

/// `series` in `[start_ps, end_ps]` at `width_px` pixels (see the module docs).
fn in_window(series: &CounterSeries, start_ps: i64, end_ps: i64, width_px: u32) -> SeriesAnswer {
    let values = series.points.iter().map(|&(_, v)| v).filter(|v| v.is_finite());
    let min = values.clone().fold(f64::INFINITY, f64::min);
    let max = values.fold(f64::NEG_INFINITY, f64::max);
    let first = series.points.partition_point(|&(t, _)| t < start_ps);
    let last = series.points.partition_point(|&(t, _)| t <= end_ps);
    let mut points: Vec<[f64; 4]> = Vec::new();
    if let Some(&(t, v)) = first.checked_sub(1).and_then(|i| series.points.get(i)) {
        points.push([t as f64, v, v, v]);
    }
    let bucket_ps = ((end_ps - start_ps) / i64::from(width_px)).max(1);
    let mut bucket = i64::MIN;
    for &(t, v) in series.points.get(first..last).unwrap_or(&[]) {
        let at = (t - start_ps) / bucket_ps;
        match points.last_mut() {
            Some(point) if at == bucket => {
                point[1] = point[1].min(v);
                point[2] = point[2].max(v);
                point[3] = v;
            }
            _ => {
                bucket = at;
                points.push([t as f64, v, v, v]);
            }
        }
    }
    SeriesAnswer {
        name: series.name.clone(),
        group: series.group.clone(),
        min: if min.is_finite() { min } else { 0.0 },
        max: if max.is_finite() { max } else { 0.0 },
        points,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_holds_the_reading_in_force_then_one_point_per_pixel() {
        let series = CounterSeries {
            name: "CPU (%)".into(),
            group: "p".into(),
            points: vec![(0, 5.0), (100, 10.0), (101, 30.0), (102, 20.0), (250, 40.0), (900, 1.0)],
        };
        let answer = in_window(&series, 50, 300, 2);
        assert_eq!((answer.min, answer.max), (1.0, 40.0));
        assert_eq!(answer.points, vec![[0.0, 5.0, 5.0, 5.0], [100.0, 10.0, 30.0, 20.0], [250.0, 40.0, 40.0, 40.0]]);
        assert!(in_window(&series, 1000, 2000, 10).points == vec![[900.0, 1.0, 1.0, 1.0]], "the last reading holds");
        assert!(in_window(&CounterSeries::default(), 0, 10, 1).points.is_empty());
    }
}
