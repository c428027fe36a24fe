//! The parent's side of `mlprof-inject`: a unix stream socket in the run's private
//! directory that every CUDA process of the job connects to when CUDA starts in it,
//! and the trace windows of each process: start recording when [`crate::schedule`]
//! says its round is due, stop after `--duration`, wait for the flush, and write the
//! window as `<session>/<host>_<pid>.xplane.pb` ([`crate::cupti_profile`]).
//!
//! One reader task per connection decodes frames ([`mlprof_cupti::wire`], hostile
//! input: a bad frame ends that connection, never the run) and hands them over a
//! bounded channel, so a job that records faster than mlprof decodes is slowed only in
//! the injection's sender thread, where CUPTI then drops records and counts them.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use mlprof_cupti::wire::{self, FromInjection, ToInjection};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixListener;
use tokio::net::unix::OwnedWriteHalf;
use tokio::sync::mpsc;

use crate::cupti_profile::{Counts, CuptiProfile};

/// The socket's file name in the run directory.
pub const SOCKET_NAME: &str = "cupti";
/// Frames in flight from all connections to the run loop (each up to a 4 MiB buffer).
const CHANNEL_FRAMES: usize = 16;
/// The most GPUs one process may describe (a hostile injection could send any number).
const MAX_DEVICES: usize = 64;
/// How long a process may take to flush after it was asked to stop.
const FLUSH_DEADLINE: Duration = Duration::from_secs(10);

/// What a connection delivered.
#[derive(Debug)]
pub enum Delivery {
    /// A process connected; its write half, for start/stop requests.
    Connected(u64, OwnedWriteHalf),
    /// A message.
    Message(u64, FromInjection),
    /// The connection ended (`None`) or sent bytes that are not the protocol.
    Closed(u64, Option<String>),
}

/// Accepts the job's CUDA processes on `<dir>/cupti`.
pub struct CuptiListener {
    path: PathBuf,
    deliveries: mpsc::Receiver<Delivery>,
}

impl CuptiListener {
    /// Binds the socket and starts accepting.
    pub fn bind(dir: &Path) -> io::Result<CuptiListener> {
        let path = dir.join(SOCKET_NAME);
        let listener = UnixListener::bind(&path)?;
        let (sender, deliveries) = mpsc::channel(CHANNEL_FRAMES);
        tokio::spawn(accept_loop(listener, sender));
        Ok(CuptiListener { path, deliveries })
    }

    /// The path to give the job as `MLPROF_INJECT_SOCKET`.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The next delivery (pending forever once every sender is gone).
    pub async fn next(&mut self) -> Delivery {
        match self.deliveries.recv().await {
            Some(delivery) => delivery,
            None => std::future::pending().await,
        }
    }

    /// A delivery that is already waiting, without waiting.
    pub fn try_next(&mut self) -> Option<Delivery> {
        self.deliveries.try_recv().ok()
    }
}

/// The most CUDA processes connected at once; later ones are closed at once (their
/// injection reads the end of the stream and stays passive).
const MAX_CONNECTIONS: usize = 256;

async fn accept_loop(listener: UnixListener, sender: mpsc::Sender<Delivery>) {
    let mut next_id = 0u64;
    let live = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    while let Ok((stream, _)) = listener.accept().await {
        if live.load(std::sync::atomic::Ordering::SeqCst) >= MAX_CONNECTIONS {
            drop(stream);
            continue;
        }
        next_id += 1;
        let id = next_id;
        let (read, write) = stream.into_split();
        if sender.send(Delivery::Connected(id, write)).await.is_err() {
            return;
        }
        live.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let live = live.clone();
        let sender = sender.clone();
        tokio::spawn(async move {
            read_loop(id, read, sender).await;
            live.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        });
    }
}

