#!/usr/bin/env python3
"""Writes a PyTorch CUDA memory snapshot (the pickle `torch.cuda.memory._dump_snapshot`
writes) of a simulated training loop, streamed opcode by opcode so that a multi-GB file
needs no memory: for mlprof's benchmarks and for the snapshot shapes no public file
with a clear licence has (expandable segments, an OOM, several devices, no times).

The layout follows PyTorch 2.8 (`segments`, `device_traces`, `allocator_settings`,
`external_annotations`; entries with `time_us` and `compile_context`), written as
CPython's pickler writes it (protocol 4, every string and container memoized, shared
frame lists referred to through the memo). The simulation keeps the trace consistent
with the final state: each step allocates activations in the step's segments and frees
them; parameters allocated before the loop stay live.

    gen_memory_snapshot.py OUT [--steps N] [--tensors-per-step K] [--devices D]
        [--expandable] [--oom] [--no-times] [--protocol P] [--start-us T]
"""

import argparse
import struct


class Writer:
    """Pickle opcodes, memoized as CPython's protocol-4 pickler does."""

    def __init__(self, out, protocol):
        self.out = out
        self.protocol = protocol
        self.memo = 0
        self.strings = {}
        self.out.write(bytes([0x80, protocol]))

    def memoize(self):
        if self.protocol >= 4:
            self.out.write(b"\x94")
        elif self.memo < 256:
            self.out.write(b"q" + bytes([self.memo]))
        else:
            self.out.write(b"r" + struct.pack("<I", self.memo))
        self.memo += 1
        return self.memo - 1

    def get(self, index):
        if index < 256:
            self.out.write(b"h" + bytes([index]))
        else:
            self.out.write(b"j" + struct.pack("<I", index))

    def string(self, text):
        """A string, memoized: the same text is written once, then referred to."""
        if text in self.strings:
            self.get(self.strings[text])
            return
        raw = text.encode()
        if self.protocol >= 4 and len(raw) < 256:
            self.out.write(b"\x8c" + bytes([len(raw)]) + raw)
        else:
            self.out.write(b"X" + struct.pack("<I", len(raw)) + raw)
        self.strings[text] = self.memoize()

    def int(self, value):
        if 0 <= value < 256:
            self.out.write(b"K" + bytes([value]))
        elif 0 <= value < 65536:
            self.out.write(b"M" + struct.pack("<H", value))
        elif -(2**31) <= value < 2**31:
            self.out.write(b"J" + struct.pack("<i", value))
        else:
            raw = value.to_bytes((value.bit_length() + 8) // 8, "little", signed=True)
            self.out.write(b"\x8a" + bytes([len(raw)]) + raw)

    def boolean(self, value):
        self.out.write(b"\x88" if value else b"\x89")

    def float(self, value):
        self.out.write(b"G" + struct.pack(">d", value))

    def dict_start(self):
        self.out.write(b"}")
        self.memoize()
        self.out.write(b"(")

    def dict_end(self):
        self.out.write(b"u")

    def list_start(self):
        self.out.write(b"]")
        index = self.memoize()
        self.out.write(b"(")
        return index

    def list_end(self):
        self.out.write(b"e")

    def stop(self):
        self.out.write(b".")


SEGMENT = 20 << 20  # the caching allocator's large-pool segment size


def step_us(args):
    """Microseconds per simulated step: room for every entry of a step."""
    return 1000 + 4 * args.tensors_per_step
STREAM = 0


def frames_list(w, frames):
    """Writes a frame list; returns its memo index for later references."""
    index = w.list_start()
    for filename, line, name in frames:
        w.dict_start()
        w.string("name")
        w.string(name)
        w.string("filename")
        w.string(filename)
        w.string("line")
        w.int(line)
        w.dict_end()
    w.list_end()
    return index


ALLOC_FRAMES = [
    ("??", 0, "torch::unwind::unwind()"),
    ("CUDACachingAllocator.cpp", 0, "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc"),
]
SITES = [
    ("train.py", 41, "forward"),
    ("train.py", 47, "forward"),
    ("model.py", 112, "attention"),
    ("model.py", 130, "mlp"),
]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--tensors-per-step", type=int, default=50)
    parser.add_argument("--devices", type=int, default=1)
    parser.add_argument("--expandable", action="store_true")
    parser.add_argument("--oom", action="store_true")
    parser.add_argument("--no-times", action="store_true")
    parser.add_argument("--protocol", type=int, default=4)
    parser.add_argument("--start-us", type=int, default=1_750_000_000_000_000,
                        help="Unix epoch microseconds of the first entry (to sit beside a trace)")
    args = parser.parse_args()

    with open(args.out, "wb", buffering=1 << 20) as out:
        w = Writer(out, args.protocol)
        w.dict_start()
        # Frame lists first would change the key order; PyTorch writes `segments`
        # first, so the stacks are written inside the first entries that use them
        # and referred to afterwards.
        stacks = {}

        def stack(site):
            if site in stacks:
                w.get(stacks[site])
            else:
                stacks[site] = frames_list(w, ALLOC_FRAMES + [SITES[site], ("train.py", 200, "main")])

        # The final state and the trace come from one simulation per device.
        devices = [simulate(device, args) for device in range(args.devices)]
        w.string("segments")
        w.list_start()
        for device, (segments, _) in enumerate(devices):
            for segment in segments:
                write_segment(w, device, segment, args, stack)
        w.list_end()
        w.string("device_traces")
        w.list_start()
        for _, entries in devices:
            w.list_start()
            for entry in entries:
                write_entry(w, entry, args, stack)
            w.list_end()
        w.list_end()
        w.string("allocator_settings")
        w.dict_start()
        w.string("PYTORCH_CUDA_ALLOC_CONF")
        w.string("expandable_segments:True" if args.expandable else "")
        w.string("max_split_size")
        w.int(-1)
        w.string("garbage_collection_threshold")
        w.float(0.0)
        w.string("expandable_segments")
        w.boolean(args.expandable)
        w.dict_end()
        w.string("external_annotations")
        w.list_start()
        base = args.start_us
        for step in range(args.steps):
            span = step_us(args)
            for stage, at in (("START", step * span), ("END", step * span + span - 10)):
                w.dict_start()
                w.string("stage")
                w.string(stage)
                w.string("name")
                w.string(f"ProfilerStep#{step}")
                w.string("device")
                w.int(0)
                w.string("time_us")
                w.int(base + at)
                w.dict_end()
        w.list_end()
        w.dict_end()
        w.stop()


def simulate(device, args):
    """The segments at the end and the trace entries of one device's loop."""
    base = args.start_us
    address = 0x7F0000000000 + (device << 36)
    entries = []
    params = []  # (address, size, site)
    # Parameters: one segment, allocated before the loop, live at the end.
    segment_address = address
    entries.append(("segment_map" if args.expandable else "segment_alloc", segment_address, SEGMENT, None, base))
    offset = 0
    for i in range(4):
        size = 1 << 20
        entries.append(("alloc", segment_address + offset, size, 0, base + 1 + i))
        params.append((segment_address + offset, size, 0))
        offset += size
    # Each step: activations in a second segment, all freed at the step's end.
    work = address + SEGMENT
    entries.append(("segment_map" if args.expandable else "segment_alloc", work, SEGMENT, None, base + 10))
    for step in range(args.steps):
        t = base + step * step_us(args) + 20
        live = []
        used = 0
        for k in range(args.tensors_per_step):
            size = 512 * (1 + (k * 7 + step) % 64)
            if used + size > SEGMENT:
                break
            entries.append(("alloc", work + used, size, 1 + k % 3, t + k))
            live.append((work + used, size, 1 + k % 3))
            used += size
        for j, (addr, size, site) in enumerate(reversed(live)):
            at = t + args.tensors_per_step + 2 * j
            entries.append(("free_requested", addr, size, site, at))
            entries.append(("free_completed", addr, size, site, at + 1))
    end = base + args.steps * step_us(args)
    if args.oom:
        entries.append(("oom", 0, 80 << 30, None, end))
    segments = [
        (segment_address, params, 4 * (1 << 20)),
        (work, [], 0),
    ]
    return segments, entries


def write_segment(w, device, segment, args, stack):
    address, live, used = segment
    w.dict_start()
    for key, value in (
        ("device", device),
        ("address", address),
        ("total_size", SEGMENT),
        ("allocated_size", used),
        ("active_size", used),
        ("requested_size", used),
        ("stream", STREAM),
    ):
        w.string(key)
        w.int(value)
    w.string("segment_type")
    w.string("large")
    w.string("segment_pool_id")
    w.int(0)
    w.int(0)
    w.out.write(b"\x86")
    w.memoize()
    w.string("is_expandable")
    w.boolean(args.expandable)
    w.string("frames")
    stack(0)
    w.string("blocks")
    w.list_start()
    offset = 0
    for addr, size, site in live:
        write_block(w, addr, size, "active_allocated", lambda: stack(site))
        offset += size
    if offset < SEGMENT:
        write_block(w, address + offset, SEGMENT - offset, "inactive", lambda: empty_list(w))
    w.list_end()
    w.dict_end()


def empty_list(w):
    w.list_start()
    w.list_end()


def write_block(w, address, size, state, frames):
    w.dict_start()
    w.string("address")
    w.int(address)
    w.string("size")
    w.int(size)
    w.string("requested_size")
    w.int(size)
    w.string("state")
    w.string(state)
    w.string("frames")
    frames()
    w.dict_end()


def write_entry(w, entry, args, stack):
    action, address, size, site, time_us = entry
    w.dict_start()
    w.string("action")
    w.string(action)
    if action == "oom":
        w.string("device_free")
        w.int(95 << 20)
    else:
        w.string("addr")
        w.int(address)
    w.string("size")
    w.int(size)
    w.string("stream")
    w.int(STREAM)
    if not args.no_times:
        w.string("time_us")
        w.int(time_us)
    w.string("compile_context")
    w.string("N/A")
    w.string("frames")
    if site is None:
        empty_list(w)
    else:
        stack(site)
    w.dict_end()


if __name__ == "__main__":
    main()
