//! Finding the profiles behind a path, the way TensorBoard and HTA do.
//!
//! A path may be:
//! - one file: an XSpace (`<host>.xplane.pb`, `.xplane.pb.gz`), a Kineto/Chrome trace
//!   (`*.pt.trace.json`, `*.json`, `*.json.gz`) or an Nsight Systems SQLite export
//!   (`*.sqlite`, read into the XSpace layout) or a PyTorch memory snapshot
//!   (`*.pickle`, `*.pkl`, read into the Kineto layout); anything else is sniffed by
//!   content;
//! - a profile session directory holding `<host>.xplane.pb` files (one per host), and
//!   PyTorch's `<worker>.pt.trace.json[.gz]` traces beside them (as `mlprof run` and
//!   `mlprof attach` write a PyTorch job's session: its Kineto trace and its samples);
//! - a TensorBoard log directory: every `plugins/profile/<session>/` below it, at any
//!   depth, is a session named `<run>/<session>` (`<run>` = the path from the log
//!   directory to `plugins`, omitted at the root), as TensorBoard's profile plugin names
//!   runs; its hosts are the `<host>.xplane.pb` files and PyTorch's
//!   `<worker>.pt.trace.json[.gz]` traces (as `mlprof run` writes them) in it; a
//!   directory below it that holds Kineto traces (outside `plugins/`) is a session too,
//!   named by its path from the log directory, as PyTorch's TensorBoard plugin names
//!   runs (`<logdir>/<run>/*.pt.trace.json`), so traces beside a log directory are
//!   never dropped unseen;
//! - a directory of Kineto traces, one per rank (files that do not look like a trace,
//!   such as PyTorch's `memory_timeline.raw.json.gz`, are skipped).
//!
//! Wherever Kineto traces are looked for, PyTorch memory snapshots (`*.pickle`,
//! `*.pkl` whose first bytes name a snapshot's keys) are hosts too, so a snapshot
//! beside its run's trace opens with it.
//!
//! Sessions are returned sorted by name (XProf session names are timestamps, so the
//! last is the newest); hosts by rank, then name.
//!
//! The walk below a log directory never fails as a whole for one bad part: a directory
//! or file it cannot read, and a symbolic link that leads out of the directory it was
//! given (into `/proc`, say), are skipped and listed in [`Discovery::skipped`] with the
//! reason, for the caller to report. It never walks out of that directory.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use mlprof_model::{Host, Session, SourceFormat};
use rayon::prelude::*;

use crate::error::{FormatError, Result};
use crate::input::{GZIP_MAGIC, LoadOptions, describe_file_type, gunzip_prefix, load_file_with, open_regular};
use crate::progress::{FileProgress, LoadProgress};

/// A profile file found by [`discover`], not yet read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostFile {
    /// The file.
    pub path: PathBuf,
    /// Its format.
    pub format: SourceFormat,
    /// The host name derived from the file name.
    pub host_name: String,
}

/// A session found by [`discover`]: its name, directory and files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionFiles {
    /// Session name (`2026_11_21_19_24_08`, `train/2026_11_21_19_24_04`, a trace stem).
    pub name: String,
    /// The session directory (or the file, for a single file).
    pub path: PathBuf,
    /// One file per host.
    pub hosts: Vec<HostFile>,
}

const XSPACE_SUFFIXES: &[&str] = &[".xplane.pb", ".xplane.pb.gz"];
const TRACE_SUFFIXES: &[&str] = &[".pt.trace.json.gz", ".pt.trace.json", ".json.gz", ".json"];
const PYTORCH_TRACE_SUFFIXES: &[&str] = &[".pt.trace.json.gz", ".pt.trace.json"];
/// Nsight Systems SQLite exports, read into the XSpace layout ([`crate::nsys`]).
const NSYS_SUFFIXES: &[&str] = &[".sqlite"];
/// PyTorch memory snapshots, read into the Kineto layout ([`crate::torch_memory`]).
const SNAPSHOT_SUFFIXES: &[&str] = &[".pickle", ".pkl"];

/// Something below a log directory that discovery left out, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skipped {
    /// The directory, file or link.
    pub path: PathBuf,
    /// Why it was left out (an OS error, or "leads outside …").
    pub reason: String,
}

