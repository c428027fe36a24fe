#!/bin/bash
# Second device call: injection coexistence (activity mode, no subscriber) and overhead per activity set.
cd "$(dirname "$0")"
G=$PWD; W=/tmp/w2; rm -rf $W; mkdir -p $W/rep
export PYTHONUNBUFFERED=1
exec > >(tee -a $OUT/log2.txt) 2>&1
( sleep 420; echo "WATCHDOG" >> $OUT/log2.txt; while true; do pkill -9 -f "_train.py"; sleep 0.5; done ) >/dev/null 2>&1 &
WD=$!
step() { echo; echo "=== $(date +%T) $*"; }
PY=python3
SP=$($PY -c "import site;print(site.getsitepackages()[0])")
CUPTI_DIR=$SP/nvidia/cu13/lib
INJ=$G/libinj.so
inj() { local name=$1 mode=$2 kinds=$3; shift 3; INJ_LOG=$W/rep/inj_$name.log INJ_MODE=$mode INJ_KINDS=$kinds LD_LIBRARY_PATH=$CUPTI_DIR CUDA_INJECTION64_PATH=$INJ timeout 100 "$@" 2>&1 | grep -v "^\[W\|UserWarning\|_warn_once"; grep -v "periodic" $W/rep/inj_$name.log; grep periodic $W/rep/inj_$name.log | head -3; echo ...; grep periodic $W/rep/inj_$name.log | tail -2; }
step torch plain baseline
timeout 100 $PY torch_train.py --steps 40 2>&1 | grep REPORT
step inject activity all kinds + torch.profiler 12 steps, then 40 plain steps
inj tprof activity "" $PY torch_train.py --steps 12 --profile $W/torch_act --after-steps 40
ls -la $W/torch_act
step inject kernel,memcpy,memset,sync + plain torch
inj tk4 activity 10,1,2,38 $PY torch_train.py --steps 40
step inject kernel only + plain torch
inj tk1 activity 10 $PY torch_train.py --steps 40
step torch plain baseline again
timeout 100 $PY torch_train.py --steps 40 2>&1 | grep REPORT
step jax plain
timeout 100 $PY jax_train.py --steps 40 2>&1 | grep REPORT
step inject activity all + jax trace
inj jtrace activity "" $PY jax_train.py --steps 10 --trace $W/jax_act
find $W/jax_act -type f | xargs ls -la
step inject kernel,memcpy,memset,sync + plain jax
inj jk4 activity 10,1,2,38 $PY jax_train.py --steps 40
kill $WD; pkill -f "sleep 420"
cd $W && tar czf $OUT/w2.tgz .
ls -la $OUT
