#pragma once
// Parallel text for the translation workloads (seq2seq, transformer): vocabularies, a
// synthetic language pair generated from a fixed grammar (seeded, learnable, sized like the
// published vocabularies), a reader of plain parallel text files, batching by sentence count
// or by token budget, corpus BLEU and the helpers that turn decoder ids back into sentences.
//
// Token ids: 0 <pad>, 1 <s> (BOS), 2 </s> (EOS), 3 <unk>, then the words. A vocabulary's
// size() counts these four, so it is the number of embedding rows a model needs; the preset
// sizes (17,191 / 7,709 for IWSLT15 en-vi, 37,000 shared for Transformer base) are sizes.
//
// ## The synthetic grammar (SyntheticTranslation)
//
// Source sentences (an English-like SVO language) come from this grammar; every choice is a
// draw from the corpus seed, and each word is drawn from its class with Zipf frequencies
// (rank r has weight 1/(r+1)^s, s = 1), so a few words of each class carry most tokens and
// every word still has a positive chance:
//
//   SENTENCE -> CLAUSE (CONJ CLAUSE)*             one more clause with p 0.55, at most 4
//   CLAUSE   -> NP VERB [NP] [PP] [ADV]           object p 0.7, PP p 0.3 (its NP at depth 1), ADV p 0.3
//   NP(d)    -> DET_SG ADJ* NOUN [PP(d)]          singular, p 0.6
//            |  DET_PL [NUM] ADJ* NOUN [PP(d)]    plural, p 0.4; NUM p 0.3
//   ADJ*     -> 0..3 adjectives                   the first with p 0.5, each further one with p 0.4
//   PP(d)    -> PREP NP(d+1)                      p 0.25 at depth 0, 0.1 at depth 1, never at 2
//
// Lengths: sentences shorter than min_length get further clauses; pairs with either side
// over max_length are drawn again. With the `full` limits (1..50) the mean source length is
// about 18 tokens and the target's a fifth longer, as in IWSLT15 en-vi, whose Vietnamese side
// (syllables) is the longer one.
//
// The classes are disjoint, so a source sentence parses deterministically, and the target
// (translate()) is a function of it:
//  - every source word becomes its code: a fixed seeded bijection from source words onto one-
//    or two-token codes over a disjoint target word set. When the target vocabulary is
//    smaller than the source's (en-vi), the most frequent source words get one-token codes
//    and the rest two-token compounds (as Vietnamese writes words as several syllables);
//    codes are prefix-free (a compound starts with a token that is never a word on its own);
//  - adjectives follow their noun, in mirrored order: DET NUM? ADJ1 ADJ2 NOUN -> DET' NUM'
//    NOUN' ADJ2' ADJ1';
//  - the verb goes to the end of its clause: SUBJ VERB OBJ PP ADV -> SUBJ' OBJ' PP' ADV' VERB';
//  - agreement: a plural NP's noun is followed by the marker `@pl`, and a verb whose subject is
//    plural by `@agr` (the subject's determiner may be a dozen tokens back): the model must
//    attend, not copy.
// Prepositional phrases always close the NP or VP they belong to, so where one attaches does
// not change the target. Word classes are sized from the vocabulary: the closed classes
// (determiners 5 + 5, numbers 12, prepositions 20, conjunctions 5) shrink for tiny
// vocabularies, and the rest is split nouns 52%, adjectives 22%, verbs 18%, adverbs 8%, so every
// id of the vocabulary is a word the grammar can produce. Source words are CV syllables
// ("taba", "kelomu": they end in a vowel), target words CVC syllables ("xot", "bamdin": they
// end in a consonant), so the two sets never meet, also in one shared vocabulary.
//
// ## Files (read_parallel_text)
//
// Spec `DIR:SRC:TGT[:DEV[:TEST]]`, e.g. `/data/iwslt15:en:vi:tst2012:tst2013`: DIR holds
// train.SRC/train.TGT, DEV.SRC/DEV.TGT (default `dev`) and optionally TEST.SRC/TEST.TGT
// (default `test`; both or neither), one sentence per line, tokens separated by white space.
// Vocabularies come from vocab.SRC/vocab.TGT when both exist (one token per line, as TF NMT's,
// optionally followed by a count, as fairseq's dict.txt; special tokens in them such as <unk>,
// <s>, </s>, <pad> are skipped, they have fixed ids), otherwise from the training data, most
// frequent first, capped. DIR may not contain ':'. TF NMT's IWSLT15 vocab.en (17,191 lines,
// three of them <unk> <s> </s>) loads as 17,192 ids: <pad> is ours.
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/random.h"
#include "engine/tensor.h"
#include "workloads/data/shard.h"

