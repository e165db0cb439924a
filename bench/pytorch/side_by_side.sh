#!/usr/bin/env bash
# trainscope vs PyTorch on the CPU, measured back to back in one session:
#   bench/pytorch/side_by_side.sh WORKLOAD [preset] [iters] [threads]
#   WORKLOAD: resnet50 | inception_v3 | wgan | transformer | faster_rcnn | seq2seq | deepspeech2   (defaults: small, 20 iterations, 2 threads)
# Runs trainscope (trace on and off) and bench/pytorch/WORKLOAD_train.py (PyPI torch via `python3`,
# channels-last and NCHW; Debian's torch channels-last if /usr/bin/python3 has one; transformer and
# seq2seq: one run each, no memory formats) on the same preset, batch (transformer: token budget) and threads,
# then prints a table; tokens/s too where the workload counts tokens.
# The old form without a workload, side_by_side.sh [preset] [iters] [threads], still runs resnet50.
set -euo pipefail
self="$(cd "$(dirname "$0")" && pwd)/$(basename "$0")"   # usage() reads the header after the cd
cd "$(dirname "$0")/../.."

usage() { sed -n '2,9p' "$self" | sed 's/^# \{0,1\}//'; }
case "${1:-}" in
  resnet50 | inception_v3 | wgan | transformer | faster_rcnn | seq2seq | deepspeech2) workload="$1"; shift ;;
  "" | tiny | small | full)
    workload=resnet50
    echo "side_by_side.sh: no workload given, running resnet50 (usage: side_by_side.sh WORKLOAD [preset] [iters] [threads])" >&2
    ;;
  -h | --help) usage; exit 0 ;;
  *) echo "side_by_side.sh: unknown workload '$1'" >&2; usage >&2; exit 2 ;;
esac
preset="${1:-small}"; iters="${2:-20}"; threads="${3:-2}"; warmup=3
ts=build/default/cli/trainscope
pt="bench/pytorch/${workload}_train.py"
[ -x "$ts" ] || { echo "side_by_side.sh: $ts not found; build it first" >&2; exit 1; }
out=$(mktemp -d)
db="$out/side_by_side.db"

ts_run() {  # name, extra trainscope flags...
  local name="$1"; shift
  "$ts" run "$workload" --preset "$preset" --threads "$threads" --iters "$iters" --warmup "$warmup" --eval-batches 0 \
    --db "$db" --json "$@" > "$out/$name.json" 2> "$out/$name.err" \
    || { echo "side_by_side.sh: trainscope run failed; its stderr:" >&2; cat "$out/$name.err" >&2; exit 1; }
}
ts_run ts_trace
ts_run ts_notrace --no-trace
pt_args=(--preset "$preset" --threads "$threads" --iters "$iters" --warmup "$warmup")
if [ "$workload" = transformer ] || [ "$workload" = seq2seq ] || [ "$workload" = deepspeech2 ]; then
  # A sequence model: no memory formats. The script replays trainscope's batches (same seed, 1).
  python3 "$pt" "${pt_args[@]}" --json "$out/pt.json" >/dev/null
  if /usr/bin/python3 -c 'import torch' 2>/dev/null; then
    /usr/bin/python3 "$pt" "${pt_args[@]}" --json "$out/pt_deb.json" >/dev/null
  fi
else
  python3 "$pt" "${pt_args[@]}" --channels-last --json "$out/pt_cl.json" >/dev/null
  python3 "$pt" "${pt_args[@]}" --json "$out/pt_nchw.json" >/dev/null
  if /usr/bin/python3 -c 'import torch' 2>/dev/null; then
    /usr/bin/python3 "$pt" "${pt_args[@]}" --channels-last --json "$out/pt_deb_cl.json" >/dev/null
  fi
fi

python3 - "$out" "$workload" "$preset" "$iters" "$warmup" "$threads" <<'PY'
import json, os, sqlite3, sys
d, workload, preset, iters, warmup, threads = sys.argv[1:]
def load(n):
    p = os.path.join(d, n)
    return json.load(open(p)) if os.path.exists(p) else None
