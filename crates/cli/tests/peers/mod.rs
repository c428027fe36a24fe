//! Real peer processes for the capture tests: a Python interpreter named by an
//! environment variable (`.ci/run` creates the venvs and sets them), and processes that
//! announce their profiler address on their first stdout line and are killed on drop;
//! and the steps `mlprof analyze` finds in what was captured from them.
//! Each test file uses only some of these helpers.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::Value;

/// Says that `test` skipped what it checks, and why, as `SKIPPED test: reason` on stderr.
/// Written to stderr directly: the test harness captures `eprintln!` and shows it only
/// for failing tests, so a skip would otherwise read as a plain `ok`.
pub fn skipped(test: &str, reason: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "SKIPPED {test}: {reason}");
}

/// The interpreter `var` names, or `None` (the test then says so and passes) when it is
/// unset, unless `MLPROF_REQUIRE_PEERS` is set (as `.ci/run` does): then it fails.
pub fn python(var: &str, test: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(python) => Some(python),
        Err(_) => {
            assert!(
                std::env::var_os("MLPROF_REQUIRE_PEERS").is_none(),
                "{test}: {var} is not set but MLPROF_REQUIRE_PEERS is"
            );
            skipped(test, &format!("{var} is not set; .ci/run sets it"));
            None
        }
    }
}

/// A script under the repository's `tests/peers/`.
pub fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/peers").join(name)
}

/// A running peer that serves the profiler at `address`; killed when dropped.
pub struct Peer {
    child: Child,
    /// `host:port` from the peer's `listening on host:port` line.
    pub address: String,
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Peer {
    /// The peer's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Starts `program args…` and waits for its first line, `listening on host:port`.
    pub fn start(program: impl AsRef<std::ffi::OsStr>, args: &[&str]) -> Peer {
        let mut child = Command::new(program)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the peer starts");
        let stdout = child.stdout.take().expect("piped stdout");
        let mut first = String::new();
        BufReader::new(stdout).read_line(&mut first).expect("the peer prints its address");
        let address = first.trim().strip_prefix("listening on ").unwrap_or_default().to_string();
        let peer = Peer { child, address };
        assert!(!peer.address.is_empty(), "unexpected first line from the peer: {first:?}");
        peer
    }
}

/// The `profiled_training` example binary, built by `cargo test` (examples are compiled
/// with the tests) or `cargo build -p mlprof --examples`, beside this test's `deps/`.
pub fn example_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("the test knows its path");
    let profile_dir = exe.parent().and_then(Path::parent).expect("target/<profile>/deps/<test>");
    let path = profile_dir.join("examples").join(format!("profiled_training{}", std::env::consts::EXE_SUFFIX));
    assert!(path.exists(), "{} is missing: build it with `cargo build -p mlprof --examples`", path.display());
    path
}

/// Starts the `profiled_training` example on a free loopback port for up to two minutes.
pub fn start_example() -> Peer {
    Peer::start(example_binary(), &["--port", "0", "--seconds", "120"])
}

/// The overview page of `logdir` as JSON: its step names and how they were found. With
/// more than 5 steps the overview leaves out the first and the last, as XProf's does;
/// [`every_step`] has them all.
pub fn overview_steps(logdir: &Path) -> (Vec<String>, String) {
    let json = analyze_json(logdir, "overview_page");
    let steps = &json["tools"]["overview_page"]["steps"];
    (step_names(&steps["steps"]), steps["step_source"].as_str().unwrap_or_default().to_string())
}

/// Every step of `logdir` (`--tool steps`, none left out), host after host, and how
/// they were found.
pub fn every_step(logdir: &Path) -> (Vec<String>, String) {
    let json = analyze_json(logdir, "steps");
    let hosts = json["hosts"].as_array().expect("a host list");
    let names = hosts.iter().flat_map(|host| step_names(&host["steps"])).collect();
    (names, json["step_source"].as_str().unwrap_or_default().to_string())
}

/// What `path` holds, line by line (`mlprof -v info`), for a failure's message; empty
/// when it cannot be read.
pub fn what_it_holds(path: &Path) -> String {
    Command::new(env!("CARGO_BIN_EXE_mlprof"))
        .args(["-v".as_ref(), "info".as_ref(), path.as_os_str()])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
}

