//! GPU kernel statistics (XProf's `kernel_stats` tool): every kernel launch recorded on
//! a `/device:GPU:*` plane, grouped by kernel name, launch configuration and the
//! framework op that launched it, with occurrence counts and total/min/max durations,
//! plus whether the kernel uses TensorCores and whether its op could have.
//!
//! The one design decision to know: the numbers follow XProf 2.24.2 exactly, including
//! its quirks — durations are truncated to whole nanoseconds per launch before they are
//! summed, launch parameters come from the CUPTI `kernel_details` string, only the
//! event's own stats are read (not its metadata's, as `GpuEventStats` does), the first
//! launch seen of a group decides its occupancy, each host keeps its top
//! [`MAX_KERNELS`] groups, and hosts are concatenated (not merged) before a final top
//! [`MAX_KERNELS`] cut. A kernel XLA launched (an `hlo_op` and a `program_id` stat) is
//! named after the framework op of its HLO instruction (the `op_name` of the
//! instruction's metadata, from the compiled programs of `/host:metadata`); when the
//! instruction is unknown it keeps the op its `tf_op` stat names, as in XProf.
//!
//! Launches come from the host's facts ([`crate::facts::kernel_launches`]): what a
//! launch's configuration and op are in each source format is written there.

use std::collections::HashMap;

use mlprof_model::Host;
use mlprof_model::names::TPU_PLANE_PREFIX;
use serde::Serialize;
use serde_json::Value;

use crate::datatable::DataTable;
use crate::facts::{self, KernelLaunch};
pub use crate::facts::{
    LaunchParams, aten_op_tensor_core_eligible, einsum_tensor_core_eligible, kernel_uses_tensor_core,
    op_tensor_core_eligible, parse_kernel_details, tf_op_name,
};
use crate::hlo::HloModules;
use crate::report::{Cell, Report, Section, Table};

/// The most kernel groups XProf keeps (per host, then over all hosts).
pub const MAX_KERNELS: usize = 1000;

use mlprof_model::human;
use mlprof_model::time::PS_PER_NS;

/// What identifies a group of kernel launches, in XProf's tie-break order (name, grid,
/// block, registers, shared memory, TensorCore use, eligibility, op name).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct GroupKey {
    name: String,
    grid_dim: [u32; 3],
    block_dim: [u32; 3],
    registers_per_thread: u32,
    static_shmem_bytes: u32,
    dynamic_shmem_bytes: u32,
    uses_tensor_core: bool,
    op_tensor_core_eligible: bool,
    op_name: String,
}

/// Durations and count of one group.
#[derive(Clone, Copy, Debug)]
struct GroupTimes {
    occupancy_pct: f32,
    occurrences: u64,
    total_ns: u64,
    min_ns: u64,
    max_ns: u64,
}

/// One group of kernel launches: same kernel, launch configuration and op.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct KernelReport {
    /// Kernel name (the device event's name, usually a mangled or library symbol).
    pub name: String,
    /// Registers per thread.
    pub registers_per_thread: u32,
    /// Static shared memory per block in bytes.
    pub static_shmem_bytes: u32,
    /// Dynamic shared memory per block in bytes.
    pub dynamic_shmem_bytes: u32,
    /// Threads per block, x/y/z.
    pub block_dim: [u32; 3],
    /// Blocks per grid, x/y/z.
    pub grid_dim: [u32; 3],
    /// Theoretical occupancy in percent, of the first launch seen.
    pub occupancy_pct: f32,
    /// Whether the kernel's name says it uses TensorCores.
    pub is_kernel_using_tensor_core: bool,
    /// Whether the launching op could use TensorCores (by op name or einsum equation,
    /// or because this kernel does). False when the op is unknown.
    pub is_op_tensor_core_eligible: bool,
    /// Name of the framework op that launched the kernel ("" when unknown).
    pub op_name: String,
    /// Number of launches.
    pub occurrences: u64,
    /// Sum of the launches' durations in nanoseconds (each truncated to whole ns).
    pub total_duration_ns: u64,
    /// Shortest launch in nanoseconds.
    pub min_duration_ns: u64,
    /// Longest launch in nanoseconds.
    pub max_duration_ns: u64,
}

