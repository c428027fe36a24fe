#!/usr/bin/env python3
"""Derive an XLA-GPU-shaped XSpace from the real JAX CPU profile.

There is no real GPU capture yet, so this script builds a test input for the
XLA GPU path (kernels that carry `hlo_op` / `hlo_module` / `program_id`, named
and categorised from the HLO protos of `/host:metadata`) out of the real JAX
0.10.2 CPU profile of `tests/data/xspace/jax_profile/`. The host events and the
HLO protos stay real; the `/device:GPU:0` plane is SYNTHESISED.

Exact command (from the repository root; deterministic, no randomness):

    target/tf-venv/bin/python scripts/make_xla_gpu_xspace.py

Options: `--input` (default: the jax_profile xplane.pb) and `--output`
(default: tests/data/xspace/jax_gpu_xla/logdir/plugins/profile/
2026_11_21_19_24_59/vm.xplane.pb). `--check-only PATH` runs the checker on an
existing file. The XSpace protos come from TensorFlow's
`tensorflow.tsl.profiler.protobuf.xplane_pb2`, the HLO protos from
`tensorflow.compiler.xla.service.hlo_pb2`.

What is written (all times integer picoseconds):

- every original plane unchanged, except that `/host:CPU` gains one launch event
  per device event (below) on existing lines; no original event is changed;
- a new plane `/device:GPU:0` with the device-capability plane stats the CUPTI
  collector writes (`device_vendor`, `clock_rate` kHz, `core_count` SMs,
  `memory_bandwidth` B/s, `memory_size` B, `compute_cap_major`,
  `compute_cap_minor`) for an H100 SXM5 80 GB;
- line `Stream #7(Kernel)` (id 7): for every host event with an `hlo_op` stat,
  in time order, one kernel: name = the HLO instruction name sanitised the way
  XLA names GPU kernels (every character outside [A-Za-z0-9_] becomes `_`), or a
  cuBLAS/CUTLASS-style GEMM name for dot/convolution instructions, instructions
  whose name contains dot/gemm/conv, and fusions whose fused computation holds a
  dot or convolution (two of the three GEMM names used contain a pattern of
  XProf's `IsKernelUsingTensorCore`); stats `hlo_op`, `hlo_module`, `program_id`
  copied from the host event (same value types), `correlation_id` (uint),
  `context_id`, `theoretical_occupancy_pct`, `occupancy_min_grid_size`,
  `occupancy_suggested_block_size` and `kernel_details`
  (`regs:N static_shared:N dynamic_shared:N grid:x,y,z block:x,y,z occ_pct:P`,
  derived from the instruction's output shape and kind). Kernel start = host
  start + 2 us, duration = half the host duration (at least 1 us), pushed back so
  that no two kernels overlap;
- line `Stream #13(MemcpyH2D)` (id 13): at the start of each of the 10 `train`
  steps one `MemcpyH2D` copy of the input batch (`kind_src:pageable
  kind_dst:device size:N dest:0 async:0`), and in the second step (step_num 3,
  which XProf's step tables number 1: they leave out the first and the last of
  the 10 steps) one more copy spelled the old way, `MemcpyHtoD`, with
  `memcpy_details` `num_bytes:N` (the labels), right after that step's
  `MemcpyH2D`;
- launch events: for each kernel a `cudaLaunchKernel`, for each copy a
  `cudaMemcpyAsync`, on the host line of the event it came from (for copies: the
  python line, inside the `train` step event), nested inside that event, with
  `correlation_id` (same value as the device event) and `device_id` = 0. A launch
  starts at the host event start (the second copy launch of a step right after
  the first) and lasts min(1 us, room), where room ends at the next event of the
  line, at the end of every event enclosing the start, and 1 ns before the end
  of the event it comes from; a launch with no room is skipped (and counted).

The checker (always run on the written file) verifies: every line sorted by
(offset, -duration); no partial overlap on any line; no overlap between the
kernels of the stream; unique correlation ids; every device event has exactly
one launch with the same correlation id and `device_id` 0; unique metadata ids;
the original planes unchanged and the original `/host:CPU` events all present.
"""

import argparse
import copy
import math
import os
import re
import sys
import zlib

