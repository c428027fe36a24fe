//! Every tool option once: its spec (name, kind, default, help) and how its text is
//! read into [`Options`], the typed values the tools run with. The CLI and the web
//! API both hand over `(name, text)` pairs; the messages name the option as the caller
//! spells it (`--gap-threshold`, `gap_threshold`).
//!
//! The one design decision to know: options compare and hash by the texts they were
//! set from (plus `xprof_compatible`), so they can key a cache; two spellings of one
//! value (`1ms`, `1000us`) are two keys with equal results.

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};

use mlprof_model::duration::parse_duration_ps;

use super::spec::{Choice, OptionKind, OptionSpec};
use crate::gpu::ANALYSES;
use crate::gpu::transfers::TransfersOptions;
use crate::steps::Breakdown;
use crate::tfprof::{self, Regexes, StepSelection, TfprofOptions, View};

/// The spec fields of an option whose result does not say which value it used, on
/// every run.
const NO_EFFECT_SHOWN: OptionSpec = OptionSpec {
    key: "",
    label: "",
    kind: OptionKind::Text,
    default: "",
    help: "",
    in_effect: "",
    in_effect_after: "",
    sources: &[],
};

/// The GPU step-time breakdown of XProf's step tools.
pub const BREAKDOWN: OptionSpec = OptionSpec {
    key: "breakdown",
    label: "Step-time breakdown",
    kind: OptionKind::Choice {
        choices: &[Choice { value: "classic", label: "Classic" }, Choice { value: "xprof", label: "XProf" }],
    },
    default: "classic",
    help: "Classic adds host events (input, kernel launch, host compute) to GPU steps; XProf counts device events only. CPU-only profiles are the same in both.",
    in_effect: "step_source",
    in_effect_after: "Breakdown: ",
    // Kineto steps have one breakdown (each step's span, host and device events by time).
    sources: &["xspace"],
};

/// The transfers diagnosis's gap threshold.
pub const GAP_THRESHOLD: OptionSpec = OptionSpec {
    key: "gap_threshold",
    label: "GPU gap threshold",
    kind: OptionKind::Duration,
    default: "100us",
    help: "Device idle time longer than this is reported as a gap: a number and a unit (ns, us, ms, s); default 100us.",
    in_effect: "gap_threshold_ps",
    ..NO_EFFECT_SHOWN
};

/// HTA's analyses to run.
pub const ANALYSES_OPTION: OptionSpec = OptionSpec {
    key: "analyses",
    label: "Analyses",
    kind: OptionKind::List { values: &ANALYSES },
    default: "",
    help: "The analyses to run, comma-separated (default: all).",
    ..NO_EFFECT_SHOWN
};

/// tfprof's options, in the order its option builder lists them.
pub const TFPROF_OPTIONS: [OptionSpec; 16] = [
    OptionSpec {
        key: "view",
        label: "View",
        kind: OptionKind::Choice {
            choices: &[
                Choice { value: "scope", label: "Scope" },
                Choice { value: "op", label: "Op" },
                Choice { value: "code", label: "Code" },
                Choice { value: "graph", label: "Graph" },
            ],
        },
        default: "scope",
        help: "The name-scope tree, one row per op type, the Python call tree that created the ops, or each op with its inputs.",
        ..NO_EFFECT_SHOWN
    },
    text_option(
        "select",
        "Columns",
        "micros",
        "Columns, comma-separated: micros, accelerator_micros, cpu_micros, occurrence, bytes, peak_bytes, residual_bytes, output_bytes, params, float_ops, device, op_types, input_shapes.",
    ),
    text_option("order_by", "Order by", "name", "Sibling order: name, or a column (larger first)."),
    OptionSpec {
        key: "max_depth",
        label: "Max depth",
        kind: OptionKind::Integer { min: 0 },
        default: "100",
        help: "Show nodes at most this many levels below the start nodes.",
        ..NO_EFFECT_SHOWN
    },
    OptionSpec {
        key: "min_micros",
        label: "Min time (µs)",
        kind: OptionKind::Number,
        default: "0",
        help: "Hide nodes whose total time is below this many microseconds.",
        ..NO_EFFECT_SHOWN
    },
    minimum("min_bytes", "Min bytes", "Hide nodes whose total requested bytes are below this."),
    minimum("min_occurrence", "Min runs", "Hide nodes that ran fewer times than this."),
    minimum("min_float_ops", "Min FLOPs", "Hide nodes with fewer floating-point operations than this."),
    minimum("min_params", "Min parameters", "Hide nodes with fewer parameters than this."),
    regexes("show_name_regexes", "Show names", "Show only nodes whose full name matches one of these regexes."),
    regexes("hide_name_regexes", "Hide names", "Hide nodes whose full name matches one of these regexes."),
    regexes("start_name_regexes", "Start at", "Start the tree at the nodes that match one of these regexes."),
    regexes("trim_name_regexes", "Trim at", "Show nothing below the nodes that match one of these regexes."),
    regexes("account_type_regexes", "Op types", "Account only ops whose type matches one of these regexes."),
    OptionSpec {
        key: "account_displayed_op_only",
        label: "Displayed ops only",
        kind: OptionKind::Switch,
        default: "false",
        help: "Totals add up only the displayed nodes.",
        ..NO_EFFECT_SHOWN
    },
    OptionSpec {
        key: "step",
        label: "Step",
        kind: OptionKind::Integer { min: -1 },
        default: "",
        help: "Only step N (the profile's own step number: `train 5` is 5, `ProfilerStep#551` is 551, as every tool numbers steps), or -1 for the average over the steps (default: the whole profile).",
        ..NO_EFFECT_SHOWN
    },
];

