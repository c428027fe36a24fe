//! The memory profile of PyTorch memory snapshots (`tests/data/torch_memory`), read
//! from their allocator trace's columns, against the same profile read from the
//! `[memory]` events the reader also makes of each entry (the path a PyTorch profiler
//! trace takes), and with and without those events loaded.

use std::path::{Path, PathBuf};

use mlprof_analysis::memory_profile::{MemoryProfile, analyze};
use mlprof_analysis::tool::ToolId;
use mlprof_analysis::tool_availability::has_data_on;
use mlprof_formats::torch_memory::{EntryEvents, read_memory_snapshot_releasing};
use mlprof_model::Host;

const FIXTURES: [&str; 8] = [
    "silmont_2_x/mem_snapshot.pickle",
    "bcrafton_2_10/memory_snapshot.pickle",
    "h100_oom/oom_default.pickle",
    "h100_oom/oom_expandable.pickle",
    "h100_pair/snapshot.pickle",
    "generated/expandable_oom_2_devices.pickle",
    "generated/no_times.pickle",
    "generated/beside_torch_profile.pickle",
];

fn fixture(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/torch_memory").join(path)
}

fn read(path: &str, events: EntryEvents) -> Host {
    let bytes = std::fs::read(fixture(path)).expect("fixture");
    read_memory_snapshot_releasing(&bytes, &|_| {}, path, "snapshot", events).expect("reads")
}

fn profile(host: &Host) -> MemoryProfile {
    analyze(host, &|| panic!("a PyTorch trace's memory profile reads no step groups"))
}

#[test]
fn the_trace_gives_the_profile_the_entries_events_give() {
    for path in FIXTURES {
        let host = read(path, EntryEvents::Made);
        let from_trace = profile(&host);
        assert!(from_trace.snapshot.is_some(), "{path}");
        let mut events_only = host.clone();
        events_only.allocator_trace = None;
        let from_events = profile(&events_only);
        assert!(!from_trace.allocators.is_empty(), "{path}");
        assert_eq!(from_trace.allocators, from_events.allocators, "{path}");
    }
}

#[test]
fn without_the_entries_events_the_profile_is_the_same() {
    for path in FIXTURES {
        let skipped = read(path, EntryEvents::Skipped);
        assert!(has_data_on(ToolId::MemoryProfile, &skipped), "{path}");
        assert_eq!(profile(&skipped), profile(&read(path, EntryEvents::Made)), "{path}");
    }
}
