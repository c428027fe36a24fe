#!/usr/bin/env python3
"""Independent reference for mlprof's framework_op_stats / kernel_stats on Kineto
(PyTorch profiler) traces, computed from the raw JSON with the standard library only.

    scripts/kineto_ops_reference.py TRACE.json[.gz] [--hta-dir DIR] > OUT.json

Times are exact: `ts`/`dur` are read as decimals (no float rounding) and reported in
microseconds. The rules (the same ones mlprof documents in op_metrics/kineto):

- Host ops: complete (`ph: X`) events on host pids with `cat` `cpu_op`/`Operator`
  (type = the op's library: the namespace before the last `::` of the name up to its
  first `<`, `(` or space, `aten::mm` -> `aten`; "op" without one), `cuda_runtime`/`Runtime` (type "CUDA runtime") or
  `cuda_driver` (type "CUDA driver"). Per thread (pid, tid) they nest by start time
  (sorted by start, longer first); self time = duration minus the durations of the
  directly nested host ops (at least 0). A thread's span is its first op start to its
  last op end; the host IDLE time is the sum of spans minus the sum of self times.
  `user_annotation`, `python_function` and other categories are not ops.
- Device ops: `kernel`, `gpu_memcpy`, `gpu_memset` events on GPU pids (pids with an
  event of a device category). Each is attributed to the `cpu_op` with the same
  `External id`; else to the innermost `cpu_op` enclosing (by start time) the host
  runtime / driver call with the same `correlation`; else to no op ("").
- Per device (pid): span = last end - first start of its device ops, busy = sum of
  their durations.

With --hta-dir (a directory with HTA 0.5.0's get_gpu_kernel_breakdown_1.csv or
top_events_by_total_dur.csv for this trace), the script also redoes HTA's own view
(float microseconds with ceil(start) / floor(end) on nanosecond traces, only events
before the last ProfilerStep when there are two or more step names) and reports every
named row that does not match, so the reference itself is checked against HTA.
"""

import csv
import gzip
import json
import math
import os
import sys
from collections import defaultdict
from decimal import Decimal

DEVICE_CATS = {"kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset",
               "gpu_user_annotation", "cuda_sync"}
DEVICE_OP_CATS = {"kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset"}
KERNEL_CATS = {"kernel", "Kernel"}
HOST_OP_TYPES = {"cpu_op": None, "Operator": None, "cuda_runtime": "CUDA runtime",
                 "Runtime": "CUDA runtime", "cuda_driver": "CUDA driver"}
CPU_OP_CATS = {"cpu_op", "Operator"}


def op_library(name):
    """The type of a PyTorch op: the library (namespace) its name says it comes from."""
    proper = name
    for stop in "<( ":
        proper = proper.split(stop)[0]
    return proper.rsplit("::", 1)[0] if "::" in proper else "op"


def load(path, parse_float):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        doc = json.load(f, parse_float=parse_float)
    return doc["traceEvents"] if isinstance(doc, dict) else doc


def us(value):
    """A Decimal number of microseconds as a JSON float."""
    return float(value)


def arg(event, key):
    args = event.get("args")
    return args.get(key) if isinstance(args, dict) else None


def complete(event):
    return event.get("ph") == "X" and "ts" in event


def gpu_pids(events):
    return {e.get("pid") for e in events if e.get("cat") in DEVICE_CATS}


