//! When each trace of a run starts: round 0 at `--delay` after launch, round `r` at
//! `delay + r × every` with `--every`, and which processes have had which rounds.
//!
//! Kineto processes poll on their own clock (every few seconds), so a trace starts at
//! the first poll at or after its round is due; a process first seen late joins the
//! round that is due now rather than catching up on missed ones. A process is never
//! traced in its first `settle` seconds: asked at its first poll, while the job is still
//! starting, PyTorch 2.11 on an H200 wrote an empty 500 ms trace and ignored an
//! iteration count (it traced 500 ms instead).
//!
//! Rounds asked for on demand (by the node's agent, [`crate::agent_link`]) are numbered
//! from [`FIRST_ASKED_ROUND`], apart from the schedule: each has its own duration, and a
//! process joins one at its first chance within [`ASKED_JOIN`] of the asking, once it
//! has settled and is not tracing another round; one that was tracing another round
//! then (the agent's probe, a capture asked just before) joins at its first poll after
//! that trace, however long it took to write. Pure bookkeeping over `Instant`s, so the
//! rules are unit-tested without a job.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::kineto_ipc::TraceWindow;

/// When rounds are due.
#[derive(Clone, Copy, Debug)]
pub struct Schedule {
    /// When round 0 is due (launch + delay).
    pub first: Instant,
    /// Time between rounds; `None`: one round only.
    pub every: Option<Duration>,
}

impl Schedule {
    /// The round due at `now` (the last one whose time has come), or `None` before round 0.
    pub fn due_round(&self, now: Instant) -> Option<u32> {
        let since = now.checked_duration_since(self.first)?;
        match self.every {
            None => Some(0),
            Some(every) if every.is_zero() => Some(0),
            Some(every) => Some(u32::try_from(since.as_nanos() / every.as_nanos()).unwrap_or(u32::MAX)),
        }
    }

    /// When round `round` is due.
    pub fn due_at(&self, round: u32) -> Instant {
        match self.every {
            None => self.first,
            Some(every) => self.first + every.saturating_mul(round),
        }
    }
}

/// Asked rounds are numbered from here; scheduled rounds stay below.
pub const FIRST_ASKED_ROUND: u32 = 1 << 30;
/// How long after it was asked a round may still start in a process that was free then
/// (a PyTorch process polls within seconds; one that comes later has missed it).
pub const ASKED_JOIN: Duration = Duration::from_secs(30);

/// How long a process that is free may take to join an asked round: Kineto asks for
/// its on-demand config every 5 s.
pub const POLL_GAP: Duration = Duration::from_secs(6);

/// A round asked for on demand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct AskedRound {
    round: u32,
    at: Instant,
    duration: Duration,
    /// Kineto traces this many whole steps of it instead of `duration`.
    kineto_steps: Option<u32>,
}

impl AskedRound {
    /// Until when process `process` may start this round: [`ASKED_JOIN`] after the
    /// asking, or for one seen before it that has finished a trace since (it was tracing
    /// when asked), [`POLL_GAP`] after that, if later.
    fn open_until(&self, process: &ProcessRounds) -> Instant {
        let until = self.at + ASKED_JOIN;
        let busy_when_asked = process.first_seen <= self.at && process.free_since > self.at;
        if busy_when_asked { until.max(process.free_since + POLL_GAP) } else { until }
    }

    /// Whether `process`, which has not had this round, may still start it after `now`:
    /// it is tracing another round, or its chance is still open.
    fn still_open_to(&self, process: &ProcessRounds, now: Instant) -> bool {
        process.next_asked <= self.round
            && match process.tracing {
                Some(other) => other != self.round,
                None => now < self.open_until(process),
            }
    }
}

/// Whether `round` was asked for on demand rather than scheduled.
pub fn is_asked(round: u32) -> bool {
    round >= FIRST_ASKED_ROUND
}

/// What one process has had.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ProcessRounds {
    /// When the process was first ready for a trace.
    first_seen: Instant,
    /// The round being traced now.
    tracing: Option<u32>,
    /// The first round this process may still get.
    next: u32,
    /// The first asked round this process may still get.
    next_asked: u32,
    /// When it last finished a trace (or was first seen).
    free_since: Instant,
}

