#!/usr/bin/env python3
"""PyTorch reference for trainscope's `a3c` workload: the learner's update alone (forward,
backward and the shared-RMSProp step on one rollout), CPU time per update.

Mirrors workloads/a3c/a3c.{h,cpp} (Mnih et al. 2016, the feed-forward Atari network):
  network   input 4 x 84 x 84 (4 stacked grayscale frames, values in [0, 1]);
            conv1 Conv2d(4, c1, 8, stride 4) + bias, ReLU -> 20 x 20;
            conv2 Conv2d(c1, c2, 4, stride 2) + bias, ReLU -> 9 x 9;
            fc Linear(c2 x 9 x 9, h), ReLU; policy Linear(h, 4) (logits); value Linear(h, 1).
  presets   tiny  c1 8,  c2 16, h 256  (337,437 parameters)
            small c1 16, c2 32, h 256  (677,429: the Atari network, as full)
            full  c1 16, c2 32, h 256  (677,429)
  update    one rollout of t_max = 5 states (--batch changes it): forward of the T states as one
            batch; n-step returns R_t = r_t + 0.99 R_{t+1} from a bootstrap value, advantages
            A_t = R_t - V(s_t) held constant; loss = sum_t [-log pi(a_t|s_t) A_t - 0.01 H(pi(s_t))]
            + 0.5 sum_t (R_t - V(s_t))^2; backward; clip_grad_norm_(40); RMSProp with the A3C
            paper's epsilon inside the root, lr 2.5e-4, decay 0.99, eps 0.1 (tiny: lr 3e-4, eps
            1e-5): g = 0.99 g + 0.01 d^2, theta -= lr d / sqrt(g + eps), written with
            torch._foreach_* ops (torch.optim.RMSprop puts eps outside the root);
            zero_grad(set_to_none=True).
            As in trainscope, the gradients come from a local copy of the network and are applied
            to the shared parameters; the copy back (shared -> local, done by trainscope's learner
            at the start of each rollout, in its acting phase) is not part of this update.
  data      the T states are random values in [0, 1] drawn once before the timed region (the
            convolutions' cost does not depend on the values); actions and rewards are fixed.
  threads   a learner runs its ops on one thread: compare with --threads 1 against
            build/<dir>/bench/a3c_update_bench (BM_A3cUpdate/full:1/threads:1).

samples per iteration = t_max (the rollout's environment steps).

Usage:
  python3 bench/pytorch/a3c_update.py --preset full --threads 1 --iters 200 --warmup 20 --json
  python3 bench/pytorch/a3c_update.py --check-params
"""
import os

import common

PRESETS = {
    # name: conv1 channels, conv2 channels, hidden units, learning rate, RMSProp epsilon
    "tiny": {"c1": 8, "c2": 16, "hidden": 256, "lr": 3e-4, "eps": 1e-5},
    "small": {"c1": 16, "c2": 32, "hidden": 256, "lr": 2.5e-4, "eps": 0.1},
    "full": {"c1": 16, "c2": 32, "hidden": 256, "lr": 2.5e-4, "eps": 0.1},
}
ACTIONS = 4
T_MAX = 5
GAMMA = 0.99
ENTROPY_BETA = 0.01
VALUE_COEF = 0.5
RMS_ALPHA = 0.99
MAX_GRAD_NORM = 40.0
FULL_PARAMS = 677_429
# `trainscope list` (build/<dir>/cli/trainscope list) for each preset.
TRAINSCOPE_PARAMS = {"tiny": 337_437, "small": 677_429, "full": 677_429}

ARGS, RSS_BEFORE_IMPORT = common.prepare(
    __doc__, PRESETS,
    "assert the full network has 677,429 parameters and tiny and small trainscope's counts, and that the "
    "RMSProp step is the A3C paper's; then exit")

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


class A3cNet(nn.Module):
    def __init__(self, c1, c2, hidden):
        super().__init__()
        # Registration order and names as trainscope's: conv1, conv2, fc, policy, value.
        self.conv1 = nn.Conv2d(4, c1, kernel_size=8, stride=4)
        self.conv2 = nn.Conv2d(c1, c2, kernel_size=4, stride=2)
        self.fc = nn.Linear(c2 * 9 * 9, hidden)
        self.policy = nn.Linear(hidden, ACTIONS)
        self.value = nn.Linear(hidden, 1)

    def forward(self, x):
        h = F.relu(self.conv1(x))
        h = F.relu(self.conv2(h))
        h = F.relu(self.fc(h.flatten(1)))
        return self.policy(h), self.value(h)


def build(preset):
    p = PRESETS[preset]
    return A3cNet(p["c1"], p["c2"], p["hidden"])


def count_params(model):
    return sum(t.numel() for t in model.parameters())


def closed_form(preset):
    p = PRESETS[preset]
    c1, c2, h = p["c1"], p["c2"], p["hidden"]
    return c1 * (4 * 8 * 8 + 1) + c2 * (c1 * 4 * 4 + 1) + h * (c2 * 9 * 9 + 1) + ACTIONS * (h + 1) + (h + 1)


def a3c_loss(net, states, actions, rewards, bootstrap):
    logits, value = net(states)
    value = value.squeeze(1)
    returns = torch.empty_like(rewards)
    r = bootstrap
    for t in range(rewards.shape[0] - 1, -1, -1):
        r = rewards[t] + GAMMA * r
        returns[t] = r
    advantage = (returns - value).detach()
    logp = F.log_softmax(logits, dim=1)
    policy = -(logp.gather(1, actions.unsqueeze(1)).squeeze(1) * advantage).sum()
    neg_entropy = (logp.exp() * logp).sum()
    value_loss = ((value - returns) ** 2).sum()
    return policy + ENTROPY_BETA * neg_entropy + VALUE_COEF * value_loss


