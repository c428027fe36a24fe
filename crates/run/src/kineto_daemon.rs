//! The daemon side of Kineto's on-demand tracing: a datagram socket at `<dir>/dynolog`
//! (the path Kineto uses when `KINETO_IPC_SOCKET_DIR=<dir>`) or at dynolog's abstract
//! address (Kineto's default), answering each PyTorch process's polls, and handing out a
//! trace config when [`crate::schedule::Rounds`] says a process's round is due.
//!
//! `mlprof run` binds a socket in the run's private directory, so only this run's job
//! (same user) reaches it and several `mlprof run`s on one node never see each other's
//! processes. `mlprof attach` binds wherever the process it attaches to polls — dynolog's
//! node-wide abstract address when nothing else holds it. Every datagram is decoded as hostile input
//! ([`crate::kineto_ipc`]); a bad one is counted, never fatal. A reply that cannot be
//! sent is dropped: the job polls again a few seconds later.

use std::io;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Instant;

use tokio::net::UnixDatagram;

use crate::kineto_ipc::{self, Message, TraceWindow};
use crate::kineto_retry::HandedOut;
use crate::schedule::Rounds;

/// The socket's file name inside the socket directory (Kineto's fixed name).
pub const SOCKET_NAME: &str = "dynolog";
/// dynolog's abstract address: the name and a trailing NUL (dynolog's address length is
/// the name's plus two, counting the leading NUL of every abstract address).
pub const ABSTRACT_NAME: &[u8] = b"dynolog\0";
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
    /// Which config for this trace it was: 1, or more where Kineto dropped the ones
    /// before ([`crate::kineto_retry`]).
    pub attempt: u32,
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

/// Where Kineto's on-demand endpoint is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// `<dir>/dynolog`, a path socket (`KINETO_IPC_SOCKET_DIR=<dir>`).
    Dir(PathBuf),
    /// The abstract address [`ABSTRACT_NAME`] of the machine's network namespace.
    Abstract,
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Endpoint::Dir(dir) => write!(f, "{}", dir.join(SOCKET_NAME).display()),
            Endpoint::Abstract => f.write_str("the abstract socket @dynolog"),
        }
    }
}

/// The socket and the state of every process's traces.
pub struct KinetoDaemon {
    socket: UnixDatagram,
    /// Holds each datagram received, reused.
    buffer: Vec<u8>,
    endpoint: Endpoint,
    window: TraceWindow,
    /// Where set, the one process traces are started for; others get empty replies.
    only: Option<i32>,
    /// Timed traces handed out, to see the ones Kineto drops.
    handed: HandedOut,
    polls: u64,
    malformed: u64,
}

impl KinetoDaemon {
    /// Binds `endpoint` (inside a Tokio runtime); `window` is what each trace records.
    /// Fails with `AddrInUse` where another daemon (dynolog, another mlprof) holds it.
    pub fn bind(endpoint: Endpoint, window: TraceWindow) -> io::Result<KinetoDaemon> {
        let address = match &endpoint {
            Endpoint::Dir(dir) => SocketAddr::from_pathname(dir.join(SOCKET_NAME))?,
            Endpoint::Abstract => SocketAddr::from_abstract_name(ABSTRACT_NAME)?,
        };
        let socket = std::os::unix::net::UnixDatagram::bind_addr(&address)?;
        socket.set_nonblocking(true)?;
        let socket = UnixDatagram::from_std(socket)?;
        let buffer = vec![0u8; MAX_DATAGRAM];
        Ok(KinetoDaemon {
            socket,
            buffer,
            endpoint,
            window,
            only: None,
            handed: HandedOut::default(),
            polls: 0,
            malformed: 0,
        })
    }

    /// Starts traces for `pid` only: other processes polling the endpoint (other jobs,
    /// when it is the node-wide abstract one) get the empty reply.
    pub fn only_for(mut self, pid: i32) -> KinetoDaemon {
        self.only = Some(pid);
        self
    }

