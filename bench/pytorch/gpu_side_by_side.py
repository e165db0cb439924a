#!/usr/bin/env python3
"""trainscope against PyTorch eager on the same GPU, interleaved in pairs, in each workload's unit.

    bench/pytorch/gpu_side_by_side.py --trainscope build/gpu/cli/trainscope [--python python3]
        [--device cuda] [--preset full] [--cases resnet50:32,resnet50:128,transformer:0]
        [--iters 30] [--warmup 5] [--pairs 3] [--time-budget SECONDS] [--out FILE]
        [--threads N] [--seed 1] [--no-trace] [--no-tf32] [--peak-matmul N] [--db FILE]

Each case WORKLOAD:BATCH (BATCH 0: the preset's default; for transformer the batch is the token
budget) runs as pairs of
    TS_CUDA_TF32=1 trainscope run WORKLOAD --preset P --device D [--batch N] --iters I --warmup W
                   --eval-batches 0 --seed S --db DB --json
    python3 bench/pytorch/WORKLOAD_train.py --preset P --device D --batch N --iters I --warmup W
                   --seed S --mfu on --json FILE
in alternating order (trainscope first, then PyTorch first, ...) so that drift falls on both
sides alike; round k runs pair k of every case, so a time budget that stops early leaves every
case with about as many pairs. TF32 is on on both sides (--no-tf32: off on both).

Per case it prints and writes (--out, rewritten after every pair, so a run cut short keeps what
it measured): each side's rate (sustained: the timed iterations' work over their time; images/s
for resnet50, tokens/s as trainscope counts them for transformer), the ratio trainscope / PyTorch
of every pair with its median, min-max spread and the number of pairs; peak device memory on both
sides (trainscope's caching allocator's used and reserved peaks, gpuN_allocator_used_peak_bytes
and _reserved_peak_bytes, against torch.cuda.max_memory_allocated() and max_memory_reserved(),
all over the whole run; on the CPU the resident memory the training added at its peak) and their
ratio; MFU on both sides: model FLOPs per unit (3 x the forward FLOPs PyTorch's FlopCounterMode
counts on the timed batches, the same for both sides) x the rate, over the GPU's datasheet dense
peak (common.DATASHEET_PEAKS) and over a measured matmul peak (common.measure_matmul_peak).

A failure on one side (exit status, time-out, other batches than trainscope's) is recorded and
shown; the other side and the other cases go on. --time-budget: no pair starts when the time it
is estimated to take (the longest pair of its case so far, or of any case before its first)
would end past the budget; the output says which pairs were left out. A run still going 60 s
past the budget is stopped and recorded as timed out.

--device cpu runs the same on the CPU (small presets), to exercise the driver without a GPU.
"""
import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))

