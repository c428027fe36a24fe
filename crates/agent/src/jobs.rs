//! The agent's view of every job on the node, refreshed each tick: who and what each
//! job is (pid tree, command line, user, cgroup, `SLURM_JOB_ID`, Kubernetes pod,
//! framework, GPU use), its light signals (CPU, memory, threads, the Python frames its
//! threads run most, sampled from outside at a low rate; its GPUs' memory and busy share
//! from NVML where a driver is installed), and how a full trace of it can
//! be taken (a profiler server it listens on, Kineto's on-demand mode). A job that exits
//! leaves the view at the next tick.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use mlprof_run::nvml::{GpuReading, Nvml};
use mlprof_run::sampling::store::{Recorded, ThreadState};
use mlprof_run::sampling::{Sampler, SamplerOptions, procfs};
use serde::{Deserialize, Serialize};

use crate::discover::{self, Classifier, Process};
use crate::probe::ProbeView;
use crate::registry::RunView;

/// The window the top Python frames are counted over.
pub const FRAME_WINDOW: Duration = Duration::from_secs(10);
/// How often each job's endpoints (listening ports, Kineto's mode) are looked at again.
const ENDPOINTS_EVERY: Duration = Duration::from_secs(5);
/// How many top frames a job shows.
const TOP_FRAMES: usize = 5;

/// What the agent watches and how.
#[derive(Clone, Copy, Debug)]
pub struct WatchOptions {
    /// Python stack samples per second of each job's threads (0: none).
    pub sample_hz: u32,
    /// Only jobs of this user (`None`: every user's, for an agent running as root).
    pub only_uid: Option<u32>,
}

/// One job, as `/api/jobs` and `mlprof top` show it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct JobView {
    /// The job's topmost process.
    pub pid: u32,
    /// Its processes, the root first.
    pub pids: Vec<u32>,
    /// Its command line, arguments joined by spaces.
    pub command: String,
    /// A short name: the script or program it runs (`train.py`).
    pub name: String,
    /// The user it runs as (a name where `/etc/passwd` has one, else the number).
    pub user: String,
    /// Its control group (`/system.slice/…`, `/kubepods/…`).
    pub cgroup: String,
    /// `SLURM_JOB_ID` from its environment.
    pub slurm_job_id: Option<String>,
    /// The Kubernetes pod it runs in (`HOSTNAME` where `KUBERNETES_SERVICE_HOST` is set).
    pub kubernetes_pod: Option<String>,
    /// The framework it loaded: `pytorch`, `jax`, `tensorflow`.
    pub framework: Option<String>,
    /// Whether it maps NVIDIA's driver library or NVML lists it on a GPU.
    pub uses_gpu: bool,
    /// The GPUs NVML lists its processes on (NVML indices).
    #[serde(default)]
    pub gpus: Vec<u32>,
    /// Device memory its processes hold, bytes, where NVML tells.
    #[serde(default)]
    pub gpu_memory_bytes: Option<u64>,
    /// How busy its GPUs were (the mean of their NVML utilization: the share of the last
    /// sample period in which a kernel ran), percent.
    #[serde(default)]
    pub gpu_busy_percent: Option<f64>,
    /// CPU use of all its processes over the last tick, percent of one core.
    pub cpu_percent: f64,
    /// Resident memory of all its processes, bytes.
    pub rss_bytes: u64,
    /// Threads of all its processes.
    pub threads: u32,
    /// Seconds since the agent first saw it.
    pub seen_for_s: f64,
    /// The Python frames its running threads were in most over the last
    /// [`FRAME_WINDOW`], most first.
    pub top_frames: Vec<FrameShare>,
    /// Python stack samples in that window (every thread, running or not).
    pub samples: u64,
    /// Loopback ports it listens on (a JAX/TensorFlow profiler server among them).
    pub listening_ports: Vec<u16>,
    /// Where its Kineto polls for on-demand traces (`KINETO_USE_DAEMON` set).
    pub kineto_endpoint: Option<String>,
    /// Why its stacks are not sampled, when they are not.
    pub sampling_note: Option<String>,
    /// What the last probe of its framework trace found (steps, their time).
    #[serde(default)]
    pub probe: Option<ProbeView>,
    /// Why the last probe found nothing, when it did not.
    #[serde(default)]
    pub probe_note: Option<String>,
    /// The mean step times of its last probes, oldest first, ms.
    #[serde(default)]
    pub step_history_ms: Vec<f64>,
    /// How much slower its last probe's steps were than the median of the probes before,
    /// percent (negative: faster).
    #[serde(default)]
    pub step_trend_percent: Option<f64>,
    /// The session its last slowdown was captured into.
    #[serde(default)]
    pub slowdown_capture: Option<std::path::PathBuf>,
    /// The `mlprof run --agent` that started it, which records what the agent asks.
    #[serde(default)]
    pub run: Option<RunView>,
    /// Captures of it the agent has saved (asked for, or started by a slowdown).
    #[serde(default)]
    pub captures: u64,
}

