//! `mlprof run -- CMD`: launch an ML job, unchanged, prepared so that its own framework's
//! tracer can be driven from outside, and collect what it records into a TensorBoard log
//! directory every mlprof tool reads.
//!
//! - PyTorch: the job starts in Kineto's on-demand mode (`KINETO_USE_DAEMON=1`) with a
//!   socket private to the run; [`kineto_daemon`] plays dynolog's part of the protocol
//!   ([`kineto_ipc`]) and asks each process for traces when [`schedule`] says so.
//! - JAX and TensorFlow: a Python start-up hook ([`python_hook`]) starts the framework's
//!   profiler server once the job imports it, and mlprof captures it over gRPC.
//! - Any other CUDA process: the driver loads `mlprof-inject` (`CUDA_INJECTION64_PATH`),
//!   which connects to [`cupti_collector`]'s socket; each window of CUPTI records is
//!   decoded and laid out as an XSpace by [`cupti_profile`].
//! - [`nvml`]: NVIDIA GPU counters, read through NVML loaded at run time.
//! - Any Python process: [`sampling`] reads every thread's Python stack at `--sample-hz`
//!   (py-spy, from outside) and each process's CPU, memory and I/O from `/proc`.
//! - [`attach`]: the same sampling, and a profiler server the process already runs, for
//!   a process that is running (`mlprof attach PID`).
//! - [`agent_link`]: with `--agent`, the run registers with the node's agent and
//!   records what it asks for.
//! - [`own_use`]: what mlprof itself cost (CPU, memory), said at the end.
//! - [`launch`] starts the job and ends with it: same streams, signals passed on, its
//!   exit code. [`job`] ties it together.
//!
//! The design rule everywhere: the job comes first. Whatever fails on mlprof's side turns
//! that part off and says so in one line; the job runs on at full speed.

pub mod agent_link;
pub mod attach;
pub mod attach_kineto;
pub mod cupti_collector;
pub mod cupti_profile;
pub mod http1;
pub mod job;
pub mod kineto_daemon;
pub mod kineto_ipc;
pub mod kineto_retry;
pub mod launch;
pub mod listening;
pub mod nvml;
pub mod own_use;
pub mod python_hook;
pub mod sample_windows;
pub mod sampling;
pub mod schedule;
pub mod sock_diag;
pub mod torch_fallback;

pub use job::{DeviceTracer, RunOptions, RunOutcome, run_job};
