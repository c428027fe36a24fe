//! Steps inferred from repeated program executions (`grouping::executions`): on real
//! captures of unmodified JAX and TensorFlow loops (no step markers), on hand-built
//! hosts for what those captures do not show (GPU kernels, alternating programs, XLA
//! program runs), and never where the profile has markers or in XProf-compatible mode.

use std::path::Path;

use mlprof_analysis::facts::{step_groups, step_groups_as_xprof};
use mlprof_analysis::grouping::StepSource;
use mlprof_analysis::grouping::executions::infer;
use mlprof_analysis::steps::{Breakdown, EventType, StepOptions, host_steps};
use mlprof_analysis::tool::{Analysis, Options, ToolId, ToolResult};
use mlprof_model::{Host, Line, PlaneBuilder, Session, SourceFormat, StatValue};

const MS: i64 = 1_000_000_000;

fn load(case: &str) -> Session {
    let logdir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/xspace").join(case).join("logdir");
    let mut sessions = mlprof_formats::discover::load(&logdir).expect("fixture loads");
    sessions.pop().expect("one session")
}

/// The overview's average step time (ms) and step count, with `options`.
fn overview_step_time(session: &Session, options: Options) -> (f64, usize) {
    let analysis = Analysis::new(session.hosts.iter().collect(), options);
    let ToolResult::Overview(overview) = analysis.run(ToolId::OverviewPage).expect("the tool runs") else {
        panic!("an overview")
    };
    (overview.steps.step_time_ms.average, overview.steps.steps.len())
}

/// What grouping reports for `executions` executions of `train_step` found as `evidence`.
fn train_step_executions(evidence: &str, executions: usize) -> StepSource {
    let (program, groups) = ("train_step".to_string(), executions - 1);
    StepSource::ProgramExecutions { program, evidence: evidence.to_string(), executions, groups }
}

/// Checks the steps of a real capture of an unmodified loop: how they were found, their
/// count and names, that XProf finds none, and that the overview now has a step time
/// between `min_ms` and `max_ms`.
fn assert_inferred(case: &str, expected: StepSource, evidence: &str, (min_ms, max_ms): (f64, f64)) {
    let session = load(case);
    let [host] = session.hosts.as_slice() else { panic!("one host in {case}") };
    let xprof = step_groups_as_xprof(host);
    assert!(host_steps(host, &xprof, StepOptions::default()).steps.is_empty(), "{case}: XProf finds no step");
    assert!(xprof.step_spans.is_empty());

    let groups = step_groups(host);
    assert_eq!(groups.source, expected, "{case}");
    let StepSource::ProgramExecutions { evidence: found, groups: count, .. } = &groups.source else { unreachable!() };
    assert!(found.contains(evidence), "{case}: {found}");
    let steps = mlprof_model::human::counted(*count, "step", "steps");
    assert!(groups.source.describe().starts_with(&format!("{steps} inferred from ")), "{case}");
    assert_eq!(groups.step_spans.len(), *count);
    assert_eq!(groups.names.first().map(String::as_str), Some("train_step 1"));
    assert_eq!(groups.names.last(), Some(&format!("train_step {count}")));

    let steps = host_steps(host, &groups, StepOptions::default());
    assert_eq!(steps.steps.len(), *count, "{case}: every step has host compute");
    for (step, &(begin_ps, end_ps)) in steps.steps.iter().zip(&groups.step_spans) {
        assert_eq!((step.begin_ps, step.begin_ps + step.duration_ps), (begin_ps, end_ps), "{case}");
        assert!(step.ps(EventType::HostCompute) > 0, "{case}: {}", step.step_name);
        assert_eq!(step.type_ps.iter().sum::<i64>(), step.duration_ps, "{case}: {}", step.step_name);
    }
    let (average_ms, kept) = overview_step_time(&session, Options::default());
    assert_eq!(kept, count - 2, "{case}: the first and last step left out, as for marked steps");
    assert!(average_ms > min_ms && average_ms < max_ms, "{case}: average step time {average_ms} ms");
    assert_eq!(overview_step_time(&session, Options::xprof_compatible()), (0.0, 0), "{case}: XProf mode");
}

#[test]
fn an_unmodified_jax_loop_gets_one_step_per_train_step_execution() {
    // 1,300 `PjitFunction(train_step)` dispatches (each nested in another of the same
    // name) in 1 s, about 0.8 ms apart: the loop ran 18,576 steps in 15 s unprofiled.
    let evidence = "jitted function train_step (PjitFunction events; XLA program jit_train_step, program_id 4)";
    assert_inferred("jax_plain_loop", train_step_executions(evidence, 1300), "XLA program jit_train_step", (0.5, 1.2));
}

#[test]
fn a_jax_loop_the_scheduler_keeps_pausing_still_gets_its_steps() {
    // The same loop on a 2-core node with four busy processes beside it: 2,020 executions
    // in 2 s, half of them less than 0.4 ms apart (while it ran) and the rest up to
    // 10 ms (while others had the CPU), so the median period times the count is 0.4 of
    // the stretch; a rule on the median found no step here (the agent test's flake).
    let evidence = "jitted function train_step (PjitFunction events; XLA program jit_train_step, program_id 4)";
    assert_inferred(
        "jax_plain_loop_busy",
        train_step_executions(evidence, 2020),
        "XLA program jit_train_step",
        (0.5, 1.5),
    );
}