impl JobView {
    /// The folder its captures and probes go to: `<name>-<pid>`, the name reduced to
    /// letters, digits, dots and underscores.
    pub fn folder(&self) -> String {
        let name: String =
            self.name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '.' { c } else { '_' }).collect();
        format!("{name}-{}", self.pid)
    }
}

#[cfg(test)]
impl JobView {
    /// A job as the agent shows one, for the views' tests: `train.py` (pid 4242) of user
    /// `ana`, PyTorch on GPU 0 (87 % busy, 512 MiB), 187.25 % CPU, 2.5 GB, 40 threads,
    /// 41.6 % of its running samples in `step (train.py:10)`, a probe of 104 steps of
    /// 9.625 ms (1.2 ms input, 8.425 ms host compute) with 12.4 % waiting for input, and a
    /// trend of +40 %.
    pub(crate) fn example() -> JobView {
        JobView {
            pid: 4242,
            pids: vec![4242],
            command: "python train.py".into(),
            name: "train.py".into(),
            user: "ana".into(),
            cgroup: "/".into(),
            slurm_job_id: None,
            kubernetes_pod: None,
            framework: Some("pytorch".into()),
            uses_gpu: true,
            gpus: vec![0],
            gpu_memory_bytes: Some(512 << 20),
            gpu_busy_percent: Some(87.0),
            cpu_percent: 187.25,
            rss_bytes: 2_500_000_000,
            threads: 40,
            seen_for_s: 5.0,
            top_frames: vec![FrameShare { frame: "step (train.py:10)".into(), percent: 41.6 }],
            samples: 10,
            listening_ports: vec![],
            kineto_endpoint: None,
            sampling_note: None,
            probe: Some(ProbeView {
                steps: 104,
                step_time_ms: 9.625,
                input_percent: 12.4,
                breakdown_ms: vec![("Input".into(), 1.2), ("Host compute".into(), 8.425), ("Output".into(), 0.0)],
                ..Default::default()
            }),
            probe_note: None,
            step_history_ms: vec![6.875, 9.625],
            step_trend_percent: Some(40.0),
            slowdown_capture: None,
            run: None,
            captures: 0,
        }
    }
}

/// A Python frame and the share of running samples it was the innermost frame of.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FrameShare {
    /// `function (file:line)`.
    pub frame: String,
    /// Percent of the running samples.
    pub percent: f64,
}

/// A job and what the agent keeps of it.
struct Job {
    view: JobView,
    sampler: Option<Sampler>,
    first_seen: Instant,
    last_ticks: Option<(Instant, u64)>,
    endpoints_at: Option<Instant>,
}

/// Every job on the node.
pub struct Jobs {
    options: WatchOptions,
    classifier: Classifier,
    jobs: HashMap<u32, Job>,
    users: HashMap<u32, String>,
    ticks_per_second: f64,
    page_size: u64,
    agent_pid: u32,
    gpus: Gpus,
}

