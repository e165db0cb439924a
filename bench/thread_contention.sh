#!/usr/bin/env bash
# Threads on a busy machine (issue 38; docs/measurements.md, "Threads on a busy machine"):
#   bench/thread_contention.sh hog   [workload] [preset] [pairs] [iters]
#     a busy loop holds core 0 throughout; per pair: --threads 1, then --threads 2 (order
#     alternating between pairs). Target: threads 2 gives at least 0.9x the rate of threads 1.
#     Each run's line says how its threads waited (spin or sleep) and what it saw as it began.
#   bench/thread_contention.sh quiet [workload] [preset] [pairs] [iters]
#     no hog; --threads 2 with trainscope's spin count (cli/openmp_waiting.h) against libgomp's
#     default (GOMP_SPINCOUNT=300000, its documented default), interleaved. Target: no slower.
# Each figure is the run's sustained headline rate. The machine's load is printed with every run:
# other work beside the hog makes the ratios noise, and the script says so when it saw any.
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:?hog or quiet}"; workload="${2:-resnet50}"; preset="${3:-small}"; pairs="${4:-5}"; iters="${5:-8}"
ts=build/default/cli/trainscope
cores=$(nproc)
out=$(mktemp -d)
hog_pid=""
stop_hog() { [ -n "$hog_pid" ] && kill "$hog_pid" 2>/dev/null || true; hog_pid=""; }
trap 'stop_hog; rm -rf "$out"' EXIT
if [ "$mode" = hog ]; then
  # Bounded: at most an hour, and killed on exit.
  timeout 3600 taskset -c 0 sh -c 'while :; do :; done' &
  hog_pid=$!
fi

one_run() {  # label, then env assignments and run flags
  local label=$1; shift
  env "$@" "$ts" run "$workload" --preset "$preset" --iters "$iters" --warmup 2 --eval-batches 0 \
    --db "$out/t.db" --json "${threads_flag[@]}" > "$out/$label.json" 2>/dev/null
  read -r load1 _ < /proc/loadavg
  # How its OpenMP threads waited, and why (cli/openmp_waiting.h).
  waiting=$(sqlite3 "$out/t.db" "select value from environment where key = 'env.TS_OPENMP_WAITING'
                                 and run_id = (select max(id) from runs)" 2>/dev/null || true)
  echo "$label load $load1; ${waiting:-GOMP_SPINCOUNT set by the script}" >> "$out/loads"
}
for i in $(seq "$pairs"); do
  if [ "$mode" = hog ]; then
    a=(t1 --threads 1); b=(t2 --threads 2)
  else
    a=(ours --threads 2); b=(libgomp --threads 2)
  fi
  first=(a b); [ $((i % 2)) -eq 0 ] && first=(b a)
  for side in "${first[@]}"; do
    if [ "$side" = a ]; then set -- "${a[@]}"; else set -- "${b[@]}"; fi
    label="$1.$i"; threads_flag=("$2" "$3")
    if [ "$1" = libgomp ]; then one_run "$label" GOMP_SPINCOUNT=300000; else one_run "$label" TS_BENCH=1; fi
    echo "  $(tail -1 "$out/loads")" >&2
  done
done
stop_hog
python3 - "$out" "$mode" "$pairs" "$cores" <<'PY'
import json, statistics, sys
d, mode, pairs, cores = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
a, b = ("t1", "t2") if mode == "hog" else ("libgomp", "ours")
def rate(label):
    m = json.load(open(f"{d}/{label}.json"))["metrics"]
    return m["headline_throughput"]
ra = [rate(f"{a}.{i}") for i in range(1, pairs + 1)]
rb = [rate(f"{b}.{i}") for i in range(1, pairs + 1)]
ratios = [y / x for x, y in zip(ra, rb)]
print(f"{a}: median {statistics.median(ra):.3f}/s   {b}: median {statistics.median(rb):.3f}/s")
print(f"ratio {b}/{a} per pair: {' '.join(f'{r:.3f}' for r in ratios)}")
print(f"median ratio {statistics.median(ratios):.3f} (min {min(ratios):.3f}, max {max(ratios):.3f}, {pairs} pairs)")
loads = [float(l.split(";")[0].split()[-1]) for l in open(f"{d}/loads")]
expected = (1 if mode == "hog" else 0) + 2  # the hog, and at most two threads of the run itself
if max(loads) > expected + 0.5:
    print(f"NOISE: the 1-minute load reached {max(loads):.1f} on {cores} cores, where the hog and the run account "
          f"for {expected}: other work ran beside these runs; treat the ratios as noisy")
PY
