//! `mlprof convert`: writes a Chrome trace or an XSpace TensorBoard log directory.
//!
//! Every file is written under a partial name and renamed when complete
//! (`mlprof_formats::output`). While converting, SIGINT, SIGTERM and SIGHUP remove the
//! partial files and exit with 128 + the signal number ([`remove_partials_on_signal`]).
//! A conversion that fails removes what it created: the files it added and the
//! directories it made, so a failed `--to xspace` leaves no empty log-directory tree.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;

use mlprof_formats::{chrome, output, xspace};
use mlprof_model::{Host, Session};

use crate::load_progress::CountingWriter;
use crate::{ConvertTarget, Failure, select};

/// Converts the selected sessions/hosts and returns the paths written, adding the bytes
/// written (before any compression) to `written_bytes` as they go.
pub fn convert(
    sessions: &[Session],
    to: ConvertTarget,
    out: &Path,
    session: Option<&str>,
    host: Option<&str>,
    written_bytes: Option<&AtomicU64>,
) -> Result<Vec<String>, Failure> {
    // Every choice is checked before anything is written.
    let plan: Vec<(PathBuf, Vec<&Host>)> = match to {
        ConvertTarget::ChromeJson => {
            let chosen = select::session(sessions, session)?;
            let hosts = select::hosts(chosen, host)?;
            vec![(chrome_path(out, &chosen.name, &hosts), hosts)]
        }
        ConvertTarget::Xspace => {
            if out.is_file() {
                return Err(Failure::input(format!(
                    "{}: is a file; --to xspace writes a TensorBoard log directory",
                    out.display()
                )));
            }
            let chosen: Vec<&Session> = match session {
                Some(_) => vec![select::session(sessions, session)?],
                None => sessions.iter().collect(),
            };
            let mut plan = Vec::new();
            for s in chosen {
                let dir = session_dir(out, &s.name);
                for h in select::hosts(s, host)? {
                    plan.push((dir.join(format!("{}.xplane.pb", file_safe(&h.name))), vec![h]));
                }
            }
            plan
        }
    };
    remove_partials_on_signal();
    let mut created = Created::default();
    let mut written = Vec::new();
    for (path, hosts) in plan {
        let result = created.write(&path, |path| match to {
            ConvertTarget::ChromeJson => output::write_atomically(path, |w| {
                chrome::write_chrome_trace(&hosts, &mut CountingWriter::new(w, written_bytes))
            }),
            ConvertTarget::Xspace => {
                let bytes = hosts.first().map(|h| xspace::encode_xspace(h)).unwrap_or_default();
                output::write_atomically(path, |w| CountingWriter::new(w, written_bytes).write_all(&bytes))
            }
        });
        if let Err(failure) = result {
            created.undo();
            return Err(failure);
        }
        written.push(path.display().to_string());
    }
    Ok(written)
}

/// Where `--to chrome-json OUT` writes: `OUT` itself, or inside it when it is a
/// directory (or ends in `/`): `<host>.trace.json.gz` for one host, else
/// `<session>.trace.json.gz` (TensorBoard's name for a trace; Perfetto and
/// chrome://tracing open it gzipped).
fn chrome_path(out: &Path, session_name: &str, hosts: &[&Host]) -> PathBuf {
    let directory = out.is_dir() || out.as_os_str().to_string_lossy().ends_with('/');
    if !directory {
        return out.to_path_buf();
    }
    let name = match hosts {
        [host] => &host.name,
        _ => session_name,
    };
    out.join(format!("{}.trace.json.gz", file_safe(name)))
}

/// What one conversion has created so far, to remove if it fails.
#[derive(Default)]
struct Created {
    /// Files that did not exist before.
    files: Vec<PathBuf>,
    /// Directories made, parents first.
    dirs: Vec<PathBuf>,
}