from tensorflow.compiler.xla.service import hlo_pb2
from tensorflow.tsl.profiler.protobuf import xplane_pb2

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUN = "2026_11_21_19_24_59"
DEFAULT_INPUT = os.path.join(
    REPO, "tests/data/xspace/jax_profile/logdir/plugins/profile", RUN, "vm.xplane.pb")
DEFAULT_OUTPUT = os.path.join(
    REPO, "tests/data/xspace/jax_gpu_xla/logdir/plugins/profile", RUN, "vm.xplane.pb")

PS_PER_US = 1_000_000
LAUNCH_LATENCY_PS = 2 * PS_PER_US
MIN_KERNEL_PS = 1 * PS_PER_US
MAX_LAUNCH_PS = 1 * PS_PER_US
STRICTLY_INSIDE_PS = 1000
KERNEL_LINE_ID = 7
COPY_LINE_ID = 13
DEVICE_ID = 0
CONTEXT_ID = "$$1"  # how the CUPTI collector writes context ids
FIRST_CORRELATION_ID = 1001
# Index (in time order) of the train step that also gets the old-spelling copy.
OLD_SPELLING_STEP_INDEX = 1

# H100 SXM5 80 GB as CUDA reports it (CU_DEVICE_ATTRIBUTE_*): 132 SMs, 1980 MHz
# boost clock, HBM3 at 2619 MHz on a 5120-bit bus; the collector writes
# memory_bandwidth = 2 * mem_clock_khz * 1000 * bus_width_bits / 8.
H100_CLOCK_RATE_KHZ = 1_980_000
H100_CORE_COUNT = 132
H100_MEM_CLOCK_KHZ = 2_619_000
H100_BUS_WIDTH_BITS = 5120
H100_MEMORY_BANDWIDTH = 2 * H100_MEM_CLOCK_KHZ * 1000 * H100_BUS_WIDTH_BITS // 8
H100_MEMORY_SIZE = 85_045_264_384  # cuDeviceTotalMem of an 80 GB part

# GEMM kernel names, used in turn for the GEMM-like instructions (in order of
# first execution). The first two contain patterns of XProf's
# IsKernelUsingTensorCore ("xmma_gemm", "s1688"); the third (SIMT SGEMM) does not.
GEMM_KERNELS = (
    ("sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1"
     "_execute_segment_k_off_kernel__5x_cublas", 168, 0, 98304, (384, 1, 1), 128, 128),
    ("cutlass_80_tensorop_s1688gemm_64x64_16x6_nn_align4", 232, 0, 73728, (128, 1, 1), 64, 64),
    ("cutlass_80_simt_sgemm_128x64_8x5_nn_align1", 122, 0, 61440, (256, 1, 1), 128, 64),
)


def stat_name_map(plane):
  return {k: v.name for k, v in plane.stat_metadata.items()}


def stat_by_name(event, names):
  out = {}
  for st in event.stats:
    n = names.get(st.metadata_id)
    if n is not None:
      out[n] = st
  return out


def ref_or_str(st, plane):
  kind = st.WhichOneof("value")
  if kind == "ref_value":
    return plane.stat_metadata[st.ref_value].name
  if kind == "str_value":
    return st.str_value
  return None


def int_value(st):
  kind = st.WhichOneof("value")
  return getattr(st, kind) if kind in ("int64_value", "uint64_value") else None


class MetadataIds:
  """Hands out unique event/stat metadata ids on one plane, reusing names."""

  def __init__(self, plane):
    self.plane = plane
    self.next_stat = max(plane.stat_metadata, default=0) + 1
    self.next_event = max(plane.event_metadata, default=0) + 1
    self.stat_ids = {v.name: k for k, v in plane.stat_metadata.items()}
    self.event_ids = {v.name: k for k, v in plane.event_metadata.items()}

  def stat(self, name):
    if name not in self.stat_ids:
      md = self.plane.stat_metadata[self.next_stat]
      md.id = self.next_stat
      md.name = name
      self.stat_ids[name] = self.next_stat
      self.next_stat += 1
    return self.stat_ids[name]

  def event(self, name):
    if name not in self.event_ids:
      md = self.plane.event_metadata[self.next_event]
      md.id = self.next_event
      md.name = name
      self.event_ids[name] = self.next_event
      self.next_event += 1
    return self.event_ids[name]


