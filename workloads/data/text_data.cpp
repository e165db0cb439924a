#include "workloads/data/text_data.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <stdexcept>
#include <unordered_set>

#include "engine/backend.h"
#include "engine/context.h"

namespace ts::workloads {

using engine::Tensor;
namespace fs = std::filesystem;

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f'; }

std::vector<std::string_view> split_tokens(std::string_view line) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && is_space(line[i])) ++i;
    const size_t start = i;
    while (i < line.size() && !is_space(line[i])) ++i;
    if (i > start) out.push_back(line.substr(start, i - start));
  }
  return out;
}

template <typename T>
void shuffle_in_place(std::vector<T>& v, engine::Rng& rng) {
  // Fisher-Yates with our own generator: the same order on every standard library.
  for (size_t i = v.size(); i > 1; --i) {
    std::swap(v[i - 1], v[static_cast<size_t>(rng.integer(static_cast<int64_t>(i)))]);
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Vocabulary

const std::array<std::string, Vocabulary::kSpecials>& Vocabulary::special_tokens() {
  static const std::array<std::string, kSpecials> tokens = {"<pad>", "<s>", "</s>", "<unk>"};
  return tokens;
}

bool Vocabulary::is_special_token(std::string_view word) {
  return word == "<pad>" || word == "<s>" || word == "</s>" || word == "<unk>" || word == "<bos>" || word == "<eos>";
}

Vocabulary::Vocabulary() {
  for (const auto& w : special_tokens()) {
    ids_.emplace(w, static_cast<int32_t>(words_.size()));
    words_.push_back(w);
  }
}

Vocabulary::Vocabulary(const std::vector<std::string>& words) : Vocabulary() {
  for (const auto& w : words) add(w);
}

void Vocabulary::add(const std::string& word) {
  if (word.empty() || std::any_of(word.begin(), word.end(), is_space)) {
    throw std::invalid_argument("vocabulary word '" + word + "' is empty or holds white space");
  }
  if (is_special_token(word)) throw std::invalid_argument("vocabulary word '" + word + "' is a special token");
  if (!ids_.emplace(word, static_cast<int32_t>(words_.size())).second) {
    throw std::invalid_argument("vocabulary word '" + word + "' appears twice");
  }
  words_.push_back(word);
}

Vocabulary Vocabulary::from_counts(const std::unordered_map<std::string, int64_t>& counts, int64_t max_size) {
  if (max_size != 0 && max_size < kSpecials) {
    throw std::invalid_argument("a vocabulary cap must leave room for the " + std::to_string(kSpecials) +
                                " special tokens (got " + std::to_string(max_size) + ")");
  }
  std::vector<std::pair<std::string, int64_t>> sorted;
  sorted.reserve(counts.size());
  for (const auto& [w, c] : counts) {
    if (!is_special_token(w)) sorted.emplace_back(w, c);
  }
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  if (max_size > 0 && static_cast<int64_t>(sorted.size()) > max_size - kSpecials) {
    sorted.resize(static_cast<size_t>(max_size - kSpecials));
  }
  Vocabulary v;
  for (const auto& [w, c] : sorted) v.add(w);
  return v;
}

Vocabulary Vocabulary::load(const std::string& path) {
  if (!fs::exists(path)) throw std::invalid_argument("vocabulary file " + path + " not found");
  std::ifstream in(path);
  if (!in || fs::is_directory(path)) throw std::invalid_argument("cannot read vocabulary file " + path);
  Vocabulary v;
  std::string line;
  int64_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    const auto fields = split_tokens(line);
    const std::string where = path + ":" + std::to_string(line_no) + ": ";
    // One token, optionally followed by a count (fairseq's dict.txt).
    const bool count_ok = fields.size() == 2 &&
                          std::all_of(fields[1].begin(), fields[1].end(), [](char c) { return c >= '0' && c <= '9'; });
    if (fields.size() != 1 && !count_ok) {
      throw std::invalid_argument(where + "expected one token per line (optionally followed by a count)");
    }
    const std::string word(fields[0]);
    if (is_special_token(word)) continue;
    if (v.contains(word)) throw std::invalid_argument(where + "'" + word + "' appears twice");
    v.add(word);
  }
  if (in.bad())
    throw std::invalid_argument("error reading vocabulary file " + path + " after line " + std::to_string(line_no));
  return v;
}

void Vocabulary::save(const std::string& path) const {
  std::ofstream out(path);
  for (const auto& w : words_) out << w << '\n';
  out.flush();
  if (!out) throw std::runtime_error("cannot write vocabulary file " + path);
}

int32_t Vocabulary::id(std::string_view word) const {
  const auto it = ids_.find(std::string(word));
  return it == ids_.end() ? kUnk : it->second;
}

bool Vocabulary::contains(std::string_view word) const { return ids_.count(std::string(word)) != 0; }

const std::string& Vocabulary::word(int32_t id) const {
  if (id < 0 || id >= size()) {
    throw std::out_of_range("token id " + std::to_string(id) + " outside a vocabulary of " + std::to_string(size()));
  }
  return words_[static_cast<size_t>(id)];
}

std::vector<int32_t> Vocabulary::encode(std::string_view line) const {
  std::vector<int32_t> ids;
  for (auto t : split_tokens(line)) ids.push_back(id(t));
  return ids;
}

// ---------------------------------------------------------------------------------------------
// The synthetic language pair

const char* word_class_name(WordClass c) {
  switch (c) {
    case WordClass::det_sg: return "singular determiner";
    case WordClass::det_pl: return "plural determiner";
    case WordClass::number: return "number";
    case WordClass::adjective: return "adjective";
    case WordClass::noun: return "noun";
    case WordClass::verb: return "verb";
    case WordClass::adverb: return "adverb";
    case WordClass::preposition: return "preposition";
    case WordClass::conjunction: return "conjunction";
  }
  return "?";
}

namespace {

// The grammar's probabilities (documented in the header).
constexpr double kPlural = 0.4, kNumber = 0.3, kFirstAdj = 0.5, kMoreAdj = 0.4, kObject = 0.7, kVerbPP = 0.3,
                 kAdverb = 0.3, kMoreClauses = 0.55;
constexpr int kMaxAdj = 3, kMaxClauses = 4, kMaxDepth = 2;
constexpr double kNounPP[kMaxDepth] = {0.25, 0.1};
constexpr int kMaxAttempts = 10000;

constexpr size_t idx(WordClass c) { return static_cast<size_t>(c); }

// Expected tokens of each class per clause, from the probabilities above: it orders the words
// by frequency, so that the frequent ones get the one-token codes.
std::array<double, kWordClasses> class_weights() {
  std::array<double, kWordClasses> w{};
  const double adj = kFirstAdj * (1 + kMoreAdj * (1 + kMoreAdj));
  // An NP at depth d, scaled by how often it occurs.
  auto np = [&](auto&& self, int depth, double times) -> void {
    w[idx(WordClass::det_sg)] += times * (1 - kPlural);
    w[idx(WordClass::det_pl)] += times * kPlural;
    w[idx(WordClass::number)] += times * kPlural * kNumber;
    w[idx(WordClass::adjective)] += times * adj;
    w[idx(WordClass::noun)] += times;
    if (depth < kMaxDepth) {
      w[idx(WordClass::preposition)] += times * kNounPP[depth];
      self(self, depth + 1, times * kNounPP[depth]);
    }
  };
  np(np, 0, 1.0 + kObject);
  w[idx(WordClass::verb)] += 1;
  w[idx(WordClass::preposition)] += kVerbPP;
  np(np, 1, kVerbPP);
  w[idx(WordClass::adverb)] += kAdverb;
  w[idx(WordClass::conjunction)] += kMoreClauses;
  return w;
}

// Class sizes for `n` source words: closed classes at their natural size, shrunk for tiny
// vocabularies; the open classes share the rest.
std::array<int64_t, kWordClasses> class_sizes(int64_t n) {
  std::array<int64_t, kWordClasses> s{};
  auto closed = [&](WordClass c, int64_t natural, double share) {
    s[idx(c)] = std::clamp(static_cast<int64_t>(static_cast<double>(n) * share), int64_t{1}, natural);
  };
  closed(WordClass::det_sg, 5, 0.03);
  closed(WordClass::det_pl, 5, 0.03);
  closed(WordClass::number, 12, 0.05);
  closed(WordClass::preposition, 20, 0.08);
  closed(WordClass::conjunction, 5, 0.03);
  int64_t rest = n;
  for (auto c :
       {WordClass::det_sg, WordClass::det_pl, WordClass::number, WordClass::preposition, WordClass::conjunction}) {
    rest -= s[idx(c)];
  }
  auto open = [&](WordClass c, double share) {
    s[idx(c)] = std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(rest) * share));
  };
  open(WordClass::adjective, 0.22);
  open(WordClass::verb, 0.18);
  open(WordClass::adverb, 0.08);
  s[idx(WordClass::noun)] = rest - s[idx(WordClass::adjective)] - s[idx(WordClass::verb)] - s[idx(WordClass::adverb)];
  return s;
}

