#!/usr/bin/env bash
# Fifth GPU session (H100), third call: mlprof on a large real memory snapshot (issue 24's
# speed goal on real data), against PyTorch's own _memory_viz in the same run. Needs a
# stripped release mlprof in .dev/mlprof.
set -u
export PYTHONUNBUFFERED=1
O=${OUT:-/tmp/out}
W=/tmp/w16
rm -rf "$W"; mkdir -p "$O" "$W"
exec > >(tee -a "$O/log.txt") 2>&1
timeout 200 python3 scripts/gpu_checks/big_snapshot.py "$W/big.pickle" --seconds 25 2>&1 | tail -2
ls -la "$W"
# Wall time and the child's peak RSS (no GNU time on that machine).
t() {
  timeout 120 python3 -c 'import resource, subprocess, sys, time
start = time.time()
done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL)
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
print(f"{time.time() - start:.2f} s, {peak:.0f} MB peak RSS, exit {done.returncode}")' "$@"
}
echo "mlprof info:"; t .dev/mlprof info "$W/big.pickle"
echo "mlprof memory_profile:"; t .dev/mlprof analyze "$W/big.pickle" --tool memory_profile --format json
timeout 60 .dev/mlprof analyze "$W/big.pickle" --tool memory_profile 2>&1 | head -12
echo "python pickle.load:"; t python3 -c 'import pickle, sys; pickle.load(open(sys.argv[1], "rb"))' "$W/big.pickle"
echo "torch _memory_viz stats:"; t python3 -m torch.cuda._memory_viz stats "$W/big.pickle"
