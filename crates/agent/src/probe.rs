//! Step times in the framework's own terms, for jobs that can be traced without a code
//! change: every so often the agent records a short window of the job's own framework
//! trace — from the profiler server it listens on (JAX, TensorFlow), through Kineto's
//! on-demand mode (PyTorch started with `KINETO_USE_DAEMON`), or through the `mlprof run`
//! that started it (see [`crate::registry`]) — and runs the overview on
//! it: how many steps, their mean time, the share of it spent waiting for input, the op
//! with the most self time. Only the last probe of each job is kept on disk.
//!
//! A probe costs the job what its framework's tracer costs, for the window (1 s in every
//! [`DEFAULT_EVERY`] by default) and, through Kineto on a GPU, its 5 s warm-up before it;
//! a job with neither endpoint is never probed, nor one whose probes would leave it
//! slower ([`harms`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mlprof_analysis::tool::{Analysis, Options, ToolId, ToolResult};
use mlprof_capture::address::Target;
use mlprof_capture::client::{CaptureOptions, NoProgress, SessionIds, capture};
use mlprof_run::attach_kineto::{self, KinetoAttach, KinetoOutcome};
use mlprof_run::kineto_ipc::TraceWindow;
use serde::{Deserialize, Serialize};

use crate::jobs::JobView;

/// How often each job is probed by default.
pub const DEFAULT_EVERY: Duration = Duration::from_secs(60);
/// How long after the agent first sees a job its first probe comes (its start-up is
/// rarely what anyone wants timed).
pub const FIRST_AFTER: Duration = Duration::from_secs(10);
/// How much of the job a probe records.
pub const WINDOW: Duration = Duration::from_secs(1);

/// The fewest and the most whole steps a probe through Kineto records.
const KINETO_STEPS: (f64, f64) = (2.0, 20.0);

/// How many whole steps a probe through Kineto records after `last`, the job's last
/// probe: about [`WINDOW`]'s worth (2 to 20), where that probe found the steps of the
/// job's optimizer, which Kineto counts. Kineto then starts at the job's next step,
/// where a timed trace first warms up for 5 s with CUPTI on (on a GPU, the job's steps
/// ran at about tracing speed all that time). `None`, a timed window, otherwise.
pub fn kineto_steps_after(last: Option<&ProbeView>) -> Option<u32> {
    let last = last?;
    let counted = last.steps > 0 && last.step_time_ms > 0.0 && last.step_source.contains("Optimizer.step");
    let steps = (WINDOW.as_secs_f64() * 1e3 / last.step_time_ms).round().clamp(KINETO_STEPS.0, KINETO_STEPS.1);
    counted.then_some(steps as u32)
}

/// How many probes' step times are kept per job (they make its trend).
pub const HISTORY: usize = 30;
/// The fewest earlier probes a trend is measured against.
const TREND_BASE: usize = 2;

/// How much slower the last of `step_times_ms` is than the median of those before it,
/// percent (negative: faster); `None` until there are [`TREND_BASE`] earlier ones.
pub fn trend_percent(step_times_ms: &[f64]) -> Option<f64> {
    let (last, earlier) = step_times_ms.split_last()?;
    if earlier.len() < TREND_BASE {
        return None;
    }
    let mut sorted = earlier.to_vec();
    sorted.sort_by(f64::total_cmp);
    let middle = sorted.len() / 2;
    let median = if sorted.len() % 2 == 0 { (sorted[middle - 1] + sorted[middle]) / 2.0 } else { sorted[middle] };
    (median > 0.0).then(|| 100.0 * (last / median - 1.0))
}

/// What the last probe of a job found.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ProbeView {
    /// When it was taken, seconds since the Unix epoch.
    pub at_unix_s: f64,
    /// The window recorded, ms.
    pub window_ms: u64,
    /// Kineto recorded this many whole steps instead of `window_ms` (see
    /// [`kineto_steps_after`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kineto_steps: Option<u32>,
    /// Steps found in the window.
    pub steps: usize,
    /// Their mean time, ms (0 without steps).
    pub step_time_ms: f64,
    /// The share of step time spent waiting for input, percent.
    pub input_percent: f64,
    /// The mean step time by category, in the overview's order and words (`Input`,
    /// `Host compute`, `Device compute`, …), ms.
    #[serde(default)]
    pub breakdown_ms: Vec<(String, f64)>,
    /// The op with the most self time in the window.
    pub top_op: Option<String>,
    /// How the steps were found (the overview's step source).
    pub step_source: String,
    /// The probe's session, for every tool (`mlprof analyze`, `serve`).
    pub session: PathBuf,
}

