"""Real PyTorch CUDA memory snapshots for mlprof fixtures (issue 24).

  pair DIR   a small transformer trains 8 steps under torch.profiler (CPU+CUDA,
             profile_memory, record_shapes, schedule wait=1 warmup=1 active=3,
             tensorboard_trace_handler(DIR/trace, worker_name="worker0")) while
             torch.cuda.memory._record_memory_history records every allocation
             with Python stacks; DIR/snapshot.pickle is dumped after the last
             step: a snapshot and a Kineto trace of the same run, one clock.
  oom FILE   an MLP trains with its batch doubling each step under a memory
             fraction (--fraction of the device) until the allocator raises
             OutOfMemoryError, then halves the batch and trains two more steps;
             the snapshot is dumped to FILE. Run it with
             PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True for the
             expandable-segment layout (segment_map/segment_unmap entries).
Prints one REPORT line of JSON (versions, sizes, the OOM message).
"""
import argparse
import inspect
import json
import os
import sys

import torch
import torch.nn as nn


def record_history(max_entries):
    """Turns on allocation history with Python stacks; annotations from all threads where supported."""
    fn = torch.cuda.memory._record_memory_history
    wanted = {"enabled": "all", "context": "all", "stacks": "python",
              "max_entries": max_entries, "global_record_annotations": True}
    accepted = inspect.signature(fn).parameters
    fn(**{k: v for k, v in wanted.items() if k in accepted})


def pair(out_dir, steps):
    os.makedirs(out_dir, exist_ok=True)
    dev = torch.device("cuda")
    record_history(200_000)
    vocab, d, seq, batch = 8000, 256, 128, 16
    layer = nn.TransformerEncoderLayer(d, 4, 4 * d, batch_first=True, dropout=0.1)
    model = nn.Sequential(nn.Embedding(vocab, d), nn.TransformerEncoder(layer, 2), nn.Linear(d, vocab)).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    g = torch.Generator().manual_seed(0)
    host = [torch.randint(0, vocab, (batch, seq + 1), generator=g).pin_memory() for _ in range(4)]
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    handler = torch.profiler.tensorboard_trace_handler(os.path.join(out_dir, "trace"), worker_name="worker0")
    sched = torch.profiler.schedule(wait=1, warmup=1, active=3)
    with torch.profiler.profile(activities=acts, schedule=sched, on_trace_ready=handler,
                                profile_memory=True, record_shapes=True) as prof:
        for step in range(steps):
            tokens = host[step % len(host)].to(dev, non_blocking=True)
            x, y = tokens[:, :-1], tokens[:, 1:]
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits = model(x)
                loss = loss_fn(logits.reshape(-1, vocab).float(), y.reshape(-1))
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            loss.item()
            prof.step()
    torch.cuda.synchronize()
    path = os.path.join(out_dir, "snapshot.pickle")
    torch.cuda.memory._dump_snapshot(path)
    return {"snapshot": path, "bytes": os.path.getsize(path),
            "max_allocated": torch.cuda.max_memory_allocated(),
            "max_reserved": torch.cuda.max_memory_reserved()}


def oom(path, fraction):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    dev = torch.device("cuda")
    record_history(100_000)
    torch.cuda.set_per_process_memory_fraction(fraction)
    width = 4096
    model = nn.Sequential(nn.Linear(1024, width), nn.GELU(), nn.Linear(width, width), nn.GELU(),
                          nn.Linear(width, 10)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)

    def train(batch):
        x = torch.randn(batch, 1024, device=dev)
        y = torch.randint(0, 10, (batch,), device=dev)
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.item()

    batch, message, largest_ok = 256, None, None
    while batch <= 1 << 22:
        try:
            train(batch)
            largest_ok = batch
            batch *= 2
        except torch.OutOfMemoryError as e:
            message = str(e).splitlines()[0]
            break
    if message is None:  # the fraction did not hold: make the device itself refuse
        try:
            torch.empty(200 << 30, dtype=torch.uint8, device=dev)
        except torch.OutOfMemoryError as e:
            message = "forced: " + str(e).splitlines()[0]
    for _ in range(2):
        train(max(256, (largest_ok or 512) // 2))
    torch.cuda.synchronize()
    torch.cuda.memory._dump_snapshot(path)
    return {"snapshot": path, "bytes": os.path.getsize(path), "oom": message,
            "largest_batch_ok": largest_ok, "failed_batch": batch,
            "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
            "max_reserved": torch.cuda.max_memory_reserved(),
            "num_ooms": torch.cuda.memory_stats().get("num_ooms")}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["pair", "oom"])
    p.add_argument("path")
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--fraction", type=float, default=0.04)
    a = p.parse_args()
    rep = pair(a.path, a.steps) if a.mode == "pair" else oom(a.path, a.fraction)
    rep.update({"mode": a.mode, "torch": torch.__version__, "device": torch.cuda.get_device_name(0)})
    print("REPORT", json.dumps(rep), flush=True)


if __name__ == "__main__":
    sys.exit(main())
