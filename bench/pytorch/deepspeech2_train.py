#!/usr/bin/env python3
"""PyTorch reference for trainscope's `deepspeech2` workload (Deep Speech 2, Amodei et al. 2016, as
TBD benchmarks it), CPU training throughput.

Mirrors workloads/deepspeech2/deepspeech2.{h,cpp} in plain torch.nn:
  conv      conv.0: Conv2d(1, C, (11, 41), stride (2, 2), padding (5, 20), no bias); conv.1:
            Conv2d(C, C, (11, 21), stride (1, 2), padding (5, 10), no bias) over [N, 1, T, 161]
            (time x frequency; tiny: kernels (5, 21) and (5, 11), half-kernel padding likewise);
            each followed by BatchNorm2d (eps 1e-5, momentum 0.1) and
            Hardtanh(0, 20) (the clipped ReLU), then the time steps past each utterance's own
            length zeroed (frames after conv.0: ceil(T / 2); conv.1 keeps them).
  rnns      [T', N, C x 41] (channel-major features) through `layers` BatchRNN blocks: BatchNorm1d
            over all T' x N frames of the input (not on the first block), then nn.GRU(I, H,
            bidirectional=True) on the packed sequence (per-utterance lengths, the reverse
            direction starting at each utterance's own end), the two directions summed.
  fc        Linear(H, 29) per frame -> logits [T', N, 29].
  loss      F.ctc_loss on log_softmax(logits), blank 0, reduction 'sum', zero_infinity, divided by
            the batch's utterances.
  optimizer SGD momentum 0.9, no weight decay, clip_grad_norm_(400) before every step; lr divided by
            1.1 after every epoch (tiny: constant) (LambdaLR; epochs of ceil(train utterances / batch)
            steps).
  init      the engine's: conv Kaiming normal (fan_out, relu), GRU and Linear PyTorch's defaults
            (uniform +-1/sqrt(H), +-1/sqrt(fan_in): what the engine draws), batch norm 1/0.
  presets   as deepspeech2_config():
            tiny  C 8,  kernels 5x21, 5x11, 2 bidirectional GRUs of 128, batch 8, lr 2e-3  (558,277 parameters)
            small C 32, kernels 11x41, 11x21, 7 bidirectional GRUs of 512, batch 8, lr 3e-4 (24,792,829)
            full  C 32, kernels 11x41, 11x21, 7 bidirectional GRUs of 1760, batch 32, lr 3e-4 (255,938,653)
  data      trainscope's own batch shapes: deepspeech2_batches.py replays the espeak-ng corpus's
            file list (from the speech cache, which trainscope fills on first use), its held-out
            split and SpeechDataset's batch order (SortaGrad first epoch, then seeded shuffles),
            so iteration k here has the utterances, frame counts and transcripts of iteration k
            of `trainscope run deepspeech2 --seed N` (same --seed, same --batch). The features
            are random N(0, 1) spectrograms of those lengths (zeros after each utterance), the
            targets the real transcripts. All batches are built before the timed region.
  reported  samples/s = utterances per second; tokens/s = real (unpadded) spectrogram frames per
            second (10 ms of audio each), as trainscope counts them.

--channels-last does not apply (the model is mostly recurrent) and is refused.

Usage:
  python3 bench/pytorch/deepspeech2_train.py --preset small --threads 2 --iters 20 --warmup 3 --json
  python3 bench/pytorch/deepspeech2_train.py --check-params
"""
import math
import os

import common
import deepspeech2_batches

