//! The fuzz targets still build. They live outside the workspace (`fuzz/`, built by
//! `cargo fuzz` with a nightly compiler), so nothing else compiles them: an API they
//! call could go away unnoticed, and a parser would stop being fuzzed. This checks every
//! target against the current crates with the compiler running the tests.

use std::path::Path;
use std::process::Command;

#[test]
fn every_fuzz_target_compiles_against_the_current_crates() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    // The cargo running the tests; its own target directory stays unlocked.
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        .current_dir(&repo)
        .args(["check", "--quiet", "--manifest-path", "fuzz/Cargo.toml", "--bins"])
        .env("CARGO_TARGET_DIR", repo.join("target/fuzz-check"))
        .output()
        .expect("cargo runs");
    assert!(out.status.success(), "cargo check of fuzz/ failed:\n{}", String::from_utf8_lossy(&out.stderr));
}
