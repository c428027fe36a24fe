#!/usr/bin/env bash
# Fourth GPU session (H100), third call: the agent's own CPU once started (run11.sh counted
# its start, NVML's opening included, inside 5 s phases), per thread, with the four jobs.
# Run from the repo root on the device machine with a stripped mlprof in .dev/mlprof.
set -u
O=${OUT:-/tmp/out}
B=$PWD/.dev/mlprof
W=/tmp/w13
mkdir -p "$O" "$W"
export OMP_NUM_THREADS=2
for k in torch-gpu jax-gpu torch-cpu python; do
  cuda=""; [ "$k" = torch-cpu ] && cuda=none
  CUDA_VISIBLE_DEVICES=${cuda:-0} taskset -c 0-11 python3 scripts/bench_watch_cost --mlprof x --job "$k" \
    --dump "$W/$k.dump" --ready "$W/$k.ready" > "$W/$k.log" 2>&1 &
done
for _ in $(seq 90); do [ "$(ls "$W"/*.ready 2>/dev/null | wc -l)" -ge 4 ] && break; sleep 1; done
ls "$W"
ticks() { awk '{print $14+$15}' "$1"; }
threads() { for t in /proc/"$1"/task/*; do echo "$(cat "$t/comm") $(ticks "$t/stat")"; done | sort; }
taskset -c 12-15 "$B" agent --listen 127.0.0.1:7799 --data "$W/adata" 2> "$W/agent.err" &
AG=$!
sleep 15
{
echo "hz $(getconf CLK_TCK); agent start (first 15 s): $(ticks /proc/$AG/stat) ticks"
a0=$(ticks /proc/$AG/stat); threads $AG > "$W/t0"
sleep 60
a1=$(ticks /proc/$AG/stat); threads $AG > "$W/t1"
echo "agent, 60 s once started: $((a1 - a0)) ticks = $(python3 -c "print(round(($a1 - $a0) / $(getconf CLK_TCK) / 60 * 100, 2))") % of one core"
echo "per thread (ticks over the 60 s):"
paste "$W/t0" "$W/t1" | awk '{print $1, $4 - $2}' | sort -k2 -n -r | head -20
for k in torch-gpu jax-gpu torch-cpu python; do echo "$k threads: $(pgrep -f "job $k" | while read p; do ls /proc/$p/task | wc -l; done | paste -sd+)"; done
} 2>&1 | tee "$O/agent_cpu.txt"
curl -s 127.0.0.1:7799/api/jobs > "$O/jobs.json"
kill $AG; pkill -f "bench_watch_cost --mlprof x"
tail -3 "$W/agent.err"