PRESETS = {
    # deepspeech2_config(): conv channels, conv kernels (time, frequency), recurrent layers, hidden
    # units, batch, lr, lr annealing per epoch. Strides are (2, 2) and (1, 2) in every preset.
    "tiny": dict(channels=8, kernel0=(5, 21), kernel1=(5, 11), layers=2, hidden=128, batch=8, lr=2e-3, anneal=1.0),
    "small": dict(channels=32, kernel0=(11, 41), kernel1=(11, 21), layers=7, hidden=512, batch=8, lr=3e-4,
                  anneal=1.1),
    "full": dict(channels=32, kernel0=(11, 41), kernel1=(11, 21), layers=7, hidden=1760, batch=32, lr=3e-4,
                 anneal=1.1),
}
BINS, CLASSES, BLANK, CLIP = 161, 29, 0, 20.0
STRIDE0, STRIDE1 = (2, 2), (1, 2)
MOMENTUM, MAX_GRAD_NORM = 0.9, 400.0
BN_EPS, BN_MOMENTUM = 1e-5, 0.1
FULL_PARAMS = 255_938_653
# `trainscope list` (build/h-speech/cli/trainscope list).
TRAINSCOPE_PARAMS = {"tiny": 558_277, "small": 24_792_829, "full": 255_938_653}

ARGS, RSS_BEFORE_IMPORT = common.prepare(
    __doc__, PRESETS,
    "assert the full preset has 255,938,653 parameters and tiny/small trainscope's counts; check the "
    "masking, the summed directions and the batch replay; then exit")

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


def conv_out(n, stride):
    """Half-kernel padding: ceil(n / stride)."""
    return (n + stride - 1) // stride


def conv_bins():
    return conv_out(conv_out(BINS, STRIDE0[1]), STRIDE1[1])


def make_conv(cin, cout, kernel, stride):
    return nn.Conv2d(cin, cout, kernel, stride=stride, padding=((kernel[0] - 1) // 2, (kernel[1] - 1) // 2),
                     bias=False)


def mask_time(x, lengths):
    """Zeros past each utterance's own length: x [N, C, T, F], lengths [N] (int64)."""
    t = torch.arange(x.shape[2], device=x.device)
    keep = (t[None, :] < lengths[:, None])[:, None, :, None]
    return x * keep.to(x.dtype)


class BatchRNN(nn.Module):
    def __init__(self, input_size, hidden, batch_norm):
        super().__init__()
        self.hidden = hidden
        self.bn = nn.BatchNorm1d(input_size, eps=BN_EPS, momentum=BN_MOMENTUM) if batch_norm else None
        self.gru = nn.GRU(input_size, hidden, bidirectional=True)

    def forward(self, x, lengths):
        """x [T, N, I], lengths [N] (int64, on the CPU) -> [T, N, H], zeros past each length."""
        t, n, i = x.shape
        if self.bn is not None:
            x = self.bn(x.reshape(t * n, i)).reshape(t, n, i)
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths, enforce_sorted=False)
        y, _ = self.gru(packed)
        y, _ = nn.utils.rnn.pad_packed_sequence(y, total_length=t)
        return y.view(t, n, 2, self.hidden).sum(2)


class DeepSpeech2(nn.Module):
    def __init__(self, c):
        super().__init__()
        ch, h = c["channels"], c["hidden"]
        self.c = c
        self.conv = nn.ModuleList([make_conv(1, ch, c["kernel0"], STRIDE0), make_conv(ch, ch, c["kernel1"], STRIDE1)])
        self.bn = nn.ModuleList([nn.BatchNorm2d(ch, eps=BN_EPS, momentum=BN_MOMENTUM) for _ in range(2)])
        self.rnns = nn.ModuleList([BatchRNN(ch * conv_bins() if l == 0 else h, h, l > 0) for l in range(c["layers"])])
        self.fc = nn.Linear(h, CLASSES)
        self.masking = True  # check_padding turns it off to show that it matters
        init_like_engine(self)

    def forward(self, x, frames):
        """x [N, 1, T, 161], frames [N] (int64, CPU) -> logits [T', N, 29], output lengths [N]."""
        len0 = conv_out(frames, STRIDE0[0])
        len1 = conv_out(len0, STRIDE1[0])
        for conv, bn, lengths in zip(self.conv, self.bn, (len0, len1)):
            x = F.hardtanh(bn(conv(x)), 0.0, CLIP)
            x = mask_time(x, lengths) if self.masking else x
        n, ch, t, f = x.shape
        x = x.permute(2, 0, 1, 3).reshape(t, n, ch * f)
        for rnn in self.rnns:
            x = rnn(x, len1)
        return self.fc(x.reshape(t * n, -1)).view(t, n, CLASSES), len1


