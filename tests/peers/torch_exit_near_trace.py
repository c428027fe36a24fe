"""A plain PyTorch training loop on one thread (as torch_one_thread_loop.py) that exits at a
chosen moment of the Kineto trace `mlprof run` hands it, for the tests of a job that exits
as its trace starts or ends.

The moment is MOMENT (argv[1]: `start` or `end`) plus OFFSET seconds (argv[2], negative for
before), as `torch-PID.window` in the run's private directory ($MLPROF_RUN_DIR) says; the
loop gives up after 90 s without one. Prints `steps N` at the end, and the moment it aimed at
with how far off it exited.
"""
import json
import os
import sys
import time

import torch


def aimed_exit(moment, offset):
    """When to exit (Unix time), once mlprof has announced the trace; else None."""
    window = os.path.join(os.environ.get("MLPROF_RUN_DIR", ""), "torch-%d.window" % os.getpid())
    try:
        with open(window) as f:
            announced = json.load(f)
    except (OSError, ValueError):
        return None
    return float(announced["starts_unix_s" if moment == "start" else "ends_unix_s"]) + offset


def main():
    moment, offset = sys.argv[1], float(sys.argv[2])
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = torch.nn.CrossEntropyLoss()
    x, y = torch.randn(64, 64), torch.randint(0, 10, (64,))
    steps, give_up, exit_at = 0, time.monotonic() + 90, None
    while time.monotonic() < give_up and (exit_at is None or time.time() < exit_at):
        optimizer.zero_grad()
        loss_fn(model(x), y).backward()
        optimizer.step()
        steps += 1
        time.sleep(0.001)
        if exit_at is None and steps % 50 == 0:
            exit_at = aimed_exit(moment, offset)
    print("steps", steps, flush=True)
    late = "no trace announced" if exit_at is None else "%.2f s after it" % (time.time() - exit_at)
    print("exited at the trace's %s %+.1f s: %s" % (moment, offset, late), flush=True)


if __name__ == "__main__":
    main()
