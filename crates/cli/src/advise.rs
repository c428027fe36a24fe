//! `mlprof advise PATH`: every tool run on the profile, and the problems they show
//! listed most time lost first, each with its evidence and what to change
//! (`mlprof_analysis::advise`); as numbered findings for people or as the JSON schema
//! documented there.

use std::fmt::Write;
use std::path::PathBuf;
use std::time::Instant;

use clap::{Args, ValueEnum};
use mlprof_analysis::advise::{self, Advice, CheckStatus, Finding};
use mlprof_model::{Session, human};
use serde::Serialize;

use crate::{Failure, report_view, select};

/// Arguments of `mlprof advise`.
#[derive(Args)]
pub struct AdviseArgs {
    /// The input (any path `info` accepts).
    path: PathBuf,
    /// Host to advise on, or `all` (default: all hosts together, as `analyze`).
    #[arg(long)]
    host: Option<String>,
    /// Session (default: the newest).
    #[arg(long)]
    session: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = AdviseFormat::Table)]
    format: AdviseFormat,
}

/// How `advise` prints.
#[derive(Clone, Copy, ValueEnum)]
enum AdviseFormat {
    /// Numbered findings with severity, time lost, evidence and fixes, then the checks.
    Table,
    /// The advice as JSON (schema in `mlprof_analysis::advise`; times in ps).
    Json,
}

/// The JSON document: the session and hosts, then the advice's fields.
#[derive(Serialize)]
struct AdviceDocument<'a> {
    session: &'a str,
    hosts: Vec<&'a str>,
    #[serde(flatten)]
    advice: &'a Advice,
}

/// Text lines are wrapped at this width.
const WIDTH: usize = 100;

/// Runs `mlprof advise` and prints the result.
pub fn run(args: AdviseArgs, verbose: bool) -> Result<(), Failure> {
    let sessions = crate::load(&args.path, verbose)?;
    let started = Instant::now();
    let text = advise_text(&sessions, args.session.as_deref(), args.host.as_deref(), args.format)?;
    if verbose {
        eprintln!("advised in {:.3} s", started.elapsed().as_secs_f64());
    }
    crate::write_stdout(&text)
}

/// The advice for the chosen session and hosts, rendered.
fn advise_text(
    sessions: &[Session],
    session: Option<&str>,
    host: Option<&str>,
    format: AdviseFormat,
) -> Result<String, Failure> {
    let session = select::session(sessions, session)?;
    let hosts = select::analysable_hosts(session, host.filter(|h| *h != "all"))?;
    let advice = advise::advise(&advise::results::collect(&hosts));
    let host_names: Vec<&str> = hosts.iter().map(|h| h.name.as_str()).collect();
    match format {
        AdviseFormat::Json => {
            report_view::render_json(&AdviceDocument { session: &session.name, hosts: host_names, advice: &advice })
        }
        AdviseFormat::Table => Ok(render_text(&session.name, &host_names, &advice)),
    }
}

/// The advice for people: a header, the numbered findings, then every rule's check.
fn render_text(session: &str, hosts: &[&str], advice: &Advice) -> String {
    let mut out = String::from("== advise ==\n");
    let framework = serde_json::to_value(advice.framework).ok();
    let framework = framework.as_ref().and_then(|v| v.as_str()).unwrap_or("unknown");
    let steps = match advice.step_time_ps {
        Some(ps) => {
            format!("{}, mean step time {}", human::counted(advice.steps, "step", "steps"), human::duration(ps))
        }
        None => "no steps found, so no time lost per step".to_string(),
    };
    wrap(&mut out, "", &format!("Session {session}, hosts {} ({framework}); {steps}.", hosts.join(", ")));
    if advice.findings.is_empty() {
        wrap(
            &mut out,
            "",
            "Nothing to advise: no rule found a problem in this profile (each rule's check is listed below).",
        );
    } else {
        wrap(
            &mut out,
            "",
            "Most time lost per step first. Findings can describe the same time (an idle device while the host \
             runs Python), so rank them, do not add them up.",
        );
        for finding in &advice.findings {
            out.push('\n');
            render_finding(&mut out, finding);
        }
    }
    let _ = writeln!(out, "\n## Checks");
    let width = advice.checks.iter().map(|c| c.rule.len()).max().unwrap_or(0);
    for check in &advice.checks {
        let status = match check.status {
            CheckStatus::Found => "found",
            CheckStatus::Clear => "clear",
            CheckStatus::NotApplicable => "n/a",
        };
        let head = format!("{:<width$}  {status:<5}  ", check.rule);
        let indent = " ".repeat(head.len());
        wrap_first(&mut out, &head, &indent, &check.detail);
    }
    out
}

fn render_finding(out: &mut String, finding: &Finding) {
    let head = format!("{}. [{}] ", finding.rank, finding.severity.label());
    let indent = "   ";
    wrap_first(out, &head, indent, &finding.title);
    let lost = match (finding.time_lost_per_step_ps, finding.step_time_percent) {
        (Some(ps), Some(percent)) => {
            format!("{} per step ({} of the step time)", human::duration(ps), human::percent(percent))
        }
        (Some(ps), None) => format!("{} per step", human::duration(ps)),
        (None, _) => match finding.time_lost_total_ps {
            Some(ps) => format!("{} over the whole profile (no steps to divide by)", human::duration(ps)),
            None => "not estimated".to_string(),
        },
    };
    wrap(out, indent, &format!("Time lost: {lost} — {}.", finding.estimate));
    let _ = writeln!(out, "{indent}Evidence:");
    let bullet = format!("{indent}  - ");
    let hanging = format!("{indent}    ");
    for evidence in &finding.evidence {
        wrap_first(out, &bullet, &hanging, &format!("{}: {}", evidence.tool, evidence.text));
    }
    let _ = writeln!(out, "{indent}Fix:");
    for fix in &finding.fixes {
        wrap_first(out, &bullet, &hanging, fix);
    }
}

/// `text` wrapped at [`WIDTH`], every line starting with `indent`.
fn wrap(out: &mut String, indent: &str, text: &str) {
    wrap_first(out, indent, indent, text);
}

/// `text` wrapped at [`WIDTH`]: the first line starts with `first`, the others with
/// `rest`. Words longer than a line stay whole.
fn wrap_first(out: &mut String, first: &str, rest: &str, text: &str) {
    let mut line = String::from(first);
    let mut empty = true;
    for word in text.split_whitespace() {
        if !empty && line.chars().count() + 1 + word.chars().count() > WIDTH {
            let _ = writeln!(out, "{line}");
            line = String::from(rest);
            empty = true;
        }
        if !empty {
            line.push(' ');
        }
        line.push_str(word);
        empty = false;
    }
    let _ = writeln!(out, "{line}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_text_wraps_with_a_hanging_indent() {
        let mut out = String::new();
        let text = "word ".repeat(40);
        wrap_first(&mut out, "1. ", "   ", &text);
        let lines: Vec<&str> = out.lines().collect();
        assert!(lines.len() > 1);
        assert!(lines[0].starts_with("1. word"));
        assert!(lines[1].starts_with("   word"));
        assert!(lines.iter().all(|l| l.chars().count() <= WIDTH));
    }
}