def init_like_engine(model):
    """engine/nn/layers.cpp and recurrent.cpp: conv N(0, sqrt(2 / fan_out)); GRU uniform
    +-1/sqrt(H) for every weight and bias; Linear weight and bias uniform +-1/sqrt(fan_in);
    batch norm 1/0."""
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
        elif isinstance(m, nn.GRU):
            bound = 1.0 / math.sqrt(m.hidden_size)
            for p in m.parameters():
                nn.init.uniform_(p, -bound, bound)
        elif isinstance(m, nn.Linear):
            bound = 1.0 / math.sqrt(m.in_features)
            nn.init.uniform_(m.weight, -bound, bound)
            nn.init.uniform_(m.bias, -bound, bound)
        elif isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)


def ctc(logits, out_lengths, targets, target_lengths):
    """CTC summed per utterance, averaged over the batch."""
    loss = F.ctc_loss(logits.log_softmax(-1), targets, out_lengths, target_lengths, blank=BLANK, reduction="sum",
                      zero_infinity=True)
    return loss / logits.shape[1]


def closed_form_count(c):
    """deepspeech2_parameter_count()."""
    ch, h = c["channels"], c["hidden"]
    k0, k1 = c["kernel0"], c["kernel1"]
    total = ch * k0[0] * k0[1] + ch * ch * k1[0] * k1[1] + 2 * 2 * ch
    for l in range(c["layers"]):
        i = ch * conv_bins() if l == 0 else h
        total += 2 * (3 * h * (i + h) + 6 * h) + (0 if l == 0 else 2 * i)
    return total + h * CLASSES + CLASSES


def count_params(model):
    return sum(p.numel() for p in model.parameters())


def build_counted(c):
    """The model on the meta device where PyTorch has one (full holds 256 M weights)."""
    if hasattr(torch, "device") and hasattr(torch.device("cpu"), "__enter__"):
        with torch.device("meta"):
            return DeepSpeech2(c)
    return DeepSpeech2(c)


# ------------------------------------------------------------------ --check-params

def check_padding():
    """In eval mode an utterance's logits do not depend on the padding after it (the masks and
    the packed GRU), with batch norm statistics moved away from (0, 1)."""
    torch.manual_seed(3)
    model = DeepSpeech2(PRESETS["tiny"]).double()
    with torch.no_grad():
        for _ in range(3):
            model(torch.randn(4, 1, 40, BINS, dtype=torch.float64), torch.tensor([40, 40, 40, 40]))
    model.eval()
    alone = torch.randn(1, 1, 23, BINS, dtype=torch.float64)
    batch = torch.randn(2, 1, 50, BINS, dtype=torch.float64)
    batch[0] = 0
    batch[0, :, :23] = alone[0]
    with torch.no_grad():
        a, la = model(alone, torch.tensor([23]))
        b, lb = model(batch, torch.tensor([23, 50]))
    assert la.tolist() == [12] and lb.tolist() == [12, 25]
    err = (a[:, 0] - b[:12, 0]).abs().max().item()
    assert err < 1e-10, f"padding changed an utterance's logits by {err:.2e}"
    # Without the masks it would: batch norm maps the padding's zeros to non-zeros.
    model.masking = False
    with torch.no_grad():
        unmasked = (a[:, 0] - model(batch, torch.tensor([23, 50]))[0][:12, 0]).abs().max().item()
    assert unmasked > 1e-6, f"the padding check is blind: without masks the logits moved only {unmasked:.2e}"
    print("OK: an utterance's logits do not depend on its padding (eval mode; masks and packed GRUs)")