namespace ts::workloads {

// ---------------------------------------------------------------------------------------------
// Vocabulary

class Vocabulary {
 public:
  static constexpr int32_t kPad = 0, kBos = 1, kEos = 2, kUnk = 3;
  static constexpr int32_t kSpecials = 4;
  static const std::array<std::string, kSpecials>& special_tokens();  // <pad> <s> </s> <unk>
  // TF NMT's and fairseq's spellings too (<unk>, <s>, </s>, <pad>, <eos>, <bos>, <blank>...).
  static bool is_special_token(std::string_view word);

  Vocabulary();  // the specials only
  // Words take ids 4, 5, ... in order; duplicates or special tokens throw std::invalid_argument.
  explicit Vocabulary(const std::vector<std::string>& words);

  // The most frequent words first (ties by word, bytewise), at most `max_size` ids in all
  // (specials included; 0: no cap). Special tokens among the counts are ignored.
  static Vocabulary from_counts(const std::unordered_map<std::string, int64_t>& counts, int64_t max_size);
  // One word per line; see the header comment for what lines may hold. Throws
  // std::invalid_argument naming the file (and line) when it is missing, unreadable or malformed.
  static Vocabulary load(const std::string& path);
  // One token per line, the specials first: load() gives the same ids back.
  void save(const std::string& path) const;

  int64_t size() const { return static_cast<int64_t>(words_.size()); }  // specials included
  int32_t id(std::string_view word) const;                              // kUnk when unknown
  bool contains(std::string_view word) const;
  const std::string& word(int32_t id) const;                        // throws out of range
  std::vector<int32_t> encode(std::string_view line) const;         // white-space tokens
  const std::vector<std::string>& words() const { return words_; }  // by id, specials first

 private:
  void add(const std::string& word);
  std::vector<std::string> words_;
  std::unordered_map<std::string, int32_t> ids_;
};

// A sentence pair as token ids, without BOS/EOS.
struct SentencePair {
  std::vector<int32_t> src, tgt;
  bool operator==(const SentencePair&) const = default;
};

// Training, development (held-out) and test pairs with their vocabularies.
struct ParallelCorpus {
  std::string name;                                        // "synthetic" or the data directory
  std::shared_ptr<const Vocabulary> src_vocab, tgt_vocab;  // the same object when shared
  std::vector<SentencePair> train, dev, test;
  int64_t dropped_too_long = 0;  // training pairs over the maximum length (either side)
  int64_t dropped_empty = 0;     // pairs with an empty side, in any split
  bool shared_vocab() const { return src_vocab == tgt_vocab; }
};

// ---------------------------------------------------------------------------------------------
// The synthetic language pair (grammar in the header comment)

struct SyntheticTextOptions {
  int64_t src_vocab = 17191;  // ids, the 4 specials included (IWSLT15 en-vi: 17,191 / 7,709)
  int64_t tgt_vocab = 7709;
  int64_t shared_vocab = 0;  // > 0: one vocabulary of this many ids for both sides (37,000)
  int64_t min_length = 1;    // tokens per side, BOS/EOS not counted
  int64_t max_length = 50;
  int64_t train_pairs = 133317;  // IWSLT15 en-vi: train 133,317, tst2012 1,553, tst2013 1,268
  int64_t dev_pairs = 1553;
  int64_t test_pairs = 1268;
  double zipf_exponent = 1.0;
  uint64_t seed = 2015;  // the language (dictionary) and the sentences
};

enum class WordClass : uint8_t { det_sg, det_pl, number, adjective, noun, verb, adverb, preposition, conjunction };
inline constexpr int kWordClasses = 9;
const char* word_class_name(WordClass c);

class SyntheticTranslation {
 public:
  // Builds the lexicon and the dictionary (cheap); corpus() draws the sentences. Throws
  // std::invalid_argument on sizes the grammar cannot fill (fewer than 9 source words, a target
  // vocabulary over twice the source's, min/max lengths that no sentence meets...).
  explicit SyntheticTranslation(const SyntheticTextOptions& options);

