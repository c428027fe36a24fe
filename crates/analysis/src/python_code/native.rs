//! The `python` tool's native section: the native (C/C++) functions threads were found
//! running in, by self samples, from the `/host:native` plane `mlprof run` and `mlprof
//! attach` record with `perf_event_open`.
//!
//! Runs on that plane nest as frames do, so a run's self samples are its samples less
//! its children's; the innermost function of a sample is always exact (callers are
//! found through frame pointers only), which is why this section counts self samples.

use std::collections::HashMap;

use mlprof_model::names::sampled as names;
use mlprof_model::{Host, Line, Plane};
use serde::Serialize;

use super::{PythonCode, counts, frame, nests, percent, sample_keys};
use crate::report::{Cell, Section, Table};

/// Native functions shown in the report (the JSON has them all).
const SHOWN: usize = 100;
/// Function names longer than this (characters) are shortened in the report, as HTA
/// shortens kernel names (the JSON has them whole).
const SHOWN_CHARS: usize = 80;

/// One native function.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct NativeRow {
    /// The function (demangled), or `module+0xADDRESS` where no symbol names it.
    pub function: String,
    /// Its module's file name (`libcrypto.so.3`).
    pub module: String,
    /// Its module's path.
    pub path: String,
    /// Samples with this function innermost.
    pub self_samples: u64,
}

/// A run on the walk down one line: its row, span, samples and its children's.
struct Open {
    row: usize,
    span: (i64, i64),
    samples: u64,
    children: u64,
}

/// Every native sample of `hosts` and the functions they were in, most self samples
/// first.
pub(super) fn leaves(hosts: &[&Host]) -> (u64, Vec<NativeRow>) {
    let mut rows: Vec<NativeRow> = Vec::new();
    let mut index: HashMap<(String, String), usize> = HashMap::new();
    let mut total = 0;
    for host in hosts {
        let Some(plane) = host.plane(names::NATIVE_PLANE) else { continue };
        for line in &plane.lines {
            total += walk(plane, line, &mut rows, &mut index);
        }
    }
    rows.sort_by(|a, b| {
        b.self_samples.cmp(&a.self_samples).then_with(|| (&a.path, &a.function).cmp(&(&b.path, &b.function)))
    });
    (total, rows)
}

/// Adds `line`'s self samples to `rows`; its samples.
fn walk(plane: &Plane, line: &Line, rows: &mut Vec<NativeRow>, index: &mut HashMap<(String, String), usize>) -> u64 {
    let keys = sample_keys(plane);
    let mut total = 0;
    let mut stack: Vec<Open> = Vec::new();
    let close = |open: Open, rows: &mut Vec<NativeRow>| {
        if let Some(row) = rows.get_mut(open.row) {
            row.self_samples += open.samples.saturating_sub(open.children);
        }
    };
    for event in line.iter() {
        let span = (event.start_ps(), event.end_ps());
        while let Some(top) = stack.pop_if(|top| !nests(top.span, span.0, span.1)) {
            close(top, rows);
        }
        let Some(metadata) = plane.metadata_of(&event) else { continue };
        let [samples, ..] = counts(plane, &keys, &event);
        match stack.last_mut() {
            Some(parent) => parent.children += samples,
            None => total += samples,
        }
        let frame = frame(plane, metadata);
        let row = *index.entry((frame.function.clone(), frame.file.clone())).or_insert_with(|| {
            rows.push(NativeRow {
                function: frame.function,
                module: frame.short_file,
                path: frame.file,
                self_samples: 0,
            });
            rows.len() - 1
        });
        stack.push(Open { row, span, samples, children: 0 });
    }
    while let Some(open) = stack.pop() {
        close(open, rows);
    }
    total
}

impl PythonCode {
    /// The native functions for people, where native stacks were sampled.
    pub(super) fn native_section(&self) -> Option<Section> {
        if self.native_samples == 0 {
            return None;
        }
        let mut table = Table::new(["Function", "Module", "Self samples", "Self (% of native samples)"]);
        let shown = self.native.iter().filter(|r| r.self_samples > 0);
        for row in shown.clone().take(SHOWN) {
            table.push(vec![
                Cell::text(shown_name(&row.function)),
                Cell::text(&row.module),
                Cell::Int(row.self_samples as i64),
                Cell::num(percent(row.self_samples, self.native_samples), 1),
            ]);
        }
        let mut section = Section::new("Native code by self samples").note(format!(
            "{} native samples, taken by the kernel every {} of a thread's CPU time (every thread of the job, \
             Python or not; user space only), counted where each was innermost. Callers are found through frame \
             pointers only, so a stack may stop early; a function without a symbol is module+0xADDRESS.",
            self.native_samples,
            mlprof_model::human::duration_ms(self.sample_interval_ms)
        ));
        let more = shown.count().saturating_sub(SHOWN);
        if more > 0 {
            section = section.note(format!("{more} more functions are in the JSON output."));
        }
        Some(section.with_table(table))
    }
}

