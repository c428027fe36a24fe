//! Writing output files atomically: data goes to a partial file in the destination
//! directory, which is renamed over the destination only once complete, so a failed
//! write never leaves a half-written file under the final name.
//!
//! The one design decision to know: partial files are named
//! `.mlprof-partial-<pid>-<hex>` and, while they exist, are listed in a process-wide
//! registry of pre-built C strings that a signal handler at the binary's edge walks
//! without allocating or locking ([`for_each_partial_signal_safe`]), so an interrupted
//! command (SIGINT, SIGTERM, SIGHUP) removes them. A partial left by a process killed
//! outright (`kill -9`) is swept by the next write into the same directory, once no
//! process with its pid exists (Linux, via `/proc`) and only if it has the same owner as
//! the new partial. Files are created with mode 0666 less the umask, as any program's;
//! replacing an existing file keeps that file's permission bits.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use flate2::Compression;
use flate2::write::GzEncoder;

use crate::error::{FormatError, Result};

/// How every partial file's name starts; the rest is `<pid>-<lower-case hex>`.
pub const PARTIAL_PREFIX: &str = ".mlprof-partial-";

/// Writes `path` atomically with whatever `fill` writes; gzip-compresses when the name
/// ends in `.gz`.
pub fn write_atomically(path: &Path, fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>) -> Result<()> {
    let gz = path.extension().is_some_and(|e| e == "gz");
    write_via_temp(path, gz, fill)
}

/// Writes `bytes` to `path` atomically, as they are: never compressed, whatever the name
/// (for data that arrives already encoded, such as a profiler server's `trace.json.gz`).
pub fn write_bytes_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    write_via_temp(path, false, |w| w.write_all(bytes))
}

/// Fills a partial file beside `path` (through gzip when `gz`) and renames it to `path`.
fn write_via_temp(path: &Path, gz: bool, fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>) -> Result<()> {
    let shown = path.display().to_string();
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&dir)
        .map_err(|e| FormatError::io(format!("cannot create directory {}", dir.display()), e))?;
    let mut partial = Partial::create(&dir)?;
    sweep_stale_partials(&dir, &partial);
    let result = {
        let file = std::io::BufWriter::with_capacity(1 << 20, &mut partial.file);
        if gz {
            let mut enc = GzEncoder::new(file, Compression::new(6));
            fill(&mut enc).and_then(|_| enc.finish()).and_then(|mut w| w.flush())
        } else {
            let mut w = file;
            fill(&mut w).and_then(|_| w.flush())
        }
    };
    result.map_err(|e| FormatError::io(&shown, e))?;
    partial.keep_mode_of(path).map_err(|e| FormatError::io(&shown, e))?;
    partial.persist(path).map_err(|e| FormatError::io(&shown, e))
}

/// An open partial file, registered for removal on a signal; dropped unpersisted, it is
/// removed.
struct Partial {
    /// Where it is.
    path: PathBuf,
    /// Open for writing.
    file: File,
    /// Its registry slot (`None` when the registry was full or the path has a NUL).
    slot: Option<usize>,
    /// Whether it has been renamed to its final name.
    persisted: bool,
}

impl Partial {
    /// Creates a new partial file in `dir`, with mode 0666 less the umask. A directory that
    /// refuses new files gives `cannot write into DIR: <the OS error>`.
    fn create(dir: &Path) -> Result<Partial> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let pid = std::process::id();
        let seed =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
        let refused = |e| FormatError::io(format!("cannot write into {}", dir.display()), e);
        let mut last = std::io::Error::from(std::io::ErrorKind::AlreadyExists);
        for _ in 0..64 {
            let unique = seed.wrapping_add(NEXT.fetch_add(1, Ordering::Relaxed));
            let path = dir.join(format!("{PARTIAL_PREFIX}{pid}-{unique:x}"));
            // Registered before it exists, so no signal finds it on disk but unlisted.
            let slot = registry::register(&path);
            match OpenOptions::new().write(true).create_new(true).open(&path) {
                Ok(file) => return Ok(Partial { path, file, slot, persisted: false }),
                Err(e) => {
                    registry::unregister(slot);
                    if e.kind() != std::io::ErrorKind::AlreadyExists {
                        return Err(refused(e));
                    }
                    last = e;
                }
            }
        }
        Err(refused(last))
    }

    /// Gives the partial the permission bits of the file it will replace, if there is one.
    fn keep_mode_of(&self, destination: &Path) -> std::io::Result<()> {
        #[cfg(unix)]
        if let Ok(meta) = std::fs::metadata(destination)
            && meta.is_file()
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = meta.permissions().mode() & 0o777;
            self.file.set_permissions(std::fs::Permissions::from_mode(mode))?;
        }
        #[cfg(not(unix))]
        let _ = destination;
        Ok(())
    }

    /// Renames the partial to `destination`.
    fn persist(mut self, destination: &Path) -> std::io::Result<()> {
        std::fs::rename(&self.path, destination)?;
        self.persisted = true;
        Ok(())
    }
}