async fn read_loop(id: u64, mut read: tokio::net::unix::OwnedReadHalf, sender: mpsc::Sender<Delivery>) {
    let mut pending: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; 256 << 10];
    let end = loop {
        // Every whole frame already read first.
        match wire::frame_len(&pending) {
            Ok(Some(len)) if pending.len() >= len => {
                let message = wire::decode_from_injection(&pending[..len]);
                pending.drain(..len);
                match message {
                    Ok(message) => {
                        if sender.send(Delivery::Message(id, message)).await.is_err() {
                            return;
                        }
                        continue;
                    }
                    Err(error) => break Some(error.to_string()),
                }
            }
            Ok(_) => {}
            Err(error) => break Some(error.to_string()),
        }
        match read.read(&mut chunk).await {
            Ok(0) => {
                break (!pending.is_empty())
                    .then(|| format!("the connection ended inside a frame ({} bytes)", pending.len()));
            }
            Ok(n) => pending.extend_from_slice(&chunk[..n]),
            Err(error) => break Some(error.to_string()),
        }
    };
    let _ = sender.send(Delivery::Closed(id, end)).await;
}

/// Where one process's recording is.
enum Phase {
    /// Connected, not recording.
    Idle,
    /// Recording round `round` since `since_ns` (wall clock), until `until`.
    Recording { round: u32, since_ns: i64, until: Instant, profile: CuptiProfile },
    /// Asked to stop with `token`; waiting for its flush until `deadline`.
    Stopping { round: u32, since_ns: i64, token: u32, deadline: Instant, profile: CuptiProfile },
}

/// One connected CUDA process.
struct Process {
    pid: u32,
    writer: OwnedWriteHalf,
    hello: Option<wire::Hello>,
    passive: bool,
    phase: Phase,
    /// Its GPUs, as its driver describes them.
    devices: Vec<wire::DeviceInfo>,
    /// It had at least one window.
    traced: bool,
    /// It said goodbye (its exit flush is in): a connection error afterwards is the
    /// process ending, not a failure.
    said_bye: bool,
    /// The token of the flush asked for before a signal, until it is answered.
    signal_flush: Option<u32>,
}

impl Process {
    /// A process that has just connected and said nothing yet.
    fn connected(writer: OwnedWriteHalf) -> Process {
        Process {
            pid: 0,
            writer,
            hello: None,
            passive: false,
            phase: Phase::Idle,
            devices: Vec::new(),
            traced: false,
            said_bye: false,
            signal_flush: None,
        }
    }

    /// Takes the process's hello, turning it passive (and saying so) when it speaks
    /// another protocol; returns whether it records already.
    fn greeted(&mut self, hello: wire::Hello, say: &mut Vec<String>) -> bool {
        self.pid = hello.pid;
        if hello.protocol != wire::PROTOCOL_VERSION {
            say.push(format!(
                "CUDA process {}: mlprof-inject speaks protocol {}, this mlprof {}: GPU activity off",
                hello.pid,
                hello.protocol,
                wire::PROTOCOL_VERSION
            ));
            self.passive = true;
        }
        let recording = hello.recording && !self.passive;
        self.hello = Some(hello);
        recording
    }
}

/// A finished window, to be filed by the run.
#[derive(Debug)]
pub struct Window {
    /// The process.
    pub pid: u32,
    /// Its round.
    pub round: u32,
    /// What was recorded.
    pub profile: CuptiProfile,
    /// The process's GPUs.
    pub devices: Vec<wire::DeviceInfo>,
    /// The window's start and end, wall clock (Unix epoch nanoseconds).
    pub span_ns: (i64, i64),
    /// What it holds.
    pub counts: Counts,
    /// Whether it ended because the process exited or stopped answering.
    pub cut_short: bool,
}

impl Window {
    /// The window as one XSpace host named `hostname` (the slow part: run it off the
    /// run loop).
    pub fn to_host(&self, hostname: &str) -> mlprof_model::Host {
        self.profile.to_host(hostname, self.span_ns.0, self.span_ns.1, &self.devices)
    }
}

