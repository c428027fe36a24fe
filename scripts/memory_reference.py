#!/usr/bin/env python3
"""Reference numbers for mlprof's memory profile of a PyTorch (Kineto) trace, computed
straight from the trace JSON with the standard library only (no mlprof code, no torch).

    scripts/memory_reference.py TRACE.json[.gz] [--torch-timeline CSV] > OUT.json

Definitions (the ones mlprof's `memory_profile` documents for Kineto traces):
  - memory events: `"name": "[memory]"` (ph "i", cat "cpu_instant_event"); args `Addr`,
    `Bytes` (>= 0 allocation, < 0 free of -Bytes), `Total Allocated`, `Total Reserved`,
    `Device Type`, `Device Id`. One memory id per (Device Type, Device Id), named as
    torch.device prints it (`cpu`, `cuda:0`, ...).
  - events are taken in time order; ties by `Ev Idx`, then by file order.
  - peak = the largest `Total Allocated`; its event is the LAST one reaching it (XProf's
    `>=` rule). Peak reserved = the largest `Total Reserved`, at the FIRST event reaching it.
  - live at the peak = allocations (by Addr) replayed up to and including the peak event,
    minus the frees seen so far; a free whose Addr has no earlier allocation is a block
    allocated before the trace; `before_trace_bytes_at_peak` = allocated at the peak minus
    the live blocks' bytes.
  - the op of a memory event = the innermost `cpu_op` on the same pid/tid whose span
    [ts, ts + dur] contains the event's ts (largest ts, then shortest dur, then the later in
    the file); its `Input Dims` / `Input type` args as compact JSON. A free of a block
    allocated in the trace shows the allocation's op (as XProf copies allocation details
    onto deallocations).
  - step = N of the `ProfilerStep#N` span containing the event (latest start), else -1.
  - timeline: XProf's max box filter to <= 1000 points over `Total Allocated`.
Times are nanoseconds since the epoch (`baseTimeNanoseconds` + ts * 1000), exact (Decimal).

--torch-timeline: the CSV HTA's MemoryAnalysis makes from torch's
`export_memory_timeline` (columns ts (epoch ns) and bytes per category). Its total minus
its first row (the tensors that existed before the first event) is compared with
`Total Allocated` at each of its timestamps; the result goes under `torch_timeline_check`.
"""
import csv
import gzip
import json
import sys
from decimal import Decimal

MAX_TIMELINE = 1000
DEVICE_TYPES = {0: "cpu", 1: "cuda", 2: "mkldnn", 3: "opengl", 4: "opencl", 5: "ideep", 6: "hip",
                7: "fpga", 8: "maia", 9: "xla", 10: "vulkan", 11: "metal", 12: "xpu", 13: "mps",
                14: "meta", 15: "hpu", 16: "ve", 17: "lazy", 18: "ipu", 19: "mtia", 20: "privateuseone"}


def memory_id(device_type, device_id):
    name = DEVICE_TYPES.get(device_type, f"device_type_{device_type}")
    return name if device_type == 0 or device_id < 0 else f"{name}:{device_id}"


def compact(value):
    return "" if value is None else json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return json.load(f, parse_float=Decimal)


def sample(points, max_points):
    """XProf's max box filter: count1 boxes of `width`, then boxes of width + 1."""
    total = len(points)
    if total <= max_points:
        return list(points)
    width = total // max_points
    count1 = max_points * (width + 1) - total
    out = []
    start = 0
    for w, count in ((width, count1), (width + 1, max_points - count1)):
        for _ in range(count):
            box = points[start:start + w]
            best = box[0]
            for p in box[1:]:
                if p["allocated"] > best["allocated"]:
                    best = p
            out.append(best)
            start += w
    return out