impl KernelReport {
    /// Static plus dynamic shared memory per block in bytes (wrapping at 2^32, as XProf
    /// adds them).
    pub fn shmem_bytes(&self) -> u32 {
        self.static_shmem_bytes.wrapping_add(self.dynamic_shmem_bytes)
    }

    /// Mean launch duration in nanoseconds (integer division, as XProf).
    pub fn avg_duration_ns(&self) -> u64 {
        self.total_duration_ns.checked_div(self.occurrences).unwrap_or(0)
    }

    fn from_group(key: GroupKey, times: GroupTimes) -> KernelReport {
        KernelReport {
            name: key.name,
            registers_per_thread: key.registers_per_thread,
            static_shmem_bytes: key.static_shmem_bytes,
            dynamic_shmem_bytes: key.dynamic_shmem_bytes,
            block_dim: key.block_dim,
            grid_dim: key.grid_dim,
            occupancy_pct: times.occupancy_pct,
            is_kernel_using_tensor_core: key.uses_tensor_core,
            is_op_tensor_core_eligible: key.op_tensor_core_eligible,
            op_name: key.op_name,
            occurrences: times.occurrences,
            total_duration_ns: times.total_ns,
            min_duration_ns: times.min_ns,
            max_duration_ns: times.max_ns,
        }
    }

    fn key(&self) -> GroupKeyRef<'_> {
        GroupKeyRef {
            name: &self.name,
            grid_dim: self.grid_dim,
            block_dim: self.block_dim,
            registers_per_thread: self.registers_per_thread,
            static_shmem_bytes: self.static_shmem_bytes,
            dynamic_shmem_bytes: self.dynamic_shmem_bytes,
            uses_tensor_core: self.is_kernel_using_tensor_core,
            op_tensor_core_eligible: self.is_op_tensor_core_eligible,
            op_name: &self.op_name,
        }
    }
}

/// [`GroupKey`] borrowed from a [`KernelReport`], for sorting.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct GroupKeyRef<'a> {
    name: &'a str,
    grid_dim: [u32; 3],
    block_dim: [u32; 3],
    registers_per_thread: u32,
    static_shmem_bytes: u32,
    dynamic_shmem_bytes: u32,
    uses_tensor_core: bool,
    op_tensor_core_eligible: bool,
    op_name: &'a str,
}

/// Sorts by total duration, longest first, then by group key, and keeps the top
/// [`MAX_KERNELS`].
fn sort_and_truncate(reports: &mut Vec<KernelReport>) {
    reports.sort_by(|a, b| b.total_duration_ns.cmp(&a.total_duration_ns).then_with(|| a.key().cmp(&b.key())));
    reports.truncate(MAX_KERNELS);
}

/// The kernel statistics of a set of hosts.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct KernelStats {
    /// Number of `/device:GPU:*` planes read (GPU planes of hosts that also have TPU
    /// planes are not read, as in XProf).
    pub gpu_planes: usize,
    /// Kernel groups, longest total duration first, at most [`MAX_KERNELS`].
    pub kernels: Vec<KernelReport>,
}

/// Counts one launch (its duration truncated to whole ns, as XProf) in its group; the
/// first launch of a group sets its occupancy.
fn add_launch(groups: &mut HashMap<GroupKey, GroupTimes>, launch: KernelLaunch<'_>) {
    let ns = u64::try_from(launch.duration_ps / PS_PER_NS).unwrap_or(0);
    let params = launch.params;
    let key = GroupKey {
        name: launch.name.to_string(),
        grid_dim: params.grid_dim,
        block_dim: params.block_dim,
        registers_per_thread: params.registers_per_thread,
        static_shmem_bytes: params.static_shmem_bytes,
        dynamic_shmem_bytes: params.dynamic_shmem_bytes,
        uses_tensor_core: launch.uses_tensor_core,
        op_tensor_core_eligible: launch.op_tensor_core_eligible,
        op_name: launch.op_name.to_string(),
    };
    groups
        .entry(key)
        .and_modify(|times| {
            times.occurrences += 1;
            times.total_ns = times.total_ns.saturating_add(ns);
            times.min_ns = times.min_ns.min(ns);
            times.max_ns = times.max_ns.max(ns);
        })
        .or_insert(GroupTimes {
            occupancy_pct: params.occupancy_pct,
            occurrences: 1,
            total_ns: ns,
            min_ns: ns,
            max_ns: ns,
        });
}

