//! Writing output files atomically: data goes to a temporary file in the destination
//! directory, which is renamed over the destination only once complete, so a failed or
//! interrupted conversion never leaves a partial file behind.

use std::io::Write;
use std::path::Path;

use flate2::Compression;
use flate2::write::GzEncoder;

use crate::error::{FormatError, Result};

/// Writes `path` atomically with whatever `fill` writes; gzip-compresses when the name
/// ends in `.gz`.
pub fn write_atomically(path: &Path, fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>) -> Result<()> {
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
    let gz = path.extension().is_some_and(|e| e == "gz");
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
