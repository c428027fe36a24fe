//! `mlprof run --agent[=ADDR]`: the run tells the node's agent (`mlprof agent`) about its
//! job, and the agent asks it for captures. Every [`HEARTBEAT`] the run posts a
//! [`Registration`] to `ADDR` + [`REGISTER_PATH`] — the job's pid, the run's, the
//! command, the log directory, the tracers the run drives, and the outcomes of the asks
//! it finished — and the answer ([`RegistrationReply`]) carries new [`Ask`]s: a capture
//! of a given duration into a given log directory, which the run records as one more
//! round ([`crate::schedule`]) with everything it records in its own rounds (Kineto, the
//! profiler server, CUPTI, samples). The agent forgets a run it has not heard from in
//! [`EXPIRES`]; one that restarts hears from every run again within a heartbeat.
//!
//! Fail-safe: the heartbeat has a thread of its own and short timeouts, so an agent that
//! is missing, slow or hostile costs the job nothing; its answers are bounded and read
//! as data, asks out of range are dropped. The run says once that the agent cannot be
//! reached and once that it can again.
//!
//! Trust: asks name directories the run writes into, so on loopback (no token) the run
//! talks only to a listener owned by its own user or root, as `/proc/net/tcp` says
//! ([`listener_uid`]): another user who took the agent's port while no agent ran gets
//! nothing. An agent on another address is trusted through its token.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::http1;

/// Where a run registers on the agent.
pub const REGISTER_PATH: &str = "/api/register";
/// How often a run registers again (and so how soon an ask reaches it).
pub const HEARTBEAT: Duration = Duration::from_secs(1);
/// How long an agent keeps a run it has not heard from.
pub const EXPIRES: Duration = Duration::from_secs(5);
/// The agent's default address: loopback, a port of its own.
pub const DEFAULT_AGENT: &str = "127.0.0.1:7766";
/// The environment variable holding the token of an agent on a non-loopback address.
pub const TOKEN_VARIABLE: &str = "MLPROF_AGENT_TOKEN";
/// The longest capture an agent may ask for.
pub const MAX_ASK: Duration = Duration::from_secs(600);
/// The most Kineto steps an ask records.
pub const MAX_ASK_STEPS: u32 = 100;
/// How long one heartbeat's answer may take.
const ANSWER_WAIT: Duration = Duration::from_secs(2);
/// Outcomes kept for an agent that cannot be reached, at most.
const MAX_UNSENT: usize = 64;

/// What a run tells the agent, every [`HEARTBEAT`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Registration {
    /// The `mlprof run` process.
    pub run_pid: u32,
    /// The job's first process (the run's child).
    pub pid: u32,
    /// The job's command line, arguments joined by spaces.
    pub command: String,
    /// The run's own TensorBoard log directory.
    pub logdir: PathBuf,
    /// What the run drives: `kineto`, `hook` (JAX/TensorFlow profiler server, PyTorch
    /// fallback), `cupti`, `samples`.
    pub tracers: Vec<String>,
    /// Asks finished since the last heartbeat the agent answered.
    #[serde(default)]
    pub done: Vec<AskOutcome>,
    /// The job has ended: this is the run's last word.
    #[serde(default)]
    pub ended: bool,
    /// Why Kineto keeps CUPTI attached after traces in one of the job's PyTorch
    /// processes (the start-up hook could not detach it): each trace there leaves the
    /// job slower on a GPU, so the agent does not probe it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cupti_stays: Option<String>,
}

/// What the agent answers a registration.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RegistrationReply {
    /// Captures to start now.
    #[serde(default)]
    pub asks: Vec<Ask>,
}

/// A capture the agent asks a run for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Ask {
    /// The agent's number for it, echoed in its [`AskOutcome`].
    pub id: u64,
    /// How long to record, ms (1 to [`MAX_ASK`]).
    pub duration_ms: u64,
    /// Kineto records this many whole steps instead (1 to [`MAX_ASK_STEPS`]): it then
    /// starts at the job's next step, where a timed trace first warms up for 5 s with
    /// CUPTI on. The other tracers keep `duration_ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kineto_steps: Option<u32>,
    /// The TensorBoard log directory its session goes to (the run's own where this one
    /// cannot be made).
    pub logdir: PathBuf,
}

impl Ask {
    /// Its duration, where it is in range.
    pub fn duration(&self) -> Option<Duration> {
        let duration = Duration::from_millis(self.duration_ms);
        (!duration.is_zero() && duration <= MAX_ASK).then_some(duration)
    }

    /// Its Kineto steps, where asked for and in range.
    pub fn kineto_steps(&self) -> Option<u32> {
        self.kineto_steps.filter(|steps| (1..=MAX_ASK_STEPS).contains(steps))
    }
}

/// What an ask recorded.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AskOutcome {
    /// The ask's id.
    pub id: u64,
    /// The session directory, when anything was recorded.
    pub session: Option<PathBuf>,
    /// What was written or why nothing was, a line each.
    pub lines: Vec<String>,
}

