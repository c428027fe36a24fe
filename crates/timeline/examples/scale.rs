//! The timeline index at scale: builds the index of a generated trace of 100 million
//! events ([`Synthetic::realistic`]: 8 streams, 24 threads, nested stacks, log-uniform
//! durations, 50 000 names), writes it, reopens it (mapped, checksum verified) and
//! times random viewport queries, searches, lookups and range aggregates (the trace
//! viewer's Shift+drag table, over every track). Prints rates, sizes, latency
//! percentiles and peak memory (`VmHWM`). Not a test; numbers go into notes.
//!
//! ```text
//! cargo run --release -p mlprof-timeline --example scale -- [EVENTS] [QUERIES]
//! ```
//! EVENTS defaults to 100 000 000, QUERIES to 1000. The index is written under
//! `$MLPROF_BENCH_DIR` (default `/var/tmp/mlprof-bench`) and removed at the end.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use mlprof_timeline::synthetic::Synthetic;
use mlprof_timeline::{CacheKey, TimelineBuilder, TimelineIndex, Viewport};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let events: u64 = args.next().map(|a| a.parse()).transpose()?.unwrap_or(100_000_000);
    let queries: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(1000);
    let dir = PathBuf::from(std::env::var("MLPROF_BENCH_DIR").unwrap_or_else(|_| "/var/tmp/mlprof-bench".into()));
    let path = dir.join(format!("timeline-scale-{events}.mltl"));
    let key = CacheKey {
        source_path: "generated".into(),
        source_bytes: events,
        source_modified_ns: 0,
        variant: "scale".into(),
    };

    println!("timeline index at scale: {events} generated events, {queries} viewport queries");
    let build = build_and_write(events, &path, &key)?;
    let index = reopen(&path, &key, events)?;
    print_summary(&index, events, &build);

    let mut rng = XorShift(0x2545_F491_4F6C_DD1D);
    time_viewports(&index, queries, &mut rng);
    time_searches(&index);
    time_lookups(&index, queries, &mut rng);
    time_aggregates(&index);
    println!("memory at the end: {}", memory());
    drop(index);
    std::fs::remove_file(&path)?;
    Ok(())
}

/// How long building and writing the index took, and the file's size.
struct Build {
    laid_out: Duration,
    written: Duration,
    file_bytes: u64,
}

/// Generates `events` events, builds their index and writes it to `path`.
fn build_and_write(events: u64, path: &Path, key: &CacheKey) -> Result<Build> {
    let t = Instant::now();
    let mut builder = TimelineBuilder::new();
    Synthetic::realistic(events, 42).add_to(&mut builder)?;
    let generated = t.elapsed();
    row("generate events", generated, events, &memory());

    let t = Instant::now();
    let built = builder.finish()?;
    let laid_out = t.elapsed();
    row("build index (finish)", laid_out, events, &memory());

    let t = Instant::now();
    built.write(path, key)?;
    let written = t.elapsed();
    let file_bytes = std::fs::metadata(path)?.len();
    row("write file", written, events, &memory());
    Ok(Build { laid_out, written, file_bytes })
}

/// Opens the written index (of `events` generated events), then opens it again ten
/// times with the file in the page cache: the cost of validation alone.
fn reopen(path: &Path, key: &CacheKey, events: u64) -> Result<TimelineIndex> {
    let t = Instant::now();
    let index = TimelineIndex::open(path, key)?;
    let opened = t.elapsed();
    row("reopen (mmap + checksum + tables)", opened, events, &memory());
    let mut reopens = Vec::new();
    for _ in 0..10 {
        let t = Instant::now();
        std::hint::black_box(TimelineIndex::open(path, key)?);
        reopens.push(t.elapsed());
    }
    percentiles("reopen again (page cache warm)", &mut reopens);
    Ok(index)
}

fn print_summary(index: &TimelineIndex, events: u64, build: &Build) {
    let (first, last) = index.span_ps();
    let file_bytes = build.file_bytes;
    println!(
        "index: {} events, {} tracks, {} names, {} flows, span {:.3} s, file {:.1} MB ({:.1} bytes/event)",
        index.event_count(),
        index.track_count(),
        index.name_count(),
        index.flow_count(),
        (last - first) as f64 / 1e12,
        file_bytes as f64 / 1e6,
        file_bytes as f64 / index.event_count().max(1) as f64
    );
    println!(
        "build rate: {:.2} M events/s (finish only), {:.2} M events/s (finish + write)",
        events as f64 / build.laid_out.as_secs_f64() / 1e6,
        events as f64 / (build.laid_out + build.written).as_secs_f64() / 1e6
    );
}