/// Kernel statistics over the GPU planes of `hosts`: each host's launches grouped and
/// cut to its top [`MAX_KERNELS`], then all hosts' groups sorted together and cut again.
pub fn analyze(hosts: &[&Host]) -> KernelStats {
    let modules: Vec<HloModules> = hosts.iter().map(|host| HloModules::for_gpu_kernels(host)).collect();
    analyze_with(hosts, &modules)
}

/// [`analyze`] with each host's programs decoded already
/// ([`HloModules::for_gpu_kernels`], in host order).
pub(crate) fn analyze_with(hosts: &[&Host], modules: &[HloModules]) -> KernelStats {
    let mut stats = KernelStats::default();
    let no_programs = HloModules::default();
    for (index, host) in hosts.iter().enumerate() {
        let modules = modules.get(index).unwrap_or(&no_programs);
        if host.planes.iter().any(|plane| plane.name.starts_with(TPU_PLANE_PREFIX)) {
            continue;
        }
        let mut groups = HashMap::new();
        stats.gpu_planes += facts::kernel_launches(host, modules, &mut |launch| add_launch(&mut groups, launch));
        let mut reports: Vec<KernelReport> =
            groups.into_iter().map(|(key, times)| KernelReport::from_group(key, times)).collect();
        sort_and_truncate(&mut reports);
        stats.kernels.extend(reports);
    }
    sort_and_truncate(&mut stats.kernels);
    stats
}

/// The kernels of one framework op, summed (XProf's `OpLevelKernelStats`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct OpKernels {
    /// Whether the op can use TensorCores (as its longest kernel group says).
    pub is_op_tensor_core_eligible: bool,
    /// Time in kernels that use TensorCores, nanoseconds.
    pub tensor_core_ns: u64,
    /// Time in all its kernels, nanoseconds.
    pub total_ns: u64,
}

impl KernelStats {
    /// The kernels summed per op name (XProf's `GroupKernelReportsByOpName`): an op's
    /// eligibility is that of its first (longest) kernel group.
    pub fn by_op(&self) -> HashMap<&str, OpKernels> {
        let mut by_op: HashMap<&str, OpKernels> = HashMap::new();
        for kernel in &self.kernels {
            let op = by_op.entry(&kernel.op_name).or_insert_with(|| OpKernels {
                is_op_tensor_core_eligible: kernel.is_op_tensor_core_eligible,
                ..OpKernels::default()
            });
            op.total_ns += kernel.total_duration_ns;
            if kernel.is_kernel_using_tensor_core {
                op.tensor_core_ns += kernel.total_duration_ns;
            }
        }
        by_op
    }
}

fn ns_to_us(ns: u64) -> f64 {
    ns as f64 / 1e3
}

fn dim_text(dim: [u32; 3]) -> String {
    format!("{},{},{}", dim[0], dim[1], dim[2])
}

impl KernelStats {
    /// Sum of all groups' total durations in nanoseconds.
    pub fn total_duration_ns(&self) -> u64 {
        self.kernels.iter().map(|k| k.total_duration_ns).sum()
    }

    /// Sum of the total durations of groups whose kernel uses TensorCores, in nanoseconds.
    pub fn tensor_core_duration_ns(&self) -> u64 {
        self.kernels.iter().filter(|k| k.is_kernel_using_tensor_core).map(|k| k.total_duration_ns).sum()
    }

