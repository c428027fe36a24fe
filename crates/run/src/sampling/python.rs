//! Reading one process's Python stacks with py-spy, as a library, without stopping the
//! process (`LockingStrategy::NonBlocking`: py-spy's blocking mode ptrace-stops every
//! thread per sample, which slows a PyTorch process with a hundred threads several
//! times over). A sample read while the interpreter changes a frame can fail or come
//! back partial; a failure is counted, never fatal.

use std::panic::AssertUnwindSafe;

use py_spy::config::{LineNo, LockingStrategy};
use py_spy::{Config, PythonSpy, StackTrace};

use super::store::{Frame, Frames, Sample, ThreadState};

/// One attached Python process.
pub struct PythonProcess {
    spy: PythonSpy,
    /// The interpreter's version (`3.11.7`).
    pub version: String,
}

/// A thread's sample, and its name when py-spy knows it.
pub struct ThreadSample {
    /// The sample.
    pub sample: Sample,
    /// The Python thread's name (`MainThread`, `Thread-1 (worker)`).
    pub name: Option<String>,
}

fn config() -> Config {
    Config {
        blocking: LockingStrategy::NonBlocking,
        native: false,
        lineno: LineNo::LastInstruction,
        collect_thread_names: true,
        ..Config::default()
    }
}

impl PythonProcess {
    /// Attaches to `pid`. Fails (with py-spy's reason) when the process is not Python,
    /// its interpreter is not up yet, or its memory cannot be read (ptrace rights).
    pub fn attach(pid: u32) -> Result<PythonProcess, String> {
        let pid = py_spy::Pid::try_from(pid).map_err(|_| format!("pid {pid} is out of range"))?;
        let spy = guarded(|| PythonSpy::new(pid, &config())).and_then(|attached| attached.map_err(|e| one_line(&e)))?;
        let version = spy.version.to_string();
        Ok(PythonProcess { spy, version })
    }

    /// Every Python thread's stack now, read from the process's memory; [`intern`] makes
    /// them samples. Reading takes no lock of mlprof's: the sampler may be kept waiting
    /// for the CPU in the middle of it.
    pub fn read(&mut self) -> Result<Vec<StackTrace>, String> {
        guarded(|| self.spy.get_stack_traces()).and_then(|t| t.map_err(|e| one_line(&e)))
    }
}

/// Stacks [`PythonProcess::read`] at `at_ns` as samples, their frames interned into
/// `frames`.
pub fn intern(traces: &[StackTrace], at_ns: i64, frames: &mut Frames) -> Vec<ThreadSample> {
    traces.iter().map(|trace| thread_sample(trace, at_ns, frames)).collect()
}

fn thread_sample(trace: &StackTrace, at_ns: i64, frames: &mut Frames) -> ThreadSample {
    // py-spy lists the innermost frame first; stacks are kept root first.
    let ids: Vec<u32> = trace
        .frames
        .iter()
        .rev()
        .map(|f| {
            frames.frame(Frame {
                function: f.name.as_str().into(),
                file: f.filename.as_str().into(),
                short_file: f.short_filename.as_deref().unwrap_or(&f.filename).into(),
                line: u32::try_from(f.line).unwrap_or(0),
            })
        })
        .collect();
    let state = if trace.owns_gil {
        ThreadState::Gil
    } else if trace.active {
        ThreadState::Native
    } else {
        ThreadState::Idle
    };
    // Python 3.11+ keeps the OS thread id; before that py-spy finds it on Linux, and the
    // Python thread id (a pthread_t) stands in when it cannot.
    let tid = trace.os_thread_id.map_or(trace.thread_id as u32, |t| t as u32);
    ThreadSample {
        sample: Sample { at_ns, pid: trace.pid as u32, tid, stack: frames.stack(&ids), state },
        name: trace.thread_name.clone(),
    }
}

thread_local! {
    /// Whether this thread is inside a py-spy call (see [`guarded`]).
    static IN_PY_SPY: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs a py-spy call, turning a panic inside it into an error: a bug there (reading an
/// interpreter that changes under it, without stopping it) must cost one sample, not
/// mlprof, and print nothing over the job's output.
fn guarded<T>(call: impl FnOnce() -> T) -> Result<T, String> {
    static QUIET: std::sync::Once = std::sync::Once::new();
    QUIET.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !IN_PY_SPY.with(std::cell::Cell::get) {
                previous(info);
            }
        }));
    });
    IN_PY_SPY.with(|inside| inside.set(true));
    let result = std::panic::catch_unwind(AssertUnwindSafe(call));
    IN_PY_SPY.with(|inside| inside.set(false));
    result.map_err(|_| "py-spy failed unexpectedly".to_string())
}

/// py-spy's error and its causes on one line (anyhow's `{:#}`: "outer: inner").
fn one_line(error: &impl std::fmt::Display) -> String {
    format!("{error:#}").replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_inside_py_spy_is_an_error() {
        let result: Result<(), String> = guarded(|| panic!("index out of bounds"));
        assert_eq!(result, Err("py-spy failed unexpectedly".to_string()));
        assert_eq!(guarded(|| 7), Ok(7));
        assert!(!IN_PY_SPY.with(std::cell::Cell::get));
    }

    #[test]
    fn a_process_that_is_not_python_is_refused_with_py_spys_reason() {
        let mut child = std::process::Command::new("sleep").arg("5").spawn().unwrap();
        let refused = PythonProcess::attach(child.id());
        let _ = child.kill();
        let _ = child.wait();
        assert!(refused.is_err());
    }
}
