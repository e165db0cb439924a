#include "workloads/seq2seq/seq2seq.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "engine/backend.h"
#include "engine/context.h"
#include "engine/optim/adam.h"
#include "engine/optim/clip.h"
#include "engine/random.h"
#include "workloads/data/text_data.h"

namespace ts::workloads {

using engine::Device;
using engine::Rng;
using engine::Tensor;
namespace nn = engine::nn;
namespace ops = engine::ops;

Seq2SeqConfig seq2seq_config(const std::string& preset) {
  Seq2SeqConfig c;
  if (preset == "full") return c;  // TF NMT's IWSLT15 en-vi model
  if (preset == "small") {
    // The topology, batch, buckets and lengths kept; widths halved and vocabularies about halved, for two cores.
    c.src_vocab = 8000;
    c.tgt_vocab = 3600;
    c.embedding = c.hidden = c.attention = 256;
    return c;
  }
  if (preset == "tiny") {
    c.src_vocab = 64;
    c.tgt_vocab = 40;
    c.embedding = c.hidden = c.attention = 32;
    c.dropout = 0.0f;
    c.batch = 32;
    c.max_length = 10;
    c.learning_rate = 0.03;  // high for Adam, so that the convergence test takes seconds
    c.train_pairs = 4000;
    c.dev_pairs = 64;
    c.test_pairs = 64;
    return c;
  }
  throw std::invalid_argument("unknown seq2seq preset '" + preset + "' (tiny, small, full)");
}

int64_t seq2seq_parameter_count(const Seq2SeqConfig& c) {
  const int64_t e = c.embedding, h = c.hidden, a = c.attention, l = c.layers;
  const int64_t upper_layers = (l - 1) * (8 * h * h + 8 * h);
  const int64_t encoder = 4 * h * (e + h) + 8 * h + upper_layers;
  const int64_t decoder = 4 * h * (e + 2 * h) + 8 * h + upper_layers;
  return (c.src_vocab + c.tgt_vocab) * e + encoder + decoder + (2 * h * a + a) + 2 * h * h + h * c.tgt_vocab;
}

// ---------------------------------------------------------------- modules

namespace {

Tensor weight(const engine::Shape& shape, Device device) {
  return Tensor::empty(shape, device, engine::Layout::plain(), vocabulary::Category::weights);
}

}  // namespace

LstmLayer::LstmLayer(int64_t input_size, int64_t hidden_size, Device device, Rng& rng) : Module(device) {
  // PyTorch's initialisation here; Seq2Seq draws every weight again from TF NMT's U(-0.1, 0.1).
  const auto bound = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hidden_size)));
  auto param = [&](const std::string& name, const engine::Shape& shape) {
    Tensor t = weight(shape, device);
    rng.fill_uniform(t, -bound, bound);
    return register_parameter(name, t);
  };
  weight_ih_ = param("weight_ih", {4 * hidden_size, input_size});
  weight_hh_ = param("weight_hh", {4 * hidden_size, hidden_size});
  bias_ih_ = param("bias_ih", {4 * hidden_size});
  bias_hh_ = param("bias_hh", {4 * hidden_size});
}

void LstmLayer::reset_biases() {
  if (device().is_meta()) return;
  const int64_t h = hidden_size();
  std::vector<float> b(static_cast<size_t>(4 * h), 0.0f);
  std::fill(b.begin() + h, b.begin() + 2 * h, 1.0f);  // gates (i, f, g, o): f
  engine::backend_for(device()).copy(Tensor::from_vector({4 * h}, b, device()), bias_ih_);
  engine::backend_for(device()).fill(bias_hh_, 0.0f);
}

ops::RnnOutput LstmLayer::forward(const Tensor& x, const Tensor& h0, const Tensor& c0, const Tensor& lengths) const {
  auto s = scope();
  return ops::lstm(x, h0, c0, weight_ih_, weight_hh_, bias_ih_, bias_hh_, lengths);
}

BahdanauAttention::BahdanauAttention(int64_t query_size, int64_t memory_size, int64_t units, Device device, Rng& rng)
    : Module(device) {
  query_proj_ = register_module("query_proj", std::make_shared<nn::Linear>(query_size, units, device, rng, false));
  key_proj_ = register_module("key_proj", std::make_shared<nn::Linear>(memory_size, units, device, rng, false));
  Tensor v = weight({units}, device);
  rng.fill_uniform(v, -0.1f, 0.1f);
  v_ = register_parameter("v", v);
}

