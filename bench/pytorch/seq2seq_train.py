#!/usr/bin/env python3
"""PyTorch reference for trainscope's `seq2seq` workload (TF NMT's IWSLT15 en-vi attention model),
CPU training throughput.

Mirrors workloads/seq2seq/seq2seq.{h,cpp} in plain torch.nn:
  encoder   embedding [V_s, E], dropout, 2-layer torch.nn.LSTM over the packed source
            (pack_padded_sequence: padding costs nothing and the final states are each row's
            own), dropout between the layers; memory = the top layer's outputs, zeros at padding.
  decoder   embedding [V_t, E]; per target step (teacher forcing) the input is [embedding;
            previous attentional output] (input feeding; zeros at the first step), then per layer
            dropout and torch.nn.LSTMCell, starting from the encoder's final (h, c) of that layer;
            the top layer's output h queries Bahdanau attention: score_j = v . tanh(W_q h + W_k m_j)
            (W_k m projected once per batch, no biases), padded source positions masked,
            context = sum_j softmax(score)_j m_j; attentional output tanh(W_c [h; context]) (no bias).
  output    logits = W_out (attentional outputs) (no bias), time-major rows; cross-entropy summed
            over real target tokens (target + EOS, padding ignored) / their count.
  init      TF NMT's: every weight U(-0.1, 0.1); LSTM biases zero except bias_ih's forget-gate
            block 1 (TF's forget_bias; gates i, f, g, o as trainscope's).
  optimizer Adam (betas 0.9/0.999, eps 1e-8), gradient norm clipped at 5 (clip_grad_norm_),
            zero_grad(set_to_none=True).
  presets   as seq2seq_config():
            tiny  E = H = A = 32,  vocabularies 64 / 40,        batch 32,  max length 10, dropout 0,
                  lr 0.03, 4,000 training pairs                                        (46,624 parameters)
            small E = H = A = 256, vocabularies 8,000 / 3,600,  batch 128, max length 50, dropout 0.2,
                  lr 0.001, 133,317 pairs                                             (6,521,088)
            full  E = H = A = 512, vocabularies 17,191 / 7,709, batch 128, max length 50, dropout 0.2,
                  lr 0.001, 133,317 pairs                                             (27,198,464)
            (2 + 2 layers and 5 length buckets everywhere).
  data      trainscope's own batch shapes: seq2seq_batches.py replays the synthetic corpus's sentence
            lengths (including the two-token target codes of rare words) and the bucketed pair
            batcher, so iteration k here has the pairs, padded lengths S and T and per-row lengths
            of iteration k of `trainscope run seq2seq --seed N` (same --seed, same --batch). Token
            ids are random words (not the grammar's sentences); sources carry no EOS (TF NMT), the
            decoder input is BOS + target, the labels target + EOS, padding 0. All batches are
            built before the timed region.
  reported  samples/s = sentence pairs per second and tokens/s = real source plus target (+ 1)
            tokens per second, per iteration, as trainscope counts them.

--batch is the number of pairs per batch (trainscope's --batch). --channels-last does not apply
to a sequence model and is refused.

Usage:
  python3 bench/pytorch/seq2seq_train.py --preset small --threads 2 --iters 20 --warmup 3 --json
  python3 bench/pytorch/seq2seq_train.py --check-params
"""
import os

import common
import seq2seq_batches

PRESETS = {
    # seq2seq_config(): vocabularies, widths, layers, dropout, batch (pairs), buckets, max_length,
    # learning rate, train_pairs
    "tiny": dict(src_vocab=64, tgt_vocab=40, embedding=32, hidden=32, attention=32, layers=2, dropout=0.0,
                 batch=32, buckets=5, max_length=10, lr=0.03, train_pairs=4000),
    "small": dict(src_vocab=8000, tgt_vocab=3600, embedding=256, hidden=256, attention=256, layers=2, dropout=0.2,
                  batch=128, buckets=5, max_length=50, lr=0.001, train_pairs=133317),
    "full": dict(src_vocab=17191, tgt_vocab=7709, embedding=512, hidden=512, attention=512, layers=2, dropout=0.2,
                 batch=128, buckets=5, max_length=50, lr=0.001, train_pairs=133317),
}
INIT_RANGE = 0.1
MAX_GRAD_NORM = 5.0
PAD, BOS, EOS, FIRST_WORD = 0, 1, 2, 4  # text_data.h: <pad> <s> </s> <unk>, then the words
FULL_PARAMS = 27_198_464
# `trainscope list` (build/default/cli/trainscope list).
TRAINSCOPE_PARAMS = {"tiny": 46_624, "small": 6_521_088, "full": 27_198_464}

