// Parallel text: vocabularies, the synthetic grammar (sizes, reachability, determinism, the
// translation rules), the file reader and its errors, batching, BLEU and the decoding helpers.
#include "workloads/data/text_data.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <set>
#include <string>

using namespace ts;
using namespace ts::workloads;
namespace fs = std::filesystem;

namespace {

using Ids = std::vector<int32_t>;

// A fresh folder per test, removed at the end.
class TempDir {
 public:
  explicit TempDir(const std::string& name)
      : path_(fs::temp_directory_path() / ("ts_text_" + name + "_" + std::to_string(::getpid()))) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  void write(const std::string& name, const std::string& text) const { std::ofstream(path_ / name) << text; }

 private:
  fs::path path_;
};

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(no std::invalid_argument)";
}

SyntheticTextOptions small_options(int64_t src = 120, int64_t tgt = 90) {
  SyntheticTextOptions o;
  o.src_vocab = src;
  o.tgt_vocab = tgt;
  o.train_pairs = 2000;
  o.dev_pairs = 100;
  o.test_pairs = 100;
  return o;
}

// The lexicon's invariants, whatever the sizes: every source id is a word of exactly one class,
// the dictionary is a bijection onto prefix-free codes over the target words, and every target
// id is reachable (in some code, or a marker).
void check_lexicon(const SyntheticTranslation& g) {
  SCOPED_TRACE("vocabularies " + std::to_string(g.src_vocab()->size()) + " / " + std::to_string(g.tgt_vocab()->size()));
  const bool shared = g.src_vocab() == g.tgt_vocab();
  std::set<int32_t> source_words;
  for (int c = 0; c < kWordClasses; ++c) {
    const auto& members = g.words(static_cast<WordClass>(c));
    EXPECT_FALSE(members.empty()) << word_class_name(static_cast<WordClass>(c));
    for (int32_t id : members) {
      EXPECT_TRUE(source_words.insert(id).second) << "id " << id << " in two classes";
      EXPECT_EQ(g.word_class(id), static_cast<WordClass>(c));
    }
  }
  std::set<Ids> codes;
  std::set<int32_t> singles, heads, code_tokens;
  for (int32_t id : source_words) {
    const Ids& code = g.code(id);
    ASSERT_TRUE(code.size() == 1 || code.size() == 2) << "id " << id;
    EXPECT_TRUE(codes.insert(code).second) << "two source words share a code";
    (code.size() == 1 ? singles : heads).insert(code[0]);
    for (int32_t t : code) {
      code_tokens.insert(t);
      EXPECT_GE(t, Vocabulary::kSpecials);
      EXPECT_NE(t, g.plural_marker());
      EXPECT_NE(t, g.agreement_marker());
      // Disjoint word sets: as ids in one shared vocabulary, as spellings in two.
      if (shared) {
        EXPECT_EQ(source_words.count(t), 0u) << "target token " << t << " is also a source word";
      } else {
        EXPECT_FALSE(g.src_vocab()->contains(g.tgt_vocab()->word(t))) << g.tgt_vocab()->word(t);
      }
    }
  }
  for (int32_t h : heads) EXPECT_EQ(singles.count(h), 0u) << "codes are not prefix-free";
  // Reachability: the source words are all non-special source ids; the code tokens and the
  // markers are all the other ids of the target vocabulary.
  std::set<int32_t> target = code_tokens;
  target.insert(g.plural_marker());
  target.insert(g.agreement_marker());
  if (shared) {
    EXPECT_EQ(static_cast<int64_t>(source_words.size() + target.size()), g.src_vocab()->size() - Vocabulary::kSpecials);
  } else {
    EXPECT_EQ(static_cast<int64_t>(source_words.size()), g.src_vocab()->size() - Vocabulary::kSpecials);
    EXPECT_EQ(static_cast<int64_t>(target.size()), g.tgt_vocab()->size() - Vocabulary::kSpecials);
  }
  for (int32_t id : source_words) EXPECT_LT(id, g.src_vocab()->size());
  for (int32_t id : target) EXPECT_LT(id, g.tgt_vocab()->size());
  EXPECT_EQ(g.tgt_vocab()->word(g.plural_marker()), "@pl");
  EXPECT_EQ(g.tgt_vocab()->word(g.agreement_marker()), "@agr");
}

Ids concat(std::initializer_list<Ids> parts) {
  Ids out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

std::set<Ids> sources(const std::vector<SentencePair>& split) {
  std::set<Ids> s;
  for (const auto& p : split) s.insert(p.src);
  return s;
}

}  // namespace

// ---------------------------------------------------------------------------------------------

TEST(TextDataVocabulary, IdsLookupAndRoundTrip) {
  const Vocabulary v({"house", "red", "the"});
  EXPECT_EQ(v.size(), 7);
  EXPECT_EQ(v.word(Vocabulary::kPad), "<pad>");
  EXPECT_EQ(v.word(Vocabulary::kBos), "<s>");
  EXPECT_EQ(v.word(Vocabulary::kEos), "</s>");
  EXPECT_EQ(v.word(Vocabulary::kUnk), "<unk>");
  EXPECT_EQ(v.id("house"), 4);
  EXPECT_EQ(v.id("the"), 6);
  EXPECT_EQ(v.id("dog"), Vocabulary::kUnk);
  EXPECT_EQ(v.encode("  the red\tdog house\r"), (Ids{6, 5, Vocabulary::kUnk, 4}));
  EXPECT_THROW((void)v.word(7), std::out_of_range);
  EXPECT_THROW(Vocabulary({"a", "a"}), std::invalid_argument);
  EXPECT_THROW(Vocabulary({"</s>"}), std::invalid_argument);

  TempDir dir("vocab_rt");
  v.save(dir.file("vocab.txt"));
  const Vocabulary back = Vocabulary::load(dir.file("vocab.txt"));
  EXPECT_EQ(back.words(), v.words());
  for (const auto& w : v.words()) EXPECT_EQ(back.id(w), v.id(w));
}

