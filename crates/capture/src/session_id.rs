//! Session ids: the directory name of one capture or saved profile under
//! `<logdir>/plugins/profile/`, shared by the client and `XSpace::save`.
//!
//! TensorFlow names a session by the local time it started, at second resolution
//! (`%Y_%m_%d_%H_%M_%S`). Two captures in the same second (`--watch` with a short period,
//! or two runs in a row) would share a directory and overwrite each other's files, so
//! [`SessionIds`] gives the later one a suffix (`_01`, `_02`, …) that keeps the names in
//! time order when sorted as text, which is how TensorBoard and mlprof pick the newest.

use std::collections::HashSet;
use std::path::Path;

use chrono::NaiveDateTime;

/// The `strftime` format of TensorFlow's session ids (4-digit year).
pub const SESSION_ID_FORMAT: &str = "%Y_%m_%d_%H_%M_%S";

/// The session id TensorFlow's client would use at local time `time`.
pub fn session_id_at(time: NaiveDateTime) -> String {
    time.format(SESSION_ID_FORMAT).to_string()
}

/// Hands out session ids that are unique within this process and unused on disk.
#[derive(Debug, Default)]
pub struct SessionIds {
    issued: HashSet<String>,
}

impl SessionIds {
    /// A new generator that has issued nothing yet.
    pub fn new() -> SessionIds {
        SessionIds::default()
    }

    /// The id for a capture starting at local time `time`: [`session_id_at`], with a
    /// `_NN` suffix when that id was issued before or `repository_root/<id>` exists.
    pub fn next(&mut self, time: NaiveDateTime, repository_root: &Path) -> String {
        let base = session_id_at(time);
        let mut candidate = base.clone();
        let mut n = 1u32;
        while self.issued.contains(&candidate) || repository_root.join(&candidate).exists() {
            candidate = format!("{base}_{n:02}");
            n += 1;
        }
        self.issued.insert(candidate.clone());
        candidate
    }

    /// The id for a capture starting now (local time).
    pub fn next_now(&mut self, repository_root: &Path) -> String {
        self.next(chrono::Local::now().naive_local(), repository_root)
    }
}

#[cfg(test)]
mod tests {
    use super::{SessionIds, session_id_at};
    use chrono::NaiveDate;

    fn at(h: u32, m: u32, s: u32) -> chrono::NaiveDateTime {
        NaiveDate::from_ymd_opt(2026, 3, 7).and_then(|d| d.and_hms_milli_opt(h, m, s, 999)).unwrap()
    }

    #[test]
    fn formats_like_tensorflow() {
        assert_eq!(session_id_at(at(9, 5, 1)), "2026_03_07_09_05_01");
    }

    #[test]
    fn repeats_within_a_second_get_sortable_suffixes() {
        let dir = tempfile::tempdir().unwrap();
        let mut ids = SessionIds::new();
        let first = ids.next(at(9, 5, 1), dir.path());
        let second = ids.next(at(9, 5, 1), dir.path());
        let third = ids.next(at(9, 5, 1), dir.path());
        let later = ids.next(at(9, 5, 2), dir.path());
        assert_eq!(
            [&first, &second, &third],
            ["2026_03_07_09_05_01", "2026_03_07_09_05_01_01", "2026_03_07_09_05_01_02"]
        );
        let mut sorted = vec![&later, &third, &first, &second];
        sorted.sort();
        assert_eq!(sorted, [&first, &second, &third, &later]);
    }

    #[test]
    fn an_existing_session_directory_is_not_reused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("2026_03_07_09_05_01")).unwrap();
        assert_eq!(SessionIds::new().next(at(9, 5, 1), dir.path()), "2026_03_07_09_05_01_01");
    }
}