/// Whether `job` can be probed: it serves a profiler, its Kineto polls, or its run
/// records what the agent asks.
pub fn probeable(job: &JobView) -> bool {
    !job.listening_ports.is_empty() || job.kineto_endpoint.is_some() || job.run.is_some()
}

/// Why probing `job` would harm it, as its probe's note: it would be traced through
/// Kineto on a GPU, where Kineto keeps CUPTI attached after the probe and the job's steps
/// stay slower until it exits — a job not started by `mlprof run` whose environment
/// lacks `TEARDOWN_CUPTI=1`, or one whose run says its start-up hook could not detach
/// CUPTI (an older PyTorch or CUDA). Such a job is still captured when asked (`mlprof
/// agent capture`).
pub fn harms(job: &JobView) -> Option<String> {
    if let Some(run) = &job.run {
        let why = run.cupti_stays.as_ref().filter(|_| job.uses_gpu)?;
        return Some(format!(
            "not probed: Kineto would keep CUPTI attached after each probe ({why}), slowing its steps until it \
             exits; capture it when wanted"
        ));
    }
    if !job.listening_ports.is_empty() || job.kineto_endpoint.is_none() {
        return None;
    }
    let why = mlprof_run::attach_kineto::cupti_stays(job.pid)?;
    Some(format!(
        "not probed: Kineto would keep CUPTI attached after each probe ({why}), slowing its steps until it exits; \
         start it with TEARDOWN_CUPTI=1 (PyTorch 2.11 or later, CUDA 12.6 or later) or under `mlprof run \
         --agent`, or capture it when wanted"
    ))
}

/// The log directory of `job`'s probes under `dir`, emptied: one probe per job is kept.
pub fn fresh_logdir(job: &JobView, dir: &Path) -> PathBuf {
    let logdir = dir.join(job.folder());
    let _ = std::fs::remove_dir_all(&logdir);
    logdir
}

/// Records [`WINDOW`] of `job`'s framework trace (through Kineto, `kineto_steps` whole
/// steps where given) under `dir` and reads its steps.
pub async fn probe(job: &JobView, dir: &Path, host: &str, kineto_steps: Option<u32>) -> Result<ProbeView, String> {
    let logdir = fresh_logdir(job, dir);
    let root = mlprof_formats::output::profile_root(&logdir);
    let session_id = SessionIds::new().next_now(&root);
    let session = root.join(&session_id);
    std::fs::create_dir_all(&session).map_err(|e| format!("cannot make {}: {e}", session.display()))?;
    let recorded = if job.listening_ports.is_empty() {
        kineto_window(job, &session, host, kineto_steps).await
    } else {
        server_window(job, &logdir, &session_id).await
    };
    if let Err(why) = recorded {
        let _ = std::fs::remove_dir_all(&logdir);
        return Err(why);
    }
    read(session, kineto_steps.filter(|_| job.listening_ports.is_empty())).await
}

/// What a probe's `session` holds: its steps, read through the overview (off the
/// runtime's threads); `kineto_steps`: what Kineto was asked for instead of [`WINDOW`].
pub async fn read(session: PathBuf, kineto_steps: Option<u32>) -> Result<ProbeView, String> {
    let at_unix_s = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
    let session_path = session.clone();
    tokio::task::spawn_blocking(move || overview(&session_path))
        .await
        .map_err(|e| format!("reading the probe: {e}"))?
        .map(|found| ProbeView { at_unix_s, window_ms: WINDOW.as_millis() as u64, kineto_steps, session, ..found })
}

/// A window from the first port that serves `tensorflow.ProfilerService`.
async fn server_window(job: &JobView, logdir: &Path, session_id: &str) -> Result<(), String> {
    let mut why = String::from("no port answered");
    for port in &job.listening_ports {
        let mut options = CaptureOptions::new(logdir, session_id);
        options.duration = WINDOW;
        // One try: a port that is not a profiler server is not worth a second.
        options.retries = 0;
        let Some(target) = Target::parse_list(&format!("127.0.0.1:{port}")).ok().and_then(|t| t.into_iter().next())
        else {
            continue;
        };
        match capture(&[target], &options, Arc::new(NoProgress)).await {
            Ok(outcomes) if outcomes.iter().any(|o| !o.local_files().is_empty()) => return Ok(()),
            Ok(outcomes) => why = outcomes.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "),
            Err(error) => why = error.to_string(),
        }
    }
    Err(format!("profiler server: {why}"))
}

