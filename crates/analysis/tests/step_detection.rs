//! Where mlprof is right and XProf is not, on small hand-built XSpace hosts: steps
//! marked only with `step_num` (Keras 3), the classic GPU breakdown that includes
//! host time, and current CUPTI memcpy names (`MemcpyH2D`, `size:`).

use mlprof_analysis::facts::{step_groups, step_groups_as_xprof};
use mlprof_analysis::grouping::StepSource;
use mlprof_analysis::steps::{Breakdown, EventType, StepOptions, host_steps};
use mlprof_model::{Host, Line, PlaneBuilder, SourceFormat, StatValue};

const MS: i64 = 1_000_000_000;

/// Adds an event with integer stats to `line` (stats go before `push_event`).
fn event(line: &mut Line, metadata: u32, start_ps: i64, duration_ps: i64, stats: &[(u32, StatValue)]) {
    for &(key, value) in stats {
        line.stats.push(key, value);
    }
    line.push_event(metadata, start_ps, duration_ps);
}

/// A GPU training step: host `train` step (root, 0–10 ms) waiting 3 ms for input and
/// launching two kernels and one host-to-device copy; on the GPU the copy
/// (`MemcpyH2D`, `size:4096`) and the kernels run 4.6–9 ms.
fn gpu_host() -> Host {
    let mut host_plane = PlaneBuilder::new(1, "/host:CPU");
    let train = host_plane.event_metadata("train", 0, |_| Vec::new());
    let get_next = host_plane.event_metadata("IteratorGetNextOp::DoCompute", 0, |_| Vec::new());
    let launch = host_plane.event_metadata("cudaLaunchKernel", 0, |_| Vec::new());
    let copy_launch = host_plane.event_metadata("cudaMemcpyAsync", 0, |_| Vec::new());
    let [root, step_num, correlation] = ["_r", "step_num", "correlation_id"].map(|n| host_plane.stat_key(n));
    let mut python = Line::new(1, "python");
    event(&mut python, train, 0, 10 * MS, &[(root, StatValue::Int(1)), (step_num, StatValue::Int(1))]);
    event(&mut python, get_next, 0, 3 * MS, &[]);
    event(&mut python, launch, 3 * MS, MS, &[(correlation, StatValue::Int(1))]);
    event(&mut python, launch, 4 * MS, MS / 2, &[(correlation, StatValue::Int(2))]);
    event(&mut python, copy_launch, 4 * MS + MS / 2, MS / 10, &[(correlation, StatValue::Int(3))]);
    host_plane.push_line(python);

    let mut gpu = PlaneBuilder::new(2, "/device:GPU:0");
    let copy = gpu.event_metadata("MemcpyH2D", 0, |_| Vec::new());
    let gemm = gpu.event_metadata("volta_sgemm_128x64_nn", 0, |_| Vec::new());
    let relu = gpu.event_metadata("relu_kernel", 0, |_| Vec::new());
    let [correlation, details] = ["correlation_id", "memcpy_details"].map(|n| gpu.stat_key(n));
    let mut stream = Line::new(7, "Stream #7(Kernel,MemcpyH2D)");
    let text = stream.stats.store_bytes(b"kind_src:pageable kind_dst:device size:4096 dest:0 async:1").expect("fits");
    event(
        &mut stream,
        copy,
        4 * MS + 6 * MS / 10,
        4 * MS / 10,
        &[(correlation, StatValue::Int(3)), (details, StatValue::Str(text))],
    );
    event(&mut stream, gemm, 5 * MS, 3 * MS, &[(correlation, StatValue::Int(1))]);
    event(&mut stream, relu, 8 * MS, MS, &[(correlation, StatValue::Int(2))]);
    gpu.push_line(stream);

    let mut host = Host::new("gpuhost", "gpuhost.xplane.pb", SourceFormat::Xspace);
    host.planes.push(host_plane.finish());
    host.planes.push(gpu.finish());
    host
}

fn ms(ps: i64) -> f64 {
    ps as f64 / MS as f64
}

