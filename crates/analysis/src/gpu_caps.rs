//! What a GPU device plane says about its hardware (the CUPTI tracer's
//! device-capability plane stats): the model name XProf shows, and the peak FLOP rate
//! and memory bandwidths its roofline compares ops against.

use mlprof_model::Plane;

use crate::xstats;

/// The GPU model of a device plane as XProf names it (`GpuModelName`): `Nvidia GPU
/// (<architecture>)` from the `compute_cap_major`/`compute_cap_minor` plane stats,
/// `Nvidia GPU` when they are missing; a plane whose `device_vendor` is not NVIDIA's is
/// `<vendor> GPU` (XProf would call it an Nvidia GPU).
pub fn gpu_model_name(plane: &Plane) -> String {
    let vendor =
        plane.plane_stat("device_vendor").and_then(|value| xstats::as_str(plane, &plane.metadata_stats, value));
    if let Some(vendor) = vendor.filter(|vendor| *vendor != "Nvidia") {
        return format!("{vendor} GPU");
    }
    let architecture = match compute_capability(plane) {
        (2, _) => "Fermi",
        (3, _) => "Kepler",
        (5, _) => "Maxwell",
        (6, _) => "Pascal",
        (7, minor) if minor < 5 => "Volta",
        (7, _) => "Turing",
        (8, minor) if minor < 9 => "Ampere",
        (8, _) => "Ada Lovelace",
        (9, _) => "Hopper",
        (10, _) => "Blackwell",
        _ => return "Nvidia GPU".to_string(),
    };
    format!("Nvidia GPU ({architecture})")
}

/// The peaks an op's rates are compared with (XProf's `PerfEnv` for GPUs).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GpuPeaks {
    /// Peak FLOP rate, GFLOP/s: SMs × clock × the architecture's dense FP16
    /// TensorCore FLOPs per SM per cycle (0 when the plane does not say).
    pub flops_gflops: f64,
    /// Peak HBM bandwidth, GB/s (10^9 bytes), from the `memory_bandwidth` stat.
    pub hbm_gbps: f64,
    /// Peak shared-memory/L1 bandwidth, GB/s: 32 banks × 8 bytes per cycle per SM.
    pub shm_gbps: f64,
}

impl GpuPeaks {
    /// The peaks of the GPU of `plane`, from its `core_count`, `clock_rate` (kHz),
    /// `memory_bandwidth` (bytes/s) and compute-capability stats.
    pub fn of_plane(plane: &Plane) -> GpuPeaks {
        let stat = |name| plane.plane_stat(name).and_then(xstats::as_int).unwrap_or(0).max(0) as f64;
        let (cores, clock_ghz) = (stat("core_count"), stat("clock_rate") / 1e6);
        let capability = compute_capability(plane);
        let per_sm_cycle = tensor_core_flops_per_sm_cycle(capability);
        let bank_bytes_per_cycle = if capability.0 <= 2 { 32.0 * 4.0 / 2.0 } else { 32.0 * 8.0 };
        GpuPeaks {
            flops_gflops: cores * clock_ghz * per_sm_cycle,
            hbm_gbps: stat("memory_bandwidth") / 1e9,
            shm_gbps: cores * clock_ghz * bank_bytes_per_cycle,
        }
    }

    /// XProf's roofline bottleneck of an op running at `flop_rate_gflops` and
    /// `memory_bw_gibps` (GiB/s): the resource it uses the largest share of
    /// (`Compute`, `HBM`, `Shm/L1`), `Unknown` when it uses none.
    pub fn bound_by(&self, flop_rate_gflops: f64, memory_bw_gibps: f64) -> &'static str {
        let gibi = |gbps: f64| gbps * 1e9 / (1u64 << 30) as f64;
        let share = |value: f64, peak: f64| if peak.abs() < 1e-10 { 0.0 } else { value / peak };
        let mut bound = ("Unknown", 0.0);
        for (resource, utilization) in [
            ("Compute", share(flop_rate_gflops, self.flops_gflops)),
            ("HBM", share(memory_bw_gibps, gibi(self.hbm_gbps))),
            ("Shm/L1", share(memory_bw_gibps, gibi(self.shm_gbps))),
        ] {
            if bound.1 < utilization {
                bound = (resource, utilization);
            }
        }
        bound.0
    }
}

/// The `compute_cap_major` and `compute_cap_minor` plane stats (0 when missing).
fn compute_capability(plane: &Plane) -> (i64, i64) {
    let cap = |name| plane.plane_stat(name).and_then(xstats::as_int).unwrap_or(0);
    (cap("compute_cap_major"), cap("compute_cap_minor"))
}

/// Dense FP16 TensorCore FLOPs per SM per clock cycle, by compute capability (NVIDIA's
/// published peaks: V100 125 TFLOP/s on 80 SMs at 1.53 GHz, A100 312 on 108 at 1.41,
/// H100 989 on 132 at 1.83, …); FP32 CUDA cores before Volta.
fn tensor_core_flops_per_sm_cycle((major, minor): (i64, i64)) -> f64 {
    match (major, minor) {
        (10.., _) => 8192.0,
        (9, _) => 4096.0,
        (8, 0) => 2048.0,
        (7, _) | (8, _) => 1024.0,
        (6, 0) => 128.0,
        (3..=6, _) => 256.0,
        _ => 0.0,
    }
}

#[cfg(test)]
mod tests {
    use mlprof_model::{PlaneBuilder, StatValue};

    use super::*;

    fn h100() -> Plane {
        let mut builder = PlaneBuilder::new(1, "/device:GPU:0");
        let stats = [
            ("clock_rate", 1_980_000),
            ("core_count", 132),
            ("memory_bandwidth", 3_352_320_000_000),
            ("compute_cap_major", 9),
            ("compute_cap_minor", 0),
        ]
        .map(|(name, value)| (builder.stat_key(name), StatValue::Int(value)));
        builder.set_plane_stats(stats.to_vec());
        builder.finish()
    }

    #[test]
    fn h100_peaks_and_bottlenecks() {
        let plane = h100();
        assert_eq!(gpu_model_name(&plane), "Nvidia GPU (Hopper)");
        let peaks = GpuPeaks::of_plane(&plane);
        // XProf's roofline on this plane: 1.07053e6 GFLOP/s, 3122.09 GiB/s of HBM.
        assert!((peaks.flops_gflops - 1.070_530_56e6).abs() < 1.0);
        assert!((peaks.hbm_gbps * 1e9 / (1u64 << 30) as f64 - 3122.09).abs() < 0.01);
        assert_eq!(peaks.bound_by(171.8, 7.2), "HBM");
        assert_eq!(peaks.bound_by(900_000.0, 7.2), "Compute");
        assert_eq!(peaks.bound_by(0.0, 0.0), "Unknown");
        assert_eq!(GpuPeaks::default().bound_by(1.0, 1.0), "Unknown");
    }
}
