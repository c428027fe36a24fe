//! The Python start-up hook of `mlprof run`: the `sitecustomize.py` it writes into the
//! run's private directory, the environment that makes the job's Python import it, and
//! what the hook reports back through files in that directory.
//!
//! The hook (`hook/sitecustomize.py`, embedded) starts JAX's or TensorFlow's own profiler
//! server on a loopback port chosen here once the job imports the framework, then writes
//! `server.json`; mlprof captures that server with its gRPC client. In a PyTorch process it
//! announces itself (`torch-PID.ready`) and, asked (`torch-PID.request`), records every
//! thread with `torch.profiler` — the fallback where Kineto's on-demand mode does not
//! answer (PyTorch builds without it, a launcher that drops `KINETO_USE_DAEMON`). The one decision: the
//! hook and mlprof talk only through files in the run directory (a claim file, a JSON
//! written by rename, an error log), so a hook that fails, or an mlprof that is gone,
//! costs the job nothing.

use std::ffi::OsString;
use std::io;
use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

/// The hook's source, written as `<run dir>/hook/sitecustomize.py`.
pub const SITECUSTOMIZE: &str = include_str!("hook/sitecustomize.py");
/// Written by the hook once a framework's profiler server listens.
pub const SERVER_FILE: &str = "server.json";
/// Lines the hook appends when something inside it failed.
pub const HOOK_LOG: &str = "hook.log";
/// The largest `server.json` or `hook.log` read back (the job could write anything there).
const MAX_REPORT_BYTES: u64 = 64 * 1024;
/// The most PyTorch processes whose announcements are read.
const MAX_TORCH_PROCESSES: usize = 256;

/// A PyTorch process the hook announced.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct TorchProcess {
    /// The process.
    pub pid: i32,
    /// PyTorch's version.
    #[serde(default)]
    pub version: String,
    /// Kineto's on-demand mode was on in it (`KINETO_USE_DAEMON=1`): the hook then runs
    /// no thread there and cannot trace it.
    #[serde(default)]
    pub kineto_daemon: bool,
    /// Why Kineto keeps CUPTI attached after this process's traces (its kernel launches
    /// then stay slower until it exits): the hook sets `TEARDOWN_CUPTI=1` where PyTorch's
    /// CUDA is 12.6 or later and the job has not set it; `None` where CUPTI is detached
    /// or there is none.
    #[serde(default)]
    pub cupti_stays: Option<String>,
}

/// What mlprof asks the hook of a PyTorch process to record.
#[derive(Serialize)]
struct TorchRequest<'a> {
    duration_ms: u128,
    log_file: &'a Path,
}

/// A timed Kineto trace handed to a PyTorch process: when it should start and end
/// (seconds since the Unix epoch) and the file Kineto writes it to.
#[derive(Serialize)]
struct KinetoWindow<'a> {
    starts_unix_s: f64,
    ends_unix_s: f64,
    trace: &'a Path,
}

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

    /// The PyTorch processes the hook announced (at most 256), by pid.
    pub fn torch_processes(&self) -> Vec<TorchProcess> {
        let Ok(entries) = std::fs::read_dir(&self.run_dir) else { return Vec::new() };
        let mut processes: Vec<TorchProcess> = entries
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_str().is_some_and(|n| n.starts_with("torch-") && n.ends_with(".ready")))
            .take(MAX_TORCH_PROCESSES)
            .filter_map(|e| serde_json::from_str(&read_bounded(&e.path())?).ok())
            .collect();
        processes.sort_by_key(|p| p.pid);
        processes
    }

    /// Why Kineto keeps CUPTI attached after the traces of PyTorch process `pid`
    /// ([`TorchProcess::cupti_stays`]): `None` until the hook has announced the process,
    /// `Some(None)` where CUPTI is detached after each trace.
    pub fn cupti_stays(&self, pid: i32) -> Option<Option<String>> {
        let text = read_bounded(&self.run_dir.join(format!("torch-{pid}.ready")))?;
        let process: TorchProcess = serde_json::from_str(&text).ok()?;
        Some(process.cupti_stays)
    }

    /// Asks the hook in PyTorch process `pid` to record `duration` with torch.profiler
    /// and write the trace to `log_file` (written whole, by rename).
    pub fn request_torch_trace(&self, pid: i32, duration: std::time::Duration, log_file: &Path) -> io::Result<()> {
        let request = TorchRequest { duration_ms: duration.as_millis(), log_file };
        self.write_report(&format!("torch-{pid}.request"), &request)
    }

    /// Tells the hook in PyTorch process `pid` that Kineto was handed a timed trace that
    /// should record from `starts` to `ends` and be written to `trace`
    /// (`torch-PID.window`, replaced by each trace handed out): a process that exits
    /// about when the trace starts or ends waits for that moment to pass instead of
    /// dying in it (see the hook).
    pub fn announce_kineto_trace(
        &self,
        pid: i32,
        starts: SystemTime,
        ends: SystemTime,
        trace: &Path,
    ) -> io::Result<()> {
        let unix_s =
            |at: SystemTime| at.duration_since(SystemTime::UNIX_EPOCH).map_or(0.0, |since| since.as_secs_f64());
        let window = KinetoWindow { starts_unix_s: unix_s(starts), ends_unix_s: unix_s(ends), trace };
        self.write_report(&format!("torch-{pid}.window"), &window)
    }

    /// Writes `value` as JSON to `name` in the run directory, whole (by rename), so the
    /// hook never reads half of it.
    fn write_report(&self, name: &str, value: &impl Serialize) -> io::Result<()> {
        let text = serde_json::to_string(value).map_err(io::Error::other)?;
        let tmp = self.run_dir.join(format!("{name}.tmp"));
        std::fs::write(&tmp, text)?;
        std::fs::rename(&tmp, self.run_dir.join(name))
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

    #[test]
    fn pytorch_processes_are_announced_and_asked_by_file() {
        let dir = tempfile::tempdir().unwrap();
        let hook = Hook::install(dir.path()).unwrap();
        assert!(hook.torch_processes().is_empty());
        std::fs::write(dir.path().join("torch-9.ready"), r#"{"pid": 9, "version": "2.11.0"}"#).unwrap();
        std::fs::write(dir.path().join("torch-8.ready"), "garbage").unwrap();
        std::fs::write(dir.path().join("torch-3.ready.tmp"), r#"{"pid": 3}"#).unwrap();
        assert_eq!(
            hook.torch_processes(),
            vec![TorchProcess { pid: 9, version: "2.11.0".into(), kineto_daemon: false, cupti_stays: None }]
        );
        hook.request_torch_trace(9, std::time::Duration::from_millis(1500), Path::new("/s/t.json")).unwrap();
        let request = std::fs::read_to_string(dir.path().join("torch-9.request")).unwrap();
        assert_eq!(request, r#"{"duration_ms":1500,"log_file":"/s/t.json"}"#);
        let starts = SystemTime::UNIX_EPOCH + std::time::Duration::from_millis(1_800_000_000_500);
        let ends = starts + std::time::Duration::from_secs(2);
        hook.announce_kineto_trace(9, starts, ends, Path::new("/s/t_9.json")).unwrap();
        let window = std::fs::read_to_string(dir.path().join("torch-9.window")).unwrap();
        assert_eq!(window, r#"{"starts_unix_s":1800000000.5,"ends_unix_s":1800000002.5,"trace":"/s/t_9.json"}"#);
        assert!(!dir.path().join("torch-9.window.tmp").exists());
    }
}