Tensor BahdanauAttention::keys(const Tensor& memory) const {
  auto s = scope();
  const int64_t b = memory.size(0), t = memory.size(1), d = memory.size(2);
  const Tensor k = key_proj_->forward(ops::reshape(memory, {b * t, d}));
  return ops::reshape(k, {b, t, k.size(1)});
}

Tensor BahdanauAttention::forward(const Tensor& query, const Tensor& keys, const Tensor& memory, const Tensor& lengths,
                                  Tensor* probs) const {
  auto s = scope();
  return ops::additive_attention(query_proj_->forward(query), keys, memory, v_, lengths, probs);
}

Encoder::Encoder(const Seq2SeqConfig& c, Device device, Rng& rng) : Module(device), dropout_(c.dropout) {
  embedding_ = register_module("embedding", std::make_shared<nn::Embedding>(c.src_vocab, c.embedding, device, rng));
  for (int64_t l = 0; l < c.layers; ++l) {
    const int64_t in = l == 0 ? c.embedding : c.hidden;
    lstm_.push_back(
        register_module("lstm." + std::to_string(l), std::make_shared<LstmLayer>(in, c.hidden, device, rng)));
  }
}

EncoderOutput Encoder::forward(const Tensor& src, const Tensor& lengths, DropoutStream& drop) const {
  auto s = scope();
  EncoderOutput out;
  out.lengths = lengths;
  // Time-major for the LSTMs: ids [S, B] -> [S, B, E].
  Tensor x = embedding_->forward(ops::permute(src, {1, 0}));
  for (const auto& layer : lstm_) {
    const ops::RnnOutput r = layer->forward(drop.apply(x, dropout_, training()), Tensor(), Tensor(), lengths);
    x = r.y;
    out.h.push_back(r.h_n);
    out.c.push_back(r.c_n);
  }
  out.memory = ops::permute(x, {1, 0, 2});  // [B, S, H] for the attention
  return out;
}

Decoder::Decoder(const Seq2SeqConfig& c, Device device, Rng& rng)
    : Module(device), dropout_(c.dropout), hidden_(c.hidden) {
  embedding_ = register_module("embedding", std::make_shared<nn::Embedding>(c.tgt_vocab, c.embedding, device, rng));
  for (int64_t l = 0; l < c.layers; ++l) {
    // Input feeding: layer 0 reads [embedding; previous attentional output].
    const int64_t in = l == 0 ? c.embedding + c.hidden : c.hidden;
    lstm_.push_back(
        register_module("lstm." + std::to_string(l), std::make_shared<LstmLayer>(in, c.hidden, device, rng)));
  }
  attention_ =
      register_module("attention", std::make_shared<BahdanauAttention>(c.hidden, c.hidden, c.attention, device, rng));
  attention_layer_ =
      register_module("attention_layer", std::make_shared<nn::Linear>(2 * c.hidden, c.hidden, device, rng, false));
  output_proj_ =
      register_module("output_proj", std::make_shared<nn::Linear>(c.hidden, c.tgt_vocab, device, rng, false));
}

DecoderState Decoder::start(const EncoderOutput& enc) const {
  auto s = scope();
  DecoderState st;
  st.h = enc.h;
  st.c = enc.c;
  st.memory = enc.memory;
  st.lengths = enc.lengths;
  st.keys = attention_->keys(enc.memory);
  st.attentional = Tensor::zeros({enc.memory.size(0), hidden_}, enc.memory.device());
  return st;
}

Tensor Decoder::embed(const Tensor& ids) const { return embedding_->forward(ids); }

Tensor Decoder::step(const Tensor& embedded, DecoderState& st, DropoutStream& drop, Tensor* probs) const {
  auto s = scope();
  const int64_t b = embedded.size(0);
  Tensor x = ops::concat({embedded, st.attentional}, 1);
  for (size_t l = 0; l < lstm_.size(); ++l) {
    x = drop.apply(x, dropout_, training());
    const ops::RnnOutput r = lstm_[l]->forward(ops::reshape(x, {1, b, x.size(1)}), st.h[l], st.c[l], Tensor());
    st.h[l] = r.h_n;
    st.c[l] = r.c_n;
    x = ops::reshape(r.y, {b, hidden_});
  }
  const Tensor context = attention_->forward(x, st.keys, st.memory, st.lengths, probs);
  st.attentional = ops::tanh(attention_layer_->forward(ops::concat({x, context}, 1)));
  return st.attentional;
}

Tensor Decoder::project(const Tensor& attentional) const {
  auto s = scope();
  return output_proj_->forward(attentional);
}

