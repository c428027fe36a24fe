//! The parameters every trace endpoint shares (`run`, `host`) and the parsing of the
//! numeric ones, each failure a 400 naming the parameter.

use std::str::FromStr;

use super::together;
use crate::error::ApiError;
use crate::params::required;
use crate::state::AppState;

/// The run and host a trace request is about, checked against the catalog.
/// `host=all` (by the hosts' clocks) and `host=all@steps` (on their first common step)
/// stand for every host of the run on one time axis, or for its only host.
pub(crate) fn run_and_host(
    state: &AppState,
    run: &Option<String>,
    host: &Option<String>,
) -> Result<(String, String), ApiError> {
    let entry = state.run(required(run, "run")?)?;
    let host = required(host, "host")?;
    let mut hosts = entry.host_names();
    let file_host = if together::is_together(host) {
        match (hosts.next(), hosts.next()) {
            (Some(only), None) => only.to_string(),
            (None, _) => return Err(ApiError::not_found(format!("run {} has no host", entry.name))),
            _ => host.to_string(),
        }
    } else {
        state.host_file(&entry.name, host)?.host_name
    };
    Ok((entry.name.clone(), file_host))
}

/// Parameter `name` parsed as a `T` (400 when missing or malformed).
pub(crate) fn number<T: FromStr>(value: &Option<String>, name: &str) -> Result<T, ApiError> {
    let text = required(value, name)?;
    text.trim().parse().map_err(|_| {
        let digits = text.trim().strip_prefix('-').unwrap_or(text.trim());
        if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
            ApiError::bad_request(format!("{name}={text:?} is out of range"))
        } else {
            ApiError::bad_request(format!("{name}={text:?} is not a valid number"))
        }
    })
}

/// Widest window a client may ask for, in pixels: an answer holds a few items per pixel
/// (of each depth level of each track, for `view`), so this bounds its size.
pub(crate) const MAX_WIDTH_PX: u32 = 16_384;

/// `start_ps` and `end_ps` of a request, the end not before the start (400 otherwise).
pub(crate) fn time_range(start: &Option<String>, end: &Option<String>) -> Result<(i64, i64), ApiError> {
    let start_ps: i64 = number(start, "start_ps")?;
    let end_ps: i64 = number(end, "end_ps")?;
    if end_ps < start_ps {
        return Err(ApiError::bad_request(format!("end_ps ({end_ps}) is before start_ps ({start_ps})")));
    }
    Ok((start_ps, end_ps))
}

/// [`time_range`] and a `width_px` of 1 to [`MAX_WIDTH_PX`] (400 otherwise): a window to draw.
pub(crate) fn window(
    start: &Option<String>,
    end: &Option<String>,
    width: &Option<String>,
) -> Result<(i64, i64, u32), ApiError> {
    let (start_ps, end_ps) = time_range(start, end)?;
    let width_px: u32 = number(width, "width_px")?;
    if !(1..=MAX_WIDTH_PX).contains(&width_px) {
        return Err(ApiError::bad_request(format!("width_px must be between 1 and {MAX_WIDTH_PX}, not {width_px}")));
    }
    Ok((start_ps, end_ps, width_px))
}

/// Parameter `name` parsed as a `T`, or `default` when absent.
pub(crate) fn number_or<T: FromStr>(value: &Option<String>, name: &str, default: T) -> Result<T, ApiError> {
    match value.as_deref() {
        None | Some("") => Ok(default),
        Some(_) => number(value, name),
    }
}
