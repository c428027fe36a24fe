//! Cost of the annotation API: a guard while nobody profiles (the gate: one atomic
//! load), and recording plus collecting events while a session is active.
//! `cargo bench -p mlprof-capture --bench annotations`.

use divan::Bencher;
use divan::counter::ItemsCount;
use mlprof_capture::server::{Profiler, step, trace, trace_scope};

fn main() {
    divan::main();
}

#[divan::bench]
fn inactive_trace_scope() {
    let _t = trace_scope(divan::black_box("forward"));
}

#[divan::bench]
fn inactive_trace_with_args() {
    let _t = trace(divan::black_box("load"), &[("step_num", divan::black_box(3))]);
}

/// 1000 nested step/trace pairs (2000 events) recorded and collected into an XSpace.
#[divan::bench]
fn active_record_and_collect(bencher: Bencher) {
    bencher.counter(ItemsCount::new(2000usize)).bench(|| {
        let profiler = Profiler::start().expect("a session");
        for n in 0..1000 {
            let _s = step("train", n);
            let _t = trace("load", &[("bytes", 4096)]);
        }
        profiler.stop()
    });
}
