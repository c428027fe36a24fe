#!/usr/bin/env bash
# Prepared in the sixth GPU session (H200, 2026-11-29) for the next one, after run18.sh:
# what sampling Python stacks at 100 Hz (attach --no-native) and the agent cost four jobs,
# measured with the watchers started once and paused (SIGSTOP) outside their 1 s phases
# (bench_watch_cost --toggle): 60 rounds instead of 20, no start inside any phase, to
# narrow run17.sh's ±1-2 % intervals towards the 0.5 % that a < 1 % claim needs.
# Repo root on the device machine, mlprof in .dev/mlprof.xz; output in $OUT.
set -u
export PYTHONUNBUFFERED=1
O=${OUT:-/tmp/out}
W=/tmp/w19
rm -rf "$W"; mkdir -p "$O" "$W"
exec > >(tee -a "$O/log.txt") 2>&1
xz -dc .dev/mlprof.xz > "$W/mlprof" && chmod +x "$W/mlprof"
timeout 400 python3 scripts/bench_watch_cost --mlprof "$W/mlprof" \
  --jobs torch-gpu,torch-cpu,jax-cpu,python --job-cpus 0-11 --mlprof-cpus 12-15 \
  --watch attach-python,agent --toggle --phase 1 --guard 0.1 --rounds 60 --stamps "$O/toggled_stamps.json"
xz -9 "$O/toggled_stamps.json"
ls -la "$O"
