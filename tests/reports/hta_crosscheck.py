#!/usr/bin/env python3
"""Cross-checks trainscope's GPU time breakdown against Holistic Trace Analysis (HTA).

    hta_crosscheck.py FIXTURE TRAINSCOPE WORKDIR

FIXTURE (tests/cli/gpu_trace_fixture.cpp) writes a run with a hand-made GPU trace through the
real recorder; `trainscope export --chrome` writes it as a Chrome trace; HTA's temporal
breakdown and communication/computation overlap are computed on that file and compared with
the breakdown trainscope stored. HTA measures one window over all its iterations, trainscope
one per iteration, so:
  HTA compute      = sum of trainscope's compute
  HTA kernel time  = last end - first start over trainscope's iteration spans
  HTA idle         = sum of trainscope's idle + the gaps between consecutive spans
  HTA overlap %    = 100 * sum(overlap) / sum(comm)
Exit 0: they agree; 1: they differ (both sides printed); 77: HTA is not installed (skipped).
"""
import os
import sqlite3
import subprocess
import sys


def main():
    fixture, trainscope, work = sys.argv[1:4]
    try:
        from hta.trace_analysis import TraceAnalysis
    except ImportError as e:
        print(f"SKIP: Holistic Trace Analysis is not installed ({e}); "
              "pip install HolisticTraceAnalysis psutil (.ci/run does)")
        return 77
    os.makedirs(work, exist_ok=True)
    db = os.path.join(work, "fixture.db")
    if os.path.exists(db):
        os.remove(db)
    run = subprocess.run([fixture, db], check=True, capture_output=True, text=True).stdout.strip()
    trace_dir = os.path.join(work, "trace")
    os.makedirs(trace_dir, exist_ok=True)
    subprocess.run([trainscope, "export", run, "--db", db, "--chrome", os.path.join(trace_dir, "rank-0.json")],
                   check=True, capture_output=True, text=True)

    con = sqlite3.connect(db)
    rows = con.execute("SELECT iteration, start_ns, end_ns, compute_ns, comm_ns, overlap_ns, idle_ns "
                       "FROM gpu_breakdown WHERE run_id = ? AND rank = 0 ORDER BY iteration", (int(run),)).fetchall()
    if len(rows) != 4:
        print(f"FAIL: expected 4 iterations with GPU work in the fixture's breakdown, got {len(rows)}")
        return 1
    gaps = sum(max(0, rows[k + 1][1] - rows[k][2]) for k in range(len(rows) - 1))
    ours = {
        "compute_us": sum(r[3] for r in rows) / 1000,
        "kernel_time_us": (rows[-1][2] - rows[0][1]) / 1000,
        "idle_us": (sum(r[6] for r in rows) + gaps) / 1000,
        "overlap_pct": round(100 * sum(r[5] for r in rows) / sum(r[4] for r in rows), 2),
    }

    analysis = TraceAnalysis(trace_dir=trace_dir)
    tb = analysis.get_temporal_breakdown(visualize=False).iloc[0]
    ov = analysis.get_comm_comp_overlap(visualize=False).iloc[0]
    hta = {
        "compute_us": float(tb["compute_time(us)"]),
        "kernel_time_us": float(tb["kernel_time(us)"]),
        "idle_us": float(tb["idle_time(us)"]),
        "overlap_pct": float(ov["comp_comm_overlap_pctg"]),
    }
    print(f"{'figure':<16} {'trainscope':>12} {'HTA':>12}")
    ok = True
    for k in ours:
        same = abs(ours[k] - hta[k]) <= 1e-6 + 1e-9 * abs(hta[k]) + (0.01 if k == "overlap_pct" else 0)
        ok &= same
        print(f"{k:<16} {ours[k]:>12.3f} {hta[k]:>12.3f}{'' if same else '   <- differs'}")
    print("PASS: trainscope's breakdown agrees with HTA" if ok else "FAIL: trainscope's breakdown differs from HTA")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
