"""A plain PyTorch training loop on one thread, with no profiler code and no DataLoader
workers, for `mlprof run` tests that need nothing else running beside the loop.

A small MLP on one random batch and an SGD optimizer, a step every 2 ms or so (each
followed by a 1 ms pause, as if waiting for input), run for SECONDS (argv[1], default 20)
of wall time; prints `steps N` at the end.
"""
import sys
import time

import torch


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 20.0
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = torch.nn.CrossEntropyLoss()
    x, y = torch.randn(64, 64), torch.randint(0, 10, (64,))
    steps, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        optimizer.zero_grad()
        loss_fn(model(x), y).backward()
        optimizer.step()
        steps += 1
        time.sleep(0.001)
    print("steps", steps, flush=True)


if __name__ == "__main__":
    main()