impl ProcessRounds {
    /// A process first seen at `now`: free, nothing traced yet.
    fn first_seen_at(now: Instant) -> ProcessRounds {
        ProcessRounds { first_seen: now, tracing: None, next: 0, next_asked: FIRST_ASKED_ROUND, free_since: now }
    }
}

/// Which processes get which round; at most `max_processes` processes are traced, each
/// no sooner than `settle` after it was first ready.
#[derive(Debug)]
pub struct Rounds {
    schedule: Schedule,
    settle: Duration,
    max_processes: usize,
    processes: HashMap<i32, ProcessRounds>,
    refused: usize,
    /// Asked rounds that processes may still join, oldest first.
    asked: Vec<AskedRound>,
    /// The number the next asked round gets.
    next_asked: u32,
}

impl Rounds {
    /// No process seen yet.
    pub fn new(schedule: Schedule, settle: Duration, max_processes: usize) -> Rounds {
        Rounds {
            schedule,
            settle,
            max_processes,
            processes: HashMap::new(),
            refused: 0,
            asked: Vec::new(),
            next_asked: FIRST_ASKED_ROUND,
        }
    }

    /// Asks for a round of `duration` now, outside the schedule: its number.
    pub fn ask(&mut self, now: Instant, duration: Duration) -> u32 {
        self.forget_closed_asks(now);
        let round = self.next_asked;
        self.next_asked = self.next_asked.saturating_add(1);
        self.asked.push(AskedRound { round, at: now, duration, kineto_steps: None });
        round
    }

    /// Asks for `round` (a number [`Rounds::ask`] gave another `Rounds`) of `duration` now.
    pub fn ask_as(&mut self, round: u32, now: Instant, duration: Duration) {
        self.forget_closed_asks(now);
        self.next_asked = self.next_asked.max(round.saturating_add(1));
        self.asked.push(AskedRound { round, at: now, duration, kineto_steps: None });
    }

    /// Drops the asked rounds no process may start any more (nor a new one).
    fn forget_closed_asks(&mut self, now: Instant) {
        let processes = &self.processes;
        self.asked.retain(|asked| {
            now < asked.at + ASKED_JOIN || processes.values().any(|process| asked.still_open_to(process, now))
        });
    }

    /// How long `round` records, where it was asked for with its own duration.
    pub fn duration_of(&self, round: u32) -> Option<Duration> {
        self.asked.iter().find(|asked| asked.round == round).map(|asked| asked.duration)
    }

    /// Asked round `round` is traced by Kineto for `steps` whole steps instead of its
    /// duration (which the other tracers keep).
    pub fn trace_steps_of(&mut self, round: u32, steps: u32) {
        if let Some(asked) = self.asked.iter_mut().find(|asked| asked.round == round) {
            asked.kineto_steps = Some(steps);
        }
    }

    /// What Kineto records of asked round `round`: its steps where it was asked for
    /// steps, else its duration; `None` for a round not asked for.
    pub fn kineto_window_of(&self, round: u32) -> Option<TraceWindow> {
        let asked = self.asked.iter().find(|asked| asked.round == round)?;
        Some(asked.kineto_steps.map_or(TraceWindow::Duration(asked.duration), TraceWindow::Iterations))
    }

    /// The asked round a process not tracing and settled may join at `now`.
    fn joinable(&self, process: &ProcessRounds, now: Instant) -> Option<u32> {
        self.asked
            .iter()
            .find(|asked| asked.round >= process.next_asked && asked.at <= now && now < asked.open_until(process))
            .map(|asked| asked.round)
    }

    /// The schedule.
    pub fn schedule(&self) -> &Schedule {
        &self.schedule
    }

    /// A process is ready for a trace at `now`: the round to trace (an asked one first),
    /// or `None` when it is tracing, still settling, not due, done (one round without
    /// `--every`) or over the process limit.
    pub fn start(&mut self, pid: i32, now: Instant) -> Option<u32> {
        if !self.processes.contains_key(&pid) && self.processes.len() >= self.max_processes {
            self.refused += 1;
            return None;
        }
        let fresh = ProcessRounds::first_seen_at(now);
        let seen = *self.processes.entry(pid).or_insert(fresh);
        if now < seen.first_seen + self.settle || seen.tracing.is_some() {
            return None;
        }
        let asked = self.joinable(&seen, now);
        let process = self.processes.entry(pid).or_insert(fresh);
        if let Some(round) = asked {
            process.tracing = Some(round);
            process.next_asked = round.saturating_add(1);
            return Some(round);
        }
        let due = self.schedule.due_round(now)?;
        if due < process.next || (self.schedule.every.is_none() && process.next > 0) {
            return None;
        }
        process.tracing = Some(due);
        process.next = due.saturating_add(1);
        Some(due)
    }

