//! Finding the node's ML jobs with no help from them: one pass over `/proc` reads every
//! process's parent, owner, CPU time and memory; a process is part of a job when it runs
//! a Python interpreter or maps NVIDIA's driver library (`libcuda`), and the job is the
//! topmost such process of its line of descent (a DataLoader worker or a `torchrun`
//! child belongs to the job that started it). What a process maps is read when it is
//! new or changes its name (an `exec`), and again every [`RECHECK`] (CUDA and the
//! frameworks are loaded when first used, not at start); kernel threads are never read.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use mlprof_run::sampling::procfs;

/// How often a process that is not (yet) part of a job is looked at again.
pub const RECHECK: Duration = Duration::from_secs(10);

/// One process, as one pass over `/proc` saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Process {
    /// Its id.
    pub pid: u32,
    /// Its parent's id.
    pub ppid: u32,
    /// The user it runs as.
    pub uid: u32,
    /// Its name (`comm`).
    pub comm: String,
    /// User plus system CPU time, clock ticks.
    pub cpu_ticks: u64,
    /// Resident memory, pages.
    pub rss_pages: u64,
    /// Its threads.
    pub threads: u32,
}

/// Every process readable now.
pub fn scan() -> Vec<Process> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            use std::os::unix::fs::MetadataExt;
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let uid = entry.metadata().ok()?.uid();
            let procfs::Stat { comm, ppid, cpu_ticks, rss_pages, threads } = procfs::process_stat(pid)?;
            Some(Process { pid, ppid, uid, comm, cpu_ticks, rss_pages, threads })
        })
        .collect()
}

/// What a process runs, from the files it maps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Runs {
    /// A Python interpreter.
    pub python: bool,
    /// NVIDIA's driver library: it uses (or will use) a GPU.
    pub cuda: bool,
    /// PyTorch (`libtorch*`).
    pub torch: bool,
    /// TensorFlow (`libtensorflow*`, `_pywrap_tensorflow*`).
    pub tensorflow: bool,
    /// JAX's XLA runtime (`xla_extension*`, `libjax*`, `_jax*`).
    pub jax: bool,
}

impl Runs {
    /// Whether it makes its process part of a job.
    pub fn is_job(&self) -> bool {
        self.python || self.cuda
    }

    /// The framework's name, when one is loaded (`pytorch`, `jax`, `tensorflow`).
    pub fn framework(&self) -> Option<&'static str> {
        if self.torch {
            Some("pytorch")
        } else if self.jax {
            Some("jax")
        } else if self.tensorflow {
            Some("tensorflow")
        } else {
            None
        }
    }

    /// What one mapped file's name (the path's last component) adds.
    fn add(&mut self, file: &str) {
        self.python |= file.starts_with("python") || file.starts_with("libpython");
        self.cuda |= file.starts_with("libcuda.so");
        self.torch |= file.starts_with("libtorch");
        self.tensorflow |= file.starts_with("libtensorflow") || file.starts_with("_pywrap_tensorflow");
        self.jax |= file.starts_with("xla_extension") || file.starts_with("libjax") || file.starts_with("_jax");
    }
}

/// Parses `/proc/PID/maps`'s text.
pub fn runs_in_maps(maps: &str) -> Runs {
    let mut runs = Runs::default();
    for line in maps.lines() {
        if let Some(path) = line.split_ascii_whitespace().nth(5) {
            runs.add(path.rsplit('/').next().unwrap_or(""));
        }
    }
    runs
}

/// What each process runs, remembered between passes.
#[derive(Default)]
pub struct Classifier {
    known: HashMap<u32, Known>,
}

struct Known {
    comm: String,
    runs: Runs,
    checked: Instant,
}

/// Profilers and debuggers that run beside a job or launch it (`mlprof run`, `nsys
/// profile`, `gdb`, `perf`): they map Python or NVIDIA's libraries themselves (gdb and
/// perf embed Python, mlprof and nsys load NVML), but they are never the job, so the job
/// is the process they watch or start.
const BESIDE_JOBS: &[&str] = &["mlprof", "nsys", "ncu", "gdb", "cuda-gdb", "perf", "py-spy", "compute-sanitizer"];

/// Whether a process named `comm` is a profiler or debugger (see [`BESIDE_JOBS`]).
pub fn is_beside_jobs(comm: &str) -> bool {
    // The kernel keeps 15 bytes of a name.
    BESIDE_JOBS.iter().any(|tool| tool.get(..tool.len().min(15)) == Some(comm))
}

/// The kernel's thread daemon: its children are kernel threads, which map nothing.
const KTHREADD: u32 = 2;

impl Classifier {
    /// What `process` runs: read from its maps when it is new, renamed (`exec`), or due
    /// a recheck.
    pub fn runs(&mut self, process: &Process, now: Instant) -> Runs {
        if process.pid == KTHREADD || process.ppid == KTHREADD || is_beside_jobs(&process.comm) {
            return Runs::default();
        }
        if let Some(known) = self.known.get(&process.pid)
            && known.comm == process.comm
            && now.duration_since(known.checked) < RECHECK
        {
            return known.runs;
        }
        let maps = std::fs::read_to_string(format!("/proc/{}/maps", process.pid));
        let runs = maps.map(|m| runs_in_maps(&m)).unwrap_or_default();
        self.known.insert(process.pid, Known { comm: process.comm.clone(), runs, checked: now });
        runs
    }

    /// Forgets the processes not in `alive`.
    pub fn retain(&mut self, alive: &std::collections::HashSet<u32>) {
        self.known.retain(|pid, _| alive.contains(pid));
    }
}

