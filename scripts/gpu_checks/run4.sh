#!/bin/bash
# Fourth device call (2026-11-26, H200): `mlprof run` after the settle fix — a 500 ms
# trace and a 3-step trace of the PyTorch job, a 1 s capture of the JAX job, all with the
# default delay. Logs to $OUT/log4.txt.
cd "$(dirname "$0")"
G=$PWD; W=/tmp/w4; rm -rf $W; mkdir -p $W
export PYTHONUNBUFFERED=1
exec > >(tee -a $OUT/log4.txt) 2>&1
step() { echo; echo "=== $(date +%T) $*"; }
quiet() { grep "mlprof:\|REPORT"; }
step "torch --duration 500ms"; timeout 60 $G/mlprof run --logdir $W/t500 --duration 500ms -- python3 torch_train.py --seconds 28 2>&1 | quiet
step "torch --steps 3"; timeout 60 $G/mlprof run --logdir $W/t3 --steps 3 -- python3 torch_train.py --seconds 20 2>&1 | quiet
step "jax --duration 1s"; timeout 60 $G/mlprof run --logdir $W/j1 --duration 1s -- python3 jax_train.py --seconds 16 2>&1 | quiet
step stats
python3 - <<'PY'
import glob, json, collections
for f in sorted(glob.glob('/tmp/w4/t*/plugins/profile/*/*.pt.trace.json')):
    ev = json.load(open(f))['traceEvents']
    c = collections.Counter(e.get('cat') for e in ev)
    opt = sum(1 for e in ev if str(e.get('name', '')).startswith('Optimizer.step#'))
    print(f, len(ev), 'kernels', c['kernel'], 'cpu_op', c['cpu_op'], 'optimizer steps', opt)
PY
find $W -name "*.json" -exec gzip {} \;
cd $W && tar czf $OUT/w4.tgz . && ls -la $OUT
