"""Plumbing shared by the PyTorch reference scripts in bench/pytorch (resnet50_train.py,
inception_v3_train.py, wgan_train.py, transformer_train.py): the command line, the thread
environment, RSS, the timing loop, percentiles and the JSON result / text summary; on the GPU
(--device cuda: resnet50_train.py and transformer_train.py) the TF32 and cuDNN switches, the
device's memory peaks, the model FLOPs and the peaks MFU is taken against.

A script imports this module *before* torch and calls prepare() first, because the OpenMP /
MKL / OpenBLAS thread variables only take effect if they are set before torch is loaded.
Nothing here imports torch at module level; the functions that need it import it lazily.

    import common
    ARGS, RSS_BEFORE_IMPORT = common.prepare(__doc__, PRESETS, "...")
    import torch
"""
import argparse
import contextlib
import json
import os
import platform
import resource
import statistics
import sys
import time
import warnings


# The scripts that take --device cuda; the others train on the CPU only and refuse it.
CUDA_SCRIPTS = ("resnet50_train.py", "transformer_train.py")
# The scripts that take --ddp (DistributedDataParallel over gloo, one process per rank).
DDP_SCRIPTS = ("resnet50_train.py", "transformer_train.py")

# Dense peaks of the GPUs this project is lent, in FLOP/s, by what torch.cuda.get_device_name()
# contains (first match wins). NVIDIA's datasheets give the tensor-core TF32 figure with 2:4
# structured sparsity, twice the dense one: H100 SXM 989 TFLOPS -> 494.7 dense.
DATASHEET_PEAKS = [
    # (name contains, {precision: FLOP/s}, source)
    ("H200", {"tf32": 494.7e12, "fp32": 67e12},
     "NVIDIA H200 Tensor Core GPU datasheet: TF32 Tensor Core 989 TFLOPS with sparsity (494.7 dense), "
     "FP32 67 TFLOPS; the same as H100 SXM"),
    ("H100 80GB HBM3", {"tf32": 494.7e12, "fp32": 67e12},
     "NVIDIA H100 Tensor Core GPU datasheet, H100 SXM: TF32 Tensor Core 989 TFLOPS with sparsity (494.7 dense), "
     "FP32 67 TFLOPS"),
    ("H100 SXM", {"tf32": 494.7e12, "fp32": 67e12},
     "NVIDIA H100 Tensor Core GPU datasheet, H100 SXM: TF32 Tensor Core 989 TFLOPS with sparsity (494.7 dense), "
     "FP32 67 TFLOPS"),
]


