#!/usr/bin/env python3
"""trainscope against the best PyTorch on the CPU, interleaved, in each workload's own unit.

    bench/pytorch/side_by_side.sh [WORKLOAD ... | all] [--preset small] [--iters 12] [--warmup 3]
                                  [--threads 2] [--pairs 3] [--json FILE]

A thin wrapper over `trainscope run W` and `trainscope run W --framework pytorch` (the
reference under PyTorch's profiler, imported into the same db: docs/import.md, "Side by side"),
so every figure printed here is read back from the store. For each workload:
1. a probe round runs every PyTorch variant once: PyPI torch (`python3`) and Debian's torch 1.13
   (`/usr/bin/python3`, when it has one; TS_PYTHON), and for the convolutional workloads each in
   NCHW and channels-last (TS_PYTORCH_ARGS=--channels-last); the fastest in the workload's
   headline unit is "the best PyTorch";
2. then --pairs pairs, trainscope then the best PyTorch, one after the other (A B A B), so that
   the machine's drift falls on both sides alike; each pair gives a ratio trainscope / PyTorch.
Printed: the median of the pair ratios (and their range), the rates of both sides, and peak
memory: the resident memory the training added at its peak (rss_peak_growth_bytes on both sides:
the process's peak RSS over its RSS before the model was built), with the median ratio of the
pairs; then `trainscope compare` of the last pair names where the time went
(the phases, and the layers both name). The db (--db, default a temporary one) keeps every run.

Rates are sustained (the work of the timed iterations over their time; docs/formulas.md,
"Throughput"), in the unit trainscope's `list` names: images/s, sentence pairs/s, tokens/s,
frames/s, generator samples/s. a3c's actor-learners have no PyTorch twin here; what is compared
is the learner's update (forward, backward, clipping, the shared RMSProp step on a 5-step
rollout, on one thread, as a learner runs it): build/default/bench/a3c_update_bench against
bench/pytorch/a3c_update.py, in rollout steps per second of updating.
"""
import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TRAINSCOPE = os.path.join(ROOT, "build", "default", "cli", "trainscope")
WORKLOADS = ["resnet50", "inception_v3", "seq2seq", "transformer", "faster_rcnn", "deepspeech2", "wgan", "a3c"]
A3C_BENCH = os.path.join(ROOT, "build", "default", "bench", "a3c_update_bench")
CONVOLUTIONAL = {"resnet50", "inception_v3", "faster_rcnn", "wgan"}   # where channels-last is a variant
DEBIAN_PYTHON = "/usr/bin/python3"


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("workloads", nargs="*", default=["all"], help="workload names, or all (default)")
    p.add_argument("--preset", default="small")
    p.add_argument("--iters", type=int, default=12, help="timed iterations of each run")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--pairs", type=int, default=3, help="interleaved trainscope / PyTorch pairs (at least 3)")
    p.add_argument("--json", metavar="FILE", help="write every run's figures and the ratios here")
    p.add_argument("--db", metavar="FILE", help="the db the runs go into (default: a new one in a temporary folder)")
    a = p.parse_args()
    if a.workloads == ["all"]:
        a.workloads = WORKLOADS
    for w in a.workloads:
        if w not in WORKLOADS:
            p.error(f"unknown workload {w!r} (one of {', '.join(WORKLOADS)}, or all)")
    if a.pairs < 3:
        p.error("--pairs must be at least 3: a median of fewer pairs says little on this machine")
    return a


def has_torch(python):
    return subprocess.run([python, "-c", "import torch"], capture_output=True).returncode == 0


def variants(workload):
    """(label, python, extra flags) of every PyTorch to try."""
    pythons = [("PyPI", "python3")]
    if os.path.exists(DEBIAN_PYTHON) and has_torch(DEBIAN_PYTHON):
        pythons.append(("Debian", DEBIAN_PYTHON))
    out = []
    for name, py in pythons:
        out.append((f"{name} NCHW" if workload in CONVOLUTIONAL else name, py, []))
        if workload in CONVOLUTIONAL:
            out.append((f"{name} channels-last", py, ["--channels-last"]))
    return out


