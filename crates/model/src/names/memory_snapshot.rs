//! Well-known names of the events and stats a PyTorch memory snapshot is read into
//! (`mlprof_formats::torch_memory`), beyond Kineto's own `[memory]` vocabulary.
//!
//! The one thing to know: these are spellings shared by the reader and the memory
//! profile; the mapping itself is documented in the reader.

/// The category of events only a memory snapshot has.
pub const SNAPSHOT_CATEGORY: &str = "memory_snapshot";
/// The name of a segment's event.
pub const SEGMENT_EVENT: &str = "segment";
/// The stat holding an event's stack (a `Ref` to its text).
pub const FRAMES_STAT: &str = "Frames";
/// The stat holding an entry's stream.
pub const STREAM_STAT: &str = "Stream";
/// The stat holding the device's free bytes at an `oom`.
pub const DEVICE_FREE_STAT: &str = "Device Free";
/// The stat holding a block's state.
pub const BLOCK_STATE_STAT: &str = "State";
/// The stat holding the allocated bytes after an event (Kineto's name).
pub const ALLOCATED_STAT: &str = "Total Allocated";
/// The stat holding the reserved bytes after an event (Kineto's name).
pub const RESERVED_STAT: &str = "Total Reserved";
/// The name prefix of the annotation lines.
pub const ANNOTATIONS_LINE: &str = "annotations";
