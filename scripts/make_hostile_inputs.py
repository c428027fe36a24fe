#!/usr/bin/env python3
"""Writes the resource-exhaustion inputs of issue 17 that scripts/bench measures.

    scripts/make_hostile_inputs.py DIR

- empty_lines.xplane.pb   one plane holding 4 M empty XLines (8 MB)
- empty_planes.xplane.pb  4 M empty XPlanes (8 MB)
- threads_1m.json         a Kineto trace with one event on each of 10^6 threads
- names_1m.json, names_2m.json  10^6 / 2*10^6 events named n0, n1, ... (interning)
- long_names_80k.json     80,000 distinct 140-byte names that differ only in the middle
- bomb.json.gz            10 GiB of zeros, gzipped (about 10 MB)
Each is made once; existing files are kept.
"""
import gzip
import os
import sys
import zlib

out = sys.argv[1]
os.makedirs(out, exist_ok=True)


def made(name):
    path = os.path.join(out, name)
    return path, os.path.exists(path)


def varint(n):
    b = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            b.append(byte | 0x80)
        else:
            b.append(byte)
            return bytes(b)


path, done = made("empty_lines.xplane.pb")
if not done:
    plane = b"\x1a\x00" * 4_000_000  # XPlane.lines (3), each empty
    with open(path, "wb") as f:
        f.write(b"\x0a" + varint(len(plane)) + plane)  # XSpace.planes (1)

path, done = made("empty_planes.xplane.pb")
if not done:
    with open(path, "wb") as f:
        f.write(b"\x0a\x00" * 4_000_000)


def trace(path, events):
    with open(path, "w") as f:
        f.write('{"traceEvents": [\n')
        first = True
        for e in events:
            if not first:
                f.write(",\n")
            first = False
            f.write(e)
        f.write("\n]}\n")


path, done = made("threads_1m.json")
if not done:
    trace(path, ('{"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": %d, "ts": %d, "dur": 1}' % (i, i)
                 for i in range(1_000_000)))

for count, name in ((1_000_000, "names_1m.json"), (2_000_000, "names_2m.json")):
    path, done = made(name)
    if not done:
        trace(path, ('{"ph": "X", "cat": "cpu_op", "name": "n%d", "pid": 1, "tid": 1, "ts": %d, "dur": 1}' % (i, 2 * i)
                     for i in range(count)))

path, done = made("long_names_80k.json")
if not done:
    trace(path, ('{"ph": "X", "cat": "kernel", "name": "%s%06d%s", "pid": 0, "tid": 7, "ts": %d, "dur": 1}'
                 % ("void kernel<float>(" + "a" * 48, i, "b" * 70 + ")", 2 * i) for i in range(80_000)))

path, done = made("bomb.json.gz")
if not done:
    chunk = b"\0" * (1 << 20)
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    with open(path, "wb") as f:
        for _ in range(10 * 1024):
            f.write(compressor.compress(chunk))
        f.write(compressor.flush())
