"""A plain Python job with no profiler code, for the sampling tests of `mlprof run` and
`mlprof attach`.

The main thread spends its time in `hot_spin` for SECONDS (argv[1]) of wall time while
a thread named `waiter` sleeps (in `time.sleep`, so only the OS's thread state says it
idles); with `workers` as argv[2], two forked worker processes
spin in `worker_spin` meanwhile. Prints `ready` once running (for attach) and `done`.
"""
import multiprocessing
import sys
import threading
import time


def hot_spin(n):
    total = 0
    for i in range(n):
        total += i * i
    return total


def worker_spin(seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        hot_spin(5000)


def waiter(stop):
    # time.sleep leaves no Python frame of its own: only the OS can tell this thread idles.
    while not stop.is_set():
        time.sleep(0.05)


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
    workers = []
    if len(sys.argv) > 2 and sys.argv[2] == "workers":
        context = multiprocessing.get_context("fork")
        workers = [context.Process(target=worker_spin, args=(seconds,)) for _ in range(2)]
        for worker in workers:
            worker.start()
    stop = threading.Event()
    threading.Thread(target=waiter, args=(stop,), name="waiter", daemon=True).start()
    print("ready", flush=True)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        hot_spin(20000)
    stop.set()
    for worker in workers:
        worker.join()
    print("done", flush=True)


if __name__ == "__main__":
    main()
