//! Writing one worker's answer where TensorBoard looks for it:
//! `<logdir>/plugins/profile/<session>/<host_port>.xplane.pb`.
//!
//! Three kinds of server answer, oldest last handled first: an `xspace` (servers that honour
//! `emit_xspace`) is written byte for byte; `tool_data` entries (servers that convert on
//! their side) are each written as `<host_port>.<name>`, as TensorFlow's `SaveProfile`
//! does, the name sanitised ([`file_name_safe`]); an answer with neither means the server
//! wrote the XSpace to `<repository_root>/<session>/<host_port>.xplane.pb` on its own disk,
//! which this machine may or may not see.
//!
//! The one design decision to know: the server is not trusted. An XSpace (or an
//! `xplane.pb` tool entry) is decoded with the project's reader before anything is
//! written, and one that is empty or does not decode is an error
//! ([`CaptureError::InvalidXspace`]) that writes nothing, so no garbage is ever reported
//! as a profile. Every file is written atomically, and a failure removes the files
//! already written for that answer, so no partial profile is left behind.

use std::fmt;
use std::path::{Path, PathBuf};

use mlprof_formats::FormatError;
use mlprof_formats::output::write_bytes_atomically;

use super::error::CaptureError;
use crate::address::Target;
use crate::proto::ProfileResponse;
use crate::untrusted::file_name_safe;

/// Where a worker's profile ended up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Captured {
    /// This client wrote `files` (one `.xplane.pb`, or an old server's tool data).
    Written {
        /// The files written, in the session directory.
        files: Vec<PathBuf>,
        /// Their total size, in bytes.
        bytes: u64,
        /// Whether they came as `tool_data` (a server older than `emit_xspace`, or an
        /// `mlprof agent` answering for several jobs).
        tool_data: bool,
    },
    /// The server wrote the XSpace itself, at `path`, which this machine sees too (the
    /// server runs here, or the log directory is shared).
    ServerWroteHere {
        /// The file.
        path: PathBuf,
    },
    /// The server wrote the XSpace to its own disk at `path`, which is not on this machine.
    ServerWroteRemote {
        /// The file's path on the server's machine.
        path: PathBuf,
    },
}

impl Captured {
    /// The profile files on this machine (none for [`Captured::ServerWroteRemote`]).
    pub fn local_files(&self) -> &[PathBuf] {
        match self {
            Captured::Written { files, .. } => files,
            Captured::ServerWroteHere { path } => std::slice::from_ref(path),
            Captured::ServerWroteRemote { .. } => &[],
        }
    }
}

impl fmt::Display for Captured {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Captured::Written { files, bytes, tool_data: false } => {
                let shown: Vec<String> = files.iter().map(|p| p.display().to_string()).collect();
                write!(f, "wrote {} ({})", shown.join(", "), mlprof_model::human::bytes(*bytes as f64))
            }
            Captured::Written { files, bytes, tool_data: true } => {
                let names: Vec<String> =
                    files.iter().filter_map(|p| p.file_name()).map(|n| n.to_string_lossy().into_owned()).collect();
                let dir = files.first().and_then(|p| p.parent()).map(|p| p.display().to_string()).unwrap_or_default();
                write!(
                    f,
                    "wrote {} in {dir} ({}, as tool data)",
                    names.join(", "),
                    mlprof_model::human::bytes(*bytes as f64)
                )
            }
            Captured::ServerWroteHere { path } => write!(
                f,
                "the server wrote {} itself (it does not return the XSpace; this machine sees the same directory)",
                path.display()
            ),
            Captured::ServerWroteRemote { path } => write!(
                f,
                "the server does not return the XSpace (it ignores emit_xspace: an older TensorFlow/JAX) and wrote \
                 it to its own disk, at {0} on that server's machine; copy that file to the same path here \
                 (e.g. scp HOST:{0} {0}), or capture into a log directory both machines share (NFS, GCS)",
                path.display()
            ),
        }
    }
}

/// Saves `response` from `target` into `session_dir` (`<repository_root>/<session>`, the
/// same text as sent in the request, so also where a server writes on its own).
pub(crate) fn save(response: ProfileResponse, target: &Target, session_dir: &Path) -> Result<Captured, CaptureError> {
    let stem = target.file_stem();
    let xplane = session_dir.join(format!("{stem}.xplane.pb"));
    if let Some(xspace) = response.xspace {
        check_xspace(&xspace)?;
        write_bytes_atomically(&xplane, &xspace)?;
        return Ok(Captured::Written { files: vec![xplane], bytes: xspace.len() as u64, tool_data: false });
    }
    if !response.tool_data.is_empty() {
        let named: Vec<(String, &[u8])> =
            response.tool_data.iter().map(|t| (file_name_safe(&t.name), t.data.as_slice())).collect();
        for (name, data) in &named {
            if name == "xplane.pb" || name.ends_with(".xplane.pb") {
                check_xspace(data)?;
            }
        }
        let mut files = Vec::with_capacity(named.len());
        let mut bytes = 0;
        for (name, data) in named {
            let path = session_dir.join(format!("{stem}.{name}"));
            if let Err(e) = write_bytes_atomically(&path, data) {
                remove_written(&files, session_dir);
                return Err(e.into());
            }
            bytes += data.len() as u64;
            if !files.contains(&path) {
                files.push(path);
            }
        }
        return Ok(Captured::Written { files, bytes, tool_data: true });
    }
    if xplane.is_file() {
        Ok(Captured::ServerWroteHere { path: xplane })
    } else {
        Ok(Captured::ServerWroteRemote { path: xplane })
    }
}