// Word `index` spelt in syllables from `inventory`: all one-syllable words first, then all
// two-syllable ones, ...: distinct indices give distinct spellings.
std::string spell(int64_t index, const std::vector<std::string>& inventory) {
  const auto base = static_cast<int64_t>(inventory.size());
  int64_t syllables = 1, block = base;
  while (index >= block) {
    index -= block;
    block *= base;
    ++syllables;
  }
  std::string word;
  for (int64_t i = 0; i < syllables; ++i) {
    word.insert(0, inventory[static_cast<size_t>(index % base)]);
    index /= base;
  }
  return word;
}

// Source syllables end in a vowel, target syllables in a consonant: the two word sets never meet.
const std::vector<std::string>& source_syllables() {
  static const std::vector<std::string> s = [] {
    std::vector<std::string> v;
    for (char c : std::string("bdfgklmnprstvz")) {
      for (char a : std::string("aeiou")) v.push_back(std::string{c, a});
    }
    return v;
  }();
  return s;
}

const std::vector<std::string>& target_syllables() {
  static const std::vector<std::string> s = [] {
    std::vector<std::string> v;
    for (char c : std::string("bcdghklmnpqrstvx")) {
      for (char a : std::string("aeiouy")) {
        for (char f : std::string("cmnpt")) v.push_back(std::string{c, a, f});
      }
    }
    return v;
  }();
  return s;
}

uint64_t hash_ids(const std::vector<int32_t>& ids) {
  uint64_t h = 1469598103934665603ULL;  // FNV-1a
  for (int32_t id : ids) {
    h ^= static_cast<uint32_t>(id);
    h *= 1099511628211ULL;
  }
  return h;
}

constexpr uint64_t kLexiconStream = 0x1e71c0;
constexpr uint64_t kTrainStream = 0x7ea1, kDevStream = 0xde7, kTestStream = 0x7e57;

}  // namespace