def host_ops(events, devices):
    """Per-name host op stats, thread spans, and for every runtime call the name of
    its innermost enclosing cpu_op (keyed by correlation)."""
    threads = defaultdict(list)
    for index, e in enumerate(events):
        if complete(e) and e.get("pid") not in devices and e.get("cat") in HOST_OP_TYPES:
            threads[(str(e.get("pid")), str(e.get("tid")))].append((index, e))
    stats = {}
    span_total = Decimal(0)
    launch_op = {}
    for ops in threads.values():
        ops.sort(key=lambda item: (item[1]["ts"], -item[1].get("dur", 0), item[0]))
        first = min(e["ts"] for _, e in ops)
        last = max(e["ts"] + e.get("dur", 0) for _, e in ops)
        span_total += last - first
        stack = []  # [event, children_dur]

        def close(entry):
            e, children = entry
            dur = e.get("dur", 0)
            cat = e["cat"]
            op_type = HOST_OP_TYPES[cat] or op_library(e["name"])
            row = stats.setdefault(e["name"], {"name": e["name"], "type": op_type, "count": 0,
                                                "total": Decimal(0), "self": Decimal(0)})
            row["count"] += 1
            row["total"] += dur
            row["self"] += max(Decimal(0), dur - children)

        for _, e in ops:
            while stack and stack[-1][0]["ts"] + stack[-1][0].get("dur", 0) <= e["ts"]:
                close(stack.pop())
            if stack:
                stack[-1][1] += e.get("dur", 0)
            if e["cat"] not in CPU_OP_CATS:
                correlation = arg(e, "correlation")
                enclosing = next((s[0]["name"] for s in reversed(stack) if s[0]["cat"] in CPU_OP_CATS), None)
                if correlation is not None and enclosing is not None:
                    launch_op.setdefault(correlation, enclosing)
            stack.append([e, Decimal(0)])
        while stack:
            close(stack.pop())
    return stats, span_total, launch_op


def device_ops(events, devices, launch_op):
    op_by_external = {}
    for e in events:
        if complete(e) and e.get("pid") not in devices and e.get("cat") in CPU_OP_CATS:
            external = arg(e, "External id")
            if external is not None:
                op_by_external.setdefault(external, e["name"])
    pairs = {}
    kernels = {}
    spans = {}
    for e in events:
        if not (complete(e) and e.get("pid") in devices and e.get("cat") in DEVICE_OP_CATS):
            continue
        op = op_by_external.get(arg(e, "External id"))
        if op is None:
            op = launch_op.get(arg(e, "correlation"), "")
        dur = e.get("dur", 0)
        is_kernel = e["cat"] in KERNEL_CATS
        key = (e["name"], op)
        row = pairs.setdefault(key, {"kernel": e["name"], "op": op, "is_kernel": is_kernel,
                                     "count": 0, "total": Decimal(0)})
        row["count"] += 1
        row["total"] += dur
        if is_kernel:
            k = kernels.setdefault(e["name"], {"name": e["name"], "count": 0, "total": Decimal(0),
                                               "occupancy": set()})
            k["count"] += 1
            k["total"] += dur
            occupancy = arg(e, "est. achieved occupancy %")
            if occupancy is not None:
                k["occupancy"].add(float(occupancy))
        first, last, busy = spans.get(e["pid"], (e["ts"], e["ts"] + dur, Decimal(0)))
        spans[e["pid"]] = (min(first, e["ts"]), max(last, e["ts"] + dur), busy + dur)
    return pairs, kernels, spans


def hta_view(path):
    """HTA 0.5.0's rows: (name, cat, ts, dur, correlation, stream, on_gpu) in float µs,
    rounded and filtered as HTA does."""
    events = [e for e in load(path, float) if complete(e) and e.get("cat") and e.get("cat") != "Trace"]
    raw = load(path, Decimal)
    rounding = any(isinstance(e.get("ts"), Decimal) and e["ts"] != e["ts"].to_integral_value() for e in raw)
    rows = []
    for e in events:
        ts, dur = e["ts"], e.get("dur", 0)
        if rounding:
            start, end = math.ceil(ts), math.floor(ts + dur)
            ts, dur = start, end - start
        stream, correlation = arg(e, "stream"), arg(e, "correlation")
        stream = stream if isinstance(stream, int) else -1
        correlation = correlation if isinstance(correlation, int) else -1
        on_gpu = (stream >= 0 and correlation >= 0) or (
            e["cat"] == "cuda_sync" and e["name"] in ("Event Sync", "Context Sync"))
        rows.append((e["name"], e["cat"], ts, dur, correlation, on_gpu))
    steps = {r[0] for r in rows if r[0].startswith("ProfilerStep#")}
    if len(steps) >= 2:
        last = max(r[2] for r in rows if r[0].startswith("ProfilerStep#") and not r[5])
        cpu = [r for r in rows if not r[5] and r[2] < last]
        kept = defaultdict(int)
        for r in cpu:
            kept[r[4]] += 1
        gpu = [r for r in rows if r[5] for _ in range(kept.get(r[4], 0))]
        rows = cpu + gpu
    return rows


