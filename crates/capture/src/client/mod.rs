//! The capture client behind `mlprof capture`: ask one or more profiler servers
//! (`tf.profiler.experimental.server.start`, `jax.profiler.start_server`, mlprof's own) for a
//! trace of the next few seconds and save each answer where TensorBoard looks for it.
//!
//! Workers are captured in parallel, one task each, and are independent: one failing does
//! not stop the others, so the result is one [`WorkerOutcome`] per target rather than one
//! error. All workers share one session id and one start time (`start_timestamp_ns`), so
//! their traces cover the same window. The pieces: [`request`] builds what TensorFlow's
//! client sends, [`rpc`] makes the call with the reference's retries and deadline,
//! [`counting`] counts the answer's bytes for [`progress`], [`answer_check`] tells a
//! gRPC answer from a web server's, [`save`] writes the files.

pub mod answer_check;
pub mod counting;
pub mod error;
pub mod progress;
pub mod request;
pub mod rpc;
pub mod save;

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::task::JoinSet;

pub use crate::session_id::SessionIds;
pub use error::{CaptureError, OptionsError};
pub use progress::{NoProgress, Progress, WorkerState};
pub use save::Captured;

use crate::address::Target;
use request::RequestFields;
use rpc::RetryPlan;

/// What to capture and where to put it. Its `Debug` form leaves the token out.
#[derive(Clone)]
pub struct CaptureOptions {
    /// The TensorBoard log directory; profiles go to `<logdir>/plugins/profile/<session>/`.
    /// Sent to the servers made absolute (a relative path would be resolved against each
    /// server's working directory).
    pub logdir: PathBuf,
    /// The session directory name (see [`SessionIds`]).
    pub session_id: String,
    /// How long each worker traces.
    pub duration: Duration,
    /// How long from now until every worker starts tracing.
    pub delay: Duration,
    /// Host TraceMe level: 0 off, 1 user annotations, 2 + high-level ops (default), 3 verbose.
    pub host_tracer_level: u32,
    /// Device tracer level: 0 off, 1 on (default).
    pub device_tracer_level: u32,
    /// Python tracer level: 0 off (default), 1 on.
    pub python_tracer_level: u32,
    /// Extra attempts after a retryable failure (TensorFlow's default of 3 attempts is 2).
    pub retries: u32,
    /// Deadline of one attempt; `None` uses the reference one, max(60 s, 2 × duration) + delay.
    pub timeout: Option<Duration>,
    /// Pause before each retry.
    pub retry_pause: Duration,
    /// Sent to every server as `authorization: Bearer TOKEN` (an `mlprof agent`'s
    /// profiler port on a non-loopback address needs it); `None` sends nothing.
    pub token: Option<String>,
}

impl std::fmt::Debug for CaptureOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaptureOptions")
            .field("logdir", &self.logdir)
            .field("session_id", &self.session_id)
            .field("duration", &self.duration)
            .field("delay", &self.delay)
            .field("host_tracer_level", &self.host_tracer_level)
            .field("device_tracer_level", &self.device_tracer_level)
            .field("python_tracer_level", &self.python_tracer_level)
            .field("retries", &self.retries)
            .field("timeout", &self.timeout)
            .field("retry_pause", &self.retry_pause)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

impl CaptureOptions {
    /// Options with TensorFlow's defaults (levels 2/1/0, 3 attempts, reference deadline),
    /// a 2 s capture starting now, and a 1 s pause between attempts.
    pub fn new(logdir: impl Into<PathBuf>, session_id: impl Into<String>) -> CaptureOptions {
        CaptureOptions {
            logdir: logdir.into(),
            session_id: session_id.into(),
            duration: Duration::from_secs(2),
            delay: Duration::ZERO,
            host_tracer_level: 2,
            device_tracer_level: 1,
            python_tracer_level: 0,
            retries: 2,
            timeout: None,
            retry_pause: Duration::from_secs(1),
            token: None,
        }
    }

    /// `<logdir>/plugins/profile`, where sessions live (TensorBoard's `repository_root`).
    pub fn repository_root(&self) -> PathBuf {
        mlprof_formats::output::profile_root(&self.logdir)
    }

    /// `<logdir>/plugins/profile/<session>`.
    pub fn session_dir(&self) -> PathBuf {
        self.repository_root().join(&self.session_id)
    }

