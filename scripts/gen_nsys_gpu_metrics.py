#!/usr/bin/env python3
"""Adds Nsight Systems GPU metrics (`nsys profile --gpu-metrics-devices`) to a copy of a
real nsys SQLite export, in the tables and layout nsys writes, with samples derived
from the export's own GPU activity.

No machine here can record GPU metrics (it needs an NVIDIA GPU and nsys), so the
fixtures that test mlprof's reading of them are made this way. The layouts follow
NVIDIA's SQLite schema reference and its `nsys_recipe` code:

- `--layout new` (nsys 2023.4 and later): `TARGET_INFO_GPU_METRICS` names each
  (typeId, metricId); `GPU_METRICS` holds one row per sample and metric, `value` an
  integer; names carry their unit (`SMs Active [Throughput %]`).
- `--layout old` (nsys 2023.3 and earlier): `GENERIC_EVENTS` holds one row per sample,
  its `data` a JSON object of metric name to value; names carry no unit.

In both, a row's GPU is `typeId & 0xFF` (`TARGET_INFO_GPU.id`); `timestamp` is ns
from the session start, on the clock of the CUPTI tables. The sample at t covers
[t, t + period): its percentages are the share of that period the export's kernels
(SMs Active, SM Issue, GR Active), host-to-device copies (PCIe RX) and device-to-host
copies (PCIe TX) were running, scaled as documented below, and rounded to integers.

Usage: gen_nsys_gpu_metrics.py SRC.sqlite DST.sqlite [--layout new|old] [--hz 1000]
"""

import argparse
import json
import shutil
import sqlite3

# typeId: <Hardware ID:8><VM ID:8><Source ID:16><Event tag:24><GPU ID:8>.
TYPE_ID_BASE = (0x01 << 56) | (0x0002 << 32) | (0x000010 << 8)

# (name with unit, name without, what it follows, scale at full coverage)
METRICS = [
    ("GR Active [Throughput %]", "GR Active", "kernel", 100),
    ("SMs Active [Throughput %]", "SM Active", "kernel", 97),
    ("SM Issue [Throughput %]", "SM Issue", "kernel", 41),
    ("Tensor Active [Throughput %]", "Tensor Active", "kernel", 0),
    ("DRAM Read Bandwidth [Throughput %]", "DRAM Read Bandwidth", "kernel", 63),
    ("PCIe RX Throughput [Throughput %]", "PCIe RX Throughput", "h2d", 88),
    ("PCIe TX Throughput [Throughput %]", "PCIe TX Throughput", "d2h", 85),
    ("GPC Clock Frequency [MHz]", "GPC Clock Frequency", "clock", 0),
]

NEW_TABLES = """
CREATE TABLE TARGET_INFO_GPU_METRICS (
    -- GPU Metrics, metric names and ids.
    typeId                      INTEGER   NOT NULL,                    -- REFERENCES GENERIC_EVENT_TYPES(typeId)
    sourceId                    INTEGER   NOT NULL,                    -- REFERENCES GENERIC_EVENT_SOURCES(sourceId)
    typeName                    TEXT      NOT NULL,                    -- Name of event type.
    metricId                    INTEGER   NOT NULL,                    -- Id of metric in event; not assumed to be stable.
    metricName                  TEXT      NOT NULL                     -- Definitive name of metric.
);
CREATE TABLE GPU_METRICS (
    -- GPU Metrics, events and values.
    timestamp                   INTEGER,                               -- Event timestamp (ns).
    typeId                      INTEGER   NOT NULL,                    -- REFERENCES TARGET_INFO_GPU_METRICS(typeId) and GENERIC_EVENT_TYPES(typeId)
    metricId                    INTEGER   NOT NULL,                    -- REFERENCES TARGET_INFO_GPU_METRICS(metricId)
    value                       INTEGER   NOT NULL                     -- Counter data value
);
"""

