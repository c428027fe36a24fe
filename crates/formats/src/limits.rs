//! How much structure the readers accept in one profile: limits far above what any
//! profiler writes (a plane per device, a line per thread or stream), so that a crafted
//! file of tiny empty planes or lines cannot make a reader spend a few hundred bytes of
//! model per two bytes of input without bound. Events have no such limit: their memory
//! is proportional to the bytes that encode them.

/// The most planes one host file may hold (XSpace planes; a Kineto trace has a few).
pub const MAX_PLANES: usize = 1 << 16;

/// The most lines (threads, streams, `(pid, tid)` tracks) one host file may hold in all.
pub const MAX_LINES: usize = 1 << 20;

/// Why a file with more than `limit` `what`s is refused.
pub(crate) fn too_many(what: &str, limit: usize) -> String {
    format!(
        "more than {limit} {what} in one profile: no profiler writes that many, so it is refused to keep memory \
         bounded"
    )
}
