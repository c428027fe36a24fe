//! Ingest benchmarks: MB/s and events/s of the XSpace and Kineto readers.
//!
//! The XSpace decoder is also compared with `prost`-derived structs decoding the same
//! bytes (decode only, without building the model, so prost gets the benefit of the
//! doubt). Inputs: the largest real fixtures, plus a ~40 MB XSpace made by repeating
//! the lines of a real one (`BIG_FACTOR`×).
//!
//! `kineto_generated_trace` reads the trace `scripts/bench` generates (default 300 MB,
//! `$MLPROF_BENCH_DIR/kineto_gen_300mb/rank0.pt.trace.json`) when it exists, mapped and
//! released as `mlprof` reads it, on all cores (the reader splits large traces).
//!
//! Run: `cargo bench -p mlprof-formats --bench ingest`.

use std::path::{Path, PathBuf};

use divan::counter::{BytesCount, ItemsCount};
use divan::{Bencher, black_box};
use mlprof_formats::input::load_file;
use mlprof_formats::kineto::{read_kineto, read_kineto_releasing};
use mlprof_formats::xspace::{encode_xspace, read_xspace};

fn main() {
    divan::main();
}

/// How many times the big synthetic XSpace repeats the fixture's lines.
const BIG_FACTOR: usize = 100;

fn data(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data").join(rel)
}

fn file_bytes(rel: &str) -> Vec<u8> {
    load_file(&data(rel)).map(|f| f.bytes.to_vec()).unwrap_or_default()
}

const XSPACE: &str = "xspace/jax_profile/logdir/plugins/profile/2026_11_21_19_24_59/vm.xplane.pb";
const KINETO_CPU: &str = "kineto/torch_profile/logdir/worker0.1795289102612280864.pt.trace.json";
const KINETO_GPU: &str = "kineto/hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz";

fn events_of(bytes: &[u8], xspace: bool) -> u64 {
    let host = if xspace { read_xspace(bytes, "bench", "vm") } else { read_kineto(bytes, "bench", "h") };
    host.map_or(0, |h| h.event_count() as u64)
}

/// The fixture's XSpace with every line's events repeated `BIG_FACTOR` times.
fn big_xspace() -> Vec<u8> {
    let bytes = file_bytes(XSPACE);
    let Ok(mut host) = read_xspace(&bytes, "bench", "vm") else { return Vec::new() };
    for plane in &mut host.planes {
        for line in &mut plane.lines {
            let original = line.clone();
            let span = original.span_ps().map_or(0, |(s, e)| e - s + 1);
            for copy in 1..BIG_FACTOR as i64 {
                for event in original.iter() {
                    for stat in event.stats() {
                        let _ = line.stats.push_copy(&original.stats, stat, stat.key());
                    }
                    line.push_event(event.metadata_index(), event.offset_ps() + copy * span, event.duration_ps());
                }
            }
        }
    }
    encode_xspace(&host)
}

fn bench_read(bencher: Bencher, bytes: &[u8], xspace: bool) {
    let events = events_of(bytes, xspace);
    bencher.counter(BytesCount::of_slice(bytes)).counter(ItemsCount::new(events)).bench(|| {
        let host = if xspace {
            read_xspace(black_box(bytes), "bench", "vm")
        } else {
            read_kineto(black_box(bytes), "bench", "h")
        };
        black_box(host.map(|h| h.event_count()).unwrap_or(0))
    });
}

#[divan::bench(sample_count = 30)]
fn xspace_fixture_mlprof(bencher: Bencher) {
    bench_read(bencher, &file_bytes(XSPACE), true);
}

#[divan::bench(sample_count = 30)]
fn xspace_fixture_prost(bencher: Bencher) {
    let bytes = file_bytes(XSPACE);
    bencher.counter(BytesCount::of_slice(&bytes)).bench(|| prost_xspace::decode(black_box(&bytes)));
}

#[divan::bench(sample_count = 10)]
fn xspace_big_mlprof(bencher: Bencher) {
    bench_read(bencher, &big_xspace(), true);
}

#[divan::bench(sample_count = 10)]
fn xspace_big_prost(bencher: Bencher) {
    let bytes = big_xspace();
    bencher.counter(BytesCount::of_slice(&bytes)).bench(|| prost_xspace::decode(black_box(&bytes)));
}

#[divan::bench(sample_count = 20)]
fn kineto_cpu_trace(bencher: Bencher) {
    bench_read(bencher, &file_bytes(KINETO_CPU), false);
}

#[divan::bench(sample_count = 10)]
fn kineto_gpu_trace(bencher: Bencher) {
    bench_read(bencher, &file_bytes(KINETO_GPU), false);
}