def main(argv):
    trace_path = argv[1]
    csv_path = argv[argv.index("--torch-timeline") + 1] if "--torch-timeline" in argv else None
    doc = load(trace_path)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    base_ns = int(doc.get("baseTimeNanoseconds", 0)) if isinstance(doc, dict) else 0

    def epoch_ns(ts):
        return base_ns + int(Decimal(ts) * 1000)

    ops = {}  # (pid, tid) -> [(ts, dur, file index, event)]
    steps = []
    memory = []
    for index, e in enumerate(events):
        if not isinstance(e, dict) or "ts" not in e:
            continue
        name = e.get("name", "")
        if e.get("cat") in ("cpu_op", "Operator") and e.get("ph") == "X":
            ops.setdefault((e.get("pid"), e.get("tid")), []).append((Decimal(e["ts"]), Decimal(e.get("dur", 0)), index, e))
        if e.get("ph") == "X" and isinstance(name, str) and name.startswith("ProfilerStep#"):
            try:
                steps.append((Decimal(e["ts"]), Decimal(e.get("dur", 0)), int(name[len("ProfilerStep#"):])))
            except ValueError:
                pass
        if name == "[memory]" and isinstance(e.get("args"), dict):
            memory.append((Decimal(e["ts"]), e["args"].get("Ev Idx", 0), index, e))
    memory.sort(key=lambda m: (m[0], m[1], m[2]))

    def op_of(m):
        ts, e = m[0], m[3]
        best = None
        for o in ops.get((e.get("pid"), e.get("tid")), []):
            if o[0] <= ts <= o[0] + o[1]:
                key = (o[0], -o[1], o[2])
                if best is None or key > best[0]:
                    best = (key, o[3])
        if best is None:
            return {"op": "", "input_dims": "", "input_types": ""}
        args = best[1].get("args") or {}
        return {"op": best[1].get("name", ""), "input_dims": compact(args.get("Input Dims")),
                "input_types": compact(args.get("Input type"))}

    def step_of(ts):
        best = None
        for start, dur, n in steps:
            if start <= ts <= start + dur and (best is None or start > best[0]):
                best = (start, n)
        return -1 if best is None else best[1]

    by_device = {}
    for m in memory:
        args = m[3]["args"]
        key = (int(args.get("Device Type", 0)), int(args.get("Device Id", -1)))
        by_device.setdefault(key, []).append(m)

    result = {"trace": trace_path.split("/")[-1], "memory_events": len(memory), "allocators": []}
    for (device_type, device_id), items in sorted(by_device.items(), key=lambda kv: memory_id(*kv[0])):
        points = []
        for m in items:
            args = m[3]["args"]
            nbytes = int(args.get("Bytes", 0))
            points.append({
                "time_epoch_ns": epoch_ns(m[0]), "ts_us": str(m[0]),
                "kind": "allocation" if nbytes >= 0 else "deallocation", "bytes": abs(nbytes),
                "addr": int(args.get("Addr", 0)), "allocated": int(args.get("Total Allocated", 0)),
                "reserved": int(args.get("Total Reserved", 0)), "step": step_of(m[0]), **op_of(m)})
        peak_index = 0
        for i, p in enumerate(points):
            if p["allocated"] >= points[peak_index]["allocated"]:
                peak_index = i
        reserved_index = 0
        for i, p in enumerate(points):
            if p["reserved"] > points[reserved_index]["reserved"]:
                reserved_index = i
        events_without_op = sum(1 for p in points if not p["op"])
        live = {}
        frees_without_allocation = 0
        frees_without_allocation_bytes = 0
        for i, p in enumerate(points):
            if p["kind"] == "allocation":
                live[p["addr"]] = p
            else:
                alloc = live.pop(p["addr"], None)
                if alloc is None:
                    frees_without_allocation += 1
                    frees_without_allocation_bytes += p["bytes"]
                else:  # a free shows the op (and its inputs) that allocated the block
                    for k in ("op", "input_dims", "input_types"):
                        p[k] = alloc[k]
            if i == peak_index:
                live_at_peak = sorted(live.values(), key=lambda q: (-q["bytes"], q["time_epoch_ns"]))
                frees_before_peak = frees_without_allocation
        peak = points[peak_index]
        reserved_peak = points[reserved_index]
        live_bytes = sum(q["bytes"] for q in live_at_peak)
        result["allocators"].append({
            "memory_id": memory_id(device_type, device_id),
            "device_type": device_type,
            "device_id": device_id,
            "allocations": sum(1 for p in points if p["kind"] == "allocation"),
            "deallocations": sum(1 for p in points if p["kind"] == "deallocation"),
            "peak_allocated_bytes": peak["allocated"],
            "peak_time_epoch_ns": peak["time_epoch_ns"],
            "peak_ts_us": peak["ts_us"],
            "peak_step": peak["step"],
            "reserved_at_peak_bytes": peak["reserved"],
            "peak_reserved_bytes": reserved_peak["reserved"],
            "peak_reserved_time_epoch_ns": reserved_peak["time_epoch_ns"],
            "allocated_at_end_bytes": points[-1]["allocated"],
            "reserved_at_end_bytes": points[-1]["reserved"],
            "frees_without_allocation": frees_without_allocation,
            "frees_without_allocation_bytes": frees_without_allocation_bytes,
            "frees_without_allocation_before_peak": frees_before_peak,
            "events_without_op": events_without_op,
            "live_at_peak_count": len(live_at_peak),
            "live_at_peak_bytes": live_bytes,
            "before_trace_bytes_at_peak": peak["allocated"] - live_bytes,
            "live_at_peak": [{k: q[k] for k in ("addr", "bytes", "time_epoch_ns", "op", "input_dims", "input_types", "step")}
                             for q in live_at_peak],
            "timeline": [[p["time_epoch_ns"], p["kind"], p["bytes"], p["allocated"], p["reserved"], p["op"]]
                         for p in sample(points, MAX_TIMELINE)],
        })
    if csv_path:
        result["torch_timeline_check"] = check_torch_timeline(csv_path, result["allocators"], by_device, epoch_ns)
    json.dump(result, sys.stdout, indent=1)
    sys.stdout.write("\n")


