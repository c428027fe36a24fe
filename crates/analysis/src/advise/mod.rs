//! `advise`: one report over every tool's result that lists the performance problems
//! found, most time lost per step first, each with the numbers that show it (cited
//! from the tool that computed them) and what to change — the TensorFlow Profiler
//! guide's best-practice list, checked on any profile mlprof reads.
//!
//! The one design decision to know: advice never measures anything itself. [`results`]
//! runs the tools once ([`results::collect`]); each rule in [`rules`] is a small
//! function from those [`ToolResults`] to an [`Outcome`] — findings, or why it found
//! nothing, or why it does not apply — so every number a finding shows is a tool's
//! number ([`Cited`] names the tool field it was copied from) and every rule can be
//! tested on crafted tool results.
//!
//! # Time lost
//!
//! Each finding estimates the time lost per step (what removing the problem would give
//! back at most); [`Finding::estimate`] says how. The share of the step time is that
//! divided by the mean step time of the step-time breakdown. Findings can describe the
//! same wall time (a GPU idle while the host runs Python is both "device idle" and
//! "Python between steps"), so rank them, do not add them up. Rules that measure over
//! the whole profile also give the total ([`Finding::time_lost_total_ps`]), which ranks
//! the findings of profiles without steps. Findings without an estimate (memory) come
//! last, by severity.
//!
//! # JSON schema (`mlprof advise --format json`, version [`SCHEMA_VERSION`])
//!
//! ```text
//! { "session": str, "hosts": [str],            (added by the CLI)
//!   "schema_version": 1, "framework": "tensorflow" | "jax" | "pytorch" | "cuda" | "python",
//!   "steps": int, "step_time_ps": int | null,
//!   "findings": [ { "rank": int (1 = most time lost), "rule": str, "severity": "high" | "medium" | "low",
//!                   "title": str, "time_lost_per_step_ps": int | null, "step_time_percent": float | null,
//!                   "time_lost_total_ps": int | null, "estimate": str,
//!                   "evidence": [ { "tool": str, "text": str, "cited": [ { "field": str, "value": number } ] } ],
//!                   "fixes": [str] } ],
//!   "checks": [ { "rule": str, "status": "found" | "clear" | "not_applicable", "detail": str,
//!                 "cited": [ { "field": str, "value": number } ] } ] }
//! ```
//! `cited[].field` is the path of the number in that tool's `mlprof analyze --format
//! json` result (`bottleneck.input_percent`, `bottlenecks[0].iterator_self_time_ps`);
//! `value` is that number unchanged. Fields are only ever added to this schema.

pub mod results;
pub mod rules;

use serde::Serialize;

pub use results::{DeviceMemory, Framework, ToolResults};

/// Version of the JSON schema in the module docs.
pub const SCHEMA_VERSION: u32 = 1;

/// How bad a finding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// Fix this first: a large share of the step time, or a job at risk of failing.
    High,
    /// Worth fixing.
    Medium,
    /// Small, or a risk rather than a cost.
    Low,
}

impl Severity {
    /// The word shown in tables.
    pub fn label(self) -> &'static str {
        match self {
            Severity::High => "high",
            Severity::Medium => "medium",
            Severity::Low => "low",
        }
    }

    /// `high` at or above `high_percent` of the step time, `medium` at or above
    /// `medium_percent`, else `low`.
    pub fn by_share(percent: f64, medium_percent: f64, high_percent: f64) -> Severity {
        if percent >= high_percent {
            Severity::High
        } else if percent >= medium_percent {
            Severity::Medium
        } else {
            Severity::Low
        }
    }
}

/// One number a finding shows, as the tool computed it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Cited {
    /// Where the number is in the tool's JSON result (`bottleneck.input_percent`).
    pub field: String,
    /// The number, unchanged (ps, ms, %, bytes or counts, as the field says).
    pub value: f64,
}

impl Cited {
    /// `value` of the tool field `field`.
    pub fn new(field: impl Into<String>, value: f64) -> Cited {
        Cited { field: field.into(), value }
    }
}

/// What a tool showed, in one sentence, with the numbers it rests on.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Evidence {
    /// The tool whose result is cited (`input_pipeline_analyzer`, `transfers`, …).
    pub tool: &'static str,
    /// The sentence people read.
    pub text: String,
    /// The numbers in it.
    pub cited: Vec<Cited>,
}

