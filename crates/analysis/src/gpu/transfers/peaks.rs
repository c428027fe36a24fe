//! Peak copy bandwidths by device name: the host link (PCIe, per direction) for host
//! copies, device memory (HBM / GDDR) for device-to-device copies.
//!
//! Numbers are the vendors' published figures: PCIe per direction on an x16 link after
//! 128b/130b encoding (Gen3 15.75 GB/s, Gen4 31.5 GB/s, Gen5 63.0 GB/s), memory from
//! each product's data sheet. Achievable host-copy bandwidth is lower (typically
//! 80–90 % of the link for pinned memory). A device not in the table has no peak: the
//! report says "peak unknown" rather than guess.

use serde::Serialize;

/// Gen3 x16, GB/s per direction.
const PCIE_GEN3_GBPS: f64 = 15.75;
/// Gen4 x16, GB/s per direction.
const PCIE_GEN4_GBPS: f64 = 31.5;
/// Gen5 x16, GB/s per direction.
const PCIE_GEN5_GBPS: f64 = 63.0;

/// Peak bandwidths of one device model.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct DevicePeaks {
    /// The table entry that matched (`A100 40GB`).
    pub model: &'static str,
    /// PCIe generation of the host link.
    pub pcie_generation: u8,
    /// Host link peak per direction, GB/s.
    pub host_link_gbps: f64,
    /// Device memory peak, GB/s.
    pub memory_gbps: f64,
}

/// `(substrings that must all appear in the upper-cased name, model, PCIe generation,
/// memory GB/s)`, most specific first.
const TABLE: &[(&[&str], &str, u8, f64)] = &[
    (&["H200"], "H200", 5, 4800.0),
    (&["GH200"], "GH200", 5, 4000.0),
    (&["H100", "NVL"], "H100 NVL", 5, 3900.0),
    (&["H100", "PCIE"], "H100 PCIe", 5, 2000.0),
    (&["H100"], "H100 SXM", 5, 3350.0),
    (&["H800", "PCIE"], "H800 PCIe", 5, 2000.0),
    (&["H800"], "H800 SXM", 5, 3350.0),
    (&["A100", "80GB", "PCIE"], "A100 80GB PCIe", 4, 1935.0),
    (&["A100", "80GB"], "A100 80GB SXM", 4, 2039.0),
    (&["A100"], "A100 40GB", 4, 1555.0),
    (&["A800", "80GB"], "A800 80GB", 4, 2039.0),
    (&["A10G"], "A10G", 4, 600.0),
    (&["A10"], "A10", 4, 600.0),
    (&["L40S"], "L40S", 4, 864.0),
    (&["L4"], "L4", 4, 300.0),
    (&["V100S"], "V100S", 3, 1134.0),
    (&["V100"], "V100", 3, 900.0),
    (&["T4"], "T4", 3, 320.0),
    (&["MI300X"], "MI300X", 5, 5300.0),
    (&["MI300A"], "MI300A", 5, 5300.0),
    (&["MI250"], "MI250/MI250X", 4, 3276.8),
    (&["MI210"], "MI210", 4, 1638.4),
    (&["MI100"], "MI100", 4, 1228.8),
];

/// The peaks of the device called `name` (`NVIDIA A100-PG509-200`), if the table
/// knows it.
pub fn device_peaks(name: &str) -> Option<DevicePeaks> {
    let upper = name.to_ascii_uppercase();
    let words: Vec<&str> = upper.split(|c: char| !c.is_ascii_alphanumeric()).filter(|w| !w.is_empty()).collect();
    let has = |needle: &str| words.iter().any(|w| w.starts_with(needle));
    TABLE.iter().find(|(needles, ..)| needles.iter().all(|needle| has(needle))).map(
        |&(_, model, generation, memory_gbps)| DevicePeaks {
            model,
            pcie_generation: generation,
            host_link_gbps: match generation {
                3 => PCIE_GEN3_GBPS,
                4 => PCIE_GEN4_GBPS,
                _ => PCIE_GEN5_GBPS,
            },
            memory_gbps,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_from_real_profiles_match() {
        let a100 = device_peaks("NVIDIA A100-PG509-200").unwrap();
        assert_eq!((a100.model, a100.host_link_gbps, a100.memory_gbps), ("A100 40GB", 31.5, 1555.0));
        assert_eq!(device_peaks("Tesla V100-SXM2-32GB").unwrap().model, "V100");
        assert_eq!(device_peaks("NVIDIA H100 80GB HBM3").unwrap().model, "H100 SXM");
        assert_eq!(device_peaks("NVIDIA H100 PCIe").unwrap().model, "H100 PCIe");
        assert_eq!(device_peaks("NVIDIA A100-SXM4-80GB").unwrap().model, "A100 80GB SXM");
        assert_eq!(device_peaks("AMD Instinct MI250X").unwrap().model, "MI250/MI250X");
        assert_eq!(device_peaks("NVIDIA L4").unwrap().model, "L4");
        assert_eq!(device_peaks("NVIDIA L40S").unwrap().model, "L40S");
        assert_eq!(device_peaks("NVIDIA GeForce RTX 4090"), None);
    }
}
