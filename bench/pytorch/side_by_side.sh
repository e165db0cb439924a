#!/usr/bin/env bash
# trainscope vs PyTorch on the CPU, measured back to back in one session:
#   bench/pytorch/side_by_side.sh [preset] [iters] [threads]
# Runs trainscope (trace on and off) and PyTorch (PyPI torch channels-last and NCHW; Debian's
# torch if /usr/bin/python3 has one) on the same preset, batch and threads, then prints a table.
set -euo pipefail
cd "$(dirname "$0")/../.."
preset="${1:-small}"; iters="${2:-20}"; threads="${3:-2}"; warmup=3
out=$(mktemp -d)
ts=build/default/cli/trainscope
db="$out/side_by_side.db"

$ts run resnet50 --preset "$preset" --threads "$threads" --iters "$iters" --warmup "$warmup" --eval-batches 0 --db "$db" --json > "$out/ts_trace.json" 2>/dev/null
$ts run resnet50 --preset "$preset" --threads "$threads" --iters "$iters" --warmup "$warmup" --eval-batches 0 --db "$db" --no-trace --json > "$out/ts_notrace.json" 2>/dev/null
python3 bench/pytorch/resnet50_train.py --preset "$preset" --threads "$threads" --iters "$iters" --warmup "$warmup" --channels-last --json "$out/pt_cl.json" >/dev/null
python3 bench/pytorch/resnet50_train.py --preset "$preset" --threads "$threads" --iters "$iters" --warmup "$warmup" --json "$out/pt_nchw.json" >/dev/null
if /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  /usr/bin/python3 bench/pytorch/resnet50_train.py --preset "$preset" --threads "$threads" --iters "$iters" --warmup "$warmup" --channels-last --json "$out/pt_deb_cl.json" >/dev/null
fi

python3 - "$out" <<'PY'
import json, os, sys
d = sys.argv[1]
def load(n):
    p = os.path.join(d, n)
    return json.load(open(p)) if os.path.exists(p) else None
ts, tsn = load("ts_trace.json"), load("ts_notrace.json")
rows = []
for name, j in [("trainscope (trace on)", ts), ("trainscope (trace off)", tsn)]:
    m = j["metrics"]
    rows.append((name, m["throughput_median"], m["throughput_p10"], m["throughput_p90"], m["rss_growth_bytes"],
                 f"RSS growth; ledger peak {j['memory_peak_bytes']/2**20:.1f} MiB"))
for name, f in [("PyTorch PyPI channels_last", "pt_cl.json"), ("PyTorch PyPI NCHW", "pt_nchw.json"), ("PyTorch Debian channels_last", "pt_deb_cl.json")]:
    j = load(f)
    if j:
        rows.append((f"{name} ({j['torch_version']})", j["samples_per_s_median"], j["samples_per_s_p10"], j["samples_per_s_p90"], j["rss_growth_bytes"], "RSS growth"))
best_pt = max((r[1] for r in rows if r[0].startswith("PyTorch")), default=None)
print(f"{'':34} {'samples/s':>10} {'p10':>8} {'p90':>8} {'memory MiB':>11}  ratio vs best PyTorch")
for r in rows:
    ratio = f"{r[1]/best_pt:.2f}" if best_pt else "-"
    print(f"{r[0]:34} {r[1]:10.2f} {r[2]:8.2f} {r[3]:8.2f} {r[4]/2**20:11.1f}  {ratio}   ({r[5]})")
print(f"tracing overhead (trace off / trace on throughput): {tsn['metrics']['throughput_median']/ts['metrics']['throughput_median']:.3f}")
PY
echo "raw results in $out"