impl Evidence {
    /// A sentence from `tool` without numbers to cite.
    pub fn new(tool: &'static str, text: impl Into<String>) -> Evidence {
        Evidence { tool, text: text.into(), cited: Vec::new() }
    }

    /// Adds a cited number.
    pub fn cite(mut self, field: impl Into<String>, value: f64) -> Evidence {
        self.cited.push(Cited::new(field, value));
        self
    }
}

/// One problem found.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Finding {
    /// Position after ranking, 1 = most time lost (set by [`advise`]).
    pub rank: usize,
    /// The rule that found it (a name from [`rules::RULES`]).
    pub rule: &'static str,
    /// How bad it is.
    pub severity: Severity,
    /// One line: what is wrong, with the main number.
    pub title: String,
    /// Estimated time lost per step, ps (`None`: no estimate, e.g. memory risks, or no
    /// steps in the profile).
    pub time_lost_per_step_ps: Option<i64>,
    /// That time as a share of the mean step time, % (set by [`advise`]).
    pub step_time_percent: Option<f64>,
    /// Estimated time lost over the whole profile, ps, where the rule measures it over
    /// the profile rather than per step (`None` otherwise).
    pub time_lost_total_ps: Option<i64>,
    /// How the time lost was estimated.
    pub estimate: String,
    /// What the tools showed.
    pub evidence: Vec<Evidence>,
    /// What to change, most effective first.
    pub fixes: Vec<String>,
}

impl Finding {
    /// A finding of `rule` with no evidence or fixes yet.
    pub fn new(rule: &'static str, severity: Severity, title: impl Into<String>) -> Finding {
        Finding {
            rank: 0,
            rule,
            severity,
            title: title.into(),
            time_lost_per_step_ps: None,
            step_time_percent: None,
            time_lost_total_ps: None,
            estimate: String::new(),
            evidence: Vec::new(),
            fixes: Vec::new(),
        }
    }

    /// Sets the time lost per step (ps) and how it was estimated.
    pub fn time_lost(mut self, per_step_ps: Option<i64>, estimate: impl Into<String>) -> Finding {
        self.time_lost_per_step_ps = per_step_ps;
        self.estimate = estimate.into();
        self
    }

    /// Sets the time lost over the whole profile, ps.
    pub fn total(mut self, total_ps: i64) -> Finding {
        self.time_lost_total_ps = Some(total_ps);
        self
    }

    /// Adds evidence.
    pub fn evidence(mut self, evidence: Evidence) -> Finding {
        self.evidence.push(evidence);
        self
    }

    /// Adds fixes.
    pub fn fixes<S: Into<String>>(mut self, fixes: impl IntoIterator<Item = S>) -> Finding {
        self.fixes.extend(fixes.into_iter().map(Into::into));
        self
    }
}

/// What one rule concluded.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// Problems found (at least one).
    Found(Vec<Finding>),
    /// The rule ran and found nothing; the evidence says what it measured.
    Clear(Evidence),
    /// The profile lacks what the rule reads; the sentence says what.
    NotApplicable(String),
}

/// Whether a rule found something.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckStatus {
    /// It found problems (listed in [`Advice::findings`]).
    Found,
    /// It found nothing.
    Clear,
    /// The profile lacks what it reads.
    NotApplicable,
}

/// One rule's conclusion, for the list of what was checked.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Check {
    /// Rule name.
    pub rule: &'static str,
    /// What it concluded.
    pub status: CheckStatus,
    /// Why (for `found`: how many findings).
    pub detail: String,
    /// The numbers the conclusion rests on (for `clear`).
    pub cited: Vec<Cited>,
}

/// The advice for one profile.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Advice {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The framework the profile comes from (it decides how fixes are worded).
    pub framework: Framework,
    /// Steps in the step-time breakdown.
    pub steps: usize,
    /// Mean step time, ps (`None` without steps).
    pub step_time_ps: Option<i64>,
    /// The problems found, ranked (most time lost per step first).
    pub findings: Vec<Finding>,
    /// Every rule's conclusion, in [`rules::RULES`] order.
    pub checks: Vec<Check>,
}

