//! Laying collected tracks out into the index's event columns, tracks in parallel.
//!
//! Each track owns a contiguous range of event ids (tracks in order), so the columns
//! are cut into one disjoint slice per track and every track is laid out on its own:
//! sort by start (longer first on ties, then the order events were added), assign
//! depths ([`crate::depth`]), place each event at its (depth, start) position, and
//! build each depth's levels ([`crate::levels`]). The tracks' runs and levels are
//! then appended in track order, so the result does not depend on the thread count.

use rayon::prelude::*;

use crate::depth::assign_depths;
use crate::levels::{Level, build_levels};
use crate::progress::BuildProgress;

/// One event as added.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RawEvent {
    pub(crate) start_ps: i64,
    pub(crate) dur_ps: i64,
    pub(crate) source: u64,
    pub(crate) name: u32,
    /// Its position among its track's events in the order they were added.
    pub(crate) ordinal: u32,
}

/// The event columns, one slot per event id (all tracks together).
pub(crate) struct EventColumns {
    pub(crate) start_ps: Vec<i64>,
    pub(crate) dur_ps: Vec<i64>,
    pub(crate) name: Vec<u32>,
    pub(crate) source: Vec<u64>,
}

/// What laying one track out gives besides its columns.
pub(crate) struct LaidTrack {
    /// The event id of the track's first event.
    pub(crate) first_event: usize,
    /// Each depth's first event, relative to the track's first event, then the track's
    /// event count: depth `d` is `run_bounds[d]..run_bounds[d + 1]`.
    pub(crate) run_bounds: Vec<usize>,
    /// Each depth's levels.
    pub(crate) run_levels: Vec<Vec<Level>>,
    /// The event id of each event, by the order it was added.
    pub(crate) ids_by_ordinal: Vec<u32>,
    /// Earliest start and latest end (ps), `None` without events.
    pub(crate) span_ps: Option<(i64, i64)>,
}

/// One track's slices of the columns.
struct TrackSlices<'a> {
    start_ps: &'a mut [i64],
    dur_ps: &'a mut [i64],
    name: &'a mut [u32],
    source: &'a mut [u64],
}

/// Lays out `tracks` (each track's events as added; the tracks' event ids follow one
/// another from 0, in this order) into columns of `total` events; returns the columns
/// and each track's layout, in track order. Reports each finished track's events to
/// `progress`.
pub(crate) fn lay_out(
    tracks: Vec<Vec<RawEvent>>,
    total: usize,
    progress: Option<&BuildProgress>,
) -> (EventColumns, Vec<LaidTrack>) {
    let mut columns =
        EventColumns { start_ps: vec![0; total], dur_ps: vec![0; total], name: vec![0; total], source: vec![0; total] };
    let mut jobs = Vec::with_capacity(tracks.len());
    {
        let (mut start_ps, mut dur_ps, mut name, mut source) = (
            columns.start_ps.as_mut_slice(),
            columns.dur_ps.as_mut_slice(),
            columns.name.as_mut_slice(),
            columns.source.as_mut_slice(),
        );
        let mut first_event = 0;
        for (position, raw) in tracks.into_iter().enumerate() {
            let n = raw.len();
            let slices = TrackSlices {
                start_ps: split_front(&mut start_ps, n),
                dur_ps: split_front(&mut dur_ps, n),
                name: split_front(&mut name, n),
                source: split_front(&mut source, n),
            };
            jobs.push((position, (raw, first_event), slices));
            first_event += n;
        }
    }
    // Largest tracks first, one per task, so that the threads finish together.
    jobs.sort_by_key(|(_, (raw, _), _)| std::cmp::Reverse(raw.len()));
    let mut laid: Vec<(usize, LaidTrack)> = jobs
        .into_par_iter()
        .with_max_len(1)
        .map(|(position, (raw, first_event), slices)| {
            let n = raw.len() as u64;
            let laid = lay_out_track(raw, first_event, slices);
            if let Some(progress) = progress {
                progress.add_done(n);
            }
            (position, laid)
        })
        .collect();
    laid.sort_unstable_by_key(|(position, _)| *position);
    (columns, laid.into_iter().map(|(_, laid)| laid).collect())
}

/// The first `n` items of `rest`, leaving the others in `rest`.
fn split_front<'a, T>(rest: &mut &'a mut [T], n: usize) -> &'a mut [T] {
    let (front, back) = std::mem::take(rest).split_at_mut(n);
    *rest = back;
    front
}

/// Lays out one track, its events `raw` as added and its ids from `first_event`, into
/// its slices (see the module docs).
fn lay_out_track(mut raw: Vec<RawEvent>, first_event: usize, out: TrackSlices<'_>) -> LaidTrack {
    // Stable, so events equal in start and duration keep the order they were added in
    // (their ordinals'); a track's events come nearly in start order, and the stable
    // sort merges the runs it finds.
    raw.sort_by_key(|e| (e.start_ps, std::cmp::Reverse(e.dur_ps)));
    let depths = assign_depths(raw.iter().map(|e| (e.start_ps, e.start_ps.saturating_add(e.dur_ps))));
    let run_count = depths.iter().max().map_or(0, |&d| d as usize + 1);
    let mut next_slot = vec![0usize; run_count + 1];
    for &d in &depths {
        next_slot[d as usize + 1] += 1;
    }
    for d in 1..next_slot.len() {
        next_slot[d] += next_slot[d - 1];
    }
    let run_bounds = next_slot.clone();
    let mut ids_by_ordinal = vec![0u32; raw.len()];
    let mut span_ps: Option<(i64, i64)> = None;
    for (event, &depth) in raw.iter().zip(&depths) {
        let slot = &mut next_slot[depth as usize];
        let at = *slot;
        *slot += 1;
        out.start_ps[at] = event.start_ps;
        out.dur_ps[at] = event.dur_ps;
        out.name[at] = event.name;
        out.source[at] = event.source;
        // Ids stay below MAX_EVENTS, checked as events were added.
        ids_by_ordinal[event.ordinal as usize] = (first_event + at) as u32;
        let end = event.start_ps.saturating_add(event.dur_ps);
        span_ps = Some(match span_ps {
            None => (event.start_ps, end),
            Some((first, last)) => (first.min(event.start_ps), last.max(end)),
        });
    }
    drop(raw);
    drop(depths);
    let run_levels = run_bounds
        .windows(2)
        .map(|run| build_levels(&out.start_ps[run[0]..run[1]], &out.dur_ps[run[0]..run[1]]))
        .collect();
    LaidTrack { first_event, run_bounds, run_levels, ids_by_ordinal, span_ps }
}