#[test]
fn an_unmodified_tensorflow_loop_gets_one_step_per_tf_function_call() {
    // 404 calls of the `train_step` tf.function in 1 s; the `EagerLocalExecute:
    // __inference_train_step_140` run inside each is as frequent but shorter.
    let evidence = "tf.function train_step (events with tf_function_call)";
    assert_inferred("tf_plain_loop", train_step_executions(evidence, 404), "tf.function train_step", (1.5, 4.0));
}

#[test]
fn profiles_with_step_markers_keep_their_steps() {
    for case in ["jax_profile", "jax_gpu_h200", "tf_custom_loop", "tf_keras2_input_bound", "tf_keras_pipelined"] {
        let session = load(case);
        for host in &session.hosts {
            let groups = step_groups(host);
            assert!(
                matches!(groups.source, StepSource::RootEvents { .. } | StepSource::StepNumEvents { .. }),
                "{case}: {:?}",
                groups.source
            );
            assert!(groups.step_spans.is_empty(), "{case}");
        }
    }
}

#[test]
fn inferred_steps_start_inside_the_real_steps_of_a_marked_jax_gpu_loop() {
    // The real H200 capture has `StepTraceAnnotation("train", step_num=i)` around each of
    // its 10 `train_step` calls: the rule, run on it regardless, finds those calls.
    let session = load("jax_gpu_h200");
    let host = &session.hosts[0];
    let inferred = infer(host).expect("train_step repeats");
    assert_eq!((inferred.program.as_str(), inferred.executions), ("train_step", 10));
    let mut marked: Vec<(i64, i64)> = Vec::new();
    for plane in host.planes.iter().filter(|plane| plane.name == "/host:CPU") {
        for event in plane.lines.iter().flat_map(|line| line.iter()) {
            if plane.metadata_of(&event).is_some_and(|metadata| metadata.name == "train") {
                marked.push((event.start_ps(), event.end_ps()));
            }
        }
    }
    marked.sort_unstable();
    assert_eq!(marked.len(), 10);
    for (step, (&(begin_ps, _), &(marker_begin, marker_end))) in inferred.spans.iter().zip(&marked).enumerate() {
        assert!(
            marker_begin <= begin_ps && begin_ps < marker_end,
            "step {step}: {begin_ps} not in {marker_begin}..{marker_end}"
        );
    }
}

/// Adds an event with stats to `line` (stats go before `push_event`).
fn event(line: &mut Line, metadata: u32, start_ps: i64, duration_ps: i64, stats: &[(u32, StatValue)]) {
    for &(key, value) in stats {
        line.stats.push(key, value);
    }
    line.push_event(metadata, start_ps, duration_ps);
}

/// A builder of plane `name` with event metadata for `events`.
fn plane_with<const N: usize>(id: i64, name: &str, events: [&str; N]) -> (PlaneBuilder, [u32; N]) {
    let mut plane = PlaneBuilder::new(id, name);
    let metadata = events.map(|event| plane.event_metadata(event, 0, |_| Vec::new()));
    (plane, metadata)
}

fn host_of(planes: Vec<mlprof_model::Plane>) -> Host {
    let mut host = Host::new("vm", "vm.xplane.pb", SourceFormat::Xspace);
    host.planes = planes;
    host
}

/// A JAX GPU loop without markers: every 10 ms, `PjitFunction(train_step)` (2 ms)
/// launches a kernel (correlation id = iteration) that runs 3–7 ms into the iteration,
/// followed on the GPU by a memset without a launch.
fn jax_gpu_loop(iterations: i64) -> Host {
    let (mut cpu, [dispatch, launch]) = plane_with(1, "/host:CPU", ["PjitFunction(train_step)", "cuLaunchKernel"]);
    let correlation = cpu.stat_key("correlation_id");
    let mut python = Line::new(1, "python");
    for i in 0..iterations {
        event(&mut python, dispatch, i * 10 * MS, 2 * MS, &[]);
        event(&mut python, launch, i * 10 * MS + MS, MS / 2, &[(correlation, StatValue::Int(i))]);
    }
    cpu.push_line(python);
    let (mut gpu, [kernel, memset]) = plane_with(2, "/device:GPU:0", ["loop_add_fusion", "Memset"]);
    let correlation = gpu.stat_key("correlation_id");
    let mut stream = Line::new(7, "Stream #7(Compute)");
    for i in 0..iterations {
        event(&mut stream, kernel, i * 10 * MS + 3 * MS, 4 * MS, &[(correlation, StatValue::Int(i))]);
        event(&mut stream, memset, i * 10 * MS + 8 * MS, MS / 10, &[]);
    }
    gpu.push_line(stream);
    host_of(vec![cpu.finish(), gpu.finish()])
}