  const SyntheticTextOptions& options() const { return options_; }
  const std::shared_ptr<const Vocabulary>& src_vocab() const { return src_vocab_; }
  const std::shared_ptr<const Vocabulary>& tgt_vocab() const { return tgt_vocab_; }

  // Source ids of a class, most frequent first.
  const std::vector<int32_t>& words(WordClass c) const { return classes_[static_cast<size_t>(c)]; }
  WordClass word_class(int32_t src_id) const;  // throws std::invalid_argument for non-words
  // The target code of a source word (one or two target ids).
  const std::vector<int32_t>& code(int32_t src_id) const;
  int32_t plural_marker() const { return plural_marker_; }        // `@pl`, target id
  int32_t agreement_marker() const { return agreement_marker_; }  // `@agr`, target id

  // One grammatical source sentence (no length limits) and its translation.
  std::vector<int32_t> sample_source(engine::Rng& rng) const;
  // The target of a source sentence; throws std::invalid_argument if it is not grammatical.
  std::vector<int32_t> translate(const std::vector<int32_t>& src) const;
  // A pair within the options' length limits.
  SentencePair sample(engine::Rng& rng) const;

  // train/dev/test as the options size them; dev and test sources are distinct from each other
  // and from every training source. Deterministic for the options.
  ParallelCorpus corpus() const;

 private:
  size_t parse_np(const std::vector<int32_t>& src, size_t pos, std::vector<int32_t>& out, bool& plural) const;
  void append_code(int32_t src_id, std::vector<int32_t>& out) const;
  int32_t draw(WordClass c, engine::Rng& rng) const;
  void sample_np(engine::Rng& rng, int depth, std::vector<int32_t>& out) const;
  void sample_clause(engine::Rng& rng, std::vector<int32_t>& out) const;

