//! `mlprof convert`: writes a Chrome trace or an XSpace TensorBoard log directory.
//! Every file is written under a temporary name and renamed when complete.

use std::path::Path;

use mlprof_formats::{chrome, output, xspace};
use mlprof_model::Session;

use crate::{ConvertTarget, Failure, select};

/// Converts the selected sessions/hosts and returns the paths written.
pub fn convert(
    sessions: &[Session],
    to: ConvertTarget,
    out: &Path,
    session: Option<&str>,
    host: Option<&str>,
) -> Result<Vec<String>, Failure> {
    match to {
        ConvertTarget::ChromeJson => {
            let chosen = select::session(sessions, session)?;
            let hosts = select::hosts(chosen, host)?;
            output::write_atomically(out, |w| chrome::write_chrome_trace(&hosts, w))?;
            Ok(vec![out.display().to_string()])
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
            let mut written = Vec::new();
            for s in chosen {
                let dir = session_dir(out, &s.name);
                for h in select::hosts(s, host)? {
                    let path = dir.join(format!("{}.xplane.pb", file_safe(&h.name)));
                    let bytes = xspace::encode_xspace(h);
                    output::write_atomically(&path, |w| w.write_all(&bytes))?;
                    written.push(path.display().to_string());
                }
            }
            Ok(written)
        }
    }
}

/// `OUT/[<run>/]plugins/profile/<session>` for a session named `[<run>/]<session>`.
fn session_dir(out: &Path, session_name: &str) -> std::path::PathBuf {
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
    #[test]
    fn names_become_single_path_components() {
        let dir = super::session_dir(std::path::Path::new("out"), "train/../2026");
        assert_eq!(dir, std::path::Path::new("out/train/_/plugins/profile/2026"));
    }
}
