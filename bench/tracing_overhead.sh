#!/usr/bin/env bash
# trainscope's own tracing cost: trace on versus off, interleaved (on, off, on, off, ...) so that
# drift in the machine's speed hits both alike: bench/tracing_overhead.sh [preset] [pairs] [iters]
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-tiny}"; pairs="${2:-8}"; iters="${3:-50}"
ts=build/default/cli/trainscope
out=$(mktemp -d)
for i in $(seq "$pairs"); do
  for mode in on off; do
    flag=""; [ "$mode" = off ] && flag="--no-trace"
    $ts run resnet50 --preset "$preset" --threads 2 --iters "$iters" --warmup 3 --eval-batches 0 \
      --db "$out/t.db" --json $flag > "$out/$mode.$i.json" 2>/dev/null
  done
done
python3 - "$out" "$pairs" <<'PY'
import json, statistics, sys
d, pairs = sys.argv[1], int(sys.argv[2])
on = [json.load(open(f"{d}/on.{i}.json"))["metrics"] for i in range(1, pairs + 1)]
off = [json.load(open(f"{d}/off.{i}.json"))["metrics"] for i in range(1, pairs + 1)]
ratios = [b["throughput_median"] / a["throughput_median"] for a, b in zip(on, off)]
print(f"trace on : median {statistics.median(m['throughput_median'] for m in on):.2f} samples/s, {on[0]['trace_events']/ (on[0]['timed_iterations'] + 3):.0f} events per iteration")
print(f"trace off: median {statistics.median(m['throughput_median'] for m in off):.2f} samples/s")
print(f"throughput ratio off/on per pair: {' '.join(f'{r:.3f}' for r in ratios)}")
print(f"median ratio (off/on; >1 means tracing costs): {statistics.median(ratios):.4f}")
PY