TEST(TextDataVocabulary, BuiltFromCountsMostFrequentFirstWithCap) {
  const std::unordered_map<std::string, int64_t> counts = {{"x", 5}, {"z", 3}, {"y", 3}, {"w", 1}, {"<unk>", 100}};
  const Vocabulary all = Vocabulary::from_counts(counts, 0);
  EXPECT_EQ(all.words(), (std::vector<std::string>{"<pad>", "<s>", "</s>", "<unk>", "x", "y", "z", "w"}));
  const Vocabulary capped = Vocabulary::from_counts(counts, 6);  // room for two words
  EXPECT_EQ(capped.size(), 6);
  EXPECT_EQ(capped.id("y"), 5);  // the tie with z goes to the smaller word
  EXPECT_EQ(capped.id("z"), Vocabulary::kUnk);
  EXPECT_EQ(Vocabulary::from_counts(counts, 100).size(), 8);
  EXPECT_THROW(Vocabulary::from_counts(counts, 3), std::invalid_argument);
}

TEST(TextDataVocabulary, LoadsTfNmtAndFairseqFilesAndNamesBadLines) {
  TempDir dir("vocab_load");
  dir.write("tfnmt", "<unk>\n<s>\n</s>\nhello\nworld\n");
  const Vocabulary tf = Vocabulary::load(dir.file("tfnmt"));
  EXPECT_EQ(tf.size(), 6);
  EXPECT_EQ(tf.id("hello"), 4);
  EXPECT_EQ(tf.id("<unk>"), Vocabulary::kUnk);
  dir.write("fairseq", "hello 120\nworld 7\n");
  EXPECT_EQ(Vocabulary::load(dir.file("fairseq")).id("world"), 5);

  dir.write("dup", "a\nb\na\n");
  EXPECT_NE(error_of([&] { Vocabulary::load(dir.file("dup")); }).find(dir.file("dup") + ":3"), std::string::npos);
  dir.write("junk", "a\nb c d\n");
  EXPECT_NE(error_of([&] { Vocabulary::load(dir.file("junk")); }).find(dir.file("junk") + ":2"), std::string::npos);
  dir.write("blank", "a\n\nb\n");
  EXPECT_NE(error_of([&] { Vocabulary::load(dir.file("blank")); }).find(":2"), std::string::npos);
  EXPECT_NE(error_of([&] { Vocabulary::load(dir.file("missing")); }).find(dir.file("missing")), std::string::npos);
}

// ---------------------------------------------------------------------------------------------

TEST(TextDataGrammar, PresetVocabularySizesAreHitAndEveryWordIsReachable) {
  SyntheticTextOptions en_vi;  // IWSLT15 en-vi: 17,191 / 7,709
  const SyntheticTranslation a(en_vi);
  EXPECT_EQ(a.src_vocab()->size(), 17191);
  EXPECT_EQ(a.tgt_vocab()->size(), 7709);
  check_lexicon(a);

  SyntheticTextOptions shared;  // Transformer base: one vocabulary of 37,000
  shared.shared_vocab = 37000;
  const SyntheticTranslation b(shared);
  EXPECT_EQ(b.src_vocab(), b.tgt_vocab());
  EXPECT_EQ(b.src_vocab()->size(), 37000);
  check_lexicon(b);

  // More target words than source words, equal counts, and tiny sizes.
  for (auto [src, tgt] : {std::pair<int64_t, int64_t>{100, 150}, {100, 102}, {13, 10}, {40, 30}, {5000, 300}}) {
    SyntheticTextOptions o = small_options(src, tgt);
    const SyntheticTranslation g(o);
    EXPECT_EQ(g.src_vocab()->size(), src);
    EXPECT_EQ(g.tgt_vocab()->size(), tgt);
    check_lexicon(g);
  }
  // Sizes the grammar cannot fill.
  EXPECT_THROW(SyntheticTranslation(small_options(12, 40)), std::invalid_argument);    // 8 source words < 9 classes
  EXPECT_THROW(SyntheticTranslation(small_options(100, 300)), std::invalid_argument);  // over twice the source's
  EXPECT_THROW(SyntheticTranslation(small_options(1000, 20)), std::invalid_argument);  // too few to spell them
}

TEST(TextDataGrammar, EveryWordTurnsUpInACorpus) {
  SyntheticTextOptions o = small_options(120, 90);
  o.train_pairs = 20000;
  const ParallelCorpus c = SyntheticTranslation(o).corpus();
  std::vector<int64_t> src_seen(static_cast<size_t>(c.src_vocab->size())),
      tgt_seen(static_cast<size_t>(c.tgt_vocab->size()));
  for (const auto& p : c.train) {
    for (int32_t id : p.src) ++src_seen[static_cast<size_t>(id)];
    for (int32_t id : p.tgt) ++tgt_seen[static_cast<size_t>(id)];
  }
  for (int32_t id = Vocabulary::kSpecials; id < c.src_vocab->size(); ++id)
    EXPECT_GT(src_seen[static_cast<size_t>(id)], 0) << "source " << id;
  for (int32_t id = Vocabulary::kSpecials; id < c.tgt_vocab->size(); ++id)
    EXPECT_GT(tgt_seen[static_cast<size_t>(id)], 0) << "target " << id;
  for (int32_t id = 0; id < Vocabulary::kSpecials; ++id) {
    EXPECT_EQ(src_seen[static_cast<size_t>(id)], 0);
    EXPECT_EQ(tgt_seen[static_cast<size_t>(id)], 0);
  }
}