def shared_rmsprop_step(shared, grads, square_avgs, lr, eps):
    # The A3C paper's RMSProp: g = a g + (1 - a) d^2; theta -= lr d / sqrt(g + eps).
    torch._foreach_mul_(square_avgs, RMS_ALPHA)
    torch._foreach_addcmul_(square_avgs, grads, grads, value=1 - RMS_ALPHA)
    denom = torch._foreach_add(square_avgs, eps)
    torch._foreach_sqrt_(denom)
    torch._foreach_addcdiv_(shared, grads, denom, value=-lr)


def check_rmsprop():
    torch.manual_seed(0)
    p = [torch.randn(7, dtype=torch.float64)]
    g = [torch.randn(7, dtype=torch.float64)]
    s = [torch.rand(7, dtype=torch.float64)]
    want_s = RMS_ALPHA * s[0] + (1 - RMS_ALPHA) * g[0] ** 2
    want_p = p[0] - 0.01 * g[0] / torch.sqrt(want_s + 0.1)
    shared_rmsprop_step(p, g, s, 0.01, 0.1)
    assert torch.allclose(s[0], want_s) and torch.allclose(p[0], want_p), "RMSProp step differs from the formula"


def check_params():
    for name in PRESETS:
        n = count_params(build(name))
        print(f"{name}: {n:,} parameters (trainscope: {TRAINSCOPE_PARAMS[name]:,})")
        assert n == closed_form(name), f"{name}: {n:,} differs from the closed form {closed_form(name):,}"
        assert n == TRAINSCOPE_PARAMS[name], f"{name}: {n:,} parameters, trainscope has {TRAINSCOPE_PARAMS[name]:,}"
    assert count_params(build("full")) == FULL_PARAMS
    check_rmsprop()
    print("OK: full = 677,429 parameters (conv1 4,112 + conv2 8,224 + fc 663,808 + policy 1,028 + value 257); "
          "tiny and small match trainscope; the RMSProp step is the A3C paper's")


def run(args):
    if args.channels_last or args.compile:
        raise SystemExit("a3c_update.py: --channels-last and --compile are not supported (trainscope's learner "
                         "runs plain NCHW)")
    p = PRESETS[args.preset]
    t_max = args.batch if args.batch > 0 else T_MAX
    common.configure_torch(args)

    load_at_start = list(os.getloadavg())
    rss_before_model = common.rss_bytes()
    shared = build(args.preset)
    local = build(args.preset)
    local.load_state_dict(shared.state_dict())
    shared_params = [q.detach() for q in shared.parameters()]
    local_params = list(local.parameters())
    square_avgs = [torch.zeros_like(q) for q in shared_params]
    n_params = count_params(shared)

    gen = torch.Generator().manual_seed(args.seed)
    states = torch.rand(t_max, 4, 84, 84, generator=gen)
    actions = torch.randint(0, ACTIONS, (t_max,), generator=gen)
    rewards = torch.tensor([1.0 if t % 3 == 2 else 0.0 for t in range(t_max)])
    bootstrap = torch.tensor(0.1)

    common.profile_layers(local)

    def step():
        with common.phase("forward"):
            loss = a3c_loss(local, states, actions, rewards, bootstrap)
        with common.phase("backward"):
            loss.backward()
        with common.phase("optimizer"):
            torch.nn.utils.clip_grad_norm_(local_params, MAX_GRAD_NORM)
            with torch.no_grad():
                shared_rmsprop_step(shared_params, [q.grad for q in local_params], square_avgs, p["lr"], p["eps"])
            local.zero_grad(set_to_none=True)
        return loss.item()

    timing = common.time_iterations(step, args.warmup, args.iters)
    config = {
        "preset": args.preset,
        "network": f"conv {p['c1']} 8x8/4, conv {p['c2']} 4x4/2, fc {p['hidden']}, policy {ACTIONS} + value 1",
        "t_max": t_max,
        "batch_size": t_max,
        "samples_per_iteration": t_max,
        "parameters": n_params,
        "memory_format": "contiguous (NCHW)",
        "compile": False,
        "loss": f"sum_t [-log pi(a|s) A - {ENTROPY_BETA:g} H] + {VALUE_COEF:g} sum_t (R - V)^2, gamma {GAMMA:g}",
        "optimizer": f"shared RMSProp lr {p['lr']:g}, decay {RMS_ALPHA:g}, eps {p['eps']:g} inside the root "
                     f"(torch._foreach_*), gradient norm clipped to {MAX_GRAD_NORM:g}",
        "data": "random states in [0, 1], generated before the timed region",
        "warmup_iters": args.warmup,
        "timed_iters": args.iters,
        "seed": args.seed,
    }
    return common.make_result("a3c_update", config, timing, t_max, RSS_BEFORE_IMPORT, rss_before_model, load_at_start)


def main():
    if ARGS.check_params:
        check_params()
        return
    r = run(ARGS)
    c = r["config"]
    common.emit(r, ARGS.json, f"a3c update {c['preset']} ({c['parameters']:,} parameters), {c['t_max']}-step rollout")


if __name__ == "__main__":
    main()
