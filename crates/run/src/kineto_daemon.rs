//! The daemon side of Kineto's on-demand tracing for one run: a datagram socket at
//! `<dir>/dynolog` (the path Kineto uses when `KINETO_IPC_SOCKET_DIR=<dir>`), answering
//! each PyTorch process's polls, and handing out a trace config when
//! [`crate::schedule::Rounds`] says a process's round is due.
//!
//! The socket lives in the run's private directory, so only this run's job (same user)
//! reaches it and several `mlprof run`s on one node never see each other's processes —
//! unlike dynolog's node-wide abstract socket. Every datagram is decoded as hostile input
//! ([`crate::kineto_ipc`]); a bad one is counted, never fatal. A reply that cannot be
//! sent is dropped: the job polls again a few seconds later.

use std::io;
use std::path::{Path, PathBuf};
use std::time::Instant;

use tokio::net::UnixDatagram;

use crate::kineto_ipc::{self, Message, TraceWindow};
use crate::schedule::Rounds;

/// The socket's file name inside the socket directory (Kineto's fixed name).
pub const SOCKET_NAME: &str = "dynolog";
/// The largest datagram read; Kineto's polls are under 5 kB even with 1024 pids.
const MAX_DATAGRAM: usize = 64 * 1024;

/// A trace this daemon asked a process for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceStarted {
    /// The process.
    pub pid: i32,
    /// Its round (see [`crate::schedule`]).
    pub round: u32,
    /// The config's `ACTIVITIES_LOG_FILE`; Kineto writes [`kineto_output_path`] of it.
    pub log_file: PathBuf,
    /// When the config was sent.
    pub at: Instant,
}

/// What one received datagram amounted to.
#[derive(Debug)]
pub enum Received {
    /// A process polled; nothing to start.
    Polled {
        /// The process.
        pid: Option<i32>,
    },
    /// A trace config was sent.
    Started(TraceStarted),
    /// A registration was answered.
    Registered,
    /// A datagram that is not a Kineto message.
    Malformed(kineto_ipc::IpcError),
}

/// The socket and the state of every process's traces.
pub struct KinetoDaemon {
    socket: UnixDatagram,
    /// Holds each datagram received, reused.
    buffer: Vec<u8>,
    socket_dir: PathBuf,
    window: TraceWindow,
    polls: u64,
    malformed: u64,
}

impl KinetoDaemon {
    /// Binds `<socket_dir>/dynolog`; `window` is what each trace records.
    pub fn bind(socket_dir: &Path, window: TraceWindow) -> io::Result<KinetoDaemon> {
        let socket = UnixDatagram::bind(socket_dir.join(SOCKET_NAME))?;
        let buffer = vec![0u8; MAX_DATAGRAM];
        Ok(KinetoDaemon { socket, buffer, socket_dir: socket_dir.to_path_buf(), window, polls: 0, malformed: 0 })
    }

    /// The directory to give the job as `KINETO_IPC_SOCKET_DIR`.
    pub fn socket_dir(&self) -> &Path {
        &self.socket_dir
    }

    /// Polls received so far.
    pub fn polls(&self) -> u64 {
        self.polls
    }

    /// Datagrams that were not Kineto messages.
    pub fn malformed(&self) -> u64 {
        self.malformed
    }

    /// Waits for the next datagram and answers it. `log_file(pid, round)` names the file
    /// a new trace of that process is written to. Errors only when the socket itself
    /// fails.
    pub async fn serve_one(
        &mut self,
        rounds: &mut Rounds,
        log_file: impl FnOnce(i32, u32) -> PathBuf,
    ) -> io::Result<Received> {
        let (len, from) = self.socket.recv_from(&mut self.buffer).await?;
        let message = match kineto_ipc::decode(&self.buffer[..len]) {
            Ok(message) => message,
            Err(error) => {
                self.malformed += 1;
                return Ok(Received::Malformed(error));
            }
        };
        // A sender without a path (unnamed or abstract) cannot be answered on this path
        // socket; Kineto always binds one beside ours.
        let Some(reply_to) = from.as_pathname().map(Path::to_path_buf) else {
            return Ok(Received::Polled { pid: None });
        };
        let now = Instant::now();
        let (reply, received) = match &message {
            Message::Context(_) => (kineto_ipc::context_reply(), Received::Registered),
            Message::Request(request) => {
                self.polls += 1;
                let pid = request.pid();
                match pid.filter(|_| request.wants_trace()).and_then(|pid| Some((pid, rounds.start(pid, now)?))) {
                    Some((pid, round)) => {
                        let file = log_file(pid, round);
                        let config = kineto_ipc::trace_config(&file.to_string_lossy(), self.window);
                        let started = TraceStarted { pid, round, log_file: file, at: now };
                        (kineto_ipc::encode("req", config.as_bytes()), Received::Started(started))
                    }
                    None => (kineto_ipc::encode("req", &[]), Received::Polled { pid }),
                }
            }
            Message::Other(name) => (kineto_ipc::encode(name, &[]), Received::Polled { pid: None }),
        };
        // Never waits (so this future can be dropped at any await without losing a sent
        // config): a full or vanished peer socket just means the reply is not sent.
        let sent = self.socket.try_send_to(&reply, &reply_to).is_ok();
        if let (false, Received::Started(started)) = (sent, &received) {
            // The config never reached the job (its socket is gone or full): the round
            // stays open for its next poll.
            rounds.cancel(started.pid, started.round);
            return Ok(Received::Polled { pid: Some(started.pid) });
        }
        Ok(received)
    }
}