TEST(TextDataGrammar, FrequenciesAreZipfLikeAtThePresetSize) {
  SyntheticTextOptions o;  // 17,191 / 7,709
  o.train_pairs = 5000;
  o.dev_pairs = o.test_pairs = 10;
  const SyntheticTranslation g(o);
  const ParallelCorpus c = g.corpus();
  std::map<int32_t, int64_t> counts;
  int64_t tokens = 0, tgt_tokens = 0;
  for (const auto& p : c.train) {
    for (int32_t id : p.src) ++counts[id];
    tokens += static_cast<int64_t>(p.src.size());
    tgt_tokens += static_cast<int64_t>(p.tgt.size());
  }
  std::vector<int64_t> sorted;
  for (const auto& [id, n] : counts) sorted.push_back(n);
  std::sort(sorted.rbegin(), sorted.rend());
  const int64_t top100 = std::accumulate(sorted.begin(), sorted.begin() + 100, int64_t{0});
  // Like natural text (English: about half), the hundred most frequent words make a large share
  // of the tokens (about 60% here), and many word types are seen once.
  EXPECT_GT(static_cast<double>(top100) / static_cast<double>(tokens), 0.4);
  EXPECT_GT(std::count(sorted.begin(), sorted.end(), int64_t{1}), static_cast<std::ptrdiff_t>(sorted.size() / 4));
  // The most frequent noun is far more frequent than a mid-rank one.
  const auto& nouns = g.words(WordClass::noun);
  EXPECT_GT(counts[nouns[0]], 20 * std::max<int64_t>(1, counts[nouns[nouns.size() / 2]]));
  // Lengths like IWSLT15 en-vi's (about 20 source tokens, targets about a fifth longer).
  const double mean_src = static_cast<double>(tokens) / static_cast<double>(c.train.size());
  EXPECT_GT(mean_src, 12);
  EXPECT_LT(mean_src, 28);
  EXPECT_GT(tgt_tokens, tokens);
}

TEST(TextDataGrammar, DeterministicForASeedAndTranslationIsAFunction) {
  const SyntheticTextOptions o = small_options();
  const ParallelCorpus a = SyntheticTranslation(o).corpus(), b = SyntheticTranslation(o).corpus();
  EXPECT_EQ(a.train, b.train);
  EXPECT_EQ(a.dev, b.dev);
  EXPECT_EQ(a.test, b.test);
  SyntheticTextOptions other = o;
  other.seed = o.seed + 1;
  const SyntheticTranslation g2(other);
  EXPECT_NE(g2.corpus().train, a.train);

  const SyntheticTranslation g(o);
  std::map<Ids, Ids> seen;
  for (const auto& p : a.train) {
    EXPECT_EQ(g.translate(p.src), p.tgt);
    const auto it = seen.emplace(p.src, p.tgt).first;
    EXPECT_EQ(it->second, p.tgt) << "one source, two targets";
  }
  // The dictionary differs between seeds (a different language), the sizes do not.
  int64_t same_codes = 0;
  for (int32_t id = Vocabulary::kSpecials; id < g.src_vocab()->size(); ++id) same_codes += g.code(id) == g2.code(id);
  EXPECT_LT(same_codes, g.src_vocab()->size() / 4);
}

TEST(TextDataGrammar, ReorderingAndAgreementRules) {
  const SyntheticTranslation g(small_options());
  auto w = [&](WordClass c, size_t i = 0) { return g.words(c).at(i); };
  auto t = [&](int32_t src) { return g.code(src); };
  const Ids pl = {g.plural_marker()}, agr = {g.agreement_marker()};
  const int32_t det = w(WordClass::det_sg), dets = w(WordClass::det_pl), num = w(WordClass::number);
  const int32_t a1 = w(WordClass::adjective, 0), a2 = w(WordClass::adjective, 1);
  const int32_t n1 = w(WordClass::noun, 0), n2 = w(WordClass::noun, 1), n3 = w(WordClass::noun, 2);
  const int32_t v1 = w(WordClass::verb, 0), v2 = w(WordClass::verb, 1);
  const int32_t prep = w(WordClass::preposition), adv = w(WordClass::adverb), conj = w(WordClass::conjunction);

  // Singular subject, intransitive verb: nothing moves.
  EXPECT_EQ(g.translate({det, n1, v1}), concat({t(det), t(n1), t(v1)}));
  // Adjectives follow the noun, mirrored; a plural noun takes @pl; the verb goes last and agrees.
  EXPECT_EQ(g.translate({dets, num, a1, a2, n1, v1, det, n2}),
            concat({t(dets), t(num), t(n1), pl, t(a2), t(a1), t(det), t(n2), t(v1), agr}));
  // Object, prepositional phrase and adverb all come before the verb; the object's number does
  // not make the verb agree.
  EXPECT_EQ(g.translate({det, n1, v1, dets, a1, n2, prep, det, n3, adv}),
            concat({t(det), t(n1), t(dets), t(n2), pl, t(a1), t(prep), t(det), t(n3), t(adv), t(v1)}));
  // A PP on the subject stays with the subject; clauses are translated one by one.
  EXPECT_EQ(g.translate({dets, n1, prep, det, n2, v1, conj, det, n3, v2, adv}),
            concat({t(dets), t(n1), pl, t(prep), t(det), t(n2), t(v1), agr, t(conj), t(det), t(n3), t(adv), t(v2)}));
  // Ungrammatical sources are refused.
  EXPECT_THROW(g.translate({}), std::invalid_argument);
  EXPECT_THROW(g.translate({n1, v1}), std::invalid_argument);
  EXPECT_THROW(g.translate({det, num, n1, v1}), std::invalid_argument);  // a number needs a plural
  EXPECT_THROW(g.translate({det, n1, v1, conj}), std::invalid_argument);
  EXPECT_THROW(g.translate({det, n1, n2, v1}), std::invalid_argument);
  EXPECT_THROW(g.translate({det, n1, v1, Vocabulary::kUnk}), std::invalid_argument);
}

