//! `mlprof run -- CMD` against real jobs that have no profiler code: a PyTorch loop
//! (Kineto on demand), a JAX loop and a TensorFlow loop (start-up hook + gRPC capture),
//! each checked by reading what landed with `mlprof analyze`; and the job-first rules
//! with plain `python3` jobs: exit codes, signals, the job's own `sitecustomize`, a hook
//! that fails inside the job.
//!
//! The framework interpreters come from `MLPROF_TORCH_PYTHON`, `MLPROF_JAX_PYTHON` and
//! `MLPROF_TF_PYTHON` (`.ci/run` creates the venvs and sets them). Without one, its test
//! says so and passes, unless `MLPROF_REQUIRE_PEERS` is set (as `.ci/run` does), where a
//! missing peer is a failure.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

mod common;
mod peers;

use common::{mlprof, ok_stdout};

/// Runs `mlprof run ARGS -- CMD…` in `logdir`.
fn run(logdir: &Path, options: &[&str], command: &[&str]) -> Output {
    let logdir = logdir.to_str().expect("UTF-8 path");
    let mut args = vec!["run", "--logdir", logdir];
    args.extend_from_slice(options);
    args.push("--");
    args.extend_from_slice(command);
    mlprof(&args)
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Every file under `logdir/plugins/profile/*/`.
fn session_files(logdir: &Path) -> Vec<PathBuf> {
    let Ok(sessions) = std::fs::read_dir(logdir.join("plugins/profile")) else { return Vec::new() };
    let mut files: Vec<PathBuf> = sessions
        .flat_map(|s| std::fs::read_dir(s.expect("a session").path()).expect("a session directory"))
        .map(|f| f.expect("a file").path())
        .collect();
    files.sort();
    files
}

fn script(name: &str) -> String {
    peers::script(name).display().to_string()
}

/// Runs `tests/peers/torch_plain_loop.py` for `seconds` under `mlprof run OPTIONS`, into
/// a new log directory; `None` without a PyTorch interpreter (see [`peers::python`]).
fn run_torch_loop(test: &str, options: &[&str], seconds: &str) -> Option<(tempfile::TempDir, Output, String)> {
    let python = peers::python("MLPROF_TORCH_PYTHON", test)?;
    let logdir = tempfile::tempdir().expect("temp dir");
    let out = run(logdir.path(), options, &[&python, &script("torch_plain_loop.py"), seconds]);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    Some((logdir, out, err))
}

#[test]
fn a_plain_pytorch_loop_is_traced_through_kineto_on_demand() {
    // A process settles for 5 s, then Kineto, which polls every few seconds, warms up for
    // a few more before it records and writes: 40 s leave room on a loaded 2-core machine.
    let test = "a_plain_pytorch_loop_is_traced_through_kineto_on_demand";
    let Some((logdir, out, err)) = run_torch_loop(test, &["--duration", "500ms"], "40") else { return };
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("steps "), "the job's stdout is its own");
    assert!(err.contains("tracing 500 ms (Kineto on demand)"), "{err}");
    let files = session_files(logdir.path());
    let traces: Vec<&PathBuf> = files.iter().filter(|f| f.to_string_lossy().ends_with(".pt.trace.json")).collect();
    assert_eq!(traces.len(), 1, "one PyTorch process traced: {files:?}\n{err}");
    assert!(files.iter().all(|f| !f.file_name().unwrap_or_default().to_string_lossy().starts_with('.')), "{files:?}");

    // Every thread's ops: the loop's prefetching thread normalises batches with torch ops.
    let trace: Value = serde_json::from_slice(&std::fs::read(traces[0]).expect("the trace")).expect("JSON");
    let events = trace["traceEvents"].as_array().expect("events");
    let mut threads: Vec<&Value> = events.iter().filter(|e| e["cat"] == "cpu_op").map(|e| &e["tid"]).collect();
    threads.sort_by_key(|t| t.to_string());
    threads.dedup();
    assert!(threads.len() >= 2, "cpu_op events on {} thread(s) only", threads.len());
    assert!(events.iter().any(|e| e["name"].as_str().is_some_and(|n| n.starts_with("Optimizer.step#SGD"))));

    let ops = ok_stdout(mlprof(&["analyze", &logdir.path().display().to_string(), "--tool", "framework_op_stats"]));
    assert!(ops.contains("aten::addmm") || ops.contains("aten::linear"), "{ops}");

    // No ProfilerStep#N in a job without profiler code: steps come from its optimizer.
    let (steps, source) = peers::overview_steps(logdir.path());
    assert!(steps.len() >= 3, "{} steps in 500 ms of a millisecond loop: {source}", steps.len());
    assert!(steps.iter().all(|s| s.starts_with("OptimizerStep#")), "{steps:?}");
    assert!(source.contains("inferred from PyTorch's \"Optimizer.step#SGD.step\" annotations"), "{source}");

    // Sampled from outside meanwhile: the loop's Python, and the DataLoader's two worker
    // processes.
    let python = peers::python_tool(logdir.path());
    let json = python.to_string();
    let lines = python["lines"].as_array().expect("lines");
    let in_loop = |function: &str| {
        lines.iter().any(|l| {
            l["function"] == function
                && l["short_file"].as_str().is_some_and(|f| f.ends_with("torch_plain_loop.py"))
                && l["total_samples"].as_u64() > Some(0)
        })
    };
    assert!(in_loop("main") && in_loop("prefetch"), "{json}");
    let pids = peers::sampled_pids(&python);
    assert!(pids.len() >= 3, "the job and its 2 DataLoader workers: {pids:?}\n{err}");
}