    /// The result laid out for people: one main table, one row per kernel group.
    pub fn report(&self) -> Report {
        let mut section = Section::new("Kernel stats").main();
        if self.gpu_planes == 0 {
            section = section.note("The profile has no GPU kernels: it has no /device:GPU:* plane.");
        } else if self.kernels.is_empty() {
            section = section.note(format!(
                "The profile has {} GPU plane(s) but no kernel launches with launch details (kernel_details).",
                self.gpu_planes
            ));
        } else {
            let total = self.total_duration_ns();
            let launches: u64 = self.kernels.iter().map(|k| k.occurrences).sum();
            let tc_pct = if total == 0 { 0.0 } else { 100.0 * self.tensor_core_duration_ns() as f64 / total as f64 };
            section = section.note(format!(
                "{} distinct kernels ({} launches), total kernel time {}; {:.1}% of kernel time is in kernels using TensorCores.",
                self.kernels.len(),
                launches,
                human::duration_us(ns_to_us(total)),
                tc_pct
            ));
            if self.kernels.len() == MAX_KERNELS {
                section = section.note(format!("Only the {MAX_KERNELS} kernels with the longest total time are kept."));
            }
        }
        let mut table = Table::new([
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
        ])
        .key_columns(&[
            "Kernel name",
            "Total duration (us)",
            "Occurrences",
            "Op name",
            "Avg duration (us)",
            "Occupancy %",
        ]);
        let yes_no = |flag: bool| Cell::text(if flag { "yes" } else { "no" });
        for k in &self.kernels {
            table.push(vec![
                Cell::text(k.name.as_str()),
                Cell::Int(i64::from(k.registers_per_thread)),
                Cell::Int(i64::from(k.shmem_bytes())),
                Cell::text(dim_text(k.block_dim)),
                Cell::text(dim_text(k.grid_dim)),
                Cell::num(f64::from(k.occupancy_pct), 1),
                yes_no(k.is_op_tensor_core_eligible),
                yes_no(k.is_kernel_using_tensor_core),
                Cell::text(k.op_name.as_str()),
                Cell::Int(i64::try_from(k.occurrences).unwrap_or(i64::MAX)),
                Cell::num(ns_to_us(k.total_duration_ns), 3),
                Cell::num(ns_to_us(k.avg_duration_ns()), 3),
                Cell::num(ns_to_us(k.min_duration_ns), 3),
                Cell::num(ns_to_us(k.max_duration_ns), 3),
            ]);
        }
        Report { tool: "kernel_stats".to_string(), sections: vec![section.with_table(table)] }
    }

    /// XProf 2.24.2's `kernel_stats` DataTable JSON (every number a double, ranks from 1).
    pub fn to_xprof_json(&self) -> Value {
        let mut table = DataTable::new();
        for (id, kind, label) in [
            ("rank", "number", "Rank"),
            ("kernel_name", "string", "Kernel Name"),
            ("registers_per_thread", "number", "Registers per thread"),
            ("shmem_bytes", "number", "Shared Mem bytes"),
            ("block_dim", "string", "Block dim"),
            ("grid_dim", "string", "Grid dim"),
            ("occupancy_pct", "number", "Theoretical Occupancy %"),
            ("is_op_tensor_core_eligible", "boolean", "Op is TensorCore eligible"),
            ("is_kernel_using_tensor_core", "boolean", "Kernel uses TensorCore"),
            ("op_name", "string", "Op Name"),
            ("occurrences", "number", "Occurrences"),
            ("total_duration_us", "number", "Total Duration (μs)"),
            ("avg_duration_us", "number", "Avg Duration (μs)"),
            ("min_duration_us", "number", "Min Duration (μs)"),
            ("max_duration_us", "number", "Max Duration (μs)"),
        ] {
            table.column(id, label, kind);
        }
        for (rank, k) in self.kernels.iter().enumerate() {
            // XProf stores occurrences as uint32 in its report proto.
            let occurrences = k.occurrences as u32;
            let avg_ns = k.total_duration_ns.checked_div(u64::from(occurrences)).unwrap_or(0);
            table.row(vec![
                Value::from((rank + 1) as f64),
                Value::from(k.name.as_str()),
                Value::from(f64::from(k.registers_per_thread)),
                Value::from(f64::from(k.shmem_bytes())),
                Value::from(dim_text(k.block_dim)),
                Value::from(dim_text(k.grid_dim)),
                Value::from(f64::from(k.occupancy_pct)),
                Value::from(k.is_op_tensor_core_eligible),
                Value::from(k.is_kernel_using_tensor_core),
                Value::from(k.op_name.as_str()),
                Value::from(f64::from(occurrences)),
                Value::from(ns_to_us(k.total_duration_ns)),
                Value::from(ns_to_us(avg_ns)),
                Value::from(ns_to_us(k.min_duration_ns)),
                Value::from(ns_to_us(k.max_duration_ns)),
            ]);
        }
        table.to_json()
    }
}

#[cfg(test)]
mod tests {
    use mlprof_model::{Line, PlaneBuilder, SourceFormat, StatValue};

    use super::*;
    use crate::hlo::tests::sample_metadata_plane;

