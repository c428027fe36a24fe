#!/bin/bash
# Fifth device call (2026-11-26, second session): mlprof-inject on a real GPU.
# Run from the repository root with .dev/gpu5/ holding a stripped release mlprof,
# libmlprof_inject.so and cuda_app (gcc scripts/gpu_checks/cuda_app.c -ldl). Logs to
# $OUT/log5.txt; profiles to $OUT/w5.tgz.
G=$PWD/.dev/gpu5; S=$PWD/scripts/gpu_checks
W=/tmp/w5; rm -rf $W; mkdir -p $W
export PYTHONUNBUFFERED=1
exec > >(tee -a $OUT/log5.txt) 2>&1
step() { echo; echo "=== $(date +%T) $*"; }
quiet() { grep -v "^\[W\|Warning: \|warn(" ; }
( sleep 400; echo "WATCHDOG: killing remaining jobs"; while true; do pkill -9 -f "_train.py|cuda_app|mlprof run"; sleep 0.5; done ) &
WD=$!
step facts
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
SP=$(python3 -c "import site;print(site.getsitepackages()[0])")
LIB=$(dirname $(find $SP -name "libcudart.so.13*" | head -1)); echo "cuda libs: $LIB"; ls $LIB | grep -E "cupti|cudart"
export LD_LIBRARY_PATH=$LIB
M=$G/mlprof; APP=$G/cuda_app
cd $S
step "cuda_app plain x2"
$APP 2000; $APP 2000
step "cuda_app under mlprof run, whole run recorded (runtime API)"
timeout 60 $M run --logdir $W/app1 --duration 60s -- $APP 2000
step "cuda_app under mlprof run, whole run, driver API too"
MLPROF_INJECT_DRIVER_API=1 timeout 60 $M run --logdir $W/app2 --duration 60s -- $APP 2000
step "cuda_app under mlprof run, 300 ms window after 1 s (fixture size), 12000 iterations"
timeout 60 $M run --logdir $W/app3 --delay 1s --duration 300ms -- $APP 12000
step "cuda_app under mlprof run, idle (--delay 3600s)"
timeout 60 $M run --logdir $W/app4 --delay 3600s -- $APP 2000
step "cuda_app plain again"
$APP 2000
step "torch default: injection steps aside, Kineto on demand"
timeout 70 $M run --logdir $W/t1 --duration 500ms -- python3 torch_train.py --seconds 25 2>&1 | quiet | grep "mlprof:\|REPORT"
step "torch with torch.profiler in the script, default"
timeout 70 $M run --logdir $W/t2 --delay 3600s -- python3 torch_train.py --steps 12 --profile $W/t2prof 2>&1 | quiet | grep "mlprof:\|REPORT"
ls -la $W/t2prof 2>&1 | tail -2
step "torch forced (MLPROF_INJECT_FRAMEWORKS=1), whole run, 40 and 80 steps"
MLPROF_INJECT_FRAMEWORKS=1 timeout 70 $M run --logdir $W/t3 --duration 300s -- python3 torch_train.py --steps 40 2>&1 | quiet | grep "mlprof:\|REPORT\|Error\|error"
MLPROF_INJECT_FRAMEWORKS=1 timeout 70 $M run --logdir $W/t4 --duration 300s -- python3 torch_train.py --steps 80 2>&1 | quiet | grep "mlprof:\|REPORT\|Error\|error"
step "torch plain and torch.profiler over 40 steps"
timeout 70 python3 torch_train.py --steps 40 2>&1 | grep REPORT
mkdir -p $W/t6; timeout 90 python3 torch_train.py --steps 40 --profile-all --export $W/t6/all40.pt.trace.json 2>&1 | grep REPORT
step "torch forced with torch.profiler in the script (injection first)"
MLPROF_INJECT_FRAMEWORKS=1 timeout 70 $M run --logdir $W/t5 --duration 300s -- python3 torch_train.py --steps 12 --profile $W/t5prof 2>&1 | quiet | grep "mlprof:\|REPORT\|CUPTI\|rror" | head -12
ls -la $W/t5prof 2>&1 | tail -2
step "jax default: injection steps aside, hook + capture"
timeout 60 $M run --logdir $W/j1 --duration 1s -- python3 jax_train.py --seconds 16 2>&1 | quiet | grep "mlprof:\|REPORT"
step "jax forced, whole run, 40 steps"
MLPROF_INJECT_FRAMEWORKS=1 timeout 60 $M run --logdir $W/j2 --duration 300s -- python3 jax_train.py --steps 40 2>&1 | quiet | grep "mlprof:\|REPORT" | grep -v "profiler server\|capture"
step stats
python3 - <<'PY'
import glob, json, gzip, collections
for f in sorted(glob.glob('/tmp/w5/t*/**/*.pt.trace.json*', recursive=True)):
    op = gzip.open if f.endswith('.gz') else open
    ev = json.load(op(f))['traceEvents']
    k = [e for e in ev if e.get('cat') == 'kernel']
    print(f, 'events', len(ev), 'kernels', len(k), 'kernel_ms %.3f' % (sum(e.get('dur', 0) for e in k) / 1e3))
PY
kill $WD
find $W -name "*.json" -exec gzip {} \;
cd $W && tar czf $OUT/w5.tgz . && ls -la $OUT