    /// The deadline of one attempt: [`CaptureOptions::timeout`], or the reference one.
    pub fn deadline(&self) -> Duration {
        self.timeout.unwrap_or_else(|| rpc::reference_deadline(self.duration, self.delay))
    }

    /// Checks the levels, duration and session id.
    pub fn validate(&self) -> Result<(), OptionsError> {
        for (name, value, max) in [
            ("host_tracer_level", self.host_tracer_level, 3),
            ("device_tracer_level", self.device_tracer_level, 1),
            ("python_tracer_level", self.python_tracer_level, 1),
        ] {
            if value > max {
                return Err(OptionsError::Level { name, value, max });
            }
        }
        if self.duration.as_millis() == 0 {
            return Err(OptionsError::ZeroDuration);
        }
        let id = &self.session_id;
        if id.is_empty() || id == "." || id == ".." || id.contains(['/', '\\', '\0']) {
            return Err(OptionsError::SessionId(id.clone()));
        }
        Ok(())
    }
}

/// How capturing from one worker ended.
#[derive(Debug)]
pub struct WorkerOutcome {
    /// The worker.
    pub target: Target,
    /// Attempts made (from 1).
    pub attempts: u32,
    /// Where the profile went, or why there is none.
    pub result: Result<Captured, CaptureError>,
}

impl WorkerOutcome {
    /// The profile files this worker left on this machine (empty on failure).
    pub fn local_files(&self) -> &[PathBuf] {
        self.result.as_ref().map(Captured::local_files).unwrap_or_default()
    }
}

impl fmt::Display for WorkerOutcome {
    /// One line: `host:port: what happened`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.result {
            Ok(captured) => write!(f, "{}: {captured}", self.target),
            Err(error) if self.attempts > 1 => write!(f, "{}: {error} (after {} attempts)", self.target, self.attempts),
            Err(error) => write!(f, "{}: {error}", self.target),
        }
    }
}

/// Captures every target in parallel into [`CaptureOptions::session_dir`], reporting to
/// `progress`, and returns one outcome per target, in the order given. Fails only when
/// the options are invalid; every worker failure is in its outcome.
pub async fn capture(
    targets: &[Target],
    options: &CaptureOptions,
    progress: Arc<dyn Progress>,
) -> Result<Vec<WorkerOutcome>, OptionsError> {
    options.validate()?;
    let plan = Arc::new(WorkerPlan::new(options)?);
    let start_ns = epoch_ns_after(options.delay);
    let mut tasks = JoinSet::new();
    let mut index_of = std::collections::HashMap::new();
    for (index, target) in targets.iter().enumerate() {
        let (plan, progress, target) = (Arc::clone(&plan), Arc::clone(&progress), target.clone());
        let handle = tasks.spawn(async move { capture_worker(target, &plan, start_ns, &*progress).await });
        index_of.insert(handle.id(), index);
    }
    let mut outcomes: Vec<Option<WorkerOutcome>> = targets.iter().map(|_| None).collect();
    while let Some(joined) = tasks.join_next_with_id().await {
        match joined {
            Ok((id, outcome)) => {
                if let Some(&index) = index_of.get(&id) {
                    outcomes[index] = Some(outcome);
                }
            }
            Err(error) => {
                if let Some(&index) = index_of.get(&error.id()) {
                    let result = Err(CaptureError::Internal { detail: error.to_string() });
                    let outcome = WorkerOutcome { target: targets[index].clone(), attempts: 1, result };
                    progress.finished(&outcome);
                    outcomes[index] = Some(outcome);
                }
            }
        }
    }
    Ok(outcomes
        .into_iter()
        .zip(targets)
        .map(|(outcome, target)| {
            outcome.unwrap_or_else(|| WorkerOutcome {
                target: target.clone(),
                attempts: 0,
                result: Err(CaptureError::Internal { detail: "the worker's task vanished".into() }),
            })
        })
        .collect())
}

/// What every worker task shares: the request's text fields and the retry plan.
struct WorkerPlan {
    options: CaptureOptions,
    logdir: String,
    repository_root: String,
    session_dir: PathBuf,
    retry: RetryPlan,
}