#[test]
fn a_plain_pytorch_loop_is_traced_for_a_number_of_steps() {
    let test = "a_plain_pytorch_loop_is_traced_for_a_number_of_steps";
    let Some((logdir, _, err)) = run_torch_loop(test, &["--steps", "3"], "40") else { return };
    assert!(err.contains("tracing 3 steps (Kineto on demand)"), "{err}");
    // Every step: the overview leaves out the first and last of more than 5.
    let (steps, source) = peers::every_step(logdir.path());
    // Kineto checks for the end of its window asynchronously: a loop of 5 ms steps now and
    // then gets steps more, always after the ones asked for (4 in one CI run, 70 in one on
    // a loaded machine: about 0.35 s late). At most 200 (1 s of steps) still says the
    // window ended on its own long before the job's 40 s (thousands of steps).
    assert!((3..=200).contains(&steps.len()), "{steps:?}\n{source}\n{err}");
    assert_eq!(steps[..3], ["OptimizerStep#1", "OptimizerStep#2", "OptimizerStep#3"], "{source}\n{err}");
}

#[test]
fn a_trace_kineto_drops_is_asked_for_again() {
    // Kineto drops an on-demand trace its profiler thread takes up more than about 2 s
    // after the config came ("insufficient time for warmup"), as a busy machine makes it
    // now and then; stopping the job as its first config arrives makes it so.
    let test = "a_trace_kineto_drops_is_asked_for_again";
    let Some(python) = peers::python("MLPROF_TORCH_PYTHON", test) else { return };
    let logdir = tempfile::tempdir().expect("temp dir");
    let mut child = Command::new(env!("CARGO_BIN_EXE_mlprof"))
        .args(["run", "--duration", "500ms", "--logdir", &logdir.path().display().to_string(), "--"])
        .args([&python, &script("torch_plain_loop.py"), "40"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("mlprof starts");
    let (said, stopped) = peers::stop_the_first_traced_process(child.stderr.take().expect("piped"));
    assert!(child.wait().expect("mlprof ends").success(), "{said}");
    assert!(stopped, "no trace was asked for: {said}");
    assert!(said.contains("Kineto dropped the trace") && said.contains("asked again (2 of 3)"), "{said}");
    let files = session_files(logdir.path());
    assert!(files.iter().any(|f| f.to_string_lossy().ends_with(".pt.trace.json")), "{files:?}\n{said}");
    let (steps, source) = peers::overview_steps(logdir.path());
    assert!(!steps.is_empty(), "{source}\n{said}");
}

#[test]
fn a_pytorch_job_that_exits_while_kineto_records_exits_cleanly() {
    // PyTorch 2.11 dies of SIGSEGV at exit when an on-demand trace is still recording (its
    // global profiler state outlives libkineto); the start-up hook stops the trace first.
    // A 120 s window asked of a 30 s loop is still recording when the loop ends. The loop
    // runs on one thread: in the DataLoader loop, a worker forked from its second thread
    // while a trace recorded once deadlocked on the CPU generator's mutex on a loaded
    // machine, and this test is about the exit alone.
    let test = "a_pytorch_job_that_exits_while_kineto_records_exits_cleanly";
    let Some(python) = peers::python("MLPROF_TORCH_PYTHON", test) else { return };
    let logdir = tempfile::tempdir().expect("temp dir");
    let out = run(logdir.path(), &["--duration", "120s"], &[&python, &script("torch_one_thread_loop.py"), "30"]);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("steps "), "{err}");
    assert!(err.contains("tracing 120000 ms (Kineto on demand)"), "{err}");
    assert!(err.contains("exited while Kineto's on-demand trace was recording: stopped it first"), "{err}");
    assert!(err.contains("the job ended before its trace was written"), "{err}");
    // Nothing is left of the trace Kineto never finished (it had opened a temporary file).
    let files = session_files(logdir.path());
    assert!(files.iter().all(|f| !f.file_name().unwrap_or_default().to_string_lossy().starts_with('.')), "{files:?}");
}

/// Runs `tests/peers/torch_exit_near_trace.py`, which exits at `moment` (`start` or `end`)
/// of its Kineto trace plus `offset` seconds, under `mlprof run --duration DURATION`, and
/// checks that the job exited cleanly when it aimed to and that mlprof said each of
/// `said`: the log directory.
fn run_torch_exiting_near_its_trace(
    test: &str,
    [moment, offset, duration]: [&str; 3],
    said: &[&str],
) -> Option<tempfile::TempDir> {
    let python = peers::python("MLPROF_TORCH_PYTHON", test)?;
    let logdir = tempfile::tempdir().expect("temp dir");
    let out =
        run(logdir.path(), &["--duration", duration], &[&python, &script("torch_exit_near_trace.py"), moment, offset]);
    let (job_said, err) = (String::from_utf8_lossy(&out.stdout), stderr(&out));
    assert!(out.status.success(), "{job_said}\n{err}");
    let aimed = format!("exited at the trace's {moment}");
    assert!(job_said.contains(&aimed) && !job_said.contains("no trace announced"), "{job_said}");
    for words in said {
        assert!(err.contains(words), "{words:?} not said:\n{err}");
    }
    Some(logdir)
}

#[test]
fn a_pytorch_job_that_exits_just_before_its_trace_ends_waits_for_it() {
    // Stopped at exit, a trace whose end came before the process was gone killed the job
    // with SIGABRT (Kineto's thread stopped it again, and that throws); the hook now waits
    // the last second out, and Kineto writes the trace.
    let test = "a_pytorch_job_that_exits_just_before_its_trace_ends_waits_for_it";
    let said = ["exited as Kineto's on-demand trace was about to end: waited", "s for it to end and be written"];
    let Some(logdir) = run_torch_exiting_near_its_trace(test, ["end", "-0.7", "2s"], &said) else { return };
    let files = session_files(logdir.path());
    assert!(files.iter().any(|f| f.to_string_lossy().ends_with(".pt.trace.json")), "{files:?}");
    let ops = ok_stdout(mlprof(&["analyze", &logdir.path().display().to_string(), "--tool", "framework_op_stats"]));
    assert!(ops.contains("aten::addmm") || ops.contains("aten::linear"), "{ops}");
}

#[test]
fn a_pytorch_job_that_exits_just_before_its_trace_starts_exits_cleanly() {
    // A trace starting as the process exits leaves PyTorch's profiler state alive at exit
    // (SIGSEGV): the hook waits for the start, then stops the trace, whose end is a minute
    // away.
    let test = "a_pytorch_job_that_exits_just_before_its_trace_starts_exits_cleanly";
    let said = [
        "exited as Kineto's on-demand trace was about to start: waited",
        "exited while Kineto's on-demand trace was recording: stopped it first",
    ];
    run_torch_exiting_near_its_trace(test, ["start", "-1", "60s"], &said);
}

/// Runs a JAX or TensorFlow loop under `mlprof run` and checks its server was captured.
fn assert_captured_through_the_hook(python: &str, loop_script: &str, framework: &str) {
    let logdir = tempfile::tempdir().expect("temp dir");
    // 3 s: on a loaded machine the framework's server comes up late and its first step
    // compiles for a second or more inside the capture (1 s once held no whole step).
    let out = run(logdir.path(), &["--delay", "2s", "--duration", "3s"], &[python, &script(loop_script), "15"]);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(err.contains(&format!("mlprof: {framework} ")) && err.contains("profiler server on 127.0.0.1:"), "{err}");
    let files = session_files(logdir.path());
    assert!(
        files.iter().any(|f| f.to_string_lossy().ends_with(".xplane.pb") && f.metadata().is_ok_and(|m| m.len() > 0)),
        "{files:?}\n{err}"
    );
    let info = ok_stdout(mlprof(&["info", &logdir.path().display().to_string()]));
    assert!(info.contains("/host:CPU"), "{info}");
    assert!(!err.contains("start-up hook:"), "the hook reported a problem: {err}");
    // The loop has no step markers: its steps are the repeated executions of its step.
    let (steps, source) = peers::overview_steps(logdir.path());
    assert!(steps.len() >= 3, "{} steps in 3 s of a millisecond loop: {source}", steps.len());
    assert!(source.contains("repeated executions of"), "{source}");
}

#[test]
fn a_plain_jax_loop_is_captured_through_the_start_up_hook() {
    let Some(python) = peers::python("MLPROF_JAX_PYTHON", "a_plain_jax_loop_is_captured_through_the_start_up_hook")
    else {
        return;
    };
    assert_captured_through_the_hook(&python, "jax_plain_loop.py", "JAX");
}

#[test]
fn a_plain_tensorflow_loop_is_captured_through_the_start_up_hook() {
    let Some(python) =
        peers::python("MLPROF_TF_PYTHON", "a_plain_tensorflow_loop_is_captured_through_the_start_up_hook")
    else {
        return;
    };
    assert_captured_through_the_hook(&python, "tf_plain_loop.py", "TensorFlow");
}

#[test]
fn the_exit_code_is_the_jobs() {
    let logdir = tempfile::tempdir().expect("temp dir");
    let out = run(logdir.path(), &[], &["python3", "-c", "import sys; print('job ran'); sys.exit(3)"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "job ran\n");
    let err = stderr(&out);
    assert!(err.contains("mlprof: the job exited with code 3"), "{err}");
    assert!(err.contains("no framework trace"), "{err}");
    assert!(!err.contains("error"), "a job's failure is not mlprof's: {err}");

    let killed = run(logdir.path(), &[], &["python3", "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"]);
    assert_eq!(killed.status.code(), Some(137), "{}", stderr(&killed));
    assert!(stderr(&killed).contains("was killed by signal 9 (SIGKILL)"));

    let fine = run(logdir.path(), &[], &["python3", "-c", "pass"]);
    assert_eq!(fine.status.code(), Some(0));
}

#[test]
fn a_command_that_cannot_start_is_one_line_with_the_shells_code() {
    let logdir = tempfile::tempdir().expect("temp dir");
    let out = run(logdir.path(), &[], &["/nonexistent/train"]);
    assert_eq!(out.status.code(), Some(127));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("mlprof: error: cannot run /nonexistent/train: "), "{err}");
    let usage = mlprof(&["run", "--duration", "0", "--", "python3"]);
    assert_eq!(usage.status.code(), Some(2));
}

#[test]
fn sigterm_sent_to_mlprof_reaches_the_job() {
    let logdir = tempfile::tempdir().expect("temp dir");
    let job = "import signal, sys, time\n\
               signal.signal(signal.SIGTERM, lambda *a: (print('job got SIGTERM', flush=True), sys.exit(5)))\n\
               print('ready', flush=True)\n\
               time.sleep(60)";
    let mut child = Command::new(env!("CARGO_BIN_EXE_mlprof"))
        .args(["run", "--logdir", &logdir.path().display().to_string(), "--", "python3", "-c", job])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("mlprof starts");
    let mut stdout = std::io::BufReader::new(child.stdout.take().expect("piped"));
    let mut line = String::new();
    std::io::BufRead::read_line(&mut stdout, &mut line).expect("the job starts");
    assert_eq!(line, "ready\n");
    let pid = i32::try_from(child.id()).expect("a pid");
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let status = child.wait().expect("mlprof ends");
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).expect("stdout");
    assert_eq!(rest, "job got SIGTERM\n");
    assert_eq!(status.code(), Some(5));
}

