#!/usr/bin/env bash
# trainscope's data parallelism against PyTorch DistributedDataParallel (gloo) across two hosts,
# interleaved (trainscope, DDP, DDP, trainscope, ...), in the workload's unit:
#   bench/pytorch/ddp_hosts.sh WORKLOAD [--rate 1gbit] [--pairs 3] [--preset small] [--iters 10]
#                              [--warmup 2] [--threads 1] [--python PY] [--trainscope BIN]
#                              [--trainscope-args "ARGS"]
# WORKLOAD: resnet50 (images/s) or transformer (tokens/s), the scripts that take --ddp.
# The two hosts are network namespaces made here (scripts/netns-hosts up 2 --rate RATE: a tbf
# shaper both ways on each host's link; needs root) and removed at the end; it refuses to run
# where hosts tsh* already exist. One rank per host, --threads threads each, trainscope with
# --bucket-mb 25 (DDP's bucket_cap_mb 25). Each side's figure is the job's: every rank's work
# over the timed time ("all ranks ... sustained"; the script's "ddp.job_*_per_s"). Prints each
# pair, then the ratio trainscope/DDP: median and spread over the pairs. PyTorch: an outside
# dependency (pip install torch); --python names the interpreter that has it. --trainscope-args
# adds options to trainscope's side (e.g. "--priority": its schedule with cross-barrier, which DDP
# does not have).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
workload=${1:-}
[ -n "$workload" ] && shift || true
rate=1gbit pairs=3 preset=small iters=10 warmup=2 threads=1 python=python3 ts_args=""
trainscope="$root/build/default/cli/trainscope"
while [ $# -gt 0 ]; do
  case "$1" in
    --rate) rate=$2; shift 2 ;;
    --pairs) pairs=$2; shift 2 ;;
    --preset) preset=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --python) python=$2; shift 2 ;;
    --trainscope) trainscope=$2; shift 2 ;;
    --trainscope-args) ts_args=$2; shift 2 ;;
    *) echo "ddp_hosts.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
case "$workload" in
  resnet50) unit="images/s" ddp_key=job_samples_per_s ;;
  transformer) unit="tokens/s" ddp_key=job_tokens_per_s ;;
  *) echo "ddp_hosts.sh: WORKLOAD is resnet50 or transformer (got '$workload')" >&2; exit 2 ;;
esac
me=ddp_hosts.sh
source "$here/netns_pair.sh"

run_trainscope() {  # prints the job's rate
  local out
  out=$("$trainscope" run "$workload" --preset "$preset" --threads "$threads" --iters "$iters" --warmup "$warmup" \
        --eval-batches 0 --bucket-mb 25 --hosts tsh1:1,tsh2:1 "${over_hosts[@]}" --db "$work/ts.db" $ts_args 2>&1) ||
    { echo "$out" >&2; return 1; }
  echo "$out" | sed -n 's/.*all ranks \([0-9.]*\) .* sustained.*/\1/p' | head -1
}

run_ddp() {  # prints the job's rate
  run_torch_pair "$here/${workload}_train.py" --ddp --preset "$preset" --threads "$threads" --iters "$iters" \
    --warmup "$warmup" --json "$work/ddp.json" || return 1
  "$python" -c "import json,sys; print(f\"{json.load(open(sys.argv[1]))['ddp'][sys.argv[2]]:.2f}\")" "$work/ddp.json" "$ddp_key"
}

echo "# $workload $preset, 2 hosts at $rate, $threads thread(s) per rank, $iters timed iterations after $warmup; trainscope ${ts_args:-with its defaults}; $(date -u +%FT%TZ)"
echo "# cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), load at start $(cut -d' ' -f1-3 /proc/loadavg)"
ratios=()
for p in $(seq "$pairs"); do
  if [ $((p % 2)) -eq 1 ]; then ts=$(run_trainscope); ddp=$(run_ddp); else ddp=$(run_ddp); ts=$(run_trainscope); fi
  ratio=$(awk -v a="$ts" -v b="$ddp" 'BEGIN { printf "%.3f", a / b }')
  ratios+=("$ratio")
  echo "pair $p: trainscope $ts $unit, DDP (gloo) $ddp $unit, ratio $ratio (load $(cut -d' ' -f1 /proc/loadavg))"
done
printf '%s\n' "${ratios[@]}" | sort -n | awk '{ r[NR] = $1 } END {
  m = (NR % 2) ? r[(NR + 1) / 2] : (r[NR / 2] + r[NR / 2 + 1]) / 2
  printf "trainscope / DDP: median %.3f over %d pairs (spread %.3f-%.3f)\n", m, NR, r[1], r[NR] }'
