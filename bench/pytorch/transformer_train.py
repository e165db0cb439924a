#!/usr/bin/env python3
"""PyTorch reference for trainscope's `transformer` workload (Transformer base, Vaswani et al. 2017),
CPU training throughput.

Mirrors workloads/transformer/transformer.{h,cpp} in plain torch.nn (no nn.Transformer):
  model     post-layer-norm encoder-decoder: per encoder layer x = LN(x + Drop(SelfAttn(x))),
            x = LN(x + Drop(fc2(relu(fc1 x)))); per decoder layer causal self-attention, then
            attention over the encoder output, then the feed-forward block, each
            LN(x + Drop(sublayer)). Attention: q/k/v/out projections with bias, heads of d/h,
            scale 1/sqrt(d/h), no dropout inside; encoder self-attention and encoder-decoder
            attention hide padded source keys, decoder self-attention hides future keys (target
            padding sits after the real tokens, so the causal mask already hides it). LayerNorm
            eps 1e-5. fairseq's module names, registered in trainscope's order
            (embed_tokens, encoder.layers.0.self_attn.q_proj, decoder.layers.5.encoder_attn_layer_norm).
  embedding one matrix [V, d] shared by source, target and the output projection (F.linear with
            the embedding weight, no bias); input = sqrt(d) E[ids] + interleaved sinusoids
            (PE(p, 2i) = sin(p / 10000^(2i/d)), PE(p, 2i+1) = cos(.), positions from 0), then dropout.
  dropout   on the two embedding sums and on every sub-layer output only (skipped when p = 0).
  init      the engine's: Linear weight and bias U(+-1/sqrt(fan_in)), embedding N(0, d^-0.5),
            LayerNorm 1/0.
  loss      label-smoothed cross-entropy (eps 0.1: (1 - eps) NLL + eps mean_k(-log p_k)), padding
            (id 0) ignored, summed and divided by the batch's real target tokens (target + EOS).
  optimizer Adam betas 0.9/0.98, eps 1e-9, no weight decay; lr at step s (from 1) =
            lr_factor x d^-0.5 x min(s^-0.5, s x warmup^-1.5) (LambdaLR), zero_grad(set_to_none=True).
  presets   as transformer_config():
            tiny  2+2 layers, d 32,  4 heads, ffn 64,   vocab 200,    256-token batches,   dropout 0,
                  max length 8, warm-up 60, lr factor 0.3, 4,000 training pairs    (49,152 parameters)
            small 6+6 layers, d 256, 8 heads, ffn 1024, vocab 8,000,  1,024-token batches, dropout 0.1,
                  max length 30, warm-up 4000, lr factor 1, 133,317 pairs         (13,107,200)
            full  6+6 layers, d 512, 8 heads, ffn 2048, vocab 37,000, 4,096-token batches, dropout 0.1,
                  max length 50, warm-up 4000, lr factor 1, 133,317 pairs         (63,082,496)
  data      trainscope's own batch shapes: transformer_batches.py replays the synthetic corpus's
            sentence lengths and the token-budget batcher (plan_token_batches) bit for bit, so
            iteration k here has the pairs, padded lengths S and T and per-row lengths of
            iteration k of `trainscope run transformer --seed N` (same --seed, same --batch).
            Token ids are random words (not the grammar's sentences); source rows end in EOS,
            the decoder input is BOS + target, the labels target + EOS, padding 0. All batches
            are built before the timed region.
  reported  samples/s = sentence pairs per second and tokens/s = real source (with EOS) plus
            target (+ 1) tokens per second, per iteration, as trainscope counts them.
  cuda      --device cuda: model and every batch on the GPU before the timed region (built on the
            CPU as here), TF32 for matmuls (--no-tf32 turns it off), cudnn.benchmark,
            torch.cuda.synchronize() at the end of every iteration; the JSON adds the GPU, CUDA and
            cuDNN versions, the allocator's peaks and the MFU per token (common.add_device_fields;
            docs/pytorch-comparison.md, "On the GPU")

--batch is the token budget (trainscope's --batch for this workload). --channels-last does not
apply to a sequence model and is refused. Attention: --attention sdpa
(torch.nn.functional.scaled_dot_product_attention, PyTorch >= 2.0) or math (explicit
matmul / masked_fill / softmax / matmul); the default is sdpa where it exists.

Usage:
  python3 bench/pytorch/transformer_train.py --preset small --threads 2 --iters 20 --warmup 3 --json
  python3 bench/pytorch/transformer_train.py --preset full --device cuda --iters 30 --json
  python3 bench/pytorch/transformer_train.py --check-params
"""
import math
import os

