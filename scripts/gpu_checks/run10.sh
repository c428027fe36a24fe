#!/usr/bin/env bash
# Third GPU session (H100), second call: `mlprof run --agent` with an agent capture through
# the run (Kineto) after the agent stopped listing `mlprof run` as the job, then the watch
# cost again with shorter phases and paired statistics.
# Run from the repo root on the device machine with a stripped mlprof in .dev/mlprof.
set -u
export PYTHONUNBUFFERED=1
B=$PWD/.dev/mlprof
PY=${PY:-python3}
O=${OUT:-/tmp/out}
P=/tmp/p2
mkdir -p "$O" "$P"
{
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
python3 -c "import torch, jax; print('torch', torch.__version__, 'jax', jax.__version__, jax.devices())"
echo "perf_event_paranoid $(cat /proc/sys/kernel/perf_event_paranoid)"
nproc
} 2>&1 | tee "$O/facts.txt"

{
echo "== 2. mlprof run --agent, capture through the run"
"$B" agent --listen 127.0.0.1:7766 --data /tmp/adata 2>/tmp/agent2.log &
AG=$!
sleep 1
"$B" run --agent --logdir /tmp/runlog -- "$PY" scripts/gpu_checks/torch_train.py --seconds 70 >/tmp/run.out 2>/tmp/run.err &
RUN=$!
sleep 22
curl -s 127.0.0.1:7766/api/jobs > "$P/jobs_run.json"
JOB=$(python3 -c '
import json, sys
jobs = json.load(open(sys.argv[1]))["jobs"]
print(next(j["pid"] for j in jobs if j.get("run") and "torch_train" in " ".join(j.get("command", []) if isinstance(j.get("command"), list) else [str(j.get("command"))])))
' "$P/jobs_run.json")
echo "registered job: $JOB"
time timeout 90 "$B" agent capture "$JOB" --duration 1s 2>&1 | tee "$P/capture.txt"
"$B" top --once --format json > "$P/top.json" 2>&1
curl -s 127.0.0.1:7766/metrics > "$P/metrics_run.txt"
SESSION=$(tail -n 1 "$P/capture.txt")
ls -la "$SESSION"
"$B" analyze "$SESSION" --tool overview_page 2>&1 | head -40
"$B" analyze "$SESSION" --tool kernel_stats 2>&1 | head -30
kill $RUN $AG 2>/dev/null
wait
tail -n 5 /tmp/run.out /tmp/run.err /tmp/agent2.log
gzip -c "$SESSION"/*.pt.trace.json > "$P/capture_trace.json.gz"
cp "$SESSION"/*.xplane.pb "$P/" 2>/dev/null
tar czf "$O/p2.tgz" -C /tmp p2
} 2>&1 | tee "$O/run_agent.txt"

echo "== 3. watch cost again: 12 rounds of 5 s phases, paired with the off phases beside each"
timeout 330 python3 scripts/bench_watch_cost --mlprof "$B" --jobs torch-gpu,jax-gpu,torch-cpu,jax-cpu \
  --phase 5 --rounds 12 2>&1 | tee "$O/watch_cost2.txt"