/// Every connected process and its windows.
#[derive(Default)]
pub struct CuptiProcesses {
    processes: HashMap<u64, Process>,
    next_token: u32,
    /// Processes that connected at all.
    pub seen: usize,
}

impl CuptiProcesses {
    /// Takes one delivery; returns lines to print and a finished window, if any. A
    /// process that started recording at `cuInit` claims its round of `rounds` here.
    pub async fn deliver(
        &mut self,
        delivery: Delivery,
        rounds: &mut crate::schedule::Rounds,
        duration: Duration,
    ) -> (Vec<String>, Option<Window>) {
        let mut say = Vec::new();
        let done = match delivery {
            Delivery::Connected(id, writer) => {
                self.seen += 1;
                self.processes.insert(id, Process::connected(writer));
                None
            }
            Delivery::Message(id, message) => self.message(id, message, rounds, duration, &mut say).await,
            Delivery::Closed(id, error) => self.closed(id, error, rounds, &mut say),
        };
        (say, done)
    }

    /// One message of connection `id`; returns the window it completes, if any.
    async fn message(
        &mut self,
        id: u64,
        message: FromInjection,
        rounds: &mut crate::schedule::Rounds,
        duration: Duration,
        say: &mut Vec<String>,
    ) -> Option<Window> {
        let process = self.processes.get_mut(&id)?;
        match message {
            FromInjection::Hello(hello) => {
                let recording = process.greeted(hello.clone(), say);
                if recording {
                    self.next_token = self.next_token.wrapping_add(1);
                    say.extend(claim_started_window(process, hello, rounds, duration, self.next_token).await);
                }
            }
            FromInjection::Passive(reason) => {
                process.passive = true;
                say.push(format!("CUDA process {}: mlprof-inject stays out of CUPTI: {reason}", process.pid));
                // It may have been recording (a framework appeared later): keep what it had.
                // A window started between its hello and this, with nothing in it, is no
                // window: nothing is filed.
                let window = finish(process, true)?;
                if window.profile.is_empty() {
                    rounds.finished(window.pid as i32);
                    return None;
                }
                return Some(window);
            }
            FromInjection::Device(device) => {
                process.devices.retain(|d| d.ordinal != device.ordinal);
                if process.devices.len() < MAX_DEVICES {
                    process.devices.push(device);
                }
            }
            FromInjection::Note(note) => say.push(format!("CUDA process {}: {note}", process.pid)),
            FromInjection::Buffer(buffer) => match &mut process.phase {
                Phase::Recording { profile, .. } | Phase::Stopping { profile, .. } => profile.add_buffer(&buffer),
                Phase::Idle => {}
            },
            FromInjection::Dropped(n) => match &mut process.phase {
                Phase::Recording { profile, .. } | Phase::Stopping { profile, .. } => profile.add_dropped(n),
                Phase::Idle => {}
            },
            FromInjection::Flushed(token) => {
                if process.signal_flush == Some(token) {
                    process.signal_flush = None;
                }
                if matches!(process.phase, Phase::Stopping { token: t, .. } if t == token) {
                    return finish(process, false);
                }
            }
            FromInjection::Bye => {
                process.said_bye = true;
                let done = finish(process, true);
                say.extend(never_traced(process));
                return done;
            }
        }
        None
    }

    /// Connection `id` closed (`error`: how it failed); returns the window it ends, if
    /// any.
    fn closed(
        &mut self,
        id: u64,
        error: Option<String>,
        rounds: &mut crate::schedule::Rounds,
        say: &mut Vec<String>,
    ) -> Option<Window> {
        let mut process = self.processes.remove(&id)?;
        // A short-lived CUDA process must not keep one of the traced slots.
        rounds.forget(process.pid as i32);
        if let Some(error) = error.filter(|_| !process.said_bye) {
            say.push(format!("CUDA process {}: its mlprof-inject connection failed: {error}", process.pid));
        }
        let done = finish(&mut process, true);
        if !process.said_bye {
            say.extend(never_traced(&process));
        }
        done
    }