# workload: the PyTorch script, the JSON field of its headline rate and what a unit of it is.
WORKLOADS = {
    "resnet50": {"script": "resnet50_train.py", "pytorch_rate": "samples_per_s", "unit": "images/s", "per": "image"},
    "transformer": {"script": "transformer_train.py", "pytorch_rate": "tokens_per_s", "unit": "tokens/s",
                    "per": "token"},
}
MIB = 2.0 ** 20
BUDGET_GRACE = 60.0  # seconds past --time-budget that a run started within it may go on


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trainscope", required=True, help="the trainscope binary (e.g. build/gpu/cli/trainscope)")
    p.add_argument("--python", default=sys.executable, help="the Python whose torch runs the PyTorch side")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--preset", default="full")
    p.add_argument("--cases", default="resnet50:32,resnet50:128,transformer:0",
                   help="WORKLOAD:BATCH,... (BATCH 0: the preset's; transformer: a token budget)")
    p.add_argument("--iters", type=int, default=30, help="timed iterations of every run")
    p.add_argument("--warmup", type=int, default=5, help="untimed iterations first (cudnn.benchmark's search, "
                                                         "trainscope's cudnnFind)")
    p.add_argument("--pairs", type=int, default=3, help="pairs per case (at most; --time-budget may stop earlier)")
    p.add_argument("--time-budget", type=float, default=0.0, metavar="SECONDS",
                   help="start no pair that would end past this many seconds from the start (0: no budget)")
    p.add_argument("--run-timeout", type=float, default=600.0, metavar="SECONDS",
                   help="a run that takes longer is stopped and recorded as failed")
    p.add_argument("--threads", type=int, default=0, help="--threads for both sides (0: each side's default)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--no-trace", action="store_true", help="trainscope runs --no-trace (default: traced, as users run it)")
    p.add_argument("--no-tf32", action="store_true", help="TF32 off on both sides (TS_CUDA_TF32=0, --no-tf32)")
    p.add_argument("--peak-matmul", type=int, default=0, metavar="N",
                   help="the PyTorch side's measured matmul peak: N x N x N (0: 8192 on cuda, 1024 on the CPU)")
    p.add_argument("--db", help="trainscope's run database (default: a fresh one in a temporary folder)")
    p.add_argument("--out", help="write the results as JSON here (rewritten after every pair)")
    a = p.parse_args(argv)
    a.case_list = []
    for item in a.cases.split(","):
        name, _, batch = item.strip().partition(":")
        if name not in WORKLOADS:
            p.error(f"--cases: unknown workload {name!r} (one of {', '.join(WORKLOADS)})")
        try:
            n = int(batch or "0")
        except ValueError:
            p.error(f"--cases: {item!r}: the batch after ':' must be a number")
        if n < 0:
            p.error(f"--cases: {item!r}: negative batch")
        a.case_list.append((f"{name}:{n}", name, n))
    if a.pairs < 1 or a.iters < 1 or a.warmup < 0:
        p.error("--pairs and --iters must be at least 1, --warmup at least 0")
    if not os.access(a.trainscope, os.X_OK):
        p.error(f"--trainscope {a.trainscope}: not an executable (build it: cmake --build --preset default, "
                "or scripts/gpu-check on the GPU machine)")
    return a


def tail(text, n=1500):
    text = (text or "").strip()
    return text if len(text) <= n else "..." + text[-n:]


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def run_process(cmd, env, timeout):
    t0 = time.monotonic()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
        return r.returncode, r.stdout, r.stderr, time.monotonic() - t0
    except OSError as e:  # not there, not executable
        return 127, "", f"{cmd[0]}: {e}", time.monotonic() - t0
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        return None, out, err + f"\n(stopped after {timeout:.0f} s)", time.monotonic() - t0


def trainscope_side(a, workload, batch, db, timeout):
    cmd = [a.trainscope, "run", workload, "--preset", a.preset, "--device", a.device, "--iters", str(a.iters),
           "--warmup", str(a.warmup), "--eval-batches", "0", "--seed", str(a.seed), "--db", db, "--json"]
    if batch:
        cmd += ["--batch", str(batch)]
    if a.threads:
        cmd += ["--threads", str(a.threads)]
    if a.no_trace:
        cmd.append("--no-trace")
    env = {**os.environ, "TS_CUDA_TF32": "0" if a.no_tf32 else "1"}
    rc, out, err, secs = run_process(cmd, env, timeout)
    side = {"command": "TS_CUDA_TF32=" + env["TS_CUDA_TF32"] + " " + " ".join(cmd), "seconds": secs}
    try:
        j = json.loads(out)
    except ValueError:
        j = None
    if rc != 0 or j is None or j.get("status") not in (None, "done", "ok", "completed"):
        why = "timed out" if rc is None else f"exit status {rc}"
        if j is not None and j.get("error"):
            why += f"; run {j.get('run_id')} {j.get('status')}: {j['error']}"
        side["error"] = f"{why}; stderr: {tail(err)}"
        return side
    m, units = j.get("metrics", {}), j.get("units", {})
    if "headline_throughput" not in m:
        side["error"] = f"its JSON has no headline_throughput (status {j.get('status')}); stderr: {tail(err)}"
        return side
    gpu_key = next((k for k in sorted(m) if k.startswith("gpu") and k.endswith("_allocator_used_peak_bytes")), None)
    prefix = gpu_key[: -len("allocator_used_peak_bytes")] if gpu_key else None
    phases = {p["phase"]: p["median_ms"] for p in j.get("phases", [])}
    side.update({
        "run_id": j["run_id"],
        "status": j.get("status"),
        "rate": m["headline_throughput"],
        "unit": units.get("headline_throughput"),
        "batch_size": j.get("batch_size"),
        "iteration_ms_median": m.get("iteration_time_median"),
        "data_phase_ms_median": phases.get("data"),
        "tf32_allowed": m.get("tf32_allowed"),
        "device_used_peak_bytes": m.get(prefix + "allocator_used_peak_bytes") if prefix else None,
        "device_reserved_peak_bytes": m.get(prefix + "allocator_reserved_peak_bytes") if prefix else None,
        "device_driver_used_bytes": m.get(prefix + "driver_used_bytes") if prefix else None,
        "rss_peak_growth_bytes": m.get("rss_peak_growth_bytes", m.get("rss_growth_bytes")),
        "ledger_peak_bytes": j.get("memory_peak_bytes"),
        "gpu_busy_fraction": j["gpu"][0]["busy_fraction"] if j.get("gpu") else None,
    })
    roofline = j.get("roofline")
    if roofline:
        compute = next((c for c in roofline.get("classes", []) if c.get("class") == "compute"), None)
        if compute is not None:
            side["roofline_compute_gflop_per_iteration"] = compute.get("gflop")
    return side