TEST(TextDataGrammar, LengthLimitsHold) {
  SyntheticTextOptions o = small_options();
  o.min_length = 10;
  o.max_length = 20;
  const ParallelCorpus c = SyntheticTranslation(o).corpus();
  for (const auto* split : {&c.train, &c.dev, &c.test}) {
    for (const auto& p : *split) {
      EXPECT_GE(p.src.size(), 10u);
      EXPECT_LE(p.src.size(), 20u);
      EXPECT_GE(p.tgt.size(), 10u);
      EXPECT_LE(p.tgt.size(), 20u);
    }
  }
  SyntheticTextOptions full;  // the `full` limit: 50 tokens a side
  full.train_pairs = 3000;
  full.dev_pairs = full.test_pairs = 10;
  size_t longest = 0;
  for (const auto& p : SyntheticTranslation(full).corpus().train)
    longest = std::max({longest, p.src.size(), p.tgt.size()});
  EXPECT_LE(longest, 50u);
  EXPECT_GT(longest, 40u);  // the limit binds: long sentences exist

  o.min_length = 30;
  o.max_length = 20;
  EXPECT_THROW(SyntheticTranslation{o}, std::invalid_argument);
  o.min_length = 1;
  o.max_length = 2;
  EXPECT_THROW(SyntheticTranslation{o}, std::invalid_argument);
}

TEST(TextDataGrammar, HeldOutSentencesAreUnseenInTraining) {
  SyntheticTextOptions o = small_options(40, 30);  // a small language: repeats are likely
  o.max_length = 8;
  o.train_pairs = 3000;
  o.dev_pairs = 200;
  o.test_pairs = 200;
  const ParallelCorpus c = SyntheticTranslation(o).corpus();
  const auto train = sources(c.train), dev = sources(c.dev), test = sources(c.test);
  EXPECT_LT(train.size(), c.train.size());  // the training set does repeat itself
  EXPECT_EQ(dev.size(), c.dev.size());
  EXPECT_EQ(test.size(), c.test.size());
  for (const auto& s : dev) EXPECT_EQ(train.count(s) + test.count(s), 0u);
  for (const auto& s : test) EXPECT_EQ(train.count(s), 0u);
}

// ---------------------------------------------------------------------------------------------

TEST(TextDataBatching, TokenBudgetIsKeptAndEveryPairUsedOncePerEpoch) {
  SyntheticTextOptions o = small_options();
  o.train_pairs = 3000;
  const auto corpus = std::make_shared<const ParallelCorpus>(SyntheticTranslation(o).corpus());
  for (bool src_eos : {false, true}) {
    engine::Rng rng(7);
    const BatchPlan plan = plan_token_batches(corpus->train, 600, src_eos, &rng);
    std::vector<int> used(corpus->train.size(), 0);
    int64_t real = 0, padded = 0;
    for (const auto& b : plan) {
      ASSERT_FALSE(b.empty());
      const int64_t p = padded_tokens(corpus->train, b, src_eos);
      EXPECT_LE(p, 600);
      padded += p;
      for (int64_t i : b) {
        ++used[static_cast<size_t>(i)];
        const auto& pair = corpus->train[static_cast<size_t>(i)];
        real += static_cast<int64_t>(std::max(pair.src.size() + (src_eos ? 1 : 0), pair.tgt.size() + 1));
      }
    }
    EXPECT_TRUE(std::all_of(used.begin(), used.end(), [](int u) { return u == 1; }));
    // Pairs of similar length share a batch: little of the budget is padding, and the batches
    // are full (the greedy packing leaves less than one more pair's room on average).
    EXPECT_GT(static_cast<double>(real) / static_cast<double>(padded), 0.9);
    EXPECT_GT(static_cast<double>(padded) / static_cast<double>(plan.size()), 600 * 0.85);
  }
  // The same seed gives the same plan, another seed another.
  engine::Rng r1(3), r2(3), r3(4);
  EXPECT_EQ(plan_token_batches(corpus->train, 600, false, &r1), plan_token_batches(corpus->train, 600, false, &r2));
  engine::Rng r4(3);
  EXPECT_NE(plan_token_batches(corpus->train, 600, false, &r4), plan_token_batches(corpus->train, 600, false, &r3));
  // A pair that does not fit alone is an error, not an over-budget batch.
  EXPECT_THROW(plan_token_batches(corpus->train, 20, false, nullptr), std::invalid_argument);
}