#[test]
fn gpu_kernels_join_the_step_of_their_launch() {
    let host = jax_gpu_loop(4);
    let groups = step_groups(&host);
    assert_eq!(groups.names, ["train_step 1", "train_step 2", "train_step 3"]);
    // Kernels by their launch, memsets after them. The fourth iteration starts no step
    // (the profile cuts it): its kernel, launched outside every step, takes the step
    // before it, as XProf treats GPU events after the last marked step.
    assert_eq!(groups.line(1, 0), [0, 0, 1, 1, 2, 2, 2, 2]);
    for breakdown in [Breakdown::Classic, Breakdown::Xprof] {
        let steps = host_steps(&host, &groups, StepOptions { breakdown, ..StepOptions::default() });
        assert!(steps.has_device);
        assert_eq!(steps.steps.len(), 3, "{breakdown:?}");
        for step in &steps.steps[..2] {
            assert_eq!(step.ps(EventType::DeviceCompute32), 4 * MS, "{breakdown:?}");
        }
        assert!(steps.steps.iter().all(|s| s.type_ps.iter().sum::<i64>() == s.duration_ps));
    }
    let classic = host_steps(&host, &groups, StepOptions::default());
    let durations: Vec<i64> = classic.steps.iter().map(|s| s.duration_ps).collect();
    assert_eq!(durations[..2], [10 * MS, 10 * MS], "the host span encloses the device work");
}

#[test]
fn of_two_programs_executed_alternately_the_heavier_makes_the_steps() {
    // Each 10 ms iteration: `train_step` (4 ms) then `metrics` (1 ms), and a random-key
    // split dispatched twice (0.1 ms each).
    let names = ["PjitFunction(train_step)", "PjitFunction(metrics)", "PjitFunction(_split)"];
    let (mut cpu, [train, metrics, split]) = plane_with(1, "/host:CPU", names);
    let mut python = Line::new(1, "python");
    for i in 0..6 {
        let at = i * 10 * MS;
        event(&mut python, split, at, MS / 10, &[]);
        event(&mut python, train, at + MS, 4 * MS, &[]);
        event(&mut python, split, at + 5 * MS, MS / 10, &[]);
        event(&mut python, metrics, at + 6 * MS, MS, &[]);
    }
    cpu.push_line(python);
    let host = host_of(vec![cpu.finish()]);
    let groups = step_groups(&host);
    let StepSource::ProgramExecutions { program, executions, groups: count, .. } = &groups.source else {
        panic!("{:?}", groups.source)
    };
    assert_eq!((program.as_str(), *executions, *count), ("train_step", 6, 5));
    assert_eq!(groups.step_spans.first(), Some(&(MS, 11 * MS)));
    assert!(groups.names.iter().all(|name| name.starts_with("train_step ")), "{:?}", groups.names);
}

#[test]
fn xla_program_runs_are_executions_and_their_ops_are_not() {
    // An executable run with `hlo_module`/`program_id` every 5 ms, holding two ops with
    // `hlo_op` (executed twice as often as the program).
    let (mut cpu, [run, fusion]) = plane_with(1, "/host:CPU", ["ExecuteHelper", "fusion"]);
    let [module, program_id, hlo_op] = ["hlo_module", "program_id", "hlo_op"].map(|n| cpu.stat_key(n));
    let mut thread = Line::new(1, "tf_XLACpuClient");
    for i in 0..5 {
        let at = i * 5 * MS;
        thread.stats.push_str(module, "jit_step").expect("fits");
        event(&mut thread, run, at, 3 * MS, &[(program_id, StatValue::Int(7))]);
        for op in 0..2 {
            thread.stats.push_str(module, "jit_step").expect("fits");
            thread.stats.push_str(hlo_op, "fusion").expect("fits");
            event(&mut thread, fusion, at + op * MS, MS / 2, &[(program_id, StatValue::Int(7))]);
        }
    }
    cpu.push_line(thread);
    let host = host_of(vec![cpu.finish()]);
    let inferred = infer(&host).expect("a program repeats");
    assert_eq!((inferred.program.as_str(), inferred.executions), ("jit_step", 5));
    assert_eq!(inferred.evidence, "XLA program jit_step (program_id 7)");
    let steps = host_steps(&host, &step_groups(&host), StepOptions::default());
    assert_eq!(steps.steps.len(), 4);
    assert!(steps.steps.iter().all(|s| s.duration_ps == 5 * MS && s.ps(EventType::HostCompute) == 3 * MS));
}

#[test]
fn a_program_executed_once_or_in_one_burst_makes_no_steps() {
    let (mut cpu, [init, step, work]) =
        plane_with(1, "/host:CPU", ["PjitFunction(init)", "PjitFunction(step)", "work"]);
    let mut python = Line::new(1, "python");
    event(&mut python, init, 0, MS, &[]);
    // `step` three times in the first 3 ms of 100 ms of work.
    for i in 0..3 {
        event(&mut python, step, 2 * MS + i * MS, MS / 2, &[]);
    }
    event(&mut python, work, 10 * MS, 90 * MS, &[]);
    cpu.push_line(python);
    let host = host_of(vec![cpu.finish()]);
    assert_eq!(infer(&host), None);
    assert_eq!(step_groups(&host).source, StepSource::None);
}
