#!/usr/bin/env bash
# Sixth GPU session (H200, 2026-11-29), one call: (1) can Kineto's on-demand trace start
# sooner (a 1 s config poll through KINETO_CONFIG and a shorter ACTIVITIES_WARMUP_PERIOD_SECS)
# and still record the GPU work; (2) does one on-demand trace leave a PyTorch job slower
# afterwards (run5.sh's unexplained 18.3 ms against 11.7 ms); (3) what attach (100 Hz) and
# the agent cost four jobs with only one of them on the GPU, in short phases with the
# steps brought back for other statistics. Run from the repo root on the device machine
# with an xz-compressed stripped mlprof in .dev/mlprof.xz; everything lands in $OUT.
set -u
export PYTHONUNBUFFERED=1
O=${OUT:-/tmp/out}
W=/tmp/w17
G=scripts/gpu_checks
rm -rf "$W"; mkdir -p "$O" "$W"
exec > >(tee -a "$O/log.txt") 2>&1
step() { echo; echo "=== $(date +%T) $*"; }
xz -dc .dev/mlprof.xz > "$W/mlprof" && chmod +x "$W/mlprof"
B=$W/mlprof
step facts
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -c "import torch, jax; print('torch', torch.__version__, 'jax', jax.__version__)"
nproc
"$B" --version

count() {  # kernels, cpu ops and their span in a Kineto trace
  python3 - "$@" <<'EOF'
import json, sys
for path in sys.argv[1:]:
    ev = json.load(open(path)).get("traceEvents", [])
    k = [e for e in ev if e.get("cat") == "kernel"]
    ops = [e for e in ev if e.get("cat") == "cpu_op"]
    span = (max(e["ts"] + e.get("dur", 0) for e in k) - min(e["ts"] for e in k)) / 1e3 if k else 0
    first = min((e["ts"] for e in ops), default=0) / 1e3
    firstk = min((e["ts"] for e in k), default=0) / 1e3
    print(f"  {path.rsplit('/', 1)[-1]}: {len(ev)} events, {len(ops)} cpu_ops, {len(k)} kernels "
          f"over {span:.1f} ms; first kernel {firstk - first:+.1f} ms after the first cpu_op")
EOF
}

for warm in 0 1; do
  step "Kineto on demand: config poll every 1 s, warmup $warm s, first config 8 s after launch"
  d=$W/od$warm; mkdir -p "$d"
  printf 'ON_DEMAND_CONFIG_UPDATE_INTERVAL_SECS=1\n' > "$d/kineto.conf"
  KINETO_CONFIG=$d/kineto.conf OD_SOCKET_DIR=$d OD_AFTER_S=8 OD_DEADLINE_S=40 \
    OD_EXTRA="ACTIVITIES_WARMUP_PERIOD_SECS=$warm" \
    timeout 60 python3 $G/ondemand.py "$d" -- python3 $G/torch_train.py --seconds 30 2>&1 \
    | grep -E "replying|landed|counts|child exit|REPORT" | cut -c1-220
  count "$d"/od_*.json
done

step "one on-demand trace, then is the job slower? (alone, then under mlprof run)"
timeout 90 python3 $G/torch_train.py --seconds 40 --stamps "$O/alone_stamps.json" 2>&1 | grep REPORT
timeout 120 "$B" run --logdir "$W/run" --duration 500ms -- \
  python3 $G/torch_train.py --seconds 40 --stamps "$O/traced_stamps.json" 2>&1 | grep -vE "^\[W|^$" | tail -8
find "$W/run" -name "*.json" | xargs -r ls -la
find "$W/run" -name "*.window" -exec cat {} \; 2>/dev/null

step "what watching costs: torch-gpu, torch-cpu, jax-cpu, python on CPUs 0-11, mlprof on 12-15"
timeout 300 python3 scripts/bench_watch_cost --mlprof "$B" \
  --jobs torch-gpu,torch-cpu,jax-cpu,python --job-cpus 0-11 --mlprof-cpus 12-15 \
  --watch attach,agent --phase 2.5 --guard 0.5 --rounds 20 --stamps "$O/watch_stamps.json"
xz -9 "$O/watch_stamps.json"
ls -la "$O"