    /// An asked round process `pid` (not tracing) may join at `now`, taken; the caller
    /// has let it settle. For a tracer that follows the schedule by itself (a profiler
    /// server) and takes only asked rounds from here.
    pub fn join_asked(&mut self, pid: i32, now: Instant) -> Option<u32> {
        let fresh = ProcessRounds::first_seen_at(now);
        let seen = *self.processes.get(&pid).unwrap_or(&fresh);
        if seen.tracing.is_some() {
            return None;
        }
        let round = self.joinable(&seen, now)?;
        let process = self.processes.entry(pid).or_insert(fresh);
        process.tracing = Some(round);
        process.next_asked = round.saturating_add(1);
        Some(round)
    }

    /// Whether a process may still join asked round `round`, so what it records of the
    /// round is still to come: one busy with another round (it joins after), or one whose
    /// chance is open and that has been free for less than [`POLL_GAP`] since the asking
    /// or its last trace.
    pub fn may_still_join(&self, round: u32, now: Instant) -> bool {
        let Some(asked) = self.asked.iter().find(|asked| asked.round == round) else { return false };
        self.processes.values().any(|p| {
            asked.still_open_to(p, now) && (p.tracing.is_some() || now < p.free_since.max(asked.at) + POLL_GAP)
        })
    }

    /// The round process `pid` is tracing, where it is tracing one.
    pub fn tracing(&self, pid: i32) -> Option<u32> {
        self.processes.get(&pid).and_then(|process| process.tracing)
    }

    /// The trace of `pid` is over (written, or given up on).
    pub fn finished(&mut self, pid: i32) {
        if let Some(process) = self.processes.get_mut(&pid) {
            process.tracing = None;
            process.free_since = Instant::now();
        }
    }

    /// The trace of `round` never started (its config could not be sent): the process may
    /// get that round again.
    pub fn cancel(&mut self, pid: i32, round: u32) {
        if let Some(process) = self.processes.get_mut(&pid) {
            process.tracing = None;
            process.free_since = Instant::now();
            if is_asked(round) {
                process.next_asked = process.next_asked.min(round);
            } else {
                process.next = process.next.min(round);
            }
        }
    }

    /// A process is gone: its slot among `max_processes` is free again.
    pub fn forget(&mut self, pid: i32) {
        self.processes.remove(&pid);
    }