/// Where Kineto writes the trace of `pid` asked for with `ACTIVITIES_LOG_FILE=log_file`:
/// `_<pid>` inserted before the extension (`/d/t.json` → `/d/t_<pid>.json`).
pub fn kineto_output_path(log_file: &Path, pid: i32) -> PathBuf {
    let stem = log_file.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let name = match log_file.extension() {
        Some(ext) => format!("{stem}_{pid}.{}", ext.to_string_lossy()),
        None => format!("{stem}_{pid}"),
    };
    log_file.with_file_name(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::Schedule;
    use std::time::Duration;

    #[test]
    fn kineto_inserts_the_pid_before_the_extension() {
        assert_eq!(kineto_output_path(Path::new("/d/t.json"), 42), PathBuf::from("/d/t_42.json"));
        assert_eq!(kineto_output_path(Path::new("/d/t"), 42), PathBuf::from("/d/t_42"));
    }

    /// A fake job on the other end of the socket: polls like PyTorch 2.11 does.
    #[tokio::test]
    async fn a_poll_gets_a_config_once_its_round_is_due() {
        let dir = tempfile::tempdir().unwrap();
        let mut daemon = KinetoDaemon::bind(dir.path(), TraceWindow::Duration(Duration::from_millis(500))).unwrap();
        let job = UnixDatagram::bind(dir.path().join("dynoconfigclient-test")).unwrap();
        let mut payload = 3i32.to_le_bytes().to_vec();
        payload.extend_from_slice(&2i32.to_le_bytes());
        payload.extend_from_slice(&0i64.to_le_bytes());
        payload.extend_from_slice(&4242i32.to_le_bytes());
        payload.extend_from_slice(&1i32.to_le_bytes());
        let poll = kineto_ipc::encode("req", &payload);
        let mut rounds = Rounds::new(Schedule { first: Instant::now(), every: None }, Duration::ZERO, 4);
        let mut reply = vec![0u8; 4096];

        job.send_to(&poll, dir.path().join(SOCKET_NAME)).await.unwrap();
        let received =
            daemon.serve_one(&mut rounds, |pid, round| dir.path().join(format!("t{round}_{pid}.json"))).await;
        let Received::Started(started) = received.unwrap() else { panic!("no trace started") };
        assert_eq!((started.pid, started.round), (4242, 0));
        let len = job.recv(&mut reply).await.unwrap();
        let text = String::from_utf8_lossy(&reply[kineto_ipc::HEADER_LEN..len]).into_owned();
        assert!(text.starts_with(&format!("ACTIVITIES_LOG_FILE={}", dir.path().join("t0_4242.json").display())));
        assert!(text.contains("ACTIVITIES_DURATION_MSECS=500\n"));

        job.send_to(&poll, dir.path().join(SOCKET_NAME)).await.unwrap();
        let received = daemon.serve_one(&mut rounds, |_, _| unreachable!()).await.unwrap();
        assert!(matches!(received, Received::Polled { pid: Some(4242) }));
        let len = job.recv(&mut reply).await.unwrap();
        assert_eq!(len, kineto_ipc::HEADER_LEN, "an empty reply while tracing");

        job.send_to(b"garbage", dir.path().join(SOCKET_NAME)).await.unwrap();
        assert!(matches!(daemon.serve_one(&mut rounds, |_, _| unreachable!()).await.unwrap(), Received::Malformed(_)));
        assert_eq!((daemon.polls(), daemon.malformed()), (2, 1));
    }
}
