#!/usr/bin/env python3
"""Times the real `mlprof serve` path on a large trace, as a browser would use it.
Not a test: numbers go into notes. Called by scripts/bench; standard library only.

    scripts/serve_bench.py MLPROF_BIN PROFILE_PATH [VIEWS] [SEARCH_TEXT]

Starts `MLPROF_BIN serve PROFILE_PATH --port 0 --cache-dir <temp>` and measures, over
one keep-alive HTTP connection with `Accept-Encoding: gzip`:
  - the start (process spawn to the printed URL: discovery and bind);
  - the first /api/trace/meta of the first run's first host: profile load, index
    build and write to the cache;
  - the server's peak RSS then (VmHWM of /proc/PID/status);
  - VIEWS (default 200) /api/trace/view requests over all tracks at random windows
    (zoom 2^0 .. 2^-30 of the trace, width 1500 px): p50/p95/max of request to last
    byte, then gunzip + json.loads in the client, and the gzip size;
  - one /api/trace/search (SEARCH_TEXT, default "aten::") with limit 100;
then stops it (Ctrl-C), starts it again on the same cache directory and times the
first /api/trace/meta from the cache file, and the peak RSS after it.
"""
import gzip
import http.client
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse


def start(binary, profile, cache_dir):
    """The server process and its (host, port), timed from spawn to the URL line."""
    began = time.perf_counter()
    process = subprocess.Popen(
        [binary, "serve", profile, "--port", "0", "--cache-dir", cache_dir],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = process.stdout.readline().strip()
    took = time.perf_counter() - began
    if not line.startswith("mlprof serve: http://"):
        process.kill()
        sys.exit(f"unexpected first line from mlprof serve: {line!r}")
    address = urllib.parse.urlparse(line.split(": ", 1)[1])
    return process, (address.hostname, address.port), took


def stop(process):
    process.send_signal(signal.SIGINT)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def peak_rss_mb(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


class Client:
    """One keep-alive connection; `get` returns (seconds to the last byte, gzip bytes,
    seconds to gunzip + parse, parsed JSON)."""

    def __init__(self, address):
        self.connection = http.client.HTTPConnection(*address, timeout=600)

    def get(self, path, **params):
        target = path + ("?" + urllib.parse.urlencode(params) if params else "")
        began = time.perf_counter()
        self.connection.request("GET", target, headers={"Accept-Encoding": "gzip"})
        response = self.connection.getresponse()
        body = response.read()
        fetched = time.perf_counter() - began
        began = time.perf_counter()
        raw = gzip.decompress(body) if response.getheader("Content-Encoding") == "gzip" else body
        parsed = json.loads(raw)
        decoded = time.perf_counter() - began
        if response.status != 200:
            sys.exit(f"{target}: {response.status} {parsed}")
        return fetched, len(body), decoded, parsed


def ms(seconds):
    return seconds * 1e3


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p))]


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    binary, profile = sys.argv[1], sys.argv[2]
    views = int(sys.argv[3]) if len(sys.argv) > 3 else 200
    search_text = sys.argv[4] if len(sys.argv) > 4 else "aten::"
    with open("/proc/loadavg") as f:
        print(f"load average before: {' '.join(f.read().split()[:3])} ({os.cpu_count()} CPUs)")
    with tempfile.TemporaryDirectory(prefix="mlprof-serve-bench-") as cache_dir:
        process, address, took = start(binary, profile, cache_dir)
        try:
            print(f"start (spawn to URL)                  {took:8.3f} s")
            client = Client(address)
            _, _, _, runs = client.get("/api/runs")
            run = runs["runs"][0]
            where = {"run": run["name"], "host": run["hosts"][0]}
            fetched, size, _, meta = client.get("/api/trace/meta", **where)
            print(f"first meta (load + build + write)     {fetched:8.3f} s  "
                  f"{meta['events']} events, {sum(len(s['tracks']) for s in meta['sections'])} tracks")
            print(f"peak RSS after the build              {peak_rss_mb(process.pid):8.0f} MB")
            index_mb = sum(os.path.getsize(os.path.join(cache_dir, f)) for f in os.listdir(cache_dir)) / 1e6
            print(f"index file                            {index_mb:8.1f} MB")
            tracks = ",".join(str(t["id"]) for s in meta["sections"] for t in s["tracks"])
            first, last = meta["start_ps"], meta["end_ps"]
            rng = random.Random(7)
            fetch_times, decode_times, sizes = [], [], []
            for _ in range(views):
                span = max(1000, (last - first) >> rng.randint(0, 30))
                start_ps = first + rng.randint(0, max(0, last - first - span))
                fetched, size, decoded, _ = client.get(
                    "/api/trace/view", **where, start_ps=start_ps, end_ps=start_ps + span,
                    width_px=1500, tracks=tracks)
                fetch_times.append(fetched)
                decode_times.append(decoded)
                sizes.append(size)
            print(f"{views} views, request to last byte    p50 {ms(percentile(fetch_times, 0.5)):7.1f} ms  "
                  f"p95 {ms(percentile(fetch_times, 0.95)):7.1f} ms  max {ms(max(fetch_times)):7.1f} ms")
            print(f"  client gunzip + json.loads          p50 {ms(percentile(decode_times, 0.5)):7.1f} ms  "
                  f"p95 {ms(percentile(decode_times, 0.95)):7.1f} ms")
            print(f"  gzip body                           p50 {percentile(sizes, 0.5) / 1e3:7.1f} kB  "
                  f"max {max(sizes) / 1e3:7.1f} kB")
            fetched, _, _, found = client.get("/api/trace/search", **where, q=search_text, limit=100)
            print(f"search {search_text!r:<20}          {ms(fetched):8.1f} ms  {found['total']} matches")
            print(f"peak RSS at the end                   {peak_rss_mb(process.pid):8.0f} MB")
        finally:
            stop(process)
        process, address, took = start(binary, profile, cache_dir)
        try:
            client = Client(address)
            fetched, _, _, _ = client.get("/api/trace/meta", **where)
            print(f"restart: first meta from the cache    {ms(fetched):8.1f} ms  (start {took:.3f} s)")
            print(f"restart: peak RSS after it            {peak_rss_mb(process.pid):8.0f} MB")
        finally:
            stop(process)
    with open("/proc/loadavg") as f:
        print(f"load average after: {' '.join(f.read().split()[:3])}")


if __name__ == "__main__":
    main()
