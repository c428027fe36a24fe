//! Fuzzes what `mlprof run` reads from a CUDA process's `mlprof-inject` connection: any
//! bytes as a frame (a message or an error, never a panic), and any decoded buffer
//! through the record decoder and the XSpace layout, which must hold every record it
//! could read and encode without panicking.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mlprof_cupti::wire::{FromInjection, Hello, decode_from_injection, encode_from_injection};
use mlprof_run::cupti_profile::CuptiProfile;

fuzz_target!(|data: &[u8]| {
    let Ok(message) = decode_from_injection(data) else { return };
    let mut again = Vec::new();
    encode_from_injection(&message, &mut again);
    assert_eq!(decode_from_injection(&again).as_ref(), Ok(&message), "re-encoding gives the same message");
    if let FromInjection::Buffer(buffer) = message {
        let hello = Hello {
            protocol: 1,
            pid: 1,
            cupti_api_version: 130001,
            cupti_timestamp_ns: 0,
            realtime_ns: 1_700_000_000_000_000_000,
            recording: true,
        };
        let mut profile = CuptiProfile::new(hello);
        profile.add_buffer(&buffer);
        let host = profile.to_host("fuzz", 1_700_000_000_000_000_000, 1_700_000_001_000_000_000, &[]);
        let _ = mlprof_formats::xspace::encode_xspace(&host);
    }
});