/// What [`discover_reporting`] found: the sessions, and what it had to leave out.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Discovery {
    /// The sessions, sorted by name.
    pub sessions: Vec<SessionFiles>,
    /// Parts of the tree that could not be read or lead outside it.
    pub skipped: Vec<Skipped>,
}

/// Finds the sessions and host files behind `path` (what was skipped is dropped; see
/// [`discover_reporting`]).
pub fn discover(path: &Path) -> Result<Vec<SessionFiles>> {
    discover_reporting(path).map(|found| found.sessions)
}

/// Finds the sessions and host files behind `path`, and what below it had to be
/// skipped. An error only when `path` itself cannot be read or holds no profile.
pub fn discover_reporting(path: &Path) -> Result<Discovery> {
    let shown = path.display().to_string();
    let meta = std::fs::metadata(path).map_err(|e| FormatError::io(&shown, e))?;
    if meta.is_file() {
        let file = classify_file(path)?;
        let name = file.host_name.clone();
        let session = SessionFiles { name, path: path.to_path_buf(), hosts: vec![file] };
        return Ok(Discovery { sessions: vec![session], skipped: Vec::new() });
    }
    if !meta.is_dir() {
        return Err(FormatError::unrecognized(
            shown,
            format!("not a profile file or directory ({})", describe_file_type(meta.file_type())),
        ));
    }
    let root = path.canonicalize().map_err(|e| FormatError::io(&shown, e))?;
    let mut walk = Walk { root, visited: std::collections::HashSet::new(), skipped: Vec::new() };
    // The directory itself must be readable: that error is the answer.
    sorted_entries(path)?;
    let mut xspaces = walk.xspace_files(path);
    if !xspaces.is_empty() {
        // The same hosts as when the log directory above is given.
        xspaces.extend(walk.pytorch_trace_files(path));
        let session = SessionFiles { name: dir_name(path), path: path.to_path_buf(), hosts: xspaces };
        return Ok(Discovery { sessions: vec![session], skipped: walk.skipped });
    }
    let mut sessions = Vec::new();
    walk.find_profile_sessions(path, path, &mut sessions);
    if !sessions.is_empty() {
        sessions.sort_by(|a, b| a.name.cmp(&b.name));
        return Ok(Discovery { sessions, skipped: walk.skipped });
    }
    let traces = walk.trace_files(path);
    if !traces.is_empty() {
        let session = SessionFiles { name: dir_name(path), path: path.to_path_buf(), hosts: traces };
        return Ok(Discovery { sessions: vec![session], skipped: walk.skipped });
    }
    let mut message = "no profile found: expected <host>.xplane.pb files, plugins/profile/<session>/ directories \
                       below it, or Kineto trace .json/.json.gz files"
        .to_string();
    if let Some(first) = walk.skipped.first() {
        message.push_str(&format!(
            " ({} part(s) skipped, first {}: {})",
            walk.skipped.len(),
            first.path.display(),
            first.reason
        ));
    }
    Err(FormatError::unrecognized(shown, message))
}

/// Discovers and reads everything behind `path`, hosts in parallel.
pub fn load(path: &Path) -> Result<Vec<Session>> {
    discover(path)?.into_iter().map(|s| load_session(&s)).collect()
}

/// Reads every host file of one discovered session, in parallel.
pub fn load_session(files: &SessionFiles) -> Result<Session> {
    load_session_within(files, None)
}

/// Reads every host file of one discovered session, in parallel; with `within` (a
/// canonical directory), each opened file must lie inside it (see
/// [`LoadOptions::within`]).
pub fn load_session_within(files: &SessionFiles, within: Option<&Path>) -> Result<Session> {
    load_session_counting(files, within, None)
}

/// [`load_session_within`], counting the bytes decoded into `progress` as it goes.
pub fn load_session_counting(
    files: &SessionFiles,
    within: Option<&Path>,
    progress: Option<&Arc<LoadProgress>>,
) -> Result<Session> {
    let options =
        LoadOptions { within: within.map(Path::to_path_buf), progress: progress.cloned(), ..LoadOptions::default() };
    load_session_with(files, &options)
}