#[divan::bench(sample_count = 3)]
fn kineto_generated_trace(bencher: Bencher) {
    let dir = std::env::var("MLPROF_BENCH_DIR").unwrap_or_else(|_| "/var/tmp/mlprof-bench".to_string());
    let path = Path::new(&dir).join("kineto_gen_300mb/rank0.pt.trace.json");
    let Ok(file) = load_file(&path) else {
        eprintln!("skipping: {} is missing (scripts/bench 300 makes it)", path.display());
        return;
    };
    let bytes = &file.bytes;
    bencher.counter(BytesCount::of_slice(&bytes[..])).bench(|| {
        let release = |range| bytes.release(range);
        let host = read_kineto_releasing(black_box(bytes), &release, "bench", "h");
        black_box(host.map(|h| h.event_count()).unwrap_or(0))
    });
}

/// XSpace as `prost`-derived structs (field numbers from xplane.proto), for comparison.
mod prost_xspace {
    use std::collections::HashMap;

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct XSpace {
        #[prost(message, repeated, tag = "1")]
        pub planes: Vec<XPlane>,
        #[prost(string, repeated, tag = "2")]
        pub errors: Vec<String>,
        #[prost(string, repeated, tag = "3")]
        pub warnings: Vec<String>,
        #[prost(string, repeated, tag = "4")]
        pub hostnames: Vec<String>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct XPlane {
        #[prost(int64, tag = "1")]
        pub id: i64,
        #[prost(string, tag = "2")]
        pub name: String,
        #[prost(message, repeated, tag = "3")]
        pub lines: Vec<XLine>,
        #[prost(map = "int64, message", tag = "4")]
        pub event_metadata: HashMap<i64, XEventMetadata>,
        #[prost(map = "int64, message", tag = "5")]
        pub stat_metadata: HashMap<i64, XStatMetadata>,
        #[prost(message, repeated, tag = "6")]
        pub stats: Vec<XStat>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct XLine {
        #[prost(int64, tag = "1")]
        pub id: i64,
        #[prost(int64, tag = "10")]
        pub display_id: i64,
        #[prost(string, tag = "2")]
        pub name: String,
        #[prost(string, tag = "11")]
        pub display_name: String,
        #[prost(int64, tag = "3")]
        pub timestamp_ns: i64,
        #[prost(int64, tag = "9")]
        pub duration_ps: i64,
        #[prost(message, repeated, tag = "4")]
        pub events: Vec<XEvent>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct XEvent {
        #[prost(int64, tag = "1")]
        pub metadata_id: i64,
        #[prost(int64, optional, tag = "2")]
        pub offset_ps: Option<i64>,
        #[prost(int64, optional, tag = "5")]
        pub num_occurrences: Option<i64>,
        #[prost(int64, tag = "3")]
        pub duration_ps: i64,
        #[prost(message, repeated, tag = "4")]
        pub stats: Vec<XStat>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct XStat {
        #[prost(int64, tag = "1")]
        pub metadata_id: i64,
        #[prost(double, optional, tag = "2")]
        pub double_value: Option<f64>,
        #[prost(uint64, optional, tag = "3")]
        pub uint64_value: Option<u64>,
        #[prost(int64, optional, tag = "4")]
        pub int64_value: Option<i64>,
        #[prost(string, optional, tag = "5")]
        pub str_value: Option<String>,
        #[prost(bytes = "vec", optional, tag = "6")]
        pub bytes_value: Option<Vec<u8>>,
        #[prost(uint64, optional, tag = "7")]
        pub ref_value: Option<u64>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct XEventMetadata {
        #[prost(int64, tag = "1")]
        pub id: i64,
        #[prost(string, tag = "2")]
        pub name: String,
        #[prost(string, tag = "4")]
        pub display_name: String,
        #[prost(bytes = "vec", tag = "3")]
        pub metadata: Vec<u8>,
        #[prost(message, repeated, tag = "5")]
        pub stats: Vec<XStat>,
        #[prost(int64, repeated, tag = "6")]
        pub child_id: Vec<i64>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct XStatMetadata {
        #[prost(int64, tag = "1")]
        pub id: i64,
        #[prost(string, tag = "2")]
        pub name: String,
        #[prost(string, tag = "3")]
        pub description: String,
    }

    /// Decodes and returns the event count (so the work is not optimised away).
    pub fn decode(bytes: &[u8]) -> usize {
        use prost::Message;
        XSpace::decode(bytes).map(|s| s.planes.iter().flat_map(|p| &p.lines).map(|l| l.events.len()).sum()).unwrap_or(0)
    }
}
