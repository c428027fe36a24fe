//! Choosing the hosts of a loaded session that a request names.

use mlprof_model::{Host, Session};

use crate::error::ApiError;

/// The host called `name` in `session` (404 naming the known hosts otherwise).
pub fn host<'a>(session: &'a Session, name: &str) -> Result<&'a Host, ApiError> {
    session.hosts.iter().find(|h| h.name == name).ok_or_else(|| unknown_host(session, name))
}

/// The hosts `name` selects: all of them for `None` or `all`, else the one called so.
pub fn hosts<'a>(session: &'a Session, name: Option<&str>) -> Result<Vec<&'a Host>, ApiError> {
    match name {
        None | Some("all") => Ok(session.hosts.iter().collect()),
        Some(name) => host(session, name).map(|h| vec![h]),
    }
}

fn unknown_host(session: &Session, name: &str) -> ApiError {
    let known: Vec<&str> = session.hosts.iter().map(|h| h.name.as_str()).collect();
    ApiError::not_found(format!("no host named {name:?} in run {}; hosts: {}", session.name, known.join(", ")))
}
