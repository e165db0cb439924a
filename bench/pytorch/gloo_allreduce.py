#!/usr/bin/env python3
"""PyTorch's gloo all-reduce timed as `trainscope bench collectives` times its own: float32 sum,
sizes from --min-bytes to --max-bytes (times --factor each step), --warmup untimed calls and then
--iters timed ones per size, the ranks lined up by a barrier before each size; a size's time is
the mean per call averaged over the ranks (nccl-tests' default), algbw = bytes / time and
busbw = algbw x 2(n-1)/n (docs/formulas.md, "Communication").

One process per rank: RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT from the environment, as
torchrun sets them (bench/pytorch/allreduce_hosts.sh starts it on two namespace hosts). Rank 0
prints the table, or with --json the rows as JSON.

  RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 python3 gloo_allreduce.py --json &
  RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 python3 gloo_allreduce.py
"""
import argparse
import json
import os
import sys
import time


def parse_size(text):
    units = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper()
    unit = text[-1] if text and text[-1] in "KMG" else ""
    return int(float(text[:len(text) - len(unit)]) * units[unit])


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--min-bytes", default="1M")
    p.add_argument("--max-bytes", default="64M")
    p.add_argument("--factor", type=int, default=4)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--json", action="store_true", help="print the rows as JSON (rank 0)")
    args = p.parse_args()
    missing = [k for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT") if not os.environ.get(k)]
    if missing:
        raise SystemExit(f"gloo_allreduce.py: needs {', '.join(missing)} in the environment (as torchrun sets them)")
    lo, hi = parse_size(args.min_bytes), parse_size(args.max_bytes)
    if lo < 4 or hi < lo or args.factor < 2 or args.iters < 1 or args.warmup < 0:
        raise SystemExit("gloo_allreduce.py: sizes from 4 bytes, max >= min, factor >= 2, iters >= 1, warmup >= 0")

    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    n = dist.get_world_size()
    rows = []
    size = lo
    while size <= hi:
        buf = torch.ones(size // 4, dtype=torch.float32)
        for _ in range(args.warmup):
            dist.all_reduce(buf)
        dist.barrier()
        times = []
        for _ in range(args.iters):
            t0 = time.perf_counter_ns()
            dist.all_reduce(buf)
            times.append(time.perf_counter_ns() - t0)
        mean = torch.tensor([sum(times) / len(times)], dtype=torch.float64)
        dist.all_reduce(mean)  # averaged over the ranks
        t_ns = mean.item() / n
        algbw = size / t_ns  # bytes per ns = GB/s
        rows.append({"collective": "all_reduce", "backend": "gloo", "bytes": size, "ranks": n,
                     "iterations": args.iters, "time_ns": t_ns, "algbw_gbps": algbw,
                     "bus_factor": 2 * (n - 1) / n, "busbw_gbps": algbw * 2 * (n - 1) / n})
        size *= args.factor
    if dist.get_rank() == 0:
        if args.json:
            json.dump({"torch_version": torch.__version__, "rows": rows}, sys.stdout, indent=2)
            print()
        else:
            print(f"# gloo all_reduce, {n} ranks, float32 sum, {args.iters} timed calls per size after {args.warmup}")
            print(f"# {'size(B)':>12} {'time(us)':>12} {'algbw(GB/s)':>12} {'busbw(GB/s)':>12}")
            for r in rows:
                print(f"  {r['bytes']:>12} {r['time_ns'] / 1e3:>12.2f} {r['algbw_gbps']:>12.3f} {r['busbw_gbps']:>12.3f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