def trainscope_run(workload, a, db, framework="trainscope", python=None, flags=()):
    """One `trainscope run`, its figures as the store keeps them (the summary `--json` prints)."""
    cmd = [TRAINSCOPE, "run", workload, "--preset", a.preset, "--threads", str(a.threads), "--iters", str(a.iters),
           "--warmup", str(a.warmup), "--db", db, "--json"]
    env = dict(os.environ)
    if framework == "pytorch":
        cmd += ["--framework", "pytorch"]
        env["TS_PYTHON"] = python
        env["TS_PYTORCH_ARGS"] = " ".join(flags)
        # No memory categories: their shapes and stacks cost PyTorch 2-3% (docs/import.md).
        env["TS_PYTORCH_MEMORY_CATEGORIES"] = "0"
    else:
        cmd += ["--eval-batches", "0"]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit(f"side_by_side: {' '.join(cmd)} failed (exit {r.returncode}):\n{r.stderr[-3000:]}")
    j = json.loads(r.stdout)
    m, units = j["metrics"], j.get("units", {})
    return {
        # PyTorch's iterations without its profiler (run first, the same batches): at its best.
        "rate": m.get("unprofiled_headline_throughput", m["headline_throughput"]),
        "profiled_rate": m["headline_throughput"],
        "unit": units.get("headline_throughput", "samples/s"),
        "peak_growth": m.get("rss_peak_growth_bytes"),
        "ledger_peak": j.get("memory_peak_bytes"),
        "run_id": j["run_id"],
        "framework": framework,
    }


def torch_version(db, run_id):
    con = sqlite3.connect(db)
    row = con.execute("SELECT value FROM environment WHERE run_id = ? AND key = 'pytorch.torch_version'",
                      (run_id,)).fetchone()
    return row[0] if row else "?"


def this_machine():
    """The CPU this script runs on, in machine_of's terms (a3c's update runs outside the store)."""
    info = open("/proc/cpuinfo").read().splitlines()

    def first(key):
        return next((l.split(":", 1)[1].strip() for l in info if l.split(":", 1)[0].strip() == key), "?")
    kind = f"{first('vendor_id')} family {first('cpu family')} model {first('model')}"
    # The flags collectors/environment.cpp's cpu_isa keeps, in its order.
    flags = set(first("flags").split())
    isa = " ".join(f for f in ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_vnni",
                               "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8") if f in flags)
    return {"cpu": first("model name"), "kind": kind, "isa": isa or "none", "cpus": str(os.cpu_count())}


def machine_of(db, run_id):
    """The CPU a run was measured on, as the store holds it (collectors/environment.cpp)."""
    con = sqlite3.connect(db)
    env = dict(con.execute("SELECT key, value FROM environment WHERE run_id = ? AND key IN "
                           "('cpu.model', 'cpu.kind', 'cpu.isa', 'cpu.logical_cores')", (run_id,)).fetchall())
    return {"cpu": env.get("cpu.model", "?"), "kind": env.get("cpu.kind", "?"), "isa": env.get("cpu.isa", "?"),
            "cpus": env.get("cpu.logical_cores", "?")}


def timed_work(db, run_id):
    """Each timed iteration's (samples, tokens), in order, as the store holds them."""
    con = sqlite3.connect(db)
    rows = con.execute("SELECT idx, samples FROM iterations WHERE run_id = ? AND warmup = 0 ORDER BY start_ns",
                       (run_id,)).fetchall()
    tokens = dict(con.execute("SELECT iteration, value FROM metrics WHERE run_id = ? AND name = 'tokens'",
                              (run_id,)).fetchall())
    return [(samples, int(tokens.get(idx, 0))) for idx, samples in rows]


def check_same_batches(workload, db, ts, pt):
    """The translation and speech scripts replay trainscope's batches: each timed iteration's
    samples and tokens must be trainscope's, or the rates compare different work."""
    if workload not in ("seq2seq", "transformer", "deepspeech2"):
        return
    ours, theirs = timed_work(db, ts["run_id"]), timed_work(db, pt["run_id"])
    if ours != theirs:
        sys.exit(f"side_by_side: {workload}: PyTorch run {pt['run_id']} trained on other batches than trainscope run "
                 f"{ts['run_id']} (samples, tokens): {theirs} vs {ours}")


