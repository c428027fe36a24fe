//! Fuzzes every tool on XSpace input: any bytes that decode as an XSpace must give each
//! tool's result (as `mlprof analyze` computes it, in both breakdowns and in
//! XProf-compatible mode) and the trace viewer's derived GPU lines, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mlprof_analysis::derived_lines;
use mlprof_analysis::facts::step_groups;
use mlprof_analysis::tool::{Analysis, BREAKDOWN, Options, ToolId};
use mlprof_formats::xspace::read_xspace;

fuzz_target!(|data: &[u8]| {
    let Ok(host) = read_xspace(data, "fuzz.xplane.pb", "fuzz") else { return };
    let _ = derived_lines::derive(&host, &step_groups(&host));
    let mut xprof_breakdown = Options::xprof_compatible();
    let _ = xprof_breakdown.set(&BREAKDOWN, "xprof", "breakdown");
    for options in [Options::default(), xprof_breakdown] {
        let analysis = Analysis::new(vec![&host], options);
        for result in analysis.run_all(&ToolId::ALL).into_iter().flatten() {
            let _ = result.report();
            let _ = result.to_xprof_json();
        }
    }
});
