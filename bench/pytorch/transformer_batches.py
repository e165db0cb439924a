"""The batch shapes of trainscope's `transformer` workload, recomputed in Python (no torch; numpy,
where it imports, only speeds up the random generator, with the same output).

trainscope trains on the synthetic language pair of workloads/data/text_data.{h,cpp} and batches it
by token budget (plan_token_batches, fairseq's batch_by_size). The sizes of a batch (pairs B,
padded source length S, padded target length T, and each row's real lengths) depend only on the
sentence *lengths*, and those depend only on the grammar's structural choices: every word draw
consumes exactly one uniform from the generator whatever word it picks. So this module replays
the corpus generator's random stream (std::mt19937_64, engine::Rng's transforms) through the
grammar's structure, without the lexicon, and then replays the batcher: the same pairs, the same
plan and the same batch order as `trainscope run transformer --seed N`. side_by_side.sh checks
the result against the pairs and tokens per iteration that its trainscope runs recorded.

What is replayed (text_data.cpp):
  corpus     engine::Rng(2015 * 0x9e3779b97f4a7c15 + 0x7ea1) (SyntheticTextOptions.seed, the
             training stream); train_pairs pairs from SyntheticTranslation::sample(): sentences
             over max_length tokens on either side are drawn again.
  target     translate(): when the shared vocabulary's V - 6 words split evenly into source and
             target words (V = 200, 8,000, 37,000: the three presets), every source word has a
             one-token code, so the target has the source's tokens plus one `@pl` per plural noun
             phrase and one `@agr` per clause with a plural subject.
  batches    TextBatcher(seed): engine::Rng(seed ^ 0xba7c4e5); plan_token_batches(train,
             max_tokens, src_eos = true): Fisher-Yates shuffle of the pair indices, stable sort by
             (max(s, t), t, s) with s = source + EOS and t = target + 1, greedy packing while
             B x max(S, T) <= max_tokens, Fisher-Yates shuffle of the batches; a new plan from the
             same generator when an epoch ends.
Cost: about 2 s for the 133,317 pairs of small or full, 0.4 s for tiny's 4,000 (with numpy, on
the development VM); transformer_train.py does this before its timed region.
"""

import itertools

MASK64 = (1 << 64) - 1
N, M = 312, 156
MATRIX_A, UPPER, LOWER = 0xB5026F5AA96619E9, 0xFFFFFFFF80000000, 0x7FFFFFFF
TEMPER = ((29, 0x5555555555555555), (17, 0x71D67FFFEDA60000), (37, 0xFFF7EEE000000000), 43)


def _seed_state(seed):
    mt = [seed & MASK64]
    for i in range(1, N):
        prev = mt[-1]
        mt.append((6364136223846793005 * (prev ^ (prev >> 62)) + i) & MASK64)
    return mt


def _blocks_python(seed):
    """std::mt19937_64 seeded with one 64-bit value, bit for bit: its outputs, 312 at a time."""
    (s1, b1), (s2, b2), (s3, b3), s4 = TEMPER
    a, up, lo = MATRIX_A, UPPER, LOWER
    mt = _seed_state(seed)
    while True:
        # The twist, mt[i] = mt[i + M] ^ A(upper(mt[i]) | lower(mt[i + 1])), in slices: the first
        # N - M entries read old values only, the next ones also the first slice's new values.
        head = [x ^ (((y & up) | (z & lo)) >> 1) ^ (a if z & 1 else 0)
                for x, y, z in zip(mt[M:], mt[:N - M], mt[1:N - M + 1])]
        tail = [x ^ (((y & up) | (z & lo)) >> 1) ^ (a if z & 1 else 0)
                for x, y, z in zip(head[:M - 1], mt[N - M:N - 1], mt[N - M + 1:])]
        z = head[0]
        tail.append(head[M - 1] ^ (((mt[N - 1] & up) | (z & lo)) >> 1) ^ (a if z & 1 else 0))
        mt = head + tail
        out = [y ^ ((y >> s1) & b1) for y in mt]  # tempering
        out = [y ^ ((y << s2) & b2) for y in out]
        out = [y ^ ((y << s3) & b3) for y in out]
        yield [y ^ (y >> s4) for y in out]


