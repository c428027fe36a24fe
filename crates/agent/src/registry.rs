//! Jobs started by `mlprof run --agent`: each run's [`Registration`] (renewed every
//! heartbeat, forgotten after [`EXPIRES`] of silence or at once when the run says its
//! job ended), the captures asked of it and not yet handed out, and the requests
//! waiting for the run's answer. A registration is taken only for a process that is
//! the registering run's child and belongs to a user the agent watches, or, once that
//! process has exited, from the run already registered for it while the run finishes.
//!
//! The run records what is asked with everything it drives (Kineto on its private
//! socket, the profiler server its hook started, CUPTI, samples): the agent could reach
//! none of the first three itself.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use mlprof_run::agent_link::{Ask, AskOutcome, EXPIRES, Registration, RegistrationReply};
use mlprof_run::sampling::procfs;
use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;

/// How many levels above a job's first process its run's child may be (`mlprof run --
/// bash -c "python train.py"`: one).
const MAX_WRAPPERS: usize = 4;

/// What a job shows of the run that started it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunView {
    /// The `mlprof run` process.
    pub run_pid: u32,
    /// The run's own TensorBoard log directory.
    pub logdir: PathBuf,
    /// What the run drives: `kineto`, `hook`, `cupti`, `samples`.
    pub tracers: Vec<String>,
    /// Why Kineto keeps CUPTI attached after traces in one of the job's PyTorch
    /// processes, as the run reported it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cupti_stays: Option<String>,
}

/// A registered run.
struct Run {
    registration: Registration,
    heard: Instant,
    /// Asks for the next heartbeat.
    queued: Vec<Ask>,
    /// Requests waiting for an ask's outcome, by its id.
    waiting: HashMap<u64, oneshot::Sender<AskOutcome>>,
}

/// Every registered run, by its job's pid.
#[derive(Default)]
pub struct Registry {
    runs: HashMap<u32, Run>,
    next_id: u64,
}

impl Registry {
    /// Whether `registration` may be taken from what `/proc` says now: its pid is a child
    /// of its run and runs as `only_uid` (where set). A run already registered whose job
    /// has exited keeps its place while it finishes (collects the last traces, reports
    /// the asks it recorded), as long as the run's own process lives and runs as
    /// `only_uid`. The reason where not.
    pub fn check(&self, registration: &Registration, only_uid: Option<u32>) -> Result<(), String> {
        let pid = registration.pid;
        let Some(stat) = procfs::process_stat(pid) else {
            let run_pid = registration.run_pid;
            let known = self.runs.get(&pid).is_some_and(|run| run.registration.run_pid == run_pid);
            return if known { owned_by(run_pid, only_uid) } else { Err(format!("no process {pid}")) };
        };
        if stat.ppid != registration.run_pid {
            return Err(format!("process {pid} is not a child of process {}", registration.run_pid));
        }
        owned_by(pid, only_uid)
    }

    /// Takes a heartbeat at `now`: passes on the outcomes it carries and answers with the
    /// asks queued for it.
    pub fn register(&mut self, mut registration: Registration, now: Instant) -> RegistrationReply {
        let done = std::mem::take(&mut registration.done);
        let pid = registration.pid;
        let ended = registration.ended;
        if ended && !self.runs.contains_key(&pid) {
            return RegistrationReply::default();
        }
        let run = self.runs.entry(pid).or_insert_with(|| Run {
            registration: registration.clone(),
            heard: now,
            queued: Vec::new(),
            waiting: HashMap::new(),
        });
        for outcome in done {
            if let Some(waiting) = run.waiting.remove(&outcome.id) {
                let _ = waiting.send(outcome);
            }
        }
        // An ask nobody waits for any more (a probe that gave way to a capture) is not
        // handed out: the run would record it for nothing, ahead of the capture.
        run.waiting.retain(|_, waiting| !waiting.is_closed());
        let waiting = &run.waiting;
        let asks = std::mem::take(&mut run.queued).into_iter().filter(|ask| waiting.contains_key(&ask.id)).collect();
        run.registration = registration;
        run.heard = now;
        if ended {
            // Requests still waiting learn that the run has gone.
            self.runs.remove(&pid);
        }
        RegistrationReply { asks }
    }