import common
import transformer_batches

PRESETS = {
    # transformer_config(): vocab, d_model, heads, ffn, encoder/decoder layers, dropout,
    # max_tokens (the default token budget), max_length, warmup, lr_factor, train_pairs
    "tiny": dict(vocab=200, d_model=32, heads=4, ffn=64, encoder_layers=2, decoder_layers=2, dropout=0.0,
                 max_tokens=256, max_length=8, warmup=60, lr_factor=0.3, train_pairs=4000),
    "small": dict(vocab=8000, d_model=256, heads=8, ffn=1024, encoder_layers=6, decoder_layers=6, dropout=0.1,
                  max_tokens=1024, max_length=30, warmup=4000, lr_factor=1.0, train_pairs=133317),
    "full": dict(vocab=37000, d_model=512, heads=8, ffn=2048, encoder_layers=6, decoder_layers=6, dropout=0.1,
                 max_tokens=4096, max_length=50, warmup=4000, lr_factor=1.0, train_pairs=133317),
}
LABEL_SMOOTHING = 0.1
BETAS = (0.9, 0.98)
ADAM_EPS = 1e-9
LAYER_NORM_EPS = 1e-5
PAD, BOS, EOS, FIRST_WORD = 0, 1, 2, 4  # text_data.h: <pad> <s> </s> <unk>, then the words
FULL_PARAMS = 63_082_496
# `trainscope list` (build/default/cli/trainscope list).
TRAINSCOPE_PARAMS = {"tiny": 49_152, "small": 13_107_200, "full": 63_082_496}


def extra_args(p):
    p.add_argument("--attention", choices=("sdpa", "math"), default=None,
                   help="sdpa: F.scaled_dot_product_attention; math: explicit matmul/softmax "
                        "(default: sdpa where PyTorch has it, else math)")


ARGS, RSS_BEFORE_IMPORT = common.prepare(
    __doc__, PRESETS,
    "assert the full preset has 63,082,496 parameters and tiny/small trainscope's counts; check the attention, "
    "the loss, the learning-rate schedule and the batch replay's generator; then exit",
    extra_args=extra_args)

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

HAVE_SDPA = hasattr(F, "scaled_dot_product_attention")


def dropout(x, p, training):
    """trainscope skips the op when p is 0 (tiny); so does this."""
    return F.dropout(x, p, training) if (training and p > 0.0) else x