impl WorkerPlan {
    fn new(options: &CaptureOptions) -> Result<WorkerPlan, OptionsError> {
        let logdir_error = |reason: String| OptionsError::Logdir { path: options.logdir.clone(), reason };
        let absolute = std::path::absolute(&options.logdir).map_err(|e| logdir_error(e.to_string()))?;
        let text = |p: &std::path::Path| p.to_str().map(str::to_string).ok_or_else(|| logdir_error("not UTF-8".into()));
        let repository_root = mlprof_formats::output::profile_root(&absolute);
        Ok(WorkerPlan {
            logdir: text(&absolute)?,
            repository_root: text(&repository_root)?,
            session_dir: repository_root.join(&options.session_id),
            retry: RetryPlan {
                attempts: options.retries.saturating_add(1),
                deadline: options.deadline(),
                pause: options.retry_pause,
            },
            options: options.clone(),
        })
    }

    fn fields(&self, start_timestamp_ns: u64) -> RequestFields<'_> {
        let o = &self.options;
        RequestFields {
            duration_ms: u64::try_from(o.duration.as_millis()).unwrap_or(u64::MAX),
            start_timestamp_ns,
            session_id: &o.session_id,
            logdir: &self.logdir,
            repository_root: &self.repository_root,
            host_tracer_level: o.host_tracer_level,
            device_tracer_level: o.device_tracer_level,
            python_tracer_level: o.python_tracer_level,
        }
    }
}

/// One worker: the call with retries, then the save (on a blocking thread).
async fn capture_worker(target: Target, plan: &WorkerPlan, start_ns: u64, progress: &dyn Progress) -> WorkerOutcome {
    // Retries start `delay` after they are made; only the first attempt is aligned.
    let request = |attempt: u32| {
        let start = if attempt == 1 { start_ns } else { epoch_ns_after(plan.options.delay) };
        request::profile_request(&target, &plan.fields(start))
    };
    let (called, attempts) =
        rpc::profile_with_retries(&target, plan.retry, plan.options.token.as_deref(), progress, request).await;
    let result = match called {
        Ok(response) => {
            progress.update(&target, WorkerState::Writing);
            let (saved_target, dir) = (target.clone(), plan.session_dir.clone());
            tokio::task::spawn_blocking(move || save::save(response, &saved_target, &dir))
                .await
                .unwrap_or_else(|e| Err(CaptureError::Internal { detail: e.to_string() }))
        }
        Err(error) => Err(error),
    };
    let outcome = WorkerOutcome { target, attempts, result };
    progress.finished(&outcome);
    outcome
}

/// Nanoseconds since the Unix epoch, `after` from now (0 if the clock is before 1970).
fn epoch_ns_after(after: Duration) -> u64 {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    u64::try_from(now.saturating_add(after).as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::{CaptureOptions, OptionsError};
    use std::time::Duration;

    #[test]
    fn the_token_never_shows_in_debug_output() {
        let options = CaptureOptions { token: Some("s3cr3t-token".into()), ..CaptureOptions::new("/logs", "s") };
        let shown = format!("{options:?}");
        assert!(!shown.contains("s3cr3t") && shown.contains("<redacted>") && shown.contains("/logs"), "{shown}");
    }

    #[test]
    fn options_default_to_tensorflows_and_validate() {
        let o = CaptureOptions::new("/logs", "2026_03_07_09_05_01");
        assert_eq!((o.host_tracer_level, o.device_tracer_level, o.python_tracer_level), (2, 1, 0));
        assert_eq!(o.retries + 1, 3, "three attempts in all");
        assert_eq!(o.deadline(), Duration::from_secs(60));
        assert_eq!(o.session_dir(), std::path::Path::new("/logs/plugins/profile/2026_03_07_09_05_01"));
        assert!(o.validate().is_ok());
        let with = |f: &dyn Fn(&mut CaptureOptions)| {
            let mut o = o.clone();
            f(&mut o);
            o.validate()
        };
        assert!(matches!(with(&|o| o.host_tracer_level = 4), Err(OptionsError::Level { max: 3, .. })));
        assert!(matches!(with(&|o| o.python_tracer_level = 2), Err(OptionsError::Level { max: 1, .. })));
        assert!(matches!(with(&|o| o.duration = Duration::from_micros(999)), Err(OptionsError::ZeroDuration)));
        assert!(matches!(with(&|o| o.session_id = "../x".into()), Err(OptionsError::SessionId(_))));
        assert_eq!(with(&|o| o.timeout = Some(Duration::from_secs(1))).ok(), Some(()));
        let mut timed = o.clone();
        timed.timeout = Some(Duration::from_secs(1));
        assert_eq!(timed.deadline(), Duration::from_secs(1));
    }
}
