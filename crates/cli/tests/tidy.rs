//! The habits the code keeps, checked over the source tree (not over behaviour): every
//! Rust file opens with a `//!` paragraph saying what it owns, and the model and the
//! analyses do no I/O — no files, network, processes, environment or printing outside
//! their tests (DESIGN.md: sources → model → analyses → views).

use std::path::{Path, PathBuf};

/// The repository root.
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every `.rs` file below `dir`, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n != "target" && n != "node_modules") {
                    stack.push(path);
                }
            } else if path.extension().is_some_and(|e| e == "rs") {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

#[test]
fn every_rust_file_opens_with_a_module_doc() {
    let roots = ["crates", "fuzz/fuzz_targets", "examples"];
    let files: Vec<PathBuf> = roots.iter().flat_map(|root| rust_files(&repo().join(root))).collect();
    assert!(files.len() > 100, "the tree was found ({} files)", files.len());
    let undocumented: Vec<String> = files
        .iter()
        .filter(|path| !std::fs::read_to_string(path).expect("readable").starts_with("//!"))
        .map(|path| path.strip_prefix(repo()).unwrap_or(path).display().to_string())
        .collect();
    assert!(undocumented.is_empty(), "files that do not open with a //! paragraph: {undocumented:#?}");
}

/// What doing I/O looks like in Rust source.
const IO_MARKERS: &[&str] = &[
    "std::fs",
    "std::net",
    "std::process",
    "std::env",
    "File::",
    "OpenOptions",
    "TcpStream",
    "println!",
    "eprintln!",
    "print!(",
    "eprint!(",
    "stdout()",
    "stderr()",
    "stdin()",
];

#[test]
fn the_model_and_the_analyses_do_no_io() {
    let mut found = Vec::new();
    for krate in ["crates/model/src", "crates/analysis/src"] {
        for path in rust_files(&repo().join(krate)) {
            if path.file_name().is_some_and(|n| n == "tests.rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("readable");
            // Unit tests may read fixtures: only the code before them counts.
            let code = text.split("#[cfg(test)]").next().unwrap_or_default();
            for (number, line) in code.lines().enumerate() {
                let line = line.trim_start();
                if line.starts_with("//") {
                    continue;
                }
                if let Some(marker) = IO_MARKERS.iter().find(|m| line.contains(*m)) {
                    let shown = path.strip_prefix(repo()).unwrap_or(&path).display();
                    found.push(format!("{shown}:{}: {marker}", number + 1));
                }
            }
        }
    }
    assert!(found.is_empty(), "I/O in the model or the analyses: {found:#?}");
}
