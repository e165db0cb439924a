#!/usr/bin/env python3
"""Issue 43: the GEMM shapes of bench/gemm_shapes_bench timed with PyTorch (MKL on x86), and a
driver that alternates the C++ bench's rounds with PyTorch's so both are measured in the same period.

  gemm_shapes.py --bench build/default/bench/gemm_shapes_bench [--workloads a,b] [--threads 2]
                 [--rounds 5] [--out gemm_shapes.json] [--markdown gemm_shapes.md]
      collects the shapes (the bench, --rounds 0), then round r: the bench's round r and PyTorch's,
      their order swapped every round; prints one table per workload and writes the merged JSON
  gemm_shapes.py --shapes SHAPES.json [--rounds 5] [--out OUT.json]
      PyTorch alone on the shapes of an earlier bench JSON

A sample is the mean time per call of torch.mm(op(A), op(B), out=C) over the bench's batch of calls
for that shape (about 10 ms); op(X) is a transposed view where the bench's shape says 'T', so MKL
gets the same transposes. Shapes the engine runs on the calling thread are timed with
torch.set_num_threads(1), the others with the run's thread count.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

PATHS = ["dnnl_sgemm", "matmul", "matmul_any_b", "openblas", "pytorch_mkl"]


def torch_round(doc, rounds):
    import torch

    threads = doc["threads"]
    for w in doc["workloads"]:
        for s in w.get("shapes", []):
            if not s.get("timed") or "reps" not in s:
                continue
            torch.set_num_threads(1 if s["calling_thread"] else threads)
            m, n, k = s["m"], s["n"], s["k"]
            g = torch.Generator().manual_seed(1)
            a = torch.rand((m, k) if s["ta"] == "N" else (k, m), generator=g) * 2 - 1
            b = torch.rand((k, n) if s["tb"] == "N" else (n, k), generator=g) * 2 - 1
            a = a if s["ta"] == "N" else a.t()
            b = b if s["tb"] == "N" else b.t()
            c = torch.empty((m, n))
            with torch.no_grad():
                for _ in range(2):
                    torch.mm(a, b, out=c)
                reps = s["reps"]
                for _ in range(rounds):
                    start = time.perf_counter()
                    for _ in range(reps):
                        torch.mm(a, b, out=c)
                    s.setdefault("samples", {}).setdefault("pytorch_mkl", []).append(
                        (time.perf_counter() - start) / reps)
    torch.set_num_threads(threads)


def cpu_busy(seconds=1.0):
    """The machine's busy share over `seconds` (/proc/stat), while this driver sleeps."""
    def sample():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return v[3] + v[4], sum(v)  # idle + iowait, total
    i0, t0 = sample()
    time.sleep(seconds)
    i1, t1 = sample()
    return 1.0 - (i1 - i0) / max(t1 - t0, 1)


def wait_idle(limit_s, threshold=0.1):
    """Waits (up to limit_s) until the machine is idle: a shared 2-core machine's builds swamp
    every difference worth measuring. Returns the busy share last seen and the seconds waited."""
    start = time.time()
    while True:
        busy = max(cpu_busy() for _ in range(3))  # three idle seconds in a row, not a gap between compilations
        if busy <= threshold or time.time() - start >= limit_s:
            return busy, time.time() - start
        time.sleep(4)


def merge_round(doc, part):
    """Appends the samples of a bench round (`part`, the same shapes) to `doc`."""
    for w, pw in zip(doc["workloads"], part["workloads"]):
        for s, ps in zip(w.get("shapes", []), pw.get("shapes", [])):
            for key in ("reps", "threads", "any_b_reorders"):
                if key in ps:
                    s[key] = ps[key]
            for path, v in ps.get("samples", {}).items():
                s.setdefault("samples", {}).setdefault(path, []).extend(v)