Seq2Seq::Seq2Seq(const Seq2SeqConfig& c, Device device, uint64_t seed) : Module(device), cfg_(c) {
  if (c.layers < 1 || c.embedding < 1 || c.hidden < 1 || c.attention < 1) {
    throw std::invalid_argument("seq2seq: layers and widths must be positive");
  }
  Rng rng(seed);
  encoder_ = register_module("encoder", std::make_shared<Encoder>(c, device, rng));
  decoder_ = register_module("decoder", std::make_shared<Decoder>(c, device, rng));
  // TF NMT's initialisation: every variable U(-init_range, init_range), the LSTM biases zeros
  // with TF's forget bias of 1.
  for (const auto& [name, p] : named_parameters()) rng.fill_uniform(p, -c.init_range, c.init_range);
  for (const auto* layers : {&encoder_->layers(), &decoder_->layers()}) {
    for (const auto& l : *layers) l->reset_biases();
  }
}

Tensor Seq2Seq::forward(const Tensor& src, const Tensor& src_lengths, const Tensor& tgt_in, DropoutStream& drop) const {
  const EncoderOutput enc = encoder_->forward(src, src_lengths, drop);
  DecoderState st = decoder_->start(enc);
  const int64_t b = tgt_in.size(0), t = tgt_in.size(1);
  Tensor embedded;
  std::vector<Tensor> steps;
  {
    static const std::string path = "decoder";
    static const auto id = engine::op_name(path);
    engine::OwnerScope owner(&path, id);
    embedded = decoder_->embed(ops::permute(tgt_in, {1, 0}));  // [T, B, E]
    // One split for all steps: its backward writes the embedding gradient once.
    steps = ops::split(embedded, 0, std::vector<int64_t>(static_cast<size_t>(t), 1));
  }
  std::vector<Tensor> outputs;
  outputs.reserve(static_cast<size_t>(t));
  for (int64_t i = 0; i < t; ++i) {
    outputs.push_back(decoder_->step(ops::reshape(steps[static_cast<size_t>(i)], {b, cfg_.embedding}), st, drop));
  }
  return decoder_->project(ops::concat(outputs, 0));
}

std::vector<float> Seq2Seq::greedy(const Tensor& src, const Tensor& src_lengths, int64_t max_steps,
                                   int64_t* steps) const {
  if (training()) throw std::logic_error("Seq2Seq::greedy: put the model in eval mode first (no dropout)");
  engine::NoGradScope no_grad;
  DropoutStream none(0);
  const EncoderOutput enc = encoder_->forward(src, src_lengths, none);
  DecoderState st = decoder_->start(enc);
  const int64_t rows = src.size(0), vocab = cfg_.tgt_vocab;
  std::vector<float> prev(static_cast<size_t>(rows), static_cast<float>(Vocabulary::kBos));
  std::vector<std::vector<float>> out;  // per step
  std::vector<bool> done(static_cast<size_t>(rows), false);
  for (int64_t t = 0; t < max_steps; ++t) {
    const Tensor e = decoder_->embed(Tensor::from_vector({rows}, prev, src.device()));
    const std::vector<float> logits = decoder_->project(decoder_->step(e, st, none)).to_vector();
    bool all_done = true;
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = logits.data() + r * vocab;
      int64_t best = 0;
      for (int64_t k = 1; k < vocab; ++k) best = row[k] > row[best] ? k : best;
      if (done[static_cast<size_t>(r)]) best = Vocabulary::kPad;
      done[static_cast<size_t>(r)] = done[static_cast<size_t>(r)] || best == Vocabulary::kEos;
      all_done = all_done && done[static_cast<size_t>(r)];
      prev[static_cast<size_t>(r)] = static_cast<float>(best);
    }
    out.push_back(prev);
    if (all_done) break;
  }
  const auto n = static_cast<int64_t>(out.size());
  std::vector<float> ids(static_cast<size_t>(rows * n));
  for (int64_t t = 0; t < n; ++t) {
    const std::vector<float>& step = out[static_cast<size_t>(t)];
    for (int64_t r = 0; r < rows; ++r) ids[static_cast<size_t>(r * n + t)] = step[static_cast<size_t>(r)];
  }
  *steps = n;
  return ids;
}

// ---------------------------------------------------------------- the workload

