"""Captures a running profiler server with XProf's own capture client (the C++
`CaptureRemoteTrace` that TensorBoard's "Capture Profile" and TensorFlow's
`client.trace` use), then opens the saved profile with XProf's overview page.

Usage: python xprof_capture.py HOST:PORT LOGDIR
Prints, as JSON, the step names of XProf's step-time table. Exits non-zero with a
message when the capture saves no profile.
"""
import glob
import json
import os
import sys

from xprof.convert import _pywrap_profiler_plugin as plugin
from xprof.convert import raw_to_tool_data as r2t


def main():
    addr, logdir = sys.argv[1:3]
    options = {"host_tracer_level": 2, "device_tracer_level": 1, "python_tracer_level": 0, "delay_ms": 0}
    plugin.trace(addr, logdir, "", True, 1000, 3, options)
    # The client saves <logdir>/plugins/profile/<session>/<host_port>.xplane.pb.
    saved = glob.glob(os.path.join(logdir, "plugins", "profile", "*", addr.replace(":", "_") + ".xplane.pb"))
    if len(saved) != 1:
        sys.exit(f"expected one saved profile, found {saved}")
    data, _ = r2t.xspace_to_tool_data(saved, "overview_page", {"use_saved_result": False})
    tables = json.loads(data)
    step_table = next(t for t in tables if any(c.get("id") == "stepnum" for c in t.get("cols", [])))
    print(json.dumps([row["c"][0]["v"] for row in step_table["rows"]]))


if __name__ == "__main__":
    main()
