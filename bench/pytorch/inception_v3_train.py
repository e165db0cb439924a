#!/usr/bin/env python3
"""PyTorch reference for trainscope's `inception_v3` workload (Inception-v3), CPU training throughput.

Mirrors workloads/inception_v3/inception_v3.{h,cpp} and workloads/image_classifier.cpp:
  model     Inception-v3 in plain torch.nn with torchvision's Inception3 layout and module names
            (Conv2d_1a_3x3 .. Conv2d_4a_3x3, maxpool1/2, Mixed_5b-5d A, Mixed_6a B, Mixed_6b-6e C,
            AuxLogits, Mixed_7a D, Mixed_7b-7c E, avgpool, fc). Every conv is a BasicConv2d: conv
            without bias, BatchNorm eps 0.001 (momentum 0.1), ReLU. Pool branches average-pool 3x3/1
            pad 1 counting the padding (F.avg_pool2d's default, as torchvision).
            Every channel count is torchvision's times the preset's width multiplier, rounded half
            away from zero, at least 1 (trainscope's inception_channels()).
  presets   tiny  75x75,   widths x1/8, no aux head, 10 classes,   batch 8   (346,830 parameters)
            small 299x299, widths x1/2, aux head,    1000 classes, batch 8   (7,505,088)
            full  299x299, published,   aux head,    1000 classes, batch 32  (27,161,264)
  dropout   none: torchvision's Dropout(p=0.5) before fc is omitted because trainscope omits it
            (its engine has no dropout op yet). It holds no parameters; its small cost is missing
            from both sides alike. transform_input is off on both sides.
  init      the engine's: convs Kaiming normal fan_out (ReLU gain), Linear weight and bias uniform
            +-1/sqrt(fan_in), BN weight 1 / bias 0 (not torchvision's truncated normal)
  step      forward (train mode: logits and aux logits), CE(logits) + 0.4 x CE(aux logits)
            (CE(logits) alone without the aux head), backward, SGD(momentum 0.9, weight decay
            1e-4, lr 0.1*batch/256 with a 5-step linear warm-up), zero_grad(set_to_none=True)
  data      one batch of N(0,1) fp32 images and uniform integer labels, generated once before
            the timed region (trainscope times its synthetic data as a separate 'data' phase)

No torchvision dependency. Usage:
  python3 bench/pytorch/inception_v3_train.py --preset small --threads 2 --iters 20 --warmup 3 --json
  python3 bench/pytorch/inception_v3_train.py --check-params
"""
import math
import os

import common

PRESETS = {
    # name: (image_size, width_multiplier, aux_logits, num_classes, default_batch)
    "tiny": (75, 0.125, False, 10, 8),
    "small": (299, 0.5, True, 1000, 8),
    "full": (299, 1.0, True, 1000, 32),
}
AUX_WEIGHT = 0.4
# `trainscope list` (build/default/cli/trainscope list) for each preset.
TRAINSCOPE_PARAMS = {"tiny": 346_830, "small": 7_505_088, "full": 27_161_264}
FULL_PARAMS = 27_161_264
FULL_PARAMS_NO_AUX = 23_834_568  # torchvision's inception_v3(aux_logits=False); docs/workloads.md

ARGS, RSS_BEFORE_IMPORT = common.prepare(
    __doc__, PRESETS,
    "assert the full preset has 27,161,264 parameters and tiny/small have trainscope's counts "
    "(and print each preset's count), then exit")

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


def channels(c, width):
    """trainscope's inception_channels(): llround(c * width), at least 1."""
    return max(1, int(math.floor(c * width + 0.5)))


class BasicConv2d(nn.Module):
    def __init__(self, cin, cout, kernel_size, stride=1, padding=0):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, kernel_size=kernel_size, stride=stride, padding=padding, bias=False)
        self.bn = nn.BatchNorm2d(cout, eps=0.001)
        self.out_channels = cout

    def forward(self, x):
        return F.relu(self.bn(self.conv(x)), inplace=True)


