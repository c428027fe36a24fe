//! Fuzzes the gzip path of the readers: any bytes inflate within the bomb limit (200x
//! their size, 1 MiB floor here) or give an error, never a panic or unbounded memory;
//! what inflates is then read as both formats, which must not panic either.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mlprof_formats::input::{InflateLimit, MAX_INFLATE_RATIO, inflate_within};
use mlprof_formats::kineto::read_kineto;
use mlprof_formats::xspace::read_xspace;

fuzz_target!(|data: &[u8]| {
    let limit = InflateLimit::Ratio((data.len() as u64 * MAX_INFLATE_RATIO).max(1 << 20));
    if let Ok(bytes) = inflate_within(data, "fuzz.json.gz", limit) {
        assert!(bytes.len() as u64 <= limit.bytes());
        let _ = read_kineto(&bytes, "fuzz.json", "fuzz");
        let _ = read_xspace(&bytes, "fuzz.xplane.pb", "fuzz");
    }
});
