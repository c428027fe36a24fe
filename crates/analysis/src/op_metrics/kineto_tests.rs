//! Unit tests of the Kineto op databases on a small hand-written trace that has each
//! case once: nested ATen ops, a launch that overhangs its op by a nanosecond, a
//! top-level synchronisation, a kernel whose `External id` names an annotation, a
//! kernel found only by correlation, one found by nothing, a copy, and an annotation
//! projected on the stream.

use mlprof_model::Host;

use super::{
    IDLE, OpMetrics, OpMetricsDb, kineto_device_op_metrics_db, kineto_host_op_metrics_db, tf_metrics_db_from_device,
};

/// Thread 1: `ProfilerStep#1` [0, 100) around `aten::linear` [10, 60) around
/// `aten::addmm` [12, 52) around a launch [20, 30); a launch [55, 60.001) in
/// `aten::linear`; `cudaDeviceSynchronize` [70, 90). Thread 2: `aten::mul` [0, 10)
/// around a launch [2, 5). GPU 0, stream 7: kernels `sm80_xmma_gemm_f32` (addmm, by
/// External id), `gemm2` (External id of the step annotation; correlation → linear),
/// `mul_kernel` (correlation only → mul), `orphan` (nothing), a copy (External id →
/// mul) and a `gpu_user_annotation` [0, 200).
pub(crate) const TRACE: &str = r#"{"traceEvents": [
 {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 1000, "dur": 100, "args": {"External id": 999}},
 {"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 1, "tid": 1, "ts": 1010, "dur": 50, "args": {"External id": 1}},
 {"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 1, "tid": 1, "ts": 1012, "dur": 40, "args": {"External id": 2}},
 {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 1020, "dur": 10, "args": {"External id": 2, "correlation": 100}},
 {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 1055, "dur": 5.001, "args": {"External id": 999, "correlation": 101}},
 {"ph": "X", "cat": "python_function", "name": "train.py(9): step", "pid": 1, "tid": 1, "ts": 1065, "dur": 30},
 {"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "pid": 1, "tid": 1, "ts": 1070, "dur": 20, "args": {"correlation": 103}},
 {"ph": "X", "cat": "cpu_op", "name": "aten::mul", "pid": 1, "tid": 2, "ts": 1000, "dur": 10, "args": {"External id": 3}},
 {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 2, "ts": 1002, "dur": 3, "args": {"correlation": 102}},
 {"ph": "X", "cat": "gpu_user_annotation", "name": "ProfilerStep#1", "pid": 0, "tid": 7, "ts": 1000, "dur": 200, "args": {"External id": 999}},
 {"ph": "X", "cat": "kernel", "name": "sm80_xmma_gemm_f32", "pid": 0, "tid": 7, "ts": 1025, "dur": 30, "args": {"External id": 2, "correlation": 100, "stream": 7, "registers per thread": 128, "shared memory": 4096, "grid": [4, 2, 1], "block": [256, 1, 1]}},
 {"ph": "X", "cat": "kernel", "name": "gemm2", "pid": 0, "tid": 7, "ts": 1060, "dur": 10, "args": {"External id": 999, "correlation": 101, "stream": 7, "registers per thread": 64, "shared memory": 0, "grid": [1, 1, 1], "block": [128, 1, 1]}},
 {"ph": "X", "cat": "kernel", "name": "mul_kernel", "pid": 0, "tid": 7, "ts": 1080, "dur": 5, "args": {"correlation": 102, "stream": 7, "registers per thread": 16, "grid": "odd", "block": [64, 1]}},
 {"ph": "X", "cat": "kernel", "name": "orphan", "pid": 0, "tid": 7, "ts": 1090, "dur": 5, "args": {"correlation": 555, "stream": 7}},
 {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0, "tid": 7, "ts": 1095, "dur": 5, "args": {"External id": 3, "correlation": 104, "stream": 7}}
]}"#;

/// [`TRACE`] read as the Kineto reader reads it.
pub(crate) fn sample_host() -> Host {
    mlprof_formats::kineto::read_kineto(TRACE.as_bytes(), "sample.json", "sample").expect("the sample trace parses")
}

const US: u64 = 1_000_000;

fn op<'a>(db: &'a OpMetricsDb, name: &str) -> &'a OpMetrics {
    db.metrics.iter().find(|m| m.name == name).unwrap_or_else(|| panic!("no op {name} in {db:#?}"))
}

#[test]
fn host_ops_are_cpu_ops_and_runtime_calls_with_self_time() {
    let host = sample_host();
    let db = kineto_host_op_metrics_db(&host);
    let linear = op(&db, "aten::linear");
    // 50 µs minus addmm (40) and the overhanging launch (5.001), still nested.
    assert_eq!((linear.category.as_str(), linear.time_ps, linear.self_time_ps), ("aten", 50 * US, 4_999_000));
    assert_eq!(op(&db, "aten::addmm").self_time_ps, 30 * US);
    let launch = op(&db, "cudaLaunchKernel");
    assert_eq!((launch.category.as_str(), launch.occurrences, launch.self_time_ps), ("CUDA runtime", 3, 18_001_000));
    assert_eq!(op(&db, "cudaDeviceSynchronize").self_time_ps, 20 * US);
    assert_eq!(op(&db, "aten::mul").self_time_ps, 7 * US);
    assert!(db.metrics.iter().all(|m| !m.name.starts_with("ProfilerStep") && !m.name.starts_with("train.py")));
    // Thread 1 spans [10, 90) with 70 µs of self time; thread 2 is busy all its span.
    assert_eq!((db.total_time_ps, db.total_op_time_ps), (90 * US, 80 * US));
    assert_eq!(op(&db, IDLE).self_time_ps, 10 * US);
}

#[test]
fn device_ops_roll_up_to_the_aten_op_that_launched_them() {
    let host = sample_host();
    let device = kineto_device_op_metrics_db(&host);
    assert_eq!(op(&device, "aten::addmm/sm80_xmma_gemm_f32").provenance, "aten::addmm");
    assert_eq!(op(&device, "aten::mul/Memcpy HtoD (Pageable -> Device)").time_ps, 5 * US);
    // Span [25, 100) with 55 µs of activity; the stream annotation is no op.
    assert_eq!((device.total_time_ps, device.total_op_time_ps), (75 * US, 55 * US));
    assert_eq!(op(&device, IDLE).self_time_ps, 20 * US);

    let rolled = tf_metrics_db_from_device(&device, true);
    let rows: Vec<(&str, &str, u64, u64)> = rolled
        .metrics
        .iter()
        .map(|m| (m.name.as_str(), m.category.as_str(), m.occurrences, m.self_time_ps / US))
        .collect();
    assert_eq!(
        rows,
        [
            ("aten::addmm", "aten", 1, 30),
            ("aten::linear", "aten", 1, 10),
            ("aten::mul", "aten", 1, 10),
            ("orphan", "Unknown", 1, 5),
            (IDLE, IDLE, 0, 20),
        ]
    );
}