def pytorch_side(a, workload, batch, timeout):
    w = WORKLOADS[workload]
    with tempfile.TemporaryDirectory(prefix="gpu_side_by_side_") as tmp:
        out = os.path.join(tmp, "pytorch.json")
        cmd = [a.python, os.path.join(HERE, w["script"]), "--preset", a.preset, "--device", a.device,
               "--batch", str(batch), "--iters", str(a.iters), "--warmup", str(a.warmup), "--seed", str(a.seed),
               "--mfu", "on", "--json", out]
        if a.threads:
            cmd += ["--threads", str(a.threads)]
        if a.no_tf32:
            cmd.append("--no-tf32")
        if a.peak_matmul:
            cmd += ["--peak-matmul", str(a.peak_matmul)]
        rc, _, err, secs = run_process(cmd, dict(os.environ), timeout)
        side = {"command": " ".join(cmd), "seconds": secs}
        if rc != 0:
            side["error"] = f"{'timed out' if rc is None else f'exit status {rc}'}; stderr: {tail(err)}"
            return side
        with open(out) as f:
            j = json.load(f)
    dm = j.get("device_memory") or {}
    side.update({
        "rate": j[w["pytorch_rate"]],
        "unit": w["unit"],
        "torch": j["torch_version"],
        "device_name": j.get("device_name"),
        "cuda_version": j.get("cuda_version"),
        "cudnn_version": j.get("cudnn_version"),
        "tf32": j.get("tf32"),
        "cudnn_benchmark": j.get("cudnn_benchmark"),
        "iteration_ms_median": j["iteration_s_median"] * 1e3,
        "device_used_peak_bytes": dm.get("max_allocated_bytes"),
        "device_reserved_peak_bytes": dm.get("max_reserved_bytes"),
        "device_timed_used_peak_bytes": dm.get("timed_max_allocated_bytes"),
        "device_driver_used_bytes": dm.get("driver_used_bytes"),
        "rss_peak_growth_bytes": j.get("peak_rss_growth_bytes"),
        "model_flops": j.get("model_flops"),
        "peak_flops": j.get("peak_flops"),
        "mfu": j.get("mfu"),
        "batches": j["config"].get("batches"),
        "timed_units_per_iteration": (statistics.mean(b[3] + b[4] for b in j["config"]["batches"][a.warmup:])
                                      if workload == "transformer" else j["config"]["batch_size"]),
    })
    return side


def same_batches(db, ts, pt):
    """None, or why trainscope and PyTorch trained on other batches (transformer: the pairs and tokens
    of every iteration, warm-up included, from trainscope's db and PyTorch's config.batches)."""
    if not pt.get("batches"):
        return None
    con = sqlite3.connect(db)
    try:
        pairs = [r[0] for r in con.execute("SELECT samples FROM iterations WHERE run_id = ? ORDER BY idx",
                                           (ts["run_id"],))]
        tokens = [int(r[0]) for r in con.execute(
            "SELECT value FROM metrics WHERE run_id = ? AND name = 'tokens' ORDER BY iteration", (ts["run_id"],))]
    finally:
        con.close()
    theirs = [(b[0], b[3] + b[4]) for b in pt["batches"]]
    ours = list(zip(pairs, tokens))
    if ours != theirs:
        return (f"PyTorch trained on other batches than trainscope run {ts['run_id']} (pairs, tokens per iteration): "
                f"{theirs[:4]}... vs {ours[:4]}...")
    return None


