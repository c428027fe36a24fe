//! Recording one job for the agent, a capture or a probe: through the run that started
//! it where one registered it, else as `mlprof attach` would, once it is the job's turn
//! ([`super::turns`]). Each recording, its wait for the turn included, is over by one
//! deadline (its duration and [`CAPTURE_GRACE`], or a probe's [`PROBE_GRACE`], after it
//! was asked), so that whoever asked always hears what was recorded or why nothing was.

use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use mlprof_run::attach::AttachOptions;
use tokio::time::Instant;

use super::turns::{NoTurn, Purpose, Turn};
use super::{CAPTURE_GRACE, CAPTURE_HZ, CaptureOutcome, PROBE_GRACE, Shared};
use crate::jobs::JobView;
use crate::probe::{self, ProbeView};

/// One recording to make.
pub struct Recording<'a> {
    /// The job.
    pub pid: u32,
    /// The TensorBoard log directory the session goes into.
    pub logdir: &'a Path,
    /// The job has a Kineto endpoint (bound by one recording at a time on the node).
    pub kineto: bool,
    /// How long to record.
    pub duration: Duration,
    /// Where Kineto records it through the job's run: this many whole steps instead.
    pub kineto_steps: Option<u32>,
    /// A capture, or a probe (which waits for captures and gives way to them).
    pub purpose: Purpose,
}

/// How long a whole recording of `duration` for `purpose` may take, its wait for the
/// job's turn included.
fn budget(duration: Duration, purpose: Purpose) -> Duration {
    duration
        + match purpose {
            Purpose::Capture => CAPTURE_GRACE,
            Purpose::Probe => PROBE_GRACE,
        }
}

impl Recording<'_> {
    /// How long the whole recording may take, its wait for the turn included.
    fn budget(&self) -> Duration {
        budget(self.duration, self.purpose)
    }

    /// What is said of a recording that failed with `line`.
    fn failed(&self, line: String) -> CaptureOutcome {
        CaptureOutcome { pid: self.pid, session: None, lines: vec![line], tools_link: None }
    }

    /// What is said of a recording that got no turn.
    fn no_turn(&self, why: NoTurn) -> CaptureOutcome {
        self.failed(no_turn_line(why, self.budget()))
    }
}

/// What is said of a recording with `budget` that got no turn.
fn no_turn_line(why: NoTurn, budget: Duration) -> String {
    match why {
        NoTurn::Deadline => {
            format!("not recorded: another recording of it was still running {} s later", budget.as_secs())
        }
        NoTurn::CaptureFirst => "not probed: a capture of it came first".to_string(),
    }
}

/// Records `recording`: what was recorded, or what was said when nothing could be.
pub async fn record_job(shared: &Shared, recording: Recording<'_>) -> Result<CaptureOutcome, CaptureOutcome> {
    let deadline = Instant::now() + recording.budget();
    let turn = shared.turns.take(recording.pid, recording.purpose, deadline).await;
    let turn = turn.map_err(|why| recording.no_turn(why))?;
    record_in_turn(shared, &recording, &turn, deadline).await
}

/// Records `recording` in the job's `turn`, by `deadline`.
async fn record_in_turn(
    shared: &Shared,
    recording: &Recording<'_>,
    turn: &Turn,
    deadline: Instant,
) -> Result<CaptureOutcome, CaptureOutcome> {
    let registered =
        shared.registry.lock().unwrap_or_else(std::sync::PoisonError::into_inner).registered_as(recording.pid);
    if let Some(registered) = registered {
        return record_through_run(shared, recording, registered, turn, deadline).await;
    }
    let _bound = bind_kineto(shared, recording, deadline).await?;
    let options = AttachOptions {
        pid: recording.pid,
        duration: recording.duration,
        logdir: recording.logdir.to_path_buf(),
        host: shared.host.to_string(),
        sample_hz: CAPTURE_HZ,
        native_stacks: true,
    };
    let lines = Mutex::new(Vec::new());
    let say = |line: String| lines.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(line);
    let recorded =
        tokio::time::timeout_at(deadline, mlprof_run::attach::attach(&options, std::future::pending(), &say)).await;
    let mut lines = lines.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
    let pid = recording.pid;
    match recorded {
        Ok(Ok(outcome)) => Ok(CaptureOutcome { pid, session: outcome.session, lines, tools_link: None }),
        Ok(Err(error)) => {
            lines.push(error.to_string());
            Err(CaptureOutcome { pid, session: None, lines, tools_link: None })
        }
        Err(_) => {
            lines.push(format!("not recorded within {} s", recording.budget().as_secs()));
            Err(CaptureOutcome { pid, session: None, lines, tools_link: None })
        }
    }
}