#[test]
fn the_jobs_own_sitecustomize_still_runs_and_the_hook_leaves_sys_path_alone() {
    let logdir = tempfile::tempdir().expect("temp dir");
    let own = tempfile::tempdir().expect("temp dir");
    std::fs::write(own.path().join("sitecustomize.py"), "import os\nos.environ['OWN_SITECUSTOMIZE'] = 'ran'\n")
        .expect("write");
    let job =
        "import os, sys\nprint(os.environ.get('OWN_SITECUSTOMIZE'))\nprint(any('mlprof-run-' in p for p in sys.path))";
    let out = Command::new(env!("CARGO_BIN_EXE_mlprof"))
        .args(["run", "--logdir", &logdir.path().display().to_string(), "--", "python3", "-c", job])
        .env("PYTHONPATH", own.path())
        .output()
        .expect("mlprof runs");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ran\nFalse\n");
}

#[test]
fn a_hook_that_fails_inside_the_job_is_reported_and_the_job_runs_on() {
    let logdir = tempfile::tempdir().expect("temp dir");
    // A package named jax without a profiler: starting the server fails inside the job.
    let fake = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir(fake.path().join("jax")).expect("mkdir");
    std::fs::write(fake.path().join("jax/__init__.py"), "__version__ = '0.0'\n").expect("write");
    let job = "import time, jax\ntime.sleep(1.5)\nprint('job finished')";
    let out = Command::new(env!("CARGO_BIN_EXE_mlprof"))
        .args(["run", "--logdir", &logdir.path().display().to_string(), "--", "python3", "-c", job])
        .env("PYTHONPATH", fake.path())
        .output()
        .expect("mlprof runs");
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "job finished\n");
    assert!(err.contains("mlprof: start-up hook: pid ") && err.contains("starting the jax profiler server"), "{err}");
    // No framework trace: only the samples of the job's Python stacks.
    let files = session_files(logdir.path());
    assert!(files.iter().all(|f| f.to_string_lossy().ends_with("_python.xplane.pb")), "{files:?}");
}