    /// Starts the windows that are due and stops the ones whose time is up; returns
    /// `(pid, round)` of the windows started, and windows given up on.
    pub async fn tick(
        &mut self,
        rounds: &mut crate::schedule::Rounds,
        duration: Duration,
    ) -> (Vec<(u32, u32)>, Vec<Window>) {
        let now = Instant::now();
        let mut started = Vec::new();
        let mut abandoned = Vec::new();
        for process in self.processes.values_mut() {
            let Some(hello) = process.hello.clone() else { continue };
            if process.passive {
                continue;
            }
            match &process.phase {
                Phase::Idle => {
                    if let Some(round) = rounds.start(process.pid as i32, now) {
                        if send(&mut process.writer, ToInjection::Start).await {
                            let since_ns = wire::realtime_ns();
                            process.phase = Phase::Recording {
                                round,
                                since_ns,
                                until: now + rounds.duration_of(round).unwrap_or(duration),
                                profile: CuptiProfile::new(hello),
                            };
                            process.traced = true;
                            started.push((process.pid, round));
                        } else {
                            rounds.cancel(process.pid as i32, round);
                        }
                    }
                }
                Phase::Recording { until, .. } if now >= *until => {
                    self.next_token = self.next_token.wrapping_add(1);
                    let token = self.next_token;
                    let Phase::Recording { round, since_ns, profile, .. } =
                        std::mem::replace(&mut process.phase, Phase::Idle)
                    else {
                        continue;
                    };
                    process.phase = Phase::Stopping { round, since_ns, token, deadline: now + FLUSH_DEADLINE, profile };
                    if !send(&mut process.writer, ToInjection::Stop(token)).await
                        && let Some(window) = finish(process, true)
                    {
                        abandoned.push(window);
                    }
                }
                Phase::Stopping { deadline, .. } if now >= *deadline => {
                    if let Some(window) = finish(process, true) {
                        abandoned.push(window);
                    }
                }
                _ => {}
            }
        }
        (started, abandoned)
    }

    /// Windows still open (the job exited): each is finished with what it holds.
    pub fn finish_all(&mut self) -> Vec<Window> {
        self.processes.values_mut().filter_map(|p| finish(p, true)).collect()
    }

    /// Processes still connected.
    pub fn connected(&self) -> usize {
        self.processes.len()
    }

    /// Whether some process is recording a window.
    pub fn recording(&self) -> bool {
        self.processes.values().any(|p| matches!(p.phase, Phase::Recording { .. }))
    }

    /// Whether a process records round `round`, or is flushing it.
    pub fn busy_with(&self, round: u32) -> bool {
        self.processes.values().any(|p| match p.phase {
            Phase::Recording { round: r, .. } | Phase::Stopping { round: r, .. } => r == round,
            Phase::Idle => false,
        })
    }

    /// Asks every recording process to flush what CUPTI holds (a signal is about to be
    /// passed on to the job); false when none was asked.
    pub async fn flush_recording(&mut self) -> bool {
        for process in self.processes.values_mut() {
            if matches!(process.phase, Phase::Recording { .. }) {
                self.next_token = self.next_token.wrapping_add(1);
                let token = self.next_token;
                if send(&mut process.writer, ToInjection::Flush(token)).await {
                    process.signal_flush = Some(token);
                }
            }
        }
        !self.flushed()
    }

    /// Whether every flush asked for by [`CuptiProcesses::flush_recording`] is in (or its
    /// process gone).
    pub fn flushed(&self) -> bool {
        self.processes.values().all(|p| p.signal_flush.is_none())
    }
}