def check_torch_timeline(csv_path, allocators, by_device, epoch_ns):
    """Compares torch's exported memory timeline (via HTA) with `Total Allocated`."""
    with open(csv_path, newline="") as f:
        rows = list(csv.reader(f))
    header, body = rows[0], rows[1:]
    totals = [(int(r[0]), sum(int(x) for x in r[1:])) for r in body]
    cpu = next(((k, v) for k, v in by_device.items() if k[0] == 0), None)
    if cpu is None or not totals:
        return {"comparable": False, "why": "no cpu memory events or empty CSV"}
    times = [epoch_ns(m[0]) for m in cpu[1]]
    allocated = [int(m[3]["args"].get("Total Allocated", 0)) for m in cpu[1]]
    baseline = totals[0][1]
    mismatches = 0
    j = -1
    for ts, total in totals[1:]:  # row 0: the tensors that existed before the first event
        while j + 1 < len(times) and times[j + 1] <= ts:
            j += 1
        ours = allocated[j] if j >= 0 else 0
        if total - baseline != ours:
            mismatches += 1
    peak_total = max(t for _, t in totals)
    return {
        "columns": header,
        "rows": len(totals),
        "baseline_bytes": baseline,
        "rows_after_baseline_where_total_minus_baseline_differs_from_total_allocated": mismatches,
        "peak_total_bytes": peak_total,
        "peak_total_minus_baseline_bytes": peak_total - baseline,
        "peak_total_epoch_ns": [ts for ts, t in totals if t == peak_total],
        "peak_allocated_bytes": next(a["peak_allocated_bytes"] for a in allocators if a["device_type"] == 0),
    }


if __name__ == "__main__":
    main(sys.argv)
