//! Which keys of a store are profiles, and where each one goes in a local cache.
//!
//! A key relative to the prefix is taken only when it reads
//! `[<run>/…]plugins/profile/<session>/<file>` (TensorBoard's layout, at most
//! [`MAX_RUN_DEPTH`] run parts), `<file>` is a profile (an XSpace or a trace), and every
//! part is a plain name: no empty, `.` or `..` part, none starting with `.`, no `/`,
//! `\` or control character, at most [`MAX_PART_BYTES`] bytes. Such a key, joined to
//! the cache root, always stays inside it.

use std::path::PathBuf;

/// The most run parts before `plugins/profile` (TensorBoard nests runs a few levels deep).
pub const MAX_RUN_DEPTH: usize = 8;
/// The longest part, in bytes (a file name's limit on Linux).
pub const MAX_PART_BYTES: usize = 255;
/// The endings of the files mirrored: XSpaces and traces, as `mlprof serve` reads them.
pub const PROFILE_SUFFIXES: &[&str] = &[".xplane.pb", ".xplane.pb.gz", ".json", ".json.gz"];

/// One profile file of a store, as the cache holds it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ProfileKey {
    /// The session directory's parts, relative to the prefix and to the cache root
    /// (`<run>…/plugins/profile/<session>`).
    pub session: Vec<String>,
    /// The file's name in it.
    pub file: String,
}

impl ProfileKey {
    /// The session directory under `root`.
    pub fn session_dir(&self, root: &std::path::Path) -> PathBuf {
        self.session.iter().fold(root.to_path_buf(), |dir, part| dir.join(part))
    }
}

/// Why a key is not taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotProfile {
    /// It is not in TensorBoard's layout, or not a profile file (left out quietly).
    Elsewhere,
    /// A part could name something outside the cache or is not a plain name.
    Unsafe,
}

/// Where `parts` (a key relative to the prefix) goes, if it is a profile.
pub fn profile_key(parts: &[&str]) -> Result<ProfileKey, NotProfile> {
    if !parts.iter().all(|part| plain(part)) {
        return Err(NotProfile::Unsafe);
    }
    let [runs @ .., plugins, profile, session, file] = parts else { return Err(NotProfile::Elsewhere) };
    if *plugins != "plugins" || *profile != "profile" || runs.len() > MAX_RUN_DEPTH {
        return Err(NotProfile::Elsewhere);
    }
    if !PROFILE_SUFFIXES.iter().any(|suffix| file.len() > suffix.len() && file.ends_with(suffix)) {
        return Err(NotProfile::Elsewhere);
    }
    let session = runs.iter().chain([plugins, profile, session]).map(|part| part.to_string()).collect();
    Ok(ProfileKey { session, file: file.to_string() })
}

/// A part that names one entry of its directory and nothing else.
fn plain(part: &str) -> bool {
    !part.is_empty()
        && part.len() <= MAX_PART_BYTES
        && !part.starts_with('.')
        && !part.chars().any(|c| c == '/' || c == '\\' || c.is_control())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tensorboards_layout_is_taken_at_any_run_depth() {
        let key = profile_key(&["job-1", "plugins", "profile", "2026_11_26", "node.xplane.pb"]).expect("a profile");
        assert_eq!(key.session, ["job-1", "plugins", "profile", "2026_11_26"]);
        assert_eq!(key.file, "node.xplane.pb");
        let root = std::path::Path::new("/cache");
        assert_eq!(key.session_dir(root), root.join("job-1/plugins/profile/2026_11_26"));
        assert!(profile_key(&["plugins", "profile", "s", "w.pt.trace.json.gz"]).is_ok(), "a log directory's own");
    }

    #[test]
    fn other_keys_are_left_out_and_unsafe_ones_named() {
        for parts in [
            &["run", "plugins", "profile", "s", "notes.txt"][..],
            &["run", "profile", "s", "h.xplane.pb"],
            &["run", "plugins", "profile", "h.xplane.pb"],
            &["plugins", "profile", "s", "xplane.pb"],
        ] {
            assert_eq!(profile_key(parts), Err(NotProfile::Elsewhere), "{parts:?}");
        }
        let long = "x".repeat(300);
        for parts in [
            &["..", "plugins", "profile", "s", "h.xplane.pb"][..],
            &["run", "plugins", "profile", ".", "h.xplane.pb"],
            &["a\\..\\b", "plugins", "profile", "s", "h.xplane.pb"],
            &["run", "plugins", "profile", "s", "h\n.xplane.pb"],
            &["run", "", "plugins", "profile", "s", "h.xplane.pb"],
            &["run", "plugins", "profile", &long, "h.xplane.pb"],
        ] {
            assert_eq!(profile_key(parts), Err(NotProfile::Unsafe), "{parts:?}");
        }
    }
}
