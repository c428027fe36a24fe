"""Times XProf's own converters (PyPI xprof) on one XSpace: every tool mlprof's
`analyze --tool all` computes, run in one process as XProf's server would, cold (no
cached op stats). Prints seconds; peak RSS comes from /usr/bin/time around this script.

    python scripts/xprof_tools_time.py FILE.xplane.pb
"""
import os
import sys
import time

# XProf logs every step to stderr; keep the benchmark output readable.
_devnull = os.open(os.devnull, os.O_WRONLY)
os.dup2(_devnull, 2)

from xprof.convert import raw_to_tool_data as r2t

TOOLS = ["overview_page", "input_pipeline_analyzer", "framework_op_stats", "kernel_stats",
         "memory_profile", "pod_viewer"]

start = time.perf_counter()
for tool in TOOLS:
    r2t.xspace_to_tool_data([sys.argv[1]], tool, {"use_saved_result": False})
print(f"{time.perf_counter() - start:.3f}")