def memory_kind(device):
    return ("the allocators' used peaks over the whole run" if device == "cuda"
            else "the resident memory the training added at its peak")


def peak_memory(side, device, reserved=False):
    if "error" in side:
        return None
    if device == "cuda":
        return side.get("device_reserved_peak_bytes" if reserved else "device_used_peak_bytes")
    return None if reserved else side.get("rss_peak_growth_bytes")


def mfu_of(rate, pt):
    """MFU of a rate (either side's) with the PyTorch run's model FLOPs and peaks: model FLOPs per
    unit x units/s over the datasheet peak and over the measured matmul peak."""
    if rate is None or not pt or "error" in pt or not pt.get("model_flops") or not pt.get("peak_flops"):
        return None
    per_unit = pt["model_flops"].get("per_unit")
    peaks = pt["peak_flops"]
    if per_unit is None:
        return None
    achieved = per_unit * rate
    return {"achieved_flops": achieved,
            "datasheet": achieved / peaks["datasheet_flops"] if peaks.get("datasheet_flops") else None,
            "measured_matmul": achieved / peaks["matmul_measured_flops"]}


def ratio(x, y):
    return x / y if (x is not None and y) else None


def finish_pair(a, pair, db, reference_pt):
    ts, pt = pair["trainscope"], pair["pytorch"]
    if "error" not in ts and "error" not in pt:
        why = same_batches(db, ts, pt)
        if why:
            pair["error"] = why
    ok = "error" not in ts and "error" not in pt and "error" not in pair
    pair["ratio"] = ratio(ts.get("rate"), pt.get("rate")) if ok else None
    pair["memory_ratio"] = ratio(peak_memory(ts, a.device), peak_memory(pt, a.device))
    pair["reserved_ratio"] = ratio(peak_memory(ts, a.device, True), peak_memory(pt, a.device, True))
    # The model FLOPs and peaks come from this pair's PyTorch run, or another of the case's (same batches).
    ref = pt if "error" not in pt else reference_pt
    pair["mfu"] = {"trainscope": mfu_of(ts.get("rate") if "error" not in ts else None, ref),
                   "pytorch": mfu_of(pt.get("rate") if "error" not in pt else None, ref)}
    pt.pop("batches", None)


def summarise(a, case):
    pairs = case["pairs"]
    ratios = [p["ratio"] for p in pairs if p["ratio"] is not None]
    ts_ok = [p["trainscope"] for p in pairs if "error" not in p["trainscope"]]
    pt_ok = [p["pytorch"] for p in pairs if "error" not in p["pytorch"]]
    ref = pt_ok[-1] if pt_ok else None
    s = {
        "pairs_run": len(pairs),
        "pairs_with_ratio": len(ratios),
        "ratio_median": median(ratios),
        "ratio_min": min(ratios) if ratios else None,
        "ratio_max": max(ratios) if ratios else None,
        "trainscope_rate_median": median(t["rate"] for t in ts_ok),
        "pytorch_rate_median": median(t["rate"] for t in pt_ok),
        "memory_what": memory_kind(a.device),
        "trainscope_peak_memory_median": median(peak_memory(t, a.device) for t in ts_ok),
        "pytorch_peak_memory_median": median(peak_memory(t, a.device) for t in pt_ok),
        "memory_ratio_median": median(p["memory_ratio"] for p in pairs),
        "trainscope_reserved_peak_median": median(peak_memory(t, a.device, True) for t in ts_ok),
        "pytorch_reserved_peak_median": median(peak_memory(t, a.device, True) for t in pt_ok),
        "reserved_ratio_median": median(p["reserved_ratio"] for p in pairs),
        # PyTorch's peak over its timed iterations alone (peaks reset after warm-up): without
        # cudnn.benchmark's trials in the warm-up.
        "pytorch_timed_peak_memory_median": median(t.get("device_timed_used_peak_bytes") for t in pt_ok),
        "trainscope_data_phase_ms_median": median(t.get("data_phase_ms_median") for t in ts_ok),
        "trainscope_iteration_ms_median": median(t.get("iteration_ms_median") for t in ts_ok),
        "pytorch_iteration_ms_median": median(t.get("iteration_ms_median") for t in pt_ok),
        "failures": [{"pair": p["index"], "side": side, "error": p[side]["error"]}
                     for p in pairs for side in ("trainscope", "pytorch") if "error" in p[side]]
                    + [{"pair": p["index"], "side": "both", "error": p["error"]} for p in pairs if "error" in p],
    }
    for side in ("trainscope", "pytorch"):
        for k in ("datasheet", "measured_matmul"):
            s[f"{side}_mfu_{k}_median"] = median((p["mfu"][side] or {}).get(k) for p in pairs)
    if ref is not None and ref.get("model_flops"):
        f, pk = ref["model_flops"], ref["peak_flops"]
        s["model_flops_per_unit"] = f.get("per_unit")
        s["forward_flops_per_unit"] = f.get("forward_per_unit")
        s["counted_forward_backward_flops_per_unit"] = f.get("counted_forward_backward_per_unit")
        s["flops_unit"] = f.get("unit")
        s["peak_precision"] = pk.get("precision")
        s["datasheet_peak_flops"] = pk.get("datasheet_flops")
        s["datasheet_source"] = pk.get("datasheet_source")
        s["matmul_n"] = pk.get("matmul_n")
        s["matmul_measured_flops_median"] = median(t["peak_flops"]["matmul_measured_flops"] for t in pt_ok
                                                   if t.get("peak_flops"))
        gflop = median(t.get("roofline_compute_gflop_per_iteration") for t in ts_ok)
        if gflop is not None and ref.get("timed_units_per_iteration"):
            s["trainscope_roofline_flops_per_unit"] = gflop * 1e9 / ref["timed_units_per_iteration"]
    case["summary"] = s


