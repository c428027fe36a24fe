//! `mlprof attach` to a PyTorch process whose Kineto on-demand mode is on
//! (`KINETO_USE_DAEMON` set in its environment by a launcher, a job script or a
//! cluster's defaults): mlprof stands in for dynolog at the endpoint the process polls
//! (the abstract `@dynolog`, or `$KINETO_IPC_SOCKET_DIR/dynolog`), hands it one trace
//! config at its next poll, and files the trace Kineto writes. Other processes polling
//! the same endpoint (other jobs on the node) get the empty reply dynolog gives when it
//! has nothing for them.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use std::os::unix::fs::{MetadataExt, PermissionsExt};

use crate::kineto_daemon::{
    Endpoint, KinetoDaemon, Received, SOCKET_NAME, TraceEnding, kineto_output_path, trace_ending,
};
use crate::kineto_ipc::TraceWindow;
use crate::sampling::procfs::environ_value;
use crate::schedule::{Rounds, Schedule};

/// How long a Kineto client may take to poll: it polls about every 5 s.
pub const POLL_WAIT: Duration = Duration::from_secs(15);
/// How long a trace of whole steps may record.
const STEPS_SPAN: Duration = Duration::from_secs(60);
/// How long Kineto may take to write a trace once its window is over.
const WRITE_WAIT: Duration = Duration::from_secs(30);
/// How often the trace file is looked at while Kineto writes it.
const LOOK_EVERY: Duration = Duration::from_millis(200);
/// How many unchanged looks make a file that ends in `}` complete.
const STABLE_LOOKS: u32 = 5;
/// The session's subdirectory Kineto writes into: writable by the process's user when
/// that is not mlprof's (an attach as root), removed once the trace is moved out.
const KINETO_DIR: &str = ".kineto";

/// The endpoint a process's Kineto polls, read from its environment
/// (`/proc/PID/environ`, the environment it started with): `None` when its on-demand
/// mode is off.
pub fn endpoint(pid: u32) -> std::io::Result<Option<Endpoint>> {
    let environ = std::fs::read(format!("/proc/{pid}/environ"))?;
    Ok(endpoint_in(&environ))
}

/// [`endpoint`] of an environment block (`NAME=value` entries, each NUL-terminated).
fn endpoint_in(environ: &[u8]) -> Option<Endpoint> {
    // PyTorch's own test of the variable: set and not empty.
    environ_value(environ, "KINETO_USE_DAEMON")?;
    Some(match environ_value(environ, "KINETO_IPC_SOCKET_DIR") {
        Some(dir) => Endpoint::Dir(PathBuf::from(dir)),
        None => Endpoint::Abstract,
    })
}

/// Why Kineto will keep CUPTI attached after a trace of `pid`, slowing its kernel
/// launches until it exits (pytorch/pytorch#144455): `TEARDOWN_CUPTI=1` is not in the
/// environment it started with. `None` where it is, or where `pid` maps no NVIDIA driver
/// (`libcuda`: no GPU work, so no CUPTI). A job that sets the variable in its own code
/// is not seen.
pub fn cupti_stays(pid: u32) -> Option<String> {
    if !crate::sampling::procfs::maps_library(pid, "libcuda.so") {
        return None;
    }
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
    cupti_stays_in(&environ)
}

/// [`cupti_stays`] of an environment block, for a process that uses the GPU.
fn cupti_stays_in(environ: &[u8]) -> Option<String> {
    match environ_value(environ, "TEARDOWN_CUPTI") {
        Some(value) if value == "1" => None,
        Some(value) => Some(format!("TEARDOWN_CUPTI={value} in its environment")),
        None => Some("TEARDOWN_CUPTI=1 is not in its environment".to_string()),
    }
}

/// A Kineto trace being recorded for an attach.
pub struct KinetoAttach {
    daemon: KinetoDaemon,
    pid: i32,
    rounds: Rounds,
    window: TraceWindow,
    /// Where Kineto is told to write (it inserts the pid), in [`KINETO_DIR`].
    log_file: PathBuf,
    /// The path socket this attach made, removed when it is done.
    socket_file: Option<PathBuf>,
    /// Set once the config went out.
    asked_at: Option<Instant>,
}

/// How an attach's Kineto trace ended.
#[derive(Debug)]
pub enum KinetoOutcome {
    /// The trace, moved to its place in the session.
    Written(PathBuf),
    /// No trace: why, in one line.
    Missing(String),
}

