//! The cost model against XLA's rules on a small module, and against every HLO op of
//! XProf's `hlo_stats` for the real H100 profile of many op kinds.

use super::super::decode_hlo_proto;
use super::super::tests::sample_hlo_proto;
use super::*;

#[test]
fn dots_count_two_flops_per_multiply_add_and_move_their_operands() {
    let module = decode_hlo_proto(&sample_hlo_proto("jit_f")).expect("module");
    let dot = module.instruction("dot.1").expect("dot");
    // dot.1: f32[2,2] from p f32[2,3] twice, contracting p's dimension 1 (K = 3).
    assert_eq!(module.cost(dot), HloCost { flops: 2 * 4 * 3, model_flops: 2 * 4 * 3, bytes_accessed: 24 + 24 + 16 });
    assert_eq!(module.cost(usize::MAX), HloCost::default());
}

/// An instruction of a hand-built module.
fn instruction(opcode: &str, element_type: i64, dims: &[i64], operands: &[usize]) -> HloInstruction {
    HloInstruction {
        name: format!("{opcode}.{}", operands.len()),
        opcode: opcode.into(),
        element_type,
        dims: dims.to_vec(),
        operands: operands.to_vec(),
        group_counts: (1, 1),
        ..HloInstruction::default()
    }
}

/// A module of `instructions` whose computations are `(id, range, root)`.
fn module(instructions: Vec<HloInstruction>, computations: &[(i64, std::ops::Range<usize>, usize)]) -> HloModule {
    let mut module = HloModule { instructions, ..HloModule::default() };
    for (id, range, root) in computations {
        module.computations.insert(*id, range.clone());
        module.roots.insert(*id, *root);
    }
    module
}

const F32: i64 = 11;
const BF16: i64 = 16;
const S8: i64 = 2;

#[test]
fn elementwise_ops_cost_the_gpu_profile_and_8_bit_inputs_halve_device_flops() {
    // exp of f32[1000] and of bf16[1000]; a dot of two s8[4,4].
    let m = module(
        vec![
            instruction("parameter", F32, &[1000], &[]),
            instruction("exponential", F32, &[1000], &[0]),
            instruction("parameter", BF16, &[1000], &[]),
            instruction("exponential", BF16, &[1000], &[2]),
            instruction("parameter", S8, &[4, 4], &[]),
            HloInstruction { lhs_contracting_dims: vec![1], ..instruction("dot", 4, &[4, 4], &[4, 4]) },
        ],
        &[],
    );
    assert_eq!(m.cost(1), HloCost { flops: 86_000, model_flops: 86_000, bytes_accessed: 8000 });
    assert_eq!(m.cost(3).flops, 3000);
    assert_eq!(m.cost(5), HloCost { flops: 64, model_flops: 128, bytes_accessed: 16 + 16 + 64 });
}

#[test]
fn a_fusion_reads_only_the_slice_it_keeps_and_writes_a_dynamic_update_in_place() {
    // fused slice: p0 f32[100] -> slice f32[10] -> negate; the fusion reads 40 of
    // p0's 400 bytes and writes 40.
    let sliced = module(
        vec![
            instruction("parameter", F32, &[100], &[]),
            instruction("slice", F32, &[10], &[0]),
            instruction("negate", F32, &[10], &[1]),
            HloInstruction {
                called_computation_ids: vec![1],
                fusion_kind: "kLoop".into(),
                ..instruction("fusion", F32, &[10], &[])
            },
        ],
        &[(1, 0..3, 2)],
    );
    assert_eq!(sliced.cost(3), HloCost { flops: 30, model_flops: 30, bytes_accessed: 80 });
    // fused dynamic-update-slice of buffer f32[100] with update f32[10] at s32 index:
    // the buffer is not read, the update is read and written.
    let updated = module(
        vec![
            instruction("parameter", F32, &[100], &[]),
            instruction("parameter", F32, &[10], &[]),
            instruction("parameter", 4, &[], &[]),
            instruction("dynamic-update-slice", F32, &[100], &[0, 1, 2]),
            HloInstruction {
                called_computation_ids: vec![1],
                fusion_kind: "kLoop".into(),
                ..instruction("fusion", F32, &[100], &[])
            },
        ],
        &[(1, 0..4, 3)],
    );
    assert_eq!(updated.cost(4), HloCost { flops: 0, model_flops: 0, bytes_accessed: 40 + 40 + 4 });
}

