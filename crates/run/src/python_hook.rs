//! The Python start-up hook of `mlprof run`: the `sitecustomize.py` it writes into the
//! run's private directory, the environment that makes the job's Python import it, and
//! what the hook reports back through files in that directory.
//!
//! The hook (`hook/sitecustomize.py`, embedded) starts JAX's or TensorFlow's own profiler
//! server on a loopback port chosen here once the job imports the framework, then writes
//! `server.json`; mlprof captures that server with its gRPC client. The one decision: the
//! hook and mlprof talk only through files in the run directory (a claim file, a JSON
//! written by rename, an error log), so a hook that fails, or an mlprof that is gone,
//! costs the job nothing.

use std::ffi::OsString;
use std::io;
use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// The hook's source, written as `<run dir>/hook/sitecustomize.py`.
pub const SITECUSTOMIZE: &str = include_str!("hook/sitecustomize.py");
/// Written by the hook once a framework's profiler server listens.
pub const SERVER_FILE: &str = "server.json";
/// Lines the hook appends when something inside it failed.
pub const HOOK_LOG: &str = "hook.log";
/// The largest `server.json` or `hook.log` read back (the job could write anything there).
const MAX_REPORT_BYTES: u64 = 64 * 1024;

/// A framework profiler server the hook started.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct StartedServer {
    /// The process serving.
    pub pid: i32,
    /// `jax` or `tensorflow`.
    pub framework: String,
    /// The framework's version.
    #[serde(default)]
    pub version: String,
    /// The loopback port.
    pub port: u16,
}

impl StartedServer {
    /// `JAX 0.11.2` / `TensorFlow 2.21.0`.
    pub fn framework_label(&self) -> String {
        let name = match self.framework.as_str() {
            "jax" => "JAX",
            "tensorflow" => "TensorFlow",
            other => other,
        };
        if self.version.is_empty() { name.to_string() } else { format!("{name} {}", self.version) }
    }
}

/// The hook installed in a run directory.
#[derive(Clone, Debug)]
pub struct Hook {
    run_dir: PathBuf,
    port: u16,
}

impl Hook {
    /// Writes the hook into `run_dir/hook/` and picks a free loopback port for the server.
    pub fn install(run_dir: &Path) -> io::Result<Hook> {
        let hook_dir = run_dir.join("hook");
        std::fs::create_dir_all(&hook_dir)?;
        std::fs::write(hook_dir.join("sitecustomize.py"), SITECUSTOMIZE)?;
        let port = free_loopback_port()?;
        Ok(Hook { run_dir: run_dir.to_path_buf(), port })
    }

    /// The port the server will listen on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The variables to add to the job's environment: `PYTHONPATH` with the hook first
    /// (then whatever `existing_pythonpath` held), `MLPROF_RUN_DIR` and `MLPROF_RUN_PORT`.
    pub fn environment(&self, existing_pythonpath: Option<OsString>) -> Vec<(OsString, OsString)> {
        let mut path = self.run_dir.join("hook").into_os_string();
        if let Some(existing) = existing_pythonpath.filter(|p| !p.is_empty()) {
            path.push(":");
            path.push(existing);
        }
        vec![
            ("PYTHONPATH".into(), path),
            ("MLPROF_RUN_DIR".into(), self.run_dir.clone().into_os_string()),
            ("MLPROF_RUN_PORT".into(), self.port.to_string().into()),
        ]
    }

    /// The server the hook reported, once it has (`None` before, or when the report
    /// cannot be read: a partial write is impossible, since the hook renames it in place).
    pub fn started_server(&self) -> Option<StartedServer> {
        let text = read_bounded(&self.run_dir.join(SERVER_FILE))?;
        serde_json::from_str(&text).ok()
    }

    /// What the hook logged as going wrong, one entry per line (empty when nothing did).
    pub fn problems(&self) -> Vec<String> {
        read_bounded(&self.run_dir.join(HOOK_LOG))
            .map(|text| text.lines().filter(|l| !l.trim().is_empty()).map(str::to_string).collect())
            .unwrap_or_default()
    }
}

fn read_bounded(path: &Path) -> Option<String> {
    use std::io::Read;
    let file = std::fs::File::open(path).ok()?;
    let mut text = String::new();
    file.take(MAX_REPORT_BYTES).read_to_string(&mut text).ok()?;
    Some(text)
}

/// A loopback TCP port that is free now. Another process could take it before the job's
/// server binds; the hook then logs the bind error and mlprof says so.
fn free_loopback_port() -> io::Result<u16> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
    Ok(listener.local_addr()?.port())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hook_goes_first_on_pythonpath_and_keeps_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let hook = Hook::install(dir.path()).unwrap();
        assert!(dir.path().join("hook/sitecustomize.py").is_file());
        let env = hook.environment(Some("/a:/b".into()));
        let pythonpath = &env.iter().find(|(k, _)| k == "PYTHONPATH").unwrap().1;
        assert_eq!(pythonpath, &OsString::from(format!("{}:/a:/b", dir.path().join("hook").display())));
        let env = hook.environment(Some(OsString::new()));
        let pythonpath = &env.iter().find(|(k, _)| k == "PYTHONPATH").unwrap().1;
        assert_eq!(pythonpath, &dir.path().join("hook").into_os_string());
        assert!(hook.port() > 0);
    }

    #[test]
    fn reports_are_read_back_and_garbage_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let hook = Hook::install(dir.path()).unwrap();
        assert_eq!(hook.started_server(), None);
        std::fs::write(dir.path().join(SERVER_FILE), "{not json").unwrap();
        assert_eq!(hook.started_server(), None);
        std::fs::write(
            dir.path().join(SERVER_FILE),
            r#"{"pid": 7, "framework": "jax", "version": "0.11.2", "port": 4000}"#,
        )
        .unwrap();
        let server = hook.started_server().unwrap();
        assert_eq!(server.framework_label(), "JAX 0.11.2");
        std::fs::write(dir.path().join(HOOK_LOG), "pid 7: boom\n\n").unwrap();
        assert_eq!(hook.problems(), vec!["pid 7: boom".to_string()]);
    }
}
