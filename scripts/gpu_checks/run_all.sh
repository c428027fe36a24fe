#!/bin/bash
# One device call (2026-11-26, H200): GPU fixtures and facts for issues 19 and 21.
# Run from a checkout with .dev/gpu/ holding these files, libinj.so (gcc -shared -fPIC
# inj.c against the CUPTI 13.0 headers, -l:libcupti.so.13) and a stripped mlprof; logs to $OUT/log.txt.
cd "$(dirname "$0")"
G=$PWD
W=/tmp/w; rm -rf $W; mkdir -p $W/rep
export PYTHONUNBUFFERED=1
exec > >(tee -a $OUT/log.txt) 2>&1
step() { echo; echo "=== $(date +%T) $*"; }
PY=python3
# watchdog: past 470 s every remaining job is killed so that packing still happens
( sleep 470; echo "WATCHDOG: killing remaining jobs" >> $OUT/log.txt; while true; do pkill -9 -f "_train.py|ondemand.py|mlprof capture"; sleep 0.5; done ) >/dev/null 2>&1 &
WD=$!
step facts
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
$PY -m pip show torch jax jaxlib optax nvidia-cuda-cupti 2>/dev/null | grep -E "^(Name|Version)"
SP=$($PY -c "import site;print(site.getsitepackages()[0])")
CUPTI=$(find $SP -name "libcupti.so.13*" | head -3); echo "cupti: $CUPTI"
CUPTI_DIR=$(dirname $(echo "$CUPTI" | head -1))
export INJ=$G/libinj.so
ldd $INJ | grep -i cupti
LD_LIBRARY_PATH=$CUPTI_DIR ldd $INJ | grep -i cupti
uname -r; nproc
step torch plain baseline
timeout 120 $PY torch_train.py --steps 40 --report $W/rep/torch_plain.json 2>&1 | grep -v "^\[W"
step torch profile-all overhead
timeout 150 $PY torch_train.py --steps 40 --profile-all --report $W/rep/torch_profile_all.json 2>&1 | grep -v "^\[W" | tail -5
step torch fixture
timeout 150 $PY torch_train.py --steps 12 --profile $W/torch_gpu --report $W/rep/torch_fixture.json 2>&1 | grep -v "^\[W" | tail -5
ls -la $W/torch_gpu
step inject activity + plain torch
INJ_LOG=$W/rep/inj_torch_activity.log INJ_MODE=activity LD_LIBRARY_PATH=$CUPTI_DIR CUDA_INJECTION64_PATH=$INJ timeout 120 $PY torch_train.py --steps 40 --report $W/rep/torch_inj_activity.json 2>&1 | grep -v "^\[W" | tail -5
cat $W/rep/inj_torch_activity.log | grep -v periodic; grep periodic $W/rep/inj_torch_activity.log | tail -1
step inject subscribe + torch.profiler
INJ_LOG=$W/rep/inj_torch_sub.log INJ_MODE=subscribe LD_LIBRARY_PATH=$CUPTI_DIR CUDA_INJECTION64_PATH=$INJ timeout 150 $PY torch_train.py --steps 12 --profile $W/torch_inj --report $W/rep/torch_inj_sub.json 2>&1 | grep -v "^\[W" | tail -8
cat $W/rep/inj_torch_sub.log | grep -v periodic; grep periodic $W/rep/inj_torch_sub.log | tail -1
ls -la $W/torch_inj
step kineto on-demand
OD_DEADLINE_S=50 timeout 70 $PY ondemand.py $W/od -- $PY torch_train.py --seconds 45 2>&1 | grep -v "^\[W" | tail -25
step kineto on-demand with CUDA_INJECTION64_PATH set, inject mode none
INJ_LOG=$W/rep/inj_od_none.log INJ_MODE=none LD_LIBRARY_PATH=$CUPTI_DIR CUDA_INJECTION64_PATH=$INJ OD_DEADLINE_S=40 timeout 60 $PY ondemand.py $W/od_inj -- $PY torch_train.py --seconds 38 2>&1 | grep -v "^\[W" | tail -12
cat $W/rep/inj_od_none.log
step jax plain baseline
timeout 120 $PY jax_train.py --steps 40 --report $W/rep/jax_plain.json 2>&1 | tail -3
step jax fixture
timeout 120 $PY jax_train.py --steps 10 --trace $W/jax_gpu --report $W/rep/jax_trace.json 2>&1 | tail -3
find $W/jax_gpu -type f | xargs ls -la
step jax hook + mlprof capture
MLPROF_HOOK_PORT=45123 PYTHONPATH=$G/hook timeout 60 $PY jax_train.py --seconds 30 --report $W/rep/jax_hooked.json > $W/rep/jax_hooked.log 2>&1 &
JP=$!
for i in $(seq 1 40); do sleep 1; grep -q "profiler server on" $W/rep/jax_hooked.log && break; done
sleep 5
timeout 60 $G/mlprof capture 127.0.0.1:45123 --duration 2s --logdir $W/jax_cap -v 2>&1 | tail -5
wait $JP; tail -3 $W/rep/jax_hooked.log
step jax trace under inject subscribe
INJ_LOG=$W/rep/inj_jax_sub.log INJ_MODE=subscribe LD_LIBRARY_PATH=$CUPTI_DIR CUDA_INJECTION64_PATH=$INJ timeout 120 $PY jax_train.py --steps 10 --trace $W/jax_inj --report $W/rep/jax_inj.json 2>&1 | tail -6
cat $W/rep/inj_jax_sub.log | grep -v periodic; grep periodic $W/rep/inj_jax_sub.log | tail -1
find $W/jax_inj -type f | xargs ls -la
step pack
kill $WD 2>/dev/null; pkill -f "sleep 470"
cd $W && tar czf $OUT/torch_gpu.tgz torch_gpu && tar czf $OUT/torch_inj.tgz torch_inj && tar czf $OUT/od.tgz od od_inj && tar czf $OUT/jax.tgz jax_gpu jax_cap jax_inj && tar czf $OUT/rep.tgz rep
ls -la $OUT
