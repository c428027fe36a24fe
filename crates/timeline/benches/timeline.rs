//! Timeline index micro-benchmarks (divan) on generated traces of 100 000 and 2 000 000
//! events ([`Synthetic::realistic`]): building, viewport queries zoomed out (whole
//! trace), at 1/1000 of it and deep in (1/10^6), search, and event lookups.
//!
//! Run: `cargo bench -p mlprof-timeline --bench timeline`. The 100-million-event run
//! is the `scale` example (see its docs).

use std::sync::OnceLock;

use divan::counter::ItemsCount;
use divan::{Bencher, black_box};
use mlprof_timeline::synthetic::Synthetic;
use mlprof_timeline::{TimelineBuilder, TimelineIndex, Viewport};

fn main() {
    divan::main();
}

const SIZES: [u64; 2] = [100_000, 2_000_000];

fn builder(events: u64) -> TimelineBuilder {
    let mut b = TimelineBuilder::new();
    // Generating cannot fail below MAX_EVENTS.
    let _ = Synthetic::realistic(events, 1).add_to(&mut b);
    b
}

fn index(events: u64) -> &'static TimelineIndex {
    static SMALL: OnceLock<Option<TimelineIndex>> = OnceLock::new();
    static MEDIUM: OnceLock<Option<TimelineIndex>> = OnceLock::new();
    let cell = if events == SIZES[0] { &SMALL } else { &MEDIUM };
    let built = cell.get_or_init(|| builder(events).finish().ok().and_then(|b| b.into_index().ok()));
    built.as_ref().expect("the generated index builds")
}

#[divan::bench(args = SIZES, sample_count = 5)]
fn build(bencher: Bencher, events: u64) {
    bencher
        .counter(ItemsCount::new(events))
        .with_inputs(|| builder(events))
        .bench_values(|b| black_box(b.finish().ok()));
}

/// Viewports of `1/zoom` of the trace at 1500 px, at positions spread over it.
fn bench_view(bencher: Bencher, events: u64, zoom: i64) {
    let index = index(events);
    let (first, last) = index.span_ps();
    let len = ((last - first) / zoom).max(1);
    let mut at = 0i64;
    bencher.bench_local(|| {
        at = (at + 7_919) % 10_000;
        let start = first + (last - first - len) / 10_000 * at;
        let view = index.view(&Viewport { start_ps: start, end_ps: start + len, width_px: 1500, tracks: None });
        black_box(view.tracks.len())
    });
}

#[divan::bench(args = SIZES)]
fn view_whole_trace(bencher: Bencher, events: u64) {
    bench_view(bencher, events, 1);
}

#[divan::bench(args = SIZES)]
fn view_thousandth(bencher: Bencher, events: u64) {
    bench_view(bencher, events, 1_000);
}

#[divan::bench(args = SIZES)]
fn view_millionth(bencher: Bencher, events: u64) {
    bench_view(bencher, events, 1_000_000);
}

#[divan::bench(args = SIZES)]
fn search_common_word(bencher: Bencher, events: u64) {
    let index = index(events);
    bencher.bench_local(|| black_box(index.search("matmul", 100).total));
}

#[divan::bench(args = SIZES)]
fn event_lookup_with_flows(bencher: Bencher, events: u64) {
    let index = index(events);
    let mut id = 0u32;
    bencher.bench_local(|| {
        id = (id + 104_729) % index.event_count() as u32;
        black_box((index.event(id), index.flows_of(id).len()))
    });
}