def write_json(a, state):
    if not a.out:
        return
    tmp = a.out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(state, f, indent=1)
    os.replace(tmp, a.out)


def fmt(x, spec, none="-"):
    return none if x is None else format(x, spec)


def pct(x):
    return "-" if x is None else f"{100 * x:.3g}%"


def mib(b):
    return "-" if b is None else f"{b / MIB:.0f} MiB"


def flops_text(x):
    if x is None:
        return "-"
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= scale:
            return f"{x / scale:.4g} {prefix}FLOP"
    return f"{x:.4g} FLOP"


def print_case(a, case):
    s, unit = case["summary"], case["unit"]
    pt_first = next((p["pytorch"] for p in case["pairs"] if "error" not in p["pytorch"]), {})
    where = a.device if a.device == "cpu" else f"cuda ({pt_first.get('device_name') or 'device not named'})"
    tf32 = "fp32" if a.device == "cpu" else "TF32 off on both sides" if a.no_tf32 else "TF32 on both sides"
    batch = case["batch"] or "the preset's"
    print(f"\n{case['case']}: {case['workload']} {a.preset}, batch {batch}, {a.warmup} "
          f"warm-up + {a.iters} timed iterations a run, {where}, {tf32}"
          f"{', trainscope untraced' if a.no_trace else ', trainscope traced'}; rates in {unit}, sustained")
    print(f"  {'pair':>4}  {'order':<16} {'trainscope':>11} {'PyTorch':>11} {'ratio':>7}   "
          f"{'peak memory ts / pt':>23} {'ratio':>6}   {'MFU ts / pt (datasheet)':>23}   "
          f"{'MFU ts / pt (matmul)':>21}")
    for p in case["pairs"]:
        ts, pt = p["trainscope"], p["pytorch"]
        order = " then ".join("ts" if o == "trainscope" else "pt" for o in p["order"])
        m_ts, m_pt = p["mfu"]["trainscope"] or {}, p["mfu"]["pytorch"] or {}
        print(f"  {p['index']:>4}  {order:<16} {fmt(ts.get('rate'), '11.2f', 'failed'):>11} "
              f"{fmt(pt.get('rate'), '11.2f', 'failed'):>11} {fmt(p['ratio'], '7.3f'):>7}   "
              f"{mib(peak_memory(ts, a.device)) + ' / ' + mib(peak_memory(pt, a.device)):>23} "
              f"{fmt(p['memory_ratio'], '6.2f'):>6}   "
              f"{pct(m_ts.get('datasheet')) + ' / ' + pct(m_pt.get('datasheet')):>23}   "
              f"{pct(m_ts.get('measured_matmul')) + ' / ' + pct(m_pt.get('measured_matmul')):>21}")
    if s["ratio_median"] is not None:
        print(f"  ratio trainscope / PyTorch: median {s['ratio_median']:.3f}, min-max {s['ratio_min']:.3f}-"
              f"{s['ratio_max']:.3f}, over {s['pairs_with_ratio']} pair(s) ({s['pairs_run']} run)")
    else:
        print(f"  ratio trainscope / PyTorch: none (no pair with both sides ok, of {s['pairs_run']} run)")
    print(f"  rate, median of the runs: trainscope {fmt(s['trainscope_rate_median'], '.2f')}, PyTorch "
          f"{fmt(s['pytorch_rate_median'], '.2f')} {unit}; iteration median trainscope "
          f"{fmt(s['trainscope_iteration_ms_median'], '.2f')} ms, PyTorch {fmt(s['pytorch_iteration_ms_median'], '.2f')} ms")
    print(f"  peak memory ({s['memory_what']}): trainscope {mib(s['trainscope_peak_memory_median'])}, PyTorch "
          f"{mib(s['pytorch_peak_memory_median'])}, ratio {fmt(s['memory_ratio_median'], '.2f')}"
          + (f"; reserved: trainscope {mib(s['trainscope_reserved_peak_median'])}, PyTorch "
             f"{mib(s['pytorch_reserved_peak_median'])}, ratio {fmt(s['reserved_ratio_median'], '.2f')}; "
             f"PyTorch's timed iterations alone {mib(s['pytorch_timed_peak_memory_median'])} allocated"
             if a.device == "cuda" else ""))
    if s.get("model_flops_per_unit") is not None:
        cross = (f"; trainscope's own roofline counts {flops_text(s['trainscope_roofline_flops_per_unit'])}"
                 if s.get("trainscope_roofline_flops_per_unit") is not None else "")
        print(f"  MFU = model FLOPs per {s['flops_unit']} x rate / peak; model FLOPs {flops_text(s['model_flops_per_unit'])} "
              f"per {s['flops_unit']} = 3 x forward {flops_text(s['forward_flops_per_unit'])} (FlopCounterMode; "
              f"forward + backward counted: {flops_text(s['counted_forward_backward_flops_per_unit'])}{cross})")
        if s.get("datasheet_peak_flops"):
            print(f"    vs the datasheet's dense {s['peak_precision']} peak {flops_text(s['datasheet_peak_flops'])}/s "
                  f"({s['datasheet_source']}): trainscope {pct(s['trainscope_mfu_datasheet_median'])}, PyTorch "
                  f"{pct(s['pytorch_mfu_datasheet_median'])}")
        else:
            print(f"    vs a datasheet peak: none ({s.get('datasheet_source')})")
        print(f"    vs the measured {s['matmul_n']}^3 {s['peak_precision']} matmul, "
              f"{flops_text(s['matmul_measured_flops_median'])}/s (median of the PyTorch runs): trainscope "
              f"{pct(s['trainscope_mfu_measured_matmul_median'])}, PyTorch {pct(s['pytorch_mfu_measured_matmul_median'])}")
    if s["trainscope_data_phase_ms_median"] is not None:
        made = "made on the host and copied to the GPU" if a.device == "cuda" else "made"
        print(f"  trainscope's data phase (each synthetic batch {made}, inside its timed iterations): "
              f"{s['trainscope_data_phase_ms_median']:.2f} ms of its {fmt(s['trainscope_iteration_ms_median'], '.2f')} ms "
              f"median iteration; PyTorch's batches sit on the {a.device} before its timed region")
    for f in s["failures"]:
        print(f"  FAILED pair {f['pair']} {f['side']}: {f['error']}")


