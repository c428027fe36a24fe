//! Renders the inventory (`mlprof info`) as a tree for people or as JSON for scripts.

use std::fmt::Write;

use mlprof_analysis::inventory::{Inventory, LineInventory, PlaneInventory, SpanPs};
use mlprof_model::human;

/// The JSON document (schema in the README).
pub fn render_json(inventory: &Inventory) -> String {
    let mut text = serde_json::to_string_pretty(inventory).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"));
    text.push('\n');
    text
}

fn span_text(span: Option<SpanPs>) -> String {
    match span {
        Some(s) => format!("{} (from {} to {})", human::duration(s.duration_ps), ms(s.start_ps), ms(s.end_ps)),
        None => "no timed events".to_string(),
    }
}

fn ms(ps: i64) -> String {
    format!("{:.3} ms", ps as f64 / 1e9)
}

/// The human-readable tree.
pub fn render_table(inventory: &Inventory) -> String {
    let mut out = String::new();
    for session in &inventory.sessions {
        let _ = writeln!(
            out,
            "session {}  ({} {}, {} events)",
            session.name,
            session.hosts.len(),
            if session.hosts.len() == 1 { "host" } else { "hosts" },
            human::count(session.events as f64)
        );
        let _ = writeln!(out, "  path {}", session.path);
        for host in &session.hosts {
            let rank = host.rank.map(|r| format!(", rank {r}")).unwrap_or_default();
            let _ = writeln!(
                out,
                "  host {}  [{}, {}{rank}]  {} events",
                host.name,
                host.format.name(),
                human::bytes(host.bytes as f64),
                human::count(host.events as f64)
            );
            let _ = writeln!(out, "    file {}", host.path);
            let _ = writeln!(out, "    span {}", span_text(host.span));
            if let Some(start) = host.profile_start_ns {
                let stop = host.profile_stop_ns.map(|s| format!(", stop {s}")).unwrap_or_default();
                let _ = writeln!(out, "    profile start {start} ns since the Unix epoch{stop}");
            }
            if !host.hostnames.is_empty() {
                let _ = writeln!(out, "    hostnames {}", host.hostnames.join(", "));
            }
            for e in &host.errors {
                let _ = writeln!(out, "    profiler error: {e}");
            }
            for w in &host.warnings {
                let _ = writeln!(out, "    profiler warning: {w}");
            }
            for plane in &host.planes {
                render_plane(&mut out, plane);
            }
        }
    }
    out
}

fn render_plane(out: &mut String, plane: &PlaneInventory) {
    let _ = writeln!(
        out,
        "    plane {} (id {}): {} lines, {} events, {} event kinds, {} stat keys",
        plane.name,
        plane.id,
        plane.lines.len(),
        human::count(plane.events as f64),
        plane.event_metadata,
        plane.stat_metadata
    );
    if plane.events > 0 {
        let _ = writeln!(out, "      span {}", span_text(plane.span));
    }
    if !plane.device_properties.is_empty() {
        let props: Vec<String> = plane.device_properties.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let _ = writeln!(out, "      device {}", props.join(", "));
    } else if !plane.plane_stats.is_empty() {
        let props: Vec<String> = plane.plane_stats.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let _ = writeln!(out, "      stats {}", props.join(", "));
    }
    if !plane.well_known_stats.is_empty() {
        let _ = writeln!(out, "      well-known stats: {}", plane.well_known_stats.join(", "));
    }
    if plane.lines.is_empty() {
        return;
    }
    let width = plane.lines.iter().map(|l| shown(l).chars().count()).max().unwrap_or(4).clamp(4, 60);
    let _ = writeln!(out, "      {:<width$}  {:>10}  span", "line", "events");
    for line in &plane.lines {
        let name: String = shown(line).chars().take(60).collect();
        let span = line.span.map_or_else(|| "-".to_string(), |s| human::duration(s.duration_ps));
        let _ = writeln!(out, "      {name:<width$}  {:>10}  {span}", line.events);
    }
}

fn shown(line: &LineInventory) -> &str {
    if line.display_name.is_empty() { &line.name } else { &line.display_name }
}
