//! Chrome trace JSON (the format of chrome://tracing, Perfetto and Kineto) as an
//! output. Input is read by [`crate::kineto`], which shares the conventions below.
//!
//! Conventions for hosts read from a Chrome/Kineto trace, kept so that writing them back
//! loses nothing:
//! - event metadata stat [`CAT_STAT`] holds the event's `cat`, [`PH_STAT`] its `ph` when
//!   it is not `X`;
//! - event stats are the event's `args`, in order, except stats whose name starts with
//!   [`FIELD_PREFIX`]: those are the event's other top-level fields (`@s` for an
//!   instant's scope, `@id` and `@bp` for flows, …), restored as fields, not args;
//! - Kineto's `correlation`, `device` and `context` args are stored under XProf's names
//!   ([`ARG_RENAMES`]) and written back under Kineto's.

pub mod emitter;
pub mod json_text;
pub mod write;

pub use emitter::TraceWriter;
pub use write::write_chrome_trace;

pub use mlprof_model::names::chrome::{CAT_STAT, PH_STAT};
/// Prefix of stats that hold an event's non-`args` fields.
pub const FIELD_PREFIX: &str = "@";
/// Kineto arg name → the model's (XProf's) stat name.
pub const ARG_RENAMES: &[(&str, &str)] =
    &[("correlation", "correlation_id"), ("device", "device_id"), ("context", "context_id")];

/// The model stat name for a Kineto arg name.
pub fn stat_name_for_arg(arg: &str) -> &str {
    ARG_RENAMES.iter().find(|(k, _)| *k == arg).map_or(arg, |(_, m)| m)
}

/// The Kineto arg name for a model stat name of a Kineto-read host.
pub fn arg_name_for_stat(stat: &str) -> &str {
    ARG_RENAMES.iter().find(|(_, m)| *m == stat).map_or(stat, |(k, _)| k)
}