TEST(TextDataBatching, BatcherEpochsAndBatchContents) {
  SyntheticTextOptions o = small_options();
  o.train_pairs = 1000;
  const auto corpus = std::make_shared<const ParallelCorpus>(SyntheticTranslation(o).corpus());
  BatchingOptions opt;
  opt.mode = BatchingOptions::Mode::tokens;
  opt.max_tokens = 512;
  TextBatcher batcher(corpus, opt, 11, engine::Device::cpu());
  std::vector<int> used(corpus->train.size(), 0);
  const size_t batches = batcher.epoch_plan().size();
  for (size_t k = 0; k < batches; ++k) {
    const TokenBatch b = batcher.next_train();
    EXPECT_EQ(batcher.epoch(), 0);
    EXPECT_LE(b.src.numel(), 512);
    EXPECT_LE(b.tgt_in.numel(), 512);
    for (int64_t i : b.indices) ++used[static_cast<size_t>(i)];
  }
  EXPECT_TRUE(std::all_of(used.begin(), used.end(), [](int u) { return u == 1; }));
  (void)batcher.next_train();
  EXPECT_EQ(batcher.epoch(), 1);

  // One batch, checked value by value against its pairs.
  const TokenBatch b = batcher.next_train();
  ASSERT_GT(b.pairs, 0);
  EXPECT_EQ(b.src.category(), vocabulary::Category::inputs);
  EXPECT_EQ(b.tgt_out.category(), vocabulary::Category::inputs);
  const int64_t S = b.src.size(1), T = b.tgt_in.size(1);
  EXPECT_EQ(b.tgt_out.shape(), (engine::Shape{b.pairs, T}));
  const auto src = b.src.to_vector(), tin = b.tgt_in.to_vector(), tout = b.tgt_out.to_vector();
  const auto sl = b.src_lengths.to_vector(), tl = b.tgt_lengths.to_vector();
  int64_t src_tokens = 0, tgt_tokens = 0;
  size_t longest_src = 0, longest_tgt = 0;
  for (int64_t r = 0; r < b.pairs; ++r) {
    const auto& p = corpus->train[static_cast<size_t>(b.indices[static_cast<size_t>(r)])];
    longest_src = std::max(longest_src, p.src.size());
    longest_tgt = std::max(longest_tgt, p.tgt.size());
    EXPECT_EQ(sl[static_cast<size_t>(r)], static_cast<float>(p.src.size()));
    EXPECT_EQ(tl[static_cast<size_t>(r)], static_cast<float>(p.tgt.size() + 1));
    src_tokens += static_cast<int64_t>(p.src.size());
    tgt_tokens += static_cast<int64_t>(p.tgt.size() + 1);
    for (int64_t j = 0; j < S; ++j) {
      const float want =
          j < static_cast<int64_t>(p.src.size()) ? static_cast<float>(p.src[static_cast<size_t>(j)]) : 0.0f;
      EXPECT_EQ(src[static_cast<size_t>(r * S + j)], want);
    }
    for (int64_t j = 0; j < T; ++j) {
      const auto n = static_cast<int64_t>(p.tgt.size());
      const float in = j == 0 ? 1.0f : (j <= n ? static_cast<float>(p.tgt[static_cast<size_t>(j - 1)]) : 0.0f);
      const float out = j < n ? static_cast<float>(p.tgt[static_cast<size_t>(j)]) : (j == n ? 2.0f : 0.0f);
      EXPECT_EQ(tin[static_cast<size_t>(r * T + j)], in) << r << "," << j;
      EXPECT_EQ(tout[static_cast<size_t>(r * T + j)], out) << r << "," << j;
    }
  }
  EXPECT_EQ(S, static_cast<int64_t>(longest_src));
  EXPECT_EQ(T, static_cast<int64_t>(longest_tgt) + 1);
  EXPECT_EQ(b.src_tokens, src_tokens);
  EXPECT_EQ(b.tgt_tokens, tgt_tokens);

  // Sources with EOS appended.
  const TokenBatch e = make_token_batch(corpus->train, {0}, engine::Device::cpu(), true);
  const auto& p0 = corpus->train[0];
  EXPECT_EQ(e.src.to_vector().back(), 2.0f);
  EXPECT_EQ(e.src.size(1), static_cast<int64_t>(p0.src.size()) + 1);
  // The meta device: shapes only.
  const TokenBatch m = make_token_batch(corpus->train, {0, 1}, engine::Device::meta());
  EXPECT_EQ(m.src.device(), engine::Device::meta());
  EXPECT_EQ(m.src.size(0), 2);
}