def _blocks_numpy(seed, np, twists=64):
    """The same as _blocks_python, `twists` x 312 outputs at a time, as a uint64 array."""
    u64 = np.uint64
    (s1, b1), (s2, b2), (s3, b3), s4 = [(u64(s), u64(b)) for s, b in TEMPER[:3]] + [u64(TEMPER[3])]
    a, up, lo, one = u64(MATRIX_A), u64(UPPER), u64(LOWER), u64(1)
    mt = np.array(_seed_state(seed), dtype=np.uint64)

    def twist(x, y, z):
        return x ^ (((y & up) | (z & lo)) >> one) ^ ((z & one) * a)

    while True:
        out = np.empty(twists * N, dtype=np.uint64)
        for t in range(twists):
            new = np.empty(N, dtype=np.uint64)
            new[:N - M] = twist(mt[M:], mt[:N - M], mt[1:N - M + 1])
            new[N - M:N - 1] = twist(new[:M - 1], mt[N - M:N - 1], mt[N - M + 1:])
            new[N - 1:] = twist(new[M - 1:M], mt[N - 1:], new[:1])
            mt = new
            out[t * N:(t + 1) * N] = mt
        out ^= (out >> s1) & b1
        out ^= (out << s2) & b2
        out ^= (out << s3) & b3
        out ^= out >> s4
        yield out


def _numpy():
    try:
        import numpy
        return numpy
    except ImportError:
        return None


def uniforms(seed, use_numpy=True):
    """engine::Rng(seed).uniform() values, (gen() >> 11) * 2^-53, as an iterator."""
    scale = 1.0 / 9007199254740992.0
    np = _numpy() if use_numpy else None
    if np is None:
        blocks = ([(y >> 11) * scale for y in block] for block in _blocks_python(seed))
    else:
        blocks = (((b >> np.uint64(11)).astype(np.float64) * scale).tolist() for b in _blocks_numpy(seed, np))
    return itertools.chain.from_iterable(blocks)


def integers(seed, use_numpy=True):
    """engine::Rng(seed)'s raw gen() values (integer(n) is gen() % n), as an iterator."""
    np = _numpy() if use_numpy else None
    blocks = _blocks_python(seed) if np is None else (b.tolist() for b in _blocks_numpy(seed, np))
    return itertools.chain.from_iterable(blocks)


# The grammar's probabilities (text_data.cpp).
P_PLURAL, P_NUMBER, P_FIRST_ADJ, P_MORE_ADJ = 0.4, 0.3, 0.5, 0.4
P_OBJECT, P_VERB_PP, P_ADVERB, P_MORE_CLAUSES = 0.7, 0.3, 0.3, 0.55
MAX_ADJ, MAX_CLAUSES, MAX_DEPTH = 3, 4, 2
P_NOUN_PP = (0.25, 0.1)
MAX_ATTEMPTS = 10000
CORPUS_SEED = 2015  # SyntheticTextOptions.seed: the language and the sentences, not the run's --seed
TRAIN_STREAM = 0x7EA1
BATCHER_SALT = 0xBA7C4E5
SPECIALS, MARKERS = 4, 2


def _noun_phrase(u, depth):
    """sample_np: returns (source tokens, plural noun phrases, this phrase plural)."""
    plural = u() < P_PLURAL
    u()  # determiner
    n, plurals = 2, int(plural)  # determiner + noun
    if plural and u() < P_NUMBER:
        u()
        n += 1
    a = 0
    while a < MAX_ADJ and u() < (P_FIRST_ADJ if a == 0 else P_MORE_ADJ):
        u()
        n += 1
        a += 1
    u()  # noun
    if depth < MAX_DEPTH and u() < P_NOUN_PP[depth]:
        u()  # preposition
        sn, sp, _ = _noun_phrase(u, depth + 1)
        n += 1 + sn
        plurals += sp
    return n, plurals, plural