def parse_args(description, presets, check_params_help, argv=None, extra_args=None):
    """The command line every reference script takes (the same flags as resnet50_train.py);
    `extra_args(parser)`, if given, adds a script's own flags."""
    p = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    script = os.path.basename(sys.argv[0])
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                   help="cuda: model and data on the GPU, TF32 allowed, cudnn.benchmark, a synchronize at the end of "
                        f"every iteration (only {' and '.join(CUDA_SCRIPTS)})")
    p.add_argument("--no-tf32", action="store_true",
                   help="--device cuda: fp32 matmuls and convolutions without TF32 (as TS_CUDA_TF32=0)")
    p.add_argument("--mfu", choices=("auto", "on", "off"), default="auto",
                   help="after training, count the model's FLOPs (torch.utils.flop_counter) and time a matmul for "
                        "the MFU fields (auto: on with --device cuda, off on the CPU)")
    p.add_argument("--peak-matmul", type=int, default=0, metavar="N",
                   help="the N x N x N fp32 matmul the measured peak comes from (0: 8192 on cuda, 1024 on the CPU)")
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
    p.add_argument("--ddp", action="store_true",
                   help="DistributedDataParallel over gloo, this process one rank: RANK, WORLD_SIZE, MASTER_ADDR "
                        "and MASTER_PORT from the environment, as torchrun sets them (Open MPI's "
                        f"OMPI_COMM_WORLD_RANK/SIZE also do); only {' and '.join(DDP_SCRIPTS)}; "
                        "bench/pytorch/ddp_hosts.sh runs it against trainscope on two namespace hosts")
    p.add_argument("--profile", metavar="TRACE", default=None,
                   help="write a PyTorch profiler (Kineto) trace of every iteration, warm-up included, to TRACE "
                        "(.json or .json.gz): one profiler step per iteration, the phases as record_function ranges "
                        "(forward, backward, optimizer), each leaf module's forward as a 'layer: NAME' range, the "
                        "allocator's memory (profile_memory); what `trainscope run --framework pytorch` imports")
    p.add_argument("--memory-timeline", metavar="JSON", default=None,
                   help="with --profile: also PyTorch's memory profiler timeline ([times, sizes by category], "
                        "export_memory_timeline) to JSON; records shapes and Python stacks, which it needs")
    p.add_argument("--unprofiled-first", action="store_true",
                   help="with --profile: run the same iterations once before without the profiler, for rates and "
                        "peak memory PyTorch's profiler does not touch (the result's \"unprofiled\")")
    p.add_argument("--bucket-mb", type=float, default=25.0,
                   help="--ddp: DDP's bucket_cap_mb (25, DDP's default and trainscope's --bucket-mb)")
    if extra_args is not None:
        extra_args(p)
    args = p.parse_args(argv)
    if args.device == "cuda" and script not in CUDA_SCRIPTS:
        p.error(f"--device cuda: {script} trains on the CPU only; {' and '.join(CUDA_SCRIPTS)} take --device cuda")
    if args.ddp and script not in DDP_SCRIPTS:
        p.error(f"--ddp: {script} has no DistributedDataParallel mode; {' and '.join(DDP_SCRIPTS)} take --ddp")
    if args.ddp and args.device == "cuda":
        p.error("--ddp trains on the CPU over gloo (the comparison of issue 41); not with --device cuda")
    return args


def distribute(model, args):
    """--ddp: joins the process group (gloo) and wraps `model` in DistributedDataParallel with
    args.bucket_mb buckets, as trainscope's data parallelism (its rank 0's parameters are
    broadcast to the others at the wrap, as trainscope's). Without --ddp, `model` as it is."""
    if not args.ddp:
        return model
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    env = os.environ
    rank = env.get("RANK", env.get("OMPI_COMM_WORLD_RANK"))
    world = env.get("WORLD_SIZE", env.get("OMPI_COMM_WORLD_SIZE"))
    missing = [k for k, v in (("RANK", rank), ("WORLD_SIZE", world), ("MASTER_ADDR", env.get("MASTER_ADDR")),
                              ("MASTER_PORT", env.get("MASTER_PORT"))) if not v]
    if missing:
        raise SystemExit(f"{os.path.basename(sys.argv[0])}: --ddp needs {', '.join(missing)} in the environment "
                         "(torchrun sets them; bench/pytorch/ddp_hosts.sh shows a launch on two hosts)")
    dist.init_process_group("gloo", rank=int(rank), world_size=int(world))
    return DistributedDataParallel(model, bucket_cap_mb=args.bucket_mb)


def add_ddp_fields(result, args):
    """--ddp: the job's figures in `result` ("ddp"): every rank's samples (and tokens) over the
    slowest rank's timed seconds, as trainscope's "all ranks ... sustained". Collective: every
    rank calls it. Returns whether this rank is the one that reports (rank 0)."""
    if not args.ddp:
        return True
    import torch
    import torch.distributed as dist

    seconds = sum(result["iteration_s"])
    work = torch.tensor([result["samples_per_s"] * seconds, result.get("tokens_per_s", 0.0) * seconds],
                        dtype=torch.float64)
    slowest = torch.tensor([seconds], dtype=torch.float64)
    dist.all_reduce(work, op=dist.ReduceOp.SUM)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    ddp = {
        "backend": dist.get_backend(),
        "world_size": dist.get_world_size(),
        "bucket_cap_mb": args.bucket_mb,
        "job_samples_per_s": work[0].item() / slowest.item(),
    }
    if "tokens_per_s" in result:
        ddp["job_tokens_per_s"] = work[1].item() / slowest.item()
    result["ddp"] = ddp
    rank = dist.get_rank()
    dist.destroy_process_group()
    return rank == 0


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