    #[test]
    fn xla_kernels_take_the_framework_op_of_their_instruction() {
        let mut gpu = PlaneBuilder::new(1, "/device:GPU:0");
        let [details, hlo_op, program, tf_op] =
            ["kernel_details", "hlo_op", "program_id", "tf_op"].map(|n| gpu.stat_key(n));
        let mut line = Line::new(7, "Stream #7(Kernel)");
        let launch = "regs:32 static_shared:0 dynamic_shared:0 grid:1,1,1 block:128,1,1 occ_pct:50";
        // (kernel, hlo_op, program id, tf_op, duration ps)
        for (i, (name, op, program_id, tf, duration)) in [
            ("gemm_dot_1", "dot.1", 7, None, 4_000),
            ("gemm_dot_1", "jit_f::dot.1", 7, Some("model/MatMul:MatMul"), 6_000),
            ("loop_fusion_1", "fusion.1", 7, None, 2_000),
            ("unknown_9", "unknown.9", 7, Some("model/Relu:Relu"), 1_000),
            ("other_program", "dot.1", 8, None, 1_000),
            ("no_duration", "dot.1", 7, None, 0),
        ]
        .into_iter()
        .enumerate()
        {
            line.stats.push_str(details, launch).expect("fits");
            line.stats.push_str(hlo_op, op).expect("fits");
            line.stats.push(program, StatValue::Int(program_id));
            if let Some(tf) = tf {
                line.stats.push_str(tf_op, tf).expect("fits");
            }
            let metadata = gpu.event_metadata(name, 0, |_| Vec::new());
            line.push_event(metadata, i as i64 * 10_000, duration);
        }
        gpu.push_line(line);
        let mut host = Host::new("h", "h", SourceFormat::Xspace);
        host.planes.push(sample_metadata_plane(7));
        host.planes.push(gpu.finish());

        let stats = analyze(&[&host]);
        let rows: Vec<_> = stats
            .kernels
            .iter()
            .map(|k| (k.name.as_str(), k.op_name.as_str(), k.is_op_tensor_core_eligible, k.total_duration_ns))
            .collect();
        // Both dot launches are one group under the instruction's op, whatever their
        // `tf_op` says; the launch without duration is not counted.
        assert_eq!(
            rows,
            [
                ("gemm_dot_1", "jit(f)/dot_general", true, 10),
                ("loop_fusion_1", "", false, 2),
                ("other_program", "", false, 1),
                ("unknown_9", "model/Relu", false, 1),
            ]
        );
    }

    #[test]
    fn parses_current_cupti_format() {
        let p = parse_kernel_details(
            "regs:32 static_shared:48 dynamic_shared:16384 grid:80,2,1 block:256,1,1 occ_pct:37.5",
        );
        assert_eq!(p.registers_per_thread, 32);
        assert_eq!(p.static_shmem_bytes, 48);
        assert_eq!(p.dynamic_shmem_bytes, 16384);
        assert_eq!(p.grid_dim, [80, 2, 1]);
        assert_eq!(p.block_dim, [256, 1, 1]);
        assert_eq!(p.occupancy_pct, 37.5);
    }

    #[test]
    fn parses_newline_separated_format() {
        let p =
            parse_kernel_details("regs:16\nstatic_shared:0\ndynamic_shared:0\ngrid:1,1,1\nblock:1,1,1\nocc_pct:50.0");
        assert_eq!(p.registers_per_thread, 16);
        assert_eq!(p.grid_dim, [1, 1, 1]);
        assert_eq!(p.occupancy_pct, 50.0);
        // `occ_pct=13.0` is not a `key:value` token and leaves occupancy at 0.
        let p = parse_kernel_details("regs:32\ndynamic_shared:16384\ngrid:2,1,1\nblock:32,1,1\nocc_pct=13.0");
        assert_eq!((p.registers_per_thread, p.dynamic_shmem_bytes), (32, 16384));
        assert_eq!((p.grid_dim, p.block_dim), ([2, 1, 1], [32, 1, 1]));
        assert_eq!(p.occupancy_pct, 0.0);
    }

