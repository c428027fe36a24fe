//! [`Profiler`]: TensorFlow's programmatic mode (`tf.profiler.experimental.start/stop`,
//! JAX `start_trace/stop_trace`) for Rust — record this process's annotations between
//! `start()` and `stop()` and get an [`XSpace`] back.
//!
//! The design decision to know: a `Profiler` is one session of the process-wide
//! recorder, the same kind the gRPC server opens per `Profile` call, so programmatic
//! and remote captures can overlap (each sees the events of its own window). Dropping a
//! `Profiler` without `stop()` ends its session and discards what it recorded.

use super::error::ServerError;
use super::platform;
use super::recorder::{self, Recording};
use super::xspace::XSpace;

/// Settings of a [`Profiler`] session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProfilerOptions {
    /// Most events the session keeps (0: [`super::DEFAULT_MAX_EVENTS`]; at most
    /// [`super::MAX_EVENTS_LIMIT`]). Events beyond it are dropped and the XSpace
    /// gets a warning.
    pub max_events: usize,
    /// Host name written into the XSpace and used as the file name by
    /// [`XSpace::save`]; `None`: the machine's host name.
    pub hostname: Option<String>,
}

impl Default for ProfilerOptions {
    fn default() -> ProfilerOptions {
        ProfilerOptions { max_events: recorder::DEFAULT_MAX_EVENTS, hostname: None }
    }
}

/// A running profiling session of this process.
///
/// ```
/// use mlprof_capture::server::{Profiler, step, trace};
///
/// let profiler = Profiler::start()?;
/// for n in 0..3 {
///     let _step = step("train", n);
///     let _t = trace("forward", &[("batch", 32)]);
/// }
/// let space = profiler.stop();
/// assert_eq!(space.event_count(), 6);
/// # Ok::<(), mlprof_capture::server::ServerError>(())
/// ```
#[derive(Debug)]
pub struct Profiler {
    recording: Recording,
    hostname: Option<String>,
}

impl Profiler {
    /// Starts recording with the default options. Fails only when
    /// [`super::MAX_SESSIONS`] sessions already record.
    pub fn start() -> Result<Profiler, ServerError> {
        Profiler::start_with(ProfilerOptions::default())
    }

    /// Starts recording with `options`.
    pub fn start_with(options: ProfilerOptions) -> Result<Profiler, ServerError> {
        let recording = recorder::begin(options.max_events)?;
        Ok(Profiler { recording, hostname: options.hostname })
    }

    /// When the session started, Unix epoch nanoseconds.
    pub fn start_ns(&self) -> i64 {
        self.recording.start_ns()
    }

    /// Stops recording and returns the events that began and ended while it ran.
    pub fn stop(self) -> XSpace {
        let hostname = self.hostname.unwrap_or_else(platform::hostname);
        XSpace::from_collected(self.recording.finish(), &hostname)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::annotation::{step, trace_scope};
    use crate::server::recorder::test_lock;

    #[test]
    fn start_and_stop_return_the_events_in_between() {
        let _serial = test_lock();
        let outside = trace_scope("outside");
        let profiler = Profiler::start_with(ProfilerOptions { max_events: 0, hostname: Some("h".into()) }).unwrap();
        drop(outside);
        {
            let _s = step("train", 1);
        }
        let space = profiler.stop();
        assert_eq!(space.event_count(), 1);
        assert_eq!(space.host().hostnames, ["h"]);
        assert!(space.start_ns() <= space.stop_ns());
        assert!(!recorder::is_recording());
    }

    #[test]
    fn a_dropped_profiler_ends_its_session() {
        let _serial = test_lock();
        let profiler = Profiler::start().unwrap();
        assert!(recorder::is_recording());
        drop(profiler);
        assert!(!recorder::is_recording());
    }
}
