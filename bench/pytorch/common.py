"""Plumbing shared by the PyTorch reference scripts in bench/pytorch (resnet50_train.py,
inception_v3_train.py, wgan_train.py, transformer_train.py): the command line, the thread
environment, RSS, the timing loop, percentiles and the JSON result / text summary.

A script imports this module *before* torch and calls prepare() first, because the OpenMP /
MKL / OpenBLAS thread variables only take effect if they are set before torch is loaded.
Nothing here imports torch at module level; the functions that need it import it lazily.

    import common
    ARGS, RSS_BEFORE_IMPORT = common.prepare(__doc__, PRESETS, "...")
    import torch
"""
import argparse
import json
import os
import platform
import resource
import statistics
import sys
import time
import warnings


def parse_args(description, presets, check_params_help, argv=None, extra_args=None):
    """The command line every reference script takes (the same flags as resnet50_train.py);
    `extra_args(parser)`, if given, adds a script's own flags."""
    p = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", choices=sorted(presets), default="small")
    p.add_argument("--batch", type=int, default=0, help="0: the preset's default")
    p.add_argument("--iters", type=int, default=20, help="timed iterations (trainscope's default: 20)")
    p.add_argument("--warmup", type=int, default=3, help="untimed iterations first (trainscope's default: 3)")
    p.add_argument("--threads", type=int, default=0, help="intra-op threads; 0: leave PyTorch's default")
    p.add_argument("--channels-last", action="store_true",
                   help="model and input in torch.channels_last (oneDNN blocked/NHWC paths on CPU)")
    p.add_argument("--no-mkldnn", action="store_true", help="torch.backends.mkldnn.enabled = False")
    p.add_argument("--compile", action="store_true", help="torch.compile the model (inductor); compile time is untimed warm-up")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", nargs="?", const="-", default=None, metavar="PATH",
                   help="write the result as JSON to PATH ('-' or no PATH: stdout)")
    p.add_argument("--check-params", action="store_true", help=check_params_help)
    if extra_args is not None:
        extra_args(p)
    return p.parse_args(argv)


def set_thread_env(threads):
    """Must run before torch (and its OpenMP / MKL / OpenBLAS runtimes) is loaded."""
    if threads > 0:
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            os.environ[var] = str(threads)


def rss_bytes():
    """Current resident set size, from /proc/self/statm (Linux)."""
    with open("/proc/self/statm") as f:
        resident_pages = int(f.read().split()[1])
    return resident_pages * os.sysconf("SC_PAGE_SIZE")


def prepare(description, presets, check_params_help, argv=None, extra_args=None):
    """Parses the command line, sets the thread environment and measures RSS before torch is
    imported. Returns (args, rss_before_import_bytes)."""
    args = parse_args(description, presets, check_params_help, argv, extra_args)
    set_thread_env(args.threads)
    rss = rss_bytes()
    warnings.filterwarnings("ignore", message="Failed to initialize NumPy")  # numpy is not needed here
    return args, rss


def configure_torch(args):
    """Threads, mkldnn switch and seed; returns the memory format the run uses."""
    import torch

    if args.threads > 0:
        torch.set_num_threads(args.threads)
    if args.no_mkldnn:
        torch.backends.mkldnn.enabled = False
    torch.manual_seed(args.seed)
    return torch.channels_last if args.channels_last else torch.contiguous_format


