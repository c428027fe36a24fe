#!/usr/bin/env bash
# Prepared in the sixth GPU session (H200, 2026-11-29) for the next one: run17.sh showed a
# PyTorch GPU job under `mlprof run --duration 500ms` at 17.8 ms a step against 14.8 ms
# alone, slow from its trace's warm-up to its exit, as Kineto leaves CUPTI attached after
# a trace unless TEARDOWN_CUPTI=1 (pytorch/pytorch#144455); the start-up hook now sets it.
# Five runs of the same 25 s loop, one at a time, each step's time brought back: alone,
# traced (teardown on), traced with TEARDOWN_CUPTI=0 (as before), sampled with no trace,
# alone. Repo root on the device machine, mlprof in .dev/mlprof.xz; output in $OUT.
set -u
export PYTHONUNBUFFERED=1
O=${OUT:-/tmp/out}
W=/tmp/w18
G=scripts/gpu_checks
rm -rf "$W"; mkdir -p "$O" "$W"
exec > >(tee -a "$O/log.txt") 2>&1
xz -dc .dev/mlprof.xz > "$W/mlprof" && chmod +x "$W/mlprof"
B=$W/mlprof
loop() { echo python3 $G/torch_train.py --seconds 25 --stamps "$O/$1.json"; }
one() {
  local name=$1; shift
  echo; echo "=== $(date +%T) $name: $*"
  timeout 80 "$@" 2>&1 | grep -E "REPORT|own cost|tracing|wrote|CUPTI" | cut -c1-200
}
one alone1 $(loop alone1)
one traced "$B" run --logdir "$W/r1" --duration 500ms -- $(loop traced)
one traced_no_teardown env TEARDOWN_CUPTI=0 "$B" run --logdir "$W/r2" --duration 500ms -- $(loop traced_no_teardown)
one sampled "$B" run --logdir "$W/r3" --delay 3600s -- $(loop sampled)
one alone2 $(loop alone2)
ls -la "$O"
