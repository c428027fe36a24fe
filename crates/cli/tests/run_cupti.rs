//! `mlprof run` with `mlprof-inject` and no GPU: a mock libcupti and a fake CUDA program
//! (`tests/cupti/mock_cupti.c`, built here with the C compiler) stand in for CUPTI and
//! the driver. The fake program loads the injection as the driver does and replays
//! records laid out as CUPTI 13 lays them out; the test reads the XSpace that `mlprof
//! run` wrote. What the mock cannot show (real CUPTI, real kernels) is checked on a GPU
//! machine: `scripts/gpu_checks/`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use mlprof_cupti::layout;
use mlprof_cupti::records::build;
use mlprof_model::{Host, Plane};

mod common;

use common::mlprof;

/// The mock CUPTI library and the fake CUDA program, built once per test in `dir`.
struct Mock {
    library: PathBuf,
    job: PathBuf,
}

fn build_mock(dir: &Path) -> Mock {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cupti/mock_cupti.c");
    let library = dir.join("libmock_cupti.so");
    let job = dir.join("fake_cuda_job");
    let compile = |args: &[&str]| {
        let out = Command::new("cc").args(args).output().expect("a C compiler (cc) runs");
        assert!(out.status.success(), "cc {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    let source = source.to_str().expect("UTF-8 path");
    compile(&[
        "-std=c11",
        "-O1",
        "-shared",
        "-fPIC",
        "-DMOCK_LIBRARY",
        "-o",
        library.to_str().unwrap(),
        source,
        "-lpthread",
    ]);
    compile(&["-std=c11", "-O1", "-DMOCK_JOB", "-o", job.to_str().unwrap(), source, "-ldl"]);
    Mock { library, job }
}

/// A script of records for the fake program (the format in mock_cupti.c).
#[derive(Default)]
struct Script(Vec<u8>);

impl Script {
    fn record(&mut self, record: Vec<u8>, name: Option<(usize, &str)>, times: &[usize]) {
        let put = |v: u32, out: &mut Vec<u8>| out.extend_from_slice(&v.to_le_bytes());
        put(record.len() as u32, &mut self.0);
        put(name.map_or(u32::MAX, |(at, _)| at as u32), &mut self.0);
        put(name.map_or(0, |(_, n)| n.len() as u32), &mut self.0);
        put(times.len() as u32, &mut self.0);
        for &t in times {
            put(t as u32, &mut self.0);
        }
        self.0.extend_from_slice(&record);
        if let Some((_, n)) = name {
            self.0.extend_from_slice(n.as_bytes());
        }
    }

    fn pause_ms(&mut self, ms: u32) {
        for v in [0, 0, ms, 0] {
            self.0.extend_from_slice(&v.to_le_bytes());
        }
    }

    /// `kernels` kernels (each launched by a runtime API call on thread 77) on stream 7,
    /// 2 µs each, 1 µs apart, a copy every 100 kernels; times from 1 ms after the start.
    fn training_like(kernels: u32) -> Script {
        let mut s = Script::default();
        for i in 0..kernels {
            let t = 1_000_000 + u64::from(i) * 3_000;
            let correlation = i * 2 + 1;
            let api = build::runtime_api(211, t, t + 1_000, 4242, 77, correlation);
            s.record(api, None, &[layout::api::START, layout::api::END]);
            let name = if i % 2 == 0 { "_Z6vecAddPfS_S_i" } else { "ampere_sgemm_128x64_nn" };
            let kernel = build::kernel(t + 1_000, t + 3_000, 7, correlation, 0);
            s.record(kernel, Some((layout::kernel::NAME, name)), &[layout::kernel::START, layout::kernel::END]);
            if i % 100 == 0 {
                let copy = build::memcpy(layout::MEMCPY_HTOD, 1 << 20, t + 500, t + 900, 9, correlation + 1);
                s.record(copy, None, &[layout::memcpy::START, layout::memcpy::END]);
            }
        }
        s
    }

    fn save(&self, dir: &Path) -> PathBuf {
        let path = dir.join("script.bin");
        std::fs::write(&path, &self.0).expect("write the script");
        path
    }
}

/// Runs the fake CUDA program with `script` under `mlprof run OPTIONS`.
fn run_fake_job(dir: &Path, mock: &Mock, options: &[&str], script: &Path, env: &[(&str, &str)]) -> Output {
    let logdir = dir.join("logs");
    let mut command = Command::new(env!("CARGO_BIN_EXE_mlprof"));
    command.args(["run", "--logdir", logdir.to_str().unwrap()]).args(options);
    command.arg("--").arg(&mock.job).arg(script);
    command.env("MLPROF_CUPTI_PATH", &mock.library).env_remove("CUDA_INJECTION64_PATH");
    for (k, v) in env {
        command.env(k, v);
    }
    command.output().expect("mlprof runs")
}

/// The XSpace files of GPU activity `mlprof run` wrote, read back (not the samples of
/// the job's processes, `<host>_python.xplane.pb`).
fn written_hosts(dir: &Path) -> Vec<Host> {
    let root = dir.join("logs/plugins/profile");
    let mut hosts = Vec::new();
    for session in std::fs::read_dir(&root).into_iter().flatten().flatten() {
        for file in std::fs::read_dir(session.path()).expect("a session").flatten() {
            let path = file.path();
            let name = path.to_string_lossy();
            if name.ends_with(".xplane.pb") && !name.ends_with("_python.xplane.pb") {
                let bytes = std::fs::read(&path).expect("read the profile");
                hosts.push(
                    mlprof_formats::xspace::read_xspace(&bytes, &path.to_string_lossy(), "h").expect("an XSpace"),
                );
            }
        }
    }
    hosts
}

fn plane<'h>(host: &'h Host, name: &str) -> &'h Plane {
    host.planes.iter().find(|p| p.name == name).unwrap_or_else(|| panic!("no plane {name}"))
}

