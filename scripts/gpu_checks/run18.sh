#!/usr/bin/env bash
# Prepared in the sixth GPU session (H200, 2026-11-29) for the next one: run17.sh showed a
# PyTorch GPU job under `mlprof run --duration 500ms` at 17.8 ms a step against 14.8 ms
# alone, slow from its trace's warm-up to its exit, as Kineto leaves CUPTI attached after
# a trace unless TEARDOWN_CUPTI=1 (pytorch/pytorch#144455); the start-up hook now sets it.
# Runs of the same 20 s loop, one at a time, each step's time brought back: alone,
# traced (teardown on), traced with TEARDOWN_CUPTI=0 (as before); then 60 s of it under `mlprof run --agent` with the agent probing every 10 s
# (the first probe timed, with Kineto's 5 s warm-up; the next ones by whole steps); then a
# JAX loop with one 1 s capture of its profiler server (does XLA's tracer leave it slower?);
# last, the loop sampled with no trace, and alone again.
# Repo root on the device machine, mlprof in .dev/mlprof.xz; output in $OUT.
set -u
export PYTHONUNBUFFERED=1
O=${OUT:-/tmp/out}
W=/tmp/w18
G=scripts/gpu_checks
rm -rf "$W"; mkdir -p "$O" "$W"
exec > >(tee -a "$O/log.txt") 2>&1
xz -dc .dev/mlprof.xz > "$W/mlprof" && chmod +x "$W/mlprof"
B=$W/mlprof
loop() { echo python3 $G/torch_train.py --seconds 20 --stamps "$O/$1.json"; }
one() {
  local name=$1; shift
  echo; echo "=== $(date +%T) $name: $*"
  timeout 80 "$@" 2>&1 | grep -E "REPORT|own cost|tracing|wrote|CUPTI" | cut -c1-200
}
one alone1 $(loop alone1)
one traced "$B" run --logdir "$W/r1" --duration 500ms -- $(loop traced)
one traced_no_teardown env TEARDOWN_CUPTI=0 "$B" run --logdir "$W/r2" --duration 500ms -- $(loop traced_no_teardown)
echo; echo "=== $(date +%T) probed by the agent every 10 s"
"$B" agent --listen 127.0.0.1:7799 --probe-every 10s --data "$W/agent" > "$W/agent.out" 2>&1 &
AG=$!
sleep 2
timeout 120 "$B" run --agent=127.0.0.1:7799 --logdir "$W/r4" --delay 3600s -- \
  python3 $G/torch_train.py --seconds 60 --stamps "$O/probed.json" > "$W/probed.err" 2>&1 &
R=$!
sleep 60
curl -s 127.0.0.1:7799/api/jobs > "$O/probed_jobs.txt"
wait $R
grep -E "REPORT|agent asked|CUPTI" "$W/probed.err" | cut -c1-200
kill $AG
one jax_traced "$B" run --logdir "$W/r5" --duration 1s -- \
  python3 $G/jax_train.py --seconds 30 --stamps "$O/jax_traced.json"
python3 $G/step_bins.py --bin 1 "$O"/*.json
one sampled "$B" run --logdir "$W/r3" --delay 3600s -- $(loop sampled)
one alone2 $(loop alone2)
python3 $G/step_bins.py --bin 1 "$O"/sampled.json "$O"/alone2.json
ls -la "$O"
