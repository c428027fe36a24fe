"""A plain Python job that keeps compiling new code, for the sampling tests of `mlprof run`.

For SECONDS (argv[1]) of wall time, it compiles `phase_K` (K = 0..8 in turn) from source
whose file is `<phase_K>` and whose busy loop is on lines K + 3 and K + 4, runs it for 20 ms and drops
it. Each new function is made of objects of the same sizes as the one dropped just
before, so Python tends to build it at the same addresses: a sampler that names frames by
where their code lives, without checking what is there now, reports one phase's name with
another's file or line. Prints `done`.
"""
import sys
import time


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
    end = time.monotonic() + seconds
    k = 0
    while time.monotonic() < end:
        source = "def phase_%d(until):\n    t = time.monotonic\n%s    while t() < until:\n        pass\n" % (
            k,
            "\n" * k,
        )
        scope = {"time": time}
        exec(compile(source, "<phase_%d>" % k, "exec"), scope)
        # Out of its globals, so that dropping it frees it at once (no cycle for the GC).
        phase = scope.pop("phase_%d" % k)
        phase(time.monotonic() + 0.02)
        del phase, scope
        k = (k + 1) % 9
    print("done")


main()
