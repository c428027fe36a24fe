//! Where each host of a run goes when every host shares the trace viewer's time axis
//! (worked out in `trace/together.rs`, kept in the state's cache): the data only, so the
//! state can hold it without depending on the trace endpoints.

/// Where one host goes on the shared axis.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    /// Its position in the session's hosts.
    pub host: usize,
    /// Added to its events' starts, ps.
    pub offset_ps: i64,
    /// The plane number its first plane has in the index.
    pub plane_base: u32,
}

/// Every host of a run placed on one axis.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placements {
    /// Each host's placement, in the order shown.
    pub hosts: Vec<Placement>,
    /// How they were aligned, as a sentence's end (`aligned by the hosts' clocks`).
    pub alignment: String,
}