const fn text_option(key: &'static str, label: &'static str, default: &'static str, help: &'static str) -> OptionSpec {
    OptionSpec { key, label, kind: OptionKind::Text, default, help, ..NO_EFFECT_SHOWN }
}

const fn minimum(key: &'static str, label: &'static str, help: &'static str) -> OptionSpec {
    OptionSpec { key, label, kind: OptionKind::Integer { min: i64::MIN }, default: "0", help, ..NO_EFFECT_SHOWN }
}

const fn regexes(key: &'static str, label: &'static str, help: &'static str) -> OptionSpec {
    OptionSpec { key, label, kind: OptionKind::Regexes, default: "", help, ..NO_EFFECT_SHOWN }
}

/// The options a tool runs with, typed; defaults for what is not set.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// The GPU step-time breakdown (`breakdown`).
    pub breakdown: Breakdown,
    /// Compute exactly what XProf computes: no `step_num` step fallback, the `xprof`
    /// breakdown (set for `--format xprof-json`, not an option users type).
    pub xprof_compatible: bool,
    /// The transfers diagnosis's options (`gap_threshold`).
    pub transfers: TransfersOptions,
    /// HTA's analyses to run (`analyses`; empty: all).
    pub gpu_analyses: Vec<&'static str>,
    /// tfprof's options.
    pub tfprof: TfprofOptions,
    /// The text each option was set from, by key.
    given: BTreeMap<&'static str, String>,
}

impl PartialEq for Options {
    fn eq(&self, other: &Options) -> bool {
        self.xprof_compatible == other.xprof_compatible && self.given == other.given
    }
}

impl Eq for Options {}

impl Hash for Options {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.xprof_compatible.hash(state);
        self.given.hash(state);
    }
}

impl Options {
    /// Options that compute exactly what XProf computes (see `xprof_compatible`).
    pub fn xprof_compatible() -> Options {
        Options { xprof_compatible: true, ..Options::default() }
    }

    /// The keys of the options set, in key order.
    pub fn given(&self) -> impl Iterator<Item = (&'static str, &str)> {
        self.given.iter().map(|(key, text)| (*key, text.as_str()))
    }

    /// Reads `text` as the value of `option`; on error, one sentence that names the
    /// option as `spelled` (`--gap-threshold` on the command line, `gap_threshold` in
    /// the API).
    pub fn set(&mut self, option: &OptionSpec, text: &str, spelled: &str) -> Result<(), String> {
        let bad = |e: tfprof::TfprofError| e.to_string();
        let key = option.key;
        match key {
            "breakdown" => {
                self.breakdown = match text {
                    "classic" => Breakdown::Classic,
                    "xprof" => Breakdown::Xprof,
                    other => return Err(format!("{spelled} {other:?}: expected classic or xprof")),
                }
            }
            "gap_threshold" => {
                self.transfers.gap_threshold_ps = parse_duration_ps(text).map_err(|e| format!("{spelled}: {e}"))?
            }
            "analyses" => self.gpu_analyses = gpu_analyses(text)?,
            "view" => {
                self.tfprof.view = match text {
                    "scope" => View::Scope,
                    "op" => View::Op,
                    "code" => View::Code,
                    "graph" => View::Graph,
                    other => return Err(format!("{spelled} {other:?}: expected scope, op, code or graph")),
                }
            }
            "select" => self.tfprof.select = tfprof::parse_select(text).map_err(bad)?,
            "order_by" => self.tfprof.order_by = tfprof::parse_order_by(text).map_err(bad)?,
            "max_depth" => self.tfprof.max_depth = integer(text, spelled)?,
            "min_micros" => self.tfprof.min_micros_ps = micros_ps(text, spelled)?,
            "min_bytes" => self.tfprof.min_bytes = integer(text, spelled)?,
            "min_occurrence" => self.tfprof.min_occurrence = integer(text, spelled)?,
            "min_float_ops" => self.tfprof.min_float_ops = integer(text, spelled)?,
            "min_params" => self.tfprof.min_params = integer(text, spelled)?,
            "show_name_regexes" => self.tfprof.show_name_regexes = regex_list(key, text)?,
            "hide_name_regexes" => self.tfprof.hide_name_regexes = regex_list(key, text)?,
            "start_name_regexes" => self.tfprof.start_name_regexes = regex_list(key, text)?,
            "trim_name_regexes" => self.tfprof.trim_name_regexes = regex_list(key, text)?,
            "account_type_regexes" => self.tfprof.account_type_regexes = regex_list(key, text)?,
            "account_displayed_op_only" => {
                self.tfprof.account_displayed_op_only = match text {
                    "true" => true,
                    "false" => false,
                    other => return Err(format!("{spelled} {other:?}: expected true or false")),
                }
            }
            "step" => self.tfprof.step = step(text, spelled)?,
            _ => return Err(format!("{spelled}: no such option")),
        }
        self.given.insert(key, text.to_string());
        Ok(())
    }
}