/// The run's side of the link: asks arrive, outcomes leave, notes for the run's output.
pub struct AgentLink {
    asks: tokio::sync::mpsc::Receiver<Ask>,
    outcomes: std::sync::mpsc::Sender<AskOutcome>,
    notes: std::sync::mpsc::Receiver<String>,
    cupti_stays: std::sync::mpsc::Sender<String>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl AgentLink {
    /// Starts registering `registration` with the agent at `address` every
    /// [`HEARTBEAT`]; fails only when its thread cannot start.
    pub fn start(address: SocketAddr, token: Option<String>, registration: Registration) -> std::io::Result<AgentLink> {
        let (ask_sender, asks) = tokio::sync::mpsc::channel(16);
        let (outcomes, outcome_receiver) = std::sync::mpsc::channel();
        let (note_sender, notes) = std::sync::mpsc::channel();
        let (cupti_stays, cupti_receiver) = std::sync::mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let heartbeat = Heartbeat {
            address,
            token,
            registration,
            asks: ask_sender,
            outcomes: outcome_receiver,
            notes: note_sender,
            cupti_stays: cupti_receiver,
            stop: stop.clone(),
            reached: None,
        };
        let thread = std::thread::Builder::new().name("mlprof-agent-link".into()).spawn(move || heartbeat.run())?;
        Ok(AgentLink { asks, outcomes, notes, cupti_stays, stop, thread: Some(thread) })
    }

    /// Tells the agent, from the next heartbeat on, why Kineto keeps CUPTI attached in
    /// one of the job's processes ([`Registration::cupti_stays`]).
    pub fn cupti_stays(&self, why: String) {
        let _ = self.cupti_stays.send(why);
    }

    /// The next ask; pending forever once the link has stopped.
    pub async fn next_ask(&mut self) -> Ask {
        match self.asks.recv().await {
            Some(ask) => ask,
            None => std::future::pending().await,
        }
    }

    /// An ask is finished: its outcome goes with the next heartbeat.
    pub fn finished(&self, outcome: AskOutcome) {
        let _ = self.outcomes.send(outcome);
    }

    /// What the link has to say (the agent lost or found again).
    pub fn take_notes(&self) -> Vec<String> {
        self.notes.try_iter().collect()
    }

    /// The job has ended: one last registration (with the outcomes not yet sent) tells
    /// the agent, then the thread ends. Blocks for at most one answer's wait.
    pub fn close(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for AgentLink {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The link's thread.
struct Heartbeat {
    address: SocketAddr,
    token: Option<String>,
    registration: Registration,
    asks: tokio::sync::mpsc::Sender<Ask>,
    outcomes: std::sync::mpsc::Receiver<AskOutcome>,
    notes: std::sync::mpsc::Sender<String>,
    cupti_stays: std::sync::mpsc::Receiver<String>,
    stop: Arc<AtomicBool>,
    /// Whether the last heartbeat reached the agent (`None`: none sent yet).
    reached: Option<bool>,
}

impl Heartbeat {
    fn run(mut self) {
        loop {
            let ending = self.stop.load(Ordering::Relaxed);
            self.registration.done.extend(self.outcomes.try_iter());
            if let Some(why) = self.cupti_stays.try_iter().last() {
                self.registration.cupti_stays = Some(why);
            }
            let excess = self.registration.done.len().saturating_sub(MAX_UNSENT);
            self.registration.done.drain(..excess);
            self.registration.ended = ending;
            match self.beat() {
                Ok(reply) => {
                    self.registration.done.clear();
                    if self.reached != Some(true) {
                        self.note(format!("registered with the agent at {}", self.address));
                    }
                    self.reached = Some(true);
                    for ask in reply.asks {
                        if ask.duration().is_some() {
                            let _ = self.asks.try_send(ask);
                        }
                    }
                }
                Err(why) => {
                    if self.reached != Some(false) {
                        self.note(format!(
                            "the agent at {} cannot be reached ({why}); the job runs on and mlprof keeps trying",
                            self.address
                        ));
                    }
                    self.reached = Some(false);
                }
            }
            if ending {
                return;
            }
            let beat_at = std::time::Instant::now() + HEARTBEAT;
            while std::time::Instant::now() < beat_at && !self.stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }

    /// One registration and its answer.
    fn beat(&self) -> Result<RegistrationReply, String> {
        if self.token.is_none() && self.address.ip().is_loopback() {
            // SAFETY: geteuid has no arguments and cannot fail.
            let me = unsafe { libc::geteuid() };
            match listener_uid(self.address) {
                Some(owner) if owner == me || owner == 0 => {}
                Some(owner) => return Err(format!("it runs as uid {owner}, neither this user nor root")),
                None => return Err("nothing listens there".to_string()),
            }
        }
        let body = serde_json::to_vec(&self.registration).map_err(|e| e.to_string())?;
        let (status, answer) =
            http1::request("POST", self.address, REGISTER_PATH, self.token.as_deref(), Some(&body), ANSWER_WAIT)
                .map_err(|e| e.to_string())?;
        if status != 200 {
            let text = String::from_utf8_lossy(&answer);
            return Err(format!("HTTP {status}: {}", text.trim().chars().take(200).collect::<String>()));
        }
        serde_json::from_slice(&answer).map_err(|e| format!("an answer mlprof cannot read: {e}"))
    }

    fn note(&self, line: String) {
        let _ = self.notes.send(line);
    }
}

/// The user owning the TCP socket that listens on `address` (or on every address at its
/// port) in this process's network namespace: the socket bound to that very address
/// where there is one, as the kernel picks it, else a wildcard's.
pub fn listener_uid(address: SocketAddr) -> Option<u32> {
    let serving: Vec<_> =
        crate::listening::listeners_of(std::process::id()).into_iter().filter(|l| l.serves(address)).collect();
    serving.iter().find(|l| !l.address.is_unspecified()).or(serving.first()).map(|l| l.uid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    /// An agent that answers each registration with `reply` and hands back what it got.
    fn fake_agent(reply: &'static str, answers: usize) -> (SocketAddr, std::thread::JoinHandle<Vec<Registration>>) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let thread = std::thread::spawn(move || {
            let mut got = Vec::new();
            for _ in 0..answers {
                let (mut stream, _) = listener.accept().unwrap();
                let mut seen = Vec::new();
                let mut buffer = [0u8; 4096];
                let body = loop {
                    let n = stream.read(&mut buffer).unwrap();
                    seen.extend_from_slice(&buffer[..n]);
                    let text = String::from_utf8_lossy(&seen).into_owned();
                    if let Some((head, body)) = text.split_once("\r\n\r\n") {
                        let length: usize = head
                            .lines()
                            .find_map(|l| l.strip_prefix("Content-Length: "))
                            .and_then(|v| v.parse().ok())
                            .unwrap();
                        if body.len() >= length {
                            break body.to_string();
                        }
                    }
                };
                got.push(serde_json::from_str::<Registration>(&body).unwrap());
                let answer = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{reply}", reply.len());
                stream.write_all(answer.as_bytes()).unwrap();
            }
            got
        });
        (address, thread)
    }

    #[test]
    fn an_ask_for_kineto_steps_is_taken_in_range_only() {
        let ask = |text: &str| serde_json::from_str::<Ask>(text).unwrap().kineto_steps();
        assert_eq!(ask(r#"{"id":1,"duration_ms":1000,"kineto_steps":5,"logdir":"/x"}"#), Some(5));
        assert_eq!(ask(r#"{"id":1,"duration_ms":1000,"kineto_steps":0,"logdir":"/x"}"#), None);
        assert_eq!(ask(r#"{"id":1,"duration_ms":1000,"kineto_steps":101,"logdir":"/x"}"#), None);
        assert_eq!(ask(r#"{"id":1,"duration_ms":1000,"logdir":"/x"}"#), None, "an agent of before");
    }

    #[tokio::test]
    async fn asks_arrive_and_outcomes_go_back() {
        let reply =
            r#"{"asks":[{"id":7,"duration_ms":1500,"logdir":"/tmp/x"},{"id":8,"duration_ms":0,"logdir":"/tmp/x"}]}"#;
        let (address, agent) = fake_agent(reply, 3);
        let registration = Registration { run_pid: 1, pid: 2, command: "python t.py".into(), ..Default::default() };
        let mut link = AgentLink::start(address, None, registration).unwrap();
        let ask = tokio::time::timeout(Duration::from_secs(10), link.next_ask()).await.unwrap();
        assert_eq!((ask.id, ask.duration(), ask.kineto_steps()), (7, Some(Duration::from_millis(1500)), None));
        link.finished(AskOutcome { id: 7, session: Some("/tmp/x/s".into()), lines: vec!["wrote".into()] });
        let got = agent.join().unwrap();
        assert_eq!(got[0].pid, 2);
        assert!(got.iter().any(|r| r.done.iter().any(|d| d.id == 7)), "{got:?}");
        assert!(link.take_notes().iter().any(|n| n.contains("registered")));
        while let Ok(ask) = link.asks.try_recv() {
            assert_eq!(ask.id, 7, "the ask of 0 ms is dropped");
        }
        link.close();
    }

    #[test]
    fn the_owner_of_a_listening_socket_is_found() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        // SAFETY: geteuid has no arguments and cannot fail.
        let me = unsafe { libc::geteuid() };
        assert_eq!(listener_uid(address), Some(me));
        drop(listener);
        assert_eq!(listener_uid(address), None, "nothing listens there any more");
    }

    #[test]
    fn a_missing_agent_is_said_once_and_costs_nothing() {
        let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let link = AgentLink::start(free, None, Registration::default()).unwrap();
        std::thread::sleep(HEARTBEAT * 3);
        let notes = link.take_notes();
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].contains("cannot be reached") && notes[0].contains("the job runs on"), "{notes:?}");
        assert!(notes[0].contains("nothing listens there"), "{notes:?}");
        let started = std::time::Instant::now();
        link.close();
        assert!(started.elapsed() < Duration::from_secs(5));
    }
}