#[test]
fn without_a_private_directory_the_job_still_runs() {
    let logdir = tempfile::tempdir().expect("temp dir");
    let out = Command::new(env!("CARGO_BIN_EXE_mlprof"))
        .args(["run", "--logdir", &logdir.path().display().to_string(), "--", "python3", "-c", "print('job ran')"])
        .env("TMPDIR", logdir.path().join("missing"))
        .output()
        .expect("mlprof runs");
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "job ran\n");
    assert!(err.starts_with("mlprof: tracing is off: cannot make a private directory in "), "{err}");
    // Sampling needs no private directory: what it says follows, and nothing else.
    assert!(
        err.lines().skip(1).all(|l| l.starts_with("mlprof: sampling")
            || l.starts_with("mlprof: no GPU counters")
            || l.starts_with("mlprof: no native stacks")
            || l.starts_with("mlprof: GPU counters")
            || l.starts_with("mlprof: pid ")
            || l.starts_with("mlprof: own cost: ")
            || l.starts_with("mlprof: analyze with")),
        "{err}"
    );
}

#[test]
fn without_kinetos_on_demand_mode_pytorch_is_traced_through_the_start_up_hook() {
    let test = "without_kinetos_on_demand_mode_pytorch_is_traced_through_the_start_up_hook";
    let Some(python) = peers::python("MLPROF_TORCH_PYTHON", test) else { return };
    let logdir = tempfile::tempdir().expect("temp dir");
    // MLPROF_PYTORCH_TRACER=hook: no Kineto socket, as with a PyTorch build without the
    // daemon mode; the hook's torch.profiler records instead.
    let out = Command::new(env!("CARGO_BIN_EXE_mlprof"))
        .args(["run", "--logdir", &logdir.path().display().to_string(), "--duration", "1s", "--"])
        .args([python.as_str(), &script("torch_plain_loop.py"), "25"])
        .env("MLPROF_PYTORCH_TRACER", "hook")
        .output()
        .expect("mlprof runs");
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("traced with torch.profiler through the start-up hook (MLPROF_PYTORCH_TRACER=hook)"), "{err}");
    assert!(err.contains("tracing 1000 ms (torch.profiler)"), "{err}");
    let files = session_files(logdir.path());
    let traces: Vec<&PathBuf> = files.iter().filter(|f| f.to_string_lossy().ends_with(".pt.trace.json")).collect();
    assert_eq!(traces.len(), 1, "{files:?}\n{err}");
    // Every thread's ops, as with Kineto on demand.
    let trace: Value = serde_json::from_slice(&std::fs::read(traces[0]).expect("the trace")).expect("JSON");
    let events = trace["traceEvents"].as_array().expect("events");
    let mut threads: Vec<String> =
        events.iter().filter(|e| e["cat"] == "cpu_op").map(|e| e["tid"].to_string()).collect();
    threads.sort();
    threads.dedup();
    assert!(threads.len() >= 2, "cpu_op events on {} thread(s) only", threads.len());
    let (steps, source) = peers::overview_steps(logdir.path());
    assert!(steps.len() >= 3, "{} steps in 1 s of a millisecond loop: {source}", steps.len());
    assert!(!err.contains("start-up hook:"), "the hook reported a problem: {err}");
}