def avg_pool_3x3_s1(x):
    return F.avg_pool2d(x, kernel_size=3, stride=1, padding=1)  # count_include_pad=True (default)


class InceptionA(nn.Module):  # Mixed_5b..5d: 35x35 grid
    def __init__(self, cin, pool_features, w):
        super().__init__()
        self.branch1x1 = BasicConv2d(cin, channels(64, w), 1)
        self.branch5x5_1 = BasicConv2d(cin, channels(48, w), 1)
        self.branch5x5_2 = BasicConv2d(self.branch5x5_1.out_channels, channels(64, w), 5, padding=2)
        self.branch3x3dbl_1 = BasicConv2d(cin, channels(64, w), 1)
        self.branch3x3dbl_2 = BasicConv2d(self.branch3x3dbl_1.out_channels, channels(96, w), 3, padding=1)
        self.branch3x3dbl_3 = BasicConv2d(self.branch3x3dbl_2.out_channels, channels(96, w), 3, padding=1)
        self.branch_pool = BasicConv2d(cin, channels(pool_features, w), 1)
        self.out_channels = (self.branch1x1.out_channels + self.branch5x5_2.out_channels +
                             self.branch3x3dbl_3.out_channels + self.branch_pool.out_channels)

    def forward(self, x):
        a = self.branch1x1(x)
        b = self.branch5x5_2(self.branch5x5_1(x))
        c = self.branch3x3dbl_3(self.branch3x3dbl_2(self.branch3x3dbl_1(x)))
        d = self.branch_pool(avg_pool_3x3_s1(x))
        return torch.cat([a, b, c, d], 1)


class InceptionB(nn.Module):  # Mixed_6a: 35x35 -> 17x17
    def __init__(self, cin, w):
        super().__init__()
        self.branch3x3 = BasicConv2d(cin, channels(384, w), 3, stride=2)
        self.branch3x3dbl_1 = BasicConv2d(cin, channels(64, w), 1)
        self.branch3x3dbl_2 = BasicConv2d(self.branch3x3dbl_1.out_channels, channels(96, w), 3, padding=1)
        self.branch3x3dbl_3 = BasicConv2d(self.branch3x3dbl_2.out_channels, channels(96, w), 3, stride=2)
        self.out_channels = self.branch3x3.out_channels + self.branch3x3dbl_3.out_channels + cin

    def forward(self, x):
        a = self.branch3x3(x)
        b = self.branch3x3dbl_3(self.branch3x3dbl_2(self.branch3x3dbl_1(x)))
        c = F.max_pool2d(x, kernel_size=3, stride=2)
        return torch.cat([a, b, c], 1)


class InceptionC(nn.Module):  # Mixed_6b..6e: 17x17 grid, 7x7 factorised into 1x7 and 7x1
    def __init__(self, cin, channels_7x7, w):
        super().__init__()
        c7 = channels(channels_7x7, w)
        self.branch1x1 = BasicConv2d(cin, channels(192, w), 1)
        self.branch7x7_1 = BasicConv2d(cin, c7, 1)
        self.branch7x7_2 = BasicConv2d(c7, c7, (1, 7), padding=(0, 3))
        self.branch7x7_3 = BasicConv2d(c7, channels(192, w), (7, 1), padding=(3, 0))
        self.branch7x7dbl_1 = BasicConv2d(cin, c7, 1)
        self.branch7x7dbl_2 = BasicConv2d(c7, c7, (7, 1), padding=(3, 0))
        self.branch7x7dbl_3 = BasicConv2d(c7, c7, (1, 7), padding=(0, 3))
        self.branch7x7dbl_4 = BasicConv2d(c7, c7, (7, 1), padding=(3, 0))
        self.branch7x7dbl_5 = BasicConv2d(c7, channels(192, w), (1, 7), padding=(0, 3))
        self.branch_pool = BasicConv2d(cin, channels(192, w), 1)
        self.out_channels = (self.branch1x1.out_channels + self.branch7x7_3.out_channels +
                             self.branch7x7dbl_5.out_channels + self.branch_pool.out_channels)

    def forward(self, x):
        a = self.branch1x1(x)
        b = self.branch7x7_3(self.branch7x7_2(self.branch7x7_1(x)))
        c = self.branch7x7dbl_2(self.branch7x7dbl_1(x))
        c = self.branch7x7dbl_5(self.branch7x7dbl_4(self.branch7x7dbl_3(c)))
        d = self.branch_pool(avg_pool_3x3_s1(x))
        return torch.cat([a, b, c, d], 1)


