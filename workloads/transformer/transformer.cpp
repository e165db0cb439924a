#include "workloads/transformer/transformer.h"

#include <cmath>
#include <stdexcept>

#include "engine/backend.h"
#include "engine/context.h"
#include "engine/ops.h"
#include "engine/optim/adam.h"
#include "engine/random.h"
#include "workloads/data/text_data.h"

namespace ts::workloads {

using engine::Device;
using engine::Rng;
using engine::Tensor;
namespace nn = engine::nn;
namespace ops = engine::ops;

TransformerConfig transformer_config(const std::string& preset) {
  TransformerConfig c;
  if (preset == "full") return c;  // the paper's base model
  if (preset == "small") {
    // 6+6 layers and 8 heads kept; widths, vocabulary and batch scaled for two cores.
    c.vocab = 8000;
    c.d_model = 256;
    c.ffn = 1024;
    c.max_tokens = 1024;
    c.max_length = 30;
    return c;
  }
  if (preset == "tiny") {
    c.vocab = 200;
    c.d_model = 32;
    c.heads = 4;
    c.ffn = 64;
    c.encoder_layers = 2;
    c.decoder_layers = 2;
    c.dropout = 0.0f;
    c.max_tokens = 256;
    c.max_length = 8;
    c.warmup = 60;
    c.lr_factor = 0.3;
    c.train_pairs = 4000;
    c.dev_pairs = 64;
    return c;
  }
  throw std::invalid_argument("unknown transformer preset '" + preset + "' (tiny, small, full)");
}

int64_t transformer_parameter_count(const TransformerConfig& c) {
  const int64_t d = c.d_model, f = c.ffn;
  const int64_t attention = 4 * (d * d + d), ffn = d * f + f + f * d + d, norm = 2 * d;
  return c.vocab * d + c.encoder_layers * (attention + ffn + 2 * norm) +
         c.decoder_layers * (2 * attention + ffn + 3 * norm);
}

// ---------------------------------------------------------------- modules

MultiheadAttention::MultiheadAttention(int64_t d_model, int64_t heads, Device device, Rng& rng)
    : Module(device), heads_(heads) {
  if (heads < 1 || d_model % heads != 0) {
    throw std::invalid_argument("attention: d_model " + std::to_string(d_model) + " is not a multiple of " +
                                std::to_string(heads) + " heads");
  }
  q_proj_ = register_module("q_proj", std::make_shared<nn::Linear>(d_model, d_model, device, rng));
  k_proj_ = register_module("k_proj", std::make_shared<nn::Linear>(d_model, d_model, device, rng));
  v_proj_ = register_module("v_proj", std::make_shared<nn::Linear>(d_model, d_model, device, rng));
  out_proj_ = register_module("out_proj", std::make_shared<nn::Linear>(d_model, d_model, device, rng));
}

Tensor MultiheadAttention::forward(const Tensor& query, const Tensor& memory, const Tensor& key_lengths,
                                   bool causal) const {
  auto s = scope();
  const int64_t b = query.size(0), tq = query.size(1), tk = memory.size(1), d = query.size(2);
  const Tensor q2 = ops::reshape(query, {b * tq, d}), m2 = ops::reshape(memory, {b * tk, d});
  const Tensor q = ops::reshape(q_proj_->forward(q2), {b, tq, d});
  const Tensor k = ops::reshape(k_proj_->forward(m2), {b, tk, d});
  const Tensor v = ops::reshape(v_proj_->forward(m2), {b, tk, d});
  const float scale = 1.0f / std::sqrt(static_cast<float>(d / heads_));
  const Tensor a = ops::attention(q, k, v, key_lengths, heads_, scale, causal);
  return ops::reshape(out_proj_->forward(ops::reshape(a, {b * tq, d})), {b, tq, d});
}

namespace {

// Position-wise feed-forward: fc2(dropout(relu(fc1 x))) on [B, T, d]; the paper's dropout
// sits on sub-layer outputs only, so none inside.
Tensor feed_forward(const nn::Linear& fc1, const nn::Linear& fc2, const Tensor& x) {
  const int64_t b = x.size(0), t = x.size(1), d = x.size(2);
  return ops::reshape(fc2.forward(ops::relu(fc1.forward(ops::reshape(x, {b * t, d})))), {b, t, d});
}

}  // namespace

EncoderLayer::EncoderLayer(const TransformerConfig& c, Device device, Rng& rng) : Module(device), dropout_(c.dropout) {
  self_attn_ = register_module("self_attn", std::make_shared<MultiheadAttention>(c.d_model, c.heads, device, rng));
  self_attn_layer_norm_ = register_module("self_attn_layer_norm", std::make_shared<nn::LayerNorm>(c.d_model, device));
  fc1_ = register_module("fc1", std::make_shared<nn::Linear>(c.d_model, c.ffn, device, rng));
  fc2_ = register_module("fc2", std::make_shared<nn::Linear>(c.ffn, c.d_model, device, rng));
  final_layer_norm_ = register_module("final_layer_norm", std::make_shared<nn::LayerNorm>(c.d_model, device));
}

Tensor EncoderLayer::forward(const Tensor& x, const Tensor& src_lengths, DropoutStream& drop) const {
  auto s = scope();
  const bool train = training();
  Tensor h = self_attn_layer_norm_->forward(
      ops::add(x, drop.apply(self_attn_->forward(x, x, src_lengths, false), dropout_, train)));
  return final_layer_norm_->forward(ops::add(h, drop.apply(feed_forward(*fc1_, *fc2_, h), dropout_, train)));
}

DecoderLayer::DecoderLayer(const TransformerConfig& c, Device device, Rng& rng) : Module(device), dropout_(c.dropout) {
  self_attn_ = register_module("self_attn", std::make_shared<MultiheadAttention>(c.d_model, c.heads, device, rng));
  self_attn_layer_norm_ = register_module("self_attn_layer_norm", std::make_shared<nn::LayerNorm>(c.d_model, device));
  encoder_attn_ =
      register_module("encoder_attn", std::make_shared<MultiheadAttention>(c.d_model, c.heads, device, rng));
  encoder_attn_layer_norm_ =
      register_module("encoder_attn_layer_norm", std::make_shared<nn::LayerNorm>(c.d_model, device));
  fc1_ = register_module("fc1", std::make_shared<nn::Linear>(c.d_model, c.ffn, device, rng));
  fc2_ = register_module("fc2", std::make_shared<nn::Linear>(c.ffn, c.d_model, device, rng));
  final_layer_norm_ = register_module("final_layer_norm", std::make_shared<nn::LayerNorm>(c.d_model, device));
}

Tensor DecoderLayer::forward(const Tensor& x, const Tensor& memory, const Tensor& src_lengths,
                             DropoutStream& drop) const {
  auto s = scope();
  const bool train = training();
  // Causal self-attention: target padding sits after the real tokens, so the causal mask
  // already keeps every real position from seeing it.
  Tensor h = self_attn_layer_norm_->forward(
      ops::add(x, drop.apply(self_attn_->forward(x, x, Tensor(), true), dropout_, train)));
  h = encoder_attn_layer_norm_->forward(
      ops::add(h, drop.apply(encoder_attn_->forward(h, memory, src_lengths, false), dropout_, train)));
  return final_layer_norm_->forward(ops::add(h, drop.apply(feed_forward(*fc1_, *fc2_, h), dropout_, train)));
}

Transformer::Transformer(const TransformerConfig& c, Device device, uint64_t seed) : Module(device), cfg_(c) {
  Rng rng(seed);
  embed_tokens_ = register_module("embed_tokens", std::make_shared<nn::Embedding>(c.vocab, c.d_model, device, rng));
  for (int64_t i = 0; i < c.encoder_layers; ++i) {
    encoder_.push_back(
        register_module("encoder.layers." + std::to_string(i), std::make_shared<EncoderLayer>(c, device, rng)));
  }
  for (int64_t i = 0; i < c.decoder_layers; ++i) {
    decoder_.push_back(
        register_module("decoder.layers." + std::to_string(i), std::make_shared<DecoderLayer>(c, device, rng)));
  }
}

Tensor Transformer::embed(const Tensor& ids, DropoutStream& drop) const {
  const int64_t b = ids.size(0), t = ids.size(1), d = cfg_.d_model;
  // The paper's sinusoids, interleaved: PE(p, 2i) = sin(p / 10000^(2i/d)), PE(p, 2i+1) = cos(.).
  std::vector<float> pe(static_cast<size_t>(b * t * d));
  for (int64_t p = 0; p < t; ++p) {
    for (int64_t i = 0; i < d; i += 2) {
      const double angle = static_cast<double>(p) / std::pow(10000.0, static_cast<double>(i) / static_cast<double>(d));
      pe[static_cast<size_t>(p * d + i)] = static_cast<float>(std::sin(angle));
      if (i + 1 < d) pe[static_cast<size_t>(p * d + i + 1)] = static_cast<float>(std::cos(angle));
    }
  }
  for (int64_t n = 1; n < b; ++n) std::copy(pe.begin(), pe.begin() + t * d, pe.begin() + n * t * d);
  Tensor positions;
  {
    engine::CategoryScope category(vocabulary::Category::inputs);
    positions = Tensor::from_vector({b, t, d}, pe, ids.device());
  }
  const Tensor x = ops::add(ops::scale(embed_tokens_->forward(ids), std::sqrt(static_cast<float>(d))), positions);
  return drop.apply(x, cfg_.dropout, training());
}

Tensor Transformer::encode(const Tensor& src, const Tensor& src_lengths, DropoutStream& drop) const {
  static const std::string path = "encoder";
  static const auto id = engine::op_name(path);
  engine::OwnerScope owner(&path, id);
  Tensor h = embed(src, drop);
  for (const auto& layer : encoder_) h = layer->forward(h, src_lengths, drop);
  return h;
}

Tensor Transformer::decode(const Tensor& tgt_in, const Tensor& memory, const Tensor& src_lengths,
                           DropoutStream& drop) const {
  static const std::string path = "decoder";
  static const auto id = engine::op_name(path);
  engine::OwnerScope owner(&path, id);
  Tensor h = embed(tgt_in, drop);
  for (const auto& layer : decoder_) h = layer->forward(h, memory, src_lengths, drop);
  return h;
}

Tensor Transformer::project(const Tensor& states) const {
  static const std::string path = "output_projection";
  static const auto id = engine::op_name(path);
  engine::OwnerScope owner(&path, id);
  return ops::linear(states, embed_tokens_->weight(), Tensor());  // tied to the embedding, no bias
}

Tensor Transformer::forward(const Tensor& src, const Tensor& src_lengths, const Tensor& tgt_in,
                            DropoutStream& drop) const {
  const Tensor memory = encode(src, src_lengths, drop);
  const Tensor h = decode(tgt_in, memory, src_lengths, drop);
  return project(ops::reshape(h, {h.size(0) * h.size(1), cfg_.d_model}));
}

// ---------------------------------------------------------------- the workload

namespace {

SyntheticTextOptions text_options(const TransformerConfig& c) {
  SyntheticTextOptions o;
  o.shared_vocab = c.vocab;
  o.max_length = c.max_length;
  o.train_pairs = c.train_pairs;
  o.dev_pairs = c.dev_pairs;
  o.test_pairs = c.dev_pairs;
  return o;
}

std::shared_ptr<const ParallelCorpus> load_corpus(const std::string& data, const TransformerConfig& c) {
  if (is_synthetic_text_spec(data))
    return std::make_shared<ParallelCorpus>(SyntheticTranslation(text_options(c)).corpus());
  TextFileOptions o;
  o.max_length = c.max_length;
  o.shared_vocab = true;
  o.src_vocab_cap = c.vocab;
  return std::make_shared<ParallelCorpus>(read_parallel_text(parse_text_files_spec(data), o));
}

// The workload's optimizer; describe() states it in the presets table.
engine::optim::AdamOptions adam_options(const TransformerConfig& c) {
  engine::optim::AdamOptions o;
  o.lr.kind = engine::optim::LrSchedule::Kind::inverse_sqrt;
  o.lr.base_lr = c.lr_factor / std::sqrt(static_cast<double>(c.d_model));
  o.lr.warmup_steps = c.warmup;
  o.beta1 = 0.9;
  o.beta2 = 0.98;
  o.eps = 1e-9;
  return o;
}

class TransformerWorkload final : public Workload {
 public:
  TransformerWorkload(TransformerConfig cfg, std::shared_ptr<const ParallelCorpus> corpus, int64_t max_tokens,
                      uint64_t seed, Device device)
      : cfg_(adjust_vocab(cfg, *corpus)),
        device_(device),
        model_(std::make_shared<Transformer>(cfg_, device, seed)),
        batcher_(std::move(corpus), batching(max_tokens), seed, device),
        adam_(model_->parameters(), adam_options(cfg_)),
        drop_(seed ^ 0x510e527fade682d1ULL) {}

