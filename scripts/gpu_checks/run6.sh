#!/bin/bash
# Sixth device call (2026-11-26, second session): mlprof-inject after the first run's
# fixes (record from cuInit, device properties from the driver, gettid thread ids), the
# idle cost of mlprof run on PyTorch split into its parts, and forced JAX. Run from the
# repository root with .dev/gpu5/ as for run5.sh. Logs to $OUT/log6.txt.
G=$PWD/.dev/gpu5; S=$PWD/scripts/gpu_checks
W=/tmp/w6; rm -rf $W; mkdir -p $W
export PYTHONUNBUFFERED=1
exec > >(tee -a $OUT/log6.txt) 2>&1
step() { echo; echo "=== $(date +%T) $*"; }
( sleep 330; echo "WATCHDOG: killing remaining jobs"; while true; do pkill -9 -f "_train.py|cuda_app|mlprof run"; sleep 0.5; done ) &
WD=$!
SP=$(python3 -c "import site;print(site.getsitepackages()[0])")
export LD_LIBRARY_PATH=$(dirname $(find $SP -name "libcudart.so.13*" | head -1))
M=$G/mlprof; APP=$G/cuda_app; LIBI=$G/libmlprof_inject.so
cd $S
step "cuda_app: plain / whole run recorded from cuInit, alternating"
for i in 1 2 3; do
  $APP 2000 | sed 's/^/plain /'
  MLPROF_INJECT_LOG=$W/inj_app$i.log timeout 60 $M run --logdir $W/app$i -- $APP 2000 2>&1 | sed 's/^/mlprof /'
done
cat $W/inj_app1.log
step "cuda_app: driver API too"
MLPROF_INJECT_DRIVER_API=1 timeout 60 $M run --logdir $W/appd -- $APP 2000 2>&1
step "cuda_app: 100000 iterations, 200 ms window after 300 ms (start/stop path)"
MLPROF_INJECT_LOG=$W/inj_win.log timeout 60 $M run --logdir $W/appw --delay 300ms --duration 200ms -- $APP 100000 2>&1
cat $W/inj_win.log
step "torch idle cost, 300 steps each, alternating: plain / mlprof run idle / mlprof run idle without injection / injection alone"
for i in 1 2; do
  timeout 60 python3 torch_train.py --steps 300 2>&1 | grep -o '"median_ms": [0-9.]*' | sed 's/^/plain /'
  timeout 60 $M run --logdir $W/ti$i --delay 3600s -- python3 torch_train.py --steps 300 2>&1 | grep -o '"median_ms": [0-9.]*\|mlprof: CUDA.*' | sed 's/^/run-idle /'
  MLPROF_INJECT_LIBRARY=/nonexistent timeout 60 $M run --logdir $W/tn$i --delay 3600s -- python3 torch_train.py --steps 300 2>&1 | grep -o '"median_ms": [0-9.]*' | sed 's/^/run-idle-no-inject /'
  CUDA_INJECTION64_PATH=$LIBI timeout 60 python3 torch_train.py --steps 300 2>&1 | grep -o '"median_ms": [0-9.]*' | sed 's/^/injection-alone /'
done
step "jax forced, 3 s window, exit flow"
MLPROF_INJECT_LOG=$W/inj_jax.log MLPROF_INJECT_FRAMEWORKS=1 timeout 45 $M run --logdir $W/j2 --duration 3s -- python3 jax_train.py --steps 40 2>&1 | grep "mlprof:\|REPORT"
cat $W/inj_jax.log
step "jax plain 40 steps"
timeout 45 python3 jax_train.py --steps 40 2>&1 | grep REPORT
kill $WD
cd $W && tar czf $OUT/w6.tgz . && ls -la $OUT