class InceptionD(nn.Module):  # Mixed_7a: 17x17 -> 8x8
    def __init__(self, cin, w):
        super().__init__()
        self.branch3x3_1 = BasicConv2d(cin, channels(192, w), 1)
        self.branch3x3_2 = BasicConv2d(self.branch3x3_1.out_channels, channels(320, w), 3, stride=2)
        self.branch7x7x3_1 = BasicConv2d(cin, channels(192, w), 1)
        self.branch7x7x3_2 = BasicConv2d(self.branch7x7x3_1.out_channels, channels(192, w), (1, 7), padding=(0, 3))
        self.branch7x7x3_3 = BasicConv2d(self.branch7x7x3_2.out_channels, channels(192, w), (7, 1), padding=(3, 0))
        self.branch7x7x3_4 = BasicConv2d(self.branch7x7x3_3.out_channels, channels(192, w), 3, stride=2)
        self.out_channels = self.branch3x3_2.out_channels + self.branch7x7x3_4.out_channels + cin

    def forward(self, x):
        a = self.branch3x3_2(self.branch3x3_1(x))
        b = self.branch7x7x3_4(self.branch7x7x3_3(self.branch7x7x3_2(self.branch7x7x3_1(x))))
        c = F.max_pool2d(x, kernel_size=3, stride=2)
        return torch.cat([a, b, c], 1)


class InceptionE(nn.Module):  # Mixed_7b..7c: 8x8 grid, expanded filter banks
    def __init__(self, cin, w):
        super().__init__()
        self.branch1x1 = BasicConv2d(cin, channels(320, w), 1)
        self.branch3x3_1 = BasicConv2d(cin, channels(384, w), 1)
        c3 = self.branch3x3_1.out_channels
        self.branch3x3_2a = BasicConv2d(c3, channels(384, w), (1, 3), padding=(0, 1))
        self.branch3x3_2b = BasicConv2d(c3, channels(384, w), (3, 1), padding=(1, 0))
        self.branch3x3dbl_1 = BasicConv2d(cin, channels(448, w), 1)
        self.branch3x3dbl_2 = BasicConv2d(self.branch3x3dbl_1.out_channels, channels(384, w), 3, padding=1)
        cd = self.branch3x3dbl_2.out_channels
        self.branch3x3dbl_3a = BasicConv2d(cd, channels(384, w), (1, 3), padding=(0, 1))
        self.branch3x3dbl_3b = BasicConv2d(cd, channels(384, w), (3, 1), padding=(1, 0))
        self.branch_pool = BasicConv2d(cin, channels(192, w), 1)
        self.out_channels = (self.branch1x1.out_channels + self.branch3x3_2a.out_channels +
                             self.branch3x3_2b.out_channels + self.branch3x3dbl_3a.out_channels +
                             self.branch3x3dbl_3b.out_channels + self.branch_pool.out_channels)

    def forward(self, x):
        a = self.branch1x1(x)
        b1 = self.branch3x3_1(x)
        b = torch.cat([self.branch3x3_2a(b1), self.branch3x3_2b(b1)], 1)
        c1 = self.branch3x3dbl_2(self.branch3x3dbl_1(x))
        c = torch.cat([self.branch3x3dbl_3a(c1), self.branch3x3dbl_3b(c1)], 1)
        d = self.branch_pool(avg_pool_3x3_s1(x))
        return torch.cat([a, b, c, d], 1)