    #[test]
    fn missing_and_odd_tokens_keep_defaults() {
        assert_eq!(parse_kernel_details(""), LaunchParams::default());
        let p = parse_kernel_details("odd grid:3,2,1");
        assert_eq!(p.grid_dim, [3, 2, 1]);
        assert_eq!(p.block_dim, [1, 1, 1]);
        let p = parse_kernel_details("block:6,5,4 odd ");
        assert_eq!(p.block_dim, [6, 5, 4]);
        let p = parse_kernel_details("static_shared:7 dynamic_shared:8");
        assert_eq!((p.static_shmem_bytes, p.dynamic_shmem_bytes), (7, 8));
        assert_eq!(p.registers_per_thread, 0);
        // Whitespace other than space/newline is trimmed from values, as absl does.
        assert_eq!(parse_kernel_details("regs:12\r").registers_per_thread, 12);
    }

    #[test]
    fn garbage_does_not_panic_and_is_ignored() {
        for text in [
            "regs:-1 static_shared:abc grid:1,2 block:1,2,3,4 occ_pct:x",
            "regs:99999999999 grid:,, block::: :: : regs",
            "grid:4294967296,1,1 block:1,1,é occ_pct:",
            "\u{0}\u{ffff}regs:1:2 ünïcödé:1",
        ] {
            let p = parse_kernel_details(text);
            assert_eq!(p.registers_per_thread, 0, "{text:?}");
            assert_eq!(p.grid_dim, [1, 1, 1], "{text:?}");
            assert_eq!(p.block_dim, [1, 1, 1], "{text:?}");
            assert_eq!(p.occupancy_pct, 0.0, "{text:?}");
        }
        // The last valid value of a repeated key wins.
        assert_eq!(parse_kernel_details("regs:1 regs:2 regs:x").registers_per_thread, 2);
    }

    #[test]
    fn tensor_core_patterns() {
        assert!(kernel_uses_tensor_core("volta_h884gemm_64x64_ldg8_nn"));
        assert!(kernel_uses_tensor_core("turing_fp16_s1688cudnn_fp16_256x128_ldg8_relu_f2f_exp_small_nhwc_tn_v1"));
        assert!(kernel_uses_tensor_core("sm80_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize96x128x32_stage4"));
        assert!(kernel_uses_tensor_core("ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_stages_32x5_nn"));
        assert!(!kernel_uses_tensor_core("ampere_sgemm_128x64_nn"));
        assert!(!kernel_uses_tensor_core("void Eigen::internal::EigenMetaKernel<>"));

        assert!(op_tensor_core_eligible("model/conv2d/Conv2D"));
        assert!(op_tensor_core_eligible("model/dense/MatMul"));
        assert!(op_tensor_core_eligible("gradients/BatchMatMulV2"));
        assert!(op_tensor_core_eligible("a/_FusedMatMul"));
        assert!(!op_tensor_core_eligible("MatMul"));
        assert!(!op_tensor_core_eligible("model/dense/MatMul_1"));
        assert!(!op_tensor_core_eligible("model/relu/Relu"));

        assert!(einsum_tensor_core_eligible("ab,bc->ac"));
        assert!(!einsum_tensor_core_eligible("ab->ba"));
        assert!(!einsum_tensor_core_eligible("a,b,c->abc"));
        assert!(!einsum_tensor_core_eligible("ab,bc"));
        assert!(!einsum_tensor_core_eligible(""));
    }

    #[test]
    fn op_names_from_tf_op_stats() {
        assert_eq!(tf_op_name("model/dense/MatMul:MatMul"), "model/dense/MatMul");
        assert_eq!(tf_op_name("mul_786"), "mul_786");
        assert_eq!(tf_op_name("Iterator::Batch::Map"), "Iterator::Batch::Map");
        assert_eq!(tf_op_name("Iterator:Batch"), "Iterator:Batch");
        assert_eq!(tf_op_name("jit(f)/dot_general:dot_general[dims=((1,), (0,))]"), "jit(f)/dot_general");
        assert_eq!(tf_op_name("name:"), "name");
        assert_eq!(tf_op_name("a b:Not A Type"), "a b:Not A Type");
        assert_eq!(tf_op_name("x:y:Z"), "x:y:Z");
        assert_eq!(tf_op_name(""), "");
    }

    #[test]
    fn empty_stats_have_the_xprof_columns_and_no_rows() {
        let stats = analyze(&[]);
        let json = stats.to_xprof_json();
        assert_eq!(json["cols"].as_array().map(Vec::len), Some(15));
        assert_eq!(json["rows"], serde_json::json!([]));
        let report = stats.report();
        assert!(report.sections[0].notes[0].contains("no GPU kernels"));
    }
}
