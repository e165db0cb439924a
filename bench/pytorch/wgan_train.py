#!/usr/bin/env python3
"""PyTorch reference for trainscope's `wgan` workload (WGAN-GP, ResNet generator and critic), CPU
training throughput.

Mirrors workloads/wgan/wgan.{h,cpp} (Gulrajani et al. 2017, the 64x64 ResNet models of gan_64x64.py):
  generator Linear(noise -> 4x4x(w0*DIM)), then one upsampling residual block per width step:
            shortcut = conv1x1 (bias) of nearest-2x(x); main = BN, ReLU, nearest 2x, conv3x3
            (no bias), BN, ReLU, conv3x3 (bias); then BN, ReLU, conv3x3 -> 3 (bias), tanh.
            BatchNorm eps 1e-5, momentum 0.1, batch statistics (train mode) throughout.
  critic    conv3x3 3 -> DIM (bias), one mean-pooling residual block per width step:
            shortcut = conv1x1 (bias) of avg_pool2d(x, 2); main = ReLU, conv3x3 (no bias), ReLU,
            conv3x3 (bias), avg_pool2d(2); then Linear(4x4x(w0*DIM) -> 1). No normalisation.
  presets   tiny  16x16, DIM 8,  widths 2,2,1,     noise 32,  Adam lr 2e-4, batch 16
            small 64x64, DIM 16, widths 8,8,4,2,1, noise 128, Adam lr 1e-4, batch 8
            full  64x64, DIM 64, widths 8,8,4,2,1, noise 128, Adam lr 1e-4, batch 64
            (full: generator 8,540,483 and critic 7,488,001 parameters)
  init      the engine's: convs Kaiming normal fan_out (ReLU gain) with zero bias, Linear weight
            and bias uniform +-1/sqrt(fan_in), BN weight 1 / bias 0
  iteration 5 critic steps, then 1 generator step (Algorithm 1); samples per iteration = batch
  (generator samples, as trainscope counts them; the critic sees 5 x batch real images).
            critic step: fake = G(z) under no_grad; loss = mean D(fake) - mean D(real) + lambda GP,
            GP = mean_n (||grad_x D(x_hat)_n||_2 - 1)^2 at x_hat = e x + (1 - e) fake, e ~ U[0,1]
            per sample, lambda 10; the gradient comes from torch.autograd.grad(create_graph=True),
            so loss.backward() differentiates through the critic's backward (second order);
            Adam step, zero_grad(set_to_none=True); loss.item() (trainscope reads every critic loss).
            generator step: the critic's parameters requires_grad_(False) (as trainscope freezes
            them), loss = -mean D(G(z)), backward, Adam step, zero_grad, unfreeze.
            Adam per network: betas 0.0/0.9, eps 1e-8, no weight decay, constant lr.
  data      real images: a torch re-implementation of trainscope's synthetic scenes
            (workloads/data/scene_images.cpp: a vertical sky gradient, one soft-edged disc of a
            palette colour, +-0.02 Gaussian noise, clamped to [-1, 1]); the same recipe and value
            range, but a different random stream. 5 batches (one per critic step) are generated once
            before the timed region and reused every iteration. The noise z and the interpolation
            weights e are sampled inside the timed region, at each step (trainscope samples them,
            and a fresh real batch, in its timed 'data' phase).

Also asserted by --check-params: the gradient penalty is second order (critic weight gradients
change with lambda, and match finite differences of the penalty in float64).

No torchvision dependency. Usage:
  python3 bench/pytorch/wgan_train.py --preset small --threads 2 --iters 20 --warmup 3 --json
  python3 bench/pytorch/wgan_train.py --check-params
"""
import math
import os

import common

PRESETS = {
    # name: dim, noise, widths (generator input -> output; the critic mirrors them), lr, default batch
    "tiny": {"dim": 8, "noise": 32, "widths": (2, 2, 1), "lr": 2e-4, "batch": 16},
    "small": {"dim": 16, "noise": 128, "widths": (8, 8, 4, 2, 1), "lr": 1e-4, "batch": 8},
    "full": {"dim": 64, "noise": 128, "widths": (8, 8, 4, 2, 1), "lr": 1e-4, "batch": 64},
}
CRITIC_STEPS = 5
LAMBDA = 10.0
BETAS = (0.0, 0.9)
ADAM_EPS = 1e-8
FULL_GENERATOR_PARAMS = 8_540_483
FULL_CRITIC_PARAMS = 7_488_001
# `trainscope list` (build/default/cli/trainscope list): generator + critic for each preset.
TRAINSCOPE_PARAMS = {"tiny": 22_828, "small": 1_203_924, "full": 16_028_484}

