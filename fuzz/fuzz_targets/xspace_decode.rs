//! Fuzzes the XSpace decoder: any bytes must give a host or an error, never a panic;
//! a decoded host must re-encode and decode to the same model.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mlprof_formats::xspace::{encode_xspace, read_xspace};

fuzz_target!(|data: &[u8]| {
    if let Ok(host) = read_xspace(data, "fuzz.xplane.pb", "fuzz") {
        let again = read_xspace(&encode_xspace(&host), "fuzz.xplane.pb", "fuzz").expect("re-encoded XSpace decodes");
        assert_eq!(again.event_count(), host.event_count());
    }
});