# --profile: where the trace goes (None: not profiled), whether it records the GPU, where the
# memory timeline goes (None: none), and whether an unprofiled pass comes first.
_PROFILE = {"path": None, "cuda": False, "memory_timeline": None, "unprofiled_first": False}


def profiling():
    return _PROFILE["path"] is not None


def phase(name):
    """A phase of the iteration (forward, backward, optimizer: trainscope's names) as a
    record_function range when profiled; nothing otherwise, so unprofiled runs time only the work."""
    if not profiling():
        return contextlib.nullcontext()
    import torch

    return torch.autograd.profiler.record_function(name)


def backward_and_step(loss, opt, sched=None, clip=None):
    """The end of every script's iteration: backward, then the optimizer (gradients clipped to
    `clip` = (parameters, max norm) first where given, the schedule stepped, gradients set to None),
    each its phase."""
    import torch

    with phase("backward"):
        loss.backward()
    with phase("optimizer"):
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(*clip)
        opt.step()
        if sched is not None:
            sched.step()
        opt.zero_grad(set_to_none=True)


def profile_layers(model):
    """When profiled: every leaf module's forward as a 'layer: NAME' range (NAME: its qualified name,
    as named_modules() gives it), by forward pre- and post-hooks; the importer gives each op in it
    that layer, and each backward node the layer its forward op ran in (by sequence number)."""
    if not profiling():
        return
    import torch

    for name, module in model.named_modules():
        if not name or any(True for _ in module.children()):
            continue
        open_ranges = []  # a module called again inside itself (never in these models) nests

        def enter(mod, inputs, name=name, open_ranges=open_ranges):
            r = torch.autograd.profiler.record_function("layer: " + name)
            r.__enter__()
            open_ranges.append(r)

        def leave(mod, inputs, output, open_ranges=open_ranges):
            open_ranges.pop().__exit__(None, None, None)

        module.register_forward_pre_hook(enter)
        module.register_forward_hook(leave)


def prepare(description, presets, check_params_help, argv=None, extra_args=None):
    """Parses the command line, sets the thread environment and measures RSS before torch is
    imported. Returns (args, rss_before_import_bytes)."""
    args = parse_args(description, presets, check_params_help, argv, extra_args)
    _PROFILE["path"] = args.profile
    _PROFILE["cuda"] = args.device == "cuda"
    _PROFILE["memory_timeline"] = args.memory_timeline
    _PROFILE["unprofiled_first"] = args.unprofiled_first
    if args.memory_timeline and not args.profile:
        raise SystemExit(f"{os.path.basename(sys.argv[0])}: --memory-timeline needs --profile")
    set_thread_env(args.threads)
    rss = rss_bytes()
    warnings.filterwarnings("ignore", message="Failed to initialize NumPy")  # numpy is not needed here
    return args, rss