class InceptionAux(nn.Module):  # on Mixed_6e: avg pool 5x5/3, conv0 1x1, conv1 5x5, global avg pool, fc
    def __init__(self, cin, num_classes, w):
        super().__init__()
        self.conv0 = BasicConv2d(cin, channels(128, w), 1)
        self.conv1 = BasicConv2d(self.conv0.out_channels, channels(768, w), 5)
        self.fc = nn.Linear(self.conv1.out_channels, num_classes)

    def forward(self, x):
        x = F.avg_pool2d(x, kernel_size=5, stride=3)
        x = self.conv1(self.conv0(x))
        x = F.adaptive_avg_pool2d(x, (1, 1))
        return self.fc(torch.flatten(x, 1))


class InceptionV3(nn.Module):
    def __init__(self, num_classes=1000, width=1.0, aux_logits=True, in_channels=3):
        super().__init__()
        w = width
        self.Conv2d_1a_3x3 = BasicConv2d(in_channels, channels(32, w), 3, stride=2)
        self.Conv2d_2a_3x3 = BasicConv2d(self.Conv2d_1a_3x3.out_channels, channels(32, w), 3)
        self.Conv2d_2b_3x3 = BasicConv2d(self.Conv2d_2a_3x3.out_channels, channels(64, w), 3, padding=1)
        self.maxpool1 = nn.MaxPool2d(kernel_size=3, stride=2)
        self.Conv2d_3b_1x1 = BasicConv2d(self.Conv2d_2b_3x3.out_channels, channels(80, w), 1)
        self.Conv2d_4a_3x3 = BasicConv2d(self.Conv2d_3b_1x1.out_channels, channels(192, w), 3)
        self.maxpool2 = nn.MaxPool2d(kernel_size=3, stride=2)
        self.Mixed_5b = InceptionA(self.Conv2d_4a_3x3.out_channels, 32, w)
        self.Mixed_5c = InceptionA(self.Mixed_5b.out_channels, 64, w)
        self.Mixed_5d = InceptionA(self.Mixed_5c.out_channels, 64, w)
        self.Mixed_6a = InceptionB(self.Mixed_5d.out_channels, w)
        self.Mixed_6b = InceptionC(self.Mixed_6a.out_channels, 128, w)
        self.Mixed_6c = InceptionC(self.Mixed_6b.out_channels, 160, w)
        self.Mixed_6d = InceptionC(self.Mixed_6c.out_channels, 160, w)
        self.Mixed_6e = InceptionC(self.Mixed_6d.out_channels, 192, w)
        # Registered where torchvision (and trainscope) registers it: between Mixed_6e and Mixed_7a.
        self.AuxLogits = InceptionAux(self.Mixed_6e.out_channels, num_classes, w) if aux_logits else None
        self.Mixed_7a = InceptionD(self.Mixed_6e.out_channels, w)
        self.Mixed_7b = InceptionE(self.Mixed_7a.out_channels, w)
        self.Mixed_7c = InceptionE(self.Mixed_7b.out_channels, w)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        # torchvision has self.dropout = nn.Dropout(0.5) here; trainscope omits it, so do we.
        self.fc = nn.Linear(self.Mixed_7c.out_channels, num_classes)
        init_like_engine(self)

    def forward(self, x):
        x = self.Conv2d_2b_3x3(self.Conv2d_2a_3x3(self.Conv2d_1a_3x3(x)))
        x = self.maxpool1(x)
        x = self.Conv2d_4a_3x3(self.Conv2d_3b_1x1(x))
        x = self.maxpool2(x)
        x = self.Mixed_5d(self.Mixed_5c(self.Mixed_5b(x)))
        x = self.Mixed_6a(x)
        x = self.Mixed_6e(self.Mixed_6d(self.Mixed_6c(self.Mixed_6b(x))))
        aux = self.AuxLogits(x) if (self.AuxLogits is not None and self.training) else None
        x = self.Mixed_7c(self.Mixed_7b(self.Mixed_7a(x)))
        x = torch.flatten(self.avgpool(x), 1)
        return self.fc(x), aux


