#!/bin/bash
# Third device call (2026-11-26, H200): `mlprof run` end to end on GPU jobs, and what an
# idle `mlprof run` (Kineto daemon mode polling, hook loaded, no trace due) costs a step.
# Alternates plain and idle runs three times each, since step times vary ±20 % between
# processes here. Needs a stripped release `mlprof` beside it; logs to $OUT/log3.txt.
cd "$(dirname "$0")"
G=$PWD; W=/tmp/w3; rm -rf $W; mkdir -p $W
export PYTHONUNBUFFERED=1
exec > >(tee -a $OUT/log3.txt) 2>&1
( sleep 420; echo "WATCHDOG" >> $OUT/log3.txt; while true; do pkill -9 -f "_train.py|mlprof run"; sleep 0.5; done ) >/dev/null 2>&1 &
WD=$!
step() { echo; echo "=== $(date +%T) $*"; }
quiet() { grep -v "^\[W\|UserWarning\|_warn_once\|^W1\|^I1"; }
for i in 1 2 3; do
  step "torch plain $i"; timeout 60 python3 torch_train.py --steps 60 2>&1 | grep REPORT
  step "torch under idle mlprof run $i"; timeout 60 $G/mlprof run --logdir $W/idle --delay 3600s -- python3 torch_train.py --steps 60 2>&1 | grep "REPORT\|mlprof:"
done
for i in 1 2 3; do
  step "jax plain $i"; timeout 60 python3 jax_train.py --steps 60 2>&1 | grep REPORT
  step "jax under idle mlprof run $i"; timeout 60 $G/mlprof run --logdir $W/jidle --delay 3600s -- python3 jax_train.py --steps 60 2>&1 | grep "REPORT\|mlprof:"
done
step "torch: mlprof run --duration 500ms"
timeout 90 $G/mlprof run --logdir $W/torch_run --duration 500ms -- python3 torch_train.py --seconds 25 2>&1 | quiet | tail -8; echo "exit ${PIPESTATUS[0]}"
step "torch: mlprof run --steps 3"
timeout 90 $G/mlprof run --logdir $W/torch_steps --steps 3 -- python3 torch_train.py --seconds 15 2>&1 | quiet | tail -8; echo "exit ${PIPESTATUS[0]}"
step "jax: mlprof run --delay 3s --duration 1s"
timeout 90 $G/mlprof run --logdir $W/jax_run --delay 3s --duration 1s -- python3 jax_train.py --seconds 12 2>&1 | quiet | tail -8; echo "exit ${PIPESTATUS[0]}"
kill $WD; pkill -f "sleep 420"
find $W -type f | xargs ls -la
find $W -name "*.json" -size +1M -exec gzip {} \;
cd $W && tar czf $OUT/w3.tgz torch_run torch_steps jax_run
ls -la $OUT
