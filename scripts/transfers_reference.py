#!/usr/bin/env python3
"""Independent reference for `mlprof analyze --tool transfers` on Kineto traces.

Reads the raw trace JSON (stdlib only; decimals parsed exactly) and computes the key
numbers the Rust tests compare against:

- steps: distinct `ProfilerStep#N` annotations;
- copies per device and kind (`HtoD pageable`, `DtoD`, ...): count, bytes, device time;
- blocking host calls by name (synchronisations and synchronous copies / memsets);
- implicit syncs: top-level `cpu_op`s whose subtree has a device->host copy call
  followed by a blocking call (count, host time in those calls);
- pageable host<->device copies not inside an implicit sync (count, host time in their
  calls) and blocking sync calls not inside one (count, host time);
- GPU gaps per device: idle time between the union of kernels, copies and memsets of
  all streams longer than the threshold (count, total);
- copy/compute overlap per stream: union copy time and the part overlapped by compute
  kernels (HTA's COMPUTATION kernels) on other streams.

All times are integer picoseconds. Usage:

    scripts/transfers_reference.py TRACE.json[.gz] [--threshold-us 100] > out.json
"""

import argparse
import bisect
import gzip
import json
from collections import defaultdict
from decimal import Decimal

BLOCKING_SYNCS = {
    "cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize",
    "cuCtxSynchronize", "cuStreamSynchronize", "cuEventSynchronize",
    "hipDeviceSynchronize", "hipStreamSynchronize", "hipEventSynchronize",
}
COPY_PREFIXES = ("cudaMemcpy", "cudaMemset", "hipMemcpy", "hipMemset", "cuMemcpy", "cuMemset")


def ps(value):
    return int(Decimal(value) * 1_000_000)


def is_async_copy(name):
    base = name
    for suffix in ("_v2", "_ptds", "_ptsz"):
        if base.endswith(suffix):
            base = base[: -len(suffix)]
    return base.endswith("Async") and base.startswith(COPY_PREFIXES)


def is_sync_copy(name):
    return name.startswith(COPY_PREFIXES) and not is_async_copy(name)


def blocks_host(name):
    return name in BLOCKING_SYNCS or is_sync_copy(name)


def copy_kind(name):
    """`Memcpy HtoD (Pageable -> Device)` -> (`HtoD pageable`, direction, pageable)."""
    rest = name[len("Memcpy"):].strip()
    code, _, kinds = rest.partition(" ")
    code = {"H2D": "HtoD", "D2H": "DtoH", "D2D": "DtoD", "P2P": "PtoP", "H2H": "HtoH"}.get(code, code)
    src = dst = ""
    inner = kinds.strip()
    if inner.startswith("(") and inner.endswith(")") and "->" in inner:
        src, dst = (part.strip() for part in inner[1:-1].split("->", 1))
    host = src if code == "HtoD" else dst if code == "DtoH" else ""
    label = {"Pageable": f"{code} pageable", "Pinned": f"{code} pinned", "Managed": f"{code} managed"}.get(host, code)
    return label, code, host == "Pageable"


def merge(intervals):
    out = []
    for start, end in sorted(intervals):
        if out and start <= out[-1][1]:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return out


def covered(union, start, end):
    return sum(max(0, min(e, end) - max(s, start)) for s, e in union)


def is_computation(name):
    comm = name.startswith("nccl") and "Kernel" in name
    memory = name.startswith(("Memcpy", "Memset", "dma"))
    return not comm and not memory and "Memcpy" not in name and "Sync" not in name