  SyntheticTextOptions options_;
  std::shared_ptr<const Vocabulary> src_vocab_, tgt_vocab_;
  std::array<std::vector<int32_t>, kWordClasses> classes_;
  std::array<std::vector<double>, kWordClasses> cdf_;  // Zipf, per class
  std::vector<int8_t> class_of_;                       // by source id; -1: not a word
  std::vector<std::vector<int32_t>> codes_;            // by source id
  int32_t plural_marker_ = 0, agreement_marker_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Plain parallel text files (spec syntax in the header comment)

struct TextFilesSpec {
  std::string directory, src_lang, tgt_lang;
  std::string dev = "dev", test = "test";  // file name prefixes
};

struct TextFileOptions {
  int64_t max_length = 50;    // training pairs with more tokens on either side are dropped; 0: none
  int64_t src_vocab_cap = 0;  // vocabularies built from the training data: at most this many ids; 0: all
  int64_t tgt_vocab_cap = 0;
  bool shared_vocab = false;  // one vocabulary for both sides (capped by src_vocab_cap)
};

bool is_synthetic_text_spec(const std::string& spec);  // "synthetic"
// Throws std::invalid_argument on a malformed spec.
TextFilesSpec parse_text_files_spec(const std::string& spec);
// Checks that the files of a spec exist, loading nothing ("synthetic" passes).
void check_text_source(const std::string& spec);
// Dev and test pairs are kept whatever their length (scores cover the whole set); empty pairs
// are dropped everywhere. Throws std::invalid_argument on missing, unreadable or mismatched files.
ParallelCorpus read_parallel_text(const TextFilesSpec& spec, const TextFileOptions& options);
// "synthetic" (sized by `synthetic`) or a files spec (read with `files`).
std::shared_ptr<const ParallelCorpus> make_parallel_corpus(const std::string& spec,
                                                           const SyntheticTextOptions& synthetic,
                                                           const TextFileOptions& files);

// Data parallelism (shard.h): the corpus rank `shard.rank` trains on: the training pairs i with
// i % world_size == rank (corpus order), with dev, test and the vocabularies (built from the
// whole training set) unchanged, so every rank has the same model and held-out data. The
// corpus itself when world_size is 1; std::invalid_argument when the shard would be empty.
std::shared_ptr<const ParallelCorpus> shard_corpus(std::shared_ptr<const ParallelCorpus> corpus,
                                                   const DataShard& shard);

// ---------------------------------------------------------------------------------------------
// Batches

// Integer ids travel as fp32 (exact below 2^24). Rows are padded with 0 (<pad>).
struct TokenBatch {
  engine::Tensor src;            // [B, S] source ids (+ EOS when BatchingOptions::src_eos)
  engine::Tensor src_lengths;    // [B]
  engine::Tensor tgt_in;         // [B, T] BOS + target: the decoder's input
  engine::Tensor tgt_out;        // [B, T] target + EOS: what it must predict
  engine::Tensor tgt_lengths;    // [B] target tokens + 1
  int64_t pairs = 0;             // B; 0 past the end of a held-out split
  int64_t src_tokens = 0;        // real (unpadded) tokens: sum of src_lengths
  int64_t tgt_tokens = 0;        // sum of tgt_lengths (the tokens a loss counts)
  std::vector<int64_t> indices;  // the pairs, as indices into their split, in row order
};

// As Workload::next_batch gives it: inputs the source ids, labels the target ids to predict.
inline Batch as_batch(const TokenBatch& b) { return Batch{b.src, b.tgt_out, b.pairs}; }

// Pairs of `split` (indices) as a batch on `device`: built on the host in the `inputs` memory
// category, then copied to the device; on `meta`, shapes only.
TokenBatch make_token_batch(const std::vector<SentencePair>& split, const std::vector<int64_t>& indices,
                            engine::Device device, bool src_eos = false);

using BatchPlan = std::vector<std::vector<int64_t>>;

// The padded size of a batch: max(B * S, B * T), S and T as make_token_batch makes them.
int64_t padded_tokens(const std::vector<SentencePair>& split, const std::vector<int64_t>& indices, bool src_eos);

// Fixed count (seq2seq, TF NMT): `shuffle` (or corpus order when null), then, with buckets > 1,
// grouped as TF NMT's bucketing does: bucket = max(src, tgt length) / width, width =
// ceil((longest + 1) / buckets); each bucket cut into batches of `batch` pairs (the last one of a
// bucket may be short); the batch order shuffled. Every pair once.
BatchPlan plan_pair_batches(const std::vector<SentencePair>& split, int64_t batch, int64_t buckets,
                            engine::Rng* shuffle);

// Token budget (transformer, as fairseq's batch_by_size): pairs ordered by padded length
// (max of source and target, then target, then source; ties in `shuffle`d order, or corpus order
// when null), then packed greedily: a pair joins the batch while padded_tokens stays within
// `max_tokens`; the batch order shuffled. Pairs of similar length share a batch, so little is
// padding. Every pair once; throws std::invalid_argument when one pair alone exceeds the budget.
BatchPlan plan_token_batches(const std::vector<SentencePair>& split, int64_t max_tokens, bool src_eos,
                             engine::Rng* shuffle);

struct BatchingOptions {
  enum class Mode { pairs, tokens };
  Mode mode = Mode::pairs;
  int64_t pairs = 128;        // pairs mode: pairs per batch
  int64_t buckets = 1;        // pairs mode: length buckets (TF NMT's iwslt15 setting is 5); 1: none
  int64_t max_tokens = 4096;  // tokens mode: padded tokens per batch, the larger side
  bool src_eos = false;       // append EOS to sources (fairseq does, TF NMT does not)
};

// Training batches over epochs (the plan drawn again, seeded, at each epoch) and fixed held-out
// batches (planned once in corpus order, no shuffling).
class TextBatcher {
 public:
  TextBatcher(std::shared_ptr<const ParallelCorpus> corpus, BatchingOptions options, uint64_t seed,
              engine::Device device);
  TokenBatch next_train();
  TokenBatch heldout(int64_t index) const;  // the dev split; pairs == 0 past the end
  TokenBatch test(int64_t index) const;     // the test split; pairs == 0 past the end
  int64_t heldout_batches() const { return static_cast<int64_t>(dev_plan_.size()); }
  int64_t test_batches() const { return static_cast<int64_t>(test_plan_.size()); }
  int64_t epoch() const { return epoch_; }
  const BatchPlan& epoch_plan() const { return train_plan_; }  // the current epoch's batches
  const ParallelCorpus& corpus() const { return *corpus_; }

