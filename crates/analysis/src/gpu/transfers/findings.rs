//! Findings: one row per (kind, what, where), aggregated from single occurrences, with
//! its time lost and a fix; and the ranking (most time lost first).

use std::collections::HashMap;

use serde::Serialize;

use crate::facts::activity::{HostKind, HostRef, ProfileView};

/// Python frames kept per finding.
pub const STACK_FRAMES: usize = 4;

/// The kinds of finding, in the order the module docs define their time lost.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FindingKind {
    /// A host↔device copy from or to pageable memory.
    PageableCopy,
    /// A synchronous copy call (`cudaMemcpy`, XSpace `async:0`).
    SyncCopy,
    /// A synchronous memset call (`cudaMemset`).
    SyncMemset,
    /// An explicit synchronisation call (`cudaStreamSynchronize`, …).
    SyncCall,
    /// A framework op that copies to the host and waits (`.item()`, `.cpu()`).
    ImplicitSync,
    /// The GPU idle longer than the gap threshold.
    GpuGap,
    /// Copies of one kind well below the device's peak bandwidth.
    LowCopyBandwidth,
    /// Host↔device copies that ran while no compute kernel did.
    SerializedCopy,
}

impl FindingKind {
    /// The name in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            FindingKind::PageableCopy => "pageable_copy",
            FindingKind::SyncCopy => "sync_copy",
            FindingKind::SyncMemset => "sync_memset",
            FindingKind::SyncCall => "sync_call",
            FindingKind::ImplicitSync => "implicit_sync",
            FindingKind::GpuGap => "gpu_gap",
            FindingKind::LowCopyBandwidth => "low_copy_bandwidth",
            FindingKind::SerializedCopy => "serialized_copy",
        }
    }
}

/// Where an occurrence happened on the host.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct Location {
    /// The innermost framework op (`aten::copy_`) enclosing it, else the innermost
    /// `record_function` range.
    pub op: Option<String>,
    /// Enclosing Python frames, innermost first (empty without `with_stack`).
    pub stack: Vec<String>,
    /// The host thread.
    pub thread: Option<String>,
}

impl Location {
    /// The location of host event `at`: its innermost op and Python stack.
    pub fn of(view: &ProfileView<'_>, at: HostRef) -> Location {
        let Some(thread) = view.thread(at) else { return Location::default() };
        Location {
            op: thread
                .enclosing_op(at.1)
                .or_else(|| thread.chain(at.1).map(|(_, e)| e).find(|e| e.kind == HostKind::Annotation))
                .map(|e| e.name.to_string()),
            stack: thread.python_stack(at.1, STACK_FRAMES),
            thread: Some(thread.name.clone()),
        }
    }

    /// `op` (or `—`) followed by the innermost frame, for tables.
    pub fn describe(&self) -> String {
        let op = self.op.as_deref().unwrap_or("—");
        match self.stack.first() {
            Some(frame) => format!("{op} @ {frame}"),
            None => op.to_string(),
        }
    }
}

/// One finding.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Finding {
    /// Kind.
    pub kind: FindingKind,
    /// What: the copy name, the call, the gap cause, the stream.
    pub what: String,
    /// The host (file / rank) it was found on.
    pub host: String,
    /// GPU ordinal, for device-side findings.
    pub device: Option<i64>,
    /// Where on the host.
    pub location: Location,
    /// Occurrences.
    pub count: u64,
    /// Time lost in total, ps (see the module docs for each kind's definition).
    pub time_lost_ps: i64,
    /// Time lost per step, ps (`None` without step markers).
    pub time_lost_per_step_ps: Option<i64>,
    /// Bytes moved by the copies involved (0 when not a copy finding).
    pub bytes: i64,
    /// What to change.
    pub fix: String,
}

/// One occurrence, before aggregation.
#[derive(Clone, Debug)]
pub struct Occurrence {
    /// Kind.
    pub kind: FindingKind,
    /// What (see [`Finding::what`]).
    pub what: String,
    /// GPU ordinal, for device-side findings.
    pub device: Option<i64>,
    /// Where.
    pub location: Location,
    /// Time lost, ps.
    pub time_lost_ps: i64,
    /// Bytes.
    pub bytes: i64,
    /// Fix.
    pub fix: String,
}

/// What makes two occurrences one finding: kind, what, device, op, stack.
type FindingKey = (FindingKind, String, Option<i64>, (Option<String>, Vec<String>));

/// Aggregates occurrences by (kind, what, device, op, stack) into findings of `host`,
/// ranked by time lost (then count, kind, what).
pub fn aggregate(occurrences: Vec<Occurrence>, host: &str, steps: u64) -> Vec<Finding> {
    let mut index: HashMap<FindingKey, usize> = HashMap::new();
    let mut findings: Vec<Finding> = Vec::new();
    for occurrence in occurrences {
        // The thread is not part of the key: the same op on two threads is one finding.
        let place = (occurrence.location.op.clone(), occurrence.location.stack.clone());
        let key = (occurrence.kind, occurrence.what.clone(), occurrence.device, place);
        match index.get(&key) {
            Some(&i) => {
                let finding = &mut findings[i];
                finding.count += 1;
                finding.time_lost_ps += occurrence.time_lost_ps;
                finding.bytes += occurrence.bytes;
            }
            None => {
                index.insert(key, findings.len());
                findings.push(Finding {
                    kind: occurrence.kind,
                    what: occurrence.what,
                    host: host.to_string(),
                    device: occurrence.device,
                    location: occurrence.location,
                    count: 1,
                    time_lost_ps: occurrence.time_lost_ps,
                    time_lost_per_step_ps: None,
                    bytes: occurrence.bytes,
                    fix: occurrence.fix,
                });
            }
        }
    }
    for finding in &mut findings {
        finding.time_lost_per_step_ps = per_step(finding.time_lost_ps, steps);
    }
    rank(&mut findings);
    findings
}

/// `total_ps` divided by `steps` (`None` when there are no steps).
pub fn per_step(total_ps: i64, steps: u64) -> Option<i64> {
    (steps > 0).then(|| total_ps / steps as i64)
}

/// Sorts findings by time lost, most first (ties: more occurrences, then kind, what).
pub fn rank(findings: &mut [Finding]) {
    findings.sort_by(|a, b| {
        b.time_lost_ps
            .cmp(&a.time_lost_ps)
            .then(b.count.cmp(&a.count))
            .then(a.kind.cmp(&b.kind))
            .then(a.what.cmp(&b.what))
            .then(a.host.cmp(&b.host))
    });
}
