//! The profile model every mlprof source fills and every analysis reads.
//!
//! A load produces [`Session`]s; a session holds one [`Host`] per profiled process (an
//! XSpace file or a Kineto trace of one rank); a host holds [`Plane`]s (`/host:CPU`,
//! `/device:GPU:0`, …); a plane holds [`Line`]s (threads, streams) whose events are
//! stored **column-wise** (start offset, duration, metadata index, stat range) rather
//! than as one struct per event, offsets and durations packed in about 4 bytes each
//! ([`PackedI64`]), metadata indices and stat ranges in about 2 ([`PackedU32`]). Names and stat keys are interned once per plane in its metadata
//! tables; events refer to them by dense `u32` index. Times are integer
//! **picoseconds** everywhere, as in XSpace.
//!
//! The one design decision to know: the model does no I/O and knows no file format.
//! Readers in `mlprof-formats` fill it; the few source-specific facts that a lossless
//! round trip needs (a Chrome trace's pid/tid and metadata records) live in plainly
//! named optional fields ([`Line::chrome_track`], [`Host::chrome`]).

pub mod allocator_trace;
pub mod duration;
pub mod fxhash;
mod host;
pub mod human;
mod line;
pub mod names;
#[macro_use]
mod packed;
mod packed_u32;
mod plane;
mod stats;
pub mod time;

pub use allocator_trace::{AllocatorAction, AllocatorRecord, AllocatorTrace, ByDevice, RecordExtras};
pub use host::{ChromeMetadataEvent, ChromeTraceInfo, Host, Session, SourceFormat};
pub use line::{Event, EventColumns, Line, TrackId};
pub use packed::PackedI64;
pub use packed_u32::PackedU32;
pub use plane::{EventMetadata, Plane, PlaneBuilder, StatMetadata};
pub use stats::{ArenaFull, MAX_STAT_KEYS, Stat, StatStore, StatValue, TextRef};