/// Reads every host file of one discovered session, in parallel, each with `options`
/// (and its format's limits, [`LoadOptions::for_file_of`]).
pub fn load_session_with(files: &SessionFiles, options: &LoadOptions) -> Result<Session> {
    let read = |file: &HostFile| read_host_file_with(file, &options.for_file_of(file.format));
    let mut hosts: Vec<Host> = files.hosts.par_iter().map(read).collect::<Result<_>>()?;
    hosts.sort_by(|a, b| (a.rank.unwrap_or(i64::MAX), &a.name).cmp(&(b.rank.unwrap_or(i64::MAX), &b.name)));
    Ok(Session { name: files.name.clone(), path: files.path.display().to_string(), hosts })
}

/// Reads one host file in the format discovery found.
pub fn read_host_file(file: &HostFile) -> Result<Host> {
    read_host_file_with(file, &LoadOptions::for_format(file.format))
}

/// Reads one host file in the format discovery found, opened with `options`. A file
/// truncated or rewritten while it was read is a [`FormatError::Changed`], whatever
/// the decoder made of it.
pub fn read_host_file_with(file: &HostFile, options: &LoadOptions) -> Result<Host> {
    if file.format == SourceFormat::Xspace && crate::nsys::is_sqlite(&head_bytes(&file.path, 16)?) {
        // An Nsight Systems export, laid out as an XSpace GPU profile: SQLite reads it.
        let mut host = crate::nsys::read_nsys(&file.path, &file.host_name)?;
        host.source_bytes = std::fs::metadata(&file.path).map_or(0, |m| m.len());
        return Ok(host);
    }
    let shown = file.path.display().to_string();
    let loaded = load_file_with(&file.path, options)?;
    let named_snapshot =
        file.path.file_name().is_some_and(|n| strip_any(&n.to_string_lossy(), SNAPSHOT_SUFFIXES).is_some());
    let snapshot = named_snapshot || crate::torch_memory::is_memory_snapshot(&loaded.bytes);
    let progress = FileProgress::start(options.progress.as_deref(), loaded.bytes.len() as u64);
    let release = |range: Range<usize>| {
        progress.advance(range.len() as u64);
        loaded.bytes.release(range)
    };
    let decoded = match file.format {
        SourceFormat::Xspace => crate::xspace::read_xspace_releasing(&loaded.bytes, &release, &shown, &file.host_name),
        // A PyTorch memory snapshot: its allocator trace, and `[memory]` events unless
        // the caller needs only the trace.
        SourceFormat::Kineto if snapshot => crate::torch_memory::read_memory_snapshot_releasing(
            &loaded.bytes,
            &release,
            &shown,
            &file.host_name,
            options.snapshot_entries,
        ),
        SourceFormat::Kineto => crate::kineto::read_kineto_releasing(&loaded.bytes, &release, &shown, &file.host_name),
    };
    progress.finish();
    loaded.unchanged()?;
    let mut host = decoded?;
    host.source_bytes = loaded.stored_bytes;
    Ok(host)
}

/// Decides the format of a file named on the command line: by name, else by content.
pub fn classify_file(path: &Path) -> Result<HostFile> {
    let file_name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    if let Some(host) = strip_any(&file_name, XSPACE_SUFFIXES) {
        return Ok(HostFile { path: path.to_path_buf(), format: SourceFormat::Xspace, host_name: host });
    }
    if let Some(host) = strip_any(&file_name, TRACE_SUFFIXES) {
        return Ok(HostFile { path: path.to_path_buf(), format: SourceFormat::Kineto, host_name: host });
    }
    if let Some(host) = strip_any(&file_name, NSYS_SUFFIXES) {
        return Ok(HostFile { path: path.to_path_buf(), format: SourceFormat::Xspace, host_name: host });
    }
    if let Some(host) = strip_any(&file_name, SNAPSHOT_SUFFIXES) {
        return Ok(HostFile { path: path.to_path_buf(), format: SourceFormat::Kineto, host_name: host });
    }
    let host_name = file_name.strip_suffix(".gz").unwrap_or(&file_name).to_string();
    let format = sniff(path)?.ok_or_else(|| {
        FormatError::unrecognized(
            path.display().to_string(),
            "unrecognized file: expected an XSpace protobuf (.xplane.pb), a Kineto/Chrome trace (.json), an \
             Nsight Systems export (.sqlite) or a PyTorch memory snapshot (.pickle), and the content looks like none",
        )
    })?;
    Ok(HostFile { path: path.to_path_buf(), format, host_name })
}

