"""The batch shapes of trainscope's `seq2seq` workload, recomputed in Python (no torch; numpy, where
it imports, only speeds up the random generator, with the same output).

trainscope trains seq2seq on the synthetic language pair of workloads/data/text_data.{h,cpp} with
separate source and target vocabularies (17,191 / 7,709 for full), batched by sentence count in
length buckets (plan_pair_batches, TF NMT's bucketing). A batch's sizes (pairs B, padded source
length S, padded target length T, each row's real lengths) depend only on sentence lengths. With a
target vocabulary smaller than the source's, the less frequent source words translate into two
target tokens, so a target's length depends on which words were drawn: this module rebuilds the
part of the lexicon that decides it (word classes, their Zipf tables, the frequency order that
gives the frequent words one-token codes), replays the corpus generator's random stream through
the grammar, drawing the words, and then replays the batcher: the same pairs, plan and batch order
as `trainscope run seq2seq --seed N` (same --batch). The generator and the grammar's structure
come from transformer_batches.py.

What is replayed (text_data.cpp):
  lexicon    SyntheticTranslation's constructor: class_sizes(n_src), Zipf cdfs (exponent 1),
             class_weights(), words ordered by expected frequency (stable); the first `singles`
             get one-token codes, the rest two (the shuffles that pick the tokens do not change
             lengths, so they are not replayed).
  corpus     engine::Rng(2015 * 0x9e3779b97f4a7c15 + 0x7ea1); train_pairs pairs from sample():
             every word draw is uniform() * cdf.back() located by upper_bound; pairs with either
             side over max_length are drawn again; target length = the source words' code
             lengths + one `@pl` per plural noun phrase + one `@agr` per clause with a plural subject.
  batches    TextBatcher(seed): engine::Rng(seed ^ 0xba7c4e5); plan_pair_batches(train, batch,
             buckets): Fisher-Yates shuffle of the pair indices, bucket = min(buckets - 1,
             max(s, t) // width) with width = (longest + buckets) // buckets, each bucket cut into
             batches of `batch` in order, Fisher-Yates shuffle of the batches; a new plan from the
             same generator when an epoch ends. Sources carry no EOS (TF NMT); targets + 1.
Cost: a few seconds for the 133,317 pairs of small or full (with numpy), well under one for tiny.
"""

import bisect

import transformer_batches as tb

# WordClass order (text_data.h).
DET_SG, DET_PL, NUMBER, ADJECTIVE, NOUN, VERB, ADVERB, PREPOSITION, CONJUNCTION = range(9)
CLASSES = 9


def class_weights():
    """Expected tokens of each class per clause (class_weights() in text_data.cpp, same order of
    floating-point operations, so the frequency order below ties and breaks ties as there)."""
    w = [0.0] * CLASSES
    adj = tb.P_FIRST_ADJ * (1 + tb.P_MORE_ADJ * (1 + tb.P_MORE_ADJ))

    def np_(depth, times):
        w[DET_SG] += times * (1 - tb.P_PLURAL)
        w[DET_PL] += times * tb.P_PLURAL
        w[NUMBER] += times * tb.P_PLURAL * tb.P_NUMBER
        w[ADJECTIVE] += times * adj
        w[NOUN] += times
        if depth < tb.MAX_DEPTH:
            w[PREPOSITION] += times * tb.P_NOUN_PP[depth]
            np_(depth + 1, times * tb.P_NOUN_PP[depth])

    np_(0, 1.0 + tb.P_OBJECT)
    w[VERB] += 1
    w[PREPOSITION] += tb.P_VERB_PP
    np_(1, tb.P_VERB_PP)
    w[ADVERB] += tb.P_ADVERB
    w[CONJUNCTION] += tb.P_MORE_CLAUSES
    return w


def class_sizes(n):
    s = [0] * CLASSES

    def closed(c, natural, share):
        s[c] = min(max(int(float(n) * share), 1), natural)

    closed(DET_SG, 5, 0.03)
    closed(DET_PL, 5, 0.03)
    closed(NUMBER, 12, 0.05)
    closed(PREPOSITION, 20, 0.08)
    closed(CONJUNCTION, 5, 0.03)
    rest = n - s[DET_SG] - s[DET_PL] - s[NUMBER] - s[PREPOSITION] - s[CONJUNCTION]

    def open_(c, share):
        s[c] = max(1, int(float(rest) * share))

    open_(ADJECTIVE, 0.22)
    open_(VERB, 0.18)
    open_(ADVERB, 0.08)
    s[NOUN] = rest - s[ADJECTIVE] - s[VERB] - s[ADVERB]
    return s


