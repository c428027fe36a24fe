//! Choosing the session and hosts a command works on.

use mlprof_model::{Host, Session};

use crate::Failure;

/// The session called `name`, or the newest (last by name) when `name` is `None`.
pub fn session<'a>(sessions: &'a [Session], name: Option<&str>) -> Result<&'a Session, Failure> {
    match name {
        Some(n) => sessions.iter().find(|s| s.name == n).ok_or_else(|| {
            let known: Vec<&str> = sessions.iter().map(|s| s.name.as_str()).collect();
            Failure::input(format!("no session named {n:?}; sessions: {}", known.join(", ")))
        }),
        None => sessions.last().ok_or_else(|| Failure::nothing("no session found")),
    }
}

/// The hosts of `session` called `name`, or all of them when `name` is `None`.
pub fn hosts<'a>(session: &'a Session, name: Option<&str>) -> Result<Vec<&'a Host>, Failure> {
    match name {
        Some(n) => {
            let found: Vec<&Host> = session.hosts.iter().filter(|h| h.name == n).collect();
            if found.is_empty() {
                let known: Vec<&str> = session.hosts.iter().map(|h| h.name.as_str()).collect();
                return Err(Failure::input(format!(
                    "no host named {n:?} in session {}; hosts: {}",
                    session.name,
                    known.join(", ")
                )));
            }
            Ok(found)
        }
        None => Ok(session.hosts.iter().collect()),
    }
}

/// [`hosts`], for a command that analyses them: hosts without a single event (an empty
/// `{"traceEvents": []}`, a capture that recorded nothing) are nothing usable (exit 1).
pub fn analysable_hosts<'a>(session: &'a Session, name: Option<&str>) -> Result<Vec<&'a Host>, Failure> {
    let found = hosts(session, name)?;
    if found.iter().all(|host| host.event_count() == 0) {
        let which = if found.len() == 1 { "its host".to_string() } else { format!("any of its {} hosts", found.len()) };
        return Err(Failure::nothing(format!("session {}: no events in {which}: nothing was recorded", session.name)));
    }
    Ok(found)
}