/// Asks the run the job is registered with (as `registered`) to record, and waits for
/// its answer until `deadline`; a probe whose ask the run has not been handed yet takes
/// it back and gives way when a capture of the job asks for its turn.
async fn record_through_run(
    shared: &Shared,
    recording: &Recording<'_>,
    registered: u32,
    turn: &Turn,
    deadline: Instant,
) -> Result<CaptureOutcome, CaptureOutcome> {
    let asked = shared.registry.lock().unwrap_or_else(std::sync::PoisonError::into_inner).ask(
        registered,
        recording.duration,
        recording.kineto_steps,
        recording.logdir.to_path_buf(),
    );
    let Some((id, mut answer)) = asked else {
        return Err(recording.failed("the mlprof run that started it is gone".to_string()));
    };
    let capture_asked = async {
        match recording.purpose {
            Purpose::Probe => turn.capture_asked().await,
            Purpose::Capture => std::future::pending().await,
        }
    };
    let answered = tokio::select! {
        answered = tokio::time::timeout_at(deadline, &mut answer) => answered,
        () = capture_asked => {
            let withdrawn =
                shared.registry.lock().unwrap_or_else(std::sync::PoisonError::into_inner).withdraw(registered, id);
            if withdrawn {
                return Err(recording.failed("the probe gave way to a capture of it".to_string()));
            }
            // The run records it already: the capture waits for its answer.
            tokio::time::timeout_at(deadline, answer).await
        }
    };
    match answered {
        Ok(Ok(outcome)) => {
            let mut lines = vec![format!("recorded by the mlprof run that started it (pid {registered})")];
            lines.extend(outcome.lines);
            let recorded = CaptureOutcome { pid: recording.pid, session: outcome.session, lines, tools_link: None };
            if recorded.session.is_some() { Ok(recorded) } else { Err(recorded) }
        }
        Ok(Err(_)) => Err(recording.failed("the mlprof run that started it ended before the capture did".to_string())),
        Err(_) => Err(recording.failed(format!(
            "the mlprof run that started it did not answer within {} s (what it records still goes to {})",
            recording.budget().as_secs(),
            recording.logdir.display()
        ))),
    }
}

/// A probe of `job` under `dir`: through the run that started it, else of its profiler
/// server or Kineto endpoint; why nothing was found, where nothing was. `None` where a
/// capture of the job came first: the probe is not counted, and is due again.
pub async fn probe_job(
    shared: &Shared,
    job: &JobView,
    dir: &Path,
    kineto_steps: Option<u32>,
) -> Option<Result<ProbeView, String>> {
    if shared.turns.capture_pending(job.pid) {
        return None;
    }
    let found = if job.run.is_some() {
        probe_through_run(shared, job, dir, kineto_steps).await
    } else {
        probe_directly(shared, job, dir, kineto_steps).await
    };
    match found {
        Err(_) if shared.turns.capture_pending(job.pid) => None,
        found => Some(found),
    }
}

/// A probe recorded by the run that started `job`: its log directory is made afresh
/// (the job's last probe goes) once it is the probe's turn.
async fn probe_through_run(
    shared: &Shared,
    job: &JobView,
    dir: &Path,
    kineto_steps: Option<u32>,
) -> Result<ProbeView, String> {
    let budget = budget(probe::WINDOW, Purpose::Probe);
    let deadline = Instant::now() + budget;
    let turn = shared.turns.take(job.pid, Purpose::Probe, deadline).await;
    let turn = turn.map_err(|why| no_turn_line(why, budget))?;
    let logdir = probe::fresh_logdir(job, dir);
    let recording = Recording {
        pid: job.pid,
        logdir: &logdir,
        kineto: false,
        duration: probe::WINDOW,
        kineto_steps,
        purpose: Purpose::Probe,
    };
    match record_in_turn(shared, &recording, &turn, deadline).await {
        Ok(CaptureOutcome { session: Some(session), .. }) => probe::read(session, kineto_steps).await,
        Ok(outcome) | Err(outcome) => Err(last_line(outcome)),
    }
}

/// A probe of `job`'s profiler server or Kineto endpoint.
async fn probe_directly(
    shared: &Shared,
    job: &JobView,
    dir: &Path,
    kineto_steps: Option<u32>,
) -> Result<ProbeView, String> {
    let kineto = job.kineto_endpoint.is_some();
    let recording =
        Recording { pid: job.pid, logdir: dir, kineto, duration: probe::WINDOW, kineto_steps, purpose: Purpose::Probe };
    let deadline = Instant::now() + recording.budget();
    let turn = shared.turns.take(job.pid, Purpose::Probe, deadline).await;
    let _turn = turn.map_err(|why| last_line(recording.no_turn(why)))?;
    let _bound = bind_kineto(shared, &recording, deadline).await.map_err(last_line)?;
    tokio::time::timeout_at(deadline, probe::probe(job, dir, &shared.host, kineto_steps))
        .await
        .map_err(|_| format!("not probed within {} s", recording.budget().as_secs()))?
}

/// The last thing a recording said.
fn last_line(outcome: CaptureOutcome) -> String {
    outcome.lines.last().cloned().unwrap_or_default()
}

/// The node's Kineto endpoint for `recording` until its guard is dropped, where its job
/// has one; it is bound by one recording at a time.
async fn bind_kineto<'a>(
    shared: &'a Shared,
    recording: &Recording<'_>,
    deadline: Instant,
) -> Result<Option<tokio::sync::MutexGuard<'a, ()>>, CaptureOutcome> {
    if !recording.kineto {
        return Ok(None);
    }
    match tokio::time::timeout_at(deadline, shared.kineto.lock()).await {
        Ok(bound) => Ok(Some(bound)),
        Err(_) => Err(recording.failed("not recorded: the node's Kineto endpoint stayed bound".to_string())),
    }
}
