//! Fuzzes the trace viewer's index: a cache file of any bytes (made plausible: valid
//! magic, lengths and checksum, so the directory and table checks are reached) must
//! open or give an error, never panic; an index built from arbitrary events (any
//! starts, durations, tracks, names and flows, including the i64 extremes) must answer
//! views, searches and lookups without panicking, and lose no event in a view. (A file
//! whose event columns were changed and resealed is only required not to panic: opening
//! checks the tables' cross-references, not every event's order, which would cost a
//! pass over the events.)
#![no_main]

use libfuzzer_sys::fuzz_target;
use mlprof_timeline::{SectionKind, TimelineBuilder, TimelineIndex, Viewport};

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    let from_file = mode & 1 == 0;
    let index = if from_file {
        let mut bytes = rest.to_vec();
        mlprof_timeline::fuzzing::make_plausible(&mut bytes);
        match TimelineIndex::from_bytes(bytes) {
            Ok(index) => index,
            Err(_) => return,
        }
    } else {
        match built(rest) {
            Some(index) => index,
            None => return,
        }
    };
    exercise(&index, rest, !from_file);
});

/// An index from `data` read as 18-byte records: track (1), name (1), start (8), duration (8).
/// Every 4th record also links the previous event to this one.
fn built(data: &[u8]) -> Option<TimelineIndex> {
    let mut builder = TimelineBuilder::new();
    let device = builder.section("/device:GPU:0", SectionKind::Device);
    let host = builder.section("/host:CPU", SectionKind::Host);
    let tracks = [
        builder.track(device, "Stream #7").ok()?,
        builder.track(device, "Stream #8").ok()?,
        builder.track(host, "python").ok()?,
    ];
    let names = ["kernel", "cudaLaunchKernel", "aten::mm", "ProfilerStep#1", "Kernel", ""].map(|n| builder.name(n));
    let mut previous = None;
    for (i, record) in data.chunks_exact(18).enumerate() {
        let track = tracks[record[0] as usize % tracks.len()];
        let name = names[record[1] as usize % names.len()];
        let start = i64::from_le_bytes(record[2..10].try_into().ok()?);
        let duration = i64::from_le_bytes(record[10..18].try_into().ok()?);
        let event = builder.event(track, start, duration, name, i as u64).ok()?;
        if i % 4 == 3 {
            if let Some(from) = previous {
                builder.flow(from, event);
            }
        }
        previous = Some(event);
    }
    builder.finish().ok()?.into_index().ok()
}

/// Views of the whole span and of a window taken from `data`, searches and lookups;
/// with `complete`, the whole-span view must show every event once.
fn exercise(index: &TimelineIndex, data: &[u8], complete: bool) {
    let (start, end) = index.span_ps();
    let word = |at: usize| data.get(at..at + 8).and_then(|b| b.try_into().ok()).map(i64::from_le_bytes).unwrap_or(0);
    let windows = [(start, end, 1000u32), (word(0), word(8), 1 + (word(16) as u32 % 5000)), (end, start, 0)];
    for (window_start, window_end, width_px) in windows {
        let view = index.view(&Viewport { start_ps: window_start, end_ps: window_end, width_px, tracks: None });
        let _ = view;
    }
    let all = index.view(&Viewport { start_ps: start, end_ps: end, width_px: 2000, tracks: None });
    let shown: u64 =
        all.tracks.iter().map(|t| t.events.len() as u64 + t.merged.iter().map(|m| m.count).sum::<u64>()).sum();
    if complete {
        assert_eq!(shown, index.event_count(), "a view of the whole span shows every event once");
    }
    for query in ["kernel", "", "K", "\u{0}"] {
        let _ = index.search(query, 10);
    }
    for id in [0, 1, (index.event_count() as u32).saturating_sub(1), u32::MAX] {
        let _ = index.event(id);
        let _ = index.flows_of(id);
    }
    for id in 0..index.track_count().saturating_add(1) {
        let _ = index.track(id);
    }
    let _ = index.sections().count();
}
