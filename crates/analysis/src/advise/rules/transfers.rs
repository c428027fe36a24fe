//! `transfers`: expensive copies and synchronisations, from the transfers tool (its
//! Nsight-style rules: pageable and synchronous copies, synchronous memsets,
//! synchronising calls, implicit syncs such as `.item()`, slow copies, copies not
//! overlapped with compute). One finding per kind of problem, summing the tool's time
//! lost per step over its findings of that kind (the tool counts each host call in
//! one finding only, so the sum counts nothing twice); the costliest places are the
//! evidence and their fixes the fixes. Severity: high from 20 % of the step, medium
//! from 5 %; medium without steps. The tool's GPU gaps are not findings here: they
//! are the evidence of `device_idle`.

use crate::advise::{Evidence, Finding, Outcome, Severity, ToolResults};
use crate::gpu::transfers::findings::{Finding as TransferFinding, FindingKind};

use super::ms;

/// The rule's name.
pub const NAME: &str = "transfers";

/// Places listed per kind.
const LISTED: usize = 3;

/// The kinds reported, in the tool's order, with a title each.
const KINDS: [(FindingKind, &str); 7] = [
    (FindingKind::ImplicitSync, "Implicit synchronisations (.item(), .cpu(), .to('cpu'))"),
    (FindingKind::SyncCall, "Host synchronisation calls"),
    (FindingKind::PageableCopy, "Copies from or to pageable host memory"),
    (FindingKind::SyncCopy, "Synchronous copies"),
    (FindingKind::SyncMemset, "Synchronous memsets"),
    (FindingKind::LowCopyBandwidth, "Copies below half the link's bandwidth"),
    (FindingKind::SerializedCopy, "Copies not overlapped with compute"),
];

/// The rule.
pub fn check(results: &ToolResults) -> Outcome {
    let Some(transfers) = &results.transfers else {
        return Outcome::NotApplicable("the transfers diagnosis did not run".into());
    };
    if transfers.hosts.iter().all(|h| h.devices.is_empty()) {
        return Outcome::NotApplicable("no GPU activity in the profile".into());
    }
    let mut findings = Vec::new();
    for (kind, title) in KINDS {
        let of_kind: Vec<(usize, &TransferFinding)> =
            transfers.findings.iter().enumerate().filter(|(_, f)| f.kind == kind).collect();
        if !of_kind.is_empty() {
            findings.push(finding(results, kind, title, &of_kind));
        }
    }
    if findings.is_empty() {
        let gaps = transfers.findings.iter().filter(|f| f.kind == FindingKind::GpuGap).count();
        return Outcome::Clear(
            Evidence::new(
                "transfers",
                format!("no copy or synchronisation problems ({gaps} kinds of GPU gaps are evidence of device_idle)"),
            )
            .cite("count(findings[])", transfers.findings.len() as f64),
        );
    }
    Outcome::Found(findings)
}

