"""A small, realistic PyTorch training job for GPU fixtures and overhead checks.

A 4-layer transformer encoder on synthetic token batches from a DataLoader
(2 worker processes, pinned memory), AdamW, `loss.item()` each step.

Modes:
  --profile LOGDIR   torch.profiler (CPU+CUDA, shapes, memory) with a schedule
                     wait=2 warmup=2 active=4 under tensorboard_trace_handler.
  --profile-all      torch.profiler active for every timed step (overhead),
                     trace not exported.
  (neither)          no profiler code at all (on-demand / injection runs).
--steps N, --seconds S (run until S elapsed), --report FILE (JSON step times),
--stamps FILE (JSON [[unix end time s, length s], ...] of every timed step).
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset


class Tokens(Dataset):
    def __init__(self, n, seq, vocab):
        self.n, self.seq, self.vocab = n, seq, vocab

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        x = torch.randint(0, self.vocab, (self.seq,), generator=g)
        return x, torch.roll(x, -1)


class Model(nn.Module):
    def __init__(self, vocab, d):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        layer = nn.TransformerEncoderLayer(d, 8, 4 * d, batch_first=True, dropout=0.1)
        self.enc = nn.TransformerEncoder(layer, 4)
        self.head = nn.Linear(d, vocab)

    def forward(self, x):
        return self.head(self.enc(self.emb(x)))


def batches(loader):
    while True:
        for b in loader:
            yield b


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--profile")
    p.add_argument("--profile-all", action="store_true")
    p.add_argument("--export", help="with --profile-all: write the trace here (Chrome JSON)")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--seconds", type=float)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--report")
    p.add_argument("--stamps")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--after-steps", type=int, default=0)
    a = p.parse_args()
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    vocab, seq, d = 8192, 256, 512
    torch.manual_seed(0)
    model = Model(vocab, d).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    loss_fn = nn.CrossEntropyLoss()
    loader = DataLoader(Tokens(100000, seq, vocab), batch_size=a.batch, num_workers=2,
                        pin_memory=(dev == "cuda"), persistent_workers=True)
    it = batches(loader)

    def step():
        x, y = next(it)
        x = x.to(dev, non_blocking=True)
        y = y.to(dev, non_blocking=True)
        with torch.autocast(dev, dtype=torch.bfloat16, enabled=(dev == "cuda")):
            out = model(x)
            loss = loss_fn(out.view(-1, vocab), y.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.item()

    for _ in range(a.warmup):
        step()
    times = []
    stamps = []
    t_start = time.perf_counter()

    def timed(n_or_none, on_step=None):
        i = 0
        while True:
            if a.seconds is not None:
                if time.perf_counter() - t_start >= a.seconds:
                    break
            elif i >= n_or_none:
                break
            t0 = time.perf_counter()
            step()
            times.append(time.perf_counter() - t0)
            stamps.append((time.time(), times[-1]))
            if on_step:
                on_step()
            i += 1

    if a.profile:
        from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                     schedule=schedule(wait=2, warmup=2, active=4, repeat=1),
                     on_trace_ready=tensorboard_trace_handler(a.profile, worker_name="worker0"),
                     record_shapes=True, profile_memory=True, with_stack=False) as prof:
            timed(a.steps, prof.step)
    elif a.profile_all:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            timed(a.steps)
        if a.export:
            prof.export_chrome_trace(a.export)
    else:
        timed(a.steps)
    after = []
    for _ in range(a.after_steps):
        t0 = time.perf_counter()
        step()
        after.append(time.perf_counter() - t0)
    if after:
        print("AFTER steps", len(after), "median_ms", 1000 * sorted(after)[len(after) // 2], flush=True)
    times.sort()
    n = len(times)
    rep = {
        "mode": "profile" if a.profile else "profile_all" if a.profile_all else "plain",
        "device": torch.cuda.get_device_name(0) if dev == "cuda" else "cpu",
        "torch": torch.__version__,
        "steps": n,
        "median_ms": 1000 * times[n // 2] if n else None,
        "mean_ms": 1000 * sum(times) / n if n else None,
        "min_ms": 1000 * times[0] if n else None,
        "env_injection": os.environ.get("CUDA_INJECTION64_PATH"),
        "kineto_daemon": os.environ.get("KINETO_USE_DAEMON"),
    }
    print("REPORT", json.dumps(rep), flush=True)
    if a.stamps:
        with open(a.stamps, "w") as f:
            json.dump(stamps, f)
    if a.report:
        with open(a.report, "w") as f:
            json.dump(rep, f)


if __name__ == "__main__":
    sys.exit(main())