#[test]
fn classic_gpu_breakdown_includes_host_time_and_xprof_mode_does_not() {
    let host = gpu_host();
    let groups = step_groups(&host);
    assert_eq!(groups.names, vec!["train 1"]);

    let classic = host_steps(&host, &groups, StepOptions { breakdown: Breakdown::Classic, ..StepOptions::default() });
    let [step] = classic.steps.as_slice() else { panic!("one step: {:?}", classic.steps) };
    assert!(classic.has_device);
    assert_eq!(ms(step.duration_ps), 10.0, "the host step encloses the device step");
    assert_eq!(ms(step.ps(EventType::HostWaitInput)), 3.0);
    assert!((ms(step.ps(EventType::HostPrepare)) - 1.6).abs() < 1e-9, "kernel launch");
    assert!((ms(step.ps(EventType::HostToDevice)) - 0.4).abs() < 1e-9, "MemcpyH2D counts as input");
    assert_eq!(ms(step.ps(EventType::DeviceCompute32)), 4.0);
    assert!((ms(step.ps(EventType::UnknownTime)) - 1.0).abs() < 1e-9);
    assert_eq!(classic.transfers[0].bytes, 4096, "size: from current CUPTI memcpy_details");
    assert_eq!(classic.transfers[0].occurrences, 1);

    let xprof = host_steps(&host, &groups, StepOptions { breakdown: Breakdown::Xprof, ..StepOptions::default() });
    let [step] = xprof.steps.as_slice() else { panic!("one step") };
    assert!((ms(step.duration_ps) - 4.4).abs() < 1e-9, "device step only");
    assert_eq!(step.ps(EventType::HostWaitInput), 0);
    assert_eq!(step.ps(EventType::HostPrepare), 0);
    assert!((ms(step.ps(EventType::HostToDevice)) - 0.4).abs() < 1e-9);
}

/// A CPU-only Keras 3 style profile: each batch is an event with `step_num` but no
/// root flag, holding one TF op.
fn keras3_host(batches: i64) -> Host {
    let mut b = PlaneBuilder::new(1, "/host:CPU");
    let batch = b.event_metadata("Profiled batch", 0, |_| Vec::new());
    let matmul = b.event_metadata("dense/MatMul:MatMul", 0, |_| Vec::new());
    let step_num = b.stat_key("step_num");
    let mut python = Line::new(1, "python");
    for i in 0..batches {
        event(&mut python, batch, i * 5 * MS, 4 * MS, &[(step_num, StatValue::Int(20 + i))]);
        event(&mut python, matmul, i * 5 * MS + MS, 2 * MS, &[]);
    }
    b.push_line(python);
    let mut host = Host::new("vm", "vm.xplane.pb", SourceFormat::Xspace);
    host.planes.push(b.finish());
    host
}

#[test]
fn steps_marked_only_with_step_num_are_found_where_xprof_finds_none() {
    let host = keras3_host(3);
    let xprof = step_groups_as_xprof(&host);
    assert!(host_steps(&host, &xprof, StepOptions::default()).steps.is_empty(), "XProf finds no step");

    let groups = step_groups(&host);
    assert_eq!(groups.source, StepSource::StepNumEvents { event_name: "Profiled batch".into(), groups: 3 });
    assert!(groups.source.describe().contains("3 steps from events named \"Profiled batch\" with step_num"));
    let steps = host_steps(&host, &groups, StepOptions::default());
    let names: Vec<&str> = steps.steps.iter().map(|s| s.step_name.as_str()).collect();
    assert_eq!(names, vec!["Profiled batch 20", "Profiled batch 21", "Profiled batch 22"]);
    for step in &steps.steps {
        assert_eq!(ms(step.duration_ps), 4.0);
        assert_eq!(ms(step.ps(EventType::HostCompute)), 2.0);
        assert_eq!(ms(step.ps(EventType::UnknownTime)), 2.0);
    }
}

#[test]
fn categories_always_sum_to_the_step_time() {
    for host in [gpu_host(), keras3_host(4)] {
        let groups = step_groups(&host);
        for breakdown in [Breakdown::Classic, Breakdown::Xprof] {
            let steps = host_steps(&host, &groups, StepOptions { breakdown, ..StepOptions::default() });
            for step in &steps.steps {
                assert_eq!(step.type_ps.iter().sum::<i64>(), step.duration_ps, "{}", step.step_name);
            }
        }
    }
}
