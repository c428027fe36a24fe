//! Fuzzes the Kineto/Chrome trace reader: any bytes must give a host or an error, never
//! a panic; a decoded host must survive the Chrome writer and read back with the same
//! number of events.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mlprof_formats::chrome::write_chrome_trace;
use mlprof_formats::kineto::read_kineto;

fuzz_target!(|data: &[u8]| {
    if let Ok(host) = read_kineto(data, "fuzz.json", "fuzz") {
        let mut out = Vec::new();
        write_chrome_trace(&[&host], &mut out).expect("writing to memory succeeds");
        let again = read_kineto(&out, "fuzz.json", "fuzz").expect("written trace reads back");
        assert_eq!(again.event_count(), host.event_count());
    }
});