impl Drop for Partial {
    fn drop(&mut self) {
        if !self.persisted {
            let _ = std::fs::remove_file(&self.path);
        }
        registry::unregister(self.slot.take());
    }
}

/// The pid in `name` when it is one of our partial files' names,
/// `.mlprof-partial-<pid>-<lower-case hex>`; anything else (another program's file, an
/// older mlprof's `.mlprof-partial-XXXXXX`) gives `None`.
pub fn partial_pid(name: &str) -> Option<u32> {
    let (pid, unique) = name.strip_prefix(PARTIAL_PREFIX)?.split_once('-')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let hex = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if digits(pid) && hex(unique) { pid.parse().ok() } else { None }
}

/// Removes, best effort, the partial files in `dir` left by processes that no longer
/// exist (killed before they could clean up), owned by the same user as `ours`. Only
/// where `/proc` tells which processes exist; elsewhere nothing is removed.
fn sweep_stale_partials(dir: &Path, ours: &Partial) {
    let proc = Path::new("/proc");
    if !proc.join("self").exists() {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let me = std::process::id();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(partial_pid) else { continue };
        if pid == me || proc.join(pid.to_string()).exists() {
            continue;
        }
        let Ok(meta) = entry.metadata() else { continue };
        if meta.is_file() && same_owner(&meta, ours) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Whether the file described by `meta` has the owner of the partial `ours`.
fn same_owner(meta: &std::fs::Metadata, ours: &Partial) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        ours.file.metadata().is_ok_and(|m| m.uid() == meta.uid())
    }
    #[cfg(not(unix))]
    {
        let _ = (meta, ours);
        false
    }
}

/// Calls `f` with the path of every partial file this process may have on disk, without
/// allocating or taking a lock, so a signal handler may call it (then unlink each path and
/// `_exit`). Meant for a process about to exit: partial files finished after the first
/// call keep their path's memory (a few bytes each) rather than free it under the handler.
#[cfg(unix)]
pub fn for_each_partial_signal_safe(f: impl FnMut(&std::ffi::CStr)) {
    registry::for_each(f);
}

