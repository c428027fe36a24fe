#!/usr/bin/env bash
# Times xprof-rs (cargo install xprof-rs --locked; a server only) cold on one log
# directory: start it, wait for its port, request each tool mlprof's `analyze --tool all`
# computes once, stop it. Prints "<seconds> <peak RSS KB>".
#
#   scripts/xprof_rs_time.sh LOGDIR [PORT]
set -euo pipefail
logdir=$1; port=${2:-6199}
if curl -s -o /dev/null "localhost:$port/"; then
  echo "xprof_rs_time.sh: port $port is in use; pass a free one" >&2
  exit 1
fi
start=$(date +%s.%N)
xprof-rs --logdir "$logdir" --port "$port" > /dev/null 2>&1 &
pid=$!
# Waits for the server to exit, so that the next run can listen on the same port.
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true' EXIT
until curl -s -o /dev/null "localhost:$port/runs"; do
  # It exits at once when it cannot listen (port in use) or read the log directory.
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "xprof_rs_time.sh: xprof-rs exited before serving on port $port (in use?)" >&2
    exit 1
  fi
  sleep 0.02
done
run=$(curl -s "localhost:$port/runs" | python3 -c "import json,sys; print(json.load(sys.stdin)[0])")
for tool in overview_page input_pipeline_analyzer framework_op_stats kernel_stats memory_profile pod_viewer; do
  curl -s -o /dev/null "localhost:$port/data?run=$run&tag=$tool"
done
end=$(date +%s.%N)
hwm=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status")
echo "$(echo "$end - $start" | bc -l) $hwm"
