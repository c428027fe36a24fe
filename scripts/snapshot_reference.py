#!/usr/bin/env python3
"""Key numbers of a PyTorch memory snapshot, computed independently of mlprof.

Usage: python3 scripts/snapshot_reference.py SNAPSHOT.pickle [...]  (stdlib only)

For each device trace: entry counts per action; the state at the end (allocated =
the sizes of blocks in state `active_allocated`, reserved = the segments' total sizes);
the totals walked backwards from there through the trace (`alloc` / `free_requested`
move allocated, `segment_alloc` / `segment_map` / `segment_free` / `segment_unmap` move
reserved), which gives the bytes allocated before the trace began and, walking forward
again, the peak allocated and reserved bytes with their times; and each `oom` entry.
The snapshot is read with `pickle.load`, so only open files you trust.
"""
import collections
import json
import pickle
import sys

UP = {"alloc": (1, 0), "free_requested": (-1, 0), "segment_alloc": (0, 1), "segment_map": (0, 1),
      "segment_free": (0, -1), "segment_unmap": (0, -1)}


def device_numbers(snapshot, device, trace):
    segments = [s for s in snapshot["segments"] if s.get("device", 0) == device]
    allocated = sum(b["size"] for s in segments for b in s["blocks"] if b["state"] == "active_allocated")
    reserved = sum(s["total_size"] for s in segments)
    end = (allocated, reserved)
    for entry in reversed(trace):
        a, r = UP.get(entry["action"], (0, 0))
        allocated -= a * entry["size"]
        reserved -= r * entry["size"]
    start = (allocated, reserved)
    peak_allocated, peak_reserved = (allocated, None), (reserved, None)
    events = 0
    for entry in trace:
        a, r = UP.get(entry["action"], (0, 0))
        allocated += a * entry["size"]
        reserved += r * entry["size"]
        if entry["action"] in ("alloc", "free_requested"):
            events += 1
        if allocated > peak_allocated[0]:
            peak_allocated = (allocated, entry.get("time_us"))
        if reserved > peak_reserved[0]:
            peak_reserved = (reserved, entry.get("time_us"))
    assert (allocated, reserved) == end
    return {
        "device": device,
        "segments": len(segments),
        "blocks": sum(len(s["blocks"]) for s in segments),
        "entries": len(trace),
        "actions": dict(sorted(collections.Counter(e["action"] for e in trace).items())),
        "memory_events": events,
        "allocated_at_end": end[0],
        "reserved_at_end": end[1],
        "allocated_before_trace": start[0],
        "reserved_before_trace": start[1],
        "peak_allocated": peak_allocated[0],
        "peak_allocated_time_us": peak_allocated[1],
        "peak_reserved": peak_reserved[0],
        "peak_reserved_time_us": peak_reserved[1],
        "ooms": [{k: e.get(k) for k in ("time_us", "size", "device_free", "stream")}
                 for e in trace if e["action"] == "oom"],
        "expandable_segments": sorted({bool(s.get("is_expandable")) for s in segments}),
    }


def main():
    out = {}
    for path in sys.argv[1:]:
        with open(path, "rb") as f:
            snapshot = pickle.load(f)
        annotations = collections.Counter(a["name"].split("#")[0] for a in snapshot.get("external_annotations", [])
                                          if a.get("stage") == "START")
        out[path] = {
            "devices": [device_numbers(snapshot, d, t) for d, t in enumerate(snapshot["device_traces"]) if t],
            "annotation_ranges": dict(sorted(annotations.items())),
        }
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    sys.exit(main())