TEST(TextDataBatching, FixedCountBatchesWithAndWithoutBuckets) {
  SyntheticTextOptions o = small_options();
  o.train_pairs = 1000;
  const auto corpus = std::make_shared<const ParallelCorpus>(SyntheticTranslation(o).corpus());
  engine::Rng rng(5);
  const BatchPlan plain = plan_pair_batches(corpus->train, 128, 1, &rng);
  ASSERT_EQ(plain.size(), (1000 + 127) / 128u);
  for (size_t k = 0; k + 1 < plain.size(); ++k) EXPECT_EQ(plain[k].size(), 128u);
  const BatchPlan bucketed = plan_pair_batches(corpus->train, 128, 5, &rng);
  int64_t padded_plain = 0, padded_bucketed = 0;
  std::vector<int> used(1000, 0);
  for (const auto& b : plain) padded_plain += padded_tokens(corpus->train, b, false);
  for (const auto& b : bucketed) {
    EXPECT_LE(b.size(), 128u);
    padded_bucketed += padded_tokens(corpus->train, b, false);
    for (int64_t i : b) ++used[static_cast<size_t>(i)];
  }
  EXPECT_TRUE(std::all_of(used.begin(), used.end(), [](int u) { return u == 1; }));
  EXPECT_LT(padded_bucketed, padded_plain);  // bucketing by length saves padding

  BatchingOptions opt;  // seq2seq: 128 pairs
  TextBatcher a(corpus, opt, 1, engine::Device::cpu()), b(corpus, opt, 1, engine::Device::cpu()),
      c(corpus, opt, 2, engine::Device::cpu());
  EXPECT_EQ(a.next_train().indices, b.next_train().indices);
  EXPECT_NE(a.next_train().indices, c.next_train().indices);
  // Held-out batches are fixed whatever the seed, and end.
  ASSERT_EQ(a.heldout_batches(), 1);
  EXPECT_EQ(a.heldout(0).src.to_vector(), c.heldout(0).src.to_vector());
  EXPECT_EQ(a.heldout(0).pairs, 100);
  EXPECT_EQ(a.heldout(1).pairs, 0);
  EXPECT_EQ(a.test(0).pairs, 100);
}

// ---------------------------------------------------------------------------------------------

namespace {

void write_corpus(const TempDir& dir) {
  dir.write("train.en", "the cat sat\na dog ran fast\n\nthe the the cat\none two three four five six seven\n");
  dir.write("train.vi", "con meo ngoi\nmot con cho chay\nempty source\ncon meo\nmot hai ba\n");
  dir.write("tst2012.en", "the dog sat\n");
  dir.write("tst2012.vi", "con cho ngoi\n");
  dir.write("tst2013.en", "a cat ran\nthe bird\n");
  dir.write("tst2013.vi", "mot con meo chay\ncon chim\n");
}

}  // namespace

TEST(TextDataFiles, SpecSyntax) {
  const TextFilesSpec a = parse_text_files_spec("/data/iwslt15:en:vi");
  EXPECT_EQ(a.directory, "/data/iwslt15");
  EXPECT_EQ(a.src_lang, "en");
  EXPECT_EQ(a.tgt_lang, "vi");
  EXPECT_EQ(a.dev, "dev");
  EXPECT_EQ(a.test, "test");
  const TextFilesSpec b = parse_text_files_spec("/data/iwslt15:en:vi:tst2012:tst2013");
  EXPECT_EQ(b.dev, "tst2012");
  EXPECT_EQ(b.test, "tst2013");
  for (const char* bad : {"/data/iwslt15", "/data:en", "/data:en:", ":en:vi", "/d:en:vi:a:b:c", "/d:en:en"}) {
    EXPECT_THROW(parse_text_files_spec(bad), std::invalid_argument) << bad;
  }
  EXPECT_TRUE(is_synthetic_text_spec("synthetic"));
  EXPECT_NO_THROW(check_text_source("synthetic"));
}

TEST(TextDataFiles, ReadsAFolderBuildsVocabulariesAndDropsLongLines) {
  TempDir dir("read");
  write_corpus(dir);
  const std::string spec = dir.path().string() + ":en:vi:tst2012:tst2013";
  EXPECT_NO_THROW(check_text_source(spec));
  TextFileOptions opt;
  opt.max_length = 6;
  const ParallelCorpus c = read_parallel_text(parse_text_files_spec(spec), opt);
  EXPECT_FALSE(c.shared_vocab());
  EXPECT_EQ(c.train.size(), 3u);  // of 5: one empty, one with 7 source tokens
  EXPECT_EQ(c.dropped_empty, 1);
  EXPECT_EQ(c.dropped_too_long, 1);
  EXPECT_EQ(c.dev.size(), 1u);
  EXPECT_EQ(c.test.size(), 2u);
  // Built from the kept training pairs, most frequent first: "the" x4, "cat" x2, then by word.
  EXPECT_EQ(c.src_vocab->words(), (std::vector<std::string>{"<pad>", "<s>", "</s>", "<unk>", "the", "cat", "a", "dog",
                                                            "fast", "ran", "sat"}));
  EXPECT_EQ(c.train[0].src, c.src_vocab->encode("the cat sat"));
  EXPECT_EQ(c.train[0].tgt, c.tgt_vocab->encode("con meo ngoi"));
  EXPECT_EQ(c.test[1].src, (Ids{c.src_vocab->id("the"), Vocabulary::kUnk}));  // "bird" unseen

  // The factory the workloads call reads the same.
  const auto made = make_parallel_corpus(spec, SyntheticTextOptions{}, opt);
  EXPECT_EQ(made->train, c.train);
  EXPECT_EQ(made->src_vocab->words(), c.src_vocab->words());
  EXPECT_EQ(make_parallel_corpus("synthetic", small_options(), opt)->train.size(), 2000u);
  EXPECT_THROW(make_parallel_corpus("iwslt15", SyntheticTextOptions{}, opt), std::invalid_argument);

  // Capped vocabularies and a shared one.
  opt.src_vocab_cap = 6;
  opt.tgt_vocab_cap = 5;
  const ParallelCorpus capped = read_parallel_text(parse_text_files_spec(spec), opt);
  EXPECT_EQ(capped.src_vocab->size(), 6);
  EXPECT_EQ(capped.tgt_vocab->size(), 5);
  EXPECT_EQ(capped.tgt_vocab->word(4), "con");
  opt = TextFileOptions{};
  opt.shared_vocab = true;
  const ParallelCorpus shared = read_parallel_text(parse_text_files_spec(spec), opt);
  EXPECT_TRUE(shared.shared_vocab());
  EXPECT_TRUE(shared.src_vocab->contains("meo"));
  EXPECT_TRUE(shared.src_vocab->contains("cat"));

  // Vocabulary files, when present, win over counting.
  dir.write("vocab.en", "<unk>\n<s>\n</s>\ncat\nthe\n");
  dir.write("vocab.vi", "<unk>\n<s>\n</s>\nmeo\n");
  const ParallelCorpus with_vocab = read_parallel_text(parse_text_files_spec(spec), TextFileOptions{});
  EXPECT_EQ(with_vocab.src_vocab->size(), 6);
  EXPECT_EQ(with_vocab.train[0].src, (Ids{5, 4, Vocabulary::kUnk}));
  EXPECT_EQ(with_vocab.tgt_vocab->size(), 5);

  // No test files: an empty test split; the default dev prefix.
  TempDir two("read_no_test");
  two.write("train.de", "a b\n");
  two.write("train.en", "x y\n");
  two.write("dev.de", "a\n");
  two.write("dev.en", "x\n");
  const ParallelCorpus no_test =
      read_parallel_text(parse_text_files_spec(two.path().string() + ":de:en"), TextFileOptions{});
  EXPECT_EQ(no_test.train.size(), 1u);
  EXPECT_EQ(no_test.dev.size(), 1u);
  EXPECT_TRUE(no_test.test.empty());
}