namespace {

std::shared_ptr<const ParallelCorpus> load_corpus(const std::string& data, const Seq2SeqConfig& c) {
  SyntheticTextOptions s;
  s.src_vocab = c.src_vocab;
  s.tgt_vocab = c.tgt_vocab;
  s.max_length = c.max_length;
  s.train_pairs = c.train_pairs;
  s.dev_pairs = c.dev_pairs;
  s.test_pairs = c.test_pairs;
  TextFileOptions f;
  f.max_length = c.max_length;
  f.src_vocab_cap = c.src_vocab;
  f.tgt_vocab_cap = c.tgt_vocab;
  return make_parallel_corpus(data, s, f);
}

// The workload's optimizer; describe() states it in the presets table.
engine::optim::AdamOptions adam_options(const Seq2SeqConfig& c) {
  engine::optim::AdamOptions o;
  o.lr.kind = engine::optim::LrSchedule::Kind::constant;
  o.lr.base_lr = c.learning_rate;
  return o;
}

class Seq2SeqWorkload final : public Workload {
 public:
  Seq2SeqWorkload(Seq2SeqConfig cfg, std::shared_ptr<const ParallelCorpus> corpus, uint64_t seed, Device device)
      : cfg_(adjust_vocab(cfg, *corpus)),
        device_(device),
        model_(std::make_shared<Seq2Seq>(cfg_, device, seed)),
        batcher_(std::move(corpus), batching(cfg_), seed, device),
        adam_(model_->parameters(), adam_options(cfg_)),
        drop_(seed ^ 0x6a09e667f3bcc909ULL) {}

  nn::Module& model() override { return *model_; }
  int64_t batch_size() const override { return cfg_.batch; }
  double learning_rate() const override { return adam_.current_lr(); }
  std::vector<engine::optim::OptimizerRecipe> optimizer_recipes() override {
    return {engine::optim::adam_recipe(adam_.options(), cfg_.max_gradient_norm)};
  }

  // The data phase's draw as a Batch (source ids, target ids to predict): what step() draws next.
  Batch next_batch() override { return as_batch(batcher_.next_train()); }

  StepResult step(Phases& phases) override {
    TokenBatch batch;
    Tensor loss;
    phases.data([&] { batch = batcher_.next_train(); });
    phases.forward([&] {
      const Tensor logits = model_->forward(batch.src, batch.src_lengths, batch.tgt_in, drop_);
      static const std::string path = "loss";
      static const auto id = engine::op_name(path);
      engine::OwnerScope owner(&path, id);
      // Logit rows are time-major; padding (label 0) counts for nothing; the loss is per real
      // target token (TF NMT divides the sum by the batch size instead: the same gradient
      // direction, scaled by the mean target length).
      const Tensor labels = ops::reshape(ops::permute(batch.tgt_out, {1, 0}), {batch.tgt_out.numel()});
      loss = ops::label_smoothed_cross_entropy(logits, labels, 0.0f, Vocabulary::kPad,
                                               static_cast<float>(batch.tgt_tokens));
    });
    phases.backward([&] { loss.backward(); });
    phases.optimizer([&] {
      engine::optim::clip_grad_norm(model_->parameters(), cfg_.max_gradient_norm);
      adam_.step();
      adam_.zero_grad();
    });
    return {static_cast<double>(loss.item()), batch.pairs, batch.src_tokens + batch.tgt_tokens};
  }

  // Corpus BLEU of greedy translations of the first `batches` held-out batches (all when < 0).
  Quality evaluate(int64_t batches) override {
    model_->train(false);
    BleuAccumulator bleu;
    const int64_t n = batches < 0 ? batcher_.heldout_batches() : std::min(batches, batcher_.heldout_batches());
    for (int64_t i = 0; i < n; ++i) {
      const TokenBatch b = batcher_.heldout(i);
      if (b.pairs == 0) break;
      int64_t steps = 0;
      // TF NMT's limit: twice the longest source.
      const std::vector<float> ids = model_->greedy(b.src, b.src_lengths, 2 * b.src.size(1), &steps);
      const auto hyps = ids_to_sentences(ids, b.pairs, steps);
      for (size_t r = 0; r < hyps.size(); ++r) {
        bleu.add(hyps[r], batcher_.corpus().dev[static_cast<size_t>(b.indices[r])].tgt);
      }
    }
    model_->train(true);
    return {"bleu", bleu.score().score, "", true};
  }

 private:
  static Seq2SeqConfig adjust_vocab(Seq2SeqConfig c, const ParallelCorpus& corpus) {
    c.src_vocab = corpus.src_vocab->size();  // a file corpus may have fewer words
    c.tgt_vocab = corpus.tgt_vocab->size();
    return c;
  }
  static BatchingOptions batching(const Seq2SeqConfig& c) {
    BatchingOptions o;
    o.mode = BatchingOptions::Mode::pairs;
    o.pairs = c.batch;
    o.buckets = c.buckets;
    o.src_eos = false;  // TF NMT feeds sources without EOS
    return o;
  }

