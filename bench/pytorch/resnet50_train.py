#!/usr/bin/env python3
"""PyTorch reference for trainscope's `resnet50` workload (ResNet-50 v1.5), CPU training throughput.

Mirrors workloads/resnet50/resnet50.{h,cpp} and workloads/image_classifier.cpp:
  model     ResNet-50 v1.5 in plain torch.nn, torchvision's layout and module names
            (stride on the 3x3 conv of the first bottleneck of a stage; downsample = 1x1 conv + BN)
  presets   tiny  32x32,   base width 16, 10 classes,   batch 4
            small 64x64,   base width 64, 1000 classes, batch 16
            full  224x224, base width 64, 1000 classes, batch 32  (25,557,032 parameters)
  step      forward, F.cross_entropy, backward, SGD(momentum 0.9, weight decay 1e-4,
            lr 0.1*batch/256 with a 5-step linear warm-up), zero_grad(set_to_none=True)
  data      one batch of N(0,1) fp32 images and uniform integer labels, generated once before
            the timed region (trainscope times its synthetic data as a separate 'data' phase)

No torchvision dependency. Usage:
  python3 bench/pytorch/resnet50_train.py --preset small --threads 2 --iters 20 --warmup 3 --json
  python3 bench/pytorch/resnet50_train.py --check-params
"""
import argparse
import json
import os
import platform
import resource
import statistics
import sys
import time

PRESETS = {
    # name: (image_size, base_width, num_classes, default_batch)
    "tiny": (32, 16, 10, 4),
    "small": (64, 64, 1000, 16),
    "full": (224, 64, 1000, 32),
}
FULL_PARAMS = 25_557_032


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", choices=sorted(PRESETS), default="small")
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
    p.add_argument("--check-params", action="store_true",
                   help="assert the full preset has 25,557,032 parameters (and print each preset's count), then exit")
    return p.parse_args(argv)


ARGS = parse_args()
if ARGS.threads > 0:
    # Must be set before torch (and its OpenMP / MKL / OpenBLAS runtimes) is loaded.
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(ARGS.threads)


def rss_bytes():
    """Current resident set size, from /proc/self/statm (Linux)."""
    with open("/proc/self/statm") as f:
        resident_pages = int(f.read().split()[1])
    return resident_pages * os.sysconf("SC_PAGE_SIZE")


RSS_BEFORE_IMPORT = rss_bytes()

import warnings  # noqa: E402

warnings.filterwarnings("ignore", message="Failed to initialize NumPy")  # numpy is not needed here
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


def conv3x3(cin, cout, stride=1):
    return nn.Conv2d(cin, cout, kernel_size=3, stride=stride, padding=1, bias=False)


def conv1x1(cin, cout, stride=1):
    return nn.Conv2d(cin, cout, kernel_size=1, stride=stride, bias=False)


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin, width, stride=1):
        super().__init__()
        out = width * self.expansion
        self.conv1 = conv1x1(cin, width)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = conv3x3(width, width, stride)  # v1.5: the stride sits here
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = conv1x1(width, out)
        self.bn3 = nn.BatchNorm2d(out)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or cin != out:
            self.downsample = nn.Sequential(conv1x1(cin, out, stride), nn.BatchNorm2d(out))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return self.relu(y + identity)


class ResNet50(nn.Module):
    def __init__(self, base_width=64, num_classes=1000, in_channels=3, blocks=(3, 4, 6, 3)):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, base_width, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(base_width)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        cin = base_width
        for stage, n in enumerate(blocks):
            width = base_width << stage
            layers = []
            for i in range(n):
                layers.append(Bottleneck(cin, width, stride=2 if (stage > 0 and i == 0) else 1))
                cin = width * Bottleneck.expansion
            setattr(self, f"layer{stage + 1}", nn.Sequential(*layers))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, num_classes)  # with bias; PyTorch's default Linear init (as torchvision)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def build_model(preset):
    _, base_width, num_classes, _ = PRESETS[preset]
    return ResNet50(base_width=base_width, num_classes=num_classes)


def count_params(model):
    return sum(p.numel() for p in model.parameters())


def check_params():
    counts = {name: count_params(build_model(name)) for name in PRESETS}
    for name, n in counts.items():
        print(f"{name}: {n:,} parameters")
    assert counts["full"] == FULL_PARAMS, f"full preset has {counts['full']:,} parameters, expected {FULL_PARAMS:,}"
    assert counts["small"] == FULL_PARAMS, "small differs from full only in input size"
    print("OK: full = 25,557,032 parameters")


