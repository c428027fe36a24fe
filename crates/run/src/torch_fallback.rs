//! Which PyTorch processes are traced through the start-up hook's `torch.profiler`
//! instead of Kineto's on-demand mode: those the hook announced (`torch-PID.ready`) that
//! have not polled mlprof's Kineto socket within [`WAIT`] of the announcement and run
//! without the daemon mode (a launcher that dropped `KINETO_USE_DAEMON`), or all of them
//! when `MLPROF_PYTORCH_TRACER=hook`. A process that has the daemon mode on but never
//! polls (a PyTorch build without it) cannot be traced by the hook, which runs no thread
//! beside Kineto's on-demand mode: it is named once, with the variable that would trace
//! it. Pure bookkeeping over `Instant`s.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use crate::python_hook::TorchProcess;

/// How long an announced PyTorch process is given to poll: Kineto polls every few
/// seconds once PyTorch is imported.
pub const WAIT: Duration = Duration::from_secs(15);
/// The environment variable that sends every PyTorch process to the hook.
pub const FORCE_VARIABLE: &str = "MLPROF_PYTORCH_TRACER";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Seen {
    Waiting {
        since: Instant,
    },
    Kineto,
    Hook,
    /// Daemon mode on, no poll: said so.
    Silent,
}

/// What changed for the announced processes.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Changes {
    /// Processes the hook traces from now on.
    pub to_hook: Vec<i32>,
    /// Processes with the daemon mode on that never polled.
    pub silent: Vec<i32>,
}

/// Who traces each PyTorch process.
#[derive(Debug, Default)]
pub struct TorchFallback {
    forced: bool,
    processes: HashMap<i32, Seen>,
    polled: HashSet<i32>,
}

impl TorchFallback {
    /// `forced`: every announced process goes to the hook at once (mlprof then runs no
    /// Kineto socket).
    pub fn new(forced: bool) -> TorchFallback {
        TorchFallback { forced, ..TorchFallback::default() }
    }

    /// Whether the environment asks for the hook (`MLPROF_PYTORCH_TRACER=hook`).
    pub fn forced_by_environment() -> bool {
        std::env::var(FORCE_VARIABLE).is_ok_and(|v| v == "hook")
    }

    /// Process `pid` polled the Kineto socket: Kineto traces it.
    pub fn polled(&mut self, pid: i32) {
        self.polled.insert(pid);
        if let Some(seen @ Seen::Waiting { .. }) = self.processes.get_mut(&pid) {
            *seen = Seen::Kineto;
        }
    }

    /// Takes the hook's announcements at `now`; returns what changed.
    pub fn announced(&mut self, processes: &[TorchProcess], now: Instant) -> Changes {
        let mut changes = Changes::default();
        for process in processes {
            let kineto = self.polled.contains(&process.pid) && !self.forced;
            let seen = self.processes.entry(process.pid).or_insert(if kineto {
                Seen::Kineto
            } else {
                Seen::Waiting { since: now }
            });
            let Seen::Waiting { since } = *seen else { continue };
            if process.kineto_daemon && now.duration_since(since) >= WAIT {
                *seen = Seen::Silent;
                changes.silent.push(process.pid);
            } else if !process.kineto_daemon && (self.forced || now.duration_since(since) >= WAIT) {
                *seen = Seen::Hook;
                changes.to_hook.push(process.pid);
            }
        }
        changes
    }

    /// The processes the hook traces.
    pub fn hook_pids(&self) -> Vec<i32> {
        let mut pids: Vec<i32> = self.processes.iter().filter(|(_, s)| **s == Seen::Hook).map(|(p, _)| *p).collect();
        pids.sort_unstable();
        pids
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn process(pid: i32) -> TorchProcess {
        TorchProcess { pid, version: "2.11.0".into(), kineto_daemon: false, cupti_stays: None }
    }

    #[test]
    fn a_process_that_never_polls_goes_to_the_hook() {
        let start = Instant::now();
        let mut fallback = TorchFallback::new(false);
        fallback.polled(2);
        let none = Changes::default();
        assert_eq!(fallback.announced(&[process(1), process(2)], start), none);
        fallback.polled(1);
        let daemon = TorchProcess { kineto_daemon: true, ..process(4) };
        fallback.announced(&[process(1), process(2), process(3), daemon.clone()], start + Duration::from_secs(1));
        assert_eq!(fallback.announced(&[process(3)], start + Duration::from_secs(10)), none);
        let later = start + WAIT + Duration::from_secs(1);
        let changes = fallback.announced(&[process(1), process(2), process(3), daemon.clone()], later);
        assert_eq!(changes, Changes { to_hook: vec![3], silent: vec![4] });
        assert_eq!(fallback.hook_pids(), [3]);
        assert_eq!(fallback.announced(&[process(3), daemon], start + WAIT * 2), none, "once each");
    }

    #[test]
    fn forced_sends_every_process_to_the_hook_at_once() {
        let mut fallback = TorchFallback::new(true);
        assert_eq!(fallback.announced(&[process(5)], Instant::now()).to_hook, [5]);
        assert_eq!(fallback.hook_pids(), [5]);
    }
}
