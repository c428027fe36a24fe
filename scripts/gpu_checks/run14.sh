#!/usr/bin/env bash
# Fifth GPU session (H100), one call: real fixtures for issues 24 and 26, then the agent's
# CPU on a GPU node (run13.sh) for issue 20. Run from the repo root on the device machine
# with a stripped mlprof in .dev/mlprof; everything lands in $OUT.
set -u
export PYTHONUNBUFFERED=1
O=${OUT:-/tmp/out}
W=/tmp/w14
G=scripts/gpu_checks
rm -rf "$W"; mkdir -p "$O" "$W"
exec > >(tee -a "$O/log.txt") 2>&1
step() { echo; echo "=== $(date +%T) $*"; }
step facts
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -m pip show torch jax jaxlib nvidia-cuda-cupti 2>/dev/null | grep -E "^(Name|Version)" | paste - -
step "torch memory snapshot + Kineto trace of one run"
timeout 150 python3 $G/torch_memory.py pair "$W/pair" 2>&1 | grep -v "^\[W" | tail -5
step "torch OOM, default segments"
timeout 90 python3 $G/torch_memory.py oom "$W/oom/oom_default.pickle" 2>&1 | tail -3
step "torch OOM, expandable segments"
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout 90 python3 $G/torch_memory.py oom "$W/oom/oom_expandable.pickle" 2>&1 | tail -3
step "jax ops, one kernel per HLO op"
if ! XLA_FLAGS=--xla_gpu_enable_command_buffer= timeout 150 python3 $G/jax_ops.py --trace "$W/jax_ops" 2>&1 | tail -4; then
  echo "retrying without the flag"; rm -rf "$W/jax_ops"
  timeout 150 python3 $G/jax_ops.py --trace "$W/jax_ops" 2>&1 | tail -4
fi
step pack
find "$W" -type f | xargs ls -la
for d in pair oom jax_ops; do [ -d "$W/$d" ] && tar czf "$O/$d.tgz" -C "$W" "$d"; done
ls -la "$O"
step "agent CPU on a GPU node (run13.sh)"
timeout 150 bash $G/run13.sh