def percentile(xs, q):
    """Linear-interpolation percentile (numpy's default), q in [0, 100]."""
    s = sorted(xs)
    if len(s) == 1:
        return s[0]
    pos = (len(s) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def run(args):
    image_size, base_width, num_classes, default_batch = PRESETS[args.preset]
    batch = args.batch if args.batch > 0 else default_batch
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    if args.no_mkldnn:
        torch.backends.mkldnn.enabled = False
    torch.manual_seed(args.seed)
    memory_format = torch.channels_last if args.channels_last else torch.contiguous_format

    load_at_start = list(os.getloadavg())
    rss_before_model = rss_bytes()
    model = build_model(args.preset).to(memory_format=memory_format)
    model.train()
    n_params = count_params(model)
    base_lr = 0.1 * batch / 256.0
    opt = torch.optim.SGD(model.parameters(), lr=base_lr, momentum=0.9, weight_decay=1e-4, nesterov=False)
    # trainscope: 5-step linear warm-up, then constant (lr of step i = base_lr * min(1, (i+1)/5)).
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda i: min(1.0, (i + 1) / 5.0))
    step_model = torch.compile(model) if args.compile else model

    # Synthetic data: generated once, outside the timed region.
    x = torch.randn(batch, 3, image_size, image_size).contiguous(memory_format=memory_format)
    y = torch.randint(0, num_classes, (batch,))

    def step():
        out = step_model(x)
        loss = F.cross_entropy(out, y)
        loss.backward()
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        return loss.item()  # a sync point, like trainscope's loss.item() per iteration

    warm_times = []
    for _ in range(args.warmup):
        t0 = time.perf_counter()
        step()
        warm_times.append(time.perf_counter() - t0)
    rss_after_warmup = rss_bytes()

    times, cpu_times, losses = [], [], []
    for _ in range(args.iters):
        c0, t0 = time.process_time(), time.perf_counter()
        losses.append(step())
        times.append(time.perf_counter() - t0)
        cpu_times.append(time.process_time() - c0)
    rss_after_timed = rss_bytes()
    peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB

    per_sample = [batch / t for t in times]
    allocator = None
    # PyTorch keeps no allocator statistics for CPU tensors by default (torch.cuda.memory_stats is
    # CUDA-only); RSS is the measure. Report whatever the CPU profiler-less API offers, if anything.
    if hasattr(torch, "cpu") and hasattr(torch.cpu, "memory_stats"):
        try:
            allocator = torch.cpu.memory_stats()
        except Exception:  # noqa: BLE001
            allocator = None

    return {
        "workload": "resnet50",
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
        "config": {
            "preset": args.preset,
            "image_size": image_size,
            "base_width": base_width,
            "num_classes": num_classes,
            "batch_size": batch,
            "parameters": n_params,
            "memory_format": "channels_last" if args.channels_last else "contiguous (NCHW)",
            "compile": args.compile,
            "optimizer": "SGD momentum 0.9, weight decay 1e-4, nesterov off",
            "learning_rate": f"0.1 x batch/256 = {base_lr}, 5-iteration linear warm-up, constant",
            "warmup_iters": args.warmup,
            "timed_iters": args.iters,
            "seed": args.seed,
        },
        "warmup_iteration_s": warm_times,
        "iteration_s": times,
        # Process CPU seconds per iteration: cpu/wall well below the thread count means the
        # cores were shared with other work during the run (the wall times are then pessimistic).
        "iteration_cpu_s": cpu_times,
        "losses": losses,
        "samples_per_s_median": statistics.median(per_sample),
        "samples_per_s_p10": percentile(per_sample, 10),
        "samples_per_s_p90": percentile(per_sample, 90),
        "samples_per_s_best": batch / min(times),
        "iteration_s_median": statistics.median(times),
        "rss_before_import_bytes": RSS_BEFORE_IMPORT,
        "rss_before_model_bytes": rss_before_model,
        "rss_after_warmup_bytes": rss_after_warmup,
        "rss_after_timed_bytes": rss_after_timed,
        "rss_growth_bytes": rss_after_warmup - rss_before_model,
        "peak_rss_bytes": peak_rss,
        "cpu_allocator_stats": allocator,
        "loadavg_1_5_15_at_start": load_at_start,
        "loadavg_1_5_15_at_end": list(os.getloadavg()),  # other processes competing for the cores
        "host": platform.node(),
        "cpu": _cpu_model(),
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def _cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def main():
    if ARGS.check_params:
        check_params()
        return
    r = run(ARGS)
    if ARGS.json is not None:
        text = json.dumps(r, indent=2)
        if ARGS.json == "-":
            print(text)
        else:
            with open(ARGS.json, "w") as f:
                f.write(text + "\n")
    if ARGS.json != "-":
        mib = 1024.0 * 1024.0
        c = r["config"]
        print(f"torch {r['torch_version']} ({r['python']}), mkldnn available={r['mkldnn_available']} "
              f"enabled={r['mkldnn_enabled']}, threads={r['threads']}")
        print(f"resnet50 {c['preset']} {c['image_size']}x{c['image_size']} batch {c['batch_size']} "
              f"{c['memory_format']}{' compiled' if c['compile'] else ''}: "
              f"{r['samples_per_s_median']:.2f} samples/s median (p10 {r['samples_per_s_p10']:.2f}, "
              f"p90 {r['samples_per_s_p90']:.2f}, best {r['samples_per_s_best']:.2f}) over {c['timed_iters']} iterations; "
              f"cpu/wall {sum(r['iteration_cpu_s']) / sum(r['iteration_s']):.2f}")
        print(f"peak RSS {r['peak_rss_bytes'] / mib:.0f} MiB, RSS growth model->after warm-up "
              f"{r['rss_growth_bytes'] / mib:.0f} MiB")


if __name__ == "__main__":
    main()