def configure_torch(args):
    """Threads, mkldnn switch, seed and, with --device cuda, the GPU's switches (TF32 for matmuls
    and cuDNN convolutions unless --no-tf32, cudnn.benchmark); returns the memory format the run uses."""
    import torch

    if args.threads > 0:
        torch.set_num_threads(args.threads)
    if args.no_mkldnn:
        torch.backends.mkldnn.enabled = False
    if args.device == "cuda":
        if not torch.cuda.is_available():
            raise SystemExit(f"{os.path.basename(sys.argv[0])}: --device cuda, but torch {torch.__version__} "
                             f"(CUDA {torch.version.cuda}) sees no GPU (torch.cuda.is_available() is False)")
        # TF32 as trainscope's default (TS_CUDA_TF32, engine/cuda/device_memory.h): fp32 data, tensor-core math.
        torch.backends.cuda.matmul.allow_tf32 = not args.no_tf32
        torch.backends.cudnn.allow_tf32 = not args.no_tf32
        # cuDNN times its algorithms per shape on first use (warm-up) and keeps the fastest, as
        # trainscope's cudnnFind*Ex once per shape.
        torch.backends.cudnn.benchmark = True
    torch.manual_seed(args.seed)
    return torch.channels_last if args.channels_last else torch.contiguous_format


def device_of(args):
    import torch

    return torch.device("cuda" if args.device == "cuda" else "cpu")


def mfu_wanted(args):
    return args.mfu == "on" or (args.mfu == "auto" and args.device == "cuda")


def synchronize(args):
    """What each iteration ends with on the GPU: torch.cuda.synchronize() (trainscope synchronises
    its device at the end of every iteration); None on the CPU."""
    if args.device != "cuda":
        return None
    import torch

    return torch.cuda.synchronize


def percentile(xs, q):
    """Linear-interpolation percentile (numpy's default), q in [0, 100]."""
    s = sorted(xs)
    if len(s) == 1:
        return s[0]
    pos = (len(s) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def time_iterations(step, warmup, iters, sync=None, after_warmup=None, restart=None):
    """Runs `step` (one training iteration, returning its loss as a float) `warmup` times
    untimed, then `iters` times timed. `sync` (the GPU's synchronize), if given, ends every
    iteration inside its time; `after_warmup()`, if given, runs between warm-up and the timed
    iterations and its result is returned as "after_warmup". Returns per-iteration wall and
    process-CPU seconds, losses and RSS at the boundaries.

    With --profile, every iteration is one profiler step (warm-up included), the trace is written
    after the last, and a line on stderr says how far it is. With --unprofiled-first too, the same
    iterations run once before without the profiler (their times and peak RSS under
    "unprofiled": PyTorch at its best, which its profiler slowed 2.3x on deepspeech2 small),
    then `restart()` (the scripts whose batches vary: their first batch again) and the profiled
    pass, so that both passes train on the same batches."""
    unprofiled = None
    if profiling() and _PROFILE["unprofiled_first"]:
        print("the iterations without the profiler first", file=sys.stderr, flush=True)
        unprofiled = _pass(step, warmup, iters, sync, after_warmup, None)
        if restart is not None:
            restart()
        after_warmup = None  # the device's peaks: the unprofiled pass's
    timing = _pass(step, warmup, iters, sync, after_warmup, _start_profiler(warmup + iters))
    if unprofiled is not None:
        timing["after_warmup"] = unprofiled["after_warmup"]
    timing["unprofiled"] = unprofiled
    return timing


def _pass(step, warmup, iters, sync, after_warmup, profiler):
    warm_times, warm_losses = [], []
    for _ in range(warmup):
        t0 = time.perf_counter()
        warm_losses.append(step())
        if sync is not None:
            sync()
        warm_times.append(time.perf_counter() - t0)
        _end_profiler_step(profiler)
    rss_after_warmup = rss_bytes()
    marked = after_warmup() if after_warmup is not None else None

    times, cpu_times, losses = [], [], []
    for _ in range(iters):
        c0, t0 = time.process_time(), time.perf_counter()
        losses.append(step())
        if sync is not None:
            sync()
        times.append(time.perf_counter() - t0)
        cpu_times.append(time.process_time() - c0)
        _end_profiler_step(profiler)
    # Before the trace is written: its export's memory is not training's.
    peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB
    _write_profile(profiler)
    return {
        "after_warmup": marked,
        "warm_times": warm_times,
        "warm_losses": warm_losses,
        "times": times,
        "cpu_times": cpu_times,
        "losses": losses,
        "rss_after_warmup": rss_after_warmup,
        "rss_after_timed": rss_bytes(),
        "peak_rss": peak_rss,
    }


class Replay:
    """The batches of a run, one per next(), from the first again after restart() (the scripts'
    feed, so that time_iterations' unprofiled and profiled passes train on the same batches)."""

    def __init__(self, batches):
        self.batches, self.k = batches, 0

    def __iter__(self):
        return self

    def __next__(self):
        if self.k >= len(self.batches):
            raise StopIteration
        self.k += 1
        return self.batches[self.k - 1]

    def restart(self):
        self.k = 0


class _Profiled:
    """--profile: the profiler over the iterations, each one profiler step, and how many are done."""

    def __init__(self, steps):
        from torch.profiler import ProfilerActivity, profile, schedule

        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if _PROFILE["cuda"] else [])
        # Every step active, once: without a schedule the trace has no ProfilerStep#N ranges. Its
        # warning that no step is a profiler warm-up is moot: trainscope's warm-up steps are kept apart.
        warnings.filterwarnings("ignore", message="Profiler won't be using warmup")
        # The memory profiler's categories need the shapes and the Python stacks recorded too.
        categories = _PROFILE["memory_timeline"] is not None
        self.prof = profile(activities=activities, profile_memory=True, record_shapes=categories,
                            with_stack=categories, schedule=schedule(wait=0, warmup=0, active=steps, repeat=1))
        self.done, self.steps = 0, steps
        self.prof.__enter__()

    def step(self):
        self.prof.step()  # ends ProfilerStep#k, begins the next
        self.done += 1
        print(f"profiled iteration {self.done}/{self.steps}", file=sys.stderr, flush=True)

    def write(self):
        self.prof.__exit__(None, None, None)
        print(f"writing the trace to {_PROFILE['path']}", file=sys.stderr, flush=True)
        self.prof.export_chrome_trace(_PROFILE["path"])
        if _PROFILE["memory_timeline"] is not None:
            print(f"writing the memory timeline to {_PROFILE['memory_timeline']}", file=sys.stderr, flush=True)
            warnings.filterwarnings("ignore", category=FutureWarning)  # deprecated, and the only API with categories
            self.prof.export_memory_timeline(_PROFILE["memory_timeline"], "cuda:0" if _PROFILE["cuda"] else "cpu")