#[test]
fn a_dynamic_slice_moves_its_slice_and_its_first_start_index() {
    // f32[10,10] sliced to f32[2,10] at two s32 scalar start indices (XLA counts the
    // first one's 4 bytes).
    let m = module(
        vec![
            instruction("parameter", F32, &[10, 10], &[]),
            instruction("parameter", 4, &[], &[]),
            instruction("parameter", 4, &[], &[]),
            instruction("dynamic-slice", F32, &[2, 10], &[0, 1, 2]),
        ],
        &[],
    );
    assert_eq!(m.cost(3), HloCost { flops: 0, model_flops: 0, bytes_accessed: 2 * 80 + 4 });
}

#[test]
fn a_cumulative_sum_window_counts_each_element_once() {
    // reduce-window over all of f32[8], padded 7 low and high (cumsum), add reducer.
    let window = super::super::WindowDim {
        size: 15,
        stride: 1,
        padding_low: 7,
        padding_high: 7,
        window_dilation: 1,
        base_dilation: 1,
    };
    let m = module(
        vec![
            instruction("parameter", F32, &[], &[]),
            instruction("parameter", F32, &[], &[]),
            instruction("add", F32, &[], &[0, 1]),
            instruction("parameter", F32, &[8], &[]),
            instruction("constant", F32, &[], &[]),
            HloInstruction {
                window: vec![window],
                called_computation_ids: vec![7],
                ..instruction("reduce-window", F32, &[8], &[3, 4])
            },
        ],
        &[(7, 0..3, 2)],
    );
    // XLA: output / size + (size - 1) = 1 + 7 reductions of 3 FLOPs.
    assert_eq!(m.cost(5).flops, 24);
}

#[test]
fn custom_calls_count_their_own_estimate_or_nothing() {
    let call =
        || HloInstruction { custom_call_target: "my_kernel".into(), ..instruction("custom-call", F32, &[10], &[]) };
    let unknown = module(vec![call()], &[]);
    assert_eq!(unknown.cost(0), HloCost::default());
    let estimated = module(vec![HloInstruction { cost_estimate: (Some(1234), Some(56)), ..call() }], &[]);
    assert_eq!(estimated.cost(0), HloCost { flops: 1234, model_flops: 1234, bytes_accessed: 56 });
}

#[test]
fn computations_calling_each_other_over_and_over_cost_in_bounded_time() {
    // Computation 1 holds 64 fusions of computation 1 itself: 64^8 paths without a
    // budget.
    let fusions: Vec<HloInstruction> = (0..64)
        .map(|_| HloInstruction {
            called_computation_ids: vec![1],
            fusion_kind: "kLoop".into(),
            ..instruction("fusion", F32, &[4], &[])
        })
        .collect();
    let m = module(fusions, &[(1, 0..64, 63)]);
    let started = std::time::Instant::now();
    let _ = m.cost(0);
    assert!(started.elapsed() < std::time::Duration::from_secs(20), "{:?}", started.elapsed());
}

#[test]
fn damaged_real_programs_cost_without_panicking() {
    let logdir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/xspace/jax_ops_h100/logdir");
    let sessions = mlprof_formats::discover::load(&logdir).expect("fixture");
    let plane = sessions[0].hosts[0].plane(mlprof_model::names::METADATA_PLANE).expect("metadata plane");
    let key = plane.find_stat_key("Hlo Proto").expect("protos");
    let proto = plane
        .event_metadata
        .iter()
        .filter_map(|m| match plane.metadata_stat(m, key) {
            Some(mlprof_model::StatValue::Bytes(r)) => Some(plane.metadata_stats.bytes(r)),
            _ => None,
        })
        .max_by_key(|bytes| bytes.len())
        .expect("a program");
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for _ in 0..40 {
        let mut damaged = proto.to_vec();
        for _ in 0..6 {
            let at = (next() % damaged.len() as u64) as usize;
            damaged[at] = (next() >> 24) as u8;
        }
        if let Some(module) = decode_hlo_proto(&damaged) {
            for index in 0..module.instructions.len() {
                let _ = module.cost(index);
            }
        }
    }
}

