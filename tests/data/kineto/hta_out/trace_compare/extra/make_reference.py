"""Runs HTA 0.5.0's TraceDiff.compare_traces / ops_diff on the trace pairs of cases.json.

Usage: PYTHONPATH=<HTA 0.5.0 src> python make_reference.py <tests/data/kineto/hta> <out dir>
Writes <case>.csv (DataFrame.to_csv), <case>.ops_diff.json (ops_diff never uses short
names) and _results.json (ranks/iterations per side, or HTA's error). Made with
Python 3.11.7, pandas 2.2.3, numpy 2.2.6; plotly (only used for HTA's plots) stubbed.
"""
import json
import logging
import os
import sys
import warnings

logging.disable(logging.CRITICAL)
warnings.filterwarnings("ignore")
from hta.trace_diff import DeviceType, LabeledTrace, TraceDiff  # noqa: E402

traces, out = sys.argv[1], sys.argv[2]
cases = json.load(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "cases.json")))
os.makedirs(out, exist_ok=True)
loaded = {}


def labeled(trace_dir, label):
    if (trace_dir, label) not in loaded:
        loaded[(trace_dir, label)] = LabeledTrace(label=label, trace_dir=os.path.join(traces, trace_dir))
    return loaded[(trace_dir, label)]


results = {}
for case, spec in cases.items():
    control, test = labeled(spec["control"], "control"), labeled(spec["test"], "test")
    kw = {"device_type": DeviceType[spec.get("device", "ALL")]}
    for side, trace in (("control", control), ("test", test)):
        if f"{side}_rank" in spec or "rank" in spec:
            kw[f"{side}_rank"] = spec.get(f"{side}_rank", spec.get("rank"))
        iteration = spec.get("iteration")
        if iteration is not None:
            kw[f"{side}_iteration"] = trace.iterations() if iteration == "all" else iteration
    try:
        df = TraceDiff.compare_traces(control, test, use_short_name=spec.get("short", False), **kw)
        df.to_csv(os.path.join(out, f"{case}.csv"))
        with open(os.path.join(out, f"{case}.ops_diff.json"), "w") as f:
            json.dump(TraceDiff.ops_diff(control, test, **kw), f, indent=1)
        results[case] = {
            "rows": len(df),
            "control": {"ranks": control.ranks(), "iterations": control.iterations()},
            "test": {"ranks": test.ranks(), "iterations": test.iterations()},
        }
    except Exception as e:  # noqa: BLE001
        results[case] = {"error": repr(e)}
with open(os.path.join(out, "_results.json"), "w") as f:
    json.dump(results, f, indent=1)