def main(argv=None):
    a = parse_args(argv)
    t_start = time.monotonic()
    db = a.db or os.path.join(tempfile.mkdtemp(prefix="gpu_side_by_side_"), "trainscope.db")

    def elapsed():
        return time.monotonic() - t_start

    def progress(msg):
        print(f"[{elapsed():7.1f} s] {msg}", flush=True)

    cases = [{"case": c, "workload": w, "batch": n, "unit": WORKLOADS[w]["unit"], "pairs": [], "skipped": []}
             for c, w, n in a.case_list]
    state = {
        "driver": "bench/pytorch/gpu_side_by_side.py",
        "argv": sys.argv[1:] if argv is None else list(argv),
        "settings": {"device": a.device, "preset": a.preset, "iters": a.iters, "warmup": a.warmup,
                     "pairs_requested": a.pairs, "time_budget_s": a.time_budget or None, "threads": a.threads,
                     "seed": a.seed, "tf32": not a.no_tf32, "trainscope_traced": not a.no_trace,
                     "trainscope": os.path.abspath(a.trainscope), "python": a.python, "db": db,
                     "trainscope_env": {"TS_CUDA_TF32": "0" if a.no_tf32 else "1"}},
        "cases": cases,
        "budget": {"stopped_early": False, "note": None},
        "complete": False,
    }
    progress(f"{len(cases)} case(s) x {a.pairs} pair(s), {a.preset} preset on {a.device}"
             + (f", time budget {a.time_budget:.0f} s" if a.time_budget else "") + f"; trainscope db {db}")
    longest = {}  # case -> the longest pair so far, in seconds
    for k in range(a.pairs):
        for case in cases:
            if a.time_budget:
                estimate = longest.get(case["case"], max(longest.values(), default=0.0))
                left = a.time_budget - elapsed()
                if estimate > left:
                    note = (f"pair {k + 1} of {case['case']} left out: estimated {estimate:.0f} s "
                            f"(the longest pair {'of this case' if case['case'] in longest else 'so far'}), "
                            f"{max(left, 0):.0f} s of the {a.time_budget:.0f} s budget left")
                    case["skipped"].append(note)
                    state["budget"]["stopped_early"] = True
                    progress(note)
                    continue
            order = ["trainscope", "pytorch"] if k % 2 == 0 else ["pytorch", "trainscope"]
            pair = {"index": k + 1, "order": order}
            t_pair = time.monotonic()
            for side in order:
                timeout = a.run_timeout
                if a.time_budget:  # a run still going BUDGET_GRACE s past the budget is stopped
                    timeout = min(timeout, max(10.0, a.time_budget + BUDGET_GRACE - elapsed()))
                progress(f"{case['case']} pair {k + 1}/{a.pairs}: {side} ...")
                if side == "trainscope":
                    r = trainscope_side(a, case["workload"], case["batch"], db, timeout)
                else:
                    r = pytorch_side(a, case["workload"], case["batch"], timeout)
                pair[side] = r
                what = (f"{r['rate']:.2f} {case['unit']}" if "error" not in r
                        else "FAILED: " + r["error"].splitlines()[0][:300])
                progress(f"{case['case']} pair {k + 1}/{a.pairs}: {side} {what} ({r['seconds']:.1f} s)")
            reference = next((p["pytorch"] for p in case["pairs"] if "error" not in p["pytorch"]), None)
            finish_pair(a, pair, db, reference)
            pair["seconds"] = time.monotonic() - t_pair
            longest[case["case"]] = max(longest.get(case["case"], 0.0), pair["seconds"])
            case["pairs"].append(pair)
            summarise(a, case)
            if "machine" not in state and "error" not in pair["pytorch"]:
                pt = pair["pytorch"]
                state["machine"] = {k: pt.get(k) for k in ("device_name", "torch", "cuda_version", "cudnn_version")}
            progress(f"{case['case']} pair {k + 1}/{a.pairs}: ratio {fmt(pair['ratio'], '.3f')}"
                     + (f" ({pair['error']})" if "error" in pair else "") + f", pair took {pair['seconds']:.1f} s")
            state["elapsed_s"] = elapsed()
            write_json(a, state)
    if state["budget"]["stopped_early"]:
        n = sum(len(c["skipped"]) for c in cases)
        state["budget"]["note"] = (f"the {a.time_budget:.0f} s budget left out {n} pair(s) (each case's 'skipped' "
                                   "says which)")
    for case in cases:
        if "summary" not in case:
            summarise(a, case)
    state["elapsed_s"] = elapsed()
    state["complete"] = True
    write_json(a, state)

    for case in cases:
        print_case(a, case)
        for note in case["skipped"]:
            print(f"  budget: {note}")
    print(f"\n{len(cases)} case(s), {sum(len(c['pairs']) for c in cases)} pair(s) in {elapsed():.0f} s"
          + (f"; {state['budget']['note']}" if state["budget"]["stopped_early"] else "")
          + (f"; JSON: {a.out}" if a.out else ""))
    failed = any(c["summary"]["failures"] for c in cases)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
