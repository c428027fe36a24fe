//! What a tool is, as data: its name and label, the options it takes (with their
//! defaults, kinds and help), the outputs it has and when a profile has data for it.
//! The CLI builds its checks and the web UI its selector and option controls from
//! these specs, so neither names a tool or an option default itself.

use serde::Serialize;

/// One tool, described for the views.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct ToolSpec {
    /// The name the CLI (`--tool`) and the API (`tool=`) take; XProf's name for XProf's tools.
    pub name: &'static str,
    /// The name a page shows.
    pub label: &'static str,
    /// What the tool answers, in one sentence.
    pub summary: &'static str,
    /// One of XProf's tools: run by `--tool all`, written by `--format xprof-json`, and
    /// its `--format json` result sits under `tools.NAME` in one document with the others.
    pub xprof: bool,
    /// The options the tool takes, in the order a page shows them.
    pub options: &'static [OptionSpec],
    /// The outputs the tool has.
    pub outputs: &'static [Output],
    /// When the main table cannot be sorted by `--sort`/`sort=`, why and what to use
    /// instead (the end of the refusal: `(its rows are a tree); use --order-by`).
    #[serde(skip)]
    pub unsortable: Option<&'static str>,
    /// When a profile has data for the tool.
    #[serde(skip)]
    pub availability: Availability,
    /// Whether `mlprof serve` offers the tool.
    pub served: bool,
}

/// An output a tool can have.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Output {
    /// A report for people: sections of notes and tables (`table`), whose main table
    /// exports as CSV (`csv`).
    Report,
    /// mlprof's typed result as JSON (`json`).
    Json,
    /// What XProf's tool endpoint answers (`xprof-json`).
    XprofJson,
    /// One CSV per analysis with HTA's columns (`hta-csv`).
    HtaCsv,
    /// The tool is a page of its own that reads its data through its own endpoints
    /// (the trace viewer).
    Page,
}

/// When a profile has data for a tool (the `tools` of `/api/runs`; the rule is in
/// crates/web/API.md).
#[derive(Clone, Copy, Debug)]
pub enum Availability {
    /// Every profile.
    Always,
    /// Profiles with events on a GPU plane.
    GpuEvents,
    /// PyTorch (Kineto) traces with events on a GPU plane.
    KinetoGpuEvents,
    /// Profiles whose host plane has an event named as `wanted` accepts.
    HostEvents(fn(&str) -> bool),
    /// Profiles with an allocator trace of some record (memory snapshots), and those
    /// whose host plane has an event named as `wanted` accepts.
    AllocatorRecords(fn(&str) -> bool),
    /// Profiles with a plane of this name.
    Plane(&'static str),
    /// Never listed by `mlprof serve` (a CLI-only tool).
    Never,
}

/// One option of a tool.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct OptionSpec {
    /// The option's name in the API's query string (`gap_threshold`); the CLI's flag is
    /// the same with `-` for `_` (`--gap-threshold`).
    pub key: &'static str,
    /// The name a page shows.
    pub label: &'static str,
    /// What values it takes.
    pub kind: OptionKind,
    /// The value used when none is given, as it would be typed (`100us`); empty when
    /// the default is "none" or "everything".
    pub default: &'static str,
    /// What the option does, in one or two sentences.
    pub help: &'static str,
    /// The field of the tool's JSON result (at its top level or one object down) that
    /// says which value was in effect: ps for a duration, a sentence for a choice;
    /// empty when the result does not say.
    pub in_effect: &'static str,
    /// For a sentence in `in_effect`: the words after which it names the value
    /// (`Breakdown: `).
    pub in_effect_after: &'static str,
    /// The source formats (`xspace`, `kineto`) whose runs the option changes; empty:
    /// every run.
    pub sources: &'static [&'static str],
}

/// The values an option takes.
#[derive(Clone, Copy, Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum OptionKind {
    /// One of a few values.
    Choice {
        /// The values with the names a page shows.
        choices: &'static [Choice],
    },
    /// A duration: a number and its unit (`50us`, `1.5ms`; only 0 goes without).
    Duration,
    /// A comma-separated list of some of these values (none given: all).
    List {
        /// The values.
        values: &'static [&'static str],
    },
    /// A whole number (`min` at least).
    Integer {
        /// The smallest value allowed.
        min: i64,
    },
    /// A number (not negative).
    Number,
    /// Comma-separated regular expressions, each matching a whole name.
    Regexes,
    /// `true` or `false`.
    Switch,
    /// Free text the tool checks (a list of column names, a column name).
    Text,
}

/// One value of a [`OptionKind::Choice`].
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Choice {
    /// The value as typed.
    pub value: &'static str,
    /// The name a page shows.
    pub label: &'static str,
}

impl ToolSpec {
    /// Whether the tool has `output`.
    pub fn has(&self, output: Output) -> bool {
        self.outputs.contains(&output)
    }

    /// The option named `key` (`gap_threshold`), if the tool takes it.
    pub fn option(&self, key: &str) -> Option<&'static OptionSpec> {
        self.options.iter().find(|option| option.key == key)
    }
}
