#!/usr/bin/env bash
# Fourth GPU session (H100), second call, right after run11.sh: attach and the agent on the
# two GPU jobs only, 12 rounds, to narrow the intervals run11.sh left wide.
# Run from the repo root on the device machine with a stripped mlprof in .dev/mlprof.
set -u
O=${OUT:-/tmp/out}
mkdir -p "$O"
timeout 320 python3 scripts/bench_watch_cost --mlprof "$PWD/.dev/mlprof" \
  --jobs torch-gpu,jax-gpu --job-cpus 0-11 --mlprof-cpus 12-15 \
  --watch attach,agent --phase 5 --rounds 12 2>&1 | tee "$O/watch_cost4.txt"
