//! Fuzzes tfprof's views on XSpace input, which decode the HLO programs stored in the
//! profile's metadata (a protobuf parser of their own): any bytes that decode as an
//! XSpace must give each view's result or an error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mlprof_analysis::facts::step_groups;
use mlprof_analysis::tfprof::{TfprofOptions, View, analyze};
use mlprof_formats::xspace::read_xspace;

fuzz_target!(|data: &[u8]| {
    let Ok(host) = read_xspace(data, "fuzz.xplane.pb", "fuzz") else { return };
    let groups = step_groups(&host);
    for view in [View::Scope, View::Op, View::Code, View::Graph] {
        let options = TfprofOptions { view, ..TfprofOptions::default() };
        let _ = analyze(&[(&host, &groups)], &options);
    }
});
