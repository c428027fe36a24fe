//! Listing what a command left in a directory, for the tests that check it wrote only
//! where it should (`capture_hostile`, `convert_interrupt`).
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// Every file and directory below `dir` (not `dir` itself), sorted; nothing when `dir`
/// does not exist.
pub fn entries_below(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path.clone());
            }
            out.push(path);
        }
    }
    out.sort();
    out
}

/// The files below `dir`, sorted.
pub fn files_below(dir: &Path) -> Vec<PathBuf> {
    entries_below(dir).into_iter().filter(|p| p.is_file()).collect()
}