/// The `step_name` of each step in a JSON step list.
fn step_names(steps: &Value) -> Vec<String> {
    let steps = steps.as_array().expect("a step list");
    steps.iter().map(|s| s["step_name"].as_str().unwrap_or_default().to_string()).collect()
}

/// The `python` tool's JSON for `logdir` (`mlprof analyze LOGDIR --tool python`).
pub fn python_tool(logdir: &Path) -> Value {
    analyze_json(logdir, "python")
}

/// Reads `stderr` (of `mlprof run` or `mlprof attach`) to its end, stopping the first
/// PyTorch process whose Kineto trace it says was asked for: for 3 s, half a second
/// after the line (Kineto has read its config by then). Kineto's profiler thread then
/// takes the config up too late and drops the trace, as it does now and then on a busy
/// machine. Returns what was read, and whether a process was stopped.
pub fn stop_the_first_traced_process(stderr: impl std::io::Read) -> (String, bool) {
    let mut said = String::new();
    let mut stopped = false;
    for line in BufReader::new(stderr).lines() {
        let line = line.expect("a line of mlprof's");
        said.push_str(&line);
        said.push('\n');
        let by_run = line.strip_prefix("mlprof: PyTorch process ").and_then(|rest| rest.split_once(": tracing "));
        let by_attach = line.strip_prefix("mlprof: pid ").and_then(|rest| rest.split_once(": PyTorch: tracing "));
        let Some(pid) = by_run.or(by_attach).and_then(|(pid, _)| pid.parse::<i32>().ok()).filter(|_| !stopped) else {
            continue;
        };
        stopped = true;
        std::thread::sleep(std::time::Duration::from_millis(500));
        // SAFETY: kill(2) on a job the test started; it is continued below.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0, "the job stopped");
        std::thread::sleep(std::time::Duration::from_secs(3));
        // SAFETY: as above.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGCONT) }, 0, "the job continued");
    }
    (said, stopped)
}

/// How many child processes process `pid` has, from every thread's `children` list (0
/// once it is gone).
pub fn children(pid: u32) -> usize {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return 0 };
    let lists = tasks.flatten().map(|task| std::fs::read_to_string(task.path().join("children")).unwrap_or_default());
    lists.map(|list| list.split_whitespace().count()).sum()
}

/// What the Python threads of `logdir`'s capture were doing, in one line for a failure's
/// message: the `python` tool's headline ("Most time: …") and its five busiest functions.
pub fn python_summary(logdir: &Path) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_mlprof"))
        .args(["analyze".as_ref(), logdir.as_os_str(), "--tool".as_ref(), "python".as_ref()])
        .output()
        .expect("mlprof runs");
    let text = String::from_utf8_lossy(&out.stdout);
    let headline = text.lines().find(|line| line.starts_with("Most time:")).unwrap_or("no Python samples");
    let table = text.lines().skip_while(|line| !line.starts_with("---")).skip(1).take(5);
    let busiest = table.map(|row| row.split("  ").next().unwrap_or_default().trim()).collect::<Vec<_>>();
    format!("{headline} Busiest: {}", busiest.join(", "))
}

/// `mlprof analyze LOGDIR --tool TOOL --format json`, which must succeed, as JSON.
fn analyze_json(logdir: &Path, tool: &str) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_mlprof"))
        .args(["analyze", &logdir.display().to_string(), "--tool", tool, "--format", "json"])
        .output()
        .expect("mlprof runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("JSON output")
}

/// The pids whose threads the `python` tool's JSON has samples of (from the thread
/// names, `MainThread (pid 7, tid 7)`).
pub fn sampled_pids(python_tool: &Value) -> std::collections::HashSet<String> {
    python_tool["threads"]
        .as_array()
        .expect("threads")
        .iter()
        .filter_map(|t| t["thread"].as_str()?.split("(pid ").nth(1)?.split(',').next().map(str::to_string))
        .collect()
}

