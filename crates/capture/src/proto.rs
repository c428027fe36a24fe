//! The messages of `tensorflow.ProfilerService`, written as prost structs with the field
//! numbers of TSL's `profiler_service.proto` and `profiler_options.proto`, so that no
//! `.proto` compiler is needed at build time.
//!
//! One deliberate difference from the reference schema: `ProfileResponse.xspace` is an
//! `XSpace` message there and raw bytes here. Both have the same wire encoding
//! (length-delimited), so the client writes the server's XSpace to disk byte for byte
//! without decoding it, and the server sends the bytes `mlprof_formats` encoded.

use std::collections::HashMap;

/// Which devices a profiling session traces (`ProfileOptions.DeviceType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum DeviceType {
    /// Let the server decide (TensorFlow's default).
    Unspecified = 0,
    /// Host only.
    Cpu = 1,
    /// NVIDIA/AMD GPUs.
    Gpu = 2,
    /// TPUs.
    Tpu = 3,
    /// A PluggableDevice plugin.
    PluggableDevice = 4,
}

/// Filters for host TraceMe events (`ProfileOptions.TraceOptions`).
#[derive(Clone, PartialEq, prost::Message)]
pub struct TraceOptions {
    /// Bit mask of TraceMe filter bits to keep; 0 keeps all.
    #[prost(uint64, tag = "1")]
    pub host_traceme_filter_mask: u64,
}

/// One value of `ProfileOptions.advanced_configuration`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct AdvancedConfigValue {
    /// The value, one of three types.
    #[prost(oneof = "AdvancedConfig", tags = "1, 2, 3")]
    pub value: Option<AdvancedConfig>,
}

/// The typed payload of an [`AdvancedConfigValue`].
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum AdvancedConfig {
    /// A string setting.
    #[prost(string, tag = "1")]
    StringValue(String),
    /// A boolean setting.
    #[prost(bool, tag = "2")]
    BoolValue(bool),
    /// An integer setting.
    #[prost(int64, tag = "3")]
    Int64Value(i64),
}

/// What to trace and how (`tensorflow.ProfileOptions`).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ProfileOptions {
    /// Whether tf.data ops are traced on the host.
    #[prost(bool, tag = "1")]
    pub include_dataset_ops: bool,
    /// Host TraceMe level: 0 off, 1 user annotations, 2 + high-level ops, 3 verbose.
    #[prost(uint32, tag = "2")]
    pub host_tracer_level: u32,
    /// Device tracer level: 0 off, 1 on.
    #[prost(uint32, tag = "3")]
    pub device_tracer_level: u32,
    /// Python tracer level: 0 off, 1 on.
    #[prost(uint32, tag = "4")]
    pub python_tracer_level: u32,
    /// Schema version; 1 tells the server that zero levels mean "off", not "unset".
    #[prost(uint32, tag = "5")]
    pub version: u32,
    /// Devices to trace.
    #[prost(enumeration = "DeviceType", tag = "6")]
    pub device_type: i32,
    /// Whether the server should also collect HLO protos.
    #[prost(bool, tag = "7")]
    pub enable_hlo_proto: bool,
    /// When the session should start, in nanoseconds since the Unix epoch (0: now).
    #[prost(uint64, tag = "8")]
    pub start_timestamp_ns: u64,
    /// How long to trace, in milliseconds.
    #[prost(uint64, tag = "9")]
    pub duration_ms: u64,
    /// The log directory the client will write to.
    #[prost(string, tag = "10")]
    pub repository_path: String,
    /// TraceMe filters.
    #[prost(message, optional, tag = "11")]
    pub trace_options: Option<TraceOptions>,
    /// Free-form settings (e.g. `override_hostname`).
    #[prost(map = "string, message", tag = "12")]
    pub advanced_configuration: HashMap<String, AdvancedConfigValue>,
    /// Whether a failure to start a tracer is an error rather than a warning.
    #[prost(bool, tag = "13")]
    pub raise_error_on_start_failure: bool,
    /// The session id.
    #[prost(string, tag = "14")]
    pub session_id: String,
    /// Host name the server should use in file names.
    #[prost(string, tag = "15")]
    pub override_hostname: String,
}