impl KinetoAttach {
    /// Binds `endpoint` to trace `pid` for `window`, Kineto writing into `session` as
    /// `<host>_<pid>.pt.trace.json`. Fails (one line) when the endpoint is held by
    /// another daemon or cannot be bound.
    pub fn bind(endpoint: Endpoint, pid: u32, window: TraceWindow, session: &Path, host: &str) -> Result<Self, String> {
        let foreign = process_uid(pid).is_some_and(|uid| uid != effective_uid());
        let daemon = bind_daemon(&endpoint, window, foreign)?;
        let pid = i32::try_from(pid).map_err(|_| format!("pid {pid} is out of range"))?;
        let dir = session.join(KINETO_DIR);
        let made = std::fs::create_dir_all(&dir).and_then(|()| {
            // The process's Kineto writes here as the process's user.
            if foreign { std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o1777)) } else { Ok(()) }
        });
        made.map_err(|error| format!("cannot make {}: {error}", dir.display()))?;
        let rounds = Rounds::new(Schedule { first: Instant::now(), every: None }, Duration::ZERO, 1);
        let socket_file = match &endpoint {
            Endpoint::Dir(dir) => Some(dir.join(SOCKET_NAME)),
            Endpoint::Abstract => None,
        };
        let log_file = dir.join(format!("{host}.json"));
        Ok(KinetoAttach { daemon: daemon.only_for(pid), pid, rounds, window, log_file, socket_file, asked_at: None })
    }

    /// How long the trace may record: its duration, or for whole steps [`STEPS_SPAN`].
    fn span(&self) -> Duration {
        match self.window {
            TraceWindow::Duration(duration) => duration,
            TraceWindow::Iterations(_) => STEPS_SPAN,
        }
    }

    /// Answers polls until the process was asked for its trace and the trace is written,
    /// or `give_up_at`; then moves the trace to `<host>_<pid>.pt.trace.json` beside the
    /// log file.
    pub async fn record(mut self, give_up_at: Instant, host: &str, say: &(dyn Fn(String) + Sync)) -> KinetoOutcome {
        let deadline = tokio::time::Instant::from_std(give_up_at);
        while self.asked_at.is_none() {
            let log_file = self.log_file.clone();
            let served = tokio::time::timeout_at(deadline, self.daemon.serve_one(&mut self.rounds, |_, _| log_file));
            match served.await {
                Err(_) => {
                    return KinetoOutcome::Missing(format!(
                        "it did not poll {} in time (its Kineto may poll another KINETO_IPC_SOCKET_DIR, set after it \
                         started)",
                        self.daemon.endpoint()
                    ));
                }
                Ok(Err(error)) => return KinetoOutcome::Missing(format!("{}: {error}", self.daemon.endpoint())),
                Ok(Ok(Received::Started(started))) => {
                    say(format!("pid {}: PyTorch: tracing {} (Kineto on demand)", self.pid, self.window));
                    if let Some(why) = u32::try_from(self.pid).ok().and_then(cupti_stays) {
                        say(format!(
                            "pid {}: Kineto keeps CUPTI attached after this trace ({why}), so its steps may stay \
                             slower until it exits; start the job with TEARDOWN_CUPTI=1 (PyTorch 2.11 or later, CUDA \
                             12.6 or later) to avoid it",
                            self.pid
                        ));
                    }
                    self.asked_at = Some(started.at);
                }
                Ok(Ok(_)) => {}
            }
        }
        let written_to = kineto_output_path(&self.log_file, self.pid);
        let span = self.span();
        let mut give_up_at = give_up_at.max(self.asked_at.unwrap_or_else(Instant::now) + span + WRITE_WAIT);
        let (mut last_size, mut stable) = (None, 0u32);
        let mut looks = tokio::time::interval(LOOK_EVERY);
        looks.tick().await;
        let mut serving = true;
        loop {
            // Polls are still answered (while the socket works): one from the process
            // means Kineto dropped the trace, and the answer asks for it again
            // (`kineto_retry`).
            let log_file = self.log_file.clone();
            let served = tokio::select! {
                served = self.daemon.serve_one(&mut self.rounds, |_, _| log_file), if serving => Some(served),
                _ = looks.tick() => None,
            };
            if let Some(served) = served {
                serving = served.is_ok();
                let Ok(Received::Started(started)) = served else { continue };
                say(format!("pid {}: {}", self.pid, crate::kineto_retry::asked_again(&started)));
                give_up_at = give_up_at.max(started.at + span + WRITE_WAIT);
                (last_size, stable) = (None, 0);
                continue;
            }
            // A look, every LOOK_EVERY.
            let size = std::fs::metadata(&written_to).ok().map(|m| m.len());
            stable = if size.is_some() && size == last_size { stable + 1 } else { 0 };
            last_size = size;
            let complete = stable > 0
                && match trace_ending(&written_to) {
                    TraceEnding::Named => true,
                    TraceEnding::Closed => stable >= STABLE_LOOKS,
                    TraceEnding::Open => false,
                };
            if complete {
                break;
            }
            if Instant::now() >= give_up_at {
                return KinetoOutcome::Missing(format!(
                    "Kineto wrote no complete trace to {} within {} s of asking",
                    written_to.display(),
                    (span + WRITE_WAIT).as_secs()
                ));
            }
        }
        let Some(session) = self.log_file.parent().and_then(Path::parent) else {
            return KinetoOutcome::Missing(format!("{} has no session directory", self.log_file.display()));
        };
        let target = session.join(format!("{host}_{}.pt.trace.json", self.pid));
        match std::fs::rename(&written_to, &target) {
            Ok(()) => KinetoOutcome::Written(target),
            Err(error) => {
                KinetoOutcome::Missing(format!("moving {} to {}: {error}", written_to.display(), target.display()))
            }
        }
    }
}