OLD_TABLES = """
CREATE TABLE GENERIC_EVENT_SOURCES (
    sourceId                    INTEGER   NOT NULL   PRIMARY KEY,      -- Serialized GlobalId.
    data                        TEXT      NOT NULL                     -- JSON encoded generic event source description.
);
CREATE TABLE GENERIC_EVENT_TYPES (
    typeId                      INTEGER   NOT NULL   PRIMARY KEY,      -- Serialized GlobalId.
    sourceId                    INTEGER   NOT NULL,                    -- REFERENCES GENERIC_EVENT_SOURCES(sourceId)
    data                        TEXT      NOT NULL                     -- JSON encoded generic event type description.
);
CREATE TABLE GENERIC_EVENTS (
    rawTimestamp                INTEGER   NOT NULL,                    -- Raw event timestamp recorded during profiling.
    timestamp                   INTEGER,                               -- Event timestamp converted to the profiling session timeline.
    typeId                      INTEGER   NOT NULL,                    -- REFERENCES GENERIC_EVENT_TYPES(typeId)
    data                        TEXT      NOT NULL                     -- JSON encoded event data.
);
"""


def coverage(spans, start, end):
    """The share of [start, end) that `spans` (sorted, possibly overlapping) cover."""
    covered, cursor = 0, start
    for s, e in spans:
        if e <= cursor or s >= end:
            continue
        s, e = max(s, cursor), min(e, end)
        covered += e - s
        cursor = e
    return covered / (end - start)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("src")
    parser.add_argument("dst")
    parser.add_argument("--layout", choices=["new", "old"], default="new")
    parser.add_argument("--hz", type=int, default=1000)
    parser.add_argument("--gpu", type=int, default=0, help="TARGET_INFO_GPU.id of the sampled GPU")
    args = parser.parse_args()
    shutil.copyfile(args.src, args.dst)
    db = sqlite3.connect(args.dst)
    db.text_factory = bytes
    spans = {
        "kernel": sorted(db.execute("SELECT start, end FROM CUPTI_ACTIVITY_KIND_KERNEL")),
        "h2d": sorted(db.execute("SELECT start, end FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE copyKind = 1")),
        "d2h": sorted(db.execute("SELECT start, end FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE copyKind = 2")),
    }
    work = sorted(spans["kernel"] + spans["h2d"] + spans["d2h"])
    first = min(s for s, _ in work)
    last = max(e for _, e in work)
    period = 1_000_000_000 // args.hz
    # From 2 ms before the first GPU work to 2 ms after the last, and one sample before
    # the session start (negative time), which readers drop as nsys's recipes do.
    times = [-period] + list(range(first - first % period - 2_000_000, last + 2_000_000, period))
    type_id = TYPE_ID_BASE | args.gpu
    samples = []
    for t in times:
        values = {}
        for with_unit, without_unit, follows, scale in METRICS:
            if follows == "clock":
                busy = coverage(work, t, t + period) if t >= 0 else 0
                value = 2535 if busy > 0 else 210
            else:
                value = round(scale * coverage(spans[follows], t, t + period)) if t >= 0 else 0
            values[with_unit if args.layout == "new" else without_unit] = value
        samples.append((t, values))
    if args.layout == "new":
        db.executescript(NEW_TABLES)
        for metric_id, (name, _, _, _) in enumerate(METRICS):
            db.execute(
                "INSERT INTO TARGET_INFO_GPU_METRICS VALUES (?, ?, ?, ?, ?)",
                (type_id, 0x0002, f"GPU {args.gpu}", metric_id, name),
            )
        rows = [
            (t, type_id, metric_id, values[name])
            for t, values in samples
            for metric_id, (name, _, _, _) in enumerate(METRICS)
        ]
        db.executemany("INSERT INTO GPU_METRICS VALUES (?, ?, ?, ?)", rows)
    else:
        db.executescript(OLD_TABLES)
        db.execute("INSERT INTO GENERIC_EVENT_SOURCES VALUES (?, ?)", (0x0002, json.dumps({"name": "GPU Metrics"})))
        db.execute("INSERT INTO GENERIC_EVENT_TYPES VALUES (?, ?, ?)", (type_id, 0x0002, json.dumps({"gpu": args.gpu})))
        rows = [(t + 123_456_789, t, type_id, json.dumps(values)) for t, values in samples]
        db.executemany("INSERT INTO GENERIC_EVENTS VALUES (?, ?, ?, ?)", rows)
    capture = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE name = 'META_DATA_CAPTURE'")]
    if capture:
        db.execute(
            "INSERT INTO META_DATA_CAPTURE VALUES ('GPU_METRICS_OPTIONS:SAMPLING_FREQUENCY', ?)", (str(args.hz),)
        )
    db.commit()
    db.execute("VACUUM")
    db.close()


if __name__ == "__main__":
    main()
