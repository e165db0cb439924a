#!/usr/bin/env python3
"""bench/pytorch/gpu_side_by_side.py end to end on the CPU, against the real trainscope binary.

    gpu_side_by_side_test.py TRAINSCOPE WORKDIR

1. The driver at the tiny preset, resnet50:4 and transformer:0, one pair each, one thread (two
   OpenMP threads on two cores shared with other tests stall: 100 s instead of 30): exit 0; its JSON
   has every case with one pair, both sides' rates, every ratio equal to the two sides' rates
   divided (rate, peak memory, MFU), the summary's median of one pair equal to it, and PyTorch's
   model FLOPs per unit equal to 3 x its forward FLOPs.
2. A PyTorch side that cannot start (a Python that does not exist): the failure is in the JSON and
   the output, trainscope's side still ran, exit 1.
Exit 0: passed; 1: failed (what differs is printed); 77: torch is not importable (skipped; CI does
not install torch, which is large).
"""
import json
import math
import os
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DRIVER = os.path.join(ROOT, "bench", "pytorch", "gpu_side_by_side.py")
FAILURES = []


def check(cond, what):
    if not cond:
        FAILURES.append(what)
        print(f"FAIL: {what}")


def close(x, y):
    return x is not None and y is not None and math.isclose(x, y, rel_tol=1e-9)


def run_driver(args):
    r = subprocess.run([sys.executable, DRIVER, *args], capture_output=True, text=True, timeout=300)
    print(r.stdout[-6000:])
    if r.stderr.strip():
        print("stderr:", r.stderr[-3000:])
    return r


def check_pair(case, pair):
    ts, pt = pair["trainscope"], pair["pytorch"]
    name = f"{case['case']} pair {pair['index']}"
    check("error" not in ts, f"{name}: trainscope failed: {ts.get('error')}")
    check("error" not in pt, f"{name}: PyTorch failed: {pt.get('error')}")
    if "error" in ts or "error" in pt:
        return
    check(ts["rate"] > 0 and pt["rate"] > 0, f"{name}: rates {ts['rate']} / {pt['rate']}")
    check(close(pair["ratio"], ts["rate"] / pt["rate"]),
          f"{name}: ratio {pair['ratio']} is not {ts['rate']} / {pt['rate']}")
    check(ts["unit"] == case["unit"], f"{name}: trainscope's unit {ts['unit']!r}, the case's {case['unit']!r}")
    # On the CPU, peak memory is the resident memory the training added (both sides).
    check(close(pair["memory_ratio"], ts["rss_peak_growth_bytes"] / pt["rss_peak_growth_bytes"]),
          f"{name}: memory ratio {pair['memory_ratio']}")
    f = pt["model_flops"]
    check(f is not None and close(f["per_unit"], 3 * f["forward_per_unit"]) and f["forward_per_unit"] > 0,
          f"{name}: model FLOPs {f}")
    peak = pt["peak_flops"]["matmul_measured_flops"]
    m_ts, m_pt = pair["mfu"]["trainscope"], pair["mfu"]["pytorch"]
    check(close(m_ts["measured_matmul"], f["per_unit"] * ts["rate"] / peak), f"{name}: trainscope's MFU {m_ts}")
    check(close(m_pt["measured_matmul"], f["per_unit"] * pt["rate"] / peak), f"{name}: PyTorch's MFU {m_pt}")
    check(close(m_pt["measured_matmul"], pt["mfu"]["measured_matmul"]),
          f"{name}: the driver's PyTorch MFU {m_pt['measured_matmul']} is not the script's {pt['mfu']['measured_matmul']}")
    check(m_ts["datasheet"] is None, f"{name}: a datasheet MFU on the CPU: {m_ts}")
    check(close(m_ts["measured_matmul"] / m_pt["measured_matmul"], pair["ratio"]),
          f"{name}: the MFU ratio is not the rate ratio")


