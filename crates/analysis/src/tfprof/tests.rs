//! The views end to end on small hand-built hosts: a TensorFlow host (nested ops,
//! allocations, a Python tracer frame, a GPU kernel), a PyTorch trace (annotations,
//! `nn.Module` and Python frames, memory events, two steps, a launched and an orphan
//! kernel) and an XLA host (an HLO program with operands, shapes and a Python stack).

use mlprof_model::{Host, Line, PlaneBuilder, SourceFormat, StatValue, names};

use super::*;
use crate::facts::step_groups;
use crate::framework_op_stats;
use crate::hlo::tests::sample_metadata_plane;

const US: i64 = 1_000_000;

/// Runs `options` on `host`.
fn run(host: &Host, options: &TfprofOptions) -> TfprofResult {
    let groups = step_groups(host);
    analyze(&[(host, &groups)], options).expect("the view runs")
}

/// `(name, depth, total micros)` of each row.
fn tree(result: &TfprofResult) -> Vec<(String, usize, i64)> {
    result.rows.iter().map(|r| (r.name.clone(), r.depth, r.total.micros_ps / US)).collect()
}

fn row<'r>(result: &'r TfprofResult, name: &str) -> &'r TfprofRow {
    result.rows.iter().find(|r| r.name == name).unwrap_or_else(|| panic!("no row {name} in {:#?}", tree(result)))
}

fn with(view: View) -> TfprofOptions {
    TfprofOptions { view, ..TfprofOptions::default() }
}

fn regexes(list: &str) -> Regexes {
    Regexes::parse("test", list).expect("valid regexes")
}

/// A TensorFlow host. Thread `tf_Compute`: `model/dense/MatMul` [0, 100) µs, which
/// allocates 400 bytes of output and 100 temporary bytes (freed at 50), then
/// `model/dense/BiasAdd` [100, 130) and `model/relu/Relu` [150, 160) (the output is
/// freed at 155). Thread `python`: a Python tracer frame `$train.py:3 main` [0, 200)
/// around `eager/Identity` [50, 60). GPU 0: kernel `gemm` [20, 60) of MatMul.
fn tf_host() -> Host {
    let mut builder = PlaneBuilder::new(0, names::HOST_PLANE);
    let keys: Vec<u32> = ["tf_op", "requested_bytes", "addr", "allocator_name", "region_type"]
        .iter()
        .map(|k| builder.stat_key(k))
        .collect();
    let mut compute = Line::new(1, "tf_Compute");
    let event = |line: &mut Line, builder: &mut PlaneBuilder, name: &str, start: i64, duration: i64| {
        let metadata = builder.event_metadata(name, 0, |_| Vec::new());
        line.push_event(metadata, start * US, duration * US);
    };
    event(&mut compute, &mut builder, "model/dense/MatMul:MatMul", 0, 100);
    event(&mut compute, &mut builder, "model/dense/BiasAdd:BiasAdd", 100, 30);
    event(&mut compute, &mut builder, "model/relu/Relu:Relu", 150, 10);
    let memory = |line: &mut Line, builder: &mut PlaneBuilder, alloc: Option<(&str, i64, &str)>, addr: i64, at: i64| {
        if let Some((op, bytes, region)) = alloc {
            line.stats.push_str(keys[0], op).expect("fits");
            line.stats.push(keys[1], StatValue::Int(bytes));
            line.stats.push_str(keys[4], region).expect("fits");
        }
        line.stats.push(keys[2], StatValue::Int(addr));
        line.stats.push_str(keys[3], "cpu").expect("fits");
        let name = if alloc.is_some() { "MemoryAllocation" } else { "MemoryDeallocation" };
        let metadata = builder.event_metadata(name, 0, |_| Vec::new());
        line.push_event(metadata, at * US, 0);
    };
    memory(&mut compute, &mut builder, Some(("model/dense/MatMul", 400, "output")), 1, 10);
    memory(&mut compute, &mut builder, Some(("model/dense/MatMul", 100, "temp")), 2, 20);
    memory(&mut compute, &mut builder, None, 2, 50);
    memory(&mut compute, &mut builder, None, 1, 155);
    builder.push_line(compute);
    let mut python = Line::new(2, "python");
    event(&mut python, &mut builder, "$train.py:3 main", 0, 200);
    event(&mut python, &mut builder, "eager/Identity:Identity", 50, 10);
    builder.push_line(python);

    let mut gpu = PlaneBuilder::new(1, "/device:GPU:0");
    let tf_op = gpu.stat_key("tf_op");
    let mut stream = Line::new(7, "Stream #7");
    stream.stats.push_str(tf_op, "model/dense/MatMul:MatMul").expect("fits");
    let kernel = gpu.event_metadata("gemm", 0, |_| Vec::new());
    stream.push_event(kernel, 20 * US, 40 * US);
    gpu.push_line(stream);

    let mut host = Host::new("tf", "tf.xplane.pb", SourceFormat::Xspace);
    host.planes.push(builder.finish());
    host.planes.push(gpu.finish());
    host
}