SyntheticTranslation::SyntheticTranslation(const SyntheticTextOptions& options) : options_(options) {
  const SyntheticTextOptions& o = options_;
  const int64_t markers = 2;
  int64_t n_src = 0, n_tgt = 0;
  if (o.shared_vocab > 0) {
    // One id space: the source words, then the target words, then the markers.
    const int64_t words = o.shared_vocab - Vocabulary::kSpecials - markers;
    n_src = (words + 1) / 2;
    n_tgt = words - n_src;
  } else {
    n_src = o.src_vocab - Vocabulary::kSpecials;
    n_tgt = o.tgt_vocab - Vocabulary::kSpecials - markers;
  }
  const std::string sizes =
      o.shared_vocab > 0 ? "a shared vocabulary of " + std::to_string(o.shared_vocab)
                         : "vocabularies of " + std::to_string(o.src_vocab) + " and " + std::to_string(o.tgt_vocab);
  if (n_src < kWordClasses) {
    throw std::invalid_argument("synthetic text: " + sizes + " ids leave fewer than " + std::to_string(kWordClasses) +
                                " source words (one per word class)");
  }
  if (n_tgt < 2 || n_tgt > 2 * n_src) {
    throw std::invalid_argument("synthetic text: " + sizes + " ids give " + std::to_string(n_tgt) +
                                " target words for " + std::to_string(n_src) +
                                " source words; the dictionary needs between 2 and twice as many");
  }
  if (n_src > n_tgt * n_tgt - n_tgt + 1) {  // b <= n_tgt - 1 compound heads must suffice
    throw std::invalid_argument("synthetic text: " + sizes + ": too few target words to spell " +
                                std::to_string(n_src) + " source words in codes of at most two tokens");
  }
  if (o.min_length < 1 || o.max_length < 3 || o.min_length > o.max_length) {
    throw std::invalid_argument("synthetic text: lengths need 1 <= min_length <= max_length and max_length >= 3 (got " +
                                std::to_string(o.min_length) + ".." + std::to_string(o.max_length) + ")");
  }
  if (o.train_pairs < 0 || o.dev_pairs < 0 || o.test_pairs < 0) {
    throw std::invalid_argument("synthetic text: negative split size");
  }
  if (!(o.zipf_exponent >= 0)) throw std::invalid_argument("synthetic text: the Zipf exponent must be >= 0");

  // Source words, class by class, the most frequent first.
  const auto sizes_by_class = class_sizes(n_src);
  std::vector<std::string> src_words;
  for (int c = 0; c < kWordClasses; ++c) {
    auto& members = classes_[static_cast<size_t>(c)];
    auto& cdf = cdf_[static_cast<size_t>(c)];
    double total = 0;
    for (int64_t r = 0; r < sizes_by_class[static_cast<size_t>(c)]; ++r) {
      members.push_back(Vocabulary::kSpecials + static_cast<int32_t>(src_words.size()));
      src_words.push_back(spell(static_cast<int64_t>(src_words.size()), source_syllables()));
      total += 1.0 / std::pow(static_cast<double>(r + 1), o.zipf_exponent);
      cdf.push_back(total);
    }
  }
  std::vector<std::string> tgt_words;
  for (int64_t j = 0; j < n_tgt; ++j) tgt_words.push_back(spell(j, target_syllables()));

  int32_t tgt_base = Vocabulary::kSpecials;  // the first target word's id
  if (o.shared_vocab > 0) {
    std::vector<std::string> all = src_words;
    all.insert(all.end(), tgt_words.begin(), tgt_words.end());
    all.push_back("@pl");
    all.push_back("@agr");
    src_vocab_ = tgt_vocab_ = std::make_shared<const Vocabulary>(all);
    tgt_base = Vocabulary::kSpecials + static_cast<int32_t>(n_src);
  } else {
    src_vocab_ = std::make_shared<const Vocabulary>(src_words);
    tgt_words.push_back("@pl");
    tgt_words.push_back("@agr");
    tgt_vocab_ = std::make_shared<const Vocabulary>(tgt_words);
  }
  plural_marker_ = tgt_base + static_cast<int32_t>(n_tgt);
  agreement_marker_ = plural_marker_ + 1;

  class_of_.assign(static_cast<size_t>(Vocabulary::kSpecials + n_src), -1);
  for (int c = 0; c < kWordClasses; ++c) {
    for (int32_t id : classes_[static_cast<size_t>(c)]) class_of_[static_cast<size_t>(id)] = static_cast<int8_t>(c);
  }

  // The dictionary. Source words by expected frequency (class weight x Zipf share).
  const auto weights = class_weights();
  std::vector<std::pair<double, int32_t>> by_freq;
  for (int c = 0; c < kWordClasses; ++c) {
    const auto& cdf = cdf_[static_cast<size_t>(c)];
    for (size_t r = 0; r < cdf.size(); ++r) {
      const double share = (cdf[r] - (r ? cdf[r - 1] : 0.0)) / cdf.back();
      by_freq.emplace_back(weights[static_cast<size_t>(c)] * share, classes_[static_cast<size_t>(c)][r]);
    }
  }
  std::stable_sort(by_freq.begin(), by_freq.end(), [](const auto& a, const auto& b) { return a.first > b.first; });

  engine::Rng lex(o.seed * 0x9e3779b97f4a7c15ULL + kLexiconStream);
  std::vector<int32_t> tokens(static_cast<size_t>(n_tgt));
  std::iota(tokens.begin(), tokens.end(), tgt_base);
  shuffle_in_place(tokens, lex);

  // Token roles: `singles` are words on their own; `heads` only ever start a compound; every
  // token is used by some code, so every target id is reachable.
  int64_t singles = 0, heads = 0;
  std::vector<int32_t> seconds;  // the tokens that may end a compound
  if (n_tgt >= n_src) {
    const int64_t compounds = n_tgt - n_src;  // (head, tail) pairs, both used once
    singles = n_src - compounds;
    heads = compounds;
    seconds.assign(tokens.begin() + singles + heads, tokens.end());
  } else {
    // A fifth of the tokens as heads, or the fewest that can spell every word.
    const int64_t needed = (n_src - n_tgt + n_tgt - 2) / (n_tgt - 1);
    heads = std::min(n_tgt - 1, std::max(needed, n_tgt / 5));
    singles = n_tgt - heads;
    seconds = tokens;
    shuffle_in_place(seconds, lex);
  }
  codes_.assign(class_of_.size(), {});
  const auto n_seconds = static_cast<int64_t>(seconds.size());
  for (size_t k = 0; k < by_freq.size(); ++k) {
    auto& code = codes_[static_cast<size_t>(by_freq[k].second)];
    const auto kk = static_cast<int64_t>(k);
    if (kk < singles) {
      code = {tokens[k]};
    } else {
      const int64_t c = kk - singles;  // the c-th compound
      const int64_t head = c % heads, round = c / heads;
      // More target words than source words: head c pairs with tail c, each used once. Fewer:
      // distinct tails per head (round < n_seconds), spread over the tails by the head's offset.
      const int64_t tail = n_tgt >= n_src ? c : (round + head * (n_seconds / heads + 1)) % n_seconds;
      code = {tokens[static_cast<size_t>(singles + head)], seconds[static_cast<size_t>(tail)]};
    }
  }

  // Lengths no sentence can meet fail here rather than deep in corpus().
  engine::Rng probe(o.seed + 1);
  try {
    (void)sample(probe);
  } catch (const std::runtime_error& e) {
    throw std::invalid_argument(std::string("synthetic text: ") + e.what());
  }
}

WordClass SyntheticTranslation::word_class(int32_t src_id) const {
  if (src_id < 0 || src_id >= static_cast<int32_t>(class_of_.size()) || class_of_[static_cast<size_t>(src_id)] < 0) {
    throw std::invalid_argument("token id " + std::to_string(src_id) +
                                " is not a source word of the synthetic grammar");
  }
  return static_cast<WordClass>(class_of_[static_cast<size_t>(src_id)]);
}

const std::vector<int32_t>& SyntheticTranslation::code(int32_t src_id) const {
  (void)word_class(src_id);
  return codes_[static_cast<size_t>(src_id)];
}

void SyntheticTranslation::append_code(int32_t src_id, std::vector<int32_t>& out) const {
  const auto& c = codes_[static_cast<size_t>(src_id)];
  out.insert(out.end(), c.begin(), c.end());
}