/// Per-tool request settings (`tensorflow.ToolRequestOptions`).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ToolRequestOptions {
    /// Comma-separated output formats.
    #[prost(string, tag = "2")]
    pub output_formats: String,
    /// Whether the server should save the tool's data to its repository.
    #[prost(bool, tag = "3")]
    pub save_to_repo: bool,
}

/// `tensorflow.ProfileRequest`: capture `duration_ms` of trace.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ProfileRequest {
    /// How long to trace, in milliseconds.
    #[prost(uint64, tag = "1")]
    pub duration_ms: u64,
    /// Upper bound on trace events the server keeps.
    #[prost(uint64, tag = "2")]
    pub max_events: u64,
    /// Tool names whose data the client wants.
    #[prost(string, repeated, tag = "3")]
    pub tools: Vec<String>,
    /// What to trace.
    #[prost(message, optional, tag = "4")]
    pub opts: Option<ProfileOptions>,
    /// `<logdir>/plugins/profile`, where the profile is saved.
    #[prost(string, tag = "5")]
    pub repository_root: String,
    /// The session directory name (`%Y_%m_%d_%H_%M_%S`).
    #[prost(string, tag = "6")]
    pub session_id: String,
    /// The address the client used for this server (`host:port`).
    #[prost(string, tag = "7")]
    pub host_name: String,
    /// Per-tool settings.
    #[prost(map = "string, message", tag = "8")]
    pub tool_options: HashMap<String, ToolRequestOptions>,
    /// Return the XSpace in the response instead of writing it on the server's disk.
    #[prost(bool, tag = "9")]
    pub emit_xspace: bool,
}

/// One tool's output in a [`ProfileResponse`] (`tensorflow.ProfileToolData`).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ProfileToolData {
    /// File suffix of the data, e.g. `xplane.pb` or `trace.json.gz`.
    #[prost(string, tag = "1")]
    pub name: String,
    /// The serialised tool data.
    #[prost(bytes = "vec", tag = "2")]
    pub data: Vec<u8>,
}

/// `tensorflow.ProfileResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ProfileResponse {
    /// Per-tool data (servers that convert on their side, and mlprof's server when the
    /// client did not ask for `emit_xspace`).
    #[prost(message, repeated, tag = "6")]
    pub tool_data: Vec<ProfileToolData>,
    /// True when the session recorded no trace events.
    #[prost(bool, tag = "7")]
    pub empty_trace: bool,
    /// The serialised `tensorflow.profiler.XSpace`, when the request had `emit_xspace`.
    #[prost(bytes = "vec", optional, tag = "8")]
    pub xspace: Option<Vec<u8>>,
}

/// `tensorflow.TerminateRequest`: end a running `Profile` early.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TerminateRequest {
    /// The `session_id` of the `ProfileRequest` to end.
    #[prost(string, tag = "1")]
    pub session_id: String,
}

/// `tensorflow.TerminateResponse` (empty).
#[derive(Clone, PartialEq, prost::Message)]
pub struct TerminateResponse {}

/// `tensorflow.MonitorRequest` (answered UNIMPLEMENTED, as the reference server does).
#[derive(Clone, PartialEq, prost::Message)]
pub struct MonitorRequest {
    /// Monitoring window, in milliseconds.
    #[prost(uint64, tag = "1")]
    pub duration_ms: u64,
    /// Detail level.
    #[prost(int32, tag = "2")]
    pub monitoring_level: i32,
    /// Whether to include a timestamp.
    #[prost(bool, tag = "3")]
    pub timestamp: bool,
}

/// `tensorflow.MonitorResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct MonitorResponse {
    /// Human-readable monitoring data.
    #[prost(string, tag = "1")]
    pub data: String,
}