#[test]
fn tf_scope_view_nests_op_names_with_cpu_and_device_time() {
    let host = tf_host();
    let result = run(&host, &TfprofOptions::default());
    let expected = [
        (ROOT_NAME, 0, 190),
        ("eager", 1, 10),
        ("eager/Identity", 2, 10),
        ("model", 1, 180),
        ("model/dense", 2, 170),
        ("model/dense/BiasAdd", 3, 30),
        ("model/dense/MatMul", 3, 140),
        ("model/relu", 2, 10),
        ("model/relu/Relu", 3, 10),
    ];
    let expected: Vec<_> = expected.iter().map(|&(n, d, us)| (n.to_string(), d, us)).collect();
    assert_eq!(tree(&result), expected);
    let matmul = row(&result, "model/dense/MatMul");
    assert_eq!((matmul.own.cpu_ps / US, matmul.own.accelerator_ps / US, matmul.own.occurrence), (100, 40, 1));
    assert_eq!(matmul.devices, ["/device:GPU:0", "/host:CPU"]);
    assert_eq!(matmul.op_types, ["MatMul"]);
    // 400 output + 100 temporary bytes, both live at 20 µs; the temporary one freed
    // during the run, the output only after it.
    let memory =
        (matmul.own.requested_bytes, matmul.own.peak_bytes, matmul.own.residual_bytes, matmul.own.output_bytes);
    assert_eq!(memory, (500, 500, 400, 400));
    assert_eq!(row(&result, "model").own, NodeStats::default());
    assert!(result.notes.iter().any(|n| n.starts_with("2 events name an op in a `tf_op` stat")), "{:?}", result.notes);
    assert!(result.has_accelerator_time);
}

#[test]
fn tf_op_view_matches_framework_op_stats_per_type() {
    let host = tf_host();
    let groups = step_groups(&host);
    let stats = framework_op_stats::analyze(&[(&host, &groups)]);
    let result = run(&host, &with(View::Op));
    for op_type in ["MatMul", "BiasAdd", "Relu", "Identity"] {
        let self_us = |side: &str| -> f64 {
            let rows = stats.without_idle.rows.iter().filter(|r| r.op_type == op_type && r.host_or_device == side);
            rows.map(|r| r.total_self_time_us).sum()
        };
        let node = row(&result, op_type);
        assert_eq!(node.own.cpu_ps as f64 / US as f64, self_us("Host"), "{op_type} host");
        assert_eq!(node.own.accelerator_ps as f64 / US as f64, self_us("Device"), "{op_type} device");
    }
    assert_eq!(result.total.micros_ps, (stats.host_op_time_ps + stats.device_op_time_ps) as i64);
}