    /// Forgets the runs not heard from in [`EXPIRES`].
    pub fn expire(&mut self, now: Instant) {
        self.runs.retain(|_, run| now.duration_since(run.heard) < EXPIRES);
    }

    /// Asks the run of the job whose registration is `pid` for `duration` (Kineto:
    /// `kineto_steps` whole steps, where given) into `logdir`: the ask's id and the
    /// outcome to await, or `None` where no run is registered under `pid`.
    pub fn ask(
        &mut self,
        pid: u32,
        duration: Duration,
        kineto_steps: Option<u32>,
        logdir: PathBuf,
    ) -> Option<(u64, oneshot::Receiver<AskOutcome>)> {
        let run = self.runs.get_mut(&pid)?;
        self.next_id += 1;
        let id = self.next_id;
        let duration_ms = u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
        run.queued.push(Ask { id, duration_ms, kineto_steps, logdir });
        let (answer, outcome) = oneshot::channel();
        run.waiting.insert(id, answer);
        Some((id, outcome))
    }

    /// Takes back ask `id` of the run registered under `pid` if it has not been handed
    /// out yet: whether it was (once handed out, the run records it whatever follows).
    pub fn withdraw(&mut self, pid: u32, id: u64) -> bool {
        let Some(run) = self.runs.get_mut(&pid) else { return false };
        let queued = run.queued.len();
        run.queued.retain(|ask| ask.id != id);
        let withdrawn = run.queued.len() < queued;
        if withdrawn {
            run.waiting.remove(&id);
        }
        withdrawn
    }

    /// The registration pid the job whose first process is `job_pid` is known under: its
    /// own, or that of a wrapper up to [`MAX_WRAPPERS`] levels above it.
    pub fn registered_as(&self, job_pid: u32) -> Option<u32> {
        if self.runs.is_empty() {
            return None;
        }
        let mut pid = job_pid;
        for _ in 0..=MAX_WRAPPERS {
            if self.runs.contains_key(&pid) {
                return Some(pid);
            }
            pid = procfs::process_stat(pid)?.ppid;
        }
        None
    }

    /// What the job registered under `pid` shows of its run.
    pub fn view(&self, pid: u32) -> Option<RunView> {
        let registration = &self.runs.get(&pid)?.registration;
        Some(RunView {
            run_pid: registration.run_pid,
            logdir: registration.logdir.clone(),
            tracers: registration.tracers.clone(),
            cupti_stays: registration.cupti_stays.clone(),
        })
    }
}

