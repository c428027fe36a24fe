//! The `ProfileRequest` sent to each worker: field for field what TensorFlow's own client
//! (`tsl::profiler::CaptureRemoteTrace`, used by TensorBoard's "Capture Profile" and
//! `tf.profiler.experimental.client.trace`) sends, plus `emit_xspace = true`.
//!
//! Old servers ignore `emit_xspace` (unknown field) and answer as they always did; new
//! ones return the XSpace in the response instead of writing it to their own disk, which
//! is what lets a remote capture land on this machine.

use crate::address::Target;
use crate::proto::{DeviceType, ProfileOptions, ProfileRequest};

/// The tools TensorFlow's client asks for, in its order.
pub const REFERENCE_TOOLS: [&str; 10] = [
    "trace_viewer",
    "op_profile",
    "input_pipeline",
    "kernel_stats",
    "memory_viewer",
    "memory_profile",
    "overview_page",
    "pod_viewer",
    "tensorflow_stats",
    "xplane.pb",
];

/// The event cap TensorFlow's client sends (`max_events`).
pub const MAX_EVENTS: u64 = 1_000_000;

/// The per-capture values that go into every worker's request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestFields<'a> {
    /// How long to trace, in milliseconds.
    pub duration_ms: u64,
    /// When every worker should start tracing, in nanoseconds since the Unix epoch.
    pub start_timestamp_ns: u64,
    /// The session directory name.
    pub session_id: &'a str,
    /// The (absolute) log directory, as text.
    pub logdir: &'a str,
    /// `<logdir>/plugins/profile`, as text.
    pub repository_root: &'a str,
    /// Host tracer level (0–3).
    pub host_tracer_level: u32,
    /// Device tracer level (0–1).
    pub device_tracer_level: u32,
    /// Python tracer level (0–1).
    pub python_tracer_level: u32,
}

/// The request for `target`.
pub fn profile_request(target: &Target, fields: &RequestFields<'_>) -> ProfileRequest {
    let opts = ProfileOptions {
        version: 1,
        device_type: DeviceType::Unspecified as i32,
        include_dataset_ops: true,
        host_tracer_level: fields.host_tracer_level,
        device_tracer_level: fields.device_tracer_level,
        python_tracer_level: fields.python_tracer_level,
        enable_hlo_proto: true,
        start_timestamp_ns: fields.start_timestamp_ns,
        duration_ms: fields.duration_ms,
        repository_path: fields.logdir.to_string(),
        session_id: fields.session_id.to_string(),
        ..ProfileOptions::default()
    };
    ProfileRequest {
        duration_ms: fields.duration_ms,
        max_events: MAX_EVENTS,
        tools: REFERENCE_TOOLS.iter().map(|t| t.to_string()).collect(),
        opts: Some(opts),
        repository_root: fields.repository_root.to_string(),
        session_id: fields.session_id.to_string(),
        host_name: target.host_port(),
        emit_xspace: true,
        ..ProfileRequest::default()
    }
}

#[cfg(test)]
mod tests {
    use super::{RequestFields, profile_request};
    use crate::address::Target;
    use crate::proto::ProfileRequest;

    fn request() -> ProfileRequest {
        let fields = RequestFields {
            duration_ms: 2000,
            start_timestamp_ns: 1_700_000_000_123_000_000,
            session_id: "2026_03_07_09_05_01",
            logdir: "/runs/a",
            repository_root: "/runs/a/plugins/profile",
            host_tracer_level: 2,
            device_tracer_level: 1,
            python_tracer_level: 0,
        };
        profile_request(&Target::parse("grpc://worker-0:6009").unwrap(), &fields)
    }

    /// The list of xprof-notes §11 ("Request: …"), field by field.
    #[test]
    fn matches_the_reference_client() {
        let r = request();
        assert_eq!(r.duration_ms, 2000);
        assert_eq!(r.max_events, 1_000_000);
        assert_eq!(
            r.tools,
            [
                "trace_viewer",
                "op_profile",
                "input_pipeline",
                "kernel_stats",
                "memory_viewer",
                "memory_profile",
                "overview_page",
                "pod_viewer",
                "tensorflow_stats",
                "xplane.pb"
            ]
        );
        assert_eq!(r.repository_root, "/runs/a/plugins/profile");
        assert_eq!(r.session_id, "2026_03_07_09_05_01");
        assert_eq!(r.host_name, "worker-0:6009", "the address without grpc://");
        assert!(r.tool_options.is_empty());
        let o = r.opts.as_ref().unwrap();
        // ProfilerSession::DefaultOptions(): version 1, device 1, host 2, python 0,
        // UNSPECIFIED device type, HLO protos and dataset ops on.
        assert_eq!(o.version, 1);
        assert_eq!((o.host_tracer_level, o.device_tracer_level, o.python_tracer_level), (2, 1, 0));
        assert_eq!(o.device_type, 0);
        assert!(o.enable_hlo_proto);
        assert!(o.include_dataset_ops);
        assert_eq!(o.repository_path, "/runs/a");
        assert_eq!(o.duration_ms, 2000);
        assert_eq!(o.start_timestamp_ns, 1_700_000_000_123_000_000);
        assert_eq!(o.session_id, "2026_03_07_09_05_01");
        assert!(o.advanced_configuration.is_empty() && o.override_hostname.is_empty());
        assert!(o.trace_options.is_none() && !o.raise_error_on_start_failure);
    }

    #[test]
    fn asks_for_the_xspace_in_the_answer() {
        assert!(request().emit_xspace);
    }

    #[test]
    fn ipv6_host_names_keep_their_brackets() {
        let fields = RequestFields {
            duration_ms: 1,
            start_timestamp_ns: 0,
            session_id: "s",
            logdir: "/l",
            repository_root: "/l/plugins/profile",
            host_tracer_level: 2,
            device_tracer_level: 1,
            python_tracer_level: 0,
        };
        assert_eq!(profile_request(&Target::parse("[::1]:6009").unwrap(), &fields).host_name, "[::1]:6009");
    }
}