int32_t SyntheticTranslation::draw(WordClass c, engine::Rng& rng) const {
  const auto& cdf = cdf_[idx(c)];
  const double u = rng.uniform() * cdf.back();
  const auto r =
      std::min<size_t>(static_cast<size_t>(std::upper_bound(cdf.begin(), cdf.end(), u) - cdf.begin()), cdf.size() - 1);
  return classes_[idx(c)][r];
}

void SyntheticTranslation::sample_np(engine::Rng& rng, int depth, std::vector<int32_t>& out) const {
  const bool plural = rng.uniform() < kPlural;
  out.push_back(draw(plural ? WordClass::det_pl : WordClass::det_sg, rng));
  if (plural && rng.uniform() < kNumber) out.push_back(draw(WordClass::number, rng));
  for (int a = 0; a < kMaxAdj && rng.uniform() < (a == 0 ? kFirstAdj : kMoreAdj); ++a) {
    out.push_back(draw(WordClass::adjective, rng));
  }
  out.push_back(draw(WordClass::noun, rng));
  if (depth < kMaxDepth && rng.uniform() < kNounPP[depth]) {
    out.push_back(draw(WordClass::preposition, rng));
    sample_np(rng, depth + 1, out);
  }
}

void SyntheticTranslation::sample_clause(engine::Rng& rng, std::vector<int32_t>& out) const {
  sample_np(rng, 0, out);
  out.push_back(draw(WordClass::verb, rng));
  if (rng.uniform() < kObject) sample_np(rng, 0, out);
  if (rng.uniform() < kVerbPP) {
    out.push_back(draw(WordClass::preposition, rng));
    sample_np(rng, 1, out);
  }
  if (rng.uniform() < kAdverb) out.push_back(draw(WordClass::adverb, rng));
}

std::vector<int32_t> SyntheticTranslation::sample_source(engine::Rng& rng) const {
  std::vector<int32_t> s;
  sample_clause(rng, s);
  for (int n = 1; n < kMaxClauses && rng.uniform() < kMoreClauses; ++n) {
    s.push_back(draw(WordClass::conjunction, rng));
    sample_clause(rng, s);
  }
  return s;
}

SentencePair SyntheticTranslation::sample(engine::Rng& rng) const {
  const auto min_len = static_cast<size_t>(options_.min_length), max_len = static_cast<size_t>(options_.max_length);
  for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
    SentencePair p;
    p.src = sample_source(rng);
    while (p.src.size() < min_len) {
      p.src.push_back(draw(WordClass::conjunction, rng));
      sample_clause(rng, p.src);
    }
    if (p.src.size() > max_len) continue;
    p.tgt = translate(p.src);  // never shorter than the source
    if (p.tgt.size() <= max_len) return p;
  }
  throw std::runtime_error("no sentence pair of " + std::to_string(min_len) + ".." + std::to_string(max_len) +
                           " tokens in " + std::to_string(kMaxAttempts) + " draws; widen the length limits");
}

size_t SyntheticTranslation::parse_np(const std::vector<int32_t>& src, size_t pos, std::vector<int32_t>& out,
                                      bool& plural) const {
  auto fail = [&](const std::string& what) {
    const std::string found = pos < src.size() ? "'" + src_vocab_->word(src[pos]) + "'" : "the end";
    throw std::invalid_argument("translate: token " + std::to_string(pos) + ": expected " + what + ", found " + found);
  };
  auto cls = [&](size_t p) { return class_of_[static_cast<size_t>(src[p])]; };
  if (pos >= src.size() || (cls(pos) != int8_t(WordClass::det_sg) && cls(pos) != int8_t(WordClass::det_pl))) {
    fail("a determiner");
  }
  plural = cls(pos) == int8_t(WordClass::det_pl);
  append_code(src[pos++], out);
  if (pos < src.size() && cls(pos) == int8_t(WordClass::number)) {
    if (!plural) fail("no number after a singular determiner");
    append_code(src[pos++], out);
  }
  const size_t first_adj = pos;
  while (pos < src.size() && cls(pos) == int8_t(WordClass::adjective)) ++pos;
  const size_t end_adj = pos;
  if (pos >= src.size() || cls(pos) != int8_t(WordClass::noun)) fail("a noun");
  append_code(src[pos++], out);
  if (plural) out.push_back(plural_marker_);
  for (size_t a = end_adj; a > first_adj; --a) append_code(src[a - 1], out);  // mirrored, after the noun
  return pos;
}

std::vector<int32_t> SyntheticTranslation::translate(const std::vector<int32_t>& src) const {
  for (size_t i = 0; i < src.size(); ++i) {
    if (src[i] < 0 || src[i] >= static_cast<int32_t>(class_of_.size()) || class_of_[static_cast<size_t>(src[i])] < 0) {
      throw std::invalid_argument("translate: token " + std::to_string(i) + " (id " + std::to_string(src[i]) +
                                  ") is not a source word");
    }
  }
  auto is = [&](size_t p, WordClass c) {
    return p < src.size() && class_of_[static_cast<size_t>(src[p])] == int8_t(c);
  };
  std::vector<int32_t> out;
  size_t pos = 0;
  // Prepositional phrases end their NP or VP in both languages, so attachment does not matter.
  auto pps = [&]() {
    while (is(pos, WordClass::preposition)) {
      append_code(src[pos++], out);
      bool plural = false;
      pos = parse_np(src, pos, out, plural);
    }
  };
  for (;;) {
    bool subject_plural = false;
    pos = parse_np(src, pos, out, subject_plural);
    pps();
    if (!is(pos, WordClass::verb)) {
      throw std::invalid_argument("translate: token " + std::to_string(pos) + ": expected a verb");
    }
    const int32_t verb = src[pos++];
    if (is(pos, WordClass::det_sg) || is(pos, WordClass::det_pl)) {
      bool plural = false;
      pos = parse_np(src, pos, out, plural);
    }
    pps();
    if (is(pos, WordClass::adverb)) append_code(src[pos++], out);
    append_code(verb, out);  // verb-final
    if (subject_plural) out.push_back(agreement_marker_);
    if (pos == src.size()) break;
    if (!is(pos, WordClass::conjunction)) {
      throw std::invalid_argument("translate: token " + std::to_string(pos) + ": expected a conjunction or the end");
    }
    append_code(src[pos++], out);
  }
  return out;
}