TEST(TextDataFiles, ErrorsNameTheFile) {
  TempDir dir("errors");
  write_corpus(dir);
  const auto spec = parse_text_files_spec(dir.path().string() + ":en:vi:tst2012:tst2013");
  auto read = [&] { (void)read_parallel_text(spec, TextFileOptions{}); };

  // Line counts differ: the shorter file and where it ends are named.
  dir.write("train.vi", "con meo ngoi\nmot con cho chay\n");
  std::string e = error_of(read);
  EXPECT_NE(e.find(dir.file("train.vi")), std::string::npos) << e;
  EXPECT_NE(e.find("line 2"), std::string::npos) << e;
  EXPECT_NE(e.find(dir.file("train.en")), std::string::npos) << e;

  // A missing file.
  fs::remove(dir.path() / "train.vi");
  e = error_of(read);
  EXPECT_NE(e.find(dir.file("train.vi")), std::string::npos) << e;
  EXPECT_THROW(check_text_source(dir.path().string() + ":en:vi:tst2012:tst2013"), std::invalid_argument);
  write_corpus(dir);

  // Unreadable: a folder where a file should be.
  fs::remove(dir.path() / "tst2012.vi");
  fs::create_directory(dir.path() / "tst2012.vi");
  e = error_of(read);
  EXPECT_NE(e.find(dir.file("tst2012.vi")), std::string::npos) << e;
  fs::remove(dir.path() / "tst2012.vi");
  write_corpus(dir);

  // Half of an optional pair.
  fs::remove(dir.path() / "tst2013.vi");
  e = error_of(read);
  EXPECT_NE(e.find(dir.file("tst2013.vi")), std::string::npos) << e;
  write_corpus(dir);
  dir.write("vocab.en", "the\n");
  e = error_of(read);
  EXPECT_NE(e.find(dir.file("vocab.vi")), std::string::npos) << e;
  dir.write("vocab.vi", "con\ncon\n");
  e = error_of(read);
  EXPECT_NE(e.find(dir.file("vocab.vi") + ":2"), std::string::npos) << e;

  EXPECT_THROW(read_parallel_text(parse_text_files_spec("/nonexistent/trainscope:en:vi"), TextFileOptions{}),
               std::invalid_argument);
}

// ---------------------------------------------------------------------------------------------

