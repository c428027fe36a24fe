#!/usr/bin/env bash
# Fourth GPU session (H100), first call (348 s): where attach's cost to a job comes from.
# The jobs on CPUs 0-11, mlprof on 12-15, phases alternating attach (Python + native
# stacks), attach --no-native and attach --sample-hz 0 (counters only), and the agent.
# Run from the repo root on the device machine with a stripped mlprof in .dev/mlprof.
set -u
export PYTHONUNBUFFERED=1
O=${OUT:-/tmp/out}
mkdir -p "$O"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$O/facts.txt"
timeout 420 python3 scripts/bench_watch_cost --mlprof "$PWD/.dev/mlprof" \
  --jobs torch-gpu,jax-gpu,torch-cpu,python --job-cpus 0-11 --mlprof-cpus 12-15 \
  --watch agent,attach,attach-python,attach-counters --phase 5 --rounds 8 2>&1 | tee "$O/watch_cost3.txt"