mod xprof_parity {
    use std::path::Path;

    use super::super::super::HloModules;

    /// One HLO op of XProf's `hlo_stats`: what one execution costs, from its rates and
    /// mean time.
    struct Expected {
        program: i64,
        name: String,
        model_flops: f64,
        device_flops: f64,
        bytes: f64,
    }

    fn case_path(case: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/xspace").join(case)
    }

    fn xprof_costs(case: &str) -> Vec<Expected> {
        let path = case_path(case).join("xprof_out/hlo_stats.json");
        let table: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).expect("reference")).expect("JSON");
        let ids: Vec<&str> = table["cols"].as_array().expect("cols").iter().filter_map(|c| c["id"].as_str()).collect();
        let at = |id: &str| ids.iter().position(|c| *c == id).expect("column");
        table["rows"]
            .as_array()
            .expect("rows")
            .iter()
            .map(|row| {
                let v = |id: &str| row["c"][at(id)]["v"].clone();
                let time_us = v("avg_time").as_f64().expect("time");
                // GFLOP/s × µs.
                let per_run = |rate: &str| v(rate).as_f64().expect("rate") * time_us * 1e3;
                let (model_flops, device_flops) = (per_run("model_flop_rate"), per_run("normalized_flop_rate"));
                let intensity = v("operational_intensity").as_f64().expect("intensity");
                // Operational intensity is device FLOPs per byte; else GiB/s × µs.
                let bytes = if device_flops > 0.0 && intensity > 0.0 {
                    device_flops / intensity
                } else {
                    v("measured_memory_bw").as_f64().expect("bw") * time_us * 1e3 * 1.073_741_824
                };
                Expected {
                    program: v("program_id").as_str().and_then(|p| p.parse().ok()).expect("program id"),
                    name: v("hlo_op_name").as_str().expect("name").to_string(),
                    model_flops,
                    device_flops,
                    bytes,
                }
            })
            .collect()
    }

    /// Every HLO op XProf lists in the real H100 profiles of many op kinds (f32; bf16
    /// with int8 and fp8 products): convolutions, fusions of each kind, sorts, scatters,
    /// GEMMs, each at XProf's model and device FLOPs and bytes.
    #[test]
    fn every_hlo_op_costs_what_xprof_says() {
        for (case, ops) in [("jax_ops_h100", 51), ("jax_mixed_h100", 68)] {
            let sessions = mlprof_formats::discover::load(&case_path(case).join("logdir")).expect("fixture");
            let modules = HloModules::of_host(&sessions[0].hosts[0]);
            let mut problems = Vec::new();
            let expected = xprof_costs(case);
            assert_eq!(expected.len(), ops, "{case}");
            for want in expected {
                let Some((module, index)) = modules.locate(want.program, &want.name) else {
                    problems.push(format!("{}: not found", want.name));
                    continue;
                };
                let cost = module.cost(index);
                let close = |a: u64, b: f64| (a as f64 - b).abs() <= 1e-3 * (a as f64).max(b.abs()) + 0.5;
                if !close(cost.model_flops, want.model_flops)
                    || !close(cost.flops, want.device_flops)
                    || !close(cost.bytes_accessed, want.bytes)
                {
                    problems.push(format!(
                        "{:40} model flops {} vs XProf {:.0}; device {} vs {:.0}; bytes {} vs {:.0}",
                        want.name,
                        cost.model_flops,
                        want.model_flops,
                        cost.flops,
                        want.device_flops,
                        cost.bytes_accessed,
                        want.bytes
                    ));
                }
            }
            assert!(problems.is_empty(), "{case}: {} differences:\n{}", problems.len(), problems.join("\n"));
        }
    }
}