  nn::Module& model() override { return *model_; }
  int64_t batch_size() const override { return cfg_.max_tokens; }
  double learning_rate() const override { return adam_.current_lr(); }
  std::optional<engine::optim::SplitStep> split_step() override { return adam_.split_step(); }
  std::vector<engine::optim::OptimizerRecipe> optimizer_recipes() override {
    return {engine::optim::adam_recipe(adam_.options())};  // the step does not clip
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
      // Padding rows (label 0) count for nothing; the loss is per real target token.
      loss = ops::label_smoothed_cross_entropy(logits, ops::reshape(batch.tgt_out, {batch.tgt_out.numel()}),
                                               cfg_.label_smoothing, 0, static_cast<float>(batch.tgt_tokens));
    });
    phases.backward([&] { loss.backward(); });
    phases.optimizer([&] {
      adam_.step();
      adam_.zero_grad();
    });
    return {static_cast<double>(loss.item()), batch.pairs, batch.src_tokens + batch.tgt_tokens};
  }

  // Corpus BLEU of greedy translations of the first `batches` held-out batches (all when < 0).
  Quality evaluate(int64_t batches) override {
    model_->train(false);
    engine::NoGradScope no_grad;
    BleuAccumulator bleu;
    const int64_t n = batches < 0 ? batcher_.heldout_batches() : std::min(batches, batcher_.heldout_batches());
    for (int64_t i = 0; i < n; ++i) {
      const TokenBatch b = batcher_.heldout(i);
      if (b.pairs == 0) break;
      const auto hyps = greedy_decode(b);
      for (size_t r = 0; r < hyps.size(); ++r) {
        bleu.add(hyps[r], batcher_.corpus().dev[static_cast<size_t>(b.indices[r])].tgt);
      }
    }
    model_->train(true);
    return {"bleu", bleu.score().score, "", true};
  }