/// Builds the mock NVML (crates/run/tests/nvml/mock_nvml.c) in its normal mode; `None`
/// (after saying so) without a C compiler outside CI.
pub fn mock_nvml(dir: &Path, test: &str) -> Option<PathBuf> {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../run/tests/nvml/mock_nvml.c");
    let library = dir.join("libnvidia-ml.so.1");
    let out = Command::new("cc")
        .args(["-std=c11", "-O1", "-shared", "-fPIC", "-DMOCK_MODE=MODE_OK", "-o"])
        .arg(&library)
        .arg(&source)
        .output();
    match out {
        Ok(out) => {
            assert!(out.status.success(), "cc: {}", String::from_utf8_lossy(&out.stderr));
            Some(library)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if let Some(var) = ["MLPROF_REQUIRE_PEERS", "CI"].into_iter().find(|v| std::env::var_os(v).is_some()) {
                panic!("{test}: no C compiler (cc) to build the mock NVML, but {var} is set");
            }
            skipped(test, "no C compiler (cc) to build the mock NVML");
            None
        }
        Err(e) => panic!("{test}: cc: {e}"),
    }
}

/// A file named as NVIDIA's driver library (`libcuda.so.1`) in `dir`: a process that
/// maps it looks like one that uses a GPU to whoever reads its `/proc/PID/maps`.
pub fn fake_driver(dir: &Path) -> PathBuf {
    let path = dir.join("libcuda.so.1");
    std::fs::write(&path, vec![0u8; 4096]).expect("write the stand-in driver");
    path
}

/// Python lines that map `file` read-only for the rest of the process's life.
pub fn python_mapping(file: &Path) -> String {
    format!(
        "import mmap as _mmap\n_file = open({:?}, 'rb')\n_driver = _mmap.mmap(_file.fileno(), 0, prot=_mmap.PROT_READ)\n",
        file.display().to_string()
    )
}

/// A moto server (an S3 peer) and its address; killed when dropped.
pub struct Moto {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub endpoint: String,
    python: String,
}

/// A moto server of `test`'s own; `None` (the test says it skipped) without
/// `MLPROF_MOTO_PYTHON`, unless `MLPROF_REQUIRE_PEERS` is set.
pub fn moto(test: &str) -> Option<Moto> {
    let python = python("MLPROF_MOTO_PYTHON", test)?;
    let mut child = Command::new(&python)
        .args(["-m", "moto.server", "-H", "127.0.0.1", "-p", "0"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("moto's server starts");
    let mut lines = BufReader::new(child.stderr.take().expect("piped")).lines();
    let endpoint = lines
        .by_ref()
        .map_while(Result::ok)
        .find_map(|line| line.split("Running on ").nth(1).map(|rest| rest.trim().to_string()))
        .expect("moto says where it listens");
    // Its request log is read on (a closed pipe would fail its writes).
    std::thread::spawn(move || lines.for_each(drop));
    Some(Moto { child, endpoint, python })
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Moto {
    /// The `AWS_*` variables that point a client at this server.
    pub fn vars(&self) -> Vec<(String, String)> {
        [
            ("AWS_ENDPOINT_URL", self.endpoint.as_str()),
            ("AWS_ACCESS_KEY_ID", "test"),
            ("AWS_SECRET_ACCESS_KEY", "test"),
            ("AWS_REGION", "us-east-1"),
            ("AWS_ALLOW_HTTP", "true"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }

    /// Runs `code` with `s3`, a boto3 client of this server, defined.
    pub fn boto(&self, code: &str) -> String {
        let script = format!(
            "import boto3, sys\ns3 = boto3.client('s3', endpoint_url={:?}, aws_access_key_id='test', \
             aws_secret_access_key='test', region_name='us-east-1')\n{code}",
            self.endpoint
        );
        let out = Command::new(&self.python).args(["-c", &script]).output().expect("python runs");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Creates bucket `name`.
    pub fn bucket(&self, name: &str) {
        self.boto(&format!("s3.create_bucket(Bucket={name:?})"));
    }

    /// A client of `url` on this server.
    pub fn store(&self, url: &str) -> mlprof_objects::Store {
        let url = mlprof_objects::StoreUrl::parse(url).expect("url");
        mlprof_objects::Store::open_with(&url, self.vars()).expect("opens")
    }
}
