//! Fuzzes the Nsight Systems reader: any bytes as an export file (seed the corpus with
//! `tests/data/nsys/*/*.sqlite`, and let libFuzzer mutate their pages): SQLite reads or
//! refuses them, and what it reads (any table, any column type, any value) becomes a
//! host or an error, never a panic; a host's events stay within what the file holds.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mlprof_formats::nsys::read_nsys;

fuzz_target!(|data: &[u8]| {
    let path = std::env::temp_dir().join(format!("mlprof-fuzz-nsys-{}.sqlite", std::process::id()));
    if std::fs::write(&path, data).is_err() {
        return;
    }
    if let Ok(host) = read_nsys(&path, "fuzz") {
        let events: usize = host.planes.iter().map(|p| p.event_count()).sum();
        assert!(events <= data.len(), "{events} events from {} bytes", data.len());
    }
    let _ = std::fs::remove_file(&path);
});