/// A window of Kineto's trace (`steps` whole steps, where given), asked for at the
/// job's next poll.
async fn kineto_window(job: &JobView, session: &Path, host: &str, steps: Option<u32>) -> Result<(), String> {
    let endpoint = attach_kineto::endpoint(job.pid)
        .map_err(|e| format!("reading its environment: {e}"))?
        .ok_or("its Kineto on-demand mode is off")?;
    let window = steps.map_or(TraceWindow::Duration(WINDOW), TraceWindow::Iterations);
    let kineto = KinetoAttach::bind(endpoint, job.pid, window, session, host)?;
    match kineto.record(Instant::now() + attach_kineto::POLL_WAIT, host, &|_| {}).await {
        KinetoOutcome::Written(_) => Ok(()),
        KinetoOutcome::Missing(why) => Err(format!("Kineto: {why}")),
    }
}

/// The overview of the probe's session: steps, their time, input share, top op.
fn overview(session: &Path) -> Result<ProbeView, String> {
    let sessions = mlprof_formats::discover::load(session).map_err(|e| e.to_string())?;
    let session = sessions.last().ok_or("the probe recorded nothing")?;
    let analysis = Analysis::new(session.hosts.iter().collect(), Options::default());
    let Ok(ToolResult::Overview(overview)) = analysis.run(ToolId::OverviewPage) else {
        return Err("the overview found nothing in the probe".to_string());
    };
    let steps = &overview.steps;
    Ok(ProbeView {
        steps: steps.steps.len(),
        step_time_ms: steps.step_time_ms.average,
        input_percent: steps.bottleneck.input_percent,
        breakdown_ms: mlprof_analysis::input_pipeline::CATEGORY_LABELS
            .iter()
            .map(|(id, label)| {
                let average = steps.category_ms.iter().find(|(k, _)| k == id).map_or(0.0, |(_, s)| s.average);
                (label.to_string(), average)
            })
            .collect(),
        top_op: overview.top_ops.first().map(|op| op.name.clone()),
        step_source: steps.step_source.clone(),
        ..ProbeView::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probes_after_one_that_found_optimizer_steps_ask_kineto_for_steps() {
        let found = |steps: usize, step_time_ms: f64, step_source: &str| ProbeView {
            steps,
            step_time_ms,
            step_source: step_source.to_string(),
            ..ProbeView::default()
        };
        let optimizer = "inferred from PyTorch's \"Optimizer.step#SGD.step\" annotations";
        assert_eq!(kineto_steps_after(None), None, "the first probe is timed");
        assert_eq!(kineto_steps_after(Some(&found(30, 15.0, optimizer))), Some(20), "at most 20");
        assert_eq!(kineto_steps_after(Some(&found(10, 100.0, optimizer))), Some(10), "about 1 s of them");
        assert_eq!(kineto_steps_after(Some(&found(1, 900.0, optimizer))), Some(2), "at least 2");
        assert_eq!(kineto_steps_after(Some(&found(0, 0.0, optimizer))), None, "no steps found");
        assert_eq!(kineto_steps_after(Some(&found(5, 20.0, "ProfilerStep#N"))), None, "Kineto counts optimizer steps");
    }

    #[test]
    fn the_trend_is_the_last_probe_against_the_median_before_it() {
        assert_eq!(trend_percent(&[]), None);
        assert_eq!(trend_percent(&[10.0, 12.0]), None, "one earlier probe is no baseline");
        assert_eq!(trend_percent(&[10.0, 10.0, 15.0]), Some(50.0));
        // One slow probe among the earlier ones does not move the median.
        assert_eq!(trend_percent(&[10.0, 30.0, 10.0, 10.0]), Some(0.0));
        assert_eq!(trend_percent(&[12.0, 8.0, 10.0, 5.0]), Some(-50.0));
        assert_eq!(
            trend_percent(&[12.0, 8.0, 10.0, 9.0, 19.0]),
            Some(100.0),
            "an even count: the mean of the middle two"
        );
        assert_eq!(trend_percent(&[0.0, 0.0, 5.0]), None);
    }
}
