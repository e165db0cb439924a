#!/usr/bin/env python3
"""bench/pytorch/ddp_hosts.sh and allreduce_hosts.sh end to end: trainscope against
DistributedDataParallel and against gloo's all-reduce on two namespace hosts, the real binary.

    ddp_hosts_test.py TRAINSCOPE

1. The DDP reference refuses --ddp without its rank's environment, saying what is missing.
2. The driver, resnet50 tiny, one pair of 2 timed iterations, hosts at 1 Gbit: exit 0; the pair's
   line has both job rates and their ratio (equal to the rates divided, to its 3 decimals), the
   summary's median of one pair is that ratio.
3. The all-reduce driver, one pair of sweeps at 256 KiB and 1 MiB: exit 0, a row per size with
   both sides' busbw, trainscope's share of the TCP rate and their ratio; the TCP rate printed.
   No namespace host is left behind.
Exit 0: passed; 1: failed (what differs is printed); 77: skipped, saying why (torch not importable
by this Python: CI does not install it, it is large; not root or no network namespaces; hosts
tsh* exist already). Holds the lock the netns tests take (/tmp/trainscope-netns-hosts.lock).
"""
import fcntl
import os
import re
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DRIVER = os.path.join(ROOT, "bench", "pytorch", "ddp_hosts.sh")
NETNS = os.path.join(ROOT, "scripts", "netns-hosts")
FAILURES = []


def check(cond, what):
    if not cond:
        FAILURES.append(what)
        print(f"FAIL: {what}")


def skip(why):
    print(f"SKIPPED: {why}")
    sys.exit(77)


def main():
    trainscope = sys.argv[1]
    try:
        import torch  # noqa: F401
    except ImportError:
        skip(f"torch is not importable by {sys.executable}")
    lock = open("/tmp/trainscope-netns-hosts.lock", "a")
    fcntl.flock(lock, fcntl.LOCK_EX)  # one netns test at a time: they share the hosts' names
    if subprocess.run([NETNS, "check"], capture_output=True).returncode != 0:
        skip("network namespaces cannot be made here (scripts/netns-hosts check)")
    if subprocess.run([NETNS, "status"], capture_output=True, text=True).stdout.startswith("tsh"):
        skip("namespace hosts exist already (someone's experiment)")

    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    r = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "pytorch", "resnet50_train.py"), "--ddp",
                        "--preset", "tiny", "--iters", "1"], capture_output=True, text=True, env=env, timeout=120)
    check(r.returncode != 0 and "--ddp needs RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT" in r.stderr,
          f"--ddp without its environment: exit {r.returncode}, stderr {r.stderr[-500:]!r}")

    r = subprocess.run([DRIVER, "resnet50", "--preset", "tiny", "--pairs", "1", "--iters", "2", "--warmup", "1",
                        "--python", sys.executable, "--trainscope", trainscope],
                       capture_output=True, text=True, timeout=600)
    print(r.stdout[-3000:])
    check(r.returncode == 0, f"the driver exited {r.returncode}: {r.stderr[-3000:]}")
    pair = re.search(r"pair 1: trainscope ([0-9.]+) images/s, DDP \(gloo\) ([0-9.]+) images/s, ratio ([0-9.]+)",
                     r.stdout)
    check(pair is not None, "no pair line")
    if pair:
        ts, ddp, ratio = (float(g) for g in pair.groups())
        check(ts > 0 and ddp > 0, f"rates {ts}, {ddp}")
        check(abs(ratio - ts / ddp) <= 0.0005 + 1e-9, f"ratio {ratio} is not {ts} / {ddp}")
        summary = re.search(r"trainscope / DDP: median ([0-9.]+) over 1 pairs", r.stdout)
        check(summary is not None and float(summary.group(1)) == ratio, "the summary's median of one pair")
    # The all-reduce driver: trainscope's busbw against gloo's per size, one pair of sweeps.
    r = subprocess.run([os.path.join(ROOT, "bench", "pytorch", "allreduce_hosts.sh"), "--pairs", "1", "--min-bytes",
                        "256K", "--max-bytes", "1M", "--iters", "2", "--warmup", "1", "--python", sys.executable,
                        "--trainscope", trainscope], capture_output=True, text=True, timeout=600)
    print(r.stdout[-3000:])
    check(r.returncode == 0, f"allreduce_hosts.sh exited {r.returncode}: {r.stderr[-3000:]}")
    rows = re.findall(r"^\s+(\d+)\s+([0-9.]+)\s+(\d+)%\s+([0-9.]+)\s+([0-9.]+) \(", r.stdout, re.M)
    check([int(x[0]) for x in rows] == [262144, 1048576], f"one row per size: {rows}")
    for size, ts, share, gloo, ratio in rows:
        check(float(ts) > 0 and float(gloo) > 0, f"busbw at {size}: {ts}, {gloo}")
        # Each figure is printed to 3 decimals (+-0.0005): the ratio of the unrounded ones lies in
        # what the printed ones allow (a busbw of 0.008 may be 0.0085: on a loaded machine, 6%).
        lo = (float(ts) - 0.0005) / (float(gloo) + 0.0005) - 0.0005
        hi = (float(ts) + 0.0005) / max(float(gloo) - 0.0005, 1e-9) + 0.0005
        check(lo <= float(ratio) <= hi, f"ratio {ratio} at {size} is not {ts} / {gloo} (to the printed digits)")
    check("the link's TCP rate (bench collectives, one stream): 0." in r.stdout, "the TCP rate is printed")

    left = subprocess.run([NETNS, "status"], capture_output=True, text=True).stdout
    check(not left.startswith("tsh"), f"hosts left behind: {left}")
    if FAILURES:
        print(f"{len(FAILURES)} check(s) failed")
        return 1
    print("ddp_hosts_test: passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
