//! `kernel_stats` against XProf 2.24.2's own output for the fixtures (the real CPU-only
//! ones, and the XLA GPU one, whose kernels are named from its HLO programs), and,
//! column by column, on a hand-built GPU XSpace in the shape the CUPTI collector
//! writes (round-tripped through the XSpace encoder and reader).

use std::path::{Path, PathBuf};

use mlprof_analysis::kernel_stats::{self, KernelStats};
use mlprof_analysis::report::Cell;
use mlprof_formats::discover::load;
use mlprof_formats::xspace::{encode_xspace, read_xspace};
use mlprof_model::{Host, Line, PlaneBuilder, SourceFormat};
use serde_json::{Value, json};

const CASES: &[&str] = &["tf_keras2_input_bound", "tf_keras_pipelined", "tf_custom_loop", "jax_profile", "jax_gpu_xla"];

fn case_dir(case: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/xspace").join(case)
}

#[test]
fn fixtures_match_xprof_exactly() {
    for case in CASES {
        let sessions = load(&case_dir(case).join("logdir")).expect("fixture loads");
        assert_eq!(sessions.len(), 1, "{case}");
        let hosts: Vec<&Host> = sessions[0].hosts.iter().collect();
        let stats = kernel_stats::analyze(&hosts);
        // Only the XLA GPU fixture has a GPU plane; its kernels are named from the HLO.
        assert_eq!(stats.gpu_planes, usize::from(*case == "jax_gpu_xla"), "{case}");
        let text = std::fs::read_to_string(case_dir(case).join("xprof_out/kernel_stats.json")).expect("reference");
        let want: Value = serde_json::from_str(&text).expect("reference is JSON");
        assert_eq!(stats.to_xprof_json(), want, "{case}");
        let report = stats.report();
        let rows = report.sections[0].table.as_ref().map(|t| t.rows.len());
        if *case == "jax_gpu_xla" {
            assert_eq!(rows, Some(37), "{case}");
        } else {
            assert!(report.sections[0].notes[0].contains("no GPU kernels"), "{case}");
            assert_eq!(rows, Some(0), "{case}");
        }
    }
}

/// Real JAX GPU profiles (H200, CUPTI 13): a `jax.profiler` trace of a training loop
/// (its kernels run inside a CUDA graph) and an `mlprof capture` that caught XLA
/// compiling and autotuning (`RedzoneAllocatorKernelImpl`, `DelayKernel`, candidate
/// GEMMs, kernels with no HLO op). Also two profiles written by `mlprof run`'s CUPTI
/// injection: a plain CUDA program (`cuda_app`: 2000 `vecAdd` and 2000
/// `scale(float*, unsigned int, float)`, 100 % theoretical occupancy from the
/// injection's `kernel_details`) and a JAX loop (4097 kernels in 190 rows, no HLO op:
/// the injection records no `hlo_op` stat, so the op column is empty as in XProf). And
/// the H100 profile of many XLA op kinds, one kernel per fusion (cuDNN convolutions,
/// Triton GEMMs and sorts, XLA's own fusions).
#[test]
fn real_gpu_profiles_match_xprof_exactly() {
    for (case, rows) in [
        ("jax_gpu_h200", 27),
        ("jax_gpu_h200_capture", 86),
        ("cuda_app_h200_inject", 2),
        ("jax_h200_inject", 190),
        ("jax_ops_h100", 46),
        ("jax_mixed_h100", 61),
    ] {
        let sessions = load(&case_dir(case).join("logdir")).expect("fixture loads");
        let hosts: Vec<&Host> = sessions[0].hosts.iter().collect();
        let stats = kernel_stats::analyze(&hosts);
        assert_eq!(stats.gpu_planes, 1, "{case}");
        let text = std::fs::read_to_string(case_dir(case).join("xprof_out/kernel_stats.json")).expect("reference");
        let want: Value = serde_json::from_str(&text).expect("reference is JSON");
        assert_eq!(stats.to_xprof_json(), want, "{case}");
        assert_eq!(stats.report().sections[0].table.as_ref().map(|t| t.rows.len()), Some(rows), "{case}");
    }
}

/// One device event: name, offset and duration (ps), string stats.
struct Kernel<'a> {
    name: &'a str,
    offset_ps: i64,
    duration_ps: i64,
    stats: Vec<(&'a str, &'a str)>,
}

fn details(regs: u32, dynamic: u32, grid: &str, block: &str, occ: &str) -> String {
    format!("regs:{regs} static_shared:0 dynamic_shared:{dynamic} grid:{grid} block:{block} occ_pct:{occ}")
}