class Lexicon:
    """Per word class: the Zipf cdf and, per rank, the length of the word's target code."""

    def __init__(self, src_vocab, tgt_vocab):
        n_src = src_vocab - tb.SPECIALS
        n_tgt = tgt_vocab - tb.SPECIALS - tb.MARKERS
        if n_src < CLASSES or n_tgt < 2 or n_tgt > 2 * n_src:
            raise ValueError(f"vocabularies {src_vocab}/{tgt_vocab}: outside what the synthetic grammar accepts")
        sizes = class_sizes(n_src)
        self.cdf = []
        for c in range(CLASSES):
            total, cdf = 0.0, []
            for r in range(sizes[c]):
                total += 1.0 / float(r + 1) ** 1.0
                cdf.append(total)
            self.cdf.append(cdf)
        weights = class_weights()
        by_freq = []
        for c in range(CLASSES):
            cdf = self.cdf[c]
            for r in range(len(cdf)):
                share = (cdf[r] - (cdf[r - 1] if r else 0.0)) / cdf[-1]
                by_freq.append((weights[c] * share, c, r))
        by_freq.sort(key=lambda e: -e[0])  # stable, as std::stable_sort with a > b
        if n_tgt >= n_src:
            singles = n_src - (n_tgt - n_src)
        else:
            needed = (n_src - n_tgt + n_tgt - 2) // (n_tgt - 1)
            heads = min(n_tgt - 1, max(needed, n_tgt // 5))
            singles = n_tgt - heads
        self.code_len = [[0] * sizes[c] for c in range(CLASSES)]
        for k, (_, c, r) in enumerate(by_freq):
            self.code_len[c][r] = 1 if k < singles else 2

    def draw(self, u, c):
        """draw(): the code length of the word drawn from class c."""
        cdf = self.cdf[c]
        r = min(bisect.bisect_right(cdf, u() * cdf[-1]), len(cdf) - 1)
        return self.code_len[c][r]


def _noun_phrase(lex, u, depth):
    """sample_np + parse_np: (source tokens, target tokens, plural)."""
    plural = u() < tb.P_PLURAL
    src, tgt = 1, lex.draw(u, DET_PL if plural else DET_SG)
    if plural and u() < tb.P_NUMBER:
        src, tgt = src + 1, tgt + lex.draw(u, NUMBER)
    a = 0
    while a < tb.MAX_ADJ and u() < (tb.P_FIRST_ADJ if a == 0 else tb.P_MORE_ADJ):
        src, tgt = src + 1, tgt + lex.draw(u, ADJECTIVE)
        a += 1
    src, tgt = src + 1, tgt + lex.draw(u, NOUN) + int(plural)  # @pl after a plural noun
    if depth < tb.MAX_DEPTH and u() < tb.P_NOUN_PP[depth]:
        tgt += lex.draw(u, PREPOSITION)
        s, t, _ = _noun_phrase(lex, u, depth + 1)
        src, tgt = src + 1 + s, tgt + t
    return src, tgt, plural


def _clause(lex, u):
    src, tgt, subject_plural = _noun_phrase(lex, u, 0)
    src, tgt = src + 1, tgt + lex.draw(u, VERB) + int(subject_plural)  # @agr after the verb
    if u() < tb.P_OBJECT:
        s, t, _ = _noun_phrase(lex, u, 0)
        src, tgt = src + s, tgt + t
    if u() < tb.P_VERB_PP:
        tgt += lex.draw(u, PREPOSITION)
        s, t, _ = _noun_phrase(lex, u, 1)
        src, tgt = src + 1 + s, tgt + t
    if u() < tb.P_ADVERB:
        src, tgt = src + 1, tgt + lex.draw(u, ADVERB)
    return src, tgt


def sample_lengths(lex, u, max_length):
    """SyntheticTranslation::sample (min_length 1): (source tokens, target tokens) of one pair."""
    for _ in range(tb.MAX_ATTEMPTS):
        src, tgt = _clause(lex, u)
        clauses = 1
        while clauses < tb.MAX_CLAUSES and u() < tb.P_MORE_CLAUSES:
            tgt += lex.draw(u, CONJUNCTION)
            s, t = _clause(lex, u)
            src, tgt = src + 1 + s, tgt + t
            clauses += 1
        if src > max_length:
            continue
        if tgt <= max_length:
            return src, tgt
    raise RuntimeError(f"no sentence pair within {max_length} tokens in {tb.MAX_ATTEMPTS} draws")


def corpus_lengths(src_vocab, tgt_vocab, max_length, train_pairs):
    """(source, target) token counts (no BOS/EOS) of the synthetic training split."""
    lex = Lexicon(src_vocab, tgt_vocab)
    u = tb.uniforms((tb.CORPUS_SEED * 0x9E3779B97F4A7C15 + tb.TRAIN_STREAM) & tb.MASK64).__next__
    return [sample_lengths(lex, u, max_length) for _ in range(train_pairs)]


def plan_pair_batches(lengths, batch, buckets, gen):
    """plan_pair_batches with a shuffle: lists of pair indices."""
    order = list(range(len(lengths)))
    tb._shuffle(order, gen)
    if buckets == 1:
        groups = [order]
    else:
        key = [max(s, t) for s, t in lengths]
        width = (max(key[i] for i in order) + buckets) // buckets
        groups = [[] for _ in range(buckets)]
        for i in order:
            groups[min(buckets - 1, key[i] // width)].append(i)
    plan = [g[k:k + batch] for g in groups for k in range(0, len(g), batch)]
    if buckets > 1:
        tb._shuffle(plan, gen)
    return plan


def training_batches(src_vocab, tgt_vocab, max_length, train_pairs, batch, buckets, seed, count):
    """The first `count` training batches of `trainscope run seq2seq --seed seed`: for each,
    (source lengths, target lengths + 1), row by row."""
    lengths = corpus_lengths(src_vocab, tgt_vocab, max_length, train_pairs)
    gen = tb.integers((seed ^ tb.BATCHER_SALT) & tb.MASK64)
    plan, cursor, out = plan_pair_batches(lengths, batch, buckets, gen), 0, []
    while len(out) < count:
        if cursor == len(plan):
            plan, cursor = plan_pair_batches(lengths, batch, buckets, gen), 0
        rows = plan[cursor]
        cursor += 1
        out.append(([lengths[i][0] for i in rows], [lengths[i][1] + 1 for i in rows]))
    return out