def analyse(path, threshold_ps):
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as f:
        doc = json.load(f, parse_float=Decimal)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    complete = [e for e in events if e.get("ph") == "X" and "ts" in e]
    gpu_cats = {"kernel", "Kernel", "gpu_memcpy", "gpu_memset", "cuda_sync", "gpu_user_annotation"}
    gpu_pids = {e["pid"] for e in complete if e.get("cat") in gpu_cats}
    host, gpu = [], []
    for e in complete:
        start = ps(e["ts"])
        rec = {"e": e, "start": start, "end": start + ps(e.get("dur", 0)), "name": e.get("name", "")}
        (gpu if e["pid"] in gpu_pids else host).append(rec)

    steps = {e["name"] for e in (r["e"] for r in host)
             if e.get("cat") == "user_annotation" and e.get("name", "").startswith("ProfilerStep#")}

    runtime = {}
    for r in host:
        if r["e"].get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in r["e"].get("args", {}):
            runtime[r["e"]["args"]["correlation"]] = r
    gpu_by_corr = defaultdict(list)
    for r in gpu:
        corr = r["e"].get("args", {}).get("correlation")
        if corr is not None:
            gpu_by_corr[corr].append(r)

    # Copies per device and kind.
    copies = defaultdict(lambda: {"count": 0, "bytes": 0, "duration_ps": 0})
    for r in gpu:
        if r["e"].get("cat") == "gpu_memcpy" and r["name"].startswith("Memcpy"):
            label, _, _ = copy_kind(r["name"])
            c = copies[(r["e"]["pid"], label)]
            c["count"] += 1
            c["bytes"] += int(r["e"].get("args", {}).get("bytes", 0))
            c["duration_ps"] += r["end"] - r["start"]

    # Blocking calls by name.
    blocking = defaultdict(lambda: {"count": 0, "host_time_ps": 0})
    for r in host:
        if r["e"].get("cat") in ("cuda_runtime", "cuda_driver") and blocks_host(r["name"]):
            blocking[r["name"]]["count"] += 1
            blocking[r["name"]]["host_time_ps"] += r["end"] - r["start"]

    # Implicit syncs, per host thread.
    threads = defaultdict(list)
    for r in host:
        threads[(r["e"]["pid"], r["e"]["tid"])].append(r)

    def is_d2h_copy_call(r):
        if r["e"].get("cat") not in ("cuda_runtime", "cuda_driver"):
            return False
        if not r["name"].startswith(COPY_PREFIXES) or r["name"].startswith(("cudaMemset", "hipMemset", "cuMemset")):
            return False
        ops = gpu_by_corr.get(r["e"].get("args", {}).get("correlation"), [])
        for op in ops:
            if op["e"].get("cat") == "gpu_memcpy":
                return copy_kind(op["name"])[1] == "DtoH"
        return "DtoH" in r["name"]

    consumed = set()
    implicit = {"count": 0, "host_time_ps": 0}
    for recs in threads.values():
        ops = sorted((r for r in recs if r["e"].get("cat") == "cpu_op"), key=lambda r: (r["start"], -r["end"]))
        calls = sorted((r for r in recs if r["e"].get("cat") in ("cuda_runtime", "cuda_driver")),
                       key=lambda r: (r["start"], -r["end"]))
        call_starts = [c["start"] for c in calls]
        tops = []
        for op in ops:  # top-level ops: not inside the previous top-level op
            if not tops or op["end"] > tops[-1]["end"]:
                tops.append(op)
        for top in tops:
            lo = bisect.bisect_left(call_starts, top["start"])
            hi = bisect.bisect_left(call_starts, top["end"])
            inside = [c for c in calls[lo:hi] if c["end"] <= top["end"]]
            first = next((c for c in inside if is_d2h_copy_call(c)), None)
            if first is None:
                continue
            after = [c for c in inside if c["start"] >= first["start"] and c is not first and blocks_host(c["name"])]
            waits = after + ([first] if blocks_host(first["name"]) else [])
            if not waits:
                continue
            implicit["count"] += 1
            for c in [first] + after:
                consumed.add(id(c))
                implicit["host_time_ps"] += c["end"] - c["start"]

    pageable = {"count": 0, "host_time_ps": 0, "bytes": 0}
    for r in gpu:
        if r["e"].get("cat") != "gpu_memcpy" or not r["name"].startswith("Memcpy"):
            continue
        _, code, is_pageable = copy_kind(r["name"])
        call = runtime.get(r["e"].get("args", {}).get("correlation"))
        if call is not None and id(call) in consumed:
            continue
        if call is not None and is_sync_copy(call["name"]):
            continue
        if is_pageable and code in ("HtoD", "DtoH"):
            pageable["count"] += 1
            pageable["bytes"] += int(r["e"].get("args", {}).get("bytes", 0))
            pageable["host_time_ps"] += (call["end"] - call["start"]) if call else (r["end"] - r["start"])

    sync_calls = {"count": 0, "host_time_ps": 0}
    for r in host:
        if r["e"].get("cat") in ("cuda_runtime", "cuda_driver") and r["name"] in BLOCKING_SYNCS \
                and id(r) not in consumed:
            sync_calls["count"] += 1
            sync_calls["host_time_ps"] += r["end"] - r["start"]

    # Gaps and overlap per device.
    gaps, overlap = [], []
    for pid in sorted(gpu_pids):
        ops = [r for r in gpu if r["e"]["pid"] == pid and r["e"].get("cat") in ("kernel", "Kernel", "gpu_memcpy", "gpu_memset")]
        union = merge([(r["start"], r["end"]) for r in ops])
        lengths = [b[0] - a[1] for a, b in zip(union, union[1:]) if b[0] - a[1] > threshold_ps]
        gaps.append({"device": pid, "count": len(lengths), "total_ps": sum(lengths)})
        streams = sorted({r["e"]["tid"] for r in ops if r["e"].get("cat") == "gpu_memcpy"})
        for stream in streams:
            copy_union = merge([(r["start"], r["end"]) for r in ops
                                if r["e"]["tid"] == stream and r["e"].get("cat") == "gpu_memcpy"])
            compute = merge([(r["start"], r["end"]) for r in ops if r["e"]["tid"] != stream
                             and r["e"].get("cat") in ("kernel", "Kernel") and is_computation(r["name"])])
            overlap.append({
                "device": pid, "stream": stream,
                "copies": sum(1 for r in ops if r["e"]["tid"] == stream and r["e"].get("cat") == "gpu_memcpy"),
                "copy_time_ps": sum(e - s for s, e in copy_union),
                "overlapped_ps": sum(covered(compute, s, e) for s, e in copy_union),
            })

    return {
        "trace": str(path),
        "threshold_ps": threshold_ps,
        "steps": len(steps),
        "copies": [{"device": d, "kind": k, **v} for (d, k), v in sorted(copies.items())],
        "blocking_calls": [{"name": n, **v} for n, v in sorted(blocking.items())],
        "implicit_syncs": implicit,
        "pageable_copies": pageable,
        "sync_calls": sync_calls,
        "gaps": gaps,
        "overlap": overlap,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("trace")
    parser.add_argument("--threshold-us", type=Decimal, default=Decimal(100))
    args = parser.parse_args()
    print(json.dumps(analyse(args.trace, int(args.threshold_us * 1_000_000)), indent=1))


if __name__ == "__main__":
    main()