/// Event names of every line of `plane`, with their counts.
fn event_counts(plane: &Plane) -> std::collections::BTreeMap<String, usize> {
    let mut counts = std::collections::BTreeMap::new();
    for line in &plane.lines {
        for event in line.iter() {
            let name = plane.metadata_of(&event).map(|m| m.name.clone()).unwrap_or_default();
            *counts.entry(name).or_insert(0) += 1;
        }
    }
    counts
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn every_record_of_a_cuda_program_lands_in_an_xspace_xprof_and_mlprof_read() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mock = build_mock(dir.path());
    // 30,000 kernels and their launches: about 9 MB of records, so three 4 MiB buffers
    // and records on both sides of every buffer boundary.
    let mut script = Script::training_like(30_000);
    // The window is 2 s: the program keeps running past it, so the window ends by a
    // stop and a flush, not by the exit.
    script.pause_ms(3_000);
    let script = script.save(dir.path());
    let out = run_fake_job(dir.path(), &mock, &["--duration", "2s"], &script, &[]);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("recording=1 emitted=60300"), "{err}");
    assert!(err.contains("recording GPU activity for 2000 ms from cuInit (CUPTI)"), "{err}");
    assert!(err.contains("30000 kernels, 60 ms of kernel time, 300 copies"), "{err}");
    assert!(!err.contains("ended with the process"), "{err}");

    let hosts = written_hosts(dir.path());
    assert_eq!(hosts.len(), 1, "{err}");
    let gpu = plane(&hosts[0], "/device:GPU:0");
    let names: Vec<&str> = gpu.lines.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["Stream #7(Compute)", "Stream #9(MemcpyH2D)"]);
    let counts = event_counts(gpu);
    assert_eq!(counts.get("vecAdd(float*, float*, float*, int)"), Some(&15_000), "demangled, as XLA names kernels");
    assert_eq!(counts.get("ampere_sgemm_128x64_nn"), Some(&15_000));
    assert_eq!(counts.get("MemcpyH2D"), Some(&300));
    let host_plane = plane(&hosts[0], "/host:CPU");
    assert_eq!(host_plane.lines[0].name, "Host Threads/77");
    assert_eq!(event_counts(host_plane).get("cudaLaunchKernel"), Some(&30_000));

    // mlprof's own tools read it as a GPU profile: every kernel, with XLA's details.
    let logdir = dir.path().join("logs");
    let out = mlprof(&["analyze", logdir.to_str().unwrap(), "--tool", "kernel_stats", "--format", "json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let text = json.to_string();
    assert!(text.contains("vecAdd(float*, float*, float*, int)"), "{text:.2000}");
    assert!(text.contains("15000"), "occurrences of each kernel: {text:.2000}");

    // The profile says mlprof's injection recorded it: advice is worded for a CUDA
    // program, not a framework.
    let out = mlprof(&["advise", logdir.to_str().unwrap(), "--format", "json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let advice: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(advice["framework"], "cuda", "{advice:.1500}");
}

#[test]
fn a_program_that_exits_while_recording_keeps_what_it_flushed_at_exit() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mock = build_mock(dir.path());
    let script = Script::training_like(500).save(dir.path());
    let out = run_fake_job(dir.path(), &mock, &["--duration", "60s"], &script, &[("MOCK_CUPTI_DROPPED", "17")]);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("500 kernels") && err.contains("ended with the process"), "{err}");
    assert!(err.contains("CUPTI dropped 17 activity records"), "{err}");
    let hosts = written_hosts(dir.path());
    assert_eq!(hosts.len(), 1);
    assert!(hosts[0].warnings.iter().any(|w| w.contains("dropped 17")), "{:?}", hosts[0].warnings);
}

#[test]
fn with_another_cupti_subscriber_the_injection_steps_aside_and_the_job_runs() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mock = build_mock(dir.path());
    let script = Script::training_like(10).save(dir.path());
    let out = run_fake_job(dir.path(), &mock, &[], &script, &[("MOCK_CUPTI_SUBSCRIBED", "1")]);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("recording=0 emitted=0"), "nothing enabled: {err}");
    assert!(
        err.contains("mlprof-inject stays out of CUPTI: another tool (CUPTI for Nsight Systems) holds CUPTI"),
        "{err}"
    );
    assert!(written_hosts(dir.path()).is_empty());
}