def a3c_update_pair(a):
    """One learner update in each, on one thread: rollout steps (t_max = 5) per second."""
    bench = "BM_A3cUpdate/full:1/threads:1/real_time"
    r = subprocess.run([A3C_BENCH, f"--benchmark_filter={bench}$", "--benchmark_format=json",
                        "--benchmark_min_time=2"], capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    if r.returncode != 0 or not r.stdout.strip():
        sys.exit(f"side_by_side: a3c_update_bench did not run {bench}:\n{r.stdout}{r.stderr}")
    ms = json.loads(r.stdout)["benchmarks"][0]["real_time"]
    ts = {"rate": 5 / (ms * 1e-3), "peak_growth": None}
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        r = subprocess.run(["python3", os.path.join(ROOT, "bench", "pytorch", "a3c_update.py"), "--preset", "full",
                            "--threads", "1", "--iters", "200", "--warmup", "20", "--json", out.name],
                           capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"side_by_side: a3c_update.py failed:\n{r.stderr[-3000:]}")
        j = json.load(open(out.name))
    return ts, {"rate": j["samples_per_s"], "peak_growth": None, "torch": j["torch_version"]}


def compare_a3c(a):
    if not os.access(A3C_BENCH, os.X_OK):
        sys.exit(f"side_by_side: {A3C_BENCH} not found; build it first")
    unit = "rollout steps/s (learner update)"
    print(f"\na3c: the learner's update alone, on one thread (a learner's), full network; rates in {unit}")
    pairs = []
    for k in range(a.pairs):
        ts, pt = a3c_update_pair(a)
        pairs.append((ts, pt))
        print(f"  pair {k + 1}  trainscope {ts['rate']:9.2f}  PyTorch {pt['rate']:9.2f}  ratio {ts['rate'] / pt['rate']:.3f}")
    ratios = [ts["rate"] / pt["rate"] for ts, pt in pairs]
    summary = {
        "workload": "a3c", "machine": this_machine(), "preset": "full (update only)", "threads": 1, "unit": unit,
        "best_pytorch": f"PyPI ({pairs[0][1]['torch']})",
        "ratio_median": statistics.median(ratios), "ratio_min": min(ratios), "ratio_max": max(ratios),
        "trainscope_rate_median": statistics.median(ts["rate"] for ts, _ in pairs),
        "pytorch_rate_median": statistics.median(pt["rate"] for _, pt in pairs),
        "memory_ratio_median": None, "pairs": [{"trainscope": ts, "pytorch": pt} for ts, pt in pairs],
    }
    print(f"  => trainscope / PyTorch: {summary['ratio_median']:.2f} median of {a.pairs} pairs "
          f"({summary['ratio_min']:.2f}-{summary['ratio_max']:.2f})")
    return summary


def mib(b):
    return f"{b / 2**20:.0f} MiB" if b is not None else "-"


def compare(workload, a, db):
    probe_ts = trainscope_run(workload, a, db)   # also tells the headline's unit
    unit = probe_ts["unit"]
    print(f"\n{workload} {a.preset}: {a.threads} threads, {a.warmup} warm-up + {a.iters} timed iterations a run; "
          f"rates in {unit}, sustained, read from {db}")
    probe = []
    for label, py, flags in variants(workload):
        r = trainscope_run(workload, a, db, "pytorch", py, flags)
        check_same_batches(workload, db, probe_ts, r)
        r["torch"] = torch_version(db, r["run_id"])
        probe.append((label, py, flags, r))
        print(f"  probe  PyTorch {label} ({r['torch']}): {r['rate']:.2f} {unit} (run {r['run_id']})")
    label, py, flags, best = max(probe, key=lambda p: p[3]["rate"])
    print(f"  best PyTorch: {label} ({best['torch']}); trainscope's probe run: {probe_ts['rate']:.2f} {unit}")
    pairs = []
    for k in range(a.pairs):
        ts = trainscope_run(workload, a, db)
        pt = trainscope_run(workload, a, db, "pytorch", py, flags)
        check_same_batches(workload, db, ts, pt)
        pairs.append((ts, pt))
        mem = (f"{ts['peak_growth'] / pt['peak_growth']:.2f}" if ts["peak_growth"] and pt["peak_growth"] else "-")
        print(f"  pair {k + 1}  trainscope {ts['rate']:9.2f}  PyTorch {pt['rate']:9.2f}  ratio {ts['rate'] / pt['rate']:.3f}"
              f"   peak memory {mib(ts['peak_growth'])} / {mib(pt['peak_growth'])} = {mem}"
              f"   (runs {ts['run_id']}, {pt['run_id']})")
    machines = {json.dumps(machine_of(db, r["run_id"]), sort_keys=True) for pair in pairs for r in pair}
    if len(machines) != 1:
        sys.exit(f"side_by_side: {workload}'s runs were measured on different CPUs: {sorted(machines)}")
    machine = json.loads(machines.pop())
    print(f"  measured on {machine['cpu']} ({machine['kind']}; {machine['isa']}; {machine['cpus']} CPUs)")
    ratios = [ts["rate"] / pt["rate"] for ts, pt in pairs]
    mem_ratios = [ts["peak_growth"] / pt["peak_growth"] for ts, pt in pairs if ts["peak_growth"] and pt["peak_growth"]]
    growth = [(ts["peak_growth"], pt["peak_growth"]) for ts, pt in pairs if ts["peak_growth"] and pt["peak_growth"]]
    summary = {
        "workload": workload, "preset": a.preset, "threads": a.threads, "iters": a.iters, "unit": unit,
        "machine": machine,
        "best_pytorch": f"{label} ({best['torch']})",
        "ratio_median": statistics.median(ratios), "ratio_min": min(ratios), "ratio_max": max(ratios),
        "trainscope_rate_median": statistics.median(ts["rate"] for ts, _ in pairs),
        "pytorch_rate_median": statistics.median(pt["rate"] for _, pt in pairs),
        "memory_ratio_median": statistics.median(mem_ratios) if mem_ratios else None,
        "trainscope_peak_growth_median": statistics.median(t for t, _ in growth) if growth else None,
        "pytorch_peak_growth_median": statistics.median(p for _, p in growth) if growth else None,
        "trainscope_ledger_peak": pairs[-1][0]["ledger_peak"],
        "probe": [{"variant": f"{l} ({r['torch']})", "rate": r["rate"], "run_id": r["run_id"]} for l, _, _, r in probe],
        "pairs": [{"trainscope": ts, "pytorch": pt} for ts, pt in pairs],
        "db": db,
    }
    print(f"  => trainscope / best PyTorch: {summary['ratio_median']:.2f} median of {a.pairs} pairs "
          f"({summary['ratio_min']:.2f}-{summary['ratio_max']:.2f}); peak memory "
          f"{mib(summary['trainscope_peak_growth_median'])} / {mib(summary['pytorch_peak_growth_median'])} = "
          + (f"{summary['memory_ratio_median']:.2f}" if mem_ratios else "-"))
    last_ts, last_pt = pairs[-1]
    print(f"  where the time went (the last pair): {TRAINSCOPE} compare {last_ts['run_id']} {last_pt['run_id']} "
          f"--db {db}")
    return summary


def main():
    a = parse_args()
    if not os.access(TRAINSCOPE, os.X_OK):
        sys.exit(f"side_by_side: {TRAINSCOPE} not found; build it first (cmake --build --preset default)")
    machine = this_machine()
    flags = open("/proc/cpuinfo").read()
    isa = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "no AVX2"
    print(f"machine: {machine['cpu']} ({machine['kind']}), {os.cpu_count()} CPUs, {isa}")
    db = a.db or os.path.join(tempfile.mkdtemp(prefix="side_by_side_"), "ts.db")
    results = [compare_a3c(a) if w == "a3c" else compare(w, a, db) for w in a.workloads]
    print("\nworkload        unit                   ratio (median of pairs)  peak memory ratio  best PyTorch")
    for r in results:
        mem = f"{r['memory_ratio_median']:.2f}" if r["memory_ratio_median"] is not None else "-"
        print(f"{r['workload']:<15} {r['unit']:<22} {r['ratio_median']:>6.2f} ({r['ratio_min']:.2f}-{r['ratio_max']:.2f})"
              f"       {mem:>6}           {r['best_pytorch']}")
    print(f"\nevery run is in {db}: `{TRAINSCOPE} report {db} --html side_by_side.html` has the frameworks side by side")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"machine": dict(machine, isa=isa), "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