ARGS, RSS_BEFORE_IMPORT = common.prepare(
    __doc__, PRESETS,
    "assert the full preset has a generator of 8,540,483 and a critic of 7,488,001 parameters, tiny and "
    "small trainscope's counts, and that the gradient penalty is second order; then exit")

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


def conv3x3(cin, cout, bias):
    return nn.Conv2d(cin, cout, kernel_size=3, stride=1, padding=1, bias=bias)


def conv1x1(cin, cout):
    return nn.Conv2d(cin, cout, kernel_size=1, stride=1, padding=0, bias=True)


def up2(x):
    # The paper's UpsampleConv (four copies concatenated, then depth-to-space) is exactly this.
    return F.interpolate(x, scale_factor=2, mode="nearest")


def mean_pool(x):
    return F.avg_pool2d(x, kernel_size=2, stride=2)


class GeneratorBlock(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        # Registration order as trainscope: shortcut, bn1, conv1, bn2, conv2.
        self.shortcut = conv1x1(cin, cout)
        self.bn1 = nn.BatchNorm2d(cin)
        self.conv1 = conv3x3(cin, cout, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.conv2 = conv3x3(cout, cout, bias=True)

    def forward(self, x):
        shortcut = self.shortcut(up2(x))
        h = self.conv1(up2(F.relu(self.bn1(x))))
        h = self.conv2(F.relu(self.bn2(h)))
        return shortcut + h


class CriticBlock(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.shortcut = conv1x1(cin, cout)
        self.conv1 = conv3x3(cin, cin, bias=False)
        self.conv2 = conv3x3(cin, cout, bias=True)

    def forward(self, x):
        shortcut = self.shortcut(mean_pool(x))
        h = self.conv1(F.relu(x))
        h = mean_pool(self.conv2(F.relu(h)))
        return shortcut + h


class Generator(nn.Module):
    def __init__(self, dim, noise, widths):
        super().__init__()
        self.first = widths[0] * dim
        self.channels_last = False  # set by run(): the reshaped linear output goes to channels_last
        self.input = nn.Linear(noise, 4 * 4 * self.first)
        for b in range(len(widths) - 1):
            setattr(self, f"res{b + 1}", GeneratorBlock(widths[b] * dim, widths[b + 1] * dim))
        self.blocks = len(widths) - 1
        last = widths[-1] * dim
        self.output_bn = nn.BatchNorm2d(last)
        self.output = conv3x3(last, 3, bias=True)

    def forward(self, z):
        h = self.input(z).reshape(z.shape[0], self.first, 4, 4)
        if self.channels_last:
            h = h.contiguous(memory_format=torch.channels_last)
        for b in range(self.blocks):
            h = getattr(self, f"res{b + 1}")(h)
        return torch.tanh(self.output(F.relu(self.output_bn(h))))


class Critic(nn.Module):
    def __init__(self, dim, widths):
        super().__init__()
        nb = len(widths) - 1

        def width(level):  # dim at the image, widths[0] x dim at 4x4
            return widths[nb - level] * dim

        self.input = conv3x3(3, width(0), bias=True)
        for b in range(nb):
            setattr(self, f"res{b + 1}", CriticBlock(width(b), width(b + 1)))
        self.blocks = nb
        self.output = nn.Linear(4 * 4 * width(nb), 1)

    def forward(self, x):
        h = self.input(x)
        for b in range(self.blocks):
            h = getattr(self, f"res{b + 1}")(h)
        return self.output(torch.flatten(h, 1))


class Wgan(nn.Module):
    """Both networks under one root, as trainscope (generator.res1.conv1, critic.output)."""

    def __init__(self, dim, noise, widths):
        super().__init__()
        self.generator = Generator(dim, noise, widths)
        self.critic = Critic(dim, widths)
        init_like_engine(self)


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


def build_model(preset):
    p = PRESETS[preset]
    return Wgan(p["dim"], p["noise"], p["widths"])


def image_size(preset):
    return 4 << (len(PRESETS[preset]["widths"]) - 1)


def count_params(module):
    return sum(p.numel() for p in module.parameters())


def closed_form_counts(preset):
    """Generator and critic parameter counts from the per-block formulas in docs/workloads.md,
    independent of the module code above."""
    p = PRESETS[preset]
    ch = [w * p["dim"] for w in p["widths"]]
    g = p["noise"] * 16 * ch[0] + 16 * ch[0]
    for cin, cout in zip(ch, ch[1:]):
        g += (cin * cout + cout) + 9 * cin * cout + (9 * cout * cout + cout) + 2 * cin + 2 * cout
    g += 2 * ch[-1] + 9 * ch[-1] * 3 + 3
    rch = ch[::-1]  # the critic: dim at the image .. widths[0] x dim at 4x4
    c = 9 * 3 * rch[0] + rch[0]
    for cin, cout in zip(rch, rch[1:]):
        c += (cin * cout + cout) + 9 * cin * cin + (9 * cin * cout + cout)
    c += 16 * rch[-1] + 1
    return g, c


def scene_images(n, size, gen):
    """trainscope's synthetic scenes (scene_images.cpp), vectorised: a vertical colour gradient,
    one disc of a palette colour (centre U[0.25, 0.75] x size, radius U[0.12, 0.25] x size, one
    pixel of anti-aliasing), values 2c - 1 + 0.02 N(0, 1) clamped to [-1, 1]. Same recipe and
    range, not the same random stream."""
    sky_top = torch.tensor([0.15, 0.25, 0.75])
    sky_bottom = torch.tensor([0.9, 0.8, 0.55])
    palette = torch.tensor([[0.9, 0.15, 0.1], [0.1, 0.75, 0.2], [0.95, 0.9, 0.1]])
    s = float(size)
    cx = (0.25 + 0.5 * torch.rand(n, generator=gen, dtype=torch.float64)) * s
    cy = (0.25 + 0.5 * torch.rand(n, generator=gen, dtype=torch.float64)) * s
    radius = (0.12 + 0.13 * torch.rand(n, generator=gen, dtype=torch.float64)) * s
    disc = palette[torch.randint(0, 3, (n,), generator=gen)]  # [n, 3]
    pos = torch.arange(size, dtype=torch.float64) + 0.5
    t = (pos / s).float()  # [size], per row
    sky = sky_top[:, None] + t[None, :] * (sky_bottom - sky_top)[:, None]  # [3, size]
    sky = sky[None, :, :, None]  # [1, 3, size(y), 1]
    d = torch.hypot(pos[None, None, :] - cx[:, None, None], pos[None, :, None] - cy[:, None, None])  # [n, y, x]
    a = (radius[:, None, None] + 0.5 - d).clamp(0.0, 1.0).float()[:, None]  # [n, 1, y, x]
    c = sky + a * (disc[:, :, None, None] - sky)
    noise = torch.randn(c.shape, generator=gen, dtype=torch.float64)
    return (2.0 * c.double() - 1.0 + 0.02 * noise).clamp(-1.0, 1.0).float()


def gradient_penalty(critic, x_hat):
    """mean_n (||grad_x D(x_hat)_n||_2 - 1)^2, differentiable in the critic's weights."""
    d_hat = critic(x_hat)
    (gx,) = torch.autograd.grad(d_hat.sum(), x_hat, create_graph=True)
    return ((gx.reshape(gx.shape[0], -1).norm(2, dim=1) - 1.0) ** 2).mean()


def critic_loss(critic, real, fake, e, lam):
    """E[D(fake)] - E[D(real)] + lam GP; fake carries no graph (G ran under no_grad)."""
    d_real = critic(real)
    d_fake = critic(fake)
    with torch.no_grad():
        x_hat = fake + (real - fake) * e  # = e real + (1 - e) fake, as trainscope computes it
    x_hat.requires_grad_(True)
    return d_fake.mean() - d_real.mean() + lam * gradient_penalty(critic, x_hat)


def check_gradient_penalty():
    """The penalty must reach the critic's weights through the critic's backward: (1) the critic
    weight gradients differ between lambda 0 and 10; (2) d GP / d w from autograd matches central
    finite differences of GP in float64 for a few weights."""
    torch.manual_seed(3)
    gen = torch.Generator().manual_seed(3)
    model = build_model("tiny").double()
    g, c = model.generator, model.critic
    n, s = 4, image_size("tiny")
    real = scene_images(n, s, gen).double()
    with torch.no_grad():
        fake = g(torch.randn(n, PRESETS["tiny"]["noise"], generator=gen, dtype=torch.float64))
    e = torch.rand(n, 1, 1, 1, generator=gen, dtype=torch.float64)
    params = [(name, p) for name, p in c.named_parameters()]
    weights = [(name, p) for name, p in params if name.endswith("weight")]

    def grads(lam):
        return torch.autograd.grad(critic_loss(c, real, fake, e, lam), [p for _, p in params])

    g0, g10 = grads(0.0), grads(LAMBDA)
    differ = {name: (a - b).abs().max().item() for (name, _), a, b in zip(params, g0, g10)}
    unchanged = [name for name, _ in weights if differ[name] == 0.0]
    assert not unchanged, f"critic weights whose gradient ignores the penalty: {unchanged}"

    x_hat = (fake + (real - fake) * e).requires_grad_(True)
    gp = gradient_penalty(c, x_hat)
    analytic = torch.autograd.grad(gp, [p for _, p in weights])
    h, worst = 1e-6, 0.0
    for (name, p), ga in zip(weights, analytic):
        for idx in (0, p.numel() // 2, p.numel() - 1):
            flat = p.data.view(-1)
            old = flat[idx].item()
            vals = []
            for delta in (h, -h):
                flat[idx] = old + delta
                xh = (fake + (real - fake) * e).requires_grad_(True)
                vals.append(gradient_penalty(c, xh).item())
            flat[idx] = old
            fd = (vals[0] - vals[1]) / (2 * h)
            an = ga.reshape(-1)[idx].item()
            err = abs(fd - an) / max(1e-8, abs(fd), abs(an))
            worst = max(worst, err)
            assert err < 1e-4, f"{name}[{idx}]: autograd {an:.6e} vs finite difference {fd:.6e}"
    print(f"OK: gradient penalty is second order: all {len(weights)} critic weight gradients change between "
          f"lambda 0 and {LAMBDA:g} (smallest change {min(differ[nm] for nm, _ in weights):.3e}); "
          f"d GP/d w matches finite differences (worst relative error {worst:.1e}, {3 * len(weights)} entries)")


def check_params():
    for name in PRESETS:
        model = build_model(name)
        gn, cn = count_params(model.generator), count_params(model.critic)
        cg, cc = closed_form_counts(name)
        print(f"{name}: generator {gn:,} + critic {cn:,} = {gn + cn:,} parameters "
              f"(trainscope: {TRAINSCOPE_PARAMS[name]:,})")
        assert (gn, cn) == (cg, cc), f"{name}: model ({gn:,}, {cn:,}) differs from the closed form ({cg:,}, {cc:,})"
        assert gn + cn == TRAINSCOPE_PARAMS[name], \
            f"{name}: {gn + cn:,} parameters, trainscope has {TRAINSCOPE_PARAMS[name]:,}"
        if name == "full":
            assert gn == FULL_GENERATOR_PARAMS, f"full generator has {gn:,}, expected {FULL_GENERATOR_PARAMS:,}"
            assert cn == FULL_CRITIC_PARAMS, f"full critic has {cn:,}, expected {FULL_CRITIC_PARAMS:,}"
    print("OK: full = generator 8,540,483 + critic 7,488,001 parameters; tiny and small match trainscope")
    check_gradient_penalty()


def run(args):
    if args.compile:
        raise SystemExit("wgan_train.py: --compile is not supported (torch.compile does not support the "
                         "double backward of the gradient penalty)")
    p = PRESETS[args.preset]
    size = image_size(args.preset)
    batch = args.batch if args.batch > 0 else p["batch"]
    memory_format = common.configure_torch(args)

    load_at_start = list(os.getloadavg())
    rss_before_model = common.rss_bytes()
    model = build_model(args.preset).to(memory_format=memory_format)
    model.train()
    g, c = model.generator, model.critic
    g.channels_last = args.channels_last
    n_g, n_c = count_params(g), count_params(c)
    g_opt = torch.optim.Adam(g.parameters(), lr=p["lr"], betas=BETAS, eps=ADAM_EPS)
    c_opt = torch.optim.Adam(c.parameters(), lr=p["lr"], betas=BETAS, eps=ADAM_EPS)
    critic_params = list(c.parameters())

    # Real images: one batch per critic step, generated once, outside the timed region.
    gen = torch.Generator().manual_seed(args.seed)
    reals = [scene_images(batch, size, gen).contiguous(memory_format=memory_format) for _ in range(CRITIC_STEPS)]

    def critic_step(real):
        z = torch.randn(batch, p["noise"])
        e = torch.rand(batch, 1, 1, 1)  # one interpolation weight per sample
        with common.phase("forward"):
            with torch.no_grad():  # the critic step does not train the generator
                fake = g(z)
            loss = critic_loss(c, real, fake, e, LAMBDA)
        with common.phase("backward"):
            loss.backward()
        with common.phase("optimizer"):
            c_opt.step()
            c_opt.zero_grad(set_to_none=True)
        return loss.item()  # trainscope reads every critic loss

    def generator_step():
        z = torch.randn(batch, p["noise"])
        for q in critic_params:  # gradients through the critic, not of it (trainscope's FrozenScope)
            q.requires_grad_(False)
        try:
            with common.phase("forward"):
                loss = -c(g(z)).mean()
            with common.phase("backward"):
                loss.backward()
            with common.phase("optimizer"):
                g_opt.step()
                g_opt.zero_grad(set_to_none=True)
        finally:
            for q in critic_params:
                q.requires_grad_(True)

    common.profile_layers(g)
    common.profile_layers(c)

    def step():
        critic_loss_value = 0.0
        for k in range(CRITIC_STEPS):
            critic_loss_value = critic_step(reals[k])
        generator_step()
        return critic_loss_value  # the last critic loss, as trainscope reports

    timing = common.time_iterations(step, args.warmup, args.iters)
    samples = batch   # generator samples: one batch per iteration
    config = {
        "preset": args.preset,
        "image_size": size,
        "dim": p["dim"],
        "noise": p["noise"],
        "generator_channels": [w * p["dim"] for w in p["widths"]],
        "critic_channels": [w * p["dim"] for w in reversed(p["widths"])],
        "batch_size": batch,
        "critic_steps": CRITIC_STEPS,
        "samples_per_iteration": samples,
        "lambda": LAMBDA,
        "parameters": n_g + n_c,
        "generator_parameters": n_g,
        "critic_parameters": n_c,
        "memory_format": "channels_last" if args.channels_last else "contiguous (NCHW)",
        "compile": args.compile,
        "optimizer": f"Adam lr {p['lr']:g}, betas {BETAS[0]:g}/{BETAS[1]:g}, eps {ADAM_EPS:g}, constant "
                     "(separate for each network)",
        "gradient_penalty": "torch.autograd.grad(create_graph=True) at x_hat = e x + (1 - e) G(z), e per sample",
        "data": f"synthetic scenes (torch re-implementation), {CRITIC_STEPS} batches generated before the timed "
                "region; noise and e sampled per step inside it",
        "warmup_iters": args.warmup,
        "timed_iters": args.iters,
        "seed": args.seed,
    }
    return common.make_result("wgan", config, timing, samples, RSS_BEFORE_IMPORT, rss_before_model, load_at_start)


def main():
    if ARGS.check_params:
        check_params()
        return
    r = run(ARGS)
    c = r["config"]
    common.emit(r, ARGS.json, f"wgan {c['preset']} {c['image_size']}x{c['image_size']} dim {c['dim']} "
                              f"batch {c['batch_size']} ({c['critic_steps']} critic steps + 1 generator step; "
                              f"{c['samples_per_iteration']} generator samples/iteration)")


if __name__ == "__main__":
    main()
