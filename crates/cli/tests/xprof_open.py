"""Opens XSpace files written by `mlprof convert --to xspace` with the real XProf.

Usage: python xprof_open.py TF_XPLANE REFERENCE_DIR TORCH_XPLANE TORCH_EVENTS TORCH_STEP_MS

- TF_XPLANE (a TensorFlow profile re-encoded by mlprof): XProf's tool outputs must be
  byte-identical to REFERENCE_DIR/<tool>.json, XProf's outputs on the original file.
- TORCH_XPLANE (a PyTorch GPU trace converted by mlprof): XProf must list its tools
  (kernel_stats included: it found the GPU plane), its trace viewer must show all
  TORCH_EVENTS events, and its overview must find the ProfilerStep#N steps, with an
  average step time of TORCH_STEP_MS (XProf's text).
Exits non-zero with a message on the first mismatch.
"""
import json
import os
import shutil
import sys
import tempfile

from xprof.convert import raw_to_tool_data as r2t


def private_copy(path):
    # XProf writes cache files beside the profile; keep the test's files untouched.
    copy = os.path.join(tempfile.mkdtemp(), os.path.basename(path))
    shutil.copy(path, copy)
    return copy


def main():
    tf_xplane, reference, torch_xplane, torch_events, torch_step_ms = sys.argv[1:6]
    tf = private_copy(tf_xplane)
    for tool in ["overview_page", "framework_op_stats", "input_pipeline_analyzer", "memory_profile"]:
        data, _ = r2t.xspace_to_tool_data([tf], tool, {"use_saved_result": False})
        data = data.encode() if isinstance(data, str) else data
        with open(os.path.join(reference, tool + ".json"), "rb") as f:
            want = f.read()
        if data != want:
            sys.exit(f"{tool}: XProf output differs from the reference ({len(data)} vs {len(want)} bytes)")
        print(f"{tool}: identical to XProf's output on the original profile")

    torch = private_copy(torch_xplane)
    tools = r2t.xspace_to_tool_names([torch])
    for tool in ["trace_viewer@", "overview_page", "kernel_stats"]:
        if tool not in tools:
            sys.exit(f"XProf does not offer {tool} for the converted PyTorch trace: {tools}")
    data, _ = r2t.xspace_to_tool_data([torch], "trace_viewer", {"use_saved_result": False, "trace_viewer_options": {}})
    events = [e for e in json.loads(data)["traceEvents"] if e.get("ph") == "X"]
    if len(events) != int(torch_events):
        sys.exit(f"XProf's trace viewer shows {len(events)} events, expected {torch_events}")
    print(f"PyTorch trace: XProf offers {len(tools)} tools and shows all {len(events)} events")
    data, _ = r2t.xspace_to_tool_data([torch], "overview_page", {"use_saved_result": False})
    averages = [t.get("p", {}).get("steptime_ms_average") for t in json.loads(data)]
    if torch_step_ms not in averages:
        sys.exit(f"XProf's overview of the PyTorch trace: step time {averages}, expected {torch_step_ms} ms")
    print(f"PyTorch trace: XProf finds its steps, {torch_step_ms} ms on average")


if __name__ == "__main__":
    main()