/// The process-wide list of partial paths, as NUL-terminated strings in fixed atomic
/// slots. A path is freed on unregistering only while no signal handler has started
/// walking the slots (the swap of the slot and the load of `WALKING` on one side, the
/// store of `WALKING` and the load of the slot on the other, are all sequentially
/// consistent, so at least one side sees the other).
#[cfg(unix)]
mod registry {
    use std::ffi::{CStr, CString, c_char};
    use std::os::unix::ffi::OsStrExt;
    use std::path::Path;
    use std::ptr;
    use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering::SeqCst};

    /// Partial files listed at once; more are still written, only not removed on a signal.
    const SLOTS: usize = 64;

    static PATHS: [AtomicPtr<c_char>; SLOTS] = [const { AtomicPtr::new(ptr::null_mut()) }; SLOTS];
    static WALKING: AtomicBool = AtomicBool::new(false);

    /// Lists `path`; returns its slot, or `None` if it cannot be listed.
    pub(super) fn register(path: &Path) -> Option<usize> {
        let raw = CString::new(path.as_os_str().as_bytes()).ok()?.into_raw();
        for (index, slot) in PATHS.iter().enumerate() {
            if slot.compare_exchange(ptr::null_mut(), raw, SeqCst, SeqCst).is_ok() {
                return Some(index);
            }
        }
        // SAFETY: `raw` came from `CString::into_raw` above and was never shared.
        drop(unsafe { CString::from_raw(raw) });
        None
    }

    /// Takes the path in `slot` off the list.
    pub(super) fn unregister(slot: Option<usize>) {
        let Some(slot) = slot.and_then(|i| PATHS.get(i)) else { return };
        let raw = slot.swap(ptr::null_mut(), SeqCst);
        if !raw.is_null() && !WALKING.load(SeqCst) {
            // SAFETY: `raw` came from `CString::into_raw` in `register`; the swap made this
            // the only owner, and no walker can have loaded it (see the module docs).
            drop(unsafe { CString::from_raw(raw) });
        }
    }

    /// Calls `f` with every listed path.
    pub(super) fn for_each(mut f: impl FnMut(&CStr)) {
        WALKING.store(true, SeqCst);
        for slot in &PATHS {
            let raw = slot.load(SeqCst);
            if !raw.is_null() {
                // SAFETY: a listed pointer is a live NUL-terminated string: once `WALKING`
                // is set, `unregister` no longer frees.
                f(unsafe { CStr::from_ptr(raw) });
            }
        }
    }
}

/// Without signals to handle, nothing is listed.
#[cfg(not(unix))]
mod registry {
    use std::path::Path;

    pub(super) fn register(_: &Path) -> Option<usize> {
        None
    }

    pub(super) fn unregister(_: Option<usize>) {}
}

/// `<logdir>/plugins/profile`, the directory of TensorBoard's profile sessions
/// (TensorFlow's `repository_root`).
pub fn profile_root(logdir: &Path) -> PathBuf {
    logdir.join("plugins").join("profile")
}

/// `name` made usable as one path component, as XProf names profile files: `:`, `/`, `\`
/// and control characters become `_` (so `host:6009` gives `host_6009`), and a name that
/// would be empty, `.` or `..` becomes `fallback`.
pub fn path_component(name: &str, fallback: &str) -> String {
    let cleaned: String =
        name.chars().map(|c| if matches!(c, ':' | '/' | '\\') || c.is_control() { '_' } else { c }).collect();
    if cleaned.is_empty() || cleaned == "." || cleaned == ".." { fallback.to_string() } else { cleaned }
}

#[cfg(test)]
mod tests {
    use super::{PARTIAL_PREFIX, partial_pid, path_component, write_atomically, write_bytes_atomically};
    use std::path::Path;

    #[test]
    fn names_become_one_path_component() {
        assert_eq!(path_component("train/2026_11", "_"), "train_2026_11");
        assert_eq!(path_component("host:6009", "_"), "host_6009");
        assert_eq!(path_component("../etc", "_"), ".._etc");
        assert_eq!(path_component("a\\b\tc", "_"), "a_b_c");
        assert_eq!(path_component("..", "localhost"), "localhost");
        assert_eq!(path_component("", "_"), "_");
    }

    fn names_in(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> =
            std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        names
    }

    #[test]
    fn raw_bytes_are_never_recompressed_and_no_temporary_file_stays() {
        let dir = tempfile::tempdir().unwrap();
        let gz_named = dir.path().join("sub/host.trace.json.gz");
        let already_gzipped = [0x1f, 0x8b, 8, 0, 1, 2, 3];
        write_bytes_atomically(&gz_named, &already_gzipped).unwrap();
        assert_eq!(std::fs::read(&gz_named).unwrap(), already_gzipped);
        let compressed = dir.path().join("sub/other.json.gz");
        write_atomically(&compressed, |w| w.write_all(b"{}")).unwrap();
        assert_ne!(std::fs::read(&compressed).unwrap(), b"{}", "write_atomically still gzips .gz names");
        assert_eq!(names_in(&dir.path().join("sub")), ["host.trace.json.gz", "other.json.gz"]);
    }