impl Drop for KinetoAttach {
    fn drop(&mut self) {
        if let Some(socket) = &self.socket_file {
            let _ = std::fs::remove_file(socket);
        }
        // Empty once the trace is moved out; left, with what Kineto wrote, otherwise.
        if let Some(dir) = self.log_file.parent() {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// Binds the endpoint; a path socket left by an attach that died (nobody receives on
/// it) is replaced. `foreign`: the process runs as another user, who must be able to
/// send to a path socket.
fn bind_daemon(endpoint: &Endpoint, window: TraceWindow, foreign: bool) -> Result<KinetoDaemon, String> {
    let bind = || KinetoDaemon::bind(endpoint.clone(), window);
    let bound = match (bind(), endpoint) {
        (Err(error), Endpoint::Dir(dir)) if error.kind() == std::io::ErrorKind::AddrInUse => {
            let path = dir.join(SOCKET_NAME);
            let stale = std::os::unix::net::UnixDatagram::unbound()
                .and_then(|probe| probe.connect(&path))
                .is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionRefused);
            if stale && std::fs::remove_file(&path).is_ok() { bind() } else { Err(error) }
        }
        (bound, _) => bound,
    };
    let daemon = bound.map_err(|error| {
        if error.kind() == std::io::ErrorKind::AddrInUse {
            format!(
                "{endpoint} is held by another daemon (dynolog, or the `mlprof run` that started it): trigger the \
                 trace there"
            )
        } else {
            format!("cannot listen on {endpoint}: {error}")
        }
    })?;
    if let (Endpoint::Dir(dir), true) = (endpoint, foreign) {
        let socket = dir.join(SOCKET_NAME);
        std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o777))
            .map_err(|error| format!("cannot open {} to its user: {error}", socket.display()))?;
    }
    Ok(daemon)
}

/// The user a process runs as (the owner of `/proc/PID`).
fn process_uid(pid: u32) -> Option<u32> {
    std::fs::metadata(format!("/proc/{pid}")).ok().map(|m| m.uid())
}

/// mlprof's effective user.
fn effective_uid() -> u32 {
    // SAFETY: geteuid has no arguments and cannot fail.
    unsafe { libc::geteuid() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cupti_stays_attached_unless_the_job_started_with_teardown_on() {
        assert_eq!(cupti_stays_in(b"PATH=/bin\0TEARDOWN_CUPTI=1\0"), None);
        assert_eq!(cupti_stays_in(b"TEARDOWN_CUPTI=0\0").as_deref(), Some("TEARDOWN_CUPTI=0 in its environment"));
        assert_eq!(cupti_stays_in(b"PATH=/bin\0").as_deref(), Some("TEARDOWN_CUPTI=1 is not in its environment"));
        // A process that maps no NVIDIA driver runs no CUPTI: this one, the test's.
        assert_eq!(cupti_stays(std::process::id()), None);
    }

    #[test]
    fn the_endpoint_comes_from_the_environment_the_process_started_with() {
        assert_eq!(endpoint_in(b"PATH=/bin\0HOME=/root\0"), None);
        assert_eq!(endpoint_in(b"KINETO_USE_DAEMON=\0"), None, "set but empty is off, as PyTorch reads it");
        assert_eq!(endpoint_in(b"XKINETO_USE_DAEMON=1\0"), None);
        assert_eq!(endpoint_in(b"KINETO_USE_DAEMON=1\0"), Some(Endpoint::Abstract));
        assert_eq!(endpoint_in(b"KINETO_USE_DAEMON=1\0KINETO_IPC_SOCKET_DIR=\0"), Some(Endpoint::Abstract));
        assert_eq!(
            endpoint_in(b"KINETO_IPC_SOCKET_DIR=/run/k\0A=b\0KINETO_USE_DAEMON=true"),
            Some(Endpoint::Dir(PathBuf::from("/run/k"))),
            "the last entry needs no NUL"
        );
        assert_eq!(endpoint(std::process::id()).ok(), Some(endpoint_in(&std::fs::read("/proc/self/environ").unwrap())));
    }

    #[test]
    fn a_socket_left_by_a_dead_attach_is_replaced_and_a_live_one_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let endpoint = Endpoint::Dir(dir.path().to_path_buf());
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let _guard = runtime.enter();
        let window = TraceWindow::Duration(Duration::from_secs(1));
        // A socket file nobody receives on.
        drop(std::os::unix::net::UnixDatagram::bind(dir.path().join(SOCKET_NAME)).unwrap());
        let live = bind_daemon(&endpoint, window, false).expect("the stale socket is replaced");
        let refused = bind_daemon(&endpoint, window, false).err().expect("a live daemon keeps its endpoint");
        assert!(refused.contains("is held by another daemon"), "{refused}");
        drop(live);
    }
}