def percentile(xs, q):
    """Linear-interpolation percentile (numpy's default), q in [0, 100]."""
    s = sorted(xs)
    if len(s) == 1:
        return s[0]
    pos = (len(s) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def time_iterations(step, warmup, iters):
    """Runs `step` (one training iteration, returning its loss as a float) `warmup` times
    untimed, then `iters` times timed. Returns per-iteration wall and process-CPU seconds,
    losses and RSS at the boundaries."""
    warm_times = []
    for _ in range(warmup):
        t0 = time.perf_counter()
        step()
        warm_times.append(time.perf_counter() - t0)
    rss_after_warmup = rss_bytes()

    times, cpu_times, losses = [], [], []
    for _ in range(iters):
        c0, t0 = time.process_time(), time.perf_counter()
        losses.append(step())
        times.append(time.perf_counter() - t0)
        cpu_times.append(time.process_time() - c0)
    return {
        "warm_times": warm_times,
        "times": times,
        "cpu_times": cpu_times,
        "losses": losses,
        "rss_after_warmup": rss_after_warmup,
        "rss_after_timed": rss_bytes(),
        "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,  # Linux reports KiB
    }


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def make_result(workload, config, timing, samples_per_iteration, rss_before_import, rss_before_model, load_at_start,
                tokens_per_iteration=None):
    """The JSON result every script writes (resnet50_train.py's fields, in its order).
    `samples_per_iteration` is what one iteration trains on (batch; wgan: the generator's batch), or a
    list with one count per timed iteration when batches differ (transformer: sentence pairs).
    `tokens_per_iteration` (a list, one per timed iteration) adds tokens/s fields, computed per
    iteration as trainscope computes them."""
    import torch

    times = timing["times"]
    if isinstance(samples_per_iteration, (list, tuple)):
        assert len(samples_per_iteration) == len(times), "one sample count per timed iteration"
        per_sample = [n / t for n, t in zip(samples_per_iteration, times)]
        samples_total = sum(samples_per_iteration)
    else:
        per_sample = [samples_per_iteration / t for t in times]
        samples_total = samples_per_iteration * len(times)
    allocator = None
    # PyTorch keeps no allocator statistics for CPU tensors by default (torch.cuda.memory_stats is
    # CUDA-only); RSS is the measure. Report whatever the CPU profiler-less API offers, if anything.
    if hasattr(torch, "cpu") and hasattr(torch.cpu, "memory_stats"):
        try:
            allocator = torch.cpu.memory_stats()
        except Exception:  # noqa: BLE001
            allocator = None

    result = {
        "workload": workload,
        "framework": "pytorch",
        "torch_version": torch.__version__,
        "python": sys.executable,
        "python_version": platform.python_version(),
        "mkldnn_available": torch.backends.mkldnn.is_available(),
        "mkldnn_enabled": torch.backends.mkldnn.enabled,
        "mkl_available": torch.backends.mkl.is_available(),
        "openmp_available": torch.backends.openmp.is_available(),
        "threads": torch.get_num_threads(),
        "interop_threads": torch.get_num_interop_threads(),
        "config": config,
        "warmup_iteration_s": timing["warm_times"],
        "iteration_s": times,
        # Process CPU seconds per iteration: cpu/wall well below the thread count means the
        # cores were shared with other work during the run (the wall times are then pessimistic).
        "iteration_cpu_s": timing["cpu_times"],
        "losses": timing["losses"],
        # Sustained, as trainscope's `throughput` (docs/formulas.md): the work over the time it took.
        "samples_per_s": samples_total / sum(times),
        "samples_per_s_median": statistics.median(per_sample),
        "samples_per_s_p10": percentile(per_sample, 10),
        "samples_per_s_p90": percentile(per_sample, 90),
        "samples_per_s_best": max(per_sample),  # = samples / fastest iteration for a fixed batch
        "iteration_s_median": statistics.median(times),
        "rss_before_import_bytes": rss_before_import,
        "rss_before_model_bytes": rss_before_model,
        "rss_after_warmup_bytes": timing["rss_after_warmup"],
        "rss_after_timed_bytes": timing["rss_after_timed"],
        "rss_growth_bytes": timing["rss_after_warmup"] - rss_before_model,
        # The peak over the run above the process before the model: trainscope's rss_growth_bytes.
        "peak_rss_growth_bytes": timing["peak_rss"] - rss_before_model,
        "peak_rss_bytes": timing["peak_rss"],
        "cpu_allocator_stats": allocator,
        "loadavg_1_5_15_at_start": load_at_start,
        "loadavg_1_5_15_at_end": list(os.getloadavg()),  # other processes competing for the cores
        "host": platform.node(),
        "cpu": cpu_model(),
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    if tokens_per_iteration is not None:
        assert len(tokens_per_iteration) == len(times), "one token count per timed iteration"
        per_token = [n / t for n, t in zip(tokens_per_iteration, times)]
        result.update({
            "tokens_per_s": sum(tokens_per_iteration) / sum(times),
            "tokens_per_s_median": statistics.median(per_token),
            "tokens_per_s_p10": percentile(per_token, 10),
            "tokens_per_s_p90": percentile(per_token, 90),
            "tokens_per_s_best": max(per_token),
        })
    return result


def emit(r, json_arg, headline):
    """Writes the JSON (--json) and, unless it went to stdout, a three-line summary.
    `headline` names the run, e.g. 'resnet50 small 64x64 batch 16'."""
    if json_arg is not None:
        text = json.dumps(r, indent=2)
        if json_arg == "-":
            print(text)
        else:
            with open(json_arg, "w") as f:
                f.write(text + "\n")
    if json_arg != "-":
        mib = 1024.0 * 1024.0
        c = r["config"]
        print(f"torch {r['torch_version']} ({r['python']}), mkldnn available={r['mkldnn_available']} "
              f"enabled={r['mkldnn_enabled']}, threads={r['threads']}")
        print(f"{headline} "
              f"{c['memory_format']}{' compiled' if c['compile'] else ''}: "
              f"{r['samples_per_s_median']:.2f} samples/s median (p10 {r['samples_per_s_p10']:.2f}, "
              f"p90 {r['samples_per_s_p90']:.2f}, best {r['samples_per_s_best']:.2f}) over {c['timed_iters']} iterations; "
              f"cpu/wall {sum(r['iteration_cpu_s']) / sum(r['iteration_s']):.2f}")
        if "tokens_per_s_median" in r:
            print(f"{r['tokens_per_s_median']:.0f} tokens/s median (p10 {r['tokens_per_s_p10']:.0f}, "
                  f"p90 {r['tokens_per_s_p90']:.0f}, best {r['tokens_per_s_best']:.0f})")
        print(f"peak RSS {r['peak_rss_bytes'] / mib:.0f} MiB, RSS growth model->after warm-up "
              f"{r['rss_growth_bytes'] / mib:.0f} MiB")
