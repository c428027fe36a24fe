"""Runs XProf's own converters on every host of one profiling session together, the way
XProf's server does when a session holds several `<host>.xplane.pb` files.

Usage: python xprof_session_tools.py SESSION_DIR

Prints one JSON object: {tool: XProf's output} for overview_page,
input_pipeline_analyzer, pod_viewer and framework_op_stats, computed from all the
session's XSpace files at once (xspace_to_tool_data with every path, sorted by name).
XProf writes cache files beside the profiles, so it runs on private copies.
"""
import glob
import json
import os
import shutil
import sys
import tempfile

# XProf logs to stderr; the caller only reads stdout.
_devnull = os.open(os.devnull, os.O_WRONLY)
os.dup2(_devnull, 2)

from xprof.convert import raw_to_tool_data as r2t

TOOLS = ["overview_page", "input_pipeline_analyzer", "pod_viewer", "framework_op_stats"]


def main():
    session = sys.argv[1]
    copies = tempfile.mkdtemp()
    paths = []
    for path in sorted(glob.glob(os.path.join(session, "*.xplane.pb"))):
        copy = os.path.join(copies, os.path.basename(path))
        shutil.copy(path, copy)
        paths.append(copy)
    if not paths:
        sys.exit(f"no .xplane.pb files in {session}")
    out = {}
    for tool in TOOLS:
        data, _ = r2t.xspace_to_tool_data(paths, tool, {"use_saved_result": False})
        out[tool] = json.loads(data)
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
