"""Times Holistic Trace Analysis on a trace directory the way a user runs it: load
(`TraceAnalysis(trace_dir=...)`) plus one analysis. Used by scripts/bench.

    python scripts/hta_time.py TRACE_DIR [ANALYSIS]   (default get_temporal_breakdown)
"""
import logging
import sys

logging.disable(logging.CRITICAL)
from hta.trace_analysis import TraceAnalysis  # noqa: E402

analysis = TraceAnalysis(trace_dir=sys.argv[1])
name = sys.argv[2] if len(sys.argv) > 2 else "get_temporal_breakdown"
getattr(analysis, name)(visualize=False)
