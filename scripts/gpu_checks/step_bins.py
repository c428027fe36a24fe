"""Median step time per stretch of a run, from torch_train.py --stamps files.

usage: step_bins.py [--bin S] STAMPS.json...
Prints, per file, the number of steps, the whole run's median, and the median of each
S-second stretch (2 s by default) from the first timed step, with its count: a trace, or
a cost that starts with one and lasts to the job's exit, shows as a change between
stretches of one process, which two separate runs (±20 % apart on a GPU) cannot show.
"""
import json
import statistics
import sys


def main(args):
    width = 2.0
    if args[:1] == ["--bin"]:
        width, args = float(args[1]), args[2:]
    for path in args:
        stamps = json.load(open(path))
        if not stamps:
            print(f"{path}: no steps")
            continue
        first = stamps[0][0] - stamps[0][1]
        stretches = {}
        for end, length in stamps:
            stretches.setdefault(int((end - first) // width), []).append(length)
        whole = statistics.median(length for _, length in stamps)
        cells = " ".join(f"{width * k:g}:{1000 * statistics.median(v):.1f}({len(v)})"
                         for k, v in sorted(stretches.items()))
        print(f"{path}: {len(stamps)} steps, median {1000 * whole:.2f} ms; by {width:g} s: {cells}")


if __name__ == "__main__":
    main(sys.argv[1:])
