//! Fuzzes the PyTorch memory-snapshot reader and its pickle decoder: any bytes as a
//! snapshot file (seed the corpus with `tests/data/torch_memory/**/*.pickle`) become a
//! host or an error, never a panic or a run of pickle code; the objects decoded stay
//! within what the file holds, and so does the host built from them.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mlprof_formats::pickle::{KeepAll, decode};
use mlprof_formats::torch_memory::read_memory_snapshot;

fuzz_target!(|data: &[u8]| {
    let _ = decode(data, &mut KeepAll);
    if let Ok(host) = read_memory_snapshot(data, "fuzz.pickle", "fuzz") {
        let events: usize = host.planes.iter().map(|p| p.event_count()).sum();
        assert!(events <= data.len(), "{events} events from {} bytes", data.len());
    }
});