fn finding(results: &ToolResults, kind: FindingKind, title: &str, of_kind: &[(usize, &TransferFinding)]) -> Finding {
    let count: u64 = of_kind.iter().map(|(_, f)| f.count).sum();
    let total_ps: i64 = of_kind.iter().map(|(_, f)| f.time_lost_ps).sum();
    let per_step: Option<i64> =
        of_kind.iter().map(|(_, f)| f.time_lost_per_step_ps).try_fold(0i64, |sum, t| Some(sum + t?));
    let severity = match per_step {
        Some(ps) => Severity::by_share(results.step_share_percent(ps as f64 / 1e9), 5.0, 20.0),
        None => Severity::Medium,
    };
    let amount = match per_step {
        Some(ps) => format!("{} per step", ms(ps as f64 / 1e9)),
        None => format!("{} over the profile (no steps)", ms(total_ps as f64 / 1e9)),
    };
    let mut places = Evidence::new("transfers", String::new());
    let mut lines = Vec::new();
    let mut fixes: Vec<String> = Vec::new();
    for (index, f) in of_kind.iter().take(LISTED) {
        let (field, value, lost) = match f.time_lost_per_step_ps {
            Some(ps) => ("time_lost_per_step_ps", ps, format!("{} per step", ms(ps as f64 / 1e9))),
            None => ("time_lost_ps", f.time_lost_ps, ms(f.time_lost_ps as f64 / 1e9)),
        };
        let place = f.location.describe();
        let at = if place == "—" { String::new() } else { format!(" at {place}") };
        lines.push(format!("{}{at} ×{} ({lost})", f.what, f.count));
        places = places.cite(format!("findings[{index}].{field}"), value as f64);
        if !fixes.contains(&f.fix) {
            fixes.push(f.fix.clone());
        }
    }
    places.text = format!(
        "{} in {}; the costliest: {}.",
        super::count(count as usize, "occurrence", "occurrences"),
        super::count(of_kind.len(), "place", "places"),
        lines.join("; ")
    );
    let basis = match kind {
        FindingKind::LowCopyBandwidth | FindingKind::SerializedCopy => "device time",
        _ => "host time blocked",
    };
    Finding::new(NAME, severity, format!("{title}: {amount}"))
        .total(total_ps)
        .time_lost(
            per_step,
            format!("the transfers tool's time lost per step ({basis}), summed over its {} findings", kind.name()),
        )
        .evidence(places)
        .fixes(fixes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::transfers::findings::Location;
    use crate::gpu::transfers::{DeviceInfo, HostTransfers, Transfers};

    fn transfer(kind: FindingKind, what: &str, per_step_ps: Option<i64>) -> TransferFinding {
        TransferFinding {
            kind,
            what: what.into(),
            host: "rank0".into(),
            device: Some(0),
            location: Location { op: Some("aten::copy_".into()), ..Location::default() },
            count: 2,
            time_lost_ps: per_step_ps.unwrap_or(7) * 2,
            time_lost_per_step_ps: per_step_ps,
            bytes: 0,
            fix: format!("fix {what}"),
        }
    }

    fn results(findings: Vec<TransferFinding>) -> ToolResults {
        let host = HostTransfers {
            host: "rank0".into(),
            rank: None,
            source: "kineto",
            steps: 2,
            step_source: "",
            devices: vec![DeviceInfo { device: 0, name: None, peaks: None }],
            blocking_calls: Vec::new(),
            copy_bandwidth: Vec::new(),
            copy_compute_overlap: Vec::new(),
            gaps: Vec::new(),
        };
        ToolResults {
            transfers: Some(Transfers { gap_threshold_ps: 100_000_000, hosts: vec![host], findings }),
            ..ToolResults::default()
        }
    }

    #[test]
    fn copies_of_one_kind_become_one_finding_with_the_summed_time() {
        let results = results(vec![
            transfer(FindingKind::PageableCopy, "Memcpy HtoD", Some(300)),
            transfer(FindingKind::GpuGap, "nothing recorded", Some(9_000)),
            transfer(FindingKind::PageableCopy, "Memcpy DtoH", Some(200)),
        ]);
        let Outcome::Found(findings) = check(&results) else { panic!("pageable copies must fire") };
        assert_eq!(findings.len(), 1, "GPU gaps are device_idle's evidence");
        assert_eq!(findings[0].time_lost_per_step_ps, Some(500));
        assert_eq!(findings[0].evidence[0].cited[1].field, "findings[2].time_lost_per_step_ps");
        assert_eq!(findings[0].fixes, ["fix Memcpy HtoD", "fix Memcpy DtoH"]);
    }

    #[test]
    fn only_gaps_is_clear_and_no_gpu_does_not_apply() {
        let gaps = results(vec![transfer(FindingKind::GpuGap, "nothing recorded", Some(9_000))]);
        assert!(matches!(check(&gaps), Outcome::Clear(_)));
        let mut no_gpu = results(Vec::new());
        if let Some(t) = no_gpu.transfers.as_mut() {
            t.hosts[0].devices.clear();
        }
        assert!(matches!(check(&no_gpu), Outcome::NotApplicable(_)));
    }
}