 private:
  BatchPlan plan(const std::vector<SentencePair>& split, engine::Rng* shuffle) const;
  std::shared_ptr<const ParallelCorpus> corpus_;
  BatchingOptions options_;
  engine::Device device_;
  engine::Rng rng_;
  BatchPlan train_plan_, dev_plan_, test_plan_;
  size_t cursor_ = 0;
  int64_t epoch_ = 0;
};

// ---------------------------------------------------------------------------------------------
// BLEU and decoding helpers

// Corpus BLEU-4 (Papineni et al. 2002) as sacreBLEU and multi-bleu.perl compute it: clipped
// n-gram matches and totals summed over the corpus, the geometric mean of the four precisions,
// brevity penalty exp(1 - r/c) when the total hypothesis length c is below the total reference
// length r (one reference per sentence). Scores 0..100.
//
// We score token ids, not text: sacreBLEU detokenises and applies its own tokeniser (13a), so on
// a real corpus its number differs from ours by the tokenisation (TF NMT's bleu.py, which TBD's
// seq2seq reports, also scores the tokens as they are). <pad>, <s> and </s> are removed from
// both sides; an <unk> in a reference never matches (a text scorer sees the real word there),
// and one in a hypothesis counts as a wrong token.
enum class BleuSmoothing {
  none,  // multi-bleu.perl, TF NMT's compute_bleu: any zero precision gives 0
  exp,   // sacreBLEU's default (mteval's): the k-th zero precision becomes 1 / (2^k * total)
};

struct BleuScore {
  double score = 0;                    // 0..100
  std::array<double, 4> precisions{};  // percent, after smoothing
  double brevity_penalty = 0;
  int64_t hyp_length = 0, ref_length = 0;
  std::array<int64_t, 4> matches{}, totals{};
};

class BleuAccumulator {
 public:
  void add(const std::vector<int32_t>& hypothesis, const std::vector<int32_t>& reference);
  BleuScore score(BleuSmoothing smoothing = BleuSmoothing::exp) const;
  int64_t sentences() const { return sentences_; }

 private:
  std::array<int64_t, 4> matches_{}, totals_{};
  int64_t hyp_length_ = 0, ref_length_ = 0, sentences_ = 0;
};

// Throws std::invalid_argument when the counts differ.
BleuScore corpus_bleu(const std::vector<std::vector<int32_t>>& hypotheses,
                      const std::vector<std::vector<int32_t>>& references,
                      BleuSmoothing smoothing = BleuSmoothing::exp);
// No smoothing: what multi-bleu.perl and TF NMT report.
double corpus_bleu_unsmoothed(const std::vector<std::vector<int32_t>>& hypotheses,
                              const std::vector<std::vector<int32_t>>& references);

// Decoder output ids [rows, steps] (row-major) to sentences: each row up to its first EOS, with
// <pad> and <s> dropped.
std::vector<std::vector<int32_t>> ids_to_sentences(const std::vector<float>& ids, int64_t rows, int64_t steps);
std::vector<std::vector<int32_t>> ids_to_sentences(const engine::Tensor& ids);  // [rows, steps], any device
// Words joined by single spaces, for logs; <pad>, <s>, </s> dropped, <unk> shown.
std::string detokenize(const Vocabulary& vocab, const std::vector<int32_t>& ids);

}  // namespace ts::workloads