 private:
  static TransformerConfig adjust_vocab(TransformerConfig c, const ParallelCorpus& corpus) {
    c.vocab = corpus.src_vocab->size();  // a file corpus may have fewer words
    return c;
  }
  static BatchingOptions batching(int64_t max_tokens) {
    BatchingOptions o;
    o.mode = BatchingOptions::Mode::tokens;
    o.max_tokens = max_tokens;
    o.src_eos = true;  // fairseq appends EOS to sources
    return o;
  }

  // Greedy decoding: the decoder runs again on the whole prefix at every step (no cache), up
  // to the longest source + 10 tokens or until every row has produced EOS.
  std::vector<std::vector<int32_t>> greedy_decode(const TokenBatch& b) {
    DropoutStream none(0);
    const Tensor memory = model_->encode(b.src, b.src_lengths, none);
    const int64_t rows = b.pairs, limit = b.src.size(1) + 10;
    std::vector<float> prefix(static_cast<size_t>(rows), static_cast<float>(Vocabulary::kBos));
    std::vector<bool> done(static_cast<size_t>(rows), false);
    for (int64_t t = 1; t <= limit; ++t) {
      const Tensor in = Tensor::from_vector({rows, t}, prefix, device_);
      const Tensor h = model_->decode(in, memory, b.src_lengths, none);
      const std::vector<float> logits =
          model_->project(ops::reshape(ops::slice(h, 1, t - 1, 1), {rows, cfg_.d_model})).to_vector();
      std::vector<float> next(static_cast<size_t>(rows * (t + 1)));
      bool all_done = true;
      for (int64_t r = 0; r < rows; ++r) {
        const float* row = logits.data() + r * cfg_.vocab;
        int64_t best = 0;
        for (int64_t k = 1; k < cfg_.vocab; ++k) best = row[k] > row[best] ? k : best;
        if (done[static_cast<size_t>(r)]) best = 0;  // pad after EOS
        done[static_cast<size_t>(r)] = done[static_cast<size_t>(r)] || best == Vocabulary::kEos;
        all_done = all_done && done[static_cast<size_t>(r)];
        std::copy(prefix.begin() + r * t, prefix.begin() + (r + 1) * t, next.begin() + r * (t + 1));
        next[static_cast<size_t>(r * (t + 1) + t)] = static_cast<float>(best);
      }
      prefix = std::move(next);
      if (all_done) return ids_to_sentences(prefix, rows, t + 1);
    }
    return ids_to_sentences(prefix, rows, limit + 1);
  }

