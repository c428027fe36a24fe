//! CUPTI activity records between `mlprof-inject` (inside a CUDA process) and the
//! `mlprof run` that launched it.
//!
//! The injection does the least it can in the job's process: it hands each buffer CUPTI
//! fills to its parent as raw bytes ([`wire`]), with the offsets of its records and the
//! strings its records point to (kernel and NVTX names live in the job's memory). The
//! parent decodes them ([`records`]) with the layouts CUPTI's own headers give
//! ([`layout`], generated, never edited) and checks every size before it reads.
//!
//! The decision to know: records are read field by field at generated offsets from
//! byte slices, never cast to structs, so a record of another CUPTI version, a short
//! record or a garbage buffer is an error for that record, not undefined behaviour.

pub mod layout;
pub mod records;
pub mod wire;