/// A xorshift generator: the same random queries on every run.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Random viewports at random zooms (from the whole trace down to 1/2^40 of it), then
/// the whole trace at 2000 px.
fn time_viewports(index: &TimelineIndex, queries: usize, rng: &mut XorShift) {
    let (first, last) = index.span_ps();
    let mut latencies = Vec::with_capacity(queries);
    let (mut items, mut max_items) = (0usize, 0usize);
    for _ in 0..queries {
        let zoom = 1i64 << (rng.next() % 41);
        let len = ((last - first) / zoom).max(1000);
        let start = first + (rng.next() % ((last - first - len).max(1) as u64)) as i64;
        let width_px = 1000 + (rng.next() % 1500) as u32;
        let t = Instant::now();
        let view = index.view(&Viewport { start_ps: start, end_ps: start + len, width_px, tracks: None });
        latencies.push(t.elapsed());
        let n: usize = view.tracks.iter().map(|t| t.events.len() + t.merged.len()).sum();
        items += n;
        max_items = max_items.max(n);
    }
    percentiles("viewport (random zoom)", &mut latencies);
    println!("  items per answer: mean {}, max {max_items}", items / queries.max(1));
    let mut whole = Vec::new();
    for _ in 0..20 {
        let t = Instant::now();
        let view = index.view(&Viewport { start_ps: first, end_ps: last, width_px: 2000, tracks: None });
        whole.push(t.elapsed());
        std::hint::black_box(view);
    }
    percentiles("viewport (whole trace, 2000 px)", &mut whole);
}

fn time_searches(index: &TimelineIndex) {
    for query in ["matmul", "relu_3", "NCCL::", "dataloader_next_16", "no such event"] {
        let t = Instant::now();
        let found = index.search(query, 100);
        println!("search {query:>22}: {:>9.3} ms, {} matches", ms(t.elapsed()), found.total);
    }
}

/// Range aggregates over every track: the whole trace, a tenth and a hundredth of it.
fn time_aggregates(index: &TimelineIndex) {
    let (start, end) = index.span_ps();
    let tracks: Vec<u32> = (0..index.track_count()).collect();
    for share in [1, 10, 100] {
        // The whole trace, else a share of it from a third in.
        let from = if share == 1 { start } else { start + (end - start) / 3 };
        let to = from + (end - start) / share;
        let t = Instant::now();
        let aggregate = index.aggregate(from, to, &tracks);
        let took = t.elapsed();
        println!(
            "aggregate 1/{share:<3} of the trace: {:>9.3} ms, {} events, {} names ({:.1} M events/s)",
            ms(took),
            aggregate.events,
            aggregate.rows.len(),
            aggregate.events as f64 / 1e6 / took.as_secs_f64().max(1e-9)
        );
    }
}

/// Random event lookups with their flows.
fn time_lookups(index: &TimelineIndex, queries: usize, rng: &mut XorShift) {
    let mut lookups = Vec::new();
    for _ in 0..queries {
        let id = (rng.next() % index.event_count().max(1)) as u32;
        let t = Instant::now();
        std::hint::black_box((index.event(id), index.flows_of(id)));
        lookups.push(t.elapsed());
    }
    percentiles("event lookup + flows", &mut lookups);
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn row(what: &str, took: Duration, events: u64, memory: &str) {
    println!(
        "{what:<36} {:>8.2} s  {:>7.2} M events/s   {memory}",
        took.as_secs_f64(),
        events as f64 / took.as_secs_f64() / 1e6
    );
}

fn percentiles(what: &str, latencies: &mut [Duration]) {
    latencies.sort();
    let at = |p: f64| latencies.get(((latencies.len() as f64 * p) as usize).min(latencies.len().saturating_sub(1)));
    let show = |d: Option<&Duration>| d.map_or(0.0, |d| ms(*d));
    println!(
        "{what:<36} p50 {:.3} ms  p95 {:.3} ms  p99 {:.3} ms  max {:.3} ms",
        show(at(0.5)),
        show(at(0.95)),
        show(at(0.99)),
        show(latencies.last())
    );
}

/// Peak and current resident memory from /proc/self/status.
fn memory() -> String {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<u64>().ok())
            .map_or("n/a".to_string(), |kb| format!("{:.2} GB", kb as f64 / 1e6))
    };
    format!("peak RSS {}, RSS {}", field("VmHWM:"), field("VmRSS:"))
}