/// Guesses a file's format from its first bytes (inflating gzip first).
fn sniff(path: &Path) -> Result<Option<SourceFormat>> {
    let head = head_bytes(path, 64 * 1024)?;
    if head.is_empty() {
        return Err(FormatError::unrecognized(path.display().to_string(), "file is empty (0 bytes)"));
    }
    let mut significant = head.iter().copied().filter(|b| !b.is_ascii_whitespace());
    let json = matches!(
        (significant.next(), significant.next()),
        (Some(b'{'), Some(b'"' | b'}')) | (Some(b'['), Some(b'{' | b']'))
    );
    Ok(if json {
        Some(SourceFormat::Kineto)
    } else if crate::nsys::is_sqlite(&head) {
        Some(SourceFormat::Xspace)
    } else if crate::torch_memory::is_memory_snapshot(&head) {
        Some(SourceFormat::Kineto)
    } else if matches!(head[0], 0x0a | 0x12 | 0x1a | 0x22) {
        // XSpace's first field is normally `planes` (1, LEN) or `hostnames` (4, LEN).
        Some(SourceFormat::Xspace)
    } else {
        None
    })
}

fn head_bytes(path: &Path, limit: usize) -> Result<Vec<u8>> {
    use std::io::Read;
    let shown = path.display().to_string();
    let mut raw = Vec::new();
    open_regular(path)?.take(limit as u64).read_to_end(&mut raw).map_err(|e| FormatError::io(&shown, e))?;
    Ok(if raw.starts_with(&GZIP_MAGIC) { gunzip_prefix(&raw, limit) } else { raw })
}

fn strip_any(name: &str, suffixes: &[&str]) -> Option<String> {
    suffixes.iter().find_map(|s| name.strip_suffix(s)).filter(|h| !h.is_empty()).map(str::to_string)
}

fn dir_name(path: &Path) -> String {
    let canonical = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    canonical.file_name().map_or_else(|| canonical.display().to_string(), |n| n.to_string_lossy().into_owned())
}

