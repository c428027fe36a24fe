//! mlprof's analyses. Each module is one tool: a pure function from the model (plus
//! options) to a typed, `serde`-serialisable result. No analysis does I/O; views
//! (CLI, web) only render these results, through [`report::Report`] (for people) or
//! the tool's XProf-compatible JSON ([`datatable`]).

mod adjacency;
pub mod advise;
pub mod counters;
pub mod datatable;
pub mod derived_lines;
pub mod facts;
pub mod framework_op_stats;
pub mod gpu;
pub mod gpu_caps;
pub mod grouping;
mod hlo;
mod hta_read;
pub mod input_pipeline;
pub mod inventory;
pub mod kernel_stats;
pub mod kineto;
pub mod memory_profile;
pub mod op_metrics;
pub mod overview;
pub mod pod_viewer;
pub mod python_code;
pub mod python_flame;
pub mod report;
pub mod step_table;
pub mod steps;
pub mod tf_data;
pub mod tf_op;
pub mod tfprof;
pub mod tool;
pub mod tool_availability;
pub mod trace_diff;
pub mod xstats;