/// Decodes `bytes` as an XSpace (and drops the result): an empty answer, or one that is
/// not an XSpace, is [`CaptureError::InvalidXspace`].
fn check_xspace(bytes: &[u8]) -> Result<(), CaptureError> {
    let invalid = |reason: String| CaptureError::InvalidXspace { bytes: bytes.len() as u64, reason };
    if bytes.is_empty() {
        return Err(invalid("no data".to_string()));
    }
    match mlprof_formats::xspace::read_xspace(bytes, "", "") {
        Ok(_) => Ok(()),
        Err(FormatError::Protobuf { offset, message, .. }) => Err(invalid(format!("byte offset {offset}: {message}"))),
        Err(FormatError::Unrecognized { message, .. }) => Err(invalid(message)),
        Err(other) => Err(invalid(other.to_string())),
    }
}

/// Best-effort cleanup after a failed save: the files, then the directory if now empty.
fn remove_written(files: &[PathBuf], session_dir: &Path) {
    for file in files {
        let _ = std::fs::remove_file(file);
    }
    let _ = std::fs::remove_dir(session_dir);
}

#[cfg(test)]
mod tests {
    use super::{Captured, save};
    use crate::address::Target;
    use crate::client::error::CaptureError;
    use crate::proto::{ProfileResponse, ProfileToolData};

    fn target() -> Target {
        Target::parse("grpc://worker-0:6009").unwrap()
    }

    fn tool(name: &str, data: &[u8]) -> ProfileToolData {
        ProfileToolData { name: name.to_string(), data: data.to_vec() }
    }

    /// The smallest XSpace the reader accepts: one `hostnames` entry (field 4, "h").
    const TINY_XSPACE: [u8; 3] = [0x22, 1, b'h'];

    #[test]
    fn xspace_is_written_as_host_port_xplane_pb() {
        let dir = tempfile::tempdir().unwrap();
        let session = dir.path().join("plugins/profile/s1");
        let response = ProfileResponse { xspace: Some(TINY_XSPACE.to_vec()), ..Default::default() };
        let captured = save(response, &target(), &session).unwrap();
        let path = session.join("worker-0_6009.xplane.pb");
        assert_eq!(captured, Captured::Written { files: vec![path.clone()], bytes: 3, tool_data: false });
        assert_eq!(std::fs::read(path).unwrap(), TINY_XSPACE);
    }

    #[test]
    fn an_xspace_that_does_not_decode_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let session = dir.path().join("s");
        for garbage in [vec![], vec![0xff; 7], b"ok".to_vec(), vec![0x28, 1]] {
            let response = ProfileResponse { xspace: Some(garbage.clone()), ..Default::default() };
            let error = save(response, &target(), &session).unwrap_err();
            assert!(matches!(error, CaptureError::InvalidXspace { .. }), "{garbage:?}: {error}");
            let line = error.to_string();
            assert!(line.contains("invalid XSpace (") && line.ends_with("; nothing was written"), "{line}");
            assert!(!session.exists(), "{garbage:?}");
        }
        let xplane_tool = ProfileResponse { tool_data: vec![tool("xplane.pb", b"junk")], ..Default::default() };
        assert!(matches!(save(xplane_tool, &target(), &session), Err(CaptureError::InvalidXspace { .. })));
        assert!(!session.exists());
    }

    #[test]
    fn tool_data_is_written_per_entry_and_not_recompressed() {
        let dir = tempfile::tempdir().unwrap();
        let gz = [0x1f, 0x8b, 8, 0];
        let response = ProfileResponse {
            tool_data: vec![tool("xplane.pb", &TINY_XSPACE), tool("trace.json.gz", &gz)],
            ..Default::default()
        };
        let captured = save(response, &target(), dir.path()).unwrap();
        assert_eq!(captured.local_files().len(), 2);
        assert_eq!(std::fs::read(dir.path().join("worker-0_6009.xplane.pb")).unwrap(), TINY_XSPACE);
        assert_eq!(std::fs::read(dir.path().join("worker-0_6009.trace.json.gz")).unwrap(), gz);
    }

    #[test]
    fn hostile_tool_names_are_sanitised_into_the_session_directory() {
        let dir = tempfile::tempdir().unwrap();
        let session = dir.path().join("s");
        let response = ProfileResponse {
            tool_data: vec![tool("/../../evil", b"y"), tool("a\u{1b}[2J\rb.pb", b"z"), tool("..", b"w")],
            ..Default::default()
        };
        let captured = save(response, &target(), &session).unwrap();
        let names: Vec<String> =
            captured.local_files().iter().map(|p| p.strip_prefix(&session).unwrap().display().to_string()).collect();
        assert_eq!(names, ["worker-0_6009._.__.__evil", "worker-0_6009.a__2J_b.pb", "worker-0_6009._."]);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "nothing beside the session directory");
    }

    #[test]
    fn no_data_means_the_server_wrote_it_somewhere() {
        let dir = tempfile::tempdir().unwrap();
        let remote = save(ProfileResponse::default(), &target(), dir.path()).unwrap();
        let path = dir.path().join("worker-0_6009.xplane.pb");
        assert_eq!(remote, Captured::ServerWroteRemote { path: path.clone() });
        assert!(remote.local_files().is_empty());
        assert!(remote.to_string().contains(&format!("at {} on that server's machine", path.display())));
        std::fs::write(&path, b"written by a server on this machine").unwrap();
        let here = save(ProfileResponse::default(), &target(), dir.path()).unwrap();
        assert_eq!(here, Captured::ServerWroteHere { path });
    }
}
