//! The profiles the server may serve: discovered under the root it was given (at start,
//! and again when [`crate::state::AppState`] rescans it), newest run first.
//!
//! The one design decision to know: requests name runs and hosts, and those names are
//! only ever looked up in this catalog — never joined into a filesystem path. Discovery
//! follows symbolic links (a TensorBoard log directory often links runs in), so every
//! host file is canonicalised and kept only when it lies inside the canonical root;
//! the others are listed in [`Catalog::refused`] and never read. A kept file is then
//! read by that canonical path, and opened confined to the canonical root (the opened
//! file's own path is checked), so a link retargeted or swapped in after discovery
//! cannot lead outside the root. Directories discovery could not read, or links that
//! lead out of the root, are skipped and listed in [`Catalog::skipped`]: one bad
//! directory never hides the others. A rescan applies the same checks. [`RunLookup`]
//! is how request parsing finds runs and hosts without knowing the server's state.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use mlprof_formats::discover::{HostFile, SessionFiles, Skipped, discover_reporting};
use mlprof_model::SourceFormat;

use crate::error::{ApiError, ServeError};

/// One run (a profile session) the server may serve.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Run {
    /// The run's name as discovery gives it (`train/2026_11_21_19_24_08`, a trace stem).
    pub name: String,
    /// The format of its files (all of a session's files share one).
    pub format: SourceFormat,
    /// Its files, one per host, each by its canonical path inside the root.
    pub files: SessionFiles,
}

impl Run {
    /// The host names, in discovery order (file names sorted).
    pub fn host_names(&self) -> impl Iterator<Item = &str> {
        self.files.hosts.iter().map(|h| h.host_name.as_str())
    }
}

/// Every run under the root, newest first.
#[derive(Clone, Debug)]
pub struct Catalog {
    root: PathBuf,
    /// The root with links resolved: every file served lies inside it.
    canonical_root: PathBuf,
    runs: Vec<Arc<Run>>,
    refused: Vec<PathBuf>,
    skipped: Vec<Skipped>,
}

impl Catalog {
    /// Discovers the runs behind `root` (any path `mlprof analyze` accepts), keeping
    /// only host files whose canonical path lies inside the canonical root; an error
    /// when there is nothing to serve.
    pub fn discover(root: &Path) -> Result<Catalog, ServeError> {
        let catalog = Catalog::scan(root)?;
        if catalog.runs.is_empty()
            && let Some(first) = catalog.refused.first()
        {
            let root = root.display().to_string();
            return Err(ServeError::NothingInside { root, first: first.display().to_string() });
        }
        Ok(catalog)
    }

    /// Discovers the runs behind `root` again, as [`Catalog::discover`] does, for a
    /// server already running: a root where no profile can be found now (emptied,
    /// removed, unreadable) has no runs rather than an error.
    pub fn rediscover(root: &Path) -> Catalog {
        Catalog::scan(root).unwrap_or_else(|_| Catalog {
            root: root.to_path_buf(),
            canonical_root: root.canonicalize().unwrap_or_else(|_| root.to_path_buf()),
            runs: Vec::new(),
            refused: Vec::new(),
            skipped: Vec::new(),
        })
    }

    /// The runs behind `root` whose host files lie inside it, and the refused files.
    fn scan(root: &Path) -> Result<Catalog, ServeError> {
        let found = discover_reporting(root)?;
        let shown = root.display().to_string();
        let canonical_root =
            root.canonicalize().map_err(|e| ServeError::Discover(mlprof_formats::FormatError::io(&shown, e)))?;
        let mut refused = Vec::new();
        let mut runs = Vec::new();
        for mut session in found.sessions {
            session.hosts.retain_mut(|file| match file.path.canonicalize() {
                Ok(canonical) if canonical.starts_with(&canonical_root) => {
                    file.path = canonical;
                    true
                }
                _ => {
                    refused.push(file.path.clone());
                    false
                }
            });
            let Some(format) = session.hosts.first().map(|h| h.format) else { continue };
            runs.push(Run { name: session.name.clone(), format, files: session });
        }
        sort_newest_first(&mut runs);
        Ok(Catalog {
            root: root.to_path_buf(),
            canonical_root,
            runs: runs.into_iter().map(Arc::new).collect(),
            refused,
            skipped: found.skipped,
        })
    }

    /// The path the server was given, as given.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The root with links resolved; files are read only from inside it.
    pub fn canonical_root(&self) -> &Path {
        &self.canonical_root
    }

    /// Parts of the root discovery could not read, or links leading out of it.
    pub fn skipped(&self) -> &[Skipped] {
        &self.skipped
    }

    /// The runs, newest first.
    pub fn runs(&self) -> &[Arc<Run>] {
        &self.runs
    }

    /// The run called `name`.
    pub fn run(&self, name: &str) -> Option<&Arc<Run>> {
        self.runs.iter().find(|run| run.name == name)
    }