def add_stat(stats, ids, name, value, kind):
  """Appends a stat to a repeated XStat field; kind "ref" stores value as a
  stat-metadata name (as the CUPTI collector does for strings it interns)."""
  st = stats.add()
  st.metadata_id = ids.stat(name)
  if kind == "ref":
    st.ref_value = ids.stat(value)
  else:
    setattr(st, kind + "_value", value)


# ---------------------------------------------------------------- HLO protos

def shape_elements(shape):
  if shape.tuple_shapes:
    return max((shape_elements(t) for t in shape.tuple_shapes), default=1)
  return math.prod(shape.dimensions) if shape.dimensions else 1


def load_hlo_instructions(metadata_plane):
  """program_id -> instruction name -> (opcode, elements, is_gemm_like, op_name)."""
  names = stat_name_map(metadata_plane)
  out = {}
  for em in metadata_plane.event_metadata.values():
    stats = {names[s.metadata_id]: s for s in em.stats}
    if "Hlo Proto" not in stats:
      continue
    proto = hlo_pb2.HloProto()
    proto.ParseFromString(stats["Hlo Proto"].bytes_value)
    program_id = int_value(stats["program_id"]) if "program_id" in stats else em.id
    comps = {c.id: c for c in proto.hlo_module.computations}
    instrs = {}
    for comp in proto.hlo_module.computations:
      for ins in comp.instructions:
        fused_gemm = ins.opcode == "fusion" and any(
            x.opcode in ("dot", "convolution")
            for cid in ins.called_computation_ids if cid in comps
            for x in comps[cid].instructions)
        gemm_like = (ins.opcode in ("dot", "convolution") or fused_gemm
                     or any(w in ins.name for w in ("dot", "gemm", "conv")))
        instrs[ins.name] = (ins.opcode, shape_elements(ins.shape), gemm_like,
                            ins.metadata.op_name)
    out[program_id] = instrs
  return out


# ------------------------------------------------------------- kernel shapes

def sanitize_kernel_name(hlo_op):
  return re.sub(r"[^A-Za-z0-9_]", "_", hlo_op)