ParallelCorpus SyntheticTranslation::corpus() const {
  ParallelCorpus c;
  c.name = "synthetic";
  c.src_vocab = src_vocab_;
  c.tgt_vocab = tgt_vocab_;
  std::unordered_set<uint64_t> seen;  // source hashes: a collision only redraws a held-out pair
  seen.reserve(static_cast<size_t>(options_.train_pairs + options_.dev_pairs + options_.test_pairs));
  const uint64_t base = options_.seed * 0x9e3779b97f4a7c15ULL;
  engine::Rng train_rng(base + kTrainStream);
  c.train.reserve(static_cast<size_t>(options_.train_pairs));
  for (int64_t i = 0; i < options_.train_pairs; ++i) {
    c.train.push_back(sample(train_rng));
    seen.insert(hash_ids(c.train.back().src));
  }
  auto heldout = [&](std::vector<SentencePair>& split, int64_t n, uint64_t stream, const char* name) {
    engine::Rng rng(base + stream);
    const int64_t budget = 1000 + 100 * n;
    for (int64_t tries = 0; static_cast<int64_t>(split.size()) < n; ++tries) {
      if (tries > budget) {
        throw std::runtime_error(std::string("synthetic text: cannot draw ") + std::to_string(n) + " " + name +
                                 " sentences unseen in training; raise the vocabulary or the length limits");
      }
      SentencePair p = sample(rng);
      if (seen.insert(hash_ids(p.src)).second) split.push_back(std::move(p));
    }
  };
  heldout(c.dev, options_.dev_pairs, kDevStream, "dev");
  heldout(c.test, options_.test_pairs, kTestStream, "test");
  return c;
}

// ---------------------------------------------------------------------------------------------
// Files

bool is_synthetic_text_spec(const std::string& spec) { return spec == "synthetic"; }

TextFilesSpec parse_text_files_spec(const std::string& spec) {
  std::vector<std::string> f;
  size_t start = 0;
  for (;;) {
    const size_t colon = spec.find(':', start);
    f.push_back(spec.substr(start, colon == std::string::npos ? std::string::npos : colon - start));
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  const bool empty_field = std::any_of(f.begin(), f.end(), [](const std::string& s) { return s.empty(); });
  if (f.size() < 3 || f.size() > 5 || empty_field) {
    throw std::invalid_argument(
        "text data '" + spec +
        "': expected synthetic or DIR:SRC:TGT[:DEV[:TEST]] (e.g. /data/iwslt15:en:vi:tst2012:tst2013)");
  }
  TextFilesSpec s;
  s.directory = f[0];
  s.src_lang = f[1];
  s.tgt_lang = f[2];
  if (f.size() > 3) s.dev = f[3];
  if (f.size() > 4) s.test = f[4];
  if (s.src_lang == s.tgt_lang)
    throw std::invalid_argument("text data '" + spec + "': source and target languages are the same");
  return s;
}

namespace {

struct SplitFiles {
  fs::path src, tgt;
};

SplitFiles split_files(const TextFilesSpec& s, const std::string& prefix) {
  const fs::path dir(s.directory);
  return {dir / (prefix + "." + s.src_lang), dir / (prefix + "." + s.tgt_lang)};
}

// Which of the optional pairs (test, vocabularies) are present; one file of a pair alone is an error.
bool pair_present(const SplitFiles& f, const char* what) {
  const bool a = fs::exists(f.src), b = fs::exists(f.tgt);
  if (a != b) {
    throw std::invalid_argument(std::string(what) + ": " + (a ? f.src : f.tgt).string() + " has no partner " +
                                (a ? f.tgt : f.src).string());
  }
  return a;
}

void require_pair(const SplitFiles& f) {
  for (const auto& p : {f.src, f.tgt}) {
    if (!fs::exists(p)) throw std::invalid_argument("parallel text: missing file " + p.string());
  }
}

std::vector<std::string> read_lines(const fs::path& path) {
  if (!fs::exists(path)) throw std::invalid_argument("parallel text: missing file " + path.string());
  if (!fs::is_regular_file(path)) throw std::invalid_argument("parallel text: " + path.string() + " is not a file");
  std::ifstream in(path);
  if (!in) throw std::invalid_argument("parallel text: cannot read " + path.string());
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) lines.push_back(std::move(line));
  if (in.bad()) {
    throw std::invalid_argument("parallel text: error reading " + path.string() + " after line " +
                                std::to_string(lines.size()));
  }
  return lines;
}

struct TokenisedSplit {
  std::vector<std::vector<std::string>> src, tgt;
};

TokenisedSplit read_split(const SplitFiles& f, int64_t max_length, ParallelCorpus& corpus) {
  const auto src = read_lines(f.src), tgt = read_lines(f.tgt);
  if (src.size() != tgt.size()) {
    const bool src_short = src.size() < tgt.size();
    const auto& shorter = src_short ? f.src : f.tgt;
    const auto& longer = src_short ? f.tgt : f.src;
    throw std::invalid_argument("parallel text: " + shorter.string() + " ends at line " +
                                std::to_string(std::min(src.size(), tgt.size())) + " but " + longer.string() + " has " +
                                std::to_string(std::max(src.size(), tgt.size())) +
                                " lines; the files must pair line by line");
  }
  TokenisedSplit out;
  for (size_t i = 0; i < src.size(); ++i) {
    auto s = split_tokens(src[i]), t = split_tokens(tgt[i]);
    if (s.empty() || t.empty()) {
      ++corpus.dropped_empty;
      continue;
    }
    if (max_length > 0 &&
        (static_cast<int64_t>(s.size()) > max_length || static_cast<int64_t>(t.size()) > max_length)) {
      ++corpus.dropped_too_long;
      continue;
    }
    out.src.emplace_back(s.begin(), s.end());
    out.tgt.emplace_back(t.begin(), t.end());
  }
  return out;
}

std::vector<SentencePair> encode_split(const TokenisedSplit& s, const Vocabulary& sv, const Vocabulary& tv) {
  std::vector<SentencePair> out(s.src.size());
  for (size_t i = 0; i < s.src.size(); ++i) {
    for (const auto& w : s.src[i]) out[i].src.push_back(sv.id(w));
    for (const auto& w : s.tgt[i]) out[i].tgt.push_back(tv.id(w));
  }
  return out;
}

}  // namespace

void check_text_source(const std::string& spec) {
  if (is_synthetic_text_spec(spec)) return;
  const TextFilesSpec s = parse_text_files_spec(spec);
  if (!fs::is_directory(s.directory)) throw std::invalid_argument("parallel text: no directory " + s.directory);
  require_pair(split_files(s, "train"));
  require_pair(split_files(s, s.dev));
  (void)pair_present(split_files(s, s.test), "parallel text");
  (void)pair_present(split_files(s, "vocab"), "parallel text");
}