/// The analyses named in `list` (comma-separated), checked against [`ANALYSES`].
fn gpu_analyses(list: &str) -> Result<Vec<&'static str>, String> {
    list.split(',')
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .map(|name| {
            ANALYSES
                .iter()
                .copied()
                .find(|known| *known == name)
                .ok_or_else(|| format!("unknown gpu analysis {name:?}; analyses: {}", ANALYSES.join(", ")))
        })
        .collect()
}

fn integer<T: std::str::FromStr>(text: &str, spelled: &str) -> Result<T, String> {
    text.trim().parse().map_err(|_| format!("{spelled}: {text:?} is not a whole number in range"))
}

fn micros_ps(text: &str, spelled: &str) -> Result<i64, String> {
    let micros: f64 = text.trim().parse().map_err(|_| format!("{spelled}: {text:?} is not a number"))?;
    if !micros.is_finite() || micros < 0.0 {
        return Err(format!("{spelled}: {micros} is not a number of microseconds ≥ 0"));
    }
    Ok((micros * 1e6).round().min(i64::MAX as f64) as i64)
}

fn regex_list(key: &str, list: &str) -> Result<Regexes, String> {
    Regexes::parse(&key.replace('_', "-"), list).map_err(|e| e.to_string())
}

fn step(text: &str, spelled: &str) -> Result<StepSelection, String> {
    match integer::<i64>(text, spelled)? {
        -1 => Ok(StepSelection::Average),
        step if step < 0 => Err(format!("{spelled} {step}: a step number, or -1 for the average over steps")),
        step => Ok(StepSelection::Step(step)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tfprof_option(key: &str) -> &'static OptionSpec {
        TFPROF_OPTIONS.iter().find(|option| option.key == key).expect("a tfprof option")
    }

    #[test]
    fn texts_become_typed_values_or_one_sentence() {
        let mut options = Options::default();
        options.set(&GAP_THRESHOLD, "1ms", "gap_threshold").expect("a duration");
        assert_eq!(options.transfers.gap_threshold_ps, 1_000_000_000);
        let bad = options.set(&GAP_THRESHOLD, "bogus", "--gap-threshold").expect_err("not a duration");
        assert!(bad.starts_with("--gap-threshold: ") && bad.contains("\"bogus\""), "{bad}");
        assert_eq!(
            options.set(&BREAKDOWN, "fast", "breakdown"),
            Err("breakdown \"fast\": expected classic or xprof".into())
        );
        options.set(tfprof_option("step"), "-1", "--step").expect("the average");
        assert_eq!(options.tfprof.step, StepSelection::Average);
        assert!(options.set(tfprof_option("step"), "-2", "--step").is_err_and(|e| e.starts_with("--step -2: ")));
        assert!(options.set(tfprof_option("min_micros"), "-1", "--min-micros").is_err());
        assert!(options.set(&ANALYSES_OPTION, "temporal", "--analyses").is_err_and(|e| e.contains("\"temporal\"")));
    }

    #[test]
    fn options_compare_by_what_was_set() {
        let mut a = Options::default();
        let mut b = Options::default();
        assert_eq!(a, b);
        a.set(&GAP_THRESHOLD, "1ms", "gap_threshold").expect("a duration");
        assert_ne!(a, b);
        b.set(&GAP_THRESHOLD, "1ms", "gap_threshold").expect("a duration");
        assert_eq!(a, b);
        assert_ne!(a, Options { xprof_compatible: true, ..b.clone() });
    }
}