def occupancy_pct(regs, threads_per_block, shared_bytes):
  """Theoretical occupancy on an sm_90 SM (64 K regs, 2048 threads, 32 blocks, 228 KiB)."""
  warps = math.ceil(threads_per_block / 32)
  regs_per_block = warps * 32 * max(regs, 1)
  by_regs = 65536 // regs_per_block if regs_per_block else 32
  by_threads = 2048 // threads_per_block
  by_shared = (233472 // shared_bytes) if shared_bytes else 32
  blocks = max(0, min(by_regs, by_threads, by_shared, 32))
  return round(100.0 * blocks * threads_per_block / 2048, 1)


def kernel_launch_shape(hlo_op, opcode, elements, gemm_index):
  """(kernel name, regs, static_shared, dynamic_shared, grid, block, occ_pct)."""
  if gemm_index is not None:
    name, regs, static_sh, dyn_sh, block, tile_m, tile_n = GEMM_KERNELS[gemm_index % 3]
    side = max(1, int(math.isqrt(max(elements, 1))))
    grid = (max(1, math.ceil(side / tile_m)), max(1, math.ceil(elements / side / tile_n)), 1)
    return name, regs, static_sh, dyn_sh, grid, block, occupancy_pct(regs, block[0], static_sh + dyn_sh)
  h = zlib.crc32(hlo_op.encode())
  block_x = 128 if elements <= 4096 else (256 if h % 2 else 512)
  grid_x = max(1, math.ceil(elements / block_x / (4 if elements > 65536 else 1)))
  regs = (16, 20, 24, 26, 32, 40)[h % 6]
  reduces = "reduce" in hlo_op or opcode == "reduce"
  static_sh = (1024 if h % 3 else 4096) if reduces else 0
  return (sanitize_kernel_name(hlo_op), regs, static_sh, 0, (grid_x, 1, 1),
          (block_x, 1, 1), occupancy_pct(regs, block_x, static_sh))


def kernel_details(regs, static_sh, dyn_sh, grid, block, occ):
  return ("regs:%d static_shared:%d dynamic_shared:%d grid:%d,%d,%d block:%d,%d,%d occ_pct:%s"
          % (regs, static_sh, dyn_sh, *grid, *block, ("%.1f" % occ).rstrip("0").rstrip(".")))


# ------------------------------------------------------------ line geometry

def line_intervals(line, base_ps):
  return [(base_ps + e.offset_ps, base_ps + e.offset_ps + e.duration_ps) for e in line.events]


def launch_room(intervals, t):
  """Longest launch [t, t+d) that neither partially overlaps an event of the line
  nor swallows an event that starts after t; 0 if an instant sits exactly at t."""
  limit = None
  for start, end in intervals:
    if start > t:
      limit = start if limit is None else min(limit, start)
    elif start == t and end == t:
      return 0
    elif end > t:
      limit = end if limit is None else min(limit, end)
  return 0 if limit is None else limit - t


# -------------------------------------------------------------------- build

def build(space):
  planes = {p.name: p for p in space.planes}
  host = planes["/host:CPU"]
  metadata = planes["/host:metadata"]
  hlo = load_hlo_instructions(metadata)
  host_names = stat_name_map(host)
  host_ids = MetadataIds(host)

  # Host events with an hlo_op stat, and the train step events, in time order.
  hlo_events = []
  steps = []
  for li, line in enumerate(host.lines):
    base = line.timestamp_ns * 1000
    for e in line.events:
      st = stat_by_name(e, host_names)
      start = base + e.offset_ps
      if "hlo_op" in st:
        hlo_events.append((start, li, e.duration_ps, st))
      if "step_num" in st:
        steps.append((start, li, e.duration_ps, int_value(st["step_num"])))
  hlo_events.sort(key=lambda x: (x[0], x[1]))
  steps.sort()
  if len(steps) != 10:
    raise SystemExit(f"expected 10 step events, found {len(steps)}")

  gpu = xplane_pb2.XPlane()
  gpu.id = 0  # the collector leaves plane ids unset, like the other planes here
  gpu.name = "/device:GPU:0"
  gids = MetadataIds(gpu)
  for name, value, kind in (
      ("device_vendor", "Nvidia", "str"),
      ("clock_rate", H100_CLOCK_RATE_KHZ, "int64"),
      ("core_count", H100_CORE_COUNT, "int64"),
      ("memory_bandwidth", H100_MEMORY_BANDWIDTH, "uint64"),
      ("memory_size", H100_MEMORY_SIZE, "uint64"),
      ("compute_cap_major", 9, "int64"),
      ("compute_cap_minor", 0, "int64"),
  ):
    add_stat(gpu.stats, gids, name, value, kind)
  line_ts_ns = min(l.timestamp_ns for l in host.lines)
  base_ps = line_ts_ns * 1000
  kernel_line = gpu.lines.add()
  kernel_line.id, kernel_line.name, kernel_line.timestamp_ns = KERNEL_LINE_ID, "Stream #7(Kernel)", line_ts_ns
  copy_line = gpu.lines.add()
  copy_line.id, copy_line.name, copy_line.timestamp_ns = COPY_LINE_ID, "Stream #13(MemcpyH2D)", line_ts_ns

  # Device events as dicts: kind, start, dur, the host line and time of the
  # launch, the span the launch must stay inside, and what names the event.
  device = []
  gemm_order = {}
  kernel_end = None
  for start, li, dur, st in hlo_events:
    hlo_op = ref_or_str(st["hlo_op"], host)
    program_id = int_value(st["program_id"])
    opcode, elements, gemm_like, _ = hlo.get(program_id, {}).get(hlo_op, ("", 1, False, ""))
    gemm_index = None
    if gemm_like:
      gemm_index = gemm_order.setdefault((program_id, hlo_op), len(gemm_order))
    shape = kernel_launch_shape(hlo_op, opcode, elements, gemm_index)
    k_start = start + LAUNCH_LATENCY_PS
    if kernel_end is not None and k_start < kernel_end:
      k_start = kernel_end
    k_dur = max(MIN_KERNEL_PS, dur // 2)
    kernel_end = k_start + k_dur
    device.append(dict(kind="kernel", start=k_start, dur=k_dur, host_line=li,
                       launch_at=start, launch_within=(start, start + dur),
                       shape=shape, host_stats=st, pushed=k_start - start - LAUNCH_LATENCY_PS))

  # Copies: input batch x[64,784] f32 each step, labels y[64] s32 once (old spelling).
  x_bytes, y_bytes = 64 * 784 * 4, 64 * 4
  copy_end = None
  for si, (s_start, li, s_dur, step_num) in enumerate(steps):
    copies = [("MemcpyH2D", "kind_src:pageable kind_dst:device size:%d dest:0 async:0" % x_bytes, x_bytes)]
    if si == OLD_SPELLING_STEP_INDEX:
      copies.append(("MemcpyHtoD", "num_bytes:%d" % y_bytes, y_bytes))
    for name, details, nbytes in copies:
      c_start = s_start + LAUNCH_LATENCY_PS
      if copy_end is not None and c_start < copy_end:
        c_start = copy_end
      c_dur = int(1.5 * PS_PER_US + nbytes * 1e12 / 12.5e9)  # ~12.5 GB/s pageable
      copy_end = c_start + c_dur
      device.append(dict(kind="copy", start=c_start, dur=c_dur, host_line=li,
                         launch_at=s_start, launch_within=(s_start, s_start + s_dur),
                         name=name, details=details, step_num=step_num))

  # Launch events on the host lines; correlation ids in launch order.
  launch_kernel_md = host_ids.event("cudaLaunchKernel")
  launch_copy_md = host_ids.event("cudaMemcpyAsync")
  intervals = {li: line_intervals(host.lines[li], host.lines[li].timestamp_ns * 1000)
               for li in {d["host_line"] for d in device}}
  device.sort(key=lambda d: (d["launch_at"], d["start"]))
  skipped = []
  launch_durations = []
  corr = FIRST_CORRELATION_ID
  last_launch_end = {}
  for d in device:
    li = d["host_line"]
    line = host.lines[li]
    lbase = line.timestamp_ns * 1000
    t = d["launch_at"]
    prev = last_launch_end.get((li, d["launch_within"]))
    if prev is not None:
      t = max(t, prev)
    # Strictly inside the event it comes from (1 ns before its end), so that no
    # launch has the same span as its parent.
    room = min(launch_room(intervals[li], t), d["launch_within"][1] - t - STRICTLY_INSIDE_PS)
    d["correlation_id"] = corr
    corr += 1
    if room <= 0:
      skipped.append(d)
      continue
    ldur = min(MAX_LAUNCH_PS, room)
    launch_durations.append(ldur)
    ev = line.events.add()
    ev.metadata_id = launch_kernel_md if d["kind"] == "kernel" else launch_copy_md
    ev.offset_ps = t - lbase
    ev.duration_ps = ldur
    add_stat(ev.stats, host_ids, "device_id", DEVICE_ID, "uint64")
    add_stat(ev.stats, host_ids, "correlation_id", d["correlation_id"], "uint64")
    add_stat(ev.stats, host_ids, "context_id", CONTEXT_ID, "str")
    intervals[li].append((t, t + ldur))
    last_launch_end[(li, d["launch_within"])] = t + ldur
  for li in intervals:
    evs = sorted(host.lines[li].events, key=lambda e: (e.offset_ps, -e.duration_ps))
    del host.lines[li].events[:]
    host.lines[li].events.extend(evs)

  # Device events.
  for d in sorted(device, key=lambda d: d["start"]):
    line = kernel_line if d["kind"] == "kernel" else copy_line
    ev = line.events.add()
    ev.offset_ps = d["start"] - base_ps
    ev.duration_ps = d["dur"]
    if d["kind"] == "kernel":
      name, regs, static_sh, dyn_sh, grid, block, occ = d["shape"]
      ev.metadata_id = gids.event(name)
      add_stat(ev.stats, gids, "correlation_id", d["correlation_id"], "uint64")
      add_stat(ev.stats, gids, "context_id", CONTEXT_ID, "str")
      add_stat(ev.stats, gids, "theoretical_occupancy_pct", float(occ), "double")
      add_stat(ev.stats, gids, "occupancy_min_grid_size", H100_CORE_COUNT * 2, "int64")
      add_stat(ev.stats, gids, "occupancy_suggested_block_size", max(block[0], 128), "int64")
      add_stat(ev.stats, gids, "kernel_details",
               kernel_details(regs, static_sh, dyn_sh, grid, block, occ), "ref")
      for key in ("hlo_op", "hlo_module", "program_id"):
        src = d["host_stats"][key]
        kind = src.WhichOneof("value")
        if kind == "ref_value":
          add_stat(ev.stats, gids, key, host.stat_metadata[src.ref_value].name, "ref")
        else:
          add_stat(ev.stats, gids, key, getattr(src, kind), kind[:-len("_value")])
    else:
      ev.metadata_id = gids.event(d["name"])
      add_stat(ev.stats, gids, "correlation_id", d["correlation_id"], "uint64")
      add_stat(ev.stats, gids, "context_id", CONTEXT_ID, "str")
      add_stat(ev.stats, gids, "memcpy_details", d["details"], "ref")

  space.planes.append(gpu)
  kernels = [d for d in device if d["kind"] == "kernel"]
  return dict(
      kernels=len(kernels),
      copies=len(device) - len(kernels),
      gemm_instructions={f"{p}/{op}": GEMM_KERNELS[i % 3][0] for (p, op), i in gemm_order.items()},
      launches_shorter_than_1us=sum(1 for x in launch_durations if x < MAX_LAUNCH_PS),
      shortest_launch_ns=min(launch_durations, default=0) / 1000,
      launches_skipped=[(d["kind"], d.get("name") or d["shape"][0], d["launch_at"]) for d in skipped],
      kernels_pushed_back=sum(1 for d in kernels if d["pushed"] > 0),
      max_push_back_us=max((d["pushed"] for d in kernels), default=0) / PS_PER_US,
  )


# ------------------------------------------------------------------ checker

def partial_overlaps(line):
  """(event, enclosing event) pairs of a sorted line where the event starts inside
  the enclosing one but ends after it; events as (metadata_id, offset, duration)."""
  out = set()
  stack = []
  for e in line.events:
    s, t = e.offset_ps, e.offset_ps + e.duration_ps
    while stack and stack[-1][1] <= s and not (stack[-1][1] == s and t == s):
      stack.pop()
    key = (e.metadata_id, s, e.duration_ps)
    if stack and t > stack[-1][1]:
      out.add((key, stack[-1][2]))
    stack.append((s, t, key))
  return out


def check(space, original=None, launches_skipped=0):
  """Returns (problems, counts); launches_skipped device events may lack a launch."""
  problems = []
  counts = {}
  planes = {p.name: p for p in space.planes}
  # The real profile already has partial overlaps (the python tracer's
  # `$profiler.py:385 __init__` frame against the `train` TraceMe it opens); they
  # are reported, and only new ones are problems.
  original_partials = {}
  if original is not None:
    for plane in original.planes:
      for line in plane.lines:
        original_partials[(plane.name, line.id)] = partial_overlaps(line)
  for plane in space.planes:
    if len(set(plane.event_metadata)) != len(plane.event_metadata) or any(
        k != v.id for k, v in plane.event_metadata.items()):
      problems.append(f"{plane.name}: event metadata ids inconsistent")
    if any(k != v.id for k, v in plane.stat_metadata.items()):
      problems.append(f"{plane.name}: stat metadata ids inconsistent")
    for line in plane.lines:
      keys = [(e.offset_ps, -e.duration_ps) for e in line.events]
      if keys != sorted(keys):
        problems.append(f"{plane.name}/{line.name}: events not sorted by (offset, -duration)")
      partial = partial_overlaps(line)
      known = original_partials.get((plane.name, line.id), set())
      if partial - known:
        problems.append(f"{plane.name}/{line.name}: {len(partial - known)} new partial overlaps")
      counts["partial_overlaps_in_real_profile"] = (
          counts.get("partial_overlaps_in_real_profile", 0) + len(partial & known))
  gpu = planes["/device:GPU:0"]
  host = planes["/host:CPU"]
  gnames, hnames = stat_name_map(gpu), stat_name_map(host)
  kernels = next(l for l in gpu.lines if l.id == KERNEL_LINE_ID)
  prev_end = None
  for e in kernels.events:
    if prev_end is not None and e.offset_ps < prev_end:
      problems.append("kernel stream: overlapping kernels")
      break
    prev_end = e.offset_ps + e.duration_ps
  device_corr = {}
  for line in gpu.lines:
    for e in line.events:
      st = stat_by_name(e, gnames)
      c = int_value(st["correlation_id"]) if "correlation_id" in st else None
      if c is None:
        problems.append(f"device event {gpu.event_metadata[e.metadata_id].name} without correlation_id")
      elif c in device_corr:
        problems.append(f"duplicate device correlation_id {c}")
      else:
        device_corr[c] = (line.name, gpu.event_metadata[e.metadata_id].name)
  launches = {}
  for line in host.lines:
    for e in line.events:
      st = stat_by_name(e, hnames)
      if "correlation_id" not in st:
        continue
      c = int_value(st["correlation_id"])
      if c in launches:
        problems.append(f"duplicate launch correlation_id {c}")
      launches[c] = (host.event_metadata[e.metadata_id].name,
                     int_value(st["device_id"]) if "device_id" in st else None)
  matched = sum(1 for c in device_corr if c in launches)
  if any(dev != DEVICE_ID for _, dev in launches.values()):
    problems.append("launch without device_id 0")
  if len(device_corr) - matched != launches_skipped:
    problems.append(f"{len(device_corr) - matched} device events without a launch "
                    f"({launches_skipped} launches were skipped for lack of room)")
  orphan_launches = sum(1 for c in launches if c not in device_corr)
  if orphan_launches:
    problems.append(f"{orphan_launches} launches without a device event")
  counts.update(
      device_events=len(device_corr),
      kernels=len(kernels.events),
      copies=len(device_corr) - len(kernels.events),
      launches=len(launches),
      device_events_with_launch=matched,
      device_events_without_launch=len(device_corr) - matched,
  )
  if original is not None:
    orig = {p.name: p for p in original.planes}
    for name, p in orig.items():
      if name == "/host:CPU":
        continue
      if planes[name].SerializeToString(deterministic=True) != p.SerializeToString(deterministic=True):
        problems.append(f"plane {name} changed")
    for ol, nl in zip(orig["/host:CPU"].lines, host.lines):
      kept = [e for e in nl.events if host.event_metadata[e.metadata_id].name
              not in ("cudaLaunchKernel", "cudaMemcpyAsync")]
      if [e.SerializeToString(deterministic=True) for e in kept] != [
          e.SerializeToString(deterministic=True) for e in ol.events]:
        problems.append(f"/host:CPU line {ol.name}: original events changed")
      if (ol.id, ol.name, ol.timestamp_ns) != (nl.id, nl.name, nl.timestamp_ns):
        problems.append(f"/host:CPU line {ol.name}: header changed")
    for k, v in orig["/host:CPU"].event_metadata.items():
      if host.event_metadata[k] != v:
        problems.append(f"/host:CPU event metadata {k} changed")
    for k, v in orig["/host:CPU"].stat_metadata.items():
      if host.stat_metadata[k] != v:
        problems.append(f"/host:CPU stat metadata {k} changed")
  return problems, counts


def main():
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--input", default=DEFAULT_INPUT)
  ap.add_argument("--output", default=DEFAULT_OUTPUT)
  ap.add_argument("--check-only", metavar="PATH")
  args = ap.parse_args()
  original = xplane_pb2.XSpace()
  with open(args.input, "rb") as f:
    original.ParseFromString(f.read())
  if args.check_only:
    space = xplane_pb2.XSpace()
    with open(args.check_only, "rb") as f:
      space.ParseFromString(f.read())
    summary = {}
  else:
    space = copy.deepcopy(original)
    summary = build(space)
    os.makedirs(os.path.dirname(args.output), exist_ok=True)
    with open(args.output, "wb") as f:
      f.write(space.SerializeToString(deterministic=True))
    reread = xplane_pb2.XSpace()
    with open(args.output, "rb") as f:
      reread.ParseFromString(f.read())
    space = reread
  problems, counts = check(space, original, len(summary.get("launches_skipped", [])))
  for k, v in summary.items():
    print(f"{k}: {v}")
  for k, v in counts.items():
    print(f"{k}: {v}")
  if not args.check_only:
    print(f"wrote {args.output} ({os.path.getsize(args.output)} bytes)")
  for p in problems:
    print("PROBLEM:", p)
  return 1 if problems else 0


if __name__ == "__main__":
  sys.exit(main())