ParallelCorpus read_parallel_text(const TextFilesSpec& spec, const TextFileOptions& options) {
  if (!fs::is_directory(spec.directory)) throw std::invalid_argument("parallel text: no directory " + spec.directory);
  if (options.max_length < 0) throw std::invalid_argument("parallel text: negative max_length");
  ParallelCorpus c;
  c.name = spec.directory;
  const auto train_files = split_files(spec, "train"), dev_files = split_files(spec, spec.dev),
             test_files = split_files(spec, spec.test), vocab_files = split_files(spec, "vocab");
  require_pair(train_files);
  require_pair(dev_files);
  const bool has_test = pair_present(test_files, "parallel text");
  const bool has_vocab = pair_present(vocab_files, "parallel text");

  const TokenisedSplit train = read_split(train_files, options.max_length, c);
  // Held-out splits are scored whole: no length filter there.
  const TokenisedSplit dev = read_split(dev_files, 0, c);
  const TokenisedSplit test = has_test ? read_split(test_files, 0, c) : TokenisedSplit{};

  if (has_vocab) {
    auto sv = std::make_shared<Vocabulary>(Vocabulary::load(vocab_files.src.string()));
    const Vocabulary tv = Vocabulary::load(vocab_files.tgt.string());
    if (options.shared_vocab) {
      // fairseq's joined dictionaries are identical; otherwise the union, source words first.
      std::vector<std::string> words(sv->words().begin() + Vocabulary::kSpecials, sv->words().end());
      for (auto it = tv.words().begin() + Vocabulary::kSpecials; it != tv.words().end(); ++it) {
        if (!sv->contains(*it)) words.push_back(*it);
      }
      c.src_vocab = c.tgt_vocab = std::make_shared<const Vocabulary>(words);
    } else {
      c.src_vocab = std::move(sv);
      c.tgt_vocab = std::make_shared<const Vocabulary>(tv);
    }
  } else {
    std::unordered_map<std::string, int64_t> src_counts, tgt_counts;
    for (const auto& s : train.src) {
      for (const auto& w : s) ++src_counts[w];
    }
    for (const auto& t : train.tgt) {
      for (const auto& w : t) ++(options.shared_vocab ? src_counts : tgt_counts)[w];
    }
    c.src_vocab = std::make_shared<const Vocabulary>(Vocabulary::from_counts(src_counts, options.src_vocab_cap));
    c.tgt_vocab = options.shared_vocab
                      ? c.src_vocab
                      : std::make_shared<const Vocabulary>(Vocabulary::from_counts(tgt_counts, options.tgt_vocab_cap));
  }
  c.train = encode_split(train, *c.src_vocab, *c.tgt_vocab);
  c.dev = encode_split(dev, *c.src_vocab, *c.tgt_vocab);
  c.test = encode_split(test, *c.src_vocab, *c.tgt_vocab);
  return c;
}

std::shared_ptr<const ParallelCorpus> make_parallel_corpus(const std::string& spec,
                                                           const SyntheticTextOptions& synthetic,
                                                           const TextFileOptions& files) {
  if (is_synthetic_text_spec(spec)) {
    return std::make_shared<const ParallelCorpus>(SyntheticTranslation(synthetic).corpus());
  }
  return std::make_shared<const ParallelCorpus>(read_parallel_text(parse_text_files_spec(spec), files));
}

std::shared_ptr<const ParallelCorpus> shard_corpus(std::shared_ptr<const ParallelCorpus> corpus,
                                                   const DataShard& shard) {
  check_shard(shard, "shard_corpus");
  if (!corpus || shard.whole()) return corpus;
  auto out = std::make_shared<ParallelCorpus>();
  out->name = corpus->name;
  out->src_vocab = corpus->src_vocab;
  out->tgt_vocab = corpus->tgt_vocab;
  out->train = take_shard(corpus->train, shard, "the training pairs of '" + corpus->name + "'");
  out->dev = corpus->dev;
  out->test = corpus->test;
  out->dropped_too_long = corpus->dropped_too_long;
  out->dropped_empty = corpus->dropped_empty;
  return out;
}

// ---------------------------------------------------------------------------------------------
// Batches

namespace {

constexpr int64_t kMaxExactId = int64_t{1} << 24;  // fp32 holds every integer below this

int64_t src_len(const SentencePair& p, bool src_eos) {
  return std::max<int64_t>(1, static_cast<int64_t>(p.src.size()) + (src_eos ? 1 : 0));
}
int64_t tgt_len(const SentencePair& p) { return static_cast<int64_t>(p.tgt.size()) + 1; }

const SentencePair& pair_at(const std::vector<SentencePair>& split, int64_t i) {
  if (i < 0 || i >= static_cast<int64_t>(split.size())) {
    throw std::out_of_range("pair " + std::to_string(i) + " outside a split of " + std::to_string(split.size()));
  }
  return split[static_cast<size_t>(i)];
}

float id_value(int32_t id) {
  if (id < 0 || id >= kMaxExactId)
    throw std::invalid_argument("token id " + std::to_string(id) + " cannot travel as fp32");
  return static_cast<float>(id);
}

Tensor to_device(const engine::Shape& shape, const std::vector<float>& host_values, engine::Device device) {
  if (device.is_meta()) return Tensor::empty(shape, device);
  return Tensor::from_vector(shape, host_values, device);
}

}  // namespace

int64_t padded_tokens(const std::vector<SentencePair>& split, const std::vector<int64_t>& indices, bool src_eos) {
  int64_t s = 0, t = 0;
  for (int64_t i : indices) {
    const auto& p = pair_at(split, i);
    s = std::max(s, src_len(p, src_eos));
    t = std::max(t, tgt_len(p));
  }
  return static_cast<int64_t>(indices.size()) * std::max(s, t);
}

