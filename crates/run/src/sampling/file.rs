//! Writing a window of samples as `<host>_python.xplane.pb`, the one place `mlprof run`
//! and `mlprof attach` both write samples through.

use std::path::{Path, PathBuf};

use super::layout;
use super::store::Recorded;

/// The file name of a session's samples on `host`.
pub fn file_name(host: &str) -> String {
    format!("{host}_python.xplane.pb")
}

/// What writing a window did.
pub struct Written {
    /// The file, when it was written.
    pub path: Option<PathBuf>,
    /// What to say, one line each.
    pub lines: Vec<String>,
}

/// Lays out `recorded` from `begin_ns` to `end_ns` (Unix epoch ns; samples every
/// `interval_ns`) as host `host` and writes it into `dir`; nothing when the window
/// holds nothing.
pub fn write(recorded: &Recorded, host: &str, (begin_ns, end_ns): (i64, i64), interval_ns: i64, dir: &Path) -> Written {
    if recorded.samples.is_empty() && recorded.native_samples.is_empty() && recorded.readings.is_empty() {
        return Written { path: None, lines: Vec::new() };
    }
    let target = dir.join(file_name(host));
    let profile = layout::to_host(recorded, host, begin_ns, end_ns, interval_ns);
    let bytes = mlprof_formats::xspace::encode_xspace(&profile);
    let (path, line) = match mlprof_formats::output::write_bytes_atomically(&target, &bytes) {
        Ok(()) => {
            let line = format!(
                "sampling: wrote {} ({}; {})",
                target.display(),
                mlprof_model::human::bytes(bytes.len() as f64),
                recorded.summary()
            );
            (Some(target), line)
        }
        Err(error) => (None, format!("sampling: writing {}: {error}", target.display())),
    };
    let mut lines = vec![line];
    lines.extend(profile.warnings.iter().map(|w| format!("sampling: {w}")));
    Written { path, lines }
}
