//! mlprof's analyses. Each module is one tool: a pure function from the model (plus
//! options) to a typed, `serde`-serialisable result. No analysis does I/O; views
//! (CLI, web) only render these results.

pub mod inventory;