/// Runs `python -c job` under `mlprof run --duration 1s` with `env`; returns its output.
fn run_python_job(python: &str, job: &str, env: &[(&str, &str)]) -> Output {
    let logdir = tempfile::tempdir().expect("temp dir");
    let mut command = Command::new(env!("CARGO_BIN_EXE_mlprof"));
    command.args(["run", "--logdir", &logdir.path().display().to_string(), "--duration", "1s", "--"]);
    command.args([python, "-c", job]).env_remove("TEARDOWN_CUPTI").envs(env.iter().copied());
    command.output().expect("mlprof runs")
}

#[test]
fn pytorch_jobs_detach_cupti_after_their_traces() {
    let test = "pytorch_jobs_detach_cupti_after_their_traces";
    let Some(python) = peers::python("MLPROF_TORCH_PYTHON", test) else { return };
    // Kineto leaves CUPTI attached after a trace (and the job's steps slower until it
    // exits) unless TEARDOWN_CUPTI=1, which the hook sets once torch (a CUDA 13 build
    // here) is imported.
    let job = "import os, torch\nprint(torch.version.cuda, os.environ.get('TEARDOWN_CUPTI'))";
    let out = run_python_job(&python, job, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let said = String::from_utf8_lossy(&out.stdout);
    let cuda = said.split_whitespace().next().unwrap_or_default().to_string();
    assert!(cuda.starts_with("13.") || cuda.starts_with("12."), "a CUDA build of PyTorch is expected: {said}");
    assert_eq!(said.split_whitespace().last(), Some("1"), "{said}");

    // A job that sets it itself keeps its choice, and on a GPU (a mapped file named as
    // NVIDIA's driver library stands for one) is told what it costs once a trace starts
    // (the hook's torch.profiler here, which detaches CUPTI the same way); not elsewhere.
    let cupti_stays = "Kineto keeps CUPTI attached after this trace (TEARDOWN_CUPTI=0 in the job's environment), \
                       so its steps may stay slower until it exits";
    let dir = tempfile::tempdir().expect("temp dir");
    let driver = peers::fake_driver(dir.path());
    for prelude in [peers::python_mapping(&driver), String::new()] {
        let job = format!("{prelude}import os, time, torch\nprint(os.environ.get('TEARDOWN_CUPTI'))\ntime.sleep(9)");
        let out = run_python_job(&python, &job, &[("TEARDOWN_CUPTI", "0"), ("MLPROF_PYTORCH_TRACER", "hook")]);
        let err = stderr(&out);
        assert!(out.status.success(), "{err}");
        assert_eq!(String::from_utf8_lossy(&out.stdout), "0\n");
        assert!(err.contains("tracing 1000 ms (torch.profiler)"), "{err}");
        assert_eq!(err.contains(cupti_stays), !prelude.is_empty(), "on a GPU: {}\n{err}", !prelude.is_empty());
    }
}

#[test]
fn cupti_stays_attached_where_pytorch_or_its_cuda_is_too_old_to_detach_it() {
    // PyTorch keeps CUPTI attached for CUDA graphs before CUDA 12.6, where detaching it
    // could crash them, and before PyTorch 2.11 Kineto could crash detaching it between
    // back-to-back traces: the hook leaves those alone. A package named torch with only
    // versions stands in for each build.
    let cases = [
        ("2.11.0+cu124", "'12.4'", "None"),
        ("2.11.0+cu126", "'12.6'", "1"),
        ("2.12.1", "'13.0'", "1"),
        ("2.10.1+cu128", "'12.8'", "None"),
        ("2.11.0+cpu", "None", "None"),
        ("2.11.0", "'x.y'", "None"),
        ("nightly", "'13.0'", "None"),
    ];
    for (torch, cuda, expected) in cases {
        let fake = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir(fake.path().join("torch")).expect("mkdir");
        let init = format!("__version__ = '{torch}'\nfrom . import version\n");
        std::fs::write(fake.path().join("torch/__init__.py"), init).expect("write");
        std::fs::write(fake.path().join("torch/version.py"), format!("cuda = {cuda}\n")).expect("write");
        let job = "import os, torch\nprint(os.environ.get('TEARDOWN_CUPTI'))";
        let path = fake.path().display().to_string();
        let out = run_python_job("python3", job, &[("PYTHONPATH", &path), ("MLPROF_PYTORCH_TRACER", "hook")]);
        let err = stderr(&out);
        assert!(out.status.success(), "{err}");
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim_end(), expected, "PyTorch {torch}, CUDA {cuda}: {err}");
        assert!(!err.contains("start-up hook:"), "the hook reported a problem: {err}");
    }
}
