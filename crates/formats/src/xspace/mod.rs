//! XSpace (`*.xplane.pb`): the profile format of TensorFlow, JAX and XLA.
//!
//! [`read::read_xspace`] decodes with a hand-written zero-copy wire decoder
//! ([`crate::wire`]) rather than `prost`-generated structs: it decodes straight into the
//! columnar model, with no intermediate per-event structs or strings (see
//! `benches/ingest.rs` for the measured comparison). [`write::encode_xspace`] is its
//! inverse.

pub mod read;
pub mod write;

pub use read::{read_xspace, read_xspace_releasing};
pub use write::encode_xspace;