/// NVML, once tried (opening it can take a second per GPU: never on a request's path).
enum Gpus {
    NotTried,
    Open(Box<Nvml>),
    /// Why there are no GPU counters.
    Unavailable(String),
}

impl Jobs {
    /// No job seen yet.
    pub fn new(options: WatchOptions) -> Jobs {
        Jobs {
            options,
            classifier: Classifier::default(),
            jobs: HashMap::new(),
            users: users(),
            ticks_per_second: procfs::ticks_per_second() as f64,
            page_size: procfs::page_size(),
            agent_pid: std::process::id(),
            gpus: Gpus::NotTried,
        }
    }

    /// Why there are no GPU counters, when there are none.
    pub fn gpu_note(&self) -> Option<String> {
        match &self.gpus {
            Gpus::Unavailable(why) => Some(why.clone()),
            _ => None,
        }
    }

    /// This tick's GPU readings (none without NVML).
    fn read_gpus(&mut self) -> Vec<GpuReading> {
        if matches!(self.gpus, Gpus::NotTried) {
            self.gpus = match Nvml::open() {
                Ok(nvml) => Gpus::Open(Box::new(nvml)),
                Err(why) => Gpus::Unavailable(format!("no GPU counters: {why}")),
            };
        }
        match &mut self.gpus {
            Gpus::Open(nvml) => nvml.read(),
            _ => Vec::new(),
        }
    }

    /// Looks at the node again: new jobs are added (and their sampling started), gone
    /// ones dropped, every job's signals refreshed.
    pub fn tick(&mut self, now: Instant) {
        let processes: Vec<Process> = discover::scan()
            .into_iter()
            .filter(|p| p.pid != self.agent_pid && self.options.only_uid.is_none_or(|uid| uid == p.uid))
            .collect();
        let by_pid: HashMap<u32, &Process> = processes.iter().map(|p| (p.pid, p)).collect();
        let classifier = &mut self.classifier;
        let found = discover::jobs(&processes, |process| classifier.runs(process, now).is_job());
        let alive: HashSet<u32> = processes.iter().map(|p| p.pid).collect();
        self.classifier.retain(&alive);
        let roots: HashSet<u32> = found.iter().map(|(root, _)| *root).collect();
        self.jobs.retain(|root, _| roots.contains(root));
        let readings = self.read_gpus();
        // Each network namespace's listening sockets, read at most once a tick.
        let mut listeners: HashMap<u64, Vec<mlprof_run::listening::Listener>> = HashMap::new();
        for (root, tree) in found {
            let Some(process) = by_pid.get(&root) else { continue };
            let job = match self.jobs.entry(root) {
                std::collections::hash_map::Entry::Occupied(job) => job.into_mut(),
                std::collections::hash_map::Entry::Vacant(slot) => {
                    let user = self.users.get(&process.uid).cloned().unwrap_or_else(|| process.uid.to_string());
                    slot.insert(new_job(root, process, user, self.options, now))
                }
            };
            let members: Vec<&Process> = tree.iter().filter_map(|pid| by_pid.get(pid).copied()).collect();
            let runs: Vec<discover::Runs> = members.iter().map(|p| self.classifier.runs(p, now)).collect();
            // A launcher's child may be the one that loads the framework.
            job.view.framework = runs.iter().find_map(discover::Runs::framework).map(str::to_string);
            gpu_use(&mut job.view, &tree, &readings);
            job.view.uses_gpu = runs.iter().any(|r| r.cuda) || !job.view.gpus.is_empty();
            let ticks: u64 = members.iter().map(|p| p.cpu_ticks).sum();
            if let Some((at, before)) = job.last_ticks {
                let seconds = now.duration_since(at).as_secs_f64();
                if seconds > 0.0 {
                    job.view.cpu_percent =
                        100.0 * ticks.saturating_sub(before) as f64 / self.ticks_per_second / seconds;
                }
            }
            job.last_ticks = Some((now, ticks));
            job.view.rss_bytes = members.iter().map(|p| p.rss_pages * self.page_size).sum();
            job.view.threads = members.iter().map(|p| p.threads).sum();
            job.view.pids = tree;
            job.view.seen_for_s = now.duration_since(job.first_seen).as_secs_f64();
            if job.endpoints_at.is_none_or(|at| now.duration_since(at) >= ENDPOINTS_EVERY) {
                job.endpoints_at = Some(now);
                let inodes = mlprof_run::listening::socket_inodes(root);
                job.view.listening_ports = match mlprof_run::listening::network_namespace(root) {
                    _ if inodes.is_empty() => Vec::new(),
                    Some(namespace) => {
                        let known =
                            listeners.entry(namespace).or_insert_with(|| mlprof_run::listening::listeners_of(root));
                        mlprof_run::listening::ports_among(&inodes, known)
                    }
                    None => mlprof_run::listening::ports_among(&inodes, &mlprof_run::listening::listeners_of(root)),
                };
                job.view.kineto_endpoint =
                    mlprof_run::attach_kineto::endpoint(root).ok().flatten().map(|e| e.to_string());
            }
            refresh_frames(job);
        }
    }