def _clause(u):
    """sample_clause: returns (source tokens, extra target tokens: @pl per plural NP, @agr if the subject is plural)."""
    n, extra, subject_plural = _noun_phrase(u, 0)
    u()  # verb
    n += 1
    if u() < P_OBJECT:
        sn, sp, _ = _noun_phrase(u, 0)
        n += sn
        extra += sp
    if u() < P_VERB_PP:
        u()  # preposition
        sn, sp, _ = _noun_phrase(u, 1)
        n += 1 + sn
        extra += sp
    if u() < P_ADVERB:
        u()  # adverb
        n += 1
    return n, extra + int(subject_plural)


def sample_lengths(u, max_length):
    """SyntheticTranslation::sample (min_length 1): (source tokens, target tokens) of one pair;
    u() is the generator's next uniform."""
    for _ in range(MAX_ATTEMPTS):
        src, extra = _clause(u)
        clauses = 1
        while clauses < MAX_CLAUSES and u() < P_MORE_CLAUSES:
            u()  # conjunction
            n, e = _clause(u)
            src += 1 + n
            extra += e
            clauses += 1
        if src > max_length:
            continue
        if src + extra <= max_length:
            return src, src + extra
    raise RuntimeError(f"no sentence pair within {max_length} tokens in {MAX_ATTEMPTS} draws")


def corpus_lengths(vocab, max_length, train_pairs):
    """(source, target) token counts (no BOS/EOS) of the synthetic training split."""
    words = vocab - SPECIALS - MARKERS
    n_src = (words + 1) // 2
    if words - n_src < n_src:
        raise ValueError(f"vocabulary {vocab}: fewer target than source words, so some codes have two tokens; "
                         "their lengths depend on the words, which this replay does not model")
    u = uniforms((CORPUS_SEED * 0x9E3779B97F4A7C15 + TRAIN_STREAM) & MASK64).__next__
    return [sample_lengths(u, max_length) for _ in range(train_pairs)]


def _shuffle(v, gen):
    """shuffle_in_place: Fisher-Yates with j = gen() % i."""
    for i in range(len(v), 1, -1):
        j = next(gen) % i
        v[i - 1], v[j] = v[j], v[i - 1]


def plan_token_batches(lengths, max_tokens, gen):
    """plan_token_batches with src_eos: lists of pair indices."""
    key_len = [(s + 1, t + 1) for s, t in lengths]  # source + EOS (never below 1 here), target + 1
    order = list(range(len(lengths)))
    _shuffle(order, gen)
    order.sort(key=lambda i: (max(key_len[i]), key_len[i][1], key_len[i][0]))  # stable
    plan, current, S, T = [], [], 0, 0
    for i in order:
        s, t = key_len[i]
        if max(s, t) > max_tokens:
            raise ValueError(f"pair {i} alone pads to {max(s, t)} tokens, over the budget of {max_tokens}")
        ns, nt = max(S, s), max(T, t)
        if (len(current) + 1) * max(ns, nt) > max_tokens:
            plan.append(current)
            current, S, T = [], s, t
        else:
            S, T = ns, nt
        current.append(i)
    if current:
        plan.append(current)
    _shuffle(plan, gen)
    return plan


def training_batches(vocab, max_length, train_pairs, max_tokens, seed, count):
    """The first `count` training batches of `trainscope run transformer --seed seed` with token
    budget max_tokens: for each, (src_lengths with EOS, tgt_lengths = target + 1), row by row."""
    lengths = corpus_lengths(vocab, max_length, train_pairs)
    gen = integers((seed ^ BATCHER_SALT) & MASK64)
    plan, cursor, out = plan_token_batches(lengths, max_tokens, gen), 0, []
    while len(out) < count:
        if cursor == len(plan):
            plan, cursor = plan_token_batches(lengths, max_tokens, gen), 0
        rows = plan[cursor]
        cursor += 1
        out.append(([lengths[i][0] + 1 for i in rows], [lengths[i][1] + 1 for i in rows]))
    return out
