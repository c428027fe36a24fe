//! What `/proc` says about a process and its threads: the process tree under a pid,
//! CPU time, resident memory and I/O. Every read may fail (the process exited, another
//! user's `/proc/PID/io`): a failure is `None`, never an error that stops sampling.

use std::collections::HashMap;
use std::path::Path;

/// One `/proc/PID/stat` (or `/proc/PID/task/TID/stat`), the fields mlprof reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stat {
    /// The thread's or process's name (`comm`, at most 15 bytes as the kernel keeps it).
    pub comm: String,
    /// Parent process id.
    pub ppid: u32,
    /// User plus system CPU time, clock ticks.
    pub cpu_ticks: u64,
    /// Resident set size, pages.
    pub rss_pages: u64,
    /// Threads in the process (a thread's own `stat` repeats its process's count).
    pub threads: u32,
}

/// Parses a `stat` file's text. `comm` is in parentheses and may hold spaces and
/// parentheses itself, so the fields after it are counted from the last `)`.
pub fn parse_stat(text: &str) -> Option<Stat> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let comm = text.get(open + 1..close)?.to_string();
    // After ") ": state (field 3), ppid (4), ..., utime (14), stime (15), ...,
    // num_threads (20), ..., rss (24).
    let fields: Vec<&str> = text.get(close + 1..)?.split_ascii_whitespace().collect();
    let field = |number: usize| fields.get(number - 3).and_then(|f| f.parse::<u64>().ok());
    Some(Stat {
        comm,
        ppid: u32::try_from(field(4)?).ok()?,
        cpu_ticks: field(14)?.saturating_add(field(15)?),
        rss_pages: field(24)?,
        threads: u32::try_from(field(20)?).ok()?,
    })
}

/// `/proc/PID/stat`.
pub fn process_stat(pid: u32) -> Option<Stat> {
    parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// `/proc/PID/task/TID/stat` of every thread of `pid`, by thread id.
pub fn thread_stats(pid: u32) -> HashMap<u32, Stat> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return HashMap::new() };
    tasks
        .filter_map(Result::ok)
        .filter_map(|task| {
            let tid: u32 = task.file_name().to_str()?.parse().ok()?;
            let text = std::fs::read_to_string(task.path().join("stat")).ok()?;
            Some((tid, parse_stat(&text)?))
        })
        .collect()
}

/// The ids of `pid`'s threads (`/proc/PID/task`); empty once it is gone.
pub fn thread_ids(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return Vec::new() };
    tasks.filter_map(Result::ok).filter_map(|task| task.file_name().to_str()?.parse().ok()).collect()
}

/// Bytes a process caused to be read from and written to storage
/// (`/proc/PID/io` `read_bytes`, `write_bytes`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Io {
    /// Bytes read from storage.
    pub read_bytes: u64,
    /// Bytes written to storage.
    pub write_bytes: u64,
}

/// Parses `/proc/PID/io`'s text.
pub fn parse_io(text: &str) -> Option<Io> {
    let value =
        |key: &str| text.lines().find_map(|line| line.strip_prefix(key)?.strip_prefix(':')?.trim().parse::<u64>().ok());
    Some(Io { read_bytes: value("read_bytes")?, write_bytes: value("write_bytes")? })
}

/// `/proc/PID/io` (`None` where it cannot be read: another user's process).
pub fn process_io(pid: u32) -> Option<Io> {
    parse_io(&std::fs::read_to_string(format!("/proc/{pid}/io")).ok()?)
}

/// `root` and every process descended from it, `root` first. Walked down through the
/// kernel's `/proc/PID/task/TID/children` lists, which costs a read per thread of the
/// tree; where the kernel has no such lists (built without `CONFIG_PROC_CHILDREN`), one
/// pass over all of `/proc` builds the parent links instead, which costs a read per
/// process of the machine.
pub fn process_tree(root: u32) -> Vec<u32> {
    children_tree(root).unwrap_or_else(|| process_tree_in(Path::new("/proc"), root))
}

/// The tree through the `children` lists; `None` where the kernel keeps none.
fn children_tree(root: u32) -> Option<Vec<u32>> {
    // Missing for a root that is gone too: the scan then finds no descendants either.
    if !Path::new(&format!("/proc/{root}/task/{root}/children")).exists() {
        return None;
    }
    let mut tree = vec![root];
    let mut seen = std::collections::HashSet::from([root]);
    let mut next = 0;
    while let Some(&pid) = tree.get(next) {
        next += 1;
        for tid in thread_ids(pid) {
            let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/children")) else { continue };
            // A pid reused mid-walk could loop: the tree holds each pid once, and is bounded.
            for child in text.split_ascii_whitespace().filter_map(|c| c.parse::<u32>().ok()) {
                if tree.len() < 65_536 && seen.insert(child) {
                    tree.push(child);
                }
            }
        }
    }
    Some(tree)
}

fn process_tree_in(proc_root: &Path, root: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir(proc_root) else { return vec![root] };
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for entry in entries.filter_map(Result::ok) {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        let Ok(text) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        if let Some(stat) = parse_stat(&text) {
            children.entry(stat.ppid).or_default().push(pid);
        }
    }
    let mut tree = vec![root];
    let mut next = 0;
    while let Some(&pid) = tree.get(next) {
        next += 1;
        if let Some(kids) = children.get(&pid) {
            // A pid can only have one parent, but a pid reused mid-scan could loop.
            tree.extend(kids.iter().filter(|k| **k != root));
        }
        if tree.len() > 65_536 {
            break;
        }
    }
    tree
}