    /// Every job, the most CPU first.
    pub fn views(&self) -> Vec<JobView> {
        let mut views: Vec<JobView> = self.jobs.values().map(|job| job.view.clone()).collect();
        views.sort_by(|a, b| b.cpu_percent.total_cmp(&a.cpu_percent).then(a.pid.cmp(&b.pid)));
        views
    }
}

/// The GPUs `tree`'s processes are on, their memory there, and how busy those GPUs are.
fn gpu_use(view: &mut JobView, tree: &[u32], readings: &[GpuReading]) {
    let members: HashSet<u32> = tree.iter().copied().collect();
    let mut memory = None;
    let mut gpus = Vec::new();
    let mut busy = Vec::new();
    for reading in readings {
        let on_it: Vec<_> = reading.processes.iter().filter(|p| members.contains(&p.pid)).collect();
        if on_it.is_empty() {
            continue;
        }
        gpus.push(reading.index);
        busy.extend(reading.utilization_gpu_percent.map(f64::from));
        for process in on_it {
            if let Some(bytes) = process.used_bytes {
                memory = Some(memory.unwrap_or(0u64).saturating_add(bytes));
            }
        }
    }
    view.gpu_busy_percent = (!busy.is_empty()).then(|| busy.iter().sum::<f64>() / busy.len() as f64);
    view.gpu_memory_bytes = memory;
    view.gpus = gpus;
}

