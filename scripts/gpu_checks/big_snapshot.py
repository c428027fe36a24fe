"""A large real PyTorch CUDA memory snapshot (issue 24's speed goal on real data).

A 32-layer MLP (width 256, batch 64) trains with AdamW for --seconds while
torch.cuda.memory._record_memory_history(max_entries=--entries, stacks="python")
records; the snapshot is dumped to PATH. Prints one REPORT line of JSON.
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.nn as nn


def main():
    p = argparse.ArgumentParser()
    p.add_argument("path")
    p.add_argument("--seconds", type=float, default=30)
    p.add_argument("--entries", type=int, default=7_000_000)
    a = p.parse_args()
    dev = torch.device("cuda")
    torch.cuda.memory._record_memory_history(max_entries=a.entries, stacks="python")
    layers = []
    for _ in range(32):
        layers += [nn.Linear(256, 256), nn.GELU()]
    model = nn.Sequential(*layers).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    steps, start = 0, time.time()
    while time.time() - start < a.seconds:
        x = torch.randn(64, 256, device=dev)
        model(x).square().mean().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        steps += 1
    torch.cuda.synchronize()
    t0 = time.time()
    torch.cuda.memory._dump_snapshot(a.path)
    print("REPORT", json.dumps({"steps": steps, "dump_s": round(time.time() - t0, 1),
                                "bytes": os.path.getsize(a.path), "torch": torch.__version__}), flush=True)


if __name__ == "__main__":
    sys.exit(main())