/// `function` as the table shows it: without its template and argument lists when
/// long (C++ names run to pages), and at most [`SHOWN_CHARS`] characters.
fn shown_name(function: &str) -> String {
    if function.chars().count() <= SHOWN_CHARS {
        return function.to_string();
    }
    let short = crate::trace_diff::shorten_name(function);
    let mut shown: String = short.chars().take(SHOWN_CHARS).collect();
    if short.chars().count() > SHOWN_CHARS {
        shown.push('…');
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::*;
    use mlprof_model::{PlaneBuilder, SourceFormat, StatValue};

    /// A native plane with one thread's runs: `(function, module, start, end, samples)`,
    /// parents before children.
    fn host(runs: &[(&str, &str, i64, i64, u64)]) -> Host {
        let mut plane = PlaneBuilder::new(1, names::NATIVE_PLANE);
        let samples = plane.stat_key(names::SAMPLES_STAT);
        let mut line = Line::new(8, "worker (pid 7, tid 8)");
        for &(function, module, start, end, n) in runs {
            let metadata = plane.event_metadata(&format!("{function} ({module})"), 0, |p| {
                let keys = [names::FUNCTION_STAT, names::FILE_STAT, names::SHORT_FILE_STAT].map(|k| p.stat_key(k));
                let path = format!("/usr/lib/{module}");
                let values = [function, path.as_str(), module].map(|text| p.metadata_str(text).unwrap());
                keys.into_iter().zip(values).collect()
            });
            line.stats.push(samples, StatValue::Uint(n));
            line.push_event(metadata, start * 1_000_000, (end - start) * 1_000_000);
        }
        plane.push_line(line);
        let mut host = Host::new("h", "", SourceFormat::Xspace);
        host.planes = vec![plane.finish()];
        host
    }

    #[test]
    fn innermost_functions_get_the_samples_their_callees_did_not() {
        // main (10) > deflate (8) > longest_match (5); then main > crc32 (2).
        let h = host(&[
            ("main", "python3.11", 0, 100, 10),
            ("deflate", "libz.so.1", 0, 80, 8),
            ("longest_match", "libz.so.1", 10, 60, 5),
            ("crc32", "libz.so.1", 80, 100, 2),
        ]);
        let (total, rows) = leaves(&[&h]);
        assert_eq!(total, 10);
        let got: Vec<(&str, &str, u64)> =
            rows.iter().map(|r| (r.function.as_str(), r.module.as_str(), r.self_samples)).collect();
        assert_eq!(
            got,
            [
                ("longest_match", "libz.so.1", 5),
                ("deflate", "libz.so.1", 3),
                ("crc32", "libz.so.1", 2),
                ("main", "python3.11", 0)
            ]
        );
        assert_eq!(rows[0].path, "/usr/lib/libz.so.1");
        let code =
            PythonCode { native_samples: total, native: rows, sample_interval_ms: 10.0, ..PythonCode::default() };
        let section = code.native_section().unwrap();
        assert_eq!(section.title, "Native code by self samples");
        assert!(section.notes[0].starts_with("10 native samples"), "{:?}", section.notes);
    }

    #[test]
    fn long_cpp_names_are_shortened_in_the_table_only() {
        let long = "void at::native::templates::cpu::normal_kernel<at::CPUGeneratorImpl*>(at::TensorBase const&, \
                    double, double, at::CPUGeneratorImpl*)";
        assert_eq!(shown_name(long), "at::native::templates::cpu::normal_kernel");
        assert_eq!(shown_name("deflate"), "deflate");
        assert_eq!(shown_name(&"x".repeat(200)).chars().count(), SHOWN_CHARS + 1);
    }

    #[test]
    fn no_native_plane_is_no_section() {
        let h = Host::new("h", "", SourceFormat::Xspace);
        assert_eq!(leaves(&[&h]), (0, Vec::new()));
        assert!(PythonCode::default().native_section().is_none());
    }
}
