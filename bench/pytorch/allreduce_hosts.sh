#!/usr/bin/env bash
# trainscope's all-reduce (`bench collectives`, MPI) against PyTorch's gloo (gloo_allreduce.py)
# across two hosts, interleaved sweeps (trainscope, gloo, gloo, trainscope, ...), busbw per size:
#   bench/pytorch/allreduce_hosts.sh [--rate 1gbit] [--pairs 2] [--min-bytes 1M] [--max-bytes 64M]
#                                    [--factor 4] [--iters 10] [--warmup 2] [--python PY]
#                                    [--trainscope BIN] [--trainscope-args "ARGS"] [--algorithms "tcp mpi"]
# The hosts are network namespaces made here (netns_pair.sh: root; removed at the end). Both sides
# time float32 sums the same way (the mean per call over the ranks) and take the same bus factor.
# Prints per size each side's busbw (every sweep), trainscope's as a share of the link's TCP
# rate (measured by `bench collectives`), and the ratio trainscope/gloo: median and spread.
# --trainscope-args adds options to `bench collectives` (e.g. "--mca btl_tcp_progress_thread=1").
# --algorithms: trainscope's sweeps for each of these TS_ALLREDUCE values (default: the
# environment's, else mpi), each pair of sweeps running all of them beside gloo's (order reversed
# every other pair); a table for each against gloo, then each against the first.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
rate=1gbit pairs=2 min=1M max=64M factor=4 iters=10 warmup=2 python=python3 ts_args=""
algorithms=${TS_ALLREDUCE:-mpi}
trainscope="$root/build/default/cli/trainscope"
while [ $# -gt 0 ]; do
  case "$1" in
    --rate) rate=$2; shift 2 ;;
    --pairs) pairs=$2; shift 2 ;;
    --min-bytes) min=$2; shift 2 ;;
    --max-bytes) max=$2; shift 2 ;;
    --factor) factor=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --python) python=$2; shift 2 ;;
    --trainscope) trainscope=$2; shift 2 ;;
    --trainscope-args) ts_args=$2; shift 2 ;;
    --algorithms) algorithms=$2; shift 2 ;;
    *) echo "allreduce_hosts.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
me=allreduce_hosts.sh
source "$here/netns_pair.sh"
sweep=(--min-bytes "$min" --max-bytes "$max" --factor "$factor" --iters "$iters" --warmup "$warmup")

run_trainscope() {  # ALGORITHM: appends the sweep's JSON to $work/trainscope-ALGORITHM.jsonl
  TS_ALLREDUCE=$1 "$trainscope" bench collectives --collectives all_reduce "${sweep[@]}" --hosts tsh1:1,tsh2:1 \
    "${over_hosts[@]}" --json --db "$work/ts.db" $ts_args 2>"$work/ts.log" | tr -d '\n' >>"$work/trainscope-$1.jsonl" ||
    { cat "$work/ts.log" >&2; return 1; }
  echo >>"$work/trainscope-$1.jsonl"
}

run_gloo() {  # appends the sweep's JSON to $work/gloo.jsonl
  run_torch_pair "$here/gloo_allreduce.py" "${sweep[@]}" --json || return 1
  tr -d '\n' <"$work/rank0.out" >>"$work/gloo.jsonl"
  echo >>"$work/gloo.jsonl"
}

echo "# all_reduce, 2 hosts at $rate, float32 sum, $iters timed calls per size after $warmup, $pairs pairs of sweeps; trainscope TS_ALLREDUCE=${algorithms// /, } ${ts_args}; $(date -u +%FT%TZ)"
echo "# cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), load at start $(cut -d' ' -f1-3 /proc/loadavg)"
read -r -a algs <<<"$algorithms"
for p in $(seq "$pairs"); do
  if [ $((p % 2)) -eq 1 ]; then
    for a in "${algs[@]}"; do run_trainscope "$a"; done
    run_gloo
  else
    run_gloo
    for ((i = ${#algs[@]} - 1; i >= 0; i--)); do run_trainscope "${algs[i]}"; done
  fi
done
echo "# load at the end $(cut -d' ' -f1-3 /proc/loadavg)"
"$python" - "$work/gloo.jsonl" "${algs[@]/#/$work/trainscope-}" <<'PY'
import json, statistics, sys
gl = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
runs = [(f.rsplit("trainscope-", 1)[1], [json.loads(l) for l in open(f + ".jsonl") if l.strip()]) for f in sys.argv[2:]]
tcp = [t["tcp_rate"]["gbps"] for _, ts in runs for t in ts if t.get("tcp_rate") and t["tcp_rate"].get("measured")]
print(f"# the link's TCP rate (bench collectives, one stream): {', '.join(f'{x:.3f}' for x in tcp)} GB/s")

def busbw(ts, size):
    return [[r for r in t["rows"] if r["bytes"] == size][0]["busbw_gbps"] for t in ts]

for name, ts in runs:
    print(f"# trainscope TS_ALLREDUCE={name} against gloo")
    print(f"# {'size(B)':>10}  {'trainscope busbw (GB/s)':>24}  {'%tcp':>6}  {'gloo busbw (GB/s)':>20}  ratio: median (spread)")
    for i, row in enumerate(gl[0]["rows"]):
        size = row["bytes"]
        a = busbw(ts, size)
        b = [g["rows"][i]["busbw_gbps"] for g in gl]
        ratios = sorted(x / y for x, y in zip(a, b))
        share = f"{100 * statistics.median(a) / statistics.median(tcp):.0f}%" if tcp else "-"
        print(f"  {size:>10}  {', '.join(f'{x:.3f}' for x in a):>24}  {share:>6}  {', '.join(f'{x:.3f}' for x in b):>20}  "
              f"{statistics.median(ratios):.3f} ({ratios[0]:.3f}-{ratios[-1]:.3f})")
for name, ts in runs[1:]:
    first, base = runs[0]
    print(f"# TS_ALLREDUCE={first} against TS_ALLREDUCE={name}, pair by pair: median (spread)")
    for row in gl[0]["rows"]:
        size = row["bytes"]
        ratios = sorted(x / y for x, y in zip(busbw(base, size), busbw(ts, size)))
        print(f"  {size:>10}  {statistics.median(ratios):.3f} ({ratios[0]:.3f}-{ratios[-1]:.3f})")
PY
