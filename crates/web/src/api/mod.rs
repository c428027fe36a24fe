//! The JSON API's handlers outside the trace viewer (see API.md): the runs, the tools
//! and their options, one tool's result, its main table as CSV, and the `python`
//! tool's flame graph, and what is being read or built for a run (`progress`).

pub mod progress;
pub mod python;
pub mod runs;
pub mod tool;
pub mod tools;
