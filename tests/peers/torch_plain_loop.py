"""A plain PyTorch training loop with no profiler code, for `mlprof run` tests.

A small MLP on random batches from a DataLoader with 2 worker processes, normalised by a
prefetching thread (torch ops on a second thread), and an SGD optimizer, run for SECONDS
(argv[1], default 20) of wall time; prints `steps N` at the end.
"""
import queue
import sys
import threading
import time

import torch
from torch.utils.data import DataLoader, TensorDataset


def prefetch(loader, out, stop):
    while not stop.is_set():
        for x, y in loader:
            x = (x - x.mean(dim=0)) / (x.std(dim=0) + 1e-6)
            while not stop.is_set():
                try:
                    out.put((x, y), timeout=0.1)
                    break
                except queue.Full:
                    pass
            if stop.is_set():
                return


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 20.0
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(4096, 64), torch.randint(0, 10, (4096,)))
    loader = DataLoader(data, batch_size=64, shuffle=True, num_workers=2, persistent_workers=True)
    batches, stop = queue.Queue(maxsize=4), threading.Event()
    prefetcher = threading.Thread(target=prefetch, args=(loader, batches, stop), daemon=True)
    prefetcher.start()
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = torch.nn.CrossEntropyLoss()
    steps, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        x, y = batches.get()
        optimizer.zero_grad()
        loss_fn(model(x), y).backward()
        optimizer.step()
        steps += 1
    stop.set()
    prefetcher.join()
    print("steps", steps, flush=True)


if __name__ == "__main__":
    main()