ts, tsn = load("ts_trace.json"), load("ts_notrace.json")
budget = "token budget" if workload == "transformer" else "batch"
print(f"{workload} {preset}, {budget} {ts['batch_size']}, {warmup} warm-up + {iters} timed iterations, {threads} thread(s)")
if workload == "wgan":
    print("samples per iteration = 5 x batch (the real images of the 5 critic steps), on both sides")
if workload == "transformer":
    print("samples = sentence pairs; tokens = real source (with EOS) + target (+ 1) tokens; both per iteration")
if workload == "seq2seq":
    print("samples = sentence pairs; tokens = real source + target (+ 1) tokens; both per iteration")
if workload == "deepspeech2":
    print("samples = utterances; tokens = real (unpadded) spectrogram frames; both per iteration")
tokens = "tokens_per_s_median" in ts["metrics"]
rows = []
for name, j in [("trainscope (trace on)", ts), ("trainscope (trace off)", tsn)]:
    m = j["metrics"]
    rows.append((name, m["throughput_median"], m["throughput_p10"], m["throughput_p90"], m["rss_growth_bytes"],
                 f"RSS growth; ledger peak {j['memory_peak_bytes']/2**20:.1f} MiB", m.get("tokens_per_s_median")))
pt_runs = [("PyTorch PyPI channels_last", "pt_cl.json"), ("PyTorch PyPI NCHW", "pt_nchw.json"),
           ("PyTorch Debian channels_last", "pt_deb_cl.json"), ("PyTorch PyPI", "pt.json"), ("PyTorch Debian", "pt_deb.json")]
for name, f in pt_runs:
    j = load(f)
    if j:
        if j["config"]["batch_size"] != ts["batch_size"]:
            print(f"warning: {f} ran {budget} {j['config']['batch_size']}, trainscope {budget} {ts['batch_size']}")
        label = f"{name} ({j['torch_version']})" + (f" {j['config']['attention']}" if "attention" in j["config"] else "")
        rows.append((label, j["samples_per_s_median"], j["samples_per_s_p10"], j["samples_per_s_p90"],
                     j["rss_growth_bytes"], "RSS growth", j.get("tokens_per_s_median")))
if workload in ("transformer", "seq2seq"):
    # Same batches on both sides? trainscope's run records pairs and tokens per iteration.
    db, same = sqlite3.connect(os.path.join(d, "side_by_side.db")), True
    for tj in (ts, tsn):
        ts_pairs = [r[0] for r in db.execute("SELECT samples FROM iterations WHERE run_id = ? ORDER BY idx", (tj["run_id"],))]
        ts_tokens = [int(r[0]) for r in db.execute(
            "SELECT value FROM metrics WHERE run_id = ? AND name = 'tokens' ORDER BY iteration", (tj["run_id"],))]
        ts_batches = list(zip(ts_pairs, ts_tokens))
        for _, f in pt_runs:
            j = load(f)
            if j:
                pt_batches = [(b[0], b[3] + b[4]) for b in j["config"]["batches"]]
                if pt_batches != ts_batches:
                    same = False
                    print(f"warning: {f} trained on other batches than trainscope run {tj['run_id']} "
                          f"(pairs, tokens): {pt_batches} vs {ts_batches}")
    if same:
        print(f"batches: every run trained on the same {len(ts_batches)} batches (pairs and tokens per iteration checked)")
best_pt = max((r[1] for r in rows if r[0].startswith("PyTorch")), default=None)
tok_head = f" {'tokens/s':>10}" if tokens else ""
print(f"{'':48} {'samples/s':>10} {'p10':>8} {'p90':>8}{tok_head} {'memory MiB':>11}  ratio vs best PyTorch")
for r in rows:
    ratio = f"{r[1]/best_pt:.2f}" if best_pt else "-"
    tok = (f" {r[6]:10.0f}" if r[6] is not None else f" {'-':>10}") if tokens else ""
    print(f"{r[0]:48} {r[1]:10.2f} {r[2]:8.2f} {r[3]:8.2f}{tok} {r[4]/2**20:11.1f}  {ratio}   ({r[5]})")
print(f"tracing overhead (trace off / trace on throughput): {tsn['metrics']['throughput_median']/ts['metrics']['throughput_median']:.3f}")
PY
echo "raw results in $out"
