//! Writing output files atomically: data goes to a temporary file in the destination
//! directory, which is renamed over the destination only once complete, so a failed or
//! interrupted conversion never leaves a partial file behind.

use std::io::Write;
use std::path::{Path, PathBuf};

use flate2::Compression;
use flate2::write::GzEncoder;

use crate::error::{FormatError, Result};

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

/// Fills a temporary file beside `path` (through gzip when `gz`) and renames it to `path`.
fn write_via_temp(path: &Path, gz: bool, fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>) -> Result<()> {
    let shown = path.display().to_string();
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    std::fs::create_dir_all(&dir).map_err(|e| FormatError::io(dir.display().to_string(), e))?;
    let mut tmp = tempfile::Builder::new()
        .prefix(".mlprof-partial-")
        .tempfile_in(&dir)
        .map_err(|e| FormatError::io(dir.display().to_string(), e))?;
    let result = {
        let file = std::io::BufWriter::with_capacity(1 << 20, tmp.as_file_mut());
        if gz {
            let mut enc = GzEncoder::new(file, Compression::new(6));
            fill(&mut enc).and_then(|_| enc.finish()).and_then(|mut w| w.flush())
        } else {
            let mut w = file;
            fill(&mut w).and_then(|_| w.flush())
        }
    };
    result.map_err(|e| FormatError::io(&shown, e))?;
    tmp.persist(path).map_err(|e| FormatError::io(&shown, e.error))?;
    Ok(())
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
    use super::{path_component, write_atomically, write_bytes_atomically};

    #[test]
    fn names_become_one_path_component() {
        assert_eq!(path_component("train/2026_11", "_"), "train_2026_11");
        assert_eq!(path_component("host:6009", "_"), "host_6009");
        assert_eq!(path_component("../etc", "_"), ".._etc");
        assert_eq!(path_component("a\\b\tc", "_"), "a_b_c");
        assert_eq!(path_component("..", "localhost"), "localhost");
        assert_eq!(path_component("", "_"), "_");
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
        let names: Vec<_> =
            std::fs::read_dir(dir.path().join("sub")).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names.len(), 2, "{names:?}");
    }
}