impl Created {
    /// Makes the missing directories above `path`, then writes it with `write`.
    fn write(
        &mut self,
        path: &Path,
        write: impl FnOnce(&Path) -> Result<(), mlprof_formats::FormatError>,
    ) -> Result<(), Failure> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            self.make_dirs(parent)?;
        }
        let existed = path.symlink_metadata().is_ok();
        write(path)?;
        if !existed {
            self.files.push(path.to_path_buf());
        }
        Ok(())
    }

    /// `std::fs::create_dir_all`, remembering each directory it makes.
    fn make_dirs(&mut self, dir: &Path) -> Result<(), Failure> {
        let missing: Vec<&Path> = dir.ancestors().take_while(|d| !d.as_os_str().is_empty() && !d.exists()).collect();
        for d in missing.into_iter().rev() {
            match std::fs::create_dir(d) {
                Ok(()) => self.dirs.push(d.to_path_buf()),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && d.is_dir() => {}
                Err(e) => return Err(Failure::input(format!("cannot create directory {}: {e}", d.display()))),
            }
        }
        Ok(())
    }

    /// Removes the files added and the directories made (those now empty), best effort.
    fn undo(&mut self) {
        for file in self.files.drain(..) {
            let _ = std::fs::remove_file(file);
        }
        for dir in self.dirs.drain(..).rev() {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// From now on, SIGINT, SIGTERM and SIGHUP remove this process's partial output files and
/// exit with 128 + the signal number (130, 143, 129). A signal the process was started
/// ignoring (`nohup`, a background job) stays ignored.
#[cfg(unix)]
pub(crate) fn remove_partials_on_signal() {
    extern "C" fn on_signal(signal: libc::c_int) {
        // Only async-signal-safe calls: the paths are pre-built C strings.
        output::for_each_partial_signal_safe(|path| {
            // SAFETY: `path` is a valid NUL-terminated string for the call.
            unsafe { libc::unlink(path.as_ptr()) };
        });
        // SAFETY: `_exit` is async-signal-safe and never returns.
        unsafe { libc::_exit(128 + signal) }
    }
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            // SAFETY: plain sigaction calls on zero-initialised structs; the handler above
            // only makes async-signal-safe calls.
            unsafe {
                let mut old: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(signal, std::ptr::null(), &mut old) != 0 || old.sa_sigaction == libc::SIG_IGN {
                    continue;
                }
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
                // The other two wait while one is being handled.
                libc::sigemptyset(&mut action.sa_mask);
                for blocked in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
                    libc::sigaddset(&mut action.sa_mask, blocked);
                }
                libc::sigaction(signal, &action, std::ptr::null_mut());
            }
        }
    });
}

/// Without POSIX signals, an interrupted conversion leaves its partial file.
#[cfg(not(unix))]
pub(crate) fn remove_partials_on_signal() {}

/// `OUT/[<run>/]plugins/profile/<session>` for a session named `[<run>/]<session>`.
fn session_dir(out: &Path, session_name: &str) -> PathBuf {
    let mut parts: Vec<&str> = session_name.split('/').filter(|p| !p.is_empty()).collect();
    let session = parts.pop().unwrap_or("session");
    let mut dir = out.to_path_buf();
    for run in parts {
        dir.push(file_safe(run));
    }
    mlprof_formats::output::profile_root(&dir).join(file_safe(session))
}

/// A name usable as one path component (XProf replaces `:` in host names with `_`).
fn file_safe(name: &str) -> String {
    mlprof_formats::output::path_component(name, "_")
}

#[cfg(test)]
mod tests {
    use super::Created;

    #[test]
    fn names_become_single_path_components() {
        let dir = super::session_dir(std::path::Path::new("out"), "train/../2026");
        assert_eq!(dir, std::path::Path::new("out/train/_/plugins/profile/2026"));
    }

    #[test]
    fn a_failed_conversion_removes_what_it_created_and_only_that() {
        let root = tempfile::tempdir().unwrap();
        let kept = root.path().join("logs/plugins");
        std::fs::create_dir_all(&kept).unwrap();
        std::fs::write(kept.join("old.pb"), b"old").unwrap();
        let mut created = Created::default();
        let first = root.path().join("logs/plugins/profile/s1/h.xplane.pb");
        let written = created.write(&first, |p| mlprof_formats::output::write_bytes_atomically(p, b"x"));
        assert!(written.is_ok() && first.is_file());
        let fail = created.write(&root.path().join("logs/plugins/profile/s2/h.xplane.pb"), |p| {
            Err(mlprof_formats::FormatError::io(p.display().to_string(), std::io::Error::other("full")))
        });
        assert!(fail.is_err());
        created.undo();
        assert!(!root.path().join("logs/plugins/profile").exists());
        assert_eq!(std::fs::read(kept.join("old.pb")).unwrap(), b"old");
    }
}