class MultiheadAttention(nn.Module):
    def __init__(self, d_model, heads):
        super().__init__()
        assert d_model % heads == 0, f"d_model {d_model} is not a multiple of {heads} heads"
        self.heads = heads
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    def forward(self, query, memory, key_mask, causal, impl):
        """query [B, Tq, d], memory [B, Tk, d]; key_mask [B, 1, 1, Tk] (True: a real key) or None;
        causal hides key j > query i."""
        b, tq, d = query.shape
        tk, h = memory.shape[1], self.heads
        q = self.q_proj(query).view(b, tq, h, d // h).transpose(1, 2)  # [B, H, Tq, dh], strided
        k = self.k_proj(memory).view(b, tk, h, d // h).transpose(1, 2)
        v = self.v_proj(memory).view(b, tk, h, d // h).transpose(1, 2)
        if impl == "sdpa":
            a = F.scaled_dot_product_attention(q, k, v, attn_mask=key_mask, is_causal=causal)
        else:
            s = torch.matmul(q, k.transpose(-2, -1)).mul_(1.0 / math.sqrt(d // h))
            if causal:
                key_mask = torch.ones(tq, tk, dtype=torch.bool, device=s.device).tril_()
            s = s.masked_fill_(~key_mask, float("-inf"))
            a = torch.matmul(torch.softmax(s, dim=-1), v)
        return self.out_proj(a.transpose(1, 2).reshape(b, tq, d))


def feed_forward(fc1, fc2, x):
    return fc2(F.relu(fc1(x)))  # no dropout inside: the paper's dropout sits on sub-layer outputs


class EncoderLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.p = c["dropout"]
        self.self_attn = MultiheadAttention(c["d_model"], c["heads"])
        self.self_attn_layer_norm = nn.LayerNorm(c["d_model"], eps=LAYER_NORM_EPS)
        self.fc1 = nn.Linear(c["d_model"], c["ffn"])
        self.fc2 = nn.Linear(c["ffn"], c["d_model"])
        self.final_layer_norm = nn.LayerNorm(c["d_model"], eps=LAYER_NORM_EPS)

    def forward(self, x, src_mask, impl):
        t = self.training
        x = self.self_attn_layer_norm(x + dropout(self.self_attn(x, x, src_mask, False, impl), self.p, t))
        return self.final_layer_norm(x + dropout(feed_forward(self.fc1, self.fc2, x), self.p, t))


class DecoderLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.p = c["dropout"]
        self.self_attn = MultiheadAttention(c["d_model"], c["heads"])
        self.self_attn_layer_norm = nn.LayerNorm(c["d_model"], eps=LAYER_NORM_EPS)
        self.encoder_attn = MultiheadAttention(c["d_model"], c["heads"])
        self.encoder_attn_layer_norm = nn.LayerNorm(c["d_model"], eps=LAYER_NORM_EPS)
        self.fc1 = nn.Linear(c["d_model"], c["ffn"])
        self.fc2 = nn.Linear(c["ffn"], c["d_model"])
        self.final_layer_norm = nn.LayerNorm(c["d_model"], eps=LAYER_NORM_EPS)

    def forward(self, x, memory, src_mask, impl):
        t = self.training
        x = self.self_attn_layer_norm(x + dropout(self.self_attn(x, x, None, True, impl), self.p, t))
        x = self.encoder_attn_layer_norm(x + dropout(self.encoder_attn(x, memory, src_mask, False, impl), self.p, t))
        return self.final_layer_norm(x + dropout(feed_forward(self.fc1, self.fc2, x), self.p, t))


class Stack(nn.Module):
    """Holds `layers`, so that names read encoder.layers.0...., as fairseq's and trainscope's."""

    def __init__(self, layers):
        super().__init__()
        self.layers = nn.ModuleList(layers)


def sinusoids(length, d):
    """trainscope's interleaved table, computed in double and stored as float: [length, d]."""
    p = torch.arange(length, dtype=torch.float64)[:, None]
    i = torch.arange(0, d, 2, dtype=torch.float64)
    angle = p / torch.pow(10000.0, i / d)
    pe = torch.zeros(length, d, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle[:, : d // 2])
    return pe.float()


class Transformer(nn.Module):
    def __init__(self, c, max_positions=0, impl="math"):
        super().__init__()
        self.c, self.impl = c, impl
        self.embed_tokens = nn.Embedding(c["vocab"], c["d_model"])
        self.encoder = Stack([EncoderLayer(c) for _ in range(c["encoder_layers"])])
        self.decoder = Stack([DecoderLayer(c) for _ in range(c["decoder_layers"])])
        # Not a parameter; a buffer, so that .to(device) moves it.
        self.register_buffer("positions", sinusoids(max_positions, c["d_model"]) if max_positions else None,
                             persistent=False)
        self.scale = math.sqrt(c["d_model"])
        init_like_engine(self)

    def embed(self, ids):
        x = self.embed_tokens(ids) * self.scale + self.positions[: ids.shape[1]]
        return dropout(x, self.c["dropout"], self.training)

    def forward(self, src, tgt_in):
        """src [B, S], tgt_in [B, T] int64 ids (0: padding) -> logits [B T, V]."""
        src_mask = src.ne(PAD)[:, None, None, :]  # [B, 1, 1, S]: the real source keys
        h = self.embed(src)
        for layer in self.encoder.layers:
            h = layer(h, src_mask, self.impl)
        memory = h
        h = self.embed(tgt_in)
        for layer in self.decoder.layers:
            h = layer(h, memory, src_mask, self.impl)
        return F.linear(h.reshape(-1, self.c["d_model"]), self.embed_tokens.weight)  # tied, no bias


def init_like_engine(model):
    """engine/nn/layers.cpp: Linear U(+-1/sqrt(fan_in)) for weight and bias, Embedding N(0, d^-0.5),
    LayerNorm 1/0."""
    for m in model.modules():
        if isinstance(m, nn.Linear):
            bound = 1.0 / math.sqrt(m.in_features)
            nn.init.uniform_(m.weight, -bound, bound)
            if m.bias is not None:
                nn.init.uniform_(m.bias, -bound, bound)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, 0.0, 1.0 / math.sqrt(m.embedding_dim))
        elif isinstance(m, nn.LayerNorm):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)


def smoothed_loss(logits, labels, tgt_tokens):
    """Label-smoothed CE, padding ignored, normalised by the real target tokens."""
    return F.cross_entropy(logits, labels, ignore_index=PAD, label_smoothing=LABEL_SMOOTHING,
                           reduction="sum") / tgt_tokens


def lr_lambda(c):
    """The factor on the base lr lr_factor x d^-0.5 at scheduler step i (trainscope's s = i + 1)."""
    w = float(max(1, c["warmup"]))
    return lambda i: min((i + 1) ** -0.5, (i + 1) * w ** -1.5)


def closed_form_count(c):
    """transformer_parameter_count()."""
    d, f = c["d_model"], c["ffn"]
    attention, ffn, norm = 4 * (d * d + d), d * f + f + f * d + d, 2 * d
    return (c["vocab"] * d + c["encoder_layers"] * (attention + ffn + 2 * norm)
            + c["decoder_layers"] * (2 * attention + ffn + 3 * norm))


def count_params(model):
    return sum(p.numel() for p in model.parameters())  # the tied embedding once


def build_counted(c):
    """The model on the meta device where PyTorch has one (no memory for full's 63 M weights)."""
    if hasattr(torch, "device") and hasattr(torch.device("cpu"), "__enter__"):
        with torch.device("meta"):
            return Transformer(c)
    return Transformer(c)


# ------------------------------------------------------------------ --check-params

def reference_attention(q, k, v, lengths, causal, scale):
    """trainscope's kernel (engine/cpu/attention.cpp) row by row: keys j < min(length, i + 1 if causal)."""
    b, h, tq, _ = q.shape
    out = torch.zeros_like(q)
    for n in range(b):
        for hh in range(h):
            for i in range(tq):
                valid = min(lengths[n], i + 1) if causal else lengths[n]
                s = (q[n, hh, i] @ k[n, hh, :valid].T) * scale
                out[n, hh, i] = torch.softmax(s, 0) @ v[n, hh, :valid]
    return out


def check_attention():
    torch.manual_seed(5)
    c = dict(PRESETS["tiny"])
    d, heads = c["d_model"], c["heads"]
    b, tq, tk = 3, 5, 7
    lengths = [7, 4, 1]
    impls = ["math"] + (["sdpa"] if HAVE_SDPA else [])
    results = {}
    for causal in (False, True):
        t_k = tq if causal else tk
        lens = [t_k] * b if causal else lengths
        key_mask = None if causal else (torch.arange(tk)[None, :] < torch.tensor(lengths)[:, None])[:, None, None, :]
        mha = MultiheadAttention(d, heads).double()
        init_like_engine(mha)
        x = torch.randn(b, tq, d, dtype=torch.float64)
        mem = x if causal else torch.randn(b, tk, d, dtype=torch.float64)
        # The reference on the same projections.
        dh = d // heads
        q = mha.q_proj(x).view(b, tq, heads, dh).transpose(1, 2)
        k = mha.k_proj(mem).view(b, t_k, heads, dh).transpose(1, 2)
        v = mha.v_proj(mem).view(b, t_k, heads, dh).transpose(1, 2)
        ref = reference_attention(q, k, v, lens, causal, 1 / math.sqrt(dh))
        ref = mha.out_proj(ref.transpose(1, 2).reshape(b, tq, d))
        for impl in impls:
            mha.zero_grad(set_to_none=True)
            out = mha(x, mem, key_mask, causal, impl)
            err = (out - ref).abs().max().item()
            assert err < 1e-10, f"attention {impl} causal={causal}: max error {err:.2e} against the reference"
            out.pow(2).sum().backward()
            results[(impl, causal)] = [p.grad.clone() for p in mha.parameters()]
        if "sdpa" in impls:
            gerr = max((a - g).abs().max().item() for a, g in zip(results[("math", causal)], results[("sdpa", causal)]))
            assert gerr < 1e-9, f"attention gradients math vs sdpa (causal={causal}) differ by {gerr:.2e}"
    print(f"OK: attention ({', '.join(impls)}) matches trainscope's masked kernel, key padding and causal, "
          "forward" + (" and gradients sdpa = math" if "sdpa" in impls else ""))


def check_loss():
    torch.manual_seed(6)
    n, vocab, eps = 12, 50, LABEL_SMOOTHING
    logits = torch.randn(n, vocab, dtype=torch.float64)
    labels = torch.randint(FIRST_WORD, vocab, (n,))
    labels[[3, 7, 11]] = PAD
    real = int(labels.ne(PAD).sum())
    got = smoothed_loss(logits, labels, real).item()
    # label_smoothed_ce_forward: sum over real rows of (1-eps)(lse - x_y) + eps(lse - mean_k x_k), / normaliser.
    lse = torch.logsumexp(logits, 1)
    rows = (1 - eps) * (lse - logits[torch.arange(n), labels]) + eps * (lse - logits.mean(1))
    want = (rows[labels.ne(PAD)].sum() / real).item()
    assert abs(got - want) < 1e-12, f"loss {got} vs trainscope's formula {want}"
    print(f"OK: label-smoothed loss = trainscope's formula ({got:.6f}, {n - real} padded rows ignored, "
          f"/ {real} tokens)")


def check_schedule():
    c = PRESETS["tiny"]
    p = nn.Parameter(torch.zeros(1))
    base = c["lr_factor"] / math.sqrt(c["d_model"])
    opt = torch.optim.Adam([p], lr=base, betas=BETAS, eps=ADAM_EPS)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda(c))
    for step in range(130):
        s1, w = step + 1.0, float(c["warmup"])
        want = base * min(1.0 / math.sqrt(s1), s1 * w ** -1.5)
        got = opt.param_groups[0]["lr"]
        assert abs(got - want) <= 1e-15 + 1e-12 * want, f"lr at step {step}: {got} vs {want}"
        p.grad = torch.zeros(1)
        opt.step()
        sched.step()
    print(f"OK: lr schedule = {c['lr_factor']} x d^-0.5 x min(s^-0.5, s x {c['warmup']}^-1.5), "
          "s = step + 1 (130 steps)")


def check_generator():
    import itertools
    for use_numpy in (False, True):
        g = transformer_batches.integers(5489, use_numpy)
        value = next(itertools.islice(g, 9999, None))
        assert value == 9981545732273789042, f"mt19937_64 (numpy={use_numpy}): 10000th output {value}"
    print("OK: the batch replay's std::mt19937_64 gives the standard's 10000th output (python and numpy paths)")


def check_params():
    for name in PRESETS:
        c = PRESETS[name]
        model = build_counted(c)
        n = count_params(model)
        names = [k for k, _ in model.named_parameters()]
        print(f"{name}: {n:,} parameters in {len(names)} tensors (trainscope: {TRAINSCOPE_PARAMS[name]:,}); "
              f"first {names[0]}, last {names[-1]}")
        assert n == closed_form_count(c), f"{name}: {n:,} parameters, the closed form gives {closed_form_count(c):,}"
        assert n == TRAINSCOPE_PARAMS[name], f"{name}: {n:,} parameters, trainscope has {TRAINSCOPE_PARAMS[name]:,}"
        tensors = 1 + c["encoder_layers"] * (4 * 2 + 2 * 2 + 2 * 2) + c["decoder_layers"] * (8 * 2 + 2 * 2 + 3 * 2)
        assert len(names) == tensors, f"{name}: {len(names)} parameter tensors, expected {tensors}"
        if name == "full":
            assert n == FULL_PARAMS, f"full preset has {n:,} parameters, expected {FULL_PARAMS:,}"
            assert "decoder.layers.5.encoder_attn_layer_norm.weight" in names
    print("OK: full = 63,082,496 parameters; tiny and small match trainscope")
    check_attention()
    check_loss()
    check_schedule()
    check_generator()


# ------------------------------------------------------------------ training run

def make_batches(shapes, vocab, gen):
    """Token batches of the given per-row lengths with random word ids: dicts of src, tgt_in,
    tgt_out ([B, S] / [B, T] int64, 0-padded) and the counts."""
    out = []
    for src_lens, tgt_lens in shapes:
        b, s, t = len(src_lens), max(src_lens), max(tgt_lens)
        src = torch.zeros(b, s, dtype=torch.long)
        tgt_in = torch.zeros(b, t, dtype=torch.long)
        tgt_out = torch.zeros(b, t, dtype=torch.long)
        src_words = torch.randint(FIRST_WORD, vocab, (b, s), generator=gen)
        tgt_words = torch.randint(FIRST_WORD, vocab, (b, t), generator=gen)
        for r, (ls, lt) in enumerate(zip(src_lens, tgt_lens)):
            src[r, : ls - 1] = src_words[r, : ls - 1]
            src[r, ls - 1] = EOS  # fairseq appends EOS to sources (src_eos)
            words = tgt_words[r, : lt - 1]  # lt = target words + 1
            tgt_in[r, 0] = BOS
            tgt_in[r, 1:lt] = words
            tgt_out[r, : lt - 1] = words
            tgt_out[r, lt - 1] = EOS
        out.append({"src": src, "tgt_in": tgt_in, "tgt_out": tgt_out.reshape(-1), "pairs": b, "S": s, "T": t,
                    "src_tokens": sum(src_lens), "tgt_tokens": sum(tgt_lens)})
    return out


def run(args):
    if args.channels_last:
        raise SystemExit("transformer_train.py: --channels-last does not apply to a sequence model")
    c = PRESETS[args.preset]
    impl = args.attention or ("sdpa" if HAVE_SDPA else "math")
    if impl == "sdpa" and not HAVE_SDPA:
        raise SystemExit(f"transformer_train.py: torch {torch.__version__} has no scaled_dot_product_attention; "
                         "use --attention math")
    max_tokens = args.batch if args.batch > 0 else c["max_tokens"]
    common.configure_torch(args)
    device = common.device_of(args)

    # trainscope's batch shapes for iterations 0 .. warmup + iters - 1 (pure Python, untimed).
    shapes = transformer_batches.training_batches(c["vocab"], c["max_length"], c["train_pairs"], max_tokens,
                                                  args.seed, args.warmup + args.iters)
    max_len = max(max(max(s), max(t)) for s, t in shapes)

    load_at_start = list(os.getloadavg())
    rss_before_model = common.rss_bytes()
    model = Transformer(c, max_positions=max_len, impl=impl).to(device)
    model.train()
    n_params = count_params(model)
    base_lr = c["lr_factor"] / math.sqrt(c["d_model"])
    opt = torch.optim.Adam(model.parameters(), lr=base_lr, betas=BETAS, eps=ADAM_EPS)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda(c))
    step_model = common.distribute(model, args)  # --ddp: DistributedDataParallel (gloo)
    step_model = torch.compile(step_model, dynamic=True) if args.compile else step_model

    # Data: generated once on the CPU, outside the timed region (then moved to the GPU); iteration k
    # trains on batches[k].
    gen = torch.Generator().manual_seed(args.seed)
    batches = make_batches(shapes, c["vocab"], gen)
    for b in batches:
        for k in ("src", "tgt_in", "tgt_out"):
            b[k] = b[k].to(device)
    feed = common.Replay(batches)

    common.profile_layers(model)

    def step():
        b = next(feed)
        with common.phase("forward"):
            logits = step_model(b["src"], b["tgt_in"])
            loss = smoothed_loss(logits, b["tgt_out"], b["tgt_tokens"])
        common.backward_and_step(loss, opt, sched)
        return loss.item()  # a sync point, like trainscope's loss.item() per iteration

    timing = common.time_iterations(step, args.warmup, args.iters, restart=feed.restart, sync=common.synchronize(args),
                                    after_warmup=common.device_memory_mark(args))
    memory = common.device_memory(args, timing)  # before anything else runs on the device
    timed = batches[args.warmup:]
    flops = None
    if common.mfu_wanted(args):
        # The model's FLOPs on every timed batch, after training (the peaks are read).
        flops = common.count_model_flops(
            [lambda b=b: smoothed_loss(step_model(b["src"], b["tgt_in"]), b["tgt_out"], b["tgt_tokens"])
             for b in timed])
        opt.zero_grad(set_to_none=True)
    config = {
        "preset": args.preset,
        "vocab": c["vocab"],
        "d_model": c["d_model"],
        "heads": c["heads"],
        "ffn": c["ffn"],
        "layers": f"{c['encoder_layers']} encoder + {c['decoder_layers']} decoder",
        "dropout": c["dropout"],
        "label_smoothing": LABEL_SMOOTHING,
        "batch_size": max_tokens,  # the token budget, as trainscope's batch_size for this workload
        "max_tokens": max_tokens,
        "max_length": c["max_length"],
        "train_pairs": c["train_pairs"],
        "parameters": n_params,
        "attention": impl,
        "memory_format": "contiguous",
        "compile": args.compile,
        "optimizer": "Adam betas 0.9/0.98, eps 1e-9, no weight decay",
        "learning_rate": f"{c['lr_factor']} x d^-0.5 x min(s^-0.5, s x {c['warmup']}^-1.5), s = step + 1",
        "data": "trainscope's batch shapes (transformer_batches.py replay, same seed and token budget), random ids",
        # One row per iteration, warm-up first: [pairs, S, T, source tokens (with EOS), target tokens (+1)].
        "batches": [[b["pairs"], b["S"], b["T"], b["src_tokens"], b["tgt_tokens"]] for b in batches],
        "warmup_iters": args.warmup,
        "timed_iters": args.iters,
        "seed": args.seed,
    }
    tokens = [b["src_tokens"] + b["tgt_tokens"] for b in timed]
    r = common.make_result("transformer", config, timing, [b["pairs"] for b in timed], RSS_BEFORE_IMPORT,
                           rss_before_model, load_at_start, tokens_per_iteration=tokens)
    # MFU per token (the workload's headline unit), over the timed batches' tokens.
    return common.add_device_fields(r, args, memory, flops, flop_units=sum(tokens), unit="token",
                                    rate_key="tokens_per_s")


def main():
    if ARGS.check_params:
        check_params()
        return
    r = run(ARGS)
    if not common.add_ddp_fields(r, ARGS):
        return  # --ddp: rank 0 reports the job
    c = r["config"]
    common.emit(r, ARGS.json, f"transformer {c['preset']} {c['max_tokens']}-token batches, attention {c['attention']}")


if __name__ == "__main__":
    main()
