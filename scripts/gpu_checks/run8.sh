#!/bin/bash
# Eighth device call (2026-11-26, second session): cuptiSubscribe_v2 on the real CUPTI,
# driver-API launches linked to their kernels, a user's injection chained first (the
# first session's inj.c in subscribe mode, .dev/gpu5/libinj.so), NVTX ranges through
# NVTX_INJECTION64_PATH. Run from the repository root with .dev/gpu5/ as for run5.sh.
G=$PWD/.dev/gpu5; S=$PWD/scripts/gpu_checks
W=/tmp/w8; rm -rf $W; mkdir -p $W
export PYTHONUNBUFFERED=1
exec > >(tee -a $OUT/log8.txt) 2>&1
step() { echo; echo "=== $(date +%T) $*"; }
( sleep 150; echo "WATCHDOG: killing remaining jobs"; while true; do pkill -9 -f "_job.py|_train.py|cuda_app|mlprof run"; sleep 0.5; done ) &
WD=$!
SP=$(python3 -c "import site;print(site.getsitepackages()[0])")
export LD_LIBRARY_PATH=$(dirname $(find $SP -name "libcudart.so.13*" | head -1))
M=$G/mlprof; APP=$G/cuda_app
cd $S
step "cuda_app: v2 subscribe, driver launches linked"
MLPROF_INJECT_LOG=$W/inj_app.log timeout 60 $M run --logdir $W/app -- $APP 2000 2>&1
cat $W/inj_app.log
$M info $W/app/plugins/profile/*/ 2>&1 | grep -i "plane\|Host Threads\|Stream"
step "cuda_app with the user's own injection (subscribes first), chained"
INJ_MODE=subscribe INJ_LOG=$W/userinj.log CUDA_INJECTION64_PATH=$G/libinj.so timeout 60 $M run --logdir $W/chain -- $APP 2000 2>&1
cat $W/userinj.log | head -5
step "NVTX: torch loop with NVTX ranges, --device-tracer cupti"
MLPROF_INJECT_LOG=$W/inj_nvtx.log timeout 60 $M run --device-tracer cupti --duration 60s --logdir $W/nvtx -- python3 nvtx_job.py 20 2>&1 | grep "mlprof:\|NVTX_JOB"
cat $W/inj_nvtx.log
$M info $W/nvtx/plugins/profile/*/ 2>&1 | grep -i "NVTX\|plane"
step "torch: --device-tracer cupti, 1 s window after 8 s (host calls vs run7)"
timeout 60 $M run --device-tracer cupti --delay 8s --duration 1s --logdir $W/torch -- python3 torch_train.py --seconds 12 2>&1 | grep "mlprof:\|REPORT"
kill $WD
cd $W && rm -rf torch && tar czf $OUT/w8.tgz . && ls -la $OUT