  Seq2SeqConfig cfg_;
  Device device_;
  std::shared_ptr<Seq2Seq> model_;
  TextBatcher batcher_;
  engine::optim::Adam adam_;
  DropoutStream drop_;
};

PresetTable describe(const Seq2SeqConfig& c) {
  const std::string h = std::to_string(c.hidden);
  const engine::optim::AdamOptions adam = adam_options(c);
  return {{"architecture", "TF NMT attention model (Luong et al. 2017): LSTM encoder-decoder, Bahdanau attention, "
                           "input feeding"},
          {"layers", std::to_string(c.layers) + " encoder + " + std::to_string(c.layers) + " decoder LSTM layers, " +
                         h + " units, unidirectional"},
          {"embedding", std::to_string(c.embedding) + ", separate source and target tables"},
          {"vocabulary", std::to_string(c.src_vocab) + " source, " + std::to_string(c.tgt_vocab) + " target"},
          {"attention", "additive, " + std::to_string(c.attention) +
                            " units: v . tanh(W_q h + W_k m_j), padded source "
                            "masked; attentional output tanh(W_c [h; context]) of " +
                            h + ", fed to the next step"},
          {"output", "linear " + h + " -> target vocabulary, no bias; cross-entropy per real target token"},
          {"dropout", table_number(c.dropout) + " on every LSTM layer's input"},
          {"init", "U(-" + table_number(c.init_range) + ", " + table_number(c.init_range) +
                       ") for every weight; LSTM biases 0 with forget-gate bias 1"},
          {"optimizer", "Adam " + table_number(adam.lr.base_lr) + " (betas " + table_number(adam.beta1) + "/" +
                            table_number(adam.beta2) + ", eps " + table_exponent(adam.eps) +
                            "), gradient norm clipped at " + table_number(c.max_gradient_norm)},
          {"batch", std::to_string(c.batch) + " sentence pairs, " + std::to_string(c.buckets) + " length buckets"},
          {"max_length", std::to_string(c.max_length) + " tokens per side"},
          {"data", "synthetic parallel text from a fixed grammar (workloads/data/text_data.h), IWSLT15-sized; quality: "
                   "BLEU of greedy decoding on held-out pairs"},
          {"batch_size", std::to_string(c.batch) + " pairs"}};
}

std::string lstm_layers(const Seq2SeqConfig& c) {
  return std::to_string(c.layers) + "+" + std::to_string(c.layers) + " LSTM layers of " + std::to_string(c.hidden);
}

// The summary: the preset's shape from its configuration, then what it is for (`use`, may be empty).
Preset make_preset(const std::string& name, const std::string& use) {
  const Seq2SeqConfig c = seq2seq_config(name);
  const std::string summary = lstm_layers(c) + ", vocabularies " + grouped_count(c.src_vocab) + "/" +
                              grouped_count(c.tgt_vocab) + ", batches of " + std::to_string(c.batch) +
                              (use.empty() ? "" : ": " + use);
  return {name, summary, c.batch, describe(c)};
}

}  // namespace

WorkloadSpec seq2seq_spec() {
  WorkloadSpec s;
  s.name = "seq2seq";
  s.domain = "machine translation";
  s.units = {"sentence pairs", "tokens", "sentence pairs", false};
  const Seq2SeqConfig full = seq2seq_config("full");
  s.description = "TF NMT's IWSLT15 en-vi model: " + lstm_layers(full) +
                  ", Bahdanau attention with input feeding, Adam, gradient clipping, batches of " +
                  std::to_string(full.batch) + " pairs";
  s.presets = {make_preset("tiny", "tests"), make_preset("small", "CPU benchmarking"), make_preset("full", "")};
  s.check = [](const WorkloadConfig& wc) {
    seq2seq_config(wc.preset);
    data_shard(wc, "seq2seq");
    check_text_source(wc.data);
  };
  // The synthetic corpus has the configuration's vocabularies, so the model's count follows from it.
  s.count_parameters = [](const std::string& preset) { return seq2seq_parameter_count(seq2seq_config(preset)); };
  s.build = [](const WorkloadConfig& wc) -> std::unique_ptr<Workload> {
    Seq2SeqConfig cfg = seq2seq_config(wc.preset);
    const DataShard shard = data_shard(wc, "seq2seq");
    cfg.batch = *wc.batch;
    return std::make_unique<Seq2SeqWorkload>(cfg, shard_corpus(load_corpus(wc.data, cfg), shard), wc.seed, wc.device);
  };
  return s;
}

}  // namespace ts::workloads