#[test]
fn garbage_records_are_counted_and_the_rest_kept() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mock = build_mock(dir.path());
    let mut script = Script::training_like(100);
    // A kernel record cut short, and one of a kind mlprof never enables.
    script.record(build::record(layout::KIND_CONCURRENT_KERNEL, 40), None, &[]);
    script.record(build::record(layout::KIND_RUNTIME, 8), None, &[]);
    let script = script.save(dir.path());
    // With a delay, recording starts when mlprof asks (not at cuInit).
    let out = run_fake_job(dir.path(), &mock, &["--delay", "300ms", "--duration", "60s"], &script, &[]);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("recording GPU activity for 60000 ms (CUPTI)"), "{err}");
    assert!(err.contains("100 kernels"), "{err}");
    assert!(err.contains("2 CUPTI records and 0 buffers could not be read"), "{err}");
}

#[test]
fn a_program_that_ends_before_its_window_is_named() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mock = build_mock(dir.path());
    let script = Script::training_like(10).save(dir.path());
    let out = run_fake_job(dir.path(), &mock, &["--delay", "30s"], &script, &[("MOCK_JOB_WAIT_MS", "200")]);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("ended before its trace was due (--delay)"), "{err}");
    assert!(!err.contains("connection failed"), "{err}");
    assert!(written_hosts(dir.path()).is_empty());
}

#[test]
fn a_job_that_never_starts_cuda_gets_one_line_saying_so() {
    let dir = tempfile::tempdir().expect("temp dir");
    let logdir = dir.path().join("logs");
    let out = mlprof(&["run", "--logdir", logdir.to_str().unwrap(), "--", "sh", "-c", "exit 0"]);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("no GPU activity to collect: no process of the job started CUDA"), "{err}");
}

#[test]
fn device_tracer_cupti_records_frameworks_with_the_injection_and_drives_no_framework_tracer() {
    let dir = tempfile::tempdir().expect("temp dir");
    let logdir = dir.path().join("logs");
    let show = "echo daemon=${KINETO_USE_DAEMON:-} frameworks=${MLPROF_INJECT_FRAMEWORKS:-} hook=${MLPROF_RUN_DIR:+on}";
    let out =
        mlprof(&["run", "--logdir", logdir.to_str().unwrap(), "--device-tracer", "cupti", "--", "sh", "-c", show]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "daemon= frameworks=1 hook=");
    let out = mlprof(&["run", "--logdir", logdir.to_str().unwrap(), "--", "sh", "-c", show]);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "daemon=1 frameworks= hook=on");
}