TokenBatch make_token_batch(const std::vector<SentencePair>& split, const std::vector<int64_t>& indices,
                            engine::Device device, bool src_eos) {
  TokenBatch b;
  if (indices.empty()) return b;
  const auto n = static_cast<int64_t>(indices.size());
  int64_t S = 1, T = 1;
  for (int64_t i : indices) {
    const auto& p = pair_at(split, i);
    S = std::max(S, src_len(p, src_eos));
    T = std::max(T, tgt_len(p));
  }
  std::vector<float> src(static_cast<size_t>(n * S), 0.0f), src_lengths(static_cast<size_t>(n));
  std::vector<float> tgt_in(static_cast<size_t>(n * T), 0.0f), tgt_out(static_cast<size_t>(n * T), 0.0f),
      tgt_lengths(static_cast<size_t>(n));
  for (int64_t r = 0; r < n; ++r) {
    const auto& p = split[static_cast<size_t>(indices[static_cast<size_t>(r)])];
    float* s = &src[static_cast<size_t>(r * S)];
    for (size_t j = 0; j < p.src.size(); ++j) s[j] = id_value(p.src[j]);
    int64_t sl = static_cast<int64_t>(p.src.size());
    if (src_eos) s[sl++] = static_cast<float>(Vocabulary::kEos);
    float* ti = &tgt_in[static_cast<size_t>(r * T)];
    float* to = &tgt_out[static_cast<size_t>(r * T)];
    ti[0] = static_cast<float>(Vocabulary::kBos);
    for (size_t j = 0; j < p.tgt.size(); ++j) {
      ti[j + 1] = to[j] = id_value(p.tgt[j]);
    }
    to[p.tgt.size()] = static_cast<float>(Vocabulary::kEos);
    src_lengths[static_cast<size_t>(r)] = static_cast<float>(sl);
    tgt_lengths[static_cast<size_t>(r)] = static_cast<float>(p.tgt.size() + 1);
    b.src_tokens += sl;
    b.tgt_tokens += static_cast<int64_t>(p.tgt.size()) + 1;
  }
  engine::CategoryScope category(vocabulary::Category::inputs);
  b.src = to_device({n, S}, src, device);
  b.src_lengths = to_device({n}, src_lengths, device);
  b.tgt_in = to_device({n, T}, tgt_in, device);
  b.tgt_out = to_device({n, T}, tgt_out, device);
  b.tgt_lengths = to_device({n}, tgt_lengths, device);
  b.pairs = n;
  b.indices = indices;
  return b;
}

BatchPlan plan_pair_batches(const std::vector<SentencePair>& split, int64_t batch, int64_t buckets,
                            engine::Rng* shuffle) {
  if (batch < 1 || buckets < 1) throw std::invalid_argument("pair batches need batch >= 1 and buckets >= 1");
  std::vector<int64_t> order(split.size());
  std::iota(order.begin(), order.end(), int64_t{0});
  if (shuffle) shuffle_in_place(order, *shuffle);
  std::vector<std::vector<int64_t>> groups(static_cast<size_t>(buckets));
  if (buckets == 1) {
    groups[0] = std::move(order);
  } else {
    auto len = [&](int64_t i) {
      const auto& p = split[static_cast<size_t>(i)];
      return static_cast<int64_t>(std::max(p.src.size(), p.tgt.size()));
    };
    int64_t longest = 0;
    for (int64_t i : order) longest = std::max(longest, len(i));
    const int64_t width = (longest + buckets) / buckets;  // ceil((longest + 1) / buckets)
    for (int64_t i : order) groups[static_cast<size_t>(std::min(buckets - 1, len(i) / width))].push_back(i);
  }
  BatchPlan plan;
  for (const auto& g : groups) {
    for (size_t start = 0; start < g.size(); start += static_cast<size_t>(batch)) {
      plan.emplace_back(
          g.begin() + static_cast<std::ptrdiff_t>(start),
          g.begin() + static_cast<std::ptrdiff_t>(std::min(g.size(), start + static_cast<size_t>(batch))));
    }
  }
  if (shuffle && buckets > 1) shuffle_in_place(plan, *shuffle);  // one bucket: already in random order
  return plan;
}

BatchPlan plan_token_batches(const std::vector<SentencePair>& split, int64_t max_tokens, bool src_eos,
                             engine::Rng* shuffle) {
  if (max_tokens < 1) throw std::invalid_argument("token batches need max_tokens >= 1");
  std::vector<int64_t> order(split.size());
  std::iota(order.begin(), order.end(), int64_t{0});
  if (shuffle) shuffle_in_place(order, *shuffle);  // ties of the sort below in random order
  auto key = [&](int64_t i) {
    const auto& p = split[static_cast<size_t>(i)];
    const int64_t s = src_len(p, src_eos), t = tgt_len(p);
    return std::array<int64_t, 3>{std::max(s, t), t, s};
  };
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return key(a) < key(b); });
  BatchPlan plan;
  std::vector<int64_t> current;
  int64_t S = 0, T = 0;
  for (int64_t i : order) {
    const auto& p = split[static_cast<size_t>(i)];
    const int64_t s = src_len(p, src_eos), t = tgt_len(p);
    if (std::max(s, t) > max_tokens) {
      throw std::invalid_argument("pair " + std::to_string(i) + " alone pads to " + std::to_string(std::max(s, t)) +
                                  " tokens, over the budget of " + std::to_string(max_tokens));
    }
    const int64_t ns = std::max(S, s), nt = std::max(T, t);
    if (static_cast<int64_t>(current.size() + 1) * std::max(ns, nt) > max_tokens) {
      plan.push_back(std::move(current));
      current.clear();
      S = s;
      T = t;
    } else {
      S = ns;
      T = nt;
    }
    current.push_back(i);
  }
  if (!current.empty()) plan.push_back(std::move(current));
  if (shuffle) shuffle_in_place(plan, *shuffle);
  return plan;
}

TextBatcher::TextBatcher(std::shared_ptr<const ParallelCorpus> corpus, BatchingOptions options, uint64_t seed,
                         engine::Device device)
    : corpus_(std::move(corpus)), options_(options), device_(device), rng_(seed ^ 0xba7c4e5ULL) {
  if (!corpus_) throw std::invalid_argument("TextBatcher: no corpus");
  if (corpus_->train.empty())
    throw std::invalid_argument("TextBatcher: the corpus '" + corpus_->name + "' has no training pairs");
  dev_plan_ = plan(corpus_->dev, nullptr);
  test_plan_ = plan(corpus_->test, nullptr);
  train_plan_ = plan(corpus_->train, &rng_);
}

BatchPlan TextBatcher::plan(const std::vector<SentencePair>& split, engine::Rng* shuffle) const {
  if (options_.mode == BatchingOptions::Mode::tokens) {
    return plan_token_batches(split, options_.max_tokens, options_.src_eos, shuffle);
  }
  return plan_pair_batches(split, options_.pairs, options_.buckets, shuffle);
}