def hta_check(path, hta_dir):
    """Named rows of HTA's CSVs that the HTA view of this script does not reproduce."""
    rows = hta_view(path)
    report = {"compared": 0, "mismatches": []}
    breakdown = os.path.join(hta_dir, "get_gpu_kernel_breakdown_1.csv")
    if os.path.exists(breakdown):
        sums = defaultdict(float)
        for r in rows:
            if r[5]:
                sums[r[0]] += r[3]
        with open(breakdown, newline="") as f:
            for row in csv.DictReader(f):
                if row["name"] == "others":
                    continue
                report["compared"] += 1
                if abs(sums.get(row["name"], 0.0) - float(row["sum (us)"])) > 1e-6:
                    report["mismatches"].append([row["name"], float(row["sum (us)"]), sums.get(row["name"])])
    top = os.path.join(hta_dir, "top_events_by_total_dur.csv")
    if os.path.exists(top):
        agg = defaultdict(lambda: [0, 0.0])
        for r in rows:
            if not r[5]:
                agg[r[0]][0] += 1
                agg[r[0]][1] += r[3]
        with open(top, newline="") as f:
            for row in csv.DictReader(f):
                report["compared"] += 1
                got = agg.get(row["name_str"], [0, 0.0])
                if got[0] != int(row["count"]) or abs(got[1] - float(row["sum"])) > 1e-6:
                    report["mismatches"].append([row["name_str"], int(row["count"]), float(row["sum"]), got])
    return report


def main(argv):
    if len(argv) < 2:
        sys.exit(__doc__)
    path = argv[1]
    hta_dir = argv[argv.index("--hta-dir") + 1] if "--hta-dir" in argv else None
    events = load(path, Decimal)
    devices = gpu_pids(events)
    stats, span_total, launch_op = host_ops(events, devices)
    pairs, kernels, spans = device_ops(events, devices, launch_op)
    op_time = sum((s["self"] for s in stats.values()), Decimal(0))
    out = {
        "trace": os.path.relpath(path),
        "host": {"total_time_us": us(span_total), "op_time_us": us(op_time),
                 "idle_us": us(span_total - op_time)},
        "host_ops": sorted(({"name": s["name"], "type": s["type"], "count": s["count"],
                             "total_us": us(s["total"]), "self_us": us(s["self"])} for s in stats.values()),
                           key=lambda s: (-s["self_us"], s["name"])),
        "devices": [{"pid": str(pid), "span_us": us(last - first), "busy_us": us(busy)}
                    for pid, (first, last, busy) in sorted(spans.items(), key=lambda kv: str(kv[0]))],
        "kernels": sorted(({"name": k["name"], "count": k["count"], "total_us": us(k["total"]),
                            "occupancy_pct_values": sorted(k["occupancy"])}
                           for k in kernels.values()), key=lambda k: (-k["total_us"], k["name"])),
        "device_ops": sorted(({"kernel": p["kernel"], "op": p["op"], "is_kernel": p["is_kernel"],
                               "count": p["count"], "total_us": us(p["total"])} for p in pairs.values()),
                             key=lambda p: (-p["total_us"], p["kernel"], p["op"])),
    }
    if hta_dir:
        out["hta_check"] = hta_check(path, hta_dir)
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv)