    /// Where it listens.
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
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
        // An unnamed sender cannot be answered; Kineto always binds an address beside
        // ours (a path in the same directory, or an abstract name).
        if from.is_unnamed() {
            return Ok(Received::Polled { pid: None });
        }
        let reply_to = SocketAddr::from(from);
        let now = Instant::now();
        let (reply, received) = match &message {
            Message::Context(_) => (kineto_ipc::context_reply(), Received::Registered),
            Message::Request(request) => {
                self.polls += 1;
                let pid = request.pid();
                let wanted = pid.filter(|&pid| request.wants_trace() && self.only.is_none_or(|only| only == pid));
                // A process that polls for a config while its timed trace is due has
                // dropped it: its round goes back to it, now.
                let dropped = wanted.and_then(|pid| self.handed.dropped(pid, rounds.tracing(pid), now));
                if let Some(dropped) = &dropped {
                    rounds.cancel(dropped.pid, dropped.round);
                }
                match wanted.and_then(|pid| Some((pid, rounds.start(pid, now)?))) {
                    Some((pid, round)) => {
                        let file = log_file(pid, round);
                        let window = rounds.kineto_window_of(round).unwrap_or(self.window);
                        let config = kineto_ipc::trace_config(&file.to_string_lossy(), window);
                        let attempt = dropped.filter(|d| d.round == round).map_or(1, |d| d.attempt + 1);
                        let started = TraceStarted { pid, round, log_file: file, at: now, attempt };
                        match window {
                            TraceWindow::Duration(_) => self.handed.sent(&started),
                            TraceWindow::Iterations(_) => self.handed.forget(pid),
                        }
                        (kineto_ipc::encode("req", config.as_bytes()), Received::Started(started))
                    }
                    None => (kineto_ipc::encode("req", &[]), Received::Polled { pid }),
                }
            }
            Message::Other(name) => (kineto_ipc::encode(name, &[]), Received::Polled { pid: None }),
        };
        // Never waits (so this future can be dropped at any await without losing a sent
        // config): a full or vanished peer socket just means the reply is not sent.
        let sent = self.try_reply(&reply, &reply_to);
        if let (false, Received::Started(started)) = (sent, &received) {
            // The config never reached the job (its socket is gone or full): the round
            // stays open for its next poll.
            rounds.cancel(started.pid, started.round);
            return Ok(Received::Polled { pid: Some(started.pid) });
        }
        Ok(received)
    }

    /// Sends `reply` to `to` without waiting; whether it went.
    fn try_reply(&self, reply: &[u8], to: &SocketAddr) -> bool {
        use std::os::fd::AsFd;
        // Tokio sends only to paths; a second handle on the same non-blocking socket
        // also reaches abstract addresses.
        let Ok(fd) = self.socket.as_fd().try_clone_to_owned() else { return false };
        std::os::unix::net::UnixDatagram::from(fd).send_to_addr(reply, to).is_ok()
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

/// How a trace file ends, so a half-written one is not moved.
#[derive(Debug, PartialEq, Eq)]
pub enum TraceEnding {
    /// Not with `}` (or unreadable): still being written.
    Open,
    /// With `}`, which a write could also stop at.
    Closed,
    /// With the `"traceName": "…"` and `}` Kineto writes last.
    Named,
}

/// How the file at `path` ends now ([`TraceEnding::Open`] when it cannot be read).
pub fn trace_ending(path: &Path) -> TraceEnding {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut file) = std::fs::File::open(path) else { return TraceEnding::Open };
    let Ok(len) = file.seek(SeekFrom::End(0)) else { return TraceEnding::Open };
    // Kineto's last line names the trace file: 4 KiB holds any path.
    let from = len.saturating_sub(4096);
    let mut tail = Vec::new();
    if file.seek(SeekFrom::Start(from)).is_err() || file.read_to_end(&mut tail).is_err() {
        return TraceEnding::Open;
    }
    if tail.iter().rev().find(|b| !b.is_ascii_whitespace()) != Some(&b'}') {
        return TraceEnding::Open;
    }
    let last_key = tail.windows(b"\"traceName\"".len()).rposition(|w| w == b"\"traceName\"");
    let after = last_key.map(|at| &tail[at..]);
    // The name is the last value: one string between the key and the closing brace.
    if after.is_some_and(|rest| rest.iter().filter(|&&b| b == b'"').count() == 4) {
        TraceEnding::Named
    } else {
        TraceEnding::Closed
    }
}