    #[test]
    fn a_failed_fill_leaves_nothing_and_keeps_the_old_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.json");
        std::fs::write(&path, b"old").unwrap();
        let failed = write_atomically(&path, |w| {
            w.write_all(b"new, half")?;
            Err(std::io::Error::other("disk on fire"))
        });
        let message = failed.unwrap_err().to_string();
        assert_eq!(message, format!("{}: disk on fire", path.display()));
        assert_eq!(std::fs::read(&path).unwrap(), b"old");
        assert_eq!(names_in(dir.path()), ["out.json"]);
    }

    #[test]
    fn partial_names_carry_the_pid_and_only_ours_match() {
        assert_eq!(partial_pid(".mlprof-partial-4242-1a2b3c"), Some(4242));
        for other in [
            ".mlprof-partial-AbC123",
            ".mlprof-partial-4242-",
            ".mlprof-partial--1a",
            ".mlprof-partial-42x-1a",
            ".mlprof-partial-4242-1A",
            ".mlprof-partial-4242-1a.json",
            "mlprof-partial-4242-1a",
            "out.json",
        ] {
            assert_eq!(partial_pid(other), None, "{other}");
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn stale_partials_of_dead_processes_are_swept_and_live_ones_kept() {
        let dir = tempfile::tempdir().unwrap();
        // pid_max is at most 2^22 on Linux, so this pid exists nowhere.
        let dead = dir.path().join(format!("{PARTIAL_PREFIX}4294967295-abc"));
        let live = dir.path().join(format!("{PARTIAL_PREFIX}1-abc"));
        let foreign = dir.path().join(".mlprof-partial-XyZ123");
        for path in [&dead, &live, &foreign] {
            std::fs::write(path, b"half").unwrap();
        }
        write_bytes_atomically(&dir.path().join("out.pb"), b"x").unwrap();
        assert!(!dead.exists(), "the dead process's partial is swept");
        assert!(live.exists() && foreign.exists(), "pid 1 lives; other names are not ours");
    }

    #[cfg(unix)]
    #[test]
    fn files_get_the_umask_mode_and_replacing_keeps_the_old_mode() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        let fresh = dir.path().join("fresh.json");
        write_bytes_atomically(&fresh, b"{}").unwrap();
        // The test process's umask is unknown; a new file is 0666 less some umask, never 0600 by fiat.
        assert_eq!(mode(&fresh) & 0o600, 0o600);
        let kept = dir.path().join("kept.json");
        std::fs::write(&kept, b"old").unwrap();
        std::fs::set_permissions(&kept, std::fs::Permissions::from_mode(0o640)).unwrap();
        write_bytes_atomically(&kept, b"new").unwrap();
        assert_eq!(mode(&kept), 0o640);
        assert_eq!(std::fs::read(&kept).unwrap(), b"new");
    }

    #[test]
    fn a_directory_that_refuses_files_is_named() {
        // /proc refuses new files even for root; elsewhere the test has nothing to check.
        let proc = Path::new("/proc");
        if !proc.join("self").exists() {
            return;
        }
        let message = write_bytes_atomically(&proc.join("version"), b"x").unwrap_err().to_string();
        assert!(message.starts_with("cannot write into /proc: "), "{message}");
        assert!(!message.contains(PARTIAL_PREFIX) && !message.contains('\n'), "{message}");
    }

    #[cfg(unix)]
    #[test]
    fn partials_are_listed_while_they_exist() {
        use std::os::unix::ffi::OsStrExt;
        let dir = tempfile::tempdir().unwrap();
        let listed = || {
            let mut found = Vec::new();
            // Sets the walking flag for the rest of this test process: later partials leak their path.
            super::for_each_partial_signal_safe(|p| {
                let path = Path::new(std::ffi::OsStr::from_bytes(p.to_bytes()));
                if path.parent() == Some(dir.path()) {
                    found.push(path.to_path_buf());
                }
            });
            found
        };
        let path = dir.path().join("out.pb");
        let mut during = Vec::new();
        write_atomically(&path, |w| {
            during = listed();
            w.write_all(b"x")
        })
        .unwrap();
        assert_eq!(during.len(), 1, "{during:?}");
        let name = during[0].file_name().unwrap().to_str().unwrap();
        assert_eq!(partial_pid(name), Some(std::process::id()));
        assert!(listed().is_empty(), "unlisted once renamed");
        assert_eq!(names_in(dir.path()), ["out.pb"]);
    }
}