  TransformerConfig cfg_;
  Device device_;
  std::shared_ptr<Transformer> model_;
  TextBatcher batcher_;
  engine::optim::Adam adam_;
  DropoutStream drop_;
};

PresetTable describe(const TransformerConfig& c) {
  const engine::optim::AdamOptions adam = adam_options(c);
  return {
      {"architecture", "Transformer (Vaswani et al. 2017), post-layer-norm encoder-decoder, fairseq module names"},
      {"layers", std::to_string(c.encoder_layers) + " encoder + " + std::to_string(c.decoder_layers) + " decoder"},
      {"d_model", std::to_string(c.d_model)},
      {"heads", std::to_string(c.heads)},
      {"ffn", std::to_string(c.ffn) + ", ReLU"},
      {"vocabulary", std::to_string(c.vocab) + " shared by source, target and the output projection (tied, no bias)"},
      {"embedding", "N(0, d^-0.5), scaled by sqrt(d), plus interleaved sinusoidal positions"},
      {"dropout",
       table_number(c.dropout) + " on embeddings and every sub-layer output (none inside attention or the FFN)"},
      {"label_smoothing", table_number(c.label_smoothing) + ", padding ignored, loss per target token"},
      {"optimizer",
       "Adam betas " + table_number(adam.beta1) + "/" + table_number(adam.beta2) + ", eps " + table_exponent(adam.eps)},
      {"learning_rate",
       table_number(c.lr_factor) + " x d^-0.5 x min(s^-0.5, s x " + std::to_string(c.warmup) + "^-1.5)"},
      {"batch", std::to_string(c.max_tokens) + " tokens (padded, the larger of source and target), by length"},
      {"max_length", std::to_string(c.max_length) + " tokens per side"},
      {"init", "linear: PyTorch's default uniform +-1/sqrt(fan_in) (fairseq: Xavier uniform)"},
      {"data", "synthetic parallel text from a fixed grammar (workloads/data/text_data.h); quality: BLEU of greedy "
               "decoding on held-out pairs"},
      {"batch_size", std::to_string(c.max_tokens) + " tokens"}};
}