def _start_profiler(steps):
    return _Profiled(steps) if profiling() else None


def _end_profiler_step(profiled):
    if profiled is not None:
        profiled.step()


def _write_profile(profiled):
    if profiled is not None:
        profiled.write()


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def device_memory_mark(args):
    """The after_warmup hook of time_iterations on the GPU: the allocator's peaks so far (model,
    optimizer, data, warm-up with cudnn.benchmark's search), then a reset of the peaks so that
    the timed iterations' own peak is known too. None on the CPU."""
    if args.device != "cuda":
        return None
    import torch

    def mark():
        torch.cuda.synchronize()
        m = {"max_allocated": torch.cuda.max_memory_allocated(), "max_reserved": torch.cuda.max_memory_reserved()}
        torch.cuda.reset_peak_memory_stats()
        return m
    return mark


def device_memory(args, timing):
    """The caching allocator's peaks, read right after the timed iterations (before FLOP counting
    or the matmul peak touch the GPU). max_*: over the whole process, as trainscope's
    gpuN_allocator_used_peak_bytes / _reserved_peak_bytes, whose peaks are never reset."""
    if args.device != "cuda":
        return None
    import torch

    torch.cuda.synchronize()
    warm = timing["after_warmup"]
    timed_alloc, timed_reserved = torch.cuda.max_memory_allocated(), torch.cuda.max_memory_reserved()
    free, total = torch.cuda.mem_get_info()
    return {
        "max_allocated_bytes": max(warm["max_allocated"], timed_alloc),
        "max_reserved_bytes": max(warm["max_reserved"], timed_reserved),
        "warmup_max_allocated_bytes": warm["max_allocated"],
        "warmup_max_reserved_bytes": warm["max_reserved"],
        "timed_max_allocated_bytes": timed_alloc,
        "timed_max_reserved_bytes": timed_reserved,
        "allocated_after_timed_bytes": torch.cuda.memory_allocated(),
        "driver_used_bytes": total - free,
        "driver_total_bytes": total,
        "scope": "max_*: torch.cuda.max_memory_allocated() / max_memory_reserved() over the whole process (model, "
                 "optimizer state, data, warm-up with cudnn.benchmark's search, timed iterations; never reset "
                 "before), as trainscope's gpuN_allocator_used_peak_bytes / _reserved_peak_bytes; warmup_*: up "
                 "to the end of warm-up; timed_*: the timed iterations alone (peaks reset after warm-up); "
                 "driver_used_bytes: cudaMemGetInfo's total - free after the timed iterations (every process "
                 "and the CUDA context included)",
    }