    /// Polls refused because `max_processes` were already traced.
    pub fn refused(&self) -> usize {
        self.refused
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(base: Instant, ms: u64) -> Instant {
        base + Duration::from_millis(ms)
    }

    #[test]
    fn one_round_starts_at_the_first_poll_after_the_delay() {
        let t0 = Instant::now();
        let mut rounds = Rounds::new(Schedule { first: at(t0, 1000), every: None }, Duration::ZERO, 8);
        assert_eq!(rounds.start(10, at(t0, 500)), None);
        assert_eq!(rounds.start(10, at(t0, 1200)), Some(0));
        assert_eq!(rounds.start(10, at(t0, 1300)), None, "tracing");
        rounds.finished(10);
        assert_eq!(rounds.start(10, at(t0, 9000)), None, "one round only");
        assert_eq!(rounds.start(11, at(t0, 9000)), Some(0), "another process gets its own");
    }

    #[test]
    fn with_every_a_late_process_joins_the_current_round() {
        let t0 = Instant::now();
        let schedule = Schedule { first: t0, every: Some(Duration::from_secs(10)) };
        assert_eq!(schedule.due_at(3), at(t0, 30_000));
        let mut rounds = Rounds::new(schedule, Duration::ZERO, 8);
        assert_eq!(rounds.start(1, at(t0, 100)), Some(0));
        rounds.finished(1);
        assert_eq!(rounds.start(1, at(t0, 5000)), None, "round 1 not due");
        assert_eq!(rounds.start(1, at(t0, 10_100)), Some(1));
        assert_eq!(rounds.start(2, at(t0, 35_000)), Some(3));
        assert_eq!(rounds.start(1, at(t0, 35_000)), None, "still tracing round 1");
        rounds.finished(1);
        assert_eq!(rounds.start(1, at(t0, 35_000)), Some(3), "skips the missed round 2");
    }

    #[test]
    fn a_process_settles_before_its_first_trace() {
        let t0 = Instant::now();
        let mut rounds = Rounds::new(Schedule { first: t0, every: None }, Duration::from_secs(5), 8);
        assert_eq!(rounds.start(1, at(t0, 100)), None, "first poll: just started");
        assert_eq!(rounds.start(1, at(t0, 3000)), None);
        assert_eq!(rounds.start(1, at(t0, 5100)), Some(0));
    }

    #[test]
    fn a_cancelled_round_is_offered_again() {
        let t0 = Instant::now();
        let mut rounds = Rounds::new(Schedule { first: t0, every: None }, Duration::ZERO, 2);
        assert_eq!(rounds.start(1, t0), Some(0));
        rounds.cancel(1, 0);
        assert_eq!(rounds.start(1, t0), Some(0));
    }

    #[test]
    fn a_forgotten_process_frees_its_slot() {
        let t0 = Instant::now();
        let mut rounds = Rounds::new(Schedule { first: t0, every: None }, Duration::ZERO, 1);
        assert_eq!(rounds.start(1, t0), Some(0));
        assert_eq!(rounds.start(2, t0), None, "over the limit");
        rounds.forget(1);
        assert_eq!(rounds.start(2, t0), Some(0));
    }

    #[test]
    fn an_asked_round_comes_first_with_its_own_duration() {
        let t0 = Instant::now();
        let mut rounds = Rounds::new(Schedule { first: t0, every: None }, Duration::from_secs(5), 4);
        assert_eq!(rounds.start(1, t0), None, "settling");
        let asked = rounds.ask(at(t0, 1000), Duration::from_secs(2));
        assert!(is_asked(asked) && !is_asked(0));
        assert_eq!(rounds.duration_of(asked), Some(Duration::from_secs(2)));
        assert_eq!(rounds.duration_of(0), None);
        assert_eq!(rounds.kineto_window_of(asked), Some(TraceWindow::Duration(Duration::from_secs(2))));
        rounds.trace_steps_of(asked, 5);
        assert_eq!(rounds.kineto_window_of(asked), Some(TraceWindow::Iterations(5)), "Kineto traces steps");
        assert_eq!(rounds.duration_of(asked), Some(Duration::from_secs(2)), "the other tracers, its duration");
        assert_eq!(rounds.kineto_window_of(0), None);
        assert_eq!(rounds.start(1, at(t0, 2000)), None, "still settling");
        assert_eq!(rounds.start(1, at(t0, 6000)), Some(asked), "asked first");
        assert_eq!(rounds.start(1, at(t0, 6100)), None, "tracing it");
        rounds.finished(1);
        assert_eq!(rounds.start(1, at(t0, 6200)), Some(0), "then the schedule");
        rounds.finished(1);
        assert_eq!(rounds.start(1, at(t0, 6300)), None, "each round once");
        assert_eq!(rounds.start(2, at(t0, 45_000)), None, "joined too late: settling");
        assert_eq!(rounds.start(2, at(t0, 50_000)), Some(0), "the asked round is over; the schedule's is not");
    }

    #[test]
    fn a_server_joins_asked_rounds_only() {
        let t0 = Instant::now();
        let mut rounds = Rounds::new(Schedule { first: t0, every: None }, Duration::from_secs(5), 4);
        assert_eq!(rounds.join_asked(3, t0), None, "round 0 is the server's own to follow");
        let asked = rounds.ask(at(t0, 100), Duration::from_secs(1));
        assert_eq!(rounds.join_asked(3, at(t0, 200)), Some(asked), "no settling here");
        assert_eq!(rounds.join_asked(3, at(t0, 300)), None, "tracing it");
        rounds.finished(3);
        assert_eq!(rounds.join_asked(3, at(t0, 400)), None, "once");
    }

    #[test]
    fn a_process_tracing_another_round_may_still_join_an_asked_one() {
        let t0 = Instant::now();
        let mut rounds = Rounds::new(Schedule { first: t0, every: None }, Duration::ZERO, 4);
        assert_eq!(rounds.start(1, t0), Some(0));
        let asked = rounds.ask(at(t0, 100), Duration::from_secs(1));
        assert!(rounds.may_still_join(asked, at(t0, 200)), "process 1 is busy with round 0");
        assert!(rounds.may_still_join(asked, at(t0, 40_000)), "busy: it joins once done");
        rounds.finished(1);
        assert!(rounds.may_still_join(asked, at(t0, 300)), "just free: its next poll is due");
        assert!(!rounds.may_still_join(asked, at(t0, 200) + POLL_GAP), "it did not poll in time");
        assert_eq!(rounds.start(1, at(t0, 300)), Some(asked));
        assert!(!rounds.may_still_join(asked, at(t0, 400)), "it has joined");
        let later = rounds.ask(at(t0, 500), Duration::from_secs(1));
        rounds.finished(1);
        assert_eq!(rounds.start(2, at(t0, 600)), Some(asked), "a new process joins the oldest it still may");
        rounds.finished(2);
        assert_eq!(rounds.start(2, at(t0, 700)), Some(later));
        rounds.finished(2);
        assert!(rounds.may_still_join(later, at(t0, 800)), "process 1 may poll yet");
    }

    #[test]
    fn a_process_busy_when_asked_joins_after_its_trace_however_long_it_took() {
        // `finished` stamps the real now: the asking is put 100 s before it.
        let t0 = Instant::now() - Duration::from_secs(100);
        let mut rounds = Rounds::new(Schedule { first: at(t0, 3_600_000), every: None }, Duration::ZERO, 4);
        let probe = rounds.ask(t0, Duration::from_secs(1));
        assert_eq!(rounds.start(1, t0), Some(probe));
        let capture = rounds.ask(at(t0, 500), Duration::from_secs(2));
        assert!(rounds.may_still_join(capture, at(t0, 60_000)), "process 1 still writes the probe's trace");
        assert_eq!(rounds.start(2, at(t0, 60_000)), None, "a process first seen this late has missed it");
        let _ = rounds.ask(at(t0, 70_000), Duration::from_secs(1));
        assert_eq!(rounds.duration_of(capture), Some(Duration::from_secs(2)), "kept while process 1 may join");
        rounds.finished(1);
        let now = Instant::now();
        assert!(rounds.may_still_join(capture, now + Duration::from_secs(1)), "its next poll is due");
        assert!(!rounds.may_still_join(capture, now + POLL_GAP), "it did not poll in time");
        assert_eq!(rounds.start(1, now + Duration::from_secs(1)), Some(capture), "it joins, 100 s after the asking");
        assert!(!rounds.may_still_join(capture, now + Duration::from_secs(2)), "it has joined");
    }

    #[test]
    fn a_cancelled_asked_round_is_offered_again_and_numbers_are_shared() {
        let t0 = Instant::now();
        let mut framework = Rounds::new(Schedule { first: at(t0, 60_000), every: None }, Duration::ZERO, 4);
        let mut gpu = Rounds::new(Schedule { first: at(t0, 60_000), every: None }, Duration::ZERO, 4);
        let asked = framework.ask(t0, Duration::from_secs(1));
        gpu.ask_as(asked, t0, Duration::from_secs(1));
        assert_eq!(gpu.start(7, t0), Some(asked));
        assert_eq!(framework.start(7, t0), Some(asked));
        framework.cancel(7, asked);
        assert_eq!(framework.start(7, at(t0, 10)), Some(asked));
        let second = framework.ask(at(t0, 20), Duration::from_secs(1));
        gpu.ask_as(second, at(t0, 20), Duration::from_secs(1));
        assert_eq!(second, asked + 1);
        assert_eq!(gpu.ask(at(t0, 30), Duration::from_secs(1)), second + 1, "numbering goes on past the shared one");
    }

    #[test]
    fn processes_beyond_the_limit_are_refused_and_counted() {
        let t0 = Instant::now();
        let mut rounds = Rounds::new(Schedule { first: t0, every: None }, Duration::ZERO, 2);
        assert_eq!(rounds.start(1, t0), Some(0));
        assert_eq!(rounds.start(2, t0), Some(0));
        assert_eq!(rounds.start(3, t0), None);
        assert_eq!(rounds.refused(), 1);
    }
}
