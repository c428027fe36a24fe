#!/usr/bin/env bash
# Fifth GPU session (H100), second call: the profile of many XLA op kinds again with
# bfloat16 compute and int8 / fp8 matrix products (issue 26: XProf's device-FLOPs
# adjustment and the cost of bf16 elementwise ops), one kernel per fusion.
set -u
export PYTHONUNBUFFERED=1
O=${OUT:-/tmp/out}
W=/tmp/w15
rm -rf "$W"; mkdir -p "$O" "$W"
exec > >(tee -a "$O/log.txt") 2>&1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
XLA_FLAGS=--xla_gpu_enable_command_buffer= timeout 200 python3 scripts/gpu_checks/jax_ops.py --mixed --trace "$W/jax_mixed" 2>&1 | tail -4
find "$W" -type f | xargs ls -la
tar czf "$O/jax_mixed.tgz" -C "$W" jax_mixed
