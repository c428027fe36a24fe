//! Readers and writers of profile formats, filling and reading `mlprof-model`.
//!
//! Sources: XSpace protobuf (`xspace`), Kineto / Chrome trace JSON (`kineto`), and the
//! directory layouts they come in (`discover`: a file, a profile session directory, a
//! TensorBoard log directory, a directory of per-rank traces). Sinks: Chrome trace JSON
//! (`chrome`) and XSpace TensorBoard log directories (`xspace::write`).
//!
//! The one design decision to know: every reader decodes a whole file from one byte
//! slice (memory-mapped or inflated once, see `input`) without allocating per event,
//! and reports errors with the file and the byte offset or JSON line/column.

pub mod chrome;
pub mod cupti_xspace;
pub mod discover;
pub mod error;
pub mod input;
pub mod intern;
pub mod kineto;
pub mod limits;
pub mod nsys;
pub mod output;
pub mod pickle;
pub mod progress;
pub mod torch_memory;
pub mod wire;
pub mod xspace;

pub use error::{FormatError, JsonPosition, Result};