#[test]
fn tf_filters_change_what_they_should() {
    let host = tf_host();
    let names =
        |options: TfprofOptions| -> Vec<String> { run(&host, &options).rows.into_iter().map(|r| r.name).collect() };
    let show = TfprofOptions { show_name_regexes: regexes("model/dense/.*"), ..TfprofOptions::default() };
    assert_eq!(names(show), [ROOT_NAME, "model/dense/BiasAdd", "model/dense/MatMul"]);
    let hide = TfprofOptions { hide_name_regexes: regexes("model/dense,eager.*"), ..TfprofOptions::default() };
    assert_eq!(
        names(hide),
        [ROOT_NAME, "model", "model/dense/BiasAdd", "model/dense/MatMul", "model/relu", "model/relu/Relu"]
    );
    let start = TfprofOptions { start_name_regexes: regexes("model/relu"), ..TfprofOptions::default() };
    assert_eq!(names(start), [ROOT_NAME, "model/relu", "model/relu/Relu"]);
    let trim = TfprofOptions { trim_name_regexes: regexes("model"), ..TfprofOptions::default() };
    assert_eq!(names(trim), [ROOT_NAME, "eager", "eager/Identity", "model"]);
    let depth = TfprofOptions { max_depth: 1, ..TfprofOptions::default() };
    assert_eq!(names(depth), [ROOT_NAME, "eager", "model"]);
    let order = TfprofOptions { order_by: OrderBy::Column(Column::Micros), max_depth: 1, ..TfprofOptions::default() };
    assert_eq!(names(order), [ROOT_NAME, "model", "eager"]);

    let matmul_only = TfprofOptions { account_type_regexes: regexes("MatMul"), ..TfprofOptions::default() };
    let result = run(&host, &matmul_only);
    assert_eq!(result.total.micros_ps, 140 * US);
    let kept: Vec<&str> = result.rows.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(kept, [ROOT_NAME, "model", "model/dense", "model/dense/MatMul"]);
    assert!(!row(&result, "model/dense").accounted);

    let min_micros = TfprofOptions { min_micros_ps: 30 * US, ..TfprofOptions::default() };
    let shown: Vec<String> = run(&host, &min_micros).rows.into_iter().map(|r| r.name).collect();
    assert_eq!(shown, [ROOT_NAME, "model", "model/dense", "model/dense/BiasAdd", "model/dense/MatMul"]);
    let min_bytes = TfprofOptions { min_bytes: 1, ..TfprofOptions::default() };
    let shown: Vec<String> = run(&host, &min_bytes).rows.into_iter().map(|r| r.name).collect();
    assert_eq!(shown, [ROOT_NAME, "model", "model/dense", "model/dense/MatMul"]);

    let displayed = TfprofOptions {
        show_name_regexes: regexes("model/dense/MatMul"),
        account_displayed_op_only: true,
        ..TfprofOptions::default()
    };
    assert_eq!(run(&host, &displayed).total.micros_ps, 140 * US);
}

#[test]
fn tf_code_view_follows_the_python_tracer_and_graph_view_says_it_has_no_inputs() {
    let host = tf_host();
    let code = run(&host, &with(View::Code));
    let frame = row(&code, "train.py:3:main");
    assert_eq!((frame.depth, frame.total.micros_ps / US), (1, 10));
    assert_eq!(row(&code, NO_FRAME).total.micros_ps / US, 180);
    let graph = run(&host, &with(View::Graph));
    assert!(graph.notes.iter().any(|n| n.starts_with("The profile records no op inputs")));
    assert_eq!(graph.rows.len(), 5);
    assert!(graph.rows.iter().skip(1).all(|r| r.depth == 1));
    let unavailable: Vec<Column> = run(
        &host,
        &TfprofOptions {
            select: vec![Column::Params, Column::FloatOps, Column::InputShapes, Column::OutputBytes],
            ..TfprofOptions::default()
        },
    )
    .unavailable
    .into_iter()
    .map(|u| u.column)
    .collect();
    assert_eq!(unavailable, [Column::Params, Column::FloatOps, Column::InputShapes]);
}

