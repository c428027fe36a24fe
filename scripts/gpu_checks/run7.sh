#!/bin/bash
# Seventh device call (2026-11-26, second session): device properties and occupancy on
# real GPUs, --device-tracer cupti on JAX (against XLA's own trace of the same loop) and
# PyTorch, and the CUDA-program fixture. Run from the repository root with .dev/gpu5/ as
# for run5.sh. Logs to $OUT/log7.txt, profiles to $OUT/w7.tgz.
G=$PWD/.dev/gpu5; S=$PWD/scripts/gpu_checks
W=/tmp/w7; rm -rf $W; mkdir -p $W
export PYTHONUNBUFFERED=1
exec > >(tee -a $OUT/log7.txt) 2>&1
step() { echo; echo "=== $(date +%T) $*"; }
( sleep 200; echo "WATCHDOG: killing remaining jobs"; while true; do pkill -9 -f "_train.py|cuda_app|mlprof run"; sleep 0.5; done ) &
WD=$!
SP=$(python3 -c "import site;print(site.getsitepackages()[0])")
export LD_LIBRARY_PATH=$(dirname $(find $SP -name "libcudart.so.13*" | head -1))
M=$G/mlprof; APP=$G/cuda_app
cd $S
step "cuda_app fixture"
MLPROF_INJECT_LOG=$W/inj_app.log timeout 60 $M run --logdir $W/app -- $APP 2000 2>&1
cat $W/inj_app.log
step "jax: XLA's own trace of 10 steps"
timeout 60 python3 jax_train.py --steps 10 --trace $W/jaxtrace 2>&1 | grep REPORT
step "jax: --device-tracer cupti, whole run of 60 steps"
MLPROF_INJECT_LOG=$W/inj_jax.log timeout 60 $M run --device-tracer cupti --duration 60s --logdir $W/jax -- python3 jax_train.py --steps 60 2>&1 | grep "mlprof:\|REPORT"
cat $W/inj_jax.log
step "torch: --device-tracer cupti, 1 s window after 8 s"
timeout 60 $M run --device-tracer cupti --delay 8s --duration 1s --logdir $W/torch -- python3 torch_train.py --seconds 12 2>&1 | grep "mlprof:\|REPORT"
kill $WD
cd $W && tar czf $OUT/w7.tgz . && ls -la $OUT