// `summary` writes the one-line text around the configuration's numbers.
Preset make_preset(const std::string& name, std::string (*summary)(const TransformerConfig&)) {
  const TransformerConfig c = transformer_config(name);
  return {name, summary(c), c.max_tokens, describe(c)};
}

std::string layers(const TransformerConfig& c) {
  return std::to_string(c.encoder_layers) + "+" + std::to_string(c.decoder_layers) + " layers";
}
std::string token_batches(const TransformerConfig& c) { return grouped_count(c.max_tokens) + "-token batches"; }

}  // namespace

WorkloadSpec transformer_spec() {
  WorkloadSpec s;
  s.name = "transformer";
  s.domain = "machine translation";
  s.units = {"sentence pairs", "tokens", "tokens", true};
  const TransformerConfig base = transformer_config("full");
  s.description = "Transformer base (" + layers(base) + ", d " + std::to_string(base.d_model) + ", " +
                  std::to_string(base.heads) +
                  " heads), shared embeddings, label smoothing, Adam with "
                  "inverse-square-root warm-up, batches by token count";
  s.presets = {make_preset("tiny",
                           [](const TransformerConfig& c) {
                             return layers(c) + ", d " + std::to_string(c.d_model) + ", " + grouped_count(c.vocab) +
                                    "-word vocabulary, " + token_batches(c) + ": tests";
                           }),
               make_preset("small",
                           [](const TransformerConfig& c) {
                             return layers(c) + " and " + std::to_string(c.heads) + " heads at d " +
                                    std::to_string(c.d_model) + ", ffn " + std::to_string(c.ffn) + ", " +
                                    grouped_count(c.vocab) + " words, " + token_batches(c) + ": CPU benchmarking";
                           }),
               make_preset("full", [](const TransformerConfig& c) {
                 return "the base model: d " + std::to_string(c.d_model) + ", ffn " + std::to_string(c.ffn) + ", " +
                        grouped_count(c.vocab) + " shared words, " + token_batches(c);
               })};
  s.check = [](const WorkloadConfig& wc) {
    transformer_config(wc.preset);
    data_shard(wc, "transformer");
    check_text_source(wc.data);
  };
  // The synthetic corpus has the configuration's vocabulary, so the model's count follows from it.
  s.count_parameters = [](const std::string& preset) {
    return transformer_parameter_count(transformer_config(preset));
  };
  s.build = [](const WorkloadConfig& wc) -> std::unique_ptr<Workload> {
    const TransformerConfig cfg = transformer_config(wc.preset);
    const DataShard shard = data_shard(wc, "transformer");
    // --batch is the token budget here.
    const int64_t max_tokens = *wc.batch;
    return std::make_unique<TransformerWorkload>(cfg, shard_corpus(load_corpus(wc.data, cfg), shard), max_tokens,
                                                 wc.seed, wc.device);
  };
  return s;
}

}  // namespace ts::workloads