ARGS, RSS_BEFORE_IMPORT = common.prepare(
    __doc__, PRESETS,
    "assert the full preset has 27,198,464 parameters and tiny/small trainscope's counts; check the attention, "
    "the initialisation and the batch replay's lexicon; then exit")

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence  # noqa: E402


def dropout(x, p, training):
    """trainscope skips the op when p is 0 (tiny); so does this."""
    return F.dropout(x, p, training) if (training and p > 0.0) else x


class BahdanauAttention(nn.Module):
    def __init__(self, query_size, memory_size, units):
        super().__init__()
        self.query_proj = nn.Linear(query_size, units, bias=False)
        self.key_proj = nn.Linear(memory_size, units, bias=False)
        self.v = nn.Parameter(torch.empty(units))

    def keys(self, memory):
        return self.key_proj(memory)  # [B, S, A], once per batch

    def forward(self, query, keys, memory, mask):
        """query [B, H], keys [B, S, A], memory [B, S, D], mask [B, S] (True: a real position)."""
        scores = torch.tanh(self.query_proj(query)[:, None, :] + keys) @ self.v  # [B, S]
        p = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=1)
        return torch.bmm(p[:, None, :], memory).squeeze(1)


class Encoder(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.p = c["dropout"]
        self.embedding = nn.Embedding(c["src_vocab"], c["embedding"])
        # dropout= applies between layers: with the dropout on the embedding below, every layer's
        # input is dropped, as trainscope (and TF NMT's DropoutWrapper) do.
        self.lstm = nn.LSTM(c["embedding"], c["hidden"], num_layers=c["layers"], dropout=c["dropout"])

    def forward(self, src, lengths):
        """src [S, B] time-major, lengths [B] (CPU int64) -> memory [B, S, H], (h_n, c_n) [L, B, H]."""
        x = dropout(self.embedding(src), self.p, self.training)
        packed = pack_padded_sequence(x, lengths, enforce_sorted=False)
        out, (h, c) = self.lstm(packed)
        memory, _ = pad_packed_sequence(out, total_length=src.shape[0])  # zeros at padding
        return memory.transpose(0, 1), h, c


class Decoder(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.p, self.hidden = c["dropout"], c["hidden"]
        self.embedding = nn.Embedding(c["tgt_vocab"], c["embedding"])
        self.lstm = nn.ModuleList(
            [nn.LSTMCell(c["embedding"] + c["hidden"] if l == 0 else c["hidden"], c["hidden"]) for l in range(c["layers"])])
        self.attention = BahdanauAttention(c["hidden"], c["hidden"], c["attention"])
        self.attention_layer = nn.Linear(2 * c["hidden"], c["hidden"], bias=False)
        self.output_proj = nn.Linear(c["hidden"], c["tgt_vocab"], bias=False)

    def forward(self, tgt_in, memory, mask, h, c):
        """tgt_in [T, B] -> attentional outputs [T, B, H]."""
        keys = self.attention.keys(memory)
        h, c = list(h.unbind(0)), list(c.unbind(0))
        attentional = memory.new_zeros(memory.shape[0], self.hidden)
        outputs = []
        for emb in self.embedding(tgt_in).unbind(0):
            x = torch.cat([emb, attentional], 1)
            for l, cell in enumerate(self.lstm):
                h[l], c[l] = cell(dropout(x, self.p, self.training), (h[l], c[l]))
                x = h[l]
            context = self.attention(x, keys, memory, mask)
            attentional = torch.tanh(self.attention_layer(torch.cat([x, context], 1)))
            outputs.append(attentional)
        return torch.stack(outputs)


class Seq2Seq(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.encoder = Encoder(c)
        self.decoder = Decoder(c)
        init_like_tf_nmt(self)

    def forward(self, src, src_lengths, tgt_in):
        """src [S, B], tgt_in [T, B] int64 ids (time-major, 0: padding) -> logits [T B, V_t]."""
        memory, h, c = self.encoder(src, src_lengths)
        mask = torch.arange(src.shape[0])[None, :] < src_lengths[:, None]
        out = self.decoder(tgt_in, memory, mask, h, c)
        return self.decoder.output_proj(out.reshape(-1, self.c["hidden"]))


def init_like_tf_nmt(model):
    """Every parameter U(-0.1, 0.1); LSTM biases 0 with bias_ih's forget-gate block (i, f, g, o) 1."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.rsplit(".", 1)[-1].startswith("bias_"):  # LSTM biases (nothing else has one)
                p.zero_()
                if "bias_ih" in name:
                    h = p.shape[0] // 4
                    p[h:2 * h] = 1.0
            else:
                p.uniform_(-INIT_RANGE, INIT_RANGE)


def closed_form_count(c):
    """seq2seq_parameter_count()."""
    e, h, a, layers = c["embedding"], c["hidden"], c["attention"], c["layers"]
    upper = (layers - 1) * (8 * h * h + 8 * h)
    encoder = 4 * h * (e + h) + 8 * h + upper
    decoder = 4 * h * (e + 2 * h) + 8 * h + upper
    return (c["src_vocab"] + c["tgt_vocab"]) * e + encoder + decoder + (2 * h * a + a) + 2 * h * h + h * c["tgt_vocab"]


def count_params(model):
    return sum(p.numel() for p in model.parameters())


def build_counted(c):
    """The model on the meta device where PyTorch has one."""
    if hasattr(torch, "device") and hasattr(torch.device("cpu"), "__enter__"):
        with torch.device("meta"):
            return Seq2Seq(c)
    return Seq2Seq(c)


def loss_fn(logits, labels, tgt_tokens):
    return F.cross_entropy(logits, labels, ignore_index=PAD, reduction="sum") / tgt_tokens


# ------------------------------------------------------------------ --check-params

def check_attention():
    """The vectorised attention against trainscope's formula row by row, with padding."""
    torch.manual_seed(5)
    b, s, h, a = 3, 6, 8, 5
    att = BahdanauAttention(h, h, a).double()
    nn.init.uniform_(att.v, -1, 1)
    q, memory = torch.randn(b, h, dtype=torch.float64), torch.randn(b, s, h, dtype=torch.float64)
    lengths = torch.tensor([6, 2, 4])
    mask = torch.arange(s)[None, :] < lengths[:, None]
    got = att(q, att.keys(memory), memory, mask)
    for n in range(b):
        k = lengths[n].item()
        scores = torch.stack([att.v @ torch.tanh(att.query_proj.weight @ q[n] + att.key_proj.weight @ memory[n, j])
                              for j in range(k)])
        want = torch.softmax(scores, 0) @ memory[n, :k]
        err = (got[n] - want).abs().max().item()
        assert err < 1e-12, f"attention row {n}: max error {err:.2e}"
    print("OK: Bahdanau attention = sum_j softmax(v . tanh(W_q q + W_k m_j))_j m_j over the real positions")


def check_init():
    c = PRESETS["tiny"]
    model = Seq2Seq(c)
    for name, p in model.named_parameters():
        if "bias_ih" in name:
            h = p.shape[0] // 4
            assert p[h:2 * h].eq(1).all() and p[:h].eq(0).all() and p[2 * h:].eq(0).all(), name
        elif "bias_hh" in name:
            assert p.eq(0).all(), name
        else:
            assert p.abs().max().item() <= INIT_RANGE, name
    print("OK: initialisation U(-0.1, 0.1), LSTM biases 0 with forget-gate bias 1")


def check_replay():
    """The replayed lexicon's properties that trainscope's data tests pin down: with en-vi's
    vocabularies most tokens have one-token codes, targets run longer than sources, and every
    length is within the limit."""
    c = PRESETS["tiny"]
    lengths = seq2seq_batches.corpus_lengths(c["src_vocab"], c["tgt_vocab"], c["max_length"], 500)
    assert all(1 <= s <= c["max_length"] and s <= t <= c["max_length"] for s, t in lengths)
    lex = seq2seq_batches.Lexicon(17191, 7709)
    two = sum(l == 2 for cls in lex.code_len for l in cls)
    assert 0 < two < 17187, two
    print(f"OK: batch replay: tiny lengths within 1..{c['max_length']}, targets >= sources; full lexicon "
          f"{17187 - two:,} one-token and {two:,} two-token codes")


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
        if name == "full":
            assert n == FULL_PARAMS, f"full preset has {n:,} parameters, expected {FULL_PARAMS:,}"
    print("OK: full = 27,198,464 parameters; tiny and small match trainscope")
    check_attention()
    check_init()
    check_replay()


# ------------------------------------------------------------------ training run

def make_batches(shapes, c, gen):
    """Time-major token batches of the given per-row lengths with random word ids."""
    out = []
    for src_lens, tgt_lens in shapes:
        b, s, t = len(src_lens), max(src_lens), max(tgt_lens)
        src = torch.zeros(s, b, dtype=torch.long)
        tgt_in = torch.zeros(t, b, dtype=torch.long)
        tgt_out = torch.zeros(t, b, dtype=torch.long)
        src_words = torch.randint(FIRST_WORD, c["src_vocab"], (s, b), generator=gen)
        tgt_words = torch.randint(FIRST_WORD, c["tgt_vocab"], (t, b), generator=gen)
        for r, (ls, lt) in enumerate(zip(src_lens, tgt_lens)):
            src[:ls, r] = src_words[:ls, r]  # no EOS on sources (TF NMT)
            words = tgt_words[: lt - 1, r]  # lt = target words + 1
            tgt_in[0, r] = BOS
            tgt_in[1:lt, r] = words
            tgt_out[: lt - 1, r] = words
            tgt_out[lt - 1, r] = EOS
        out.append({"src": src, "src_lengths": torch.tensor(src_lens), "tgt_in": tgt_in,
                    "tgt_out": tgt_out.reshape(-1), "pairs": b, "S": s, "T": t,
                    "src_tokens": sum(src_lens), "tgt_tokens": sum(tgt_lens)})
    return out


def run(args):
    if args.channels_last:
        raise SystemExit("seq2seq_train.py: --channels-last does not apply to a sequence model")
    if args.compile:
        raise SystemExit("seq2seq_train.py: --compile is not supported (the decoder is a Python loop over steps)")
    c = dict(PRESETS[args.preset])
    if args.batch > 0:
        c["batch"] = args.batch
    common.configure_torch(args)

    # trainscope's batch shapes for iterations 0 .. warmup + iters - 1 (pure Python, untimed).
    shapes = seq2seq_batches.training_batches(c["src_vocab"], c["tgt_vocab"], c["max_length"], c["train_pairs"],
                                              c["batch"], c["buckets"], args.seed, args.warmup + args.iters)

    load_at_start = list(os.getloadavg())
    rss_before_model = common.rss_bytes()
    model = Seq2Seq(c)
    model.train()
    n_params = count_params(model)
    opt = torch.optim.Adam(model.parameters(), lr=c["lr"])

    gen = torch.Generator().manual_seed(args.seed)
    batches = make_batches(shapes, c, gen)
    feed = common.Replay(batches)

    common.profile_layers(model)

    def step():
        b = next(feed)
        with common.phase("forward"):
            logits = model(b["src"], b["src_lengths"], b["tgt_in"])
            loss = loss_fn(logits, b["tgt_out"], b["tgt_tokens"])
        common.backward_and_step(loss, opt, clip=(model.parameters(), MAX_GRAD_NORM))
        return loss.item()

    timing = common.time_iterations(step, args.warmup, args.iters, restart=feed.restart)
    timed = batches[args.warmup:]
    config = {
        "preset": args.preset,
        "src_vocab": c["src_vocab"],
        "tgt_vocab": c["tgt_vocab"],
        "embedding": c["embedding"],
        "hidden": c["hidden"],
        "attention": c["attention"],
        "layers": f"{c['layers']} encoder + {c['layers']} decoder LSTM layers",
        "dropout": c["dropout"],
        "batch_size": c["batch"],
        "buckets": c["buckets"],
        "max_length": c["max_length"],
        "train_pairs": c["train_pairs"],
        "parameters": n_params,
        "memory_format": "contiguous",
        "compile": False,
        "optimizer": f"Adam {c['lr']} (betas 0.9/0.999, eps 1e-8), gradient norm clipped at {MAX_GRAD_NORM}",
        "data": "trainscope's batch shapes (seq2seq_batches.py replay, same seed and batch), random ids",
        # One row per iteration, warm-up first: [pairs, S, T, source tokens, target tokens (+1)].
        "batches": [[b["pairs"], b["S"], b["T"], b["src_tokens"], b["tgt_tokens"]] for b in batches],
        "warmup_iters": args.warmup,
        "timed_iters": args.iters,
        "seed": args.seed,
    }
    return common.make_result("seq2seq", config, timing, [b["pairs"] for b in timed], RSS_BEFORE_IMPORT,
                              rss_before_model, load_at_start,
                              tokens_per_iteration=[b["src_tokens"] + b["tgt_tokens"] for b in timed])


def main():
    if ARGS.check_params:
        check_params()
        return
    r = run(ARGS)
    c = r["config"]
    common.emit(r, ARGS.json, f"seq2seq {c['preset']} batch {c['batch_size']}")


if __name__ == "__main__":
    main()