def table(doc):
    out = []
    peak = doc.get("sgemm_peak_gflops", 0)
    threads = doc["threads"]
    for w in doc["workloads"]:
        out.append(f"\n### {w['workload']} ({w['preset']})\n")
        if "error" in w:
            out.append(f"not collected: {w['error']}\n")
            continue
        out.append(f"{w['distinct_shapes']} distinct shapes, {w['gemm_calls_per_iteration']} calls and "
                   f"{w['gemm_flops_per_iteration'] * 1e-9:.2f} GFLOP per iteration; the timed rows hold "
                   f"{100 * w['timed_flops_share']:.1f}% of the FLOPs\n")
        present = [p for p in PATHS if any(p in s.get("samples", {}) for s in w["shapes"])]
        out.append("| shape (ta tb m x n x k) | site | calls/iter | " +
                   " | ".join(f"{p} ms/iter" for p in present) +
                   " | best | best / dnnl_sgemm (median of the rounds' ratios) | dnnl_sgemm GFLOP/s (% of peak) | spread (dnnl_sgemm, pytorch) |")
        out.append("|---|---|---|" + "---|" * len(present) + "---|---|---|---|")
        totals = {p: 0.0 for p in present}
        for s in w["shapes"]:
            if not s.get("timed") or "samples" not in s:
                continue
            per_iter = s["calls"] / (threads if s["calling_thread"] else 1)
            ms = {}
            for p in present:
                v = s["samples"].get(p)
                if v:
                    ms[p] = statistics.median(v) * per_iter * 1e3
                    totals[p] += ms[p]

            def spread(p):
                v = s["samples"].get(p)
                if not v:
                    return "-"
                med = statistics.median(v)
                return f"{100 * (max(v) - min(v)) / med:.0f}%"

            best = min(ms, key=ms.get)
            base = ms.get("dnnl_sgemm", 0)
            # The ratio's median over rounds, each round's paths against its own dnnl_sgemm: steadier
            # than the ratio of medians when the machine's speed drifts between rounds.
            base_v, best_v = s["samples"].get("dnnl_sgemm", []), s["samples"].get(best, [])
            pair_ratio = statistics.median(b / a for a, b in zip(base_v, best_v)) if base_v and best_v else 0
            flops = 2.0 * s["m"] * s["n"] * s["k"] * per_iter
            gflops = flops / (base * 1e-3) * 1e-9 if base else 0
            shape = f"{s['ta']}{s['tb']} {s['m']}x{s['n']}x{s['k']}" + (" (1 thread)" if s["calling_thread"] else "")
            cells = [f"{ms[p]:.3f}" if p in ms else "-" for p in present]
            out.append(f"| {shape} | {s['site']} | {s['calls']} | " + " | ".join(cells) +
                       f" | {best} | {pair_ratio:.2f} | {gflops:.1f} ({100 * gflops / peak:.0f}%) | "
                       f"{spread('dnnl_sgemm')}, {spread('pytorch_mkl')} |")
        out.append("| **timed rows** | | | " + " | ".join(f"**{totals[p]:.2f}**" for p in present) + " | | | | |")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench", help="gemm_shapes_bench binary: drive it, alternating rounds")
    ap.add_argument("--shapes", help="a gemm_shapes_bench JSON: time its shapes with PyTorch alone")
    ap.add_argument("--workloads", default="")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--preset", default="small")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default="gemm_shapes.json")
    ap.add_argument("--markdown", help="also write the tables here")
    ap.add_argument("--idle-wait", type=float, default=600,
                    help="before each round, wait up to this many seconds for an idle machine (busy < 10%%)")
    args = ap.parse_args()
    if bool(args.bench) == bool(args.shapes):
        ap.error("give --bench or --shapes")
    import torch

    if args.shapes:
        with open(args.shapes) as f:
            doc = json.load(f)
        torch_round(doc, args.rounds)
    else:
        tmp = tempfile.mkdtemp(prefix="gemm_shapes.")
        shapes = os.path.join(tmp, "shapes.json")
        cmd = [args.bench, "--threads", str(args.threads), "--preset", args.preset, "--rounds", "0", "--json", shapes]
        if args.workloads:
            cmd += ["--workloads", args.workloads]
        wait_idle(args.idle_wait)  # the bench measures the SGEMM peak while collecting
        subprocess.run(cmd, check=True)
        with open(shapes) as f:
            doc = json.load(f)
        for r in range(args.rounds):
            # Round 0 starts with the bench, which sizes each shape's batch of calls for PyTorch too.
            steps = ["bench", "torch"] if r % 2 == 0 else ["torch", "bench"]
            for step in steps:
                busy, waited = wait_idle(args.idle_wait)
                doc.setdefault("round_conditions", []).append(
                    {"round": r, "step": step, "busy_before": round(busy, 3), "waited_s": round(waited, 1)})
                print(f"round {r + 1}/{args.rounds}: {step} (machine {100 * busy:.0f}% busy before, waited "
                      f"{waited:.0f} s)", file=sys.stderr, flush=True)
                if step == "bench":
                    part_path = os.path.join(tmp, f"round{r}.json")
                    subprocess.run([args.bench, "--shapes", shapes, "--rounds", "1", "--first-round", str(r), "--json",
                                    part_path], check=True, stdout=subprocess.DEVNULL)
                    with open(part_path) as f:
                        part = json.load(f)
                    merge_round(doc, part)
                    # The roofline's peak: the best of the rounds' measurements (each beside its round).
                    doc["sgemm_peak_gflops"] = max(doc.get("sgemm_peak_gflops", 0), part["sgemm_peak_gflops"])
                else:
                    torch_round(doc, 1)
        doc["rounds"] = args.rounds
    doc["pytorch"] = {"version": torch.__version__, "mkl": torch.backends.mkl.is_available(),
                      "threads": doc["threads"]}
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
    text = table(doc)
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