    /// The run called `name`, or a 404 naming the known runs.
    pub fn find_run(&self, name: &str) -> Result<Arc<Run>, ApiError> {
        self.run(name).cloned().ok_or_else(|| {
            let known: Vec<&str> = self.runs.iter().map(|r| r.name.as_str()).collect();
            ApiError::not_found(format!("no run named {name:?}; runs: {}", known.join(", ")))
        })
    }

    /// The file of host `host` of run `run`, or a 404 naming the known runs or hosts.
    pub fn find_host_file(&self, run: &str, host: &str) -> Result<HostFile, ApiError> {
        let entry = self.find_run(run)?;
        entry.files.hosts.iter().find(|file| file.host_name == host).cloned().ok_or_else(|| {
            let known: Vec<&str> = entry.host_names().collect();
            ApiError::not_found(format!("no host named {host:?} in run {run}; hosts: {}", known.join(", ")))
        })
    }

    /// The names of this catalog's runs that `newer` no longer has, or has with other
    /// files: what a server must forget when `newer` replaces this catalog.
    pub fn gone_or_changed(&self, newer: &Catalog) -> Vec<String> {
        self.runs
            .iter()
            .filter(|run| newer.run(&run.name).is_none_or(|now| now != *run))
            .map(|run| run.name.clone())
            .collect()
    }

    /// Host files discovery found but the server refuses: they lie outside the root.
    pub fn refused(&self) -> &[PathBuf] {
        &self.refused
    }
}

/// Where request parameters are checked against the runs served now: the run and host
/// names a request gives, 404 otherwise (the server's state implements it, so request
/// parsing depends on this module, not on the state).
pub trait RunLookup {
    /// The run called `name` (404 naming the known runs otherwise).
    fn run(&self, name: &str) -> Result<Arc<Run>, ApiError>;

    /// The file of host `host` of run `run` (404 otherwise).
    fn host_file(&self, run: &str, host: &str) -> Result<HostFile, ApiError>;
}

/// A shared lookup looks up as the one it shares (handlers hold the state in an `Arc`).
impl<T: RunLookup + ?Sized> RunLookup for Arc<T> {
    fn run(&self, name: &str) -> Result<Arc<Run>, ApiError> {
        (**self).run(name)
    }

    fn host_file(&self, run: &str, host: &str) -> Result<HostFile, ApiError> {
        (**self).host_file(run, host)
    }
}

/// Orders runs newest first: session names are timestamps, so by the last part of the
/// name (the session directory) descending, then by the whole name (the TensorBoard
/// run) ascending.
fn sort_newest_first(runs: &mut [Run]) {
    fn session_part(name: &str) -> &str {
        name.rsplit('/').next().unwrap_or(name)
    }
    runs.sort_by(|a, b| session_part(&b.name).cmp(session_part(&a.name)).then_with(|| a.name.cmp(&b.name)));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(name: &str) -> Run {
        let files = SessionFiles { name: name.to_string(), path: PathBuf::from(name), hosts: Vec::new() };
        Run { name: name.to_string(), format: SourceFormat::Xspace, files }
    }

    #[cfg(unix)]
    #[test]
    fn host_files_are_kept_by_their_canonical_path_so_a_retargeted_link_is_not_followed() {
        let fixture = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/data/kineto/hta/timeline_analysis/sampled_rank-0.json.gz");
        let root = tempfile::tempdir().expect("root");
        let outside = tempfile::tempdir().expect("outside");
        // A blob with no profile name inside the root, served through a link to it.
        let blob = root.path().join("blob");
        std::fs::copy(&fixture, &blob).expect("copied");
        std::fs::copy(&fixture, outside.path().join("secret.json.gz")).expect("copied");
        let link = root.path().join("rank-0.json.gz");
        std::os::unix::fs::symlink(&blob, &link).expect("link");

        let catalog = Catalog::discover(root.path()).expect("discovered");
        let kept = &catalog.runs()[0].files.hosts[0].path;
        assert_eq!(kept, &blob.canonicalize().expect("canonical"));

        // Retargeted after the start: the catalog still names the file inside.
        std::fs::remove_file(&link).expect("unlinked");
        std::os::unix::fs::symlink(outside.path().join("secret.json.gz"), &link).expect("relinked");
        assert!(kept.starts_with(root.path().canonicalize().expect("canonical root")));
        assert!(catalog.refused().is_empty());
        // Read by that path, with the format and host name found through the link.
        let session = mlprof_formats::discover::load_session(&catalog.runs()[0].files).expect("loads");
        assert_eq!(session.hosts.len(), 1);
        assert!(session.hosts[0].source_path.ends_with("blob"), "{}", session.hosts[0].source_path);
    }

    #[test]
    fn newest_session_first_whatever_the_run_prefix() {
        let mut runs = vec![run("train/2026_01_01"), run("validation/2026_01_01"), run("train/2026_02_01")];
        sort_newest_first(&mut runs);
        let names: Vec<&str> = runs.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["train/2026_02_01", "train/2026_01_01", "validation/2026_01_01"]);
    }
}