/// The kernel's clock ticks per second (`sysconf(_SC_CLK_TCK)`, 100 almost everywhere).
pub fn ticks_per_second() -> u64 {
    // SAFETY: sysconf only reads a configuration value.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(ticks).ok().filter(|&t| t > 0).unwrap_or(100)
}

/// The page size, bytes.
pub fn page_size() -> u64 {
    // SAFETY: sysconf only reads a configuration value.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(size).ok().filter(|&s| s > 0).unwrap_or(4096)
}

/// Whether `pid`'s memory maps a Python interpreter (the `python` executable or a
/// `libpython` library): only those are worth reading stacks from.
pub fn maps_python(pid: u32) -> bool {
    maps_file(pid, |file| file.starts_with("python") || file.starts_with("libpython"))
}

/// Whether `pid`'s memory maps a file whose name starts with `prefix` (`libtorch`).
pub fn maps_library(pid: u32, prefix: &str) -> bool {
    maps_file(pid, |file| file.starts_with(prefix))
}

/// Whether some file `pid` maps has a name (the last path component) `wanted` accepts.
fn maps_file(pid: u32, wanted: impl Fn(&str) -> bool) -> bool {
    let Ok(maps) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else { return false };
    maps.lines().any(|line| {
        let path = line.split_ascii_whitespace().nth(5).unwrap_or("");
        wanted(path.rsplit('/').next().unwrap_or(""))
    })
}

/// A variable's value in an environment block (`/proc/PID/environ`: `NAME=value`
/// entries, each NUL-terminated); `None` when it is unset or empty.
pub fn environ_value(environ: &[u8], name: &str) -> Option<String> {
    environ.split(|&b| b == 0).find_map(|entry| {
        let value = entry.strip_prefix(name.as_bytes())?.strip_prefix(b"=")?;
        Some(String::from_utf8_lossy(value).into_owned()).filter(|v| !v.is_empty())
    })
}

/// The executable `pid` runs (`/proc/PID/exe`), to notice an `exec`.
pub fn executable(pid: u32) -> Option<std::path::PathBuf> {
    std::fs::read_link(format!("/proc/{pid}/exe")).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_with_spaces_and_parentheses_in_the_name() {
        let text = "4242 (my (odd) name) S 17 4242 4242 0 -1 4194560 100 0 0 0 250 31 0 0 20 0 3 0 \
                    12345 1000000 777 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";
        let stat = parse_stat(text).unwrap();
        assert_eq!(stat.comm, "my (odd) name");
        assert_eq!(stat.ppid, 17);
        assert_eq!(stat.cpu_ticks, 281);
        assert_eq!(stat.rss_pages, 777);
        assert_eq!(stat.threads, 3);
    }

    #[test]
    fn truncated_or_garbled_stat_is_none() {
        assert_eq!(parse_stat(""), None);
        assert_eq!(parse_stat("1 (x) S 0"), None);
        assert_eq!(parse_stat("1 (x) S notanumber 1 1 0 -1 0 0 0 0 0 1 1 0 0 20 0 1 0 1 1 1"), None);
    }

    #[test]
    fn environment_values_are_found_whole() {
        let environ = b"SLURM_JOB_ID=4242\0XSLURM_JOB_ID=1\0EMPTY=\0LAST=x";
        assert_eq!(environ_value(environ, "SLURM_JOB_ID").as_deref(), Some("4242"));
        assert_eq!(environ_value(environ, "LAST").as_deref(), Some("x"), "the last entry needs no NUL");
        assert_eq!(environ_value(environ, "EMPTY"), None);
        assert_eq!(environ_value(environ, "MISSING"), None);
    }

    #[test]
    fn io_fields() {
        let text = "rchar: 10\nwchar: 20\nsyscr: 1\nsyscw: 2\nread_bytes: 4096\nwrite_bytes: 8192\n\
                    cancelled_write_bytes: 0\n";
        assert_eq!(parse_io(text), Some(Io { read_bytes: 4096, write_bytes: 8192 }));
        assert_eq!(parse_io("rchar: 1\n"), None);
    }

    #[test]
    fn this_process_is_in_its_own_tree_and_maps_no_python() {
        let me = std::process::id();
        let stat = process_stat(me).unwrap();
        assert!(stat.rss_pages > 0);
        assert!(thread_stats(me).contains_key(&me));
        assert!(thread_ids(me).contains(&me));
        assert_eq!(process_tree(me).first(), Some(&me));
        assert!(!maps_python(me));
        let child = std::process::Command::new("sleep").arg("5").spawn().unwrap();
        let tree = process_tree(me);
        assert!(tree.contains(&child.id()), "{tree:?} lacks the child {}", child.id());
        let scanned = process_tree_in(Path::new("/proc"), me);
        assert!(scanned.contains(&child.id()), "the full scan finds it too: {scanned:?}");
        let mut child = child;
        let _ = child.kill();
        let _ = child.wait();
    }
}
