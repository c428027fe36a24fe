//! `mlprof run` samples the job from outside: real `python3` processes with no profiler
//! code, their Python stacks read with py-spy and their counters from `/proc` (and from
//! NVML, here a mock library built by the test), checked with `mlprof analyze --tool
//! python` and `mlprof info`.

use std::path::Path;
use std::process::{Command, Output};

mod common;
mod peers;

use common::ok_stdout;

/// Runs `mlprof run --logdir LOGDIR OPTIONS -- python3 tests/peers/python_hot_loop.py ARGS`
/// with extra environment variables.
fn run_hot_loop(logdir: &Path, options: &[&str], args: &[&str], env: &[(&str, &Path)]) -> Output {
    let script = peers::script("python_hot_loop.py");
    let mut command = Command::new(env!("CARGO_BIN_EXE_mlprof"));
    command.arg("run").arg("--logdir").arg(logdir).args(options).arg("--").arg("python3").arg(script).args(args);
    for (key, value) in env {
        command.env(key, value);
    }
    command.output().expect("mlprof runs")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The function with the most self samples.
fn hottest(tool: &serde_json::Value) -> String {
    tool["lines"][0]["function"].as_str().unwrap_or_default().to_string()
}

#[test]
fn a_plain_python_job_is_sampled_and_its_hot_function_named() {
    let logdir = tempfile::tempdir().expect("temp dir");
    let out = run_hot_loop(logdir.path(), &["--duration", "2s"], &["3"], &[]);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ready\ndone\n", "the job's stdout is its own");
    assert!(err.contains("sampling Python 3.") && err.contains("stacks at 100 Hz"), "{err}");
    assert!(err.contains("_python.xplane.pb"), "{err}");

    let tool = peers::python_tool(logdir.path());
    assert_eq!(hottest(&tool), "hot_spin", "{tool:#}");
    assert!(tool["lines"][0]["short_file"].as_str().is_some_and(|f| f.ends_with("python_hot_loop.py")));
    // 2 s at 100 Hz of 2 threads, less start-up: well over a hundred samples.
    assert!(tool["samples"].as_u64().is_some_and(|n| n > 150), "{}", tool["samples"]);
    let threads: Vec<&str> =
        tool["threads"].as_array().expect("threads").iter().filter_map(|t| t["thread"].as_str()).collect();
    assert!(threads.iter().any(|t| t.starts_with("MainThread (pid ")), "{threads:?}");
    let waiter = tool["threads"]
        .as_array()
        .and_then(|t| t.iter().find(|t| t["thread"].as_str().is_some_and(|n| n.starts_with("waiter "))));
    let waiter = waiter.unwrap_or_else(|| panic!("no waiter thread: {threads:?}"));
    assert!(
        waiter["idle_samples"].as_u64() > Some(waiter["samples"].as_u64().unwrap_or(0) / 2),
        "the waiter sleeps: {waiter}"
    );

    let info = ok_stdout(common::mlprof(&["info", &logdir.path().display().to_string()]));
    assert!(info.contains("/host:python") && info.contains("/host:counters"), "{info}");
    let table = ok_stdout(common::mlprof(&["analyze", &logdir.path().display().to_string(), "--tool", "python"]));
    assert!(table.contains("Most time: hot_spin at python_hot_loop.py:"), "{table}");
}

#[test]
fn forked_workers_are_sampled_too() {
    let logdir = tempfile::tempdir().expect("temp dir");
    let out = run_hot_loop(logdir.path(), &["--duration", "2s"], &["4", "workers"], &[]);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(err.matches("stacks at 100 Hz").count() >= 3, "the job and its two workers: {err}");
    let tool = peers::python_tool(logdir.path());
    let functions: Vec<&str> =
        tool["lines"].as_array().expect("lines").iter().filter_map(|l| l["function"].as_str()).collect();
    assert!(functions.contains(&"worker_spin"), "{functions:?}");
    let pids = peers::sampled_pids(&tool);
    assert!(pids.len() >= 3, "threads of {pids:?}");
}

#[test]
fn stack_sampling_can_be_turned_off_and_counters_remain() {
    let logdir = tempfile::tempdir().expect("temp dir");
    let out = run_hot_loop(logdir.path(), &["--duration", "1s", "--sample-hz", "0"], &["2"], &[]);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(!err.contains("stacks at"), "{err}");
    let info = ok_stdout(common::mlprof(&["info", &logdir.path().display().to_string()]));
    assert!(info.contains("/host:counters") && !info.contains("/host:python"), "{info}");
    let out = common::mlprof(&["analyze", &logdir.path().display().to_string(), "--tool", "python"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("no sampled Python stacks"), "{}", stderr(&out));
}

#[test]
fn without_nvml_the_run_says_so_in_one_line() {
    let logdir = tempfile::tempdir().expect("temp dir");
    let missing = logdir.path().join("no-such-libnvidia-ml.so.1");
    let out = run_hot_loop(logdir.path(), &["--duration", "1s"], &["1.5"], &[("MLPROF_NVML_PATH", &missing)]);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    let lines: Vec<&str> = err.lines().filter(|l| l.contains("GPU counters")).collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(lines[0].contains("no GPU counters: no NVIDIA driver:") && lines[0].contains("not found"), "{err}");
}

#[test]
fn gpu_counters_from_nvml_land_on_the_counters_plane() {
    let test = "gpu_counters_from_nvml_land_on_the_counters_plane";
    let logdir = tempfile::tempdir().expect("temp dir");
    let Some(library) = peers::mock_nvml(logdir.path(), test) else { return };
    let out = run_hot_loop(logdir.path(), &["--duration", "1s"], &["1.5"], &[("MLPROF_NVML_PATH", &library)]);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("GPU counters through NVML: 0 "), "{err}");
    let dir = logdir.path().join("chrome.json");
    let sessions = logdir.path().display().to_string();
    ok_stdout(common::mlprof(&["convert", "--to", "chrome-json", &sessions, &dir.display().to_string()]));
    let trace: serde_json::Value = serde_json::from_slice(&std::fs::read(&dir).expect("the trace")).expect("JSON");
    // Counter events (ph C) named by their line and counter: Perfetto draws them as tracks.
    let names: std::collections::HashSet<&str> = trace["traceEvents"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["ph"] == "C")
        .filter_map(|e| e["name"].as_str())
        .collect();
    for counter in ["GPU utilization (%)", "GPU memory used (MiB)", "SM clock (MHz)", "Power (W)"] {
        assert!(names.contains(format!("GPU 0: {counter}").as_str()), "no {counter} in {names:?}");
    }
    assert!(names.iter().any(|n| n.starts_with("python3 (pid ") && n.ends_with(": CPU (%)")), "{names:?}");
}

/// A job burning CPU in C (OpenSSL's PBKDF2 and zlib, without the GIL) for 7 s, so two
/// of native sampling's bursts (1 s in every 5 s) fall in it: the kernel's
/// samples name the functions, and the `python` tool's native section lists them. Where
/// the kernel refuses `perf_event_open` the run says so in one line and the test says
/// SKIPPED, unless `CI` or `MLPROF_REQUIRE_PEERS` is set.
#[test]
fn native_stacks_name_the_c_functions_a_job_spends_its_time_in() {
    let test = "native_stacks_name_the_c_functions_a_job_spends_its_time_in";
    let logdir = tempfile::tempdir().expect("temp dir");
    let job = "import hashlib, time, zlib\n\
               data = bytes(range(256)) * 4000\n\
               end = time.time() + 7\n\
               while time.time() < end:\n\
               \x20   hashlib.pbkdf2_hmac('sha256', b'pw', b'salt', 20000)\n\
               \x20   zlib.compress(data, 9)\n";
    let out = Command::new(env!("CARGO_BIN_EXE_mlprof"))
        .arg("run")
        .arg("--logdir")
        .arg(logdir.path())
        .args(["--duration", "2s", "--", "python3", "-c", job])
        .output()
        .expect("mlprof runs");
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    if let Some(refused) = err.lines().find(|l| l.contains("no native stacks:")) {
        if let Some(var) = ["MLPROF_REQUIRE_PEERS", "CI"].into_iter().find(|v| std::env::var_os(v).is_some()) {
            panic!("{test}: the kernel refused native sampling, but {var} is set: {refused}");
        }
        peers::skipped(test, refused);
        return;
    }
    assert_eq!(err.matches("sampling native stacks of every thread at 100 Hz").count(), 1, "{err}");
    assert!(err.contains("native stack samples"), "{err}");

    let tool = peers::python_tool(logdir.path());
    assert!(tool["native_samples"].as_u64().is_some_and(|n| n > 50), "{}", tool["native_samples"]);
    let rows = tool["native"].as_array().expect("native rows");
    let named: Vec<(&str, &str)> = rows
        .iter()
        .filter(|r| r["self_samples"].as_u64() > Some(0))
        .filter_map(|r| Some((r["function"].as_str()?, r["module"].as_str()?)))
        .collect();
    // The libraries doing the work: OpenSSL's and zlib's, or where an interpreter built
    // with them linked in has them (its extension modules, libpython).
    let in_c = |module: &str| {
        ["libcrypto", "libz", "_hashlib", "zlib", "libpython", "python"].iter().any(|m| module.starts_with(m))
    };
    assert!(named.iter().any(|&(function, module)| in_c(module) && !function.contains("+0x")), "{named:?}");
    assert!(named.iter().take(5).any(|&(_, module)| in_c(module)), "the top functions do the work: {named:?}");

    let table = ok_stdout(common::mlprof(&["analyze", &logdir.path().display().to_string(), "--tool", "python"]));
    assert!(table.contains("## Native code by self samples"), "{table}");
    let info = ok_stdout(common::mlprof(&["info", &logdir.path().display().to_string()]));
    assert!(info.contains("/host:native"), "{info}");
}

#[test]
fn code_compiled_anew_at_the_addresses_of_dropped_code_is_named_by_what_it_is() {
    // mlprof's py-spy reads each code object's names once (vendor/py-spy/MLPROF_PATCH.md);
    // this job builds a new function every 20 ms where the last one was, so names kept by
    // address alone would stay those of the first two phases.
    let logdir = tempfile::tempdir().expect("temp dir");
    let script = peers::script("python_fresh_code.py");
    let out = common::mlprof(&[
        "run",
        "--logdir",
        &logdir.path().display().to_string(),
        "--duration",
        "3s",
        "--",
        "python3",
        &script.display().to_string(),
        "4",
    ]);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    let tool = peers::python_tool(logdir.path());
    let mut phases = std::collections::BTreeSet::new();
    for line in tool["lines"].as_array().expect("lines") {
        let Some(k) = line["function"].as_str().and_then(|f| f.strip_prefix("phase_")) else { continue };
        let k: u64 = k.parse().expect("phase_K");
        assert_eq!(line["short_file"], format!("<phase_{k}>"), "{line}");
        assert!([k + 3, k + 4].contains(&line["line"].as_u64().unwrap_or(0)), "{line}");
        phases.insert(k);
    }
    assert!(phases.len() >= 7, "9 phases of 20 ms ran in turn for 3 s, sampled: {phases:?}\n{tool:#}");
}
