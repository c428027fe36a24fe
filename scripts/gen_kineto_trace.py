#!/usr/bin/env python3
"""Make a large Kineto trace for benchmarks from a real one: its profiler steps are
repeated, each copy shifted in time past the previous one, until the file reaches the
requested size. Not a fixture generator: the output only feeds scripts/bench.

    scripts/gen_kineto_trace.py REAL.json[.gz] OUT.json SIZE_MB

Each copy c (0, 1, ...) holds every event from the first ProfilerStep#N on, with
  - ts + c * period, where period = (end of the latest such event - first step start) + 100 us,
    so copies never overlap on any thread or stream;
  - ProfilerStep#N renamed ProfilerStep#(N + c * steps_per_copy);
  - correlation, External id and flow ids + c * id_stride, so launches, kernels and flow
    arrows stay paired within their copy.
Events before the first step and metadata records are written once. Standard library only.
"""
import gzip
import json
import os
import re
import sys

STEP = re.compile(r"^ProfilerStep#(\d+)$")


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)


def end_of(event):
    return float(event.get("ts", 0)) + float(event.get("dur", 0) or 0)


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    src, out, size_mb = sys.argv[1], sys.argv[2], float(sys.argv[3])
    trace = load(src)
    events = trace.get("traceEvents", [])
    steps = [e for e in events if STEP.match(str(e.get("name", ""))) and "ts" in e]
    if not steps:
        sys.exit(f"{src}: no ProfilerStep#N events to repeat")
    first = min(float(e["ts"]) for e in steps)
    body = [e for e in events if e.get("ph") != "M" and "ts" in e and float(e["ts"]) >= first]
    head = [e for e in events if e.get("ph") == "M" or "ts" not in e or float(e["ts"]) < first]
    period = max(end_of(e) for e in body) - first + 100.0
    numbers = [int(STEP.match(e["name"]).group(1)) for e in steps]
    steps_per_copy = max(numbers) - min(numbers) + 1
    ids = [v for e in body for v in (e.get("id"), (e.get("args") or {}).get("correlation"),
                                      (e.get("args") or {}).get("External id")) if isinstance(v, int)]
    id_stride = (max(ids) + 1) if ids else 0

    def shifted(event, copy):
        e = dict(event)
        e["ts"] = round(float(e["ts"]) + copy * period, 3)
        m = STEP.match(str(e.get("name", "")))
        if m:
            e["name"] = f"ProfilerStep#{int(m.group(1)) + copy * steps_per_copy}"
        if isinstance(e.get("id"), int):
            e["id"] += copy * id_stride
        if isinstance(e.get("args"), dict):
            args = dict(e["args"])
            for key in ("correlation", "External id"):
                if isinstance(args.get(key), int) and args[key] >= 0:
                    args[key] += copy * id_stride
            e["args"] = args
        return e

    copy_bytes = sum(len(json.dumps(e)) + 2 for e in body)
    copies = max(1, int(size_mb * 1e6 / max(copy_bytes, 1)))
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as f:
        f.write("{\n")
        for key, value in trace.items():
            if key != "traceEvents":
                f.write(f"  {json.dumps(key)}: {json.dumps(value)},\n")
        f.write('  "traceEvents": [\n')
        separator = "    "
        for e in head:
            f.write(separator + json.dumps(e))
            separator = ",\n    "
        for copy in range(copies):
            for e in body:
                f.write(separator + json.dumps(shifted(e, copy)))
                separator = ",\n    "
        f.write("\n  ]\n}\n")
    print(f"{out}: {copies} copies of {len(body)} events, {steps_per_copy} steps each")


if __name__ == "__main__":
    main()