/// Whether process `pid` exists and runs as `only_uid` (where set); the reason where not.
fn owned_by(pid: u32, only_uid: Option<u32>) -> Result<(), String> {
    let uid = std::fs::metadata(format!("/proc/{pid}")).map_err(|e| format!("process {pid}: {e}"))?.uid();
    match only_uid {
        Some(only) if only != uid => Err(format!("process {pid} belongs to another user")),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registration(pid: u32) -> Registration {
        Registration { run_pid: 1, pid, tracers: vec!["kineto".into()], ..Default::default() }
    }

    #[test]
    fn an_ask_goes_out_once_and_its_outcome_comes_back() {
        let mut registry = Registry::default();
        let t0 = Instant::now();
        assert!(registry.ask(50, Duration::from_secs(1), None, "/d".into()).is_none(), "not registered");
        assert_eq!(registry.register(registration(50), t0).asks, []);
        let (_, mut waiting) = registry.ask(50, Duration::from_millis(1500), None, "/d".into()).unwrap();
        let asks = registry.register(registration(50), t0).asks;
        assert_eq!(asks.len(), 1);
        assert_eq!((asks[0].duration_ms, asks[0].logdir.clone()), (1500, PathBuf::from("/d")));
        assert_eq!(registry.register(registration(50), t0).asks, [], "handed out once");
        assert!(waiting.try_recv().is_err(), "no outcome yet");
        let outcome = AskOutcome { id: asks[0].id, session: Some("/d/s".into()), lines: vec![] };
        registry.register(Registration { done: vec![outcome.clone()], ..registration(50) }, t0);
        assert_eq!(waiting.try_recv().unwrap(), outcome);
        assert_eq!(registry.view(50).unwrap().tracers, ["kineto"]);
    }

    #[test]
    fn an_ask_nobody_waits_for_is_not_handed_out() {
        let mut registry = Registry::default();
        let t0 = Instant::now();
        registry.register(registration(50), t0);
        let (_, given_up) = registry.ask(50, Duration::from_secs(1), None, "/probe".into()).unwrap();
        let (withdrawn, _) = registry.ask(50, Duration::from_secs(1), None, "/probe".into()).unwrap();
        let (handed, _waiting) = registry.ask(50, Duration::from_secs(2), None, "/capture".into()).unwrap();
        drop(given_up);
        assert!(registry.withdraw(50, withdrawn), "still queued");
        let asks = registry.register(registration(50), t0).asks;
        assert_eq!(asks.iter().map(|a| a.logdir.clone()).collect::<Vec<_>>(), [PathBuf::from("/capture")]);
        assert!(!registry.withdraw(50, handed), "handed out: the run records it");
        assert!(!registry.withdraw(51, handed), "no such run");
    }

    #[test]
    fn a_silent_or_ended_run_is_forgotten_and_its_waiters_told() {
        let mut registry = Registry::default();
        let t0 = Instant::now();
        registry.register(registration(50), t0);
        registry.register(registration(51), t0);
        let (_, mut waiting) = registry.ask(51, Duration::from_secs(1), None, "/d".into()).unwrap();
        registry.register(registration(50), t0 + EXPIRES);
        registry.expire(t0 + EXPIRES);
        assert!(registry.view(51).is_none(), "silent for EXPIRES");
        assert!(matches!(waiting.try_recv(), Err(oneshot::error::TryRecvError::Closed)));
        registry.register(Registration { ended: true, ..registration(50) }, t0 + EXPIRES);
        assert!(registry.view(50).is_none(), "its job ended");
    }

    #[test]
    fn only_a_child_of_its_run_is_taken() {
        let registry = Registry::default();
        let me = std::process::id();
        let parent = procfs::process_stat(me).unwrap().ppid;
        assert_eq!(registry.check(&Registration { run_pid: parent, pid: me, ..Default::default() }, None), Ok(()));
        let wrong_parent = Registration { run_pid: me, pid: me, ..Default::default() };
        assert!(registry.check(&wrong_parent, None).unwrap_err().contains("not a child"));
        let other_user = Registration { run_pid: parent, pid: me, ..Default::default() };
        let someone_else = nix_uid().wrapping_add(1);
        assert!(registry.check(&other_user, Some(someone_else)).unwrap_err().contains("another user"));
        assert!(registry.check(&Registration { pid: u32::MAX, ..Default::default() }, None).is_err());
    }

    #[test]
    fn a_run_whose_job_exited_keeps_its_place_while_it_lives() {
        let mut registry = Registry::default();
        let me = std::process::id();
        let mut job = std::process::Command::new("true").spawn().unwrap();
        let gone = job.id();
        job.wait().unwrap();
        let finishing = Registration { run_pid: me, pid: gone, ..Default::default() };
        assert!(registry.check(&finishing, None).unwrap_err().contains("no process"), "never registered");
        registry.register(finishing.clone(), Instant::now());
        assert_eq!(registry.check(&finishing, None), Ok(()));
        let someone_else = nix_uid().wrapping_add(1);
        assert!(registry.check(&finishing, Some(someone_else)).unwrap_err().contains("another user"));
        let other_run = Registration { run_pid: u32::MAX, ..finishing.clone() };
        assert!(registry.check(&other_run, None).unwrap_err().contains("no process"), "not the run registered");
    }

    #[test]
    fn a_job_under_a_wrapper_is_found_through_its_parents() {
        let mut registry = Registry::default();
        let me = std::process::id();
        let parent = procfs::process_stat(me).unwrap().ppid;
        assert_eq!(registry.registered_as(me), None);
        registry.register(registration(parent), Instant::now());
        assert_eq!(registry.registered_as(me), Some(parent));
        assert_eq!(registry.registered_as(parent), Some(parent));
    }

    fn nix_uid() -> u32 {
        std::fs::metadata("/proc/self").unwrap().uid()
    }
}
