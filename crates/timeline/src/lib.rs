//! mlprof's trace-viewer index: the level-of-detail timeline of one host, built once,
//! cached on disk, and queried by viewport, by name and by event id.
//!
//! A timeline is sections (devices, host, derived) of tracks (streams, threads, derived
//! lines) of events (start, duration, name, a source reference), plus flows between
//! events. [`TimelineBuilder`] collects them — from a model [`mlprof_model::Host`]
//! ([`TimelineBuilder::add_host`]) or from anything else (a benchmark feeds generated
//! events) — and [`TimelineBuilder::finish`] lays out a [`BuiltIndex`], which is
//! written to a cache file ([`BuiltIndex::write`]) and opened memory-mapped
//! ([`TimelineIndex::open`]). Queries: [`TimelineIndex::view`] (what to draw of a
//! window at a pixel width), [`TimelineIndex::search`] (names, whole trace),
//! [`TimelineIndex::event`], [`TimelineIndex::flows_of`] and [`TimelineIndex::aggregate`]
//! (each name's count, total and self time in a range).
//!
//! The one design decision to know: each track's events are stored by depth, then
//! start time, and events at one depth never overlap (`depth.rs`), so any window is one
//! contiguous, binary-searchable range per depth; the precomputed levels (`levels.rs`) let a
//! zoomed-out query read one group per bucket instead of every event, so a viewport
//! costs about the number of pixels, not the number of events in it.
//! Times are `i64` picoseconds relative to the profile start.

mod aggregate;
mod builder;
mod cache;
mod checksum;
mod column;
mod depth;
mod error;
mod format;
mod fwdbwd;
mod host;
mod index;
mod key;
mod layout;
mod levels;
mod postings;
mod progress;
mod search;
pub mod synthetic;
mod view;

/// Hooks for `cargo fuzz` (feature `fuzzing`, off by default).
#[cfg(feature = "fuzzing")]
pub mod fuzzing {
    /// Makes the header of an index file in `bytes` valid (magic, version, lengths,
    /// checksum) so that a mutated file reaches the directory and table checks.
    pub fn make_plausible(bytes: &mut [u8]) {
        crate::format::make_plausible(bytes);
    }
}

pub use aggregate::{NameTotals, RangeAggregate};
pub use builder::{BuiltIndex, EventRef, MAX_EVENTS, NameId, SectionHandle, SectionKind, TimelineBuilder, TrackHandle};
pub use error::{BuildError, CacheError};
pub use format::FORMAT_VERSION;
pub use host::{DERIVED_LINES, MAPPING_VERSION, ModelRef, event_args};
pub use index::{EventInfo, FlowDirection, FlowLink, SectionInfo, TimelineIndex, TrackInfo};
pub use key::CacheKey;
pub use progress::{BuildProgress, BuildStage};
pub use search::{SearchPage, SearchResults};
pub use view::{MergedRun, TrackView, View, Viewport, VisibleEvent, VisibleFlow};