fn new_job(root: u32, process: &Process, user: String, options: WatchOptions, now: Instant) -> Job {
    let command = std::fs::read(format!("/proc/{root}/cmdline"))
        .map(|raw| {
            let args: Vec<String> = raw
                .split(|&b| b == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            args.join(" ")
        })
        .unwrap_or_default();
    let name = short_name(&command).unwrap_or_else(|| process.comm.clone());
    let environ = std::fs::read(format!("/proc/{root}/environ")).unwrap_or_default();
    let env = |key: &str| procfs::environ_value(&environ, key);
    let kubernetes_pod = env("KUBERNETES_SERVICE_HOST").and(env("HOSTNAME"));
    let cgroup = std::fs::read_to_string(format!("/proc/{root}/cgroup"))
        .ok()
        .and_then(|text| text.lines().next().and_then(|l| l.splitn(3, ':').nth(2)).map(str::to_string))
        .unwrap_or_default();
    let (sampler, sampling_note) = if options.sample_hz == 0 {
        (None, Some("sampling is off (--sample-hz 0)".to_string()))
    } else {
        match Sampler::start(root, SamplerOptions { hz: options.sample_hz, native: false, counters: false }) {
            Ok(sampler) => (Some(sampler), None),
            Err(error) => (None, Some(format!("cannot start a sampling thread: {error}"))),
        }
    };
    Job {
        view: JobView {
            pid: root,
            pids: vec![root],
            command,
            name,
            user,
            cgroup,
            slurm_job_id: env("SLURM_JOB_ID"),
            kubernetes_pod,
            framework: None,
            uses_gpu: false,
            gpus: Vec::new(),
            gpu_memory_bytes: None,
            gpu_busy_percent: None,
            cpu_percent: 0.0,
            rss_bytes: 0,
            threads: process.threads,
            seen_for_s: 0.0,
            top_frames: Vec::new(),
            samples: 0,
            listening_ports: Vec::new(),
            kineto_endpoint: None,
            sampling_note,
            probe: None,
            probe_note: None,
            step_history_ms: Vec::new(),
            step_trend_percent: None,
            slowdown_capture: None,
            run: None,
            captures: 0,
        },
        sampler,
        first_seen: now,
        last_ticks: None,
        endpoints_at: None,
    }
}

/// Counts the last [`FRAME_WINDOW`] of a job's samples and forgets older ones.
fn refresh_frames(job: &mut Job) {
    let Some(sampler) = &job.sampler else { return };
    let now_ns = mlprof_run::sampling::realtime_ns();
    let window_ns = FRAME_WINDOW.as_nanos() as i64;
    let recorded = sampler.window(now_ns - window_ns, now_ns);
    sampler.forget_before(now_ns - window_ns);
    job.view.samples = recorded.samples.len() as u64;
    job.view.top_frames = top_frames(&recorded);
    let notes = sampler.take_notes();
    // The sampler's one-line notes: keep a refusal (ptrace rights, not Python) to show.
    if let Some(refusal) = notes.into_iter().rev().find(|n| n.contains("cannot") || n.contains("no Python")) {
        job.view.sampling_note = Some(refusal);
    }
}

/// The innermost frames of the running samples, most first, with their shares.
fn top_frames(recorded: &Recorded) -> Vec<FrameShare> {
    let mut counts: HashMap<u32, u64> = HashMap::new();
    let mut running = 0u64;
    for sample in recorded.samples.iter().filter(|s| s.state != ThreadState::Idle) {
        running += 1;
        if let Some(&leaf) = recorded.frames.stack_at(sample.stack).last() {
            *counts.entry(leaf).or_default() += 1;
        }
    }
    let mut ranked: Vec<(u32, u64)> = counts.into_iter().collect();
    ranked.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    ranked
        .into_iter()
        .take(TOP_FRAMES)
        .filter_map(|(frame, count)| {
            let frame = recorded.frames.frame_at(frame)?.label();
            Some(FrameShare { frame, percent: 100.0 * count as f64 / running as f64 })
        })
        .collect()
}

/// The script a Python command runs, or the program's file name.
fn short_name(command: &str) -> Option<String> {
    let mut args = command.split(' ').filter(|a| !a.is_empty());
    let program = args.next()?;
    let base = |path: &str| path.rsplit('/').next().unwrap_or(path).to_string();
    if base(program).starts_with("python") {
        let mut rest = args.skip_while(|a| a.starts_with('-') && *a != "-m" && *a != "-c");
        return match rest.next() {
            Some("-m") => rest.next().map(|module| format!("-m {module}")),
            Some("-c") => Some("python -c".to_string()),
            Some(script) => Some(base(script)),
            None => Some(base(program)),
        };
    }
    Some(base(program))
}

/// User names by uid, from `/etc/passwd`.
fn users() -> HashMap<u32, String> {
    let text = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    text.lines()
        .filter_map(|line| {
            let mut fields = line.split(':');
            let name = fields.next()?;
            let uid = fields.nth(1)?.parse().ok()?;
            Some((uid, name.to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_names_say_what_runs() {
        assert_eq!(short_name("/venv/bin/python3 -u /home/a/train.py --lr 3").as_deref(), Some("train.py"));
        assert_eq!(short_name("python -m torch.distributed.run x.py").as_deref(), Some("-m torch.distributed.run"));
        assert_eq!(short_name("python3 -c import time").as_deref(), Some("python -c"));
        assert_eq!(short_name("/opt/bin/trainer --config a").as_deref(), Some("trainer"));
        assert_eq!(short_name("").as_deref(), None);
    }
}
