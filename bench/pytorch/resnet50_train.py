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
            the timed region (trainscope times its synthetic data as a separate 'data' phase);
            with --device cuda generated on the CPU as here, then moved to the GPU, untimed
  cuda      --device cuda: model and data on the GPU, TF32 for matmuls and cuDNN convolutions
            (--no-tf32 turns it off), cudnn.benchmark, torch.cuda.synchronize() at the end of every
            iteration; the JSON adds the GPU, CUDA and cuDNN versions, the allocator's peaks and
            the MFU (common.add_device_fields; docs/pytorch-comparison.md, "On the GPU")

No torchvision dependency. Usage:
  python3 bench/pytorch/resnet50_train.py --preset small --threads 2 --iters 20 --warmup 3 --json
  python3 bench/pytorch/resnet50_train.py --preset full --device cuda --batch 128 --iters 30 --json
  python3 bench/pytorch/resnet50_train.py --check-params
"""
import os

import common

PRESETS = {
    # name: (image_size, base_width, num_classes, default_batch)
    "tiny": (32, 16, 10, 4),
    "small": (64, 64, 1000, 16),
    "full": (224, 64, 1000, 32),
}
FULL_PARAMS = 25_557_032

# Parses the command line and sets the thread environment before torch is loaded.
ARGS, RSS_BEFORE_IMPORT = common.prepare(
    __doc__, PRESETS,
    "assert the full preset has 25,557,032 parameters (and print each preset's count), then exit")

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


def run(args):
    image_size, base_width, num_classes, default_batch = PRESETS[args.preset]
    batch = args.batch if args.batch > 0 else default_batch
    memory_format = common.configure_torch(args)
    device = common.device_of(args)

    load_at_start = list(os.getloadavg())
    rss_before_model = common.rss_bytes()
    model = build_model(args.preset).to(device=device, memory_format=memory_format)
    model.train()
    n_params = count_params(model)
    base_lr = 0.1 * batch / 256.0
    opt = torch.optim.SGD(model.parameters(), lr=base_lr, momentum=0.9, weight_decay=1e-4, nesterov=False)
    # trainscope: 5-step linear warm-up, then constant (lr of step i = base_lr * min(1, (i+1)/5)).
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda i: min(1.0, (i + 1) / 5.0))
    step_model = common.distribute(model, args)  # --ddp: DistributedDataParallel (gloo)
    step_model = torch.compile(step_model) if args.compile else step_model

    # Synthetic data: generated once on the CPU, outside the timed region (then moved to the GPU).
    x = torch.randn(batch, 3, image_size, image_size).to(device).contiguous(memory_format=memory_format)
    y = torch.randint(0, num_classes, (batch,)).to(device)

    common.profile_layers(model)

    def step():
        with common.phase("forward"):
            out = step_model(x)
            loss = F.cross_entropy(out, y)
        common.backward_and_step(loss, opt, sched)
        return loss.item()  # a sync point, like trainscope's loss.item() per iteration

    timing = common.time_iterations(step, args.warmup, args.iters, sync=common.synchronize(args),
                                    after_warmup=common.device_memory_mark(args))
    memory = common.device_memory(args, timing)  # before anything else runs on the device
    flops = None
    if common.mfu_wanted(args):
        # The model's FLOPs on the timed batch, once, after training (the peaks are read).
        flops = common.count_model_flops([lambda: F.cross_entropy(step_model(x), y)])
        opt.zero_grad(set_to_none=True)
    config = {
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
    }
    r = common.make_result("resnet50", config, timing, batch, RSS_BEFORE_IMPORT, rss_before_model, load_at_start)
    return common.add_device_fields(r, args, memory, flops, flop_units=batch, unit="image", rate_key="samples_per_s")


def main():
    if ARGS.check_params:
        check_params()
        return
    r = run(ARGS)
    if not common.add_ddp_fields(r, ARGS):
        return  # --ddp: rank 0 reports the job
    c = r["config"]
    common.emit(r, ARGS.json, f"resnet50 {c['preset']} {c['image_size']}x{c['image_size']} batch {c['batch_size']}")


if __name__ == "__main__":
    main()