TokenBatch TextBatcher::next_train() {
  if (cursor_ == train_plan_.size()) {
    train_plan_ = plan(corpus_->train, &rng_);
    cursor_ = 0;
    ++epoch_;
  }
  return make_token_batch(corpus_->train, train_plan_[cursor_++], device_, options_.src_eos);
}

TokenBatch TextBatcher::heldout(int64_t index) const {
  if (index < 0 || index >= heldout_batches()) return TokenBatch{};
  return make_token_batch(corpus_->dev, dev_plan_[static_cast<size_t>(index)], device_, options_.src_eos);
}

TokenBatch TextBatcher::test(int64_t index) const {
  if (index < 0 || index >= test_batches()) return TokenBatch{};
  return make_token_batch(corpus_->test, test_plan_[static_cast<size_t>(index)], device_, options_.src_eos);
}

// ---------------------------------------------------------------------------------------------
// BLEU and decoding helpers

namespace {

bool scored(int32_t id) { return id != Vocabulary::kPad && id != Vocabulary::kBos && id != Vocabulary::kEos; }

std::map<std::vector<int32_t>, int64_t> ngram_counts(const std::vector<int32_t>& s, size_t n) {
  std::map<std::vector<int32_t>, int64_t> counts;
  for (size_t i = 0; i + n <= s.size(); ++i) {
    ++counts[std::vector<int32_t>(s.begin() + static_cast<std::ptrdiff_t>(i),
                                  s.begin() + static_cast<std::ptrdiff_t>(i + n))];
  }
  return counts;
}

}  // namespace

void BleuAccumulator::add(const std::vector<int32_t>& hypothesis, const std::vector<int32_t>& reference) {
  std::vector<int32_t> h, r;
  for (int32_t id : hypothesis) {
    if (scored(id)) h.push_back(id);
  }
  for (int32_t id : reference) {
    // A reference <unk> stands for a word we cannot see: it matches nothing.
    if (scored(id)) r.push_back(id == Vocabulary::kUnk ? -1 - static_cast<int32_t>(r.size()) : id);
  }
  hyp_length_ += static_cast<int64_t>(h.size());
  ref_length_ += static_cast<int64_t>(r.size());
  ++sentences_;
  for (size_t n = 1; n <= 4; ++n) {
    if (h.size() < n) break;
    totals_[n - 1] += static_cast<int64_t>(h.size() - n + 1);
    const auto ref_counts = ngram_counts(r, n);
    for (const auto& [gram, count] : ngram_counts(h, n)) {
      const auto it = ref_counts.find(gram);
      if (it != ref_counts.end()) matches_[n - 1] += std::min(count, it->second);  // clipped
    }
  }
}

BleuScore BleuAccumulator::score(BleuSmoothing smoothing) const {
  BleuScore s;
  s.matches = matches_;
  s.totals = totals_;
  s.hyp_length = hyp_length_;
  s.ref_length = ref_length_;
  const auto c = static_cast<double>(hyp_length_), r = static_cast<double>(ref_length_);
  s.brevity_penalty = hyp_length_ >= ref_length_ ? 1.0 : (hyp_length_ > 0 ? std::exp(1.0 - r / c) : 0.0);
  if (std::all_of(matches_.begin(), matches_.end(), [](int64_t m) { return m == 0; })) return s;
  double smooth = 1;
  for (size_t n = 0; n < 4; ++n) {
    if (totals_[n] == 0) break;  // sacreBLEU: this and higher orders stay 0
    if (matches_[n] == 0) {
      if (smoothing == BleuSmoothing::exp) {
        smooth *= 2;
        s.precisions[n] = 100.0 / (smooth * static_cast<double>(totals_[n]));
      }
    } else {
      s.precisions[n] = 100.0 * static_cast<double>(matches_[n]) / static_cast<double>(totals_[n]);
    }
  }
  if (std::any_of(s.precisions.begin(), s.precisions.end(), [](double p) { return p <= 0; })) return s;
  double log_sum = 0;
  for (double p : s.precisions) log_sum += std::log(p);
  s.score = s.brevity_penalty * std::exp(log_sum / 4);
  return s;
}

BleuScore corpus_bleu(const std::vector<std::vector<int32_t>>& hypotheses,
                      const std::vector<std::vector<int32_t>>& references, BleuSmoothing smoothing) {
  if (hypotheses.size() != references.size()) {
    throw std::invalid_argument("BLEU: " + std::to_string(hypotheses.size()) + " hypotheses for " +
                                std::to_string(references.size()) + " references");
  }
  BleuAccumulator acc;
  for (size_t i = 0; i < hypotheses.size(); ++i) acc.add(hypotheses[i], references[i]);
  return acc.score(smoothing);
}

double corpus_bleu_unsmoothed(const std::vector<std::vector<int32_t>>& hypotheses,
                              const std::vector<std::vector<int32_t>>& references) {
  return corpus_bleu(hypotheses, references, BleuSmoothing::none).score;
}

std::vector<std::vector<int32_t>> ids_to_sentences(const std::vector<float>& ids, int64_t rows, int64_t steps) {
  if (rows < 0 || steps < 0 || static_cast<int64_t>(ids.size()) != rows * steps) {
    throw std::invalid_argument("ids_to_sentences: " + std::to_string(ids.size()) + " ids for " + std::to_string(rows) +
                                " x " + std::to_string(steps));
  }
  std::vector<std::vector<int32_t>> out(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < steps; ++j) {
      const auto id = static_cast<int32_t>(std::lround(ids[static_cast<size_t>(r * steps + j)]));
      if (id == Vocabulary::kEos) break;
      if (id == Vocabulary::kPad || id == Vocabulary::kBos) continue;
      out[static_cast<size_t>(r)].push_back(id);
    }
  }
  return out;
}

std::vector<std::vector<int32_t>> ids_to_sentences(const engine::Tensor& ids) {
  if (ids.dim() != 2)
    throw std::invalid_argument("ids_to_sentences: expected [rows, steps], got " + engine::shape_str(ids.shape()));
  return ids_to_sentences(ids.to_vector(), ids.size(0), ids.size(1));
}

std::string detokenize(const Vocabulary& vocab, const std::vector<int32_t>& ids) {
  std::string out;
  for (int32_t id : ids) {
    if (!scored(id)) continue;
    if (!out.empty()) out += ' ';
    out += (id >= 0 && id < vocab.size()) ? vocab.word(id) : "<id " + std::to_string(id) + ">";
  }
  return out;
}

}  // namespace ts::workloads