fn sorted_entries(dir: &Path) -> Result<Vec<PathBuf>> {
    let shown = dir.display().to_string();
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| FormatError::io(&shown, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    Ok(entries)
}

/// True when the start of a JSON file looks like a Chrome trace: a `"traceEvents": [`
/// member, or an array of objects with `ph` (a file that only names `traceEvents`, such
/// as a summary listing a trace's keys, is none).
fn looks_like_trace(path: &Path) -> Result<bool> {
    let head = head_bytes(path, 64 * 1024)?;
    let contains = |needle: &[u8]| head.windows(needle.len()).any(|w| w == needle);
    Ok(has_trace_events_array(&head) || (head.trim_ascii_start().starts_with(b"[") && contains(b"\"ph\"")))
}

/// Whether `head` holds `"traceEvents"`, then `:` and `[` (whitespace allowed between).
fn has_trace_events_array(head: &[u8]) -> bool {
    const KEY: &[u8] = b"\"traceEvents\"";
    let mut rest = head;
    while let Some(at) = rest.windows(KEY.len()).position(|w| w == KEY) {
        rest = &rest[at + KEY.len()..];
        let mut after = rest.iter().copied().filter(|b| !b.is_ascii_whitespace());
        if after.next() == Some(b':') && after.next() == Some(b'[') {
            return true;
        }
    }
    false
}

/// The state of one walk below a log directory.
struct Walk {
    /// The canonical directory the walk may not leave.
    root: PathBuf,
    /// Canonical directories already walked (link cycles end).
    visited: std::collections::HashSet<PathBuf>,
    skipped: Vec<Skipped>,
}

impl Walk {
    fn skip(&mut self, path: &Path, reason: impl Into<String>) {
        self.skipped.push(Skipped { path: path.to_path_buf(), reason: reason.into() });
    }

    /// The entries of `dir`, or none (and `dir` skipped) when it cannot be read.
    fn entries(&mut self, dir: &Path) -> Vec<PathBuf> {
        sorted_entries(dir).unwrap_or_else(|e| {
            self.skip(dir, e.to_string());
            Vec::new()
        })
    }

    /// Whether the walk may enter directory `dir`: not seen before, and inside the
    /// root once links are resolved (a link that leads out is skipped).
    fn may_enter(&mut self, dir: &Path) -> bool {
        let canonical = match dir.canonicalize() {
            Ok(canonical) => canonical,
            Err(e) => {
                self.skip(dir, e.to_string());
                return false;
            }
        };
        if !canonical.starts_with(&self.root) {
            let reason = format!("a symbolic link to {}, outside {}", canonical.display(), self.root.display());
            self.skip(dir, reason);
            return false;
        }
        self.visited.insert(canonical)
    }

    fn xspace_files(&mut self, dir: &Path) -> Vec<HostFile> {
        self.entries(dir)
            .into_iter()
            .filter(|p| p.is_file())
            .filter_map(|p| {
                let name = p.file_name()?.to_string_lossy().into_owned();
                let host = strip_any(&name, XSPACE_SUFFIXES)?;
                Some(HostFile { path: p, format: SourceFormat::Xspace, host_name: host })
            })
            .collect()
    }

    fn trace_files(&mut self, dir: &Path) -> Vec<HostFile> {
        self.traces_named(dir, TRACE_SUFFIXES)
    }

    /// PyTorch's traces in a session directory (`mlprof run` puts them there); JAX's own
    /// `<host>.trace.json.gz` beside its XSpace is an export of it, not another host.
    fn pytorch_trace_files(&mut self, dir: &Path) -> Vec<HostFile> {
        self.traces_named(dir, PYTORCH_TRACE_SUFFIXES)
    }

    fn traces_named(&mut self, dir: &Path, suffixes: &[&str]) -> Vec<HostFile> {
        let entries = self.entries(dir);
        self.traces_among(&entries, suffixes)
    }

    /// The files among `entries` named with one of `suffixes` that look like a trace,
    /// and the PyTorch memory snapshots among them (`*.pickle`, `*.pkl` that start
    /// like one: other pickles, such as a dataset cache, are left alone).
    fn traces_among(&mut self, entries: &[PathBuf], suffixes: &[&str]) -> Vec<HostFile> {
        let mut found = Vec::new();
        for p in entries {
            if !p.is_file() {
                continue;
            }
            let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            if let Some(host) = strip_any(&name, SNAPSHOT_SUFFIXES) {
                match head_bytes(p, 64 * 1024) {
                    Ok(head) if crate::torch_memory::looks_like_memory_snapshot(&head) => {
                        found.push(HostFile { path: p.clone(), format: SourceFormat::Kineto, host_name: host })
                    }
                    Ok(_) => {}
                    Err(e) => self.skip(p, e.to_string()),
                }
                continue;
            }
            let Some(host) = strip_any(&name, suffixes) else { continue };
            match looks_like_trace(p) {
                Ok(true) => found.push(HostFile { path: p.clone(), format: SourceFormat::Kineto, host_name: host }),
                Ok(false) => {}
                Err(e) => self.skip(p, e.to_string()),
            }
        }
        found
    }

    /// Collects `plugins/profile/<session>/` directories below `dir` (any depth), and the
    /// directories holding Kineto traces (each a session named by its path). Links
    /// are followed while they stay inside the root, each directory once, so a link
    /// cycle cannot recurse forever.
    fn find_profile_sessions(&mut self, root: &Path, dir: &Path, out: &mut Vec<SessionFiles>) {
        if !self.may_enter(dir) {
            return;
        }
        let run = dir.strip_prefix(root).unwrap_or(Path::new("")).to_string_lossy().into_owned();
        let entries = self.entries(dir);
        // Kineto traces outside `plugins/profile` make their directory a run, as in
        // PyTorch's TensorBoard plugin (`<logdir>/<run>/*.pt.trace.json`).
        let traces = self.traces_among(&entries, TRACE_SUFFIXES);
        if !traces.is_empty() {
            let name = if run.is_empty() { dir_name(dir) } else { run.clone() };
            out.push(SessionFiles { name, path: dir.to_path_buf(), hosts: traces });
        }
        for entry in entries {
            if !entry.is_dir() || entry.file_name().is_some_and(|n| n.to_string_lossy().starts_with('.')) {
                continue;
            }
            let profile = entry.join("profile");
            if entry.file_name().is_some_and(|n| n == "plugins") && profile.is_dir() {
                if !self.may_enter(&profile) {
                    continue;
                }
                for session in self.entries(&profile) {
                    if !session.is_dir() || !self.may_enter(&session) {
                        continue;
                    }
                    let mut hosts = self.xspace_files(&session);
                    hosts.extend(self.pytorch_trace_files(&session));
                    if hosts.is_empty() {
                        continue;
                    }
                    let session_name =
                        session.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                    let name = if run.is_empty() { session_name } else { format!("{run}/{session_name}") };
                    out.push(SessionFiles { name, path: session, hosts });
                }
            } else {
                self.find_profile_sessions(root, &entry, out);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn symlink_cycles_in_a_log_directory_end() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("run");
        std::fs::create_dir(&run).unwrap();
        std::os::unix::fs::symlink(dir.path(), run.join("loop")).unwrap();
        let err = discover(dir.path()).unwrap_err().to_string();
        assert!(err.contains("no profile found"), "{err}");
    }

    /// A PyTorch job's session as `mlprof run` writes it: given by its own path, it has
    /// the same hosts as through its log directory — the samples and the Kineto trace.
    #[test]
    fn a_session_directory_keeps_its_pytorch_traces_beside_its_xspaces() {
        let logdir = tempfile::tempdir().unwrap();
        let session = logdir.path().join("plugins/profile/2026_11_26_10_06_17");
        std::fs::create_dir_all(&session).unwrap();
        std::fs::write(session.join("vm_python.xplane.pb"), b"").unwrap();
        std::fs::write(session.join("vm_42.pt.trace.json"), br#"{"traceEvents": []}"#).unwrap();
        let hosts = |path: &Path| {
            let sessions = discover(path).unwrap();
            assert_eq!(sessions.len(), 1);
            let mut names: Vec<String> = sessions[0].hosts.iter().map(|h| h.host_name.clone()).collect();
            names.sort();
            names
        };
        assert_eq!(hosts(&session), ["vm_42", "vm_python"]);
        assert_eq!(hosts(&session), hosts(logdir.path()));
    }

    /// A PyTorch run's traces beside a TensorFlow run's session, as in `examples/`: both
    /// are sessions, the traces named by their directory.
    #[test]
    fn kineto_traces_beside_a_log_directorys_sessions_are_a_session_too() {
        let logdir = tempfile::tempdir().unwrap();
        let session = logdir.path().join("tf/plugins/profile/2026_11_21_19_24_08");
        std::fs::create_dir_all(&session).unwrap();
        std::fs::write(session.join("vm.xplane.pb"), b"").unwrap();
        let runs = logdir.path().join("torch/rank_runs");
        std::fs::create_dir_all(&runs).unwrap();
        std::fs::write(runs.join("rank-0.json.gz.txt"), b"not a trace").unwrap();
        std::fs::write(runs.join("config.json"), br#"{"lr": 0.1}"#).unwrap();
        std::fs::write(runs.join("rank-0.json"), br#"{"traceEvents": []}"#).unwrap();
        std::fs::write(runs.join("rank-1.pt.trace.json"), br#"{"traceEvents": []}"#).unwrap();
        let sessions = discover(logdir.path()).unwrap();
        let names: Vec<&str> = sessions.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["tf/2026_11_21_19_24_08", "torch/rank_runs"]);
        let hosts: Vec<&str> = sessions[1].hosts.iter().map(|h| h.host_name.as_str()).collect();
        assert_eq!(hosts, ["rank-0", "rank-1"]);
    }

    #[test]
    fn a_trace_has_a_trace_events_array_not_only_the_name() {
        assert!(has_trace_events_array(b"{\"schemaVersion\": 1, \"traceEvents\" :\n ["));
        assert!(has_trace_events_array(br#"{"keys": ["traceEvents"], "traceEvents": []}"#));
        assert!(!has_trace_events_array(br#"{"keys": ["traceEvents"], "num_traceEvents": 4}"#));
        assert!(!has_trace_events_array(br#"{"traceEvents": 12}"#));
    }

    #[test]
    fn host_names_drop_known_suffixes() {
        assert_eq!(strip_any("vm.xplane.pb", XSPACE_SUFFIXES).as_deref(), Some("vm"));
        assert_eq!(strip_any("w0.123.pt.trace.json.gz", TRACE_SUFFIXES).as_deref(), Some("w0.123"));
        assert_eq!(strip_any(".json", TRACE_SUFFIXES), None);
    }
}