#[test]
fn the_overview_of_a_real_injected_profile_does_not_say_there_is_no_device() {
    // Recorded on an H200 by mlprof-inject (tests/data/README.md): a GPU, but no steps.
    let logdir = common::data_str("xspace/cuda_app_h200_inject/logdir");
    let out = mlprof(&["analyze", &logdir]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(text.contains("Top 10 host ops (no device op in the steps)"), "{text}");
    assert!(text.contains("1 host: vm_558; 1 Nvidia GPU (Hopper) device."), "{text}");
}

#[test]
fn an_injection_chained_to_itself_initialises_once_and_the_job_runs() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mock = build_mock(dir.path());
    let script = Script::training_like(10).save(dir.path());
    // The user's CUDA_INJECTION64_PATH reaches mlprof's own library by another spelling
    // (as a nested `mlprof run` or a symlink would): chaining must not call itself.
    let bin = Path::new(env!("CARGO_BIN_EXE_mlprof")).parent().expect("target directory");
    let same = bin.join("deps/../deps/libmlprof_inject.so");
    assert!(same.is_file(), "{}", same.display());
    let logdir = dir.path().join("logs");
    let out = Command::new(env!("CARGO_BIN_EXE_mlprof"))
        .args(["run", "--logdir", logdir.to_str().unwrap(), "--"])
        .arg(&mock.job)
        .arg(&script)
        .env("MLPROF_CUPTI_PATH", &mock.library)
        .env("CUDA_INJECTION64_PATH", &same)
        .output()
        .expect("mlprof runs");
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("10 kernels"), "{err}");
}

#[test]
fn a_framework_loaded_after_cuda_started_gets_cupti_back() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mock = build_mock(dir.path());
    // Any library whose name says PyTorch's CUDA backend is loaded: a copy of the mock.
    let torch = dir.path().join("libtorch_cuda.so");
    std::fs::copy(&mock.library, &torch).expect("copy");
    let script = Script::training_like(10).save(dir.path());
    let out = run_fake_job(
        dir.path(),
        &mock,
        &["--duration", "60s"],
        &script,
        &[("MOCK_JOB_LOAD_LATE", torch.to_str().unwrap())],
    );
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("PyTorch (Kineto) was loaded after CUDA started"), "{err}");
    assert!(err.contains("gave CUPTI up to its tracer"), "{err}");
    assert!(err.contains("10 kernels"), "what it recorded before is kept: {err}");
}

#[test]
fn a_signal_passed_on_to_a_recording_cuda_program_waits_for_its_flush() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mock = build_mock(dir.path());
    // 300 kernels, then the program waits: its records sit in CUPTI's buffer, which only a
    // forced flush hands back here (MOCK_CUPTI_FORCED_ONLY), until SIGTERM ends it.
    let mut script = Script::training_like(300);
    script.pause_ms(60_000);
    let script = script.save(dir.path());
    let logdir = dir.path().join("logs");
    let child = Command::new(env!("CARGO_BIN_EXE_mlprof"))
        .args(["run", "--logdir", logdir.to_str().expect("UTF-8"), "--duration", "60s", "--"])
        .arg(&mock.job)
        .arg(&script)
        .env("MLPROF_CUPTI_PATH", &mock.library)
        .env("MOCK_CUPTI_FORCED_ONLY", "1")
        .env_remove("CUDA_INJECTION64_PATH")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("mlprof starts");
    // The window starts at cuInit; give the program time to replay its records.
    std::thread::sleep(std::time::Duration::from_secs(3));
    let pid = i32::try_from(child.id()).expect("a pid");
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let out = child.wait_with_output().expect("mlprof ends");
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(128 + libc::SIGTERM), "the job died of the signal: {err}");
    assert!(err.contains("300 kernels"), "the flush before the signal kept them: {err}");
}
