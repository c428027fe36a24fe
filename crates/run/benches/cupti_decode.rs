//! What `mlprof run` spends on a CUDA process's activity: decoding CUPTI buffers as they
//! arrive (the parent must keep up with the job: a PyTorch step on an H200 produced
//! about 480,000 runtime API and 31,000 kernel records a second), and laying a window
//! out as an XSpace and encoding it. Buffers are built as CUPTI 13 lays them out, one
//! kernel per launch call, as in a launch-bound training step.
//! `cargo bench -p mlprof-run --bench cupti_decode`.

use divan::Bencher;
use divan::counter::ItemsCount;
use mlprof_cupti::records::build;
use mlprof_cupti::wire::{Buffer, Hello, StringKey, decode_from_injection, encode_buffer};
use mlprof_run::cupti_profile::CuptiProfile;

fn main() {
    divan::main();
}

/// Records in one 4 MiB-sized buffer: launch calls and their kernels.
const PAIRS: usize = 4 << 20 >> 8;

fn buffer() -> Buffer {
    let mut data = Vec::new();
    let mut record_offsets = Vec::new();
    for i in 0..PAIRS as u64 {
        let t = 1_000_000 + i * 3_000;
        for record in [
            build::runtime_api(211, t, t + 1_000, 1, 77, i as u32),
            build::kernel(t + 1_000, t + 3_000, 7, i as u32, 0x1000 + (i % 8) * 64),
        ] {
            record_offsets.push(data.len() as u32);
            data.extend_from_slice(&record);
        }
    }
    let strings = (0..8u64)
        .map(|k| (StringKey::Pointer(0x1000 + k * 64), format!("_Z6kernel{k}PfS_i").into_bytes()))
        .chain([(StringKey::RuntimeCallback(211), b"cudaLaunchKernel_v7000".to_vec())])
        .collect();
    Buffer { record_offsets, strings, data }
}

fn hello() -> Hello {
    Hello { protocol: 1, pid: 1, cupti_api_version: 130001, cupti_timestamp_ns: 0, realtime_ns: 0, recording: true }
}

/// A buffer frame off the socket: frame decode plus record decode, per record.
#[divan::bench]
fn decode_buffer(bencher: Bencher) {
    let b = buffer();
    let strings: Vec<(StringKey, &[u8])> = b.strings.iter().map(|(k, v)| (*k, v.as_slice())).collect();
    let mut frame = Vec::new();
    encode_buffer(&b.record_offsets, &strings, &b.data, &mut frame);
    bencher.counter(ItemsCount::new(b.record_offsets.len())).bench(|| {
        let Ok(mlprof_cupti::wire::FromInjection::Buffer(buffer)) = decode_from_injection(&frame) else {
            unreachable!("a buffer frame")
        };
        let mut profile = CuptiProfile::new(hello());
        profile.add_buffer(&buffer);
        profile
    });
}

/// A window of 4 buffers laid out as an XSpace and encoded, per record.
#[divan::bench]
fn window_to_xspace(bencher: Bencher) {
    let b = buffer();
    let mut profile = CuptiProfile::new(hello());
    for _ in 0..4 {
        profile.add_buffer(&b);
    }
    bencher.counter(ItemsCount::new(4 * b.record_offsets.len())).bench(|| {
        let host = profile.to_host("bench", 0, 1_000_000_000_000, &[]);
        mlprof_formats::xspace::encode_xspace(&host)
    });
}