/// A PyTorch trace (µs): `<module>` [0, 1000) › `ProfilerStep#1` [10, 400) › frame
/// `step` [20, 380) › a short `__enter__` frame [25, 30) inside which the
/// `record_function` range `forward` [28, 300) opens › `nn.Module: Linear_0` [40, 200)
/// › `aten::linear` [50, 150) › `aten::addmm` [60, 140) › launch [70, 80), with
/// allocations of 256 (kept) and 64 bytes (freed at 120) inside addmm; `aten::relu`
/// [210, 250) in `forward`; `ProfilerStep#2` [400, 800) › `aten::relu` [450, 470).
/// GPU: `gemm` [100, 130) launched by addmm, `orphan` [500, 505) launched by nothing.
const TORCH_TRACE: &str = r#"{"traceEvents": [
 {"ph": "X", "cat": "python_function", "name": "train.py(1): <module>", "pid": 1, "tid": 1, "ts": 0, "dur": 1000},
 {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 10, "dur": 390},
 {"ph": "X", "cat": "python_function", "name": "train.py(5): step", "pid": 1, "tid": 1, "ts": 20, "dur": 360},
 {"ph": "X", "cat": "python_function", "name": "torch/autograd/profiler.py(941): __enter__", "pid": 1, "tid": 1, "ts": 25, "dur": 5},
 {"ph": "X", "cat": "user_annotation", "name": "forward", "pid": 1, "tid": 1, "ts": 28, "dur": 272},
 {"ph": "X", "cat": "python_function", "name": "nn.Module: Linear_0", "pid": 1, "tid": 1, "ts": 40, "dur": 160},
 {"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 1, "tid": 1, "ts": 50, "dur": 100, "args": {"External id": 1, "Input Dims": [[4, 8], [16, 8], [16]]}},
 {"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 1, "tid": 1, "ts": 60, "dur": 80, "args": {"External id": 2}},
 {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 70, "dur": 10, "args": {"External id": 2, "correlation": 100}},
 {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": 65, "args": {"Total Reserved": 0, "Total Allocated": 256, "Bytes": 256, "Device Id": -1, "Device Type": 0, "Addr": 1000}},
 {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": 90, "args": {"Total Reserved": 0, "Total Allocated": 320, "Bytes": 64, "Device Id": -1, "Device Type": 0, "Addr": 2000}},
 {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": 120, "args": {"Total Reserved": 0, "Total Allocated": 256, "Bytes": -64, "Device Id": -1, "Device Type": 0, "Addr": 2000}},
 {"ph": "X", "cat": "cpu_op", "name": "aten::relu", "pid": 1, "tid": 1, "ts": 210, "dur": 40, "args": {"External id": 3}},
 {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#2", "pid": 1, "tid": 1, "ts": 400, "dur": 400},
 {"ph": "X", "cat": "cpu_op", "name": "aten::relu", "pid": 1, "tid": 1, "ts": 450, "dur": 20, "args": {"External id": 4}},
 {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 100, "dur": 30, "args": {"External id": 2, "correlation": 100, "stream": 7}},
 {"ph": "X", "cat": "kernel", "name": "orphan", "pid": 0, "tid": 7, "ts": 500, "dur": 5, "args": {"correlation": 999, "stream": 7}}
]}"#;

fn torch_host() -> Host {
    mlprof_formats::kineto::read_kineto(TORCH_TRACE.as_bytes(), "torch.json", "torch").expect("the trace parses")
}

#[test]
fn torch_scope_view_nests_ranges_modules_and_ops() {
    let host = torch_host();
    let result = run(&host, &TfprofOptions::default());
    let expected = [
        (ROOT_NAME, 0, 195),
        ("aten::relu", 1, 20),
        ("forward", 1, 170),
        ("forward/aten::relu", 2, 40),
        ("forward/nn.Module: Linear_0", 2, 130),
        ("forward/nn.Module: Linear_0/aten::linear", 3, 130),
        ("forward/nn.Module: Linear_0/aten::linear/aten::addmm", 4, 110),
        ("forward/nn.Module: Linear_0/aten::linear/aten::addmm/cudaLaunchKernel", 5, 10),
        ("orphan", 1, 5),
    ];
    let expected: Vec<_> = expected.iter().map(|&(n, d, us)| (n.to_string(), d, us)).collect();
    assert_eq!(tree(&result), expected);
    let addmm = row(&result, "forward/nn.Module: Linear_0/aten::linear/aten::addmm");
    assert_eq!((addmm.own.cpu_ps / US, addmm.own.accelerator_ps / US, addmm.own.occurrence), (70, 30, 1));
    let memory = (addmm.own.requested_bytes, addmm.own.peak_bytes, addmm.own.residual_bytes);
    assert_eq!(memory, (320, 320, 256));
    let linear = row(&result, "forward/nn.Module: Linear_0/aten::linear");
    assert_eq!(linear.input_shapes, [ShapeCount { shapes: "0:4x8|1:16x8|2:16".into(), runs: 1 }]);
    assert_eq!(row(&result, "orphan").op_types, ["Unknown"]);
    let output = TfprofOptions { select: vec![Column::OutputBytes], ..TfprofOptions::default() };
    let missing = run(&host, &output).unavailable;
    assert!(missing[0].reason.starts_with("PyTorch's memory events do not say"), "{missing:?}");
}

#[test]
fn torch_code_view_counts_each_frame_the_ops_it_created() {
    let host = torch_host();
    let result = run(&host, &with(View::Code));
    let total = |name: &str| row(&result, name).total.micros_ps / US;
    // Everything but the orphan kernel ran under <module>; `step` holds step 1's ops.
    assert_eq!((total("train.py:1:<module>"), total("train.py:5:step"), total("nn.Module: Linear_0")), (190, 170, 130));
    assert_eq!(total(NO_FRAME), 5);
    // The range opened inside `__enter__` does not make it the caller of its ops.
    assert!(result.rows.iter().all(|r| !r.name.contains("__enter__")));
    assert_eq!(row(&result, "train.py:1:<module>").own.cpu_ps / US, 20);
}

#[test]
fn torch_steps_select_and_average() {
    let host = torch_host();
    let step = |step| run(&host, &TfprofOptions { step, ..TfprofOptions::default() });
    assert_eq!(step(StepSelection::Step(1)).total.micros_ps / US, 170);
    assert_eq!(step(StepSelection::Step(2)).total.micros_ps / US, 20);
    let average = step(StepSelection::Average);
    assert_eq!(row(&average, "aten::relu").total.micros_ps / US, 20);
    assert_eq!(row(&average, "forward/aten::relu").total.micros_ps / US, 40);
    let op = run(&host, &TfprofOptions { view: View::Op, step: StepSelection::Average, ..TfprofOptions::default() });
    // aten::relu: 40 µs in step 1, 20 µs in step 2.
    assert_eq!(row(&op, "aten::relu").own.cpu_ps / US, 30);
    let groups = step_groups(&host);
    let error =
        analyze(&[(&host, &groups)], &TfprofOptions { step: StepSelection::Step(7), ..TfprofOptions::default() })
            .expect_err("no step 7");
    assert_eq!(error.to_string(), "--step 7: no such step; steps: 1, 2, or -1 for their average");
    assert!(!error.nothing_usable);
    let timeline = step(StepSelection::Step(2)).timeline;
    let names: Vec<&str> = timeline.events.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["aten::relu"]);
}

#[test]
fn profiles_without_steps_or_ops_say_so() {
    let host = tf_host();
    let groups = step_groups(&host);
    let error =
        analyze(&[(&host, &groups)], &TfprofOptions { step: StepSelection::Average, ..TfprofOptions::default() })
            .expect_err("no steps");
    assert!(error.nothing_usable && error.to_string().starts_with("--step: the profile has no steps"));
    let empty = Host::new("e", "e", SourceFormat::Xspace);
    let groups = step_groups(&empty);
    let error = analyze(&[(&empty, &groups)], &TfprofOptions::default()).expect_err("no ops");
    assert!(error.nothing_usable);
}

/// An XLA host: program 7 (`jit_f`, [`sample_hlo_proto`]) in the metadata plane; on a
/// host thread `dot.1` runs twice (10 µs each), `fusion.1` once (5 µs) and an
/// instruction the program lacks once (1 µs).
fn xla_host() -> Host {
    let metadata = sample_metadata_plane(7);

    let mut builder = PlaneBuilder::new(1, names::HOST_PLANE);
    let (hlo_op, module, program) =
        (builder.stat_key("hlo_op"), builder.stat_key("hlo_module"), builder.stat_key("program_id"));
    let mut line = Line::new(3, "tf_XLAEigen");
    for (op, start, duration) in [("dot.1", 0, 10), ("dot.1", 20, 10), ("fusion.1", 40, 5), ("mystery.3", 50, 1)] {
        line.stats.push_str(hlo_op, op).expect("fits");
        line.stats.push_str(module, "jit_f").expect("fits");
        line.stats.push(program, StatValue::Int(7));
        let id = builder.event_metadata(op, 0, |_| Vec::new());
        line.push_event(id, start * US, duration * US);
    }
    builder.push_line(line);
    let mut host = Host::new("jax", "jax.xplane.pb", SourceFormat::Xspace);
    host.planes.push(metadata);
    host.planes.push(builder.finish());
    host
}

#[test]
fn xla_ops_are_named_through_their_hlo_program() {
    let host = xla_host();
    let all = TfprofOptions {
        select: vec![Column::Micros, Column::Params, Column::OutputBytes, Column::InputShapes],
        ..TfprofOptions::default()
    };
    let scope = run(&host, &all);
    let dot = row(&scope, "jit(f)/dot_general");
    assert_eq!((dot.own.cpu_ps / US, dot.own.occurrence, dot.own.output_bytes), (20, 2, 32));
    assert_eq!(dot.input_shapes, [ShapeCount { shapes: "0:2x3|1:2x3".into(), runs: 2 }]);
    assert_eq!(dot.op_types, ["dot"]);
    assert_eq!(row(&scope, "x").own.params, 6);
    assert_eq!(row(&scope, "jit_f/fusion.1").op_types, ["loop fusion"]);
    assert_eq!(row(&scope, "jit_f/mystery.3").op_types, ["mystery"]);
    assert!(scope.unavailable.is_empty(), "{:?}", scope.unavailable);
    assert!(scope.notes.iter().any(|n| n.starts_with("1 XLA op events could not be named")));

    let graph = run(&host, &with(View::Graph));
    let dot = graph.rows.iter().position(|r| r.name == "jit_f/dot.1").expect("dot");
    assert_eq!(
        (graph.rows[dot].depth, graph.rows[dot + 1].name.as_str(), graph.rows[dot + 1].depth),
        (1, "jit_f/p", 2)
    );

    let code = run(&host, &with(View::Code));
    let frames: Vec<(&str, usize)> = code.rows.iter().map(|r| (r.name.as_str(), r.depth)).collect();
    assert!(frames.contains(&("train.py:10:<module>", 1)) && frames.contains(&("train.py:4:f", 2)), "{frames:?}");
    assert_eq!(row(&code, "train.py:4:f").total.micros_ps / US, 20);

    let op = run(&host, &with(View::Op));
    let types: Vec<&str> = op.rows.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(types, ["dot", "loop fusion", "mystery", "parameter"]);
}

#[test]
fn the_report_is_an_indented_table_with_self_and_total_columns() {
    let host = torch_host();
    let options = TfprofOptions {
        select: vec![Column::Micros, Column::Occurrence, Column::FloatOps],
        max_depth: 2,
        account_type_regexes: regexes("aten::.*"),
        ..TfprofOptions::default()
    };
    let report = run(&host, &options).report();
    let table = report.main_table().expect("a table");
    let headers: Vec<&str> = table.columns.iter().map(String::as_str).collect();
    assert_eq!(
        headers,
        [
            "Node",
            "float_ops",
            "total_float_ops",
            "micros",
            "total_micros",
            "accelerator_micros",
            "total_accelerator_micros",
            "cpu_micros",
            "total_cpu_micros",
            "occurrence",
            "total_occurrence"
        ]
    );
    let cells: Vec<String> = table.rows[2].iter().map(|c| c.display()).collect();
    assert_eq!(cells[0], "  forward");
    assert_eq!(cells[1..3], ["—", "—"]);
    assert_eq!(cells[3], "--");
    let notes = &report.sections[0].notes;
    assert!(notes.iter().any(|n| n.starts_with("float_ops: \"—\" because the profile has no `flops` stats")));
}