def device_fields(args):
    """What ran where: the GPU, its CUDA and cuDNN, the TF32 and cuDNN switches as set."""
    import torch

    if args.device != "cuda":
        return {"device": "cpu", "device_name": cpu_model()}
    props = torch.cuda.get_device_properties(0)
    tf32 = {"matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
            "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32}
    # PyTorch >= 2.9 also says it through fp32_precision ("tf32" / "ieee").
    for key, obj in (("matmul_fp32_precision", torch.backends.cuda.matmul),
                     ("cudnn_conv_fp32_precision", getattr(torch.backends.cudnn, "conv", None))):
        value = getattr(obj, "fp32_precision", None)
        if value is not None:
            tf32[key] = value
    return {
        "device": "cuda",
        "device_name": torch.cuda.get_device_name(0),
        "device_capability": f"{props.major}.{props.minor}",
        "device_total_memory_bytes": props.total_memory,
        "cuda_version": torch.version.cuda,
        "cudnn_version": torch.backends.cudnn.version(),
        "tf32": tf32,
        "cudnn_benchmark": torch.backends.cudnn.benchmark,
        "synchronize_each_iteration": "torch.cuda.synchronize() at the end of every iteration, inside its time",
        "cpu": cpu_model(),
    }


def count_model_flops(passes):
    """FLOPs of each pass in `passes` (callables that run a forward and return the loss), counted
    by torch.utils.flop_counter.FlopCounterMode: convolutions, matrix products and attention at 2
    FLOPs per multiply-add (elementwise ops, norms, pooling and the optimizer are not counted).
    Each pass's backward is counted too, apart. Returns (forward, backward) summed over the passes,
    or None where torch has no FlopCounterMode. Leaves gradients behind: zero them after."""
    try:
        from torch.utils.flop_counter import FlopCounterMode
    except ImportError:
        return None
    forward = backward = 0
    for run_forward in passes:
        with FlopCounterMode(display=False) as f:
            loss = run_forward()
        forward += f.get_total_flops()
        with FlopCounterMode(display=False) as b:
            loss.backward()
        backward += b.get_total_flops()
    return forward, backward


def datasheet_peak(device_name, precision):
    """(FLOP/s, source) of DATASHEET_PEAKS for this GPU and precision ("tf32" or "fp32"), or (None, why)."""
    for key, peaks, source in DATASHEET_PEAKS:
        if key in device_name:
            return peaks[precision], source
    return None, f"no datasheet constant for {device_name!r} (bench/pytorch/common.py DATASHEET_PEAKS)"


def measure_matmul_peak(args, reps=10):
    """The measured peak MFU is also taken against: an N x N x N fp32 torch.matmul (TF32 as the run
    allows it), one untimed, then `reps` timed (CUDA events on the GPU, perf_counter on the CPU);
    2 N^3 FLOPs over the median time."""
    import torch

    n = args.peak_matmul or (8192 if args.device == "cuda" else 1024)
    dev = device_of(args)
    a, b = torch.randn(n, n, device=dev), torch.randn(n, n, device=dev)
    c = torch.empty(n, n, device=dev)
    torch.matmul(a, b, out=c)
    ms = []
    for _ in range(reps):
        if args.device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            torch.matmul(a, b, out=c)
            end.record()
            end.synchronize()
            ms.append(start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            torch.matmul(a, b, out=c)
            ms.append((time.perf_counter() - t0) * 1e3)
    del a, b, c
    median = statistics.median(ms)
    how = ("CUDA events" if args.device == "cuda" else "perf_counter")
    return {"flops": 2.0 * n ** 3 / (median * 1e-3), "n": n, "ms": ms,
            "how": f"torch.matmul fp32 {n}x{n}x{n}, 1 untimed then {reps} timed by {how}, 2 n^3 FLOPs / median time"}


def add_device_fields(result, args, memory, flops=None, flop_units=None, unit=None, rate_key=None):
    """Adds to `result` where it ran (device_fields), the device's memory peaks (device_memory) and,
    when --mfu is on, the model FLOPs (count_model_flops over the timed work: `flop_units` images or
    tokens), the peaks and the MFU of result[rate_key] (images/s or tokens/s, sustained):
        model FLOPs per unit = 3 x forward FLOPs per unit  (forward + backward = 3 x forward)
        MFU = model FLOPs per unit x units/s / peak FLOP/s
    against the GPU's datasheet dense peak (DATASHEET_PEAKS) and against the measured matmul peak."""
    result.update(device_fields(args))
    if memory is not None:
        result["device_memory"] = memory
    if not mfu_wanted(args):
        return result
    import torch

    if flops is None:
        result["model_flops"] = {"error": f"torch {torch.__version__} has no torch.utils.flop_counter"}
        return result
    forward, backward = flops
    precision = "tf32" if args.device == "cuda" and not args.no_tf32 else "fp32"
    per_unit = 3.0 * forward / flop_units
    result["model_flops"] = {
        "unit": unit,
        "forward_per_unit": forward / flop_units,
        "per_unit": per_unit,
        "counted_forward_backward_per_unit": (forward + backward) / flop_units,
        "formula": "per unit = 3 x forward FLOPs / units (forward + backward = 3 x forward); forward FLOPs from "
                   "torch.utils.flop_counter.FlopCounterMode over the timed batches after training: convolutions, "
                   "matrix products and attention (dense over the padded lengths, causal or not) at 2 FLOPs per "
                   "multiply-add; elementwise ops, norms, pooling, the loss and the optimizer not counted. "
                   "counted_forward_backward_per_unit: FlopCounterMode over forward and backward, for comparison",
    }
    rate = result[rate_key]
    achieved = per_unit * rate
    sheet, source = (None, "the CPU has no datasheet constant here") if args.device != "cuda" else \
        datasheet_peak(result["device_name"], precision)
    measured = measure_matmul_peak(args)
    result["peak_flops"] = {
        "precision": precision,
        "datasheet_flops": sheet,
        "datasheet_source": source,
        "matmul_measured_flops": measured["flops"],
        "matmul_n": measured["n"],
        "matmul_ms": measured["ms"],
        "matmul_how": measured["how"],
    }
    result["mfu"] = {
        "rate": rate_key,
        "achieved_flops": achieved,
        "datasheet": achieved / sheet if sheet else None,
        "measured_matmul": achieved / measured["flops"],
        "formula": f"model FLOPs per {unit} x {rate_key} / peak FLOP/s",
    }
    return result


def torch_build():
    """What torch was built with, from torch.__config__.show(): its BLAS (BUILD settings'
    BLAS_INFO), oneDNN (MKL-DNN) and MKL lines, the figures a comparison of CPU speed names."""
    import torch

    out = {"torch_blas": None, "torch_onednn": None, "torch_mkl": None}
    for line in torch.__config__.show().splitlines():
        line = line.strip().lstrip("- ")
        if "MKL-DNN" in line or "oneDNN" in line:
            out["torch_onednn"] = line.split(" (Git Hash")[0]
        elif "Math Kernel Library" in line:
            out["torch_mkl"] = line.split(" for Intel")[0]
        elif line.startswith("Build settings:"):
            for setting in line[len("Build settings:"):].split(","):
                if setting.strip().startswith("BLAS_INFO="):
                    out["torch_blas"] = setting.strip()[len("BLAS_INFO="):]
    return out


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
        "profiled": _PROFILE["path"],
        **torch_build(),
        "config": config,
        "warmup_iteration_s": timing["warm_times"],
        "warmup_losses": timing["warm_losses"],
        # The work of each timed iteration, in order (what a trace's steps are counted in).
        "samples_per_iteration": list(samples_per_iteration) if isinstance(samples_per_iteration, (list, tuple))
        else [samples_per_iteration] * len(times),
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
    u = timing.get("unprofiled")
    if u is not None:
        # The same iterations without the profiler: what the rates and peak memory are when it is off.
        result["unprofiled"] = {
            "iteration_s": u["times"],
            "iteration_cpu_s": u["cpu_times"],
            "losses": u["losses"],
            "peak_rss_bytes": u["peak_rss"],
            "peak_rss_growth_bytes": u["peak_rss"] - rss_before_model,
        }
    if tokens_per_iteration is not None:
        assert len(tokens_per_iteration) == len(times), "one token count per timed iteration"
        per_token = [n / t for n, t in zip(tokens_per_iteration, times)]
        result.update({
            "tokens_per_iteration": list(tokens_per_iteration),
            "tokens_per_s": sum(tokens_per_iteration) / sum(times),
            "tokens_per_s_median": statistics.median(per_token),
            "tokens_per_s_p10": percentile(per_token, 10),
            "tokens_per_s_p90": percentile(per_token, 90),
            "tokens_per_s_best": max(per_token),
        })
    return result


def flop_text(x):
    """FLOPs with a prefix: 24.6 GFLOP, 494.7 TFLOP."""
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= scale:
            return f"{x / scale:.4g} {prefix}FLOP"
    return f"{x:.4g} FLOP"


def percent(f):
    return f"{100 * f:.3g}%"


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
        if r.get("device") == "cuda":
            m = r["device_memory"]
            print(f"{r['device_name']} (CUDA {r['cuda_version']}, cuDNN {r['cudnn_version']}), TF32 "
                  f"matmul={r['tf32']['matmul_allow_tf32']} cudnn={r['tf32']['cudnn_allow_tf32']}, "
                  f"cudnn.benchmark={r['cudnn_benchmark']}: peak device memory {m['max_allocated_bytes'] / mib:.0f} MiB "
                  f"allocated, {m['max_reserved_bytes'] / mib:.0f} MiB reserved (whole run)")
        if "mfu" in r:
            f, p, u = r["model_flops"], r["peak_flops"], r["mfu"]
            sheet = (f"{percent(u['datasheet'])} of the datasheet's {flop_text(p['datasheet_flops'])}/s "
                     f"{p['precision']}, " if u["datasheet"] is not None else "")
            print(f"MFU: {flop_text(f['per_unit'])} per {f['unit']} (3 x forward) x {r[u['rate']]:.1f}/s = "
                  f"{flop_text(u['achieved_flops'])}/s: {sheet}{percent(u['measured_matmul'])} of the "
                  f"measured {p['matmul_n']}^3 matmul's {flop_text(p['matmul_measured_flops'])}/s")