/// The jobs among `processes`: each job's root and its processes (root first), where
/// `is_job(process)` says whether a process is part of one. A process under a job's root
/// belongs to that job even when it is not one itself (a shell it started).
pub fn jobs(processes: &[Process], mut is_job: impl FnMut(&Process) -> bool) -> Vec<(u32, Vec<u32>)> {
    let parent: HashMap<u32, u32> = processes.iter().map(|p| (p.pid, p.ppid)).collect();
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for process in processes {
        children.entry(process.ppid).or_default().push(process.pid);
    }
    let candidates: std::collections::HashSet<u32> = processes.iter().filter(|p| is_job(p)).map(|p| p.pid).collect();
    let mut roots: Vec<u32> = candidates
        .iter()
        .copied()
        .filter(|pid| {
            // Topmost: no ancestor is a candidate (bounded: a pid reused mid-scan can loop).
            let mut at = *pid;
            for _ in 0..4096 {
                match parent.get(&at) {
                    Some(&up) if up != at && up != 0 => {
                        if candidates.contains(&up) {
                            return false;
                        }
                        at = up;
                    }
                    _ => break,
                }
            }
            true
        })
        .collect();
    roots.sort_unstable();
    roots
        .into_iter()
        .map(|root| {
            let mut tree = vec![root];
            let mut next = 0;
            while let Some(&pid) = tree.get(next) {
                next += 1;
                if let Some(kids) = children.get(&pid) {
                    tree.extend(kids.iter().filter(|&&k| k != root));
                }
                if tree.len() > 65_536 {
                    break;
                }
            }
            (root, tree)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn process(pid: u32, ppid: u32) -> Process {
        Process { pid, ppid, uid: 0, comm: format!("p{pid}"), cpu_ticks: 0, rss_pages: 0, threads: 1 }
    }

    #[test]
    fn a_job_is_the_topmost_python_or_cuda_process_with_everything_under_it() {
        // 1 init, 10 bash → 11 python (job) → 12, 13 python workers; 12 → 14 sh;
        // 20 mlprof → 21 python (job); 30 a CUDA binary (job); 40 sshd (nothing).
        let processes: Vec<Process> =
            [(1, 0), (10, 1), (11, 10), (12, 11), (13, 11), (14, 12), (20, 1), (21, 20), (30, 1), (40, 1)]
                .into_iter()
                .map(|(pid, ppid)| process(pid, ppid))
                .collect();
        let is_job = |p: &Process| [11, 12, 13, 21, 30].contains(&p.pid);
        assert_eq!(jobs(&processes, is_job), vec![(11, vec![11, 12, 13, 14]), (21, vec![21]), (30, vec![30])]);
    }

    #[test]
    fn a_profiler_or_debugger_beside_a_job_is_never_part_of_it() {
        // An `mlprof run` (or gdb, perf) maps Python or NVIDIA's libraries itself; were it
        // a job, the job it starts would be listed under its name and not found by pid.
        let python = |name: &str| {
            let script = format!("open('/proc/self/comm', 'w').write('{name}'); import time; time.sleep(30)");
            std::process::Command::new("python3").args(["-c", &script]).spawn().expect("python3 runs")
        };
        let (mut job, mut tool) = (python("train.py"), python("mlprof"));
        let deadline = Instant::now() + Duration::from_secs(10);
        let seen = loop {
            let seen: Vec<Process> = scan().into_iter().filter(|p| [job.id(), tool.id()].contains(&p.pid)).collect();
            if seen.iter().filter(|p| p.comm == "train.py" || p.comm == "mlprof").count() == 2
                || Instant::now() > deadline
            {
                break seen;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut classifier = Classifier::default();
        let is_job: Vec<(String, bool)> =
            seen.iter().map(|p| (p.comm.clone(), classifier.runs(p, Instant::now()).is_job())).collect();
        let _ = (job.kill(), tool.kill(), job.wait(), tool.wait());
        assert_eq!(is_job.len(), 2, "{is_job:?}");
        assert!(
            is_job.contains(&("train.py".into(), true)) && is_job.contains(&("mlprof".into(), false)),
            "{is_job:?}"
        );
        assert!(is_beside_jobs("compute-sanitiz") && is_beside_jobs("gdb") && !is_beside_jobs("python3"));
    }

    #[test]
    fn maps_name_the_interpreter_the_driver_and_the_framework() {
        let maps = "7f00-7f01 r-xp 0 08:01 1 /usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15\n\
                    7f02-7f03 r-xp 0 08:01 2 /venv/lib/python3.11/site-packages/torch/lib/libtorch_cpu.so\n\
                    7f04-7f05 r-xp 0 08:01 3 /usr/bin/python3.11\n\
                    7f06-7f07 rw-p 0 00:00 0 [heap]\n\
                    7f08-7f09 rw-p 0 00:00 0\n";
        let runs = runs_in_maps(maps);
        assert!(runs.python && runs.cuda && runs.torch && runs.is_job());
        assert_eq!(runs.framework(), Some("pytorch"));
        let jax = runs_in_maps("1-2 r-xp 0 0:0 1 /v/jaxlib/xla_extension.so\n");
        assert_eq!((jax.framework(), jax.is_job()), (Some("jax"), false));
        assert_eq!(runs_in_maps(""), Runs::default());
    }

    #[test]
    fn this_process_is_seen_with_its_threads() {
        let me = std::process::id();
        let seen = scan();
        let mine = seen.iter().find(|p| p.pid == me).expect("this process");
        assert!(mine.threads >= 1 && mine.rss_pages > 0);
    }
}
