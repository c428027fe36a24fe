#!/usr/bin/env python3
"""Writes a synthetic Nsight Systems SQLite export for benchmarks (scripts/bench): the
tables and columns nsys 2022-2026 write for CUDA kernels and runtime calls, KERNELS
kernels of 200 names on one stream, each launched by a cudaLaunchKernel 0.5 us before.

Usage: scripts/gen_nsys_export.py OUT.sqlite [KERNELS]   (default 1,000,000: about 90 MB)
Not real data: the real exports mlprof is tested on are in tests/data/nsys/.
"""
import os
import sqlite3
import sys

out = sys.argv[1]
kernels = int(sys.argv[2]) if len(sys.argv) > 2 else 1_000_000
if os.path.exists(out):
    os.remove(out)
db = sqlite3.connect(out)
db.executescript("""
CREATE TABLE StringIds(id INTEGER PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE TARGET_INFO_SESSION_START_TIME(utcEpochNs INTEGER, utcTime TEXT, localTime TEXT);
INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (1700000000000000000, '', '');
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL(start INTEGER, end INTEGER, deviceId INTEGER,
  contextId INTEGER, streamId INTEGER, correlationId INTEGER, globalPid INTEGER,
  demangledName INTEGER, shortName INTEGER, gridX INTEGER, gridY INTEGER, gridZ INTEGER,
  blockX INTEGER, blockY INTEGER, blockZ INTEGER, registersPerThread INTEGER,
  staticSharedMemory INTEGER, dynamicSharedMemory INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME(start INTEGER, end INTEGER, eventClass INTEGER,
  globalTid INTEGER, correlationId INTEGER, nameId INTEGER, returnValue INTEGER);
""")
names = [(i, f"void at::native::elementwise_kernel<128, 4, gpu_kernel_impl_{i}>(int, T3)") for i in range(200)]
db.executemany("INSERT INTO StringIds VALUES (?, ?)", names + [(1000, "cudaLaunchKernel_v7000")])
pid, tid = (1 << 48) + (4242 << 24), (1 << 48) + (4242 << 24) + 4243
db.executemany(
    "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?, 0, 1, 7, ?, ?, ?, ?, 1024, 1, 1, 128, 1, 1, 32, 0, 0)",
    ((i * 3000 + 500, i * 3000 + 2500, i, pid, i % 200, i % 200) for i in range(kernels)),
)
db.executemany(
    "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, 0, ?, ?, 1000, 0)",
    ((i * 3000, i * 3000 + 400, tid, i) for i in range(kernels)),
)
db.commit()
db.close()
print(f"{out}: {kernels} kernels, {os.path.getsize(out) / 1e6:.1f} MB")