def init_like_engine(model):
    """trainscope's engine initialisation (engine/nn/layers.cpp)."""
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")  # N(0, 2/fan_out)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Linear):
            bound = 1.0 / math.sqrt(m.in_features)
            nn.init.uniform_(m.weight, -bound, bound)
            if m.bias is not None:
                nn.init.uniform_(m.bias, -bound, bound)
        elif isinstance(m, nn.BatchNorm2d):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)


def build_model(preset, aux_logits=None):
    _, width, aux, num_classes, _ = PRESETS[preset]
    return InceptionV3(num_classes=num_classes, width=width, aux_logits=aux if aux_logits is None else aux_logits)


def count_params(model):
    return sum(p.numel() for p in model.parameters())


def check_params():
    counts = {name: count_params(build_model(name)) for name in PRESETS}
    for name, n in counts.items():
        print(f"{name}: {n:,} parameters (trainscope: {TRAINSCOPE_PARAMS[name]:,})")
    no_aux = count_params(build_model("full", aux_logits=False))
    print(f"full without the aux head: {no_aux:,} parameters")
    assert counts["full"] == FULL_PARAMS, f"full preset has {counts['full']:,} parameters, expected {FULL_PARAMS:,}"
    assert no_aux == FULL_PARAMS_NO_AUX, f"full without aux has {no_aux:,}, expected {FULL_PARAMS_NO_AUX:,}"
    for name in ("tiny", "small"):
        assert counts[name] == TRAINSCOPE_PARAMS[name], \
            f"{name} has {counts[name]:,} parameters, trainscope has {TRAINSCOPE_PARAMS[name]:,}"
    print("OK: full = 27,161,264 parameters (23,834,568 without the aux head); tiny and small match trainscope")


def run(args):
    image_size, width, aux_logits, num_classes, default_batch = PRESETS[args.preset]
    batch = args.batch if args.batch > 0 else default_batch
    memory_format = common.configure_torch(args)

    load_at_start = list(os.getloadavg())
    rss_before_model = common.rss_bytes()
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

    common.profile_layers(model)

    def step():
        with common.phase("forward"):
            logits, aux = step_model(x)
            loss = F.cross_entropy(logits, y)
            if aux is not None:
                loss = loss + AUX_WEIGHT * F.cross_entropy(aux, y)
        common.backward_and_step(loss, opt, sched)
        return loss.item()  # a sync point, like trainscope's loss.item() per iteration

    timing = common.time_iterations(step, args.warmup, args.iters)
    config = {
        "preset": args.preset,
        "image_size": image_size,
        "width_multiplier": width,
        "aux_logits": aux_logits,
        "num_classes": num_classes,
        "batch_size": batch,
        "parameters": n_params,
        "memory_format": "channels_last" if args.channels_last else "contiguous (NCHW)",
        "compile": args.compile,
        "batch_norm": "eps 0.001, momentum 0.1; convolutions without bias",
        "dropout": "omitted (trainscope has no dropout op; torchvision: p 0.5 before fc)",
        "loss": f"CE(logits) + {AUX_WEIGHT} x CE(aux logits)" if aux_logits else "CE(logits)",
        "optimizer": "SGD momentum 0.9, weight decay 1e-4, nesterov off",
        "learning_rate": f"0.1 x batch/256 = {base_lr}, 5-iteration linear warm-up, constant",
        "warmup_iters": args.warmup,
        "timed_iters": args.iters,
        "seed": args.seed,
    }
    return common.make_result("inception_v3", config, timing, batch, RSS_BEFORE_IMPORT, rss_before_model,
                              load_at_start)


def main():
    if ARGS.check_params:
        check_params()
        return
    r = run(ARGS)
    c = r["config"]
    common.emit(r, ARGS.json, f"inception_v3 {c['preset']} {c['image_size']}x{c['image_size']} "
                              f"width x{c['width_multiplier']:g}{' aux' if c['aux_logits'] else ''} batch {c['batch_size']}")


if __name__ == "__main__":
    main()