def check_summed_directions():
    """BatchRNN = forward GRU over each utterance + reverse GRU over it reversed, summed."""
    torch.manual_seed(4)
    rnn = BatchRNN(5, 3, False).double()
    x = torch.randn(6, 2, 5, dtype=torch.float64)
    lengths = torch.tensor([6, 4])
    y = rnn(x, lengths)
    g = rnn.gru
    fwd = nn.GRU(5, 3).double()
    bwd = nn.GRU(5, 3).double()
    with torch.no_grad():
        for name in ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"):
            getattr(fwd, name).copy_(getattr(g, name))
            getattr(bwd, name).copy_(getattr(g, name + "_reverse"))
        for n, length in enumerate(lengths.tolist()):
            seq = x[:length, n:n + 1]
            want = fwd(seq)[0] + bwd(seq.flip(0))[0].flip(0)
            err = (y[:length, n:n + 1] - want).abs().max().item()
            assert err < 1e-10, f"utterance {n}: summed directions differ by {err:.2e}"
            assert y[length:, n].abs().sum().item() == 0, f"utterance {n}: output past its length"
    print("OK: bidirectional GRU = forward + reverse over each utterance's own frames, zeros after")


def check_replay():
    try:
        batches = deepspeech2_batches.training_batches(PRESETS["small"]["batch"], 1, 3)
    except FileNotFoundError as e:
        print(f"SKIPPED batch replay: {e}")
        return
    train, heldout = deepspeech2_batches.split(deepspeech2_batches.corpus())
    frames = [f for f, _ in batches[0]]
    assert frames == sorted(frames), "the first epoch is SortaGrad (shortest first)"
    print(f"OK: corpus of {len(train) + len(heldout)} utterances ({len(heldout)} held out); first batches' frames "
          f"{[sum(f for f, _ in b) for b in batches]} (compare with trainscope's tokens per iteration, seed 1, batch 8)")


def check_params():
    for name, c in PRESETS.items():
        model = build_counted(c)
        n = count_params(model)
        names = [k for k, _ in model.named_parameters()]
        print(f"{name}: {n:,} parameters in {len(names)} tensors (trainscope: {TRAINSCOPE_PARAMS[name]:,}); "
              f"first {names[0]}, last {names[-1]}")
        assert n == closed_form_count(c), f"{name}: {n:,} parameters, the closed form gives {closed_form_count(c):,}"
        assert n == TRAINSCOPE_PARAMS[name], f"{name}: {n:,} parameters, trainscope has {TRAINSCOPE_PARAMS[name]:,}"
        tensors = 2 + 2 * 2 + c["layers"] * 8 + (c["layers"] - 1) * 2 + 2
        assert len(names) == tensors, f"{name}: {len(names)} parameter tensors, expected {tensors}"
        if name == "full":
            assert n == FULL_PARAMS, f"full preset has {n:,} parameters, expected {FULL_PARAMS:,}"
            assert "rnns.6.gru.weight_hh_l0_reverse" in names and "rnns.1.bn.weight" in names
    print(f"OK: full = {FULL_PARAMS:,} parameters; tiny and small match trainscope")
    check_padding()
    check_summed_directions()
    check_replay()


# ------------------------------------------------------------------ training run

def make_batches(shapes, gen):
    """Random spectrograms of the replayed lengths (zeros after each utterance) and the real
    transcripts as targets."""
    out = []
    for items in shapes:
        frames = torch.tensor([f for f, _ in items], dtype=torch.long)
        x = torch.randn(len(items), 1, int(frames.max()), BINS, generator=gen)
        x = x * (torch.arange(x.shape[2])[None, :] < frames[:, None])[:, None, :, None].float()
        labels = [deepspeech2_batches.labels(t) for _, t in items]
        out.append({"x": x, "frames": frames, "targets": torch.tensor([l for ls in labels for l in ls], dtype=torch.long),
                    "target_lengths": torch.tensor([len(ls) for ls in labels], dtype=torch.long),
                    "utterances": len(items), "T": int(frames.max()), "tokens": int(frames.sum())})
    return out


