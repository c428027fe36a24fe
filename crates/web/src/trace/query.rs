//! The parameters every trace endpoint shares (`run`, `host`) and the parsing of the
//! numeric ones, each failure a 400 naming the parameter.

use std::str::FromStr;

use crate::error::ApiError;
use crate::params::required;
use crate::state::AppState;

/// The run and host a trace request is about, checked against the catalog. `host=all`
/// stands for the run's only host; the trace viewer shows one host at a time.
pub(crate) fn run_and_host(
    state: &AppState,
    run: &Option<String>,
    host: &Option<String>,
) -> Result<(String, String), ApiError> {
    let entry = state.run(required(run, "run")?)?;
    let host = required(host, "host")?;
    let mut hosts = entry.host_names();
    let file_host = if host == "all" {
        match (hosts.next(), hosts.next()) {
            (Some(only), None) => only.to_string(),
            _ => {
                let known: Vec<&str> = entry.host_names().collect();
                return Err(ApiError::bad_request(format!(
                    "the trace viewer shows one host at a time; pick one of: {}",
                    known.join(", ")
                )));
            }
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

/// Parameter `name` parsed as a `T`, or `default` when absent.
pub(crate) fn number_or<T: FromStr>(value: &Option<String>, name: &str, default: T) -> Result<T, ApiError> {
    match value.as_deref() {
        None | Some("") => Ok(default),
        Some(_) => number(value, name),
    }
}