def main():
    trainscope, work = sys.argv[1:3]
    probe = subprocess.run([sys.executable, "-c", "import torch"], capture_output=True, text=True)
    if probe.returncode != 0:
        print(f"SKIP: torch is not importable by {sys.executable} ({probe.stderr.strip().splitlines()[-1:]}); "
              "pip install torch to run this test (CI does not: it is large)")
        return 77
    os.makedirs(work, exist_ok=True)
    out = os.path.join(work, "gpu_side_by_side.json")
    common = ["--trainscope", trainscope, "--device", "cpu", "--preset", "tiny", "--iters", "3", "--warmup", "1",
              "--threads", "1", "--peak-matmul", "256"]

    # 1. Both sides ok.
    for path in (out, os.path.join(work, "ts.db")):
        if os.path.exists(path):
            os.remove(path)
    r = run_driver([*common, "--cases", "resnet50:4,transformer:0", "--pairs", "1", "--out", out,
                    "--db", os.path.join(work, "ts.db")])
    check(r.returncode == 0, f"driver exit status {r.returncode}")
    check("ratio trainscope / PyTorch: median" in r.stdout, "no ratio line in the output")
    with open(out) as f:
        j = json.load(f)
    check(j["complete"] is True, "the JSON is not marked complete")
    check(j["settings"]["device"] == "cpu" and j["settings"]["trainscope_env"] == {"TS_CUDA_TF32": "1"},
          f"settings {j['settings']}")
    check([c["case"] for c in j["cases"]] == ["resnet50:4", "transformer:0"], f"cases {[c['case'] for c in j['cases']]}")
    units = {"resnet50:4": "images/s", "transformer:0": "tokens/s"}
    for case in j["cases"]:
        check(case["unit"] == units[case["case"]], f"{case['case']}: unit {case['unit']}")
        check(len(case["pairs"]) == 1, f"{case['case']}: {len(case['pairs'])} pairs")
        for pair in case["pairs"]:
            check(pair["order"] == ["trainscope", "pytorch"], f"{case['case']}: pair 1's order {pair['order']}")
            check_pair(case, pair)
        s = case["summary"]
        check(s["pairs_with_ratio"] == 1 and s["pairs_run"] == 1, f"{case['case']}: summary pairs {s}")
        if case["pairs"] and case["pairs"][0]["ratio"] is not None:
            p = case["pairs"][0]
            check(close(s["ratio_median"], p["ratio"]) and close(s["ratio_min"], p["ratio"]) and
                  close(s["ratio_max"], p["ratio"]), f"{case['case']}: summary ratio {s['ratio_median']}")
            check(close(s["ratio_median"], s["trainscope_rate_median"] / s["pytorch_rate_median"]),
                  f"{case['case']}: median ratio of one pair is not the medians' ratio")
        check(s["failures"] == [], f"{case['case']}: failures {s['failures']}")

    # 2. One side fails: recorded and shown, the other side still measured, exit 1.
    fail_out = os.path.join(work, "gpu_side_by_side_fail.json")
    r = run_driver([*common, "--cases", "resnet50:4", "--pairs", "1", "--out", fail_out, "--python",
                    os.path.join(work, "no-such-python"), "--db", os.path.join(work, "ts.db")])
    check(r.returncode == 1, f"driver exit status {r.returncode} with a failing side (expected 1)")
    check("FAILED pair 1 pytorch" in r.stdout, "the failure is not shown")
    with open(fail_out) as f:
        j = json.load(f)
    pair = j["cases"][0]["pairs"][0]
    check("error" in pair["pytorch"] and pair["ratio"] is None, f"the failing pair: {pair}")
    check("error" not in pair["trainscope"] and pair["trainscope"]["rate"] > 0, "trainscope's side did not run")
    check(j["cases"][0]["summary"]["failures"][0]["side"] == "pytorch", "the failure is not in the summary")

    if FAILURES:
        print(f"{len(FAILURES)} check(s) failed")
        return 1
    print("OK: gpu_side_by_side.py on the CPU: rates, ratios, memory, MFU, a failing side")
    return 0


if __name__ == "__main__":
    sys.exit(main())
