//! The JSON API's handlers outside the trace viewer (see API.md): the runs, the tools
//! and their options, one tool's result, and its main table as CSV.

pub mod runs;
pub mod tool;
pub mod tools;