/// Whether the Kineto trace at `path` holds an op: one complete event (`"ph": "X"`, as
/// Kineto writes every CPU op, kernel, copy and Python function). A trace without one
/// covered a window in which the process ran no PyTorch op (it waited, or was not
/// scheduled). Read in 64 KiB pieces and stopped at the first such event, which in a
/// trace with ops comes within its first piece; `true` when the file cannot be read, so
/// that nothing is claimed of a trace that was not looked at.
pub fn holds_op(path: &Path) -> bool {
    use std::io::Read;
    const COMPLETE: &[u8] = b"\"ph\": \"X\"";
    let Ok(mut file) = std::fs::File::open(path) else { return true };
    let mut piece = vec![0u8; 64 * 1024];
    // The last bytes of the previous piece, so a key cut in two is still found.
    let mut kept = 0;
    loop {
        let read = match file.read(&mut piece[kept..]) {
            Ok(0) => return false,
            Ok(read) => read,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return true,
        };
        let filled = kept + read;
        if piece[..filled].windows(COMPLETE.len()).any(|w| w == COMPLETE) {
            return true;
        }
        kept = filled.min(COMPLETE.len() - 1);
        piece.copy_within(filled - kept..filled, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::Schedule;
    use std::time::Duration;

    #[test]
    fn a_trace_holds_an_op_when_it_has_a_complete_event_anywhere() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.json");
        let metadata = "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 1},\n".repeat(3000);
        let window_end = "{\"name\": \"Record Window End\", \"ph\": \"i\", \"s\": \"g\"}";
        std::fs::write(&path, format!("{{\"traceEvents\": [\n{metadata}{window_end}]}}")).unwrap();
        assert!(!holds_op(&path));
        // Past the first 64 KiB piece, and cut across two pieces.
        for at in [metadata.len() - 100, 64 * 1024 - 5 - "{\"traceEvents\": [\n".len()] {
            let (before, after) = metadata.split_at(at);
            let op = "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::mm\"},\n";
            std::fs::write(&path, format!("{{\"traceEvents\": [\n{before}{op}{after}{window_end}]}}")).unwrap();
            assert!(holds_op(&path), "an op at byte {at}");
        }
        assert!(holds_op(&dir.path().join("missing.json")));
    }

    #[test]
    fn only_complete_json_counts_as_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.json");
        assert_eq!(trace_ending(&path), TraceEnding::Open);
        std::fs::write(&path, "{\"traceEvents\": [\n  {\"ph\": \"X\"},").unwrap();
        assert_eq!(trace_ending(&path), TraceEnding::Open);
        std::fs::write(&path, "{\"traceEvents\": [\n  {\"args\": {\"x\": 1}").unwrap();
        assert_eq!(trace_ending(&path), TraceEnding::Closed, "a write may stop at any brace");
        // How PyTorch 2.11's Kineto ends a trace.
        std::fs::write(&path, "{\"traceEvents\": [\n  ],\n  \"traceName\": \"/tmp/w/od/t_887.json\"\n}\n").unwrap();
        assert_eq!(trace_ending(&path), TraceEnding::Named);
    }

    #[test]
    fn kineto_inserts_the_pid_before_the_extension() {
        assert_eq!(kineto_output_path(Path::new("/d/t.json"), 42), PathBuf::from("/d/t_42.json"));
        assert_eq!(kineto_output_path(Path::new("/d/t"), 42), PathBuf::from("/d/t_42"));
    }

    /// A `req` poll as PyTorch 2.11 sends it: the config types it asks for (a bit mask),
    /// no job id, and its pids (its own first).
    fn poll_of(config_types: i32, pids: &[i32]) -> Vec<u8> {
        let mut payload = config_types.to_le_bytes().to_vec();
        payload.extend_from_slice(&i32::try_from(pids.len()).unwrap().to_le_bytes());
        payload.extend_from_slice(&0i64.to_le_bytes());
        for pid in pids {
            payload.extend_from_slice(&pid.to_le_bytes());
        }
        kineto_ipc::encode("req", &payload)
    }

    /// A fake job on the other end of the socket: polls like PyTorch 2.11 does.
    #[tokio::test]
    async fn a_poll_gets_a_config_once_its_round_is_due() {
        let dir = tempfile::tempdir().unwrap();
        let mut daemon = KinetoDaemon::bind(
            Endpoint::Dir(dir.path().to_path_buf()),
            TraceWindow::Duration(Duration::from_millis(500)),
        )
        .unwrap();
        let job = UnixDatagram::bind(dir.path().join("dynoconfigclient-test")).unwrap();
        let poll = poll_of(3, &[4242, 1]);
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

    /// PyTorch dropped the trace (its profiler thread took the config up late): it polls
    /// again, and the same round goes back to it; once a trace is being written, a poll
    /// gets the empty reply.
    #[tokio::test]
    async fn a_poll_long_after_a_config_with_nothing_written_asks_again() {
        let dir = tempfile::tempdir().unwrap();
        let window = TraceWindow::Duration(Duration::from_millis(500));
        let mut daemon = KinetoDaemon::bind(Endpoint::Dir(dir.path().to_path_buf()), window).unwrap();
        let job = UnixDatagram::bind(dir.path().join("dynoconfigclient-test")).unwrap();
        let poll = poll_of(3, &[4242]);
        let mut rounds = Rounds::new(Schedule { first: Instant::now(), every: None }, Duration::ZERO, 4);
        let mut reply = vec![0u8; 4096];
        let log_file = |pid: i32, round: u32| dir.path().join(format!("t{round}_{pid}.json"));
        let mut poll_once = async |rounds: &mut Rounds| {
            job.send_to(&poll, dir.path().join(SOCKET_NAME)).await.unwrap();
            let received = daemon.serve_one(rounds, log_file).await.unwrap();
            let len = job.recv(&mut reply).await.unwrap();
            (received, len)
        };

        let (first, _) = poll_once(&mut rounds).await;
        let Received::Started(first) = first else { panic!("no trace started") };
        assert_eq!(first.attempt, 1);
        tokio::time::sleep(crate::kineto_retry::DROPPED_AFTER).await;
        let (again, len) = poll_once(&mut rounds).await;
        let Received::Started(again) = again else { panic!("not asked again: {again:?}") };
        assert_eq!((again.round, again.attempt), (first.round, 2));
        assert!(len > kineto_ipc::HEADER_LEN, "a config");

        std::fs::write(kineto_output_path(&again.log_file, 4242), b"{").unwrap();
        tokio::time::sleep(crate::kineto_retry::DROPPED_AFTER).await;
        let (writing, len) = poll_once(&mut rounds).await;
        assert!(matches!(writing, Received::Polled { pid: Some(4242) }) && len == kineto_ipc::HEADER_LEN);
    }

    /// Kineto's default: dynolog's abstract address, and the job's own abstract name to
    /// reply to. Skipped (visibly) where a dynolog already holds the address.
    #[tokio::test]
    async fn an_abstract_endpoint_answers_an_abstract_client() {
        let mut daemon = match KinetoDaemon::bind(Endpoint::Abstract, TraceWindow::Duration(Duration::from_secs(1))) {
            Ok(daemon) => daemon.only_for(4242),
            Err(error) if error.kind() == io::ErrorKind::AddrInUse => {
                eprintln!("an_abstract_endpoint_answers_an_abstract_client: SKIPPED: @dynolog is held: {error}");
                return;
            }
            Err(error) => panic!("binding @dynolog: {error}"),
        };
        let name = format!("dynoconfigclient-mlprof-test-{}\0", std::process::id());
        let client =
            std::os::unix::net::UnixDatagram::bind_addr(&SocketAddr::from_abstract_name(&name).unwrap()).unwrap();
        let dynolog = SocketAddr::from_abstract_name(ABSTRACT_NAME).unwrap();
        let mut rounds = Rounds::new(Schedule { first: Instant::now(), every: None }, Duration::ZERO, 4);
        let mut reply = vec![0u8; 4096];
        for (pid, wants) in [(77i32, "another job: an empty reply"), (4242, "the one asked for: a config")] {
            client.send_to_addr(&poll_of(2, &[pid]), &dynolog).unwrap();
            let received = daemon.serve_one(&mut rounds, |_, _| PathBuf::from("/tmp/t.json")).await.unwrap();
            let len = client.recv(&mut reply).unwrap();
            match pid {
                77 => assert!(
                    matches!(received, Received::Polled { pid: Some(77) }) && len == kineto_ipc::HEADER_LEN,
                    "{wants}"
                ),
                _ => assert!(matches!(received, Received::Started(_)) && len > kineto_ipc::HEADER_LEN, "{wants}"),
            }
        }
    }
}