TEST(TextDataBleu, HandComputedCases) {
  const Ids ref = {10, 11, 12, 13, 14, 15};
  // Perfect match.
  EXPECT_NEAR(corpus_bleu({ref}, {ref}).score, 100.0, 1e-9);
  EXPECT_NEAR(corpus_bleu_unsmoothed({ref}, {ref}), 100.0, 1e-9);

  // Last word wrong: 1-grams 5/6, 2-grams 4/5, 3-grams 3/4, 4-grams 2/3, equal lengths (BP 1):
  // (5/6 * 4/5 * 3/4 * 2/3)^(1/4) = (1/3)^(1/4).
  const BleuScore last = corpus_bleu({{10, 11, 12, 13, 14, 99}}, {ref});
  EXPECT_NEAR(last.score, 100.0 * std::pow(1.0 / 3.0, 0.25), 1e-9);
  EXPECT_EQ(last.matches, (std::array<int64_t, 4>{5, 4, 3, 2}));
  EXPECT_EQ(last.totals, (std::array<int64_t, 4>{6, 5, 4, 3}));
  EXPECT_DOUBLE_EQ(last.brevity_penalty, 1.0);

  // Corpus level, not a mean of sentences: sums over both pairs.
  // 1-grams (4+3)/8, 2-grams (3+1)/6, 3-grams (2+0)/4, 4-grams (1+0)/2.
  const BleuScore two = corpus_bleu({{21, 22, 23, 24}, {25, 26, 27, 28}}, {{21, 22, 23, 24}, {25, 26, 99, 28}});
  EXPECT_NEAR(two.score, 100.0 * std::pow(7.0 / 8 * 4.0 / 6 * 2.0 / 4 * 1.0 / 2, 0.25), 1e-9);

  // Brevity: the first half of an 8-token reference. Every n-gram matches (precisions 100), c = 4,
  // r = 8: BP = exp(1 - 8/4) = 1/e. With 3 tokens there is no 4-gram at all, and corpus BLEU is 0.
  const Ids eight = {41, 42, 43, 44, 45, 46, 47, 48};
  const BleuScore brief = corpus_bleu({{41, 42, 43, 44}}, {eight});
  EXPECT_NEAR(brief.brevity_penalty, std::exp(1.0 - 8.0 / 4.0), 1e-12);
  EXPECT_NEAR(brief.score, 100.0 * std::exp(-1.0), 1e-9);
  EXPECT_EQ(corpus_bleu({{41, 42, 43}}, {eight}).score, 0.0);

  // Clipping and smoothing: "a a a a" against "a b c d": 1-grams 1/4 (clipped), no 2-, 3- or
  // 4-gram matches. Unsmoothed: 0. sacreBLEU's exp smoothing: p2 = 1/(2*3), p3 = 1/(4*2), p4 = 1/(8*1).
  const Ids a4 = {7, 7, 7, 7}, abcd = {7, 8, 9, 10};
  EXPECT_EQ(corpus_bleu_unsmoothed({a4}, {abcd}), 0.0);
  EXPECT_NEAR(corpus_bleu({a4}, {abcd}).score, 100.0 * std::pow(1.0 / 4 * 1.0 / 6 * 1.0 / 8 * 1.0 / 8, 0.25), 1e-9);

  // No match at all, and an empty hypothesis: 0.
  EXPECT_EQ(corpus_bleu({{90, 91, 92, 93}}, {ref}).score, 0.0);
  EXPECT_EQ(corpus_bleu({{}}, {ref}).score, 0.0);
  EXPECT_EQ(corpus_bleu({}, {}).score, 0.0);
  EXPECT_THROW(corpus_bleu({ref}, {}), std::invalid_argument);
}

TEST(TextDataBleu, SpecialTokensAndUnknownWords) {
  const Ids ref = {10, 11, 12, 13, 14};
  // <s>, </s> and padding are not words.
  EXPECT_NEAR(corpus_bleu({{Vocabulary::kBos, 10, 11, 12, 13, 14, Vocabulary::kEos, 0, 0}}, {ref}).score, 100.0, 1e-9);
  // An <unk> in the reference matches nothing, not even an <unk>, yet counts in the lengths:
  // 1-grams 5/6, 2-grams 3/5, 3-grams 1/4, 4-grams 0/3 (exp smoothing: p4 = 1/(2*3)).
  const Ids with_unk = {10, 11, Vocabulary::kUnk, 13, 14, 15};
  const Ids hyp = {10, 11, Vocabulary::kUnk, 13, 14, 15};
  const BleuScore s = corpus_bleu({hyp}, {with_unk});
  EXPECT_EQ(s.matches, (std::array<int64_t, 4>{5, 3, 1, 0}));
  EXPECT_EQ(s.hyp_length, 6);
  EXPECT_EQ(s.ref_length, 6);
  EXPECT_NEAR(s.score, 100.0 * std::pow(5.0 / 6 * 3.0 / 5 * 1.0 / 4 * 1.0 / 6, 0.25), 1e-9);
  EXPECT_LT(s.score, 100.0);
}

TEST(TextDataDecoding, IdsToSentencesAndDetokenize) {
  const std::vector<float> ids = {5, 6, 2, 7, 0,  //
                                  1, 8, 0, 9, 2,  //
                                  2, 5, 5, 5, 5};
  const auto s = ids_to_sentences(ids, 3, 5);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0], (Ids{5, 6}));
  EXPECT_EQ(s[1], (Ids{8, 9}));
  EXPECT_TRUE(s[2].empty());
  EXPECT_EQ(ids_to_sentences(engine::Tensor::from_vector({3, 5}, ids)), s);
  EXPECT_THROW(ids_to_sentences(ids, 4, 5), std::invalid_argument);

  const Vocabulary v({"the", "cat", "sat"});
  EXPECT_EQ(detokenize(v, {Vocabulary::kBos, 4, 5, Vocabulary::kUnk, 6, Vocabulary::kEos, 0}), "the cat <unk> sat");
  // What a model decodes goes straight into BLEU against the batch's reference.
  SyntheticTextOptions o = small_options();
  const ParallelCorpus c = SyntheticTranslation(o).corpus();
  const TokenBatch b = make_token_batch(c.dev, {0, 1, 2}, engine::Device::cpu());
  const auto decoded = ids_to_sentences(b.tgt_out);  // a perfect model's output
  std::vector<Ids> refs;
  for (int64_t i : b.indices) refs.push_back(c.dev[static_cast<size_t>(i)].tgt);
  EXPECT_EQ(decoded, refs);
  EXPECT_NEAR(corpus_bleu(decoded, refs).score, 100.0, 1e-9);
  EXPECT_FALSE(detokenize(*c.tgt_vocab, refs[0]).empty());
}