fn push_events(builder: &mut PlaneBuilder, line: &mut Line, events: &[Kernel<'_>], correlation: &mut i64) {
    let correlation_key = builder.stat_key("correlation_id");
    for event in events {
        let metadata = builder.event_metadata(event.name, 0, |_| Vec::new());
        for (key, value) in &event.stats {
            let key = builder.stat_key(key);
            line.stats.push_str(key, value).expect("small stats fit");
        }
        *correlation += 1;
        line.stats.push(correlation_key, mlprof_model::StatValue::Int(*correlation));
        line.push_event(metadata, event.offset_ps, event.duration_ps);
    }
}

/// A host as the TF GPU profiler saves it: `/host:CPU` with a thread issuing CUDA
/// launches, and one `/device:GPU:N` plane per device with one line per stream.
fn gpu_host(name: &str, extra_planes: &[&str], streams: &[(i64, &str, Vec<Kernel<'_>>)]) -> Host {
    let mut host = Host::new(name, format!("{name}.xplane.pb"), SourceFormat::Xspace);
    host.hostnames.push(name.to_string());
    let mut correlation = 0;

    let mut cpu = PlaneBuilder::new(1, "/host:CPU");
    let mut thread = Line::new(4242, "python3");
    let launches: Vec<Kernel<'_>> = (0..3)
        .map(|i| Kernel { name: "cudaLaunchKernel", offset_ps: i * 1_000_000, duration_ps: 5_000, stats: vec![] })
        .collect();
    push_events(&mut cpu, &mut thread, &launches, &mut correlation);
    cpu.push_line(thread);
    host.planes.push(cpu.finish());

    for (i, plane_name) in extra_planes.iter().enumerate() {
        host.planes.push(PlaneBuilder::new(100 + i as i64, *plane_name).finish());
    }

    let mut gpu = PlaneBuilder::new(2, "/device:GPU:0");
    for (id, line_name, events) in streams {
        let mut line = Line::new(*id, *line_name);
        line.timestamp_ns = 1_000;
        push_events(&mut gpu, &mut line, events, &mut correlation);
        gpu.push_line(line);
    }
    host.planes.push(gpu.finish());

    // Through the wire format and back, as a profile file would be read.
    let bytes = encode_xspace(&host);
    read_xspace(&bytes, &format!("{name}.xplane.pb"), name).expect("encoded host decodes")
}

const GEMM_TC: &str = "volta_h884gemm_64x64_ldg8_nn";
const SGEMM: &str = "ampere_sgemm_128x64_nn";
const GEMM_16816: &str = "ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_stages_32x5_nn";
const EIGEN: &str =
    "void Eigen::internal::EigenMetaKernel<Eigen::TensorEvaluator<>, long>(Eigen::TensorEvaluator<>, long)";

fn hosts() -> Vec<Host> {
    let d_gemm = details(128, 49152, "16,4,1", "256,1,1", "12.5");
    let d_gemm_later = details(128, 49152, "16,4,1", "256,1,1", "25");
    let d_gemm_small = details(128, 49152, "8,4,1", "256,1,1", "12.5");
    let d_sgemm = details(122, 0, "80,1,1", "128,1,1", "33.3");
    let d_eigen = details(16, 0, "1024,1,1", "1024,1,1", "100");
    let d_16816 = details(232, 81920, "40,2,1", "128,1,1", "6.25");
    let d_add = "regs:8\nstatic_shared:0\ndynamic_shared:0\ngrid:1,1,1\nblock:64,1,1\nocc_pct:50.0";
    let matmul = ("tf_op", "model/dense/MatMul:MatMul");
    let stream7 = vec![
        Kernel {
            name: GEMM_TC,
            offset_ps: 0,
            duration_ps: 12_345_678,
            stats: vec![matmul, ("kernel_details", d_gemm.as_str())],
        },
        Kernel {
            name: SGEMM,
            offset_ps: 20_000_000,
            duration_ps: 7_000_500,
            stats: vec![
                ("tf_op", "model/einsum/Einsum:Einsum"),
                ("equation", "ab,bc->ac"),
                ("kernel_details", d_sgemm.as_str()),
            ],
        },
        Kernel {
            name: GEMM_TC,
            offset_ps: 30_000_000,
            duration_ps: 10_000_000,
            stats: vec![matmul, ("kernel_details", d_gemm_later.as_str())],
        },
        Kernel {
            name: GEMM_TC,
            offset_ps: 45_000_000,
            duration_ps: 3_000_000,
            stats: vec![matmul, ("kernel_details", d_gemm_small.as_str())],
        },
        // Shorter than a nanosecond: counted, with duration 0 ns.
        Kernel {
            name: EIGEN,
            offset_ps: 50_000_000,
            duration_ps: 999,
            stats: vec![("tf_op", "model/dense/Relu:Relu"), ("kernel_details", d_eigen.as_str())],
        },
        // No duration: skipped.
        Kernel {
            name: EIGEN,
            offset_ps: 51_000_000,
            duration_ps: 0,
            stats: vec![("tf_op", "model/dense/Relu:Relu"), ("kernel_details", d_eigen.as_str())],
        },
        Kernel {
            name: EIGEN,
            offset_ps: 52_000_000,
            duration_ps: 2_000_000,
            stats: vec![("tf_op", "model/dense/Relu:Relu"), ("kernel_details", d_eigen.as_str())],
        },
    ];
    let stream8 = vec![
        // No tf_op: op unknown, not eligible even though the kernel uses TensorCores.
        Kernel {
            name: GEMM_16816,
            offset_ps: 0,
            duration_ps: 5_000_000,
            stats: vec![("kernel_details", d_16816.as_str())],
        },
        // Equal totals: ordered by kernel name.
        Kernel {
            name: "zeta_add_kernel",
            offset_ps: 6_000_000,
            duration_ps: 1_500_000,
            stats: vec![("tf_op", "model/add:AddV2"), ("kernel_details", d_add)],
        },
        Kernel {
            name: "alpha_add_kernel",
            offset_ps: 8_000_000,
            duration_ps: 1_500_000,
            stats: vec![("tf_op", "model/add:AddV2"), ("kernel_details", d_add)],
        },
        // A memcpy (no kernel_details): skipped.
        Kernel {
            name: "MemcpyH2D",
            offset_ps: 9_000_000,
            duration_ps: 4_000_000,
            stats: vec![("memcpy_details", "kind_src:pageable kind_dst:device size:4096 dest:0 async:0")],
        },
    ];
    // A derived line copying kernel stats: skipped.
    let derived = vec![Kernel {
        name: "model/dense/MatMul",
        offset_ps: 0,
        duration_ps: 99_000_000,
        stats: vec![matmul, ("kernel_details", d_gemm.as_str())],
    }];
    let host0 = gpu_host(
        "host0",
        &[],
        &[
            (7, "Stream #7(Kernel)", stream7),
            (8, "Stream #8(Kernel,MemcpyH2D)", stream8),
            (0xdead_beef + 3, "Framework Ops", derived),
        ],
    );
    let host1_stream = vec![Kernel {
        name: GEMM_TC,
        offset_ps: 0,
        duration_ps: 30_000_000,
        stats: vec![matmul, ("kernel_details", d_gemm.as_str())],
    }];
    let host1 = gpu_host("host1", &[], &[(7, "Stream #7(Kernel)", host1_stream)]);
    // A host with TPU planes: XProf reads its TPU planes only.
    let tpu_stream = vec![Kernel {
        name: GEMM_TC,
        offset_ps: 0,
        duration_ps: 500_000_000,
        stats: vec![matmul, ("kernel_details", d_gemm.as_str())],
    }];
    let host2 = gpu_host("host2", &["/device:TPU:0"], &[(7, "Stream #7(Kernel)", tpu_stream)]);
    vec![host0, host1, host2]
}

fn analyze_gpu_hosts() -> KernelStats {
    let hosts = hosts();
    let refs: Vec<&Host> = hosts.iter().collect();
    kernel_stats::analyze(&refs)
}

#[test]
fn gpu_kernels_are_grouped_like_xprof() {
    let stats = analyze_gpu_hosts();
    assert_eq!(stats.gpu_planes, 2);
    let json = stats.to_xprof_json();
    let rows: Vec<Vec<Value>> = json["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|row| row["c"].as_array().expect("cells").iter().map(|cell| cell["v"].clone()).collect())
        .collect();
    let tf = |v: bool| Value::Bool(v);
    #[rustfmt::skip]
    let want: Vec<Vec<Value>> = vec![
        // rank, name, regs, shmem, block, grid, occ, op eligible, kernel TC, op, occurrences, total, avg, min, max (us)
        vec![json!(1.0), json!(GEMM_TC), json!(128.0), json!(49152.0), json!("256,1,1"), json!("16,4,1"), json!(12.5), tf(true), tf(true), json!("model/dense/MatMul"), json!(1.0), json!(30.0), json!(30.0), json!(30.0), json!(30.0)],
        vec![json!(2.0), json!(GEMM_TC), json!(128.0), json!(49152.0), json!("256,1,1"), json!("16,4,1"), json!(12.5), tf(true), tf(true), json!("model/dense/MatMul"), json!(2.0), json!(22.345), json!(11.172), json!(10.0), json!(12.345)],
        vec![json!(3.0), json!(SGEMM), json!(122.0), json!(0.0), json!("128,1,1"), json!("80,1,1"), json!(f64::from(33.3f32)), tf(true), tf(false), json!("model/einsum/Einsum"), json!(1.0), json!(7.0), json!(7.0), json!(7.0), json!(7.0)],
        vec![json!(4.0), json!(GEMM_16816), json!(232.0), json!(81920.0), json!("128,1,1"), json!("40,2,1"), json!(6.25), tf(false), tf(true), json!(""), json!(1.0), json!(5.0), json!(5.0), json!(5.0), json!(5.0)],
        vec![json!(5.0), json!(GEMM_TC), json!(128.0), json!(49152.0), json!("256,1,1"), json!("8,4,1"), json!(12.5), tf(true), tf(true), json!("model/dense/MatMul"), json!(1.0), json!(3.0), json!(3.0), json!(3.0), json!(3.0)],
        vec![json!(6.0), json!(EIGEN), json!(16.0), json!(0.0), json!("1024,1,1"), json!("1024,1,1"), json!(100.0), tf(false), tf(false), json!("model/dense/Relu"), json!(2.0), json!(2.0), json!(1.0), json!(0.0), json!(2.0)],
        vec![json!(7.0), json!("alpha_add_kernel"), json!(8.0), json!(0.0), json!("64,1,1"), json!("1,1,1"), json!(50.0), tf(false), tf(false), json!("model/add"), json!(1.0), json!(1.5), json!(1.5), json!(1.5), json!(1.5)],
        vec![json!(8.0), json!("zeta_add_kernel"), json!(8.0), json!(0.0), json!("64,1,1"), json!("1,1,1"), json!(50.0), tf(false), tf(false), json!("model/add"), json!(1.0), json!(1.5), json!(1.5), json!(1.5), json!(1.5)],
    ];
    assert_eq!(rows.len(), want.len());
    for (i, (got, want)) in rows.iter().zip(&want).enumerate() {
        assert_eq!(got, want, "row {i}");
    }
    assert_eq!(json["cols"].as_array().map(Vec::len), Some(15));
    assert!(json.get("p").is_none());

    // The typed result keeps the parts XProf sums.
    let second = &stats.kernels[1];
    assert_eq!((second.static_shmem_bytes, second.dynamic_shmem_bytes), (0, 49152));
    assert_eq!((second.total_duration_ns, second.min_duration_ns, second.max_duration_ns), (22_345, 10_000, 12_345));
    assert_eq!(stats.total_duration_ns(), 72_345);
    assert_eq!(stats.tensor_core_duration_ns(), 60_345);
}

#[test]
fn gpu_report_has_every_column_and_a_summary() {
    let report = analyze_gpu_hosts().report();
    assert_eq!(report.tool, "kernel_stats");
    let section = &report.sections[0];
    assert!(section.main);
    assert_eq!(
        section.notes[0],
        "8 distinct kernels (10 launches), total kernel time 72.3 µs; 83.4% of kernel time is in kernels using TensorCores."
    );
    let table = section.table.as_ref().expect("table");
    assert_eq!(
        table.columns,
        [
            "Kernel name",
            "Registers per thread",
            "Shared memory bytes",
            "Block dim",
            "Grid dim",
            "Occupancy %",
            "Op TensorCore eligible",
            "Kernel uses TensorCore",
            "Op name",
            "Occurrences",
            "Total duration (us)",
            "Avg duration (us)",
            "Min duration (us)",
            "Max duration (us)",
        ]
    );
    let shown: Vec<String> = table.rows[1].iter().map(Cell::display).collect();
    assert_eq!(
        shown,
        [
            GEMM_TC,
            "128",
            "49152",
            "256,1,1",
            "16,4,1",
            "12.5",
            "yes",
            "yes",
            "model/dense/MatMul",
            "2",
            "22.345",
            "11.172",
            "10.000",
            "12.345"
        ]
    );
    let sgemm: Vec<String> = table.rows[2].iter().map(Cell::display).collect();
    assert_eq!(&sgemm[5..9], ["33.3", "yes", "no", "model/einsum/Einsum"]);
    // Every row is as wide as the header, and numeric columns sort as numbers.
    assert!(table.rows.iter().all(|row| row.len() == table.columns.len()));
    assert!(table.rows.iter().all(|row| row[10].is_numeric()));
}

#[test]
fn gpu_plane_without_kernels_says_so() {
    let host = gpu_host("empty", &[], &[(7, "Stream #7(MemcpyH2D)", Vec::new())]);
    let stats = kernel_stats::analyze(&[&host]);
    assert_eq!(stats.gpu_planes, 1);
    assert!(stats.kernels.is_empty());
    assert!(stats.report().sections[0].notes[0].contains("no kernel launches"));
}

#[test]
fn json_schema_uses_units_in_names() {
    let value = serde_json::to_value(analyze_gpu_hosts()).expect("serialises");
    let first = &value["kernels"][0];
    for key in ["total_duration_ns", "min_duration_ns", "max_duration_ns", "occupancy_pct", "block_dim", "op_name"] {
        assert!(first.get(key).is_some(), "{key}");
    }
}
