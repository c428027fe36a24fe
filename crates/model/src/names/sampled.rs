//! Names of what `mlprof run` and `mlprof attach` record by sampling, outside any
//! framework: Python stacks on [`PYTHON_PLANE`], native (C/C++) stacks on
//! [`NATIVE_PLANE`], process and GPU counters on [`COUNTERS_PLANE`]. The writer (`mlprof-run`) and the readers (the `python` tool, the
//! trace viewer) share them.
//!
//! On [`PYTHON_PLANE`] each line is one Python thread (its id is the OS thread id, its
//! name `<thread name> (pid <pid>, tid <tid>)`) and
//! each event is a run of consecutive samples in which a frame stayed on the stack:
//! runs nest as the frames do, so a trace viewer draws the samples as a flame chart
//! over time. An event's metadata names the frame (`function (file:line)`) and carries
//! [`FUNCTION_STAT`], [`FILE_STAT`], [`SHORT_FILE_STAT`] and
//! [`LINE_NUMBER_STAT`]; the event carries how many
//! samples it covers ([`SAMPLES_STAT`]) and how many of them found the thread holding
//! the GIL, running without it (native code) or idle.
//!
//! On [`NATIVE_PLANE`] the lines and runs are laid out as on [`PYTHON_PLANE`], from
//! samples the kernel took (`perf_event_open` CPU-clock sampling, so only threads
//! running on a CPU are sampled, in user space) with frame-pointer call chains: an
//! event's metadata names the function and its module (`function (libfoo.so)`) and
//! carries [`FUNCTION_STAT`], [`FILE_STAT`] (the module's path) and [`SHORT_FILE_STAT`]
//! (its file name); events carry only [`SAMPLES_STAT`]. A function without a symbol is
//! named `module+0xADDRESS` (the ELF virtual address of its start, or of the sample).
//!
//! On [`COUNTERS_PLANE`] each line holds one process's or one GPU's counters (a GPU's
//! line is `GPU <ordinal>`, id [`GPU_COUNTER_LINE_BASE`] + ordinal), every
//! reading an instant event named after its counter with the value in
//! [`COUNTER_VALUE_STAT`] (the stat XProf's counter events carry).

/// Plane of sampled Python stacks, one line per thread.
pub const PYTHON_PLANE: &str = "/host:python";
/// Plane of sampled native (C/C++) stacks, one line per thread.
pub const NATIVE_PLANE: &str = "/host:native";
/// Plane of counters read while sampling (`/proc`, NVML), and of the GPU metrics an
/// Nsight Systems export recorded.
pub const COUNTERS_PLANE: &str = "/host:counters";

/// Id of the [`COUNTERS_PLANE`] line of GPU `N`'s counters: this base plus `N` (the
/// CUDA ordinal), above any process id.
pub const GPU_COUNTER_LINE_BASE: i64 = 1 << 32;

/// Event-metadata stat: the function's name.
pub const FUNCTION_STAT: &str = "function";
/// Event-metadata stat: the function's source file, as the interpreter knows it.
pub const FILE_STAT: &str = "file";
/// Event-metadata stat: the source file as people read it (the path below
/// `site-packages`, or the file's path).
pub const SHORT_FILE_STAT: &str = "short_file";
/// Event-metadata stat: the line the frame was at (1-based; 0 when unknown).
pub const LINE_NUMBER_STAT: &str = "line";

/// Event stat: samples this run covers (the frame was on the stack in each).
pub const SAMPLES_STAT: &str = "samples";
/// Event stat: of [`SAMPLES_STAT`], those that found the thread holding the GIL.
pub const GIL_SAMPLES_STAT: &str = "gil_samples";
/// Event stat: of [`SAMPLES_STAT`], those that found the thread running without the GIL
/// (in native code: a C/C++ extension, a framework's kernels).
pub const NATIVE_SAMPLES_STAT: &str = "native_samples";
/// Event stat: of [`SAMPLES_STAT`], those that found the thread idle (waiting, sleeping).
pub const IDLE_SAMPLES_STAT: &str = "idle_samples";

/// Plane stat of [`PYTHON_PLANE`] and [`NATIVE_PLANE`]: the sampling interval,
/// nanoseconds (on [`NATIVE_PLANE`], of CPU time).
pub const SAMPLE_INTERVAL_NS_STAT: &str = "sample_interval_ns";
/// Plane stat of [`PYTHON_PLANE`]: samples that could not be read (the process was
/// between states), over the whole window.
pub const FAILED_SAMPLES_STAT: &str = "failed_samples";

/// Plane stat of [`NATIVE_PLANE`]: samples the kernel could not hand over (its ring
/// buffer was full), over the whole run so far.
pub const LOST_SAMPLES_STAT: &str = "lost_samples";

/// Stat of a counter reading: its value (XProf's `counter_value`).
pub const COUNTER_VALUE_STAT: &str = "counter_value";