/// A process that started recording at `cuInit`: its window is round 0 (or the round
/// due now), begun when the process said hello; one that may not be traced (more
/// processes than allowed) is told to stop. Returns the line to print.
async fn claim_started_window(
    process: &mut Process,
    hello: wire::Hello,
    rounds: &mut crate::schedule::Rounds,
    duration: Duration,
    token: u32,
) -> Option<String> {
    let now = Instant::now();
    match rounds.start(process.pid as i32, now) {
        Some(round) => {
            let since_ns = hello.realtime_ns;
            let duration = rounds.duration_of(round).unwrap_or(duration);
            process.phase =
                Phase::Recording { round, since_ns, until: now + duration, profile: CuptiProfile::new(hello) };
            process.traced = true;
            Some(format!(
                "CUDA process {}: recording GPU activity for {} from cuInit (CUPTI)",
                process.pid,
                crate::kineto_ipc::TraceWindow::Duration(duration)
            ))
        }
        None => {
            send(&mut process.writer, ToInjection::Stop(token)).await;
            None
        }
    }
}

/// The line for a process that ended before any window of it was due.
fn never_traced(process: &Process) -> Option<String> {
    (!process.traced && !process.passive && process.hello.is_some())
        .then(|| format!("CUDA process {}: ended before its trace was due (--delay)", process.pid))
}

fn finish(process: &mut Process, cut_short: bool) -> Option<Window> {
    let (round, since_ns, profile) = match std::mem::replace(&mut process.phase, Phase::Idle) {
        Phase::Idle => return None,
        Phase::Recording { round, since_ns, profile, .. } | Phase::Stopping { round, since_ns, profile, .. } => {
            (round, since_ns, profile)
        }
    };
    Some(Window {
        pid: process.pid,
        round,
        counts: profile.counts(),
        span_ns: (since_ns, wire::realtime_ns().max(since_ns)),
        devices: process.devices.clone(),
        profile,
        cut_short,
    })
}

/// Sends one request; false when it could not be sent within 1 s. Then the connection
/// is shut down for writing: the injection reads the end of the stream, counts mlprof as
/// gone and stops recording (a stop it never heard must not leave it recording, nor a
/// half-written frame confuse it).
async fn send(writer: &mut OwnedWriteHalf, message: ToInjection) -> bool {
    let mut frame = Vec::new();
    wire::encode_to_injection(message, &mut frame);
    let sent = matches!(tokio::time::timeout(Duration::from_secs(1), writer.write_all(&frame)).await, Ok(Ok(())));
    if !sent {
        let _ = tokio::time::timeout(Duration::from_secs(1), writer.shutdown()).await;
    }
    sent
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hello(pid: u32) -> wire::Hello {
        wire::Hello {
            protocol: wire::PROTOCOL_VERSION,
            pid,
            cupti_api_version: 0,
            cupti_timestamp_ns: 0,
            realtime_ns: wire::realtime_ns(),
            recording: false,
        }
    }

    /// A process that stays out sends its hello and then why; a window started between
    /// the two holds nothing and is not filed (it once was, as an empty profile).
    #[tokio::test]
    async fn a_window_started_before_a_process_said_it_stays_out_is_dropped() {
        let (ours, _theirs) = tokio::net::UnixStream::pair().unwrap();
        let (_, writer) = ours.into_split();
        let mut rounds = crate::schedule::Rounds::new(
            crate::schedule::Schedule { first: Instant::now(), every: None },
            Duration::ZERO,
            1,
        );
        let mut processes = CuptiProcesses::default();
        let second = Duration::from_secs(1);
        processes.deliver(Delivery::Connected(1, writer), &mut rounds, second).await;
        processes.deliver(Delivery::Message(1, FromInjection::Hello(hello(42))), &mut rounds, second).await;
        let (started, _) = processes.tick(&mut rounds, second).await;
        assert_eq!(started.len(), 1, "the tick came between the two messages");
        let passive = FromInjection::Passive("another tool holds CUPTI".to_string());
        let (said, window) = processes.deliver(Delivery::Message(1, passive), &mut rounds, second).await;
        assert!(window.is_none(), "an empty window is not filed");
        assert_eq!(said, ["CUDA process 42: mlprof-inject stays out of CUPTI: another tool holds CUPTI"]);
    }
}