/// Runs every rule on `results` and ranks the findings.
pub fn advise(results: &ToolResults) -> Advice {
    let step_time_ps = results.mean_step_ps();
    let mut findings = Vec::new();
    let mut checks = Vec::new();
    for rule in rules::RULES {
        let (status, detail, cited) = match (rule.run)(results) {
            Outcome::Found(found) if !found.is_empty() => {
                let detail = match found.len() {
                    1 => "1 finding".to_string(),
                    n => format!("{n} findings"),
                };
                findings.extend(found);
                (CheckStatus::Found, detail, Vec::new())
            }
            Outcome::Found(_) => (CheckStatus::Clear, "nothing found".to_string(), Vec::new()),
            Outcome::Clear(evidence) => (CheckStatus::Clear, evidence.text, evidence.cited),
            Outcome::NotApplicable(why) => (CheckStatus::NotApplicable, why, Vec::new()),
        };
        checks.push(Check { rule: rule.name, status, detail, cited });
    }
    for finding in &mut findings {
        finding.step_time_percent = match (finding.time_lost_per_step_ps, step_time_ps) {
            (Some(lost), Some(step)) if step > 0 => Some(100.0 * lost as f64 / step as f64),
            _ => None,
        };
    }
    rank(&mut findings);
    Advice {
        schema_version: SCHEMA_VERSION,
        framework: results.framework,
        steps: results.steps().len(),
        step_time_ps,
        findings,
        checks,
    }
}

/// Most time lost per step first; then findings with only a total over the profile,
/// most first; then those without an estimate; ties by severity, then in rule order
/// (the sort is stable).
fn rank(findings: &mut [Finding]) {
    let key = |f: &Finding| match (f.time_lost_per_step_ps, f.time_lost_total_ps) {
        (Some(per_step), _) => (2, per_step),
        (None, Some(total)) => (1, total),
        (None, None) => (0, 0),
    };
    findings.sort_by(|a, b| key(b).cmp(&key(a)).then(a.severity.cmp(&b.severity)));
    for (i, finding) in findings.iter_mut().enumerate() {
        finding.rank = i + 1;
    }
}

/// Milliseconds (as the step-time breakdown gives them) in picoseconds.
pub fn ms_to_ps(ms: f64) -> i64 {
    (ms * 1e9).round() as i64
}

/// Picoseconds as milliseconds, for sentences.
pub fn ps_to_ms(ps: i64) -> f64 {
    ps as f64 / 1e9
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn findings_rank_by_time_lost_then_severity_and_get_shares() {
        let mut results = ToolResults::default();
        results.overview.steps.step_time_ms = crate::input_pipeline::Summary { average: 10.0, ..Default::default() };
        results.overview.steps.steps = vec![Default::default()];
        assert_eq!(results.mean_step_ps(), Some(10_000_000_000));
        let mut findings = vec![
            Finding::new("memory", Severity::High, "no time"),
            Finding::new("t", Severity::Medium, "total only").total(1_000),
            Finding::new("a", Severity::Low, "small").time_lost(Some(1), ""),
            Finding::new("b", Severity::Medium, "large").time_lost(Some(5), ""),
        ];
        rank(&mut findings);
        let order: Vec<&str> = findings.iter().map(|f| f.title.as_str()).collect();
        assert_eq!(order, ["large", "small", "total only", "no time"]);
        assert_eq!(findings[0].rank, 1);
        assert_eq!(findings[3].rank, 4);
    }

    #[test]
    fn empty_results_give_no_findings_and_every_rule_a_check() {
        let advice = advise(&ToolResults::default());
        assert!(advice.findings.is_empty(), "{:?}", advice.findings);
        assert_eq!(advice.checks.len(), rules::RULES.len());
        assert!(advice.checks.iter().all(|c| c.status != CheckStatus::Found));
        assert_eq!(advice.step_time_ps, None);
    }

    #[test]
    fn severity_by_share_uses_both_thresholds() {
        assert_eq!(Severity::by_share(25.0, 5.0, 20.0), Severity::High);
        assert_eq!(Severity::by_share(5.0, 5.0, 20.0), Severity::Medium);
        assert_eq!(Severity::by_share(4.9, 5.0, 20.0), Severity::Low);
    }
}