def run(args):
    if args.channels_last:
        raise SystemExit("deepspeech2_train.py: --channels-last does not apply to this model")
    if args.compile:
        raise SystemExit("deepspeech2_train.py: --compile is not supported (packed sequences)")
    c = PRESETS[args.preset]
    batch = args.batch if args.batch > 0 else c["batch"]
    common.configure_torch(args)

    # trainscope's batch shapes for iterations 0 .. warmup + iters - 1 (untimed).
    shapes = deepspeech2_batches.training_batches(batch, args.seed, args.warmup + args.iters)
    train, _ = deepspeech2_batches.split(deepspeech2_batches.corpus())
    steps_per_epoch = max(1, -(-len(train) // batch))

    load_at_start = list(os.getloadavg())
    rss_before_model = common.rss_bytes()
    model = DeepSpeech2(c)
    model.train()
    n_params = count_params(model)
    opt = torch.optim.SGD(model.parameters(), lr=c["lr"], momentum=MOMENTUM, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda i: c["anneal"] ** -(i // steps_per_epoch))

    gen = torch.Generator().manual_seed(args.seed)
    batches = make_batches(shapes, gen)
    feed = common.Replay(batches)

    common.profile_layers(model)

    def step():
        b = next(feed)
        with common.phase("forward"):
            logits, out_lengths = model(b["x"], b["frames"])
            loss = ctc(logits, out_lengths, b["targets"], b["target_lengths"])
        common.backward_and_step(loss, opt, sched, clip=(model.parameters(), MAX_GRAD_NORM))
        return loss.item()

    timing = common.time_iterations(step, args.warmup, args.iters, restart=feed.restart)
    timed = batches[args.warmup:]
    config = {
        "preset": args.preset,
        "conv_channels": c["channels"],
        "conv": (f"{c['kernel0'][0]}x{c['kernel0'][1]} s2x2, {c['kernel1'][0]}x{c['kernel1'][1]} s1x2, half-kernel "
                 "padding (time x frequency), batch norm, hardtanh(0, 20)"),
        "rnn_layers": c["layers"],
        "rnn_hidden": c["hidden"],
        "rnn": "bidirectional GRU, directions summed, sequence-wise batch norm on rnns.1..",
        "classes": CLASSES,
        "batch_size": batch,
        "parameters": n_params,
        "memory_format": "contiguous",
        "compile": False,
        "optimizer": f"SGD momentum {MOMENTUM}, no weight decay, grad norm clipped at {MAX_GRAD_NORM:g}",
        "learning_rate": f"{c['lr']:g}, / {c['anneal']:g} per epoch of {steps_per_epoch} steps",
        "data": "trainscope's batch shapes (deepspeech2_batches.py replay, same seed and batch), random "
                "N(0, 1) spectrograms, real transcripts",
        # One row per iteration, warm-up first: [utterances, padded frames T, real frames].
        "batches": [[b["utterances"], b["T"], b["tokens"]] for b in batches],
        "warmup_iters": args.warmup,
        "timed_iters": args.iters,
        "seed": args.seed,
    }
    return common.make_result("deepspeech2", config, timing, [b["utterances"] for b in timed], RSS_BEFORE_IMPORT,
                              rss_before_model, load_at_start, tokens_per_iteration=[b["tokens"] for b in timed])


def main():
    if ARGS.check_params:
        check_params()
        return
    r = run(ARGS)
    c = r["config"]
    common.emit(r, ARGS.json, f"deepspeech2 {c['preset']} batch {c['batch_size']}")


if __name__ == "__main__":
    main()
