#!/usr/bin/env python3
"""Reference step-time breakdown of PyTorch (Kineto) traces, written independently of
mlprof's Rust code (stdlib only), for its integration tests.

For every `ProfilerStep#N` span: the time of each XProf step-time category, with the
Kineto → category mapping documented in crates/analysis/src/kineto.rs and XProf's
priorities where events overlap (later in PRIORITY wins); time nothing covers is
"unknown". Also the DataLoader `__next__` time per step.

Usage: kineto_steps_reference.py OUT.json TRACE_OR_DIR...
Times are exact: `ts`/`dur` are read as decimals, output in microseconds.
"""
import gzip
import json
import os
import sys
from decimal import Decimal

PRIORITY = [
    "unknown", "host_compute", "host_preprocess", "host_postprocess", "host_batch_formation",
    "host_runtime", "host_compile", "host_to_host", "host_to_device", "host_prepare",
    "device_collectives", "host_wait_input", "device_to_device", "device_to_host",
    "device_compute_32", "device_compute_16", "device_wait_device", "device_wait_host",
]
RANK = {name: i for i, name in enumerate(PRIORITY)}
LAUNCHES = {
    "cudaLaunchKernel", "cudaLaunchKernelExC", "cudaLaunchCooperativeKernel",
    "cudaLaunchCooperativeKernelMultiDevice", "cuLaunchKernel", "cuLaunchKernelEx",
    "cuLaunchCooperativeKernel", "cudaGraphLaunch", "hipLaunchKernel", "hipExtLaunchKernel",
    "hipModuleLaunchKernel", "hipExtModuleLaunchKernel", "hipGraphLaunch", "cudaLaunchHostFunc",
}
DEVICE_CATS = {"kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset"}


def is_launch(name):
    if name in LAUNCHES:
        return True
    base = name
    for suffix in ("_v2", "_ptds", "_ptsz"):
        if base.endswith(suffix):
            base = base[: -len(suffix)]
    return base.endswith("Async") and any(
        base.startswith(p) for p in ("cudaMemcpy", "cudaMemset", "hipMemcpy", "hipMemset", "cuMemcpy", "cuMemset"))


def is_dataloader(name):
    return name.startswith("enumerate(DataLoader)") or (name.startswith("enumerate(") and name.endswith(".__next__"))


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        doc = json.load(f, parse_float=Decimal)
    return doc["traceEvents"] if isinstance(doc, dict) else doc


def device_pids(events):
    pids = set()
    for e in events:
        if e.get("cat") in DEVICE_CATS or e.get("cat") in ("gpu_user_annotation", "cuda_sync"):
            pids.add(e.get("pid"))
        if e.get("ph") == "M" and e.get("name") == "process_labels":
            label = str((e.get("args") or {}).get("labels", ""))
            if label.startswith("GPU"):
                pids.add(e.get("pid"))
    return pids


def classify(events):
    gpu = device_pids(events)
    has_device = bool(gpu)
    half_ops = set()
    for e in events:
        if e.get("cat") == "cpu_op":
            types = json.dumps((e.get("args") or {}).get("Input type", ""))
            if "c10::Half" in types or "c10::BFloat16" in types:
                ext = (e.get("args") or {}).get("External id")
                if ext is not None:
                    half_ops.add(ext)
    spans = []
    for e in events:
        if e.get("ph") != "X" or "dur" not in e:
            continue
        ts, dur = Decimal(e["ts"]), Decimal(e["dur"])
        if dur <= 0:
            continue
        name, cat = e.get("name", ""), e.get("cat")
        kind = None
        if e.get("pid") in gpu:
            if cat in ("kernel", "Kernel"):
                if name[:4].lower() == "nccl":
                    kind = "device_collectives"
                else:
                    ext = (e.get("args") or {}).get("External id")
                    low = name.lower()
                    half = ext in half_ops or any(s in low for s in ("fp16", "bf16", "half", "bfloat16"))
                    kind = "device_compute_16" if half else "device_compute_32"
            elif cat in ("gpu_memset", "Memset"):
                kind = "device_compute_32"
            elif cat in ("gpu_memcpy", "Memcpy"):
                rest = name[len("Memcpy"):].strip().split(" ")[0] if name.startswith("Memcpy") else ""
                kind = {"HtoD": "host_to_device", "H2D": "host_to_device", "DtoH": "device_to_host",
                        "D2H": "device_to_host", "HtoH": "host_to_host", "H2H": "host_to_host"}.get(
                            rest, "device_to_device")
        else:
            if cat == "user_annotation" and is_dataloader(name):
                kind = "host_wait_input"
            elif cat in ("cpu_op", "Operator"):
                kind = "host_compute"
            elif cat in ("cuda_runtime", "Runtime", "cuda_driver") and is_launch(name):
                kind = "host_prepare" if has_device else "host_compute"
        if kind:
            spans.append((ts, ts + dur, kind))
    return spans


def steps_of(events):
    steps, seen = [], set()
    for e in sorted((e for e in events if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")),
                    key=lambda e: Decimal(e["ts"])):
        try:
            number = int(e["name"][len("ProfilerStep#"):])
        except ValueError:
            continue
        if e.get("pid") in device_pids(events) or number in seen:
            continue
        seen.add(number)
        steps.append((number, Decimal(e["ts"]), Decimal(e["ts"]) + Decimal(e.get("dur", 0))))
    return steps


def breakdown(spans, begin, end):
    points = []
    for b, e, kind in spans:
        if e <= begin or b >= end:
            continue
        points.append((max(b, begin), 1, RANK[kind]))
        points.append((min(e, end), -1, RANK[kind]))
    points.sort()
    active = [0] * len(PRIORITY)
    times = {name: Decimal(0) for name in PRIORITY}
    last = begin
    for t, delta, rank in points:
        top = max((i for i, n in enumerate(active) if n > 0), default=0)
        times[PRIORITY[top]] += t - last
        last = t
        active[rank] += delta
    times["unknown"] += end - last
    return times


def trace_files(path):
    if os.path.isfile(path):
        return [path]
    return sorted(os.path.join(path, f) for f in os.listdir(path) if ".json" in f)


def main():
    out, inputs = sys.argv[1], sys.argv[2:]
    result = {}
    for target in inputs:
        for path in trace_files(target):
            events = load(path)
            spans = classify(events)
            dataloader = [(Decimal(e["ts"]), Decimal(e["dur"])) for e in events
                          if e.get("ph") == "X" and e.get("cat") == "user_annotation" and is_dataloader(e.get("name", ""))]
            rows = []
            for number, begin, end in steps_of(events):
                times = breakdown(spans, begin, end)
                wait = sum((d for t, d in dataloader if begin <= t < end), Decimal(0))
                rows.append({
                    "step": number,
                    "duration_us": float(end - begin),
                    "dataloader_wait_us": float(wait),
                    "categories_us": {k: float(v) for k, v in times.items() if v},
                })
            result[path] = rows
    with open(out, "w") as f:
        json.dump(result, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
