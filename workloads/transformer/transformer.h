#pragma once
// The Transformer (Vaswani et al. 2017, "Attention Is All You Need"), base configuration:
// 6 encoder and 6 decoder layers, d_model 512, 8 heads, feed-forward 2048, ReLU, post-layer
// norm (the paper's "LayerNorm(x + Sublayer(x))"), residual and embedding dropout 0.1,
// sinusoidal positions, one embedding matrix shared by the source, the target and the
// output projection (scaled by sqrt(d_model) at the input), label smoothing 0.1, Adam
// (0.9, 0.98, 1e-9) with the inverse-square-root warm-up. Modules are named as fairseq names
// them (encoder.layers.0.self_attn.q_proj, decoder.layers.5.encoder_attn_layer_norm) so the
// per-layer tables read like fairseq's model.
#include <memory>
#include <string>
#include <vector>

#include "engine/nn/layers.h"
#include "workloads/dropout_stream.h"
#include "workloads/workload.h"

namespace ts::workloads {

struct TransformerConfig {
  int64_t vocab = 37000;  // shared source/target vocabulary (WMT En-De BPE, as the paper)
  int64_t d_model = 512;
  int64_t heads = 8;
  int64_t ffn = 2048;
  int64_t encoder_layers = 6;
  int64_t decoder_layers = 6;
  float dropout = 0.1f;
  float label_smoothing = 0.1f;
  int64_t max_tokens = 4096;  // per batch, padded source or target tokens, whichever is more
  int64_t max_length = 50;    // tokens per sentence in the synthetic corpus
  int64_t warmup = 4000;
  double lr_factor = 1.0;                          // peak-scaling factor on d_model^-0.5 (the paper: 1)
  int64_t train_pairs = 133317, dev_pairs = 1553;  // synthetic corpus sizes
};

// Throws std::invalid_argument for an unknown preset.
TransformerConfig transformer_config(const std::string& preset);

// The parameter count that follows from the configuration alone (tested against the model):
// V d (shared embedding) + per encoder layer 4 (d^2 + d) + 2 d f + f + d + 2 (2 d), per
// decoder layer 8 (d^2 + d) + 2 d f + f + d + 3 (2 d); no output bias.
int64_t transformer_parameter_count(const TransformerConfig& c);

class MultiheadAttention : public engine::nn::Module {
 public:
  MultiheadAttention(int64_t d_model, int64_t heads, engine::Device device, engine::Rng& rng);
  // query [B, Tq, d], memory [B, Tk, d]; key_lengths [B] hides padded keys; causal hides the future.
  engine::Tensor forward(const engine::Tensor& query, const engine::Tensor& memory, const engine::Tensor& key_lengths,
                         bool causal) const;

 private:
  int64_t heads_;
  std::shared_ptr<engine::nn::Linear> q_proj_, k_proj_, v_proj_, out_proj_;
};

class EncoderLayer : public engine::nn::Module {
 public:
  EncoderLayer(const TransformerConfig& c, engine::Device device, engine::Rng& rng);
  engine::Tensor forward(const engine::Tensor& x, const engine::Tensor& src_lengths, DropoutStream& drop) const;

 private:
  float dropout_;
  std::shared_ptr<MultiheadAttention> self_attn_;
  std::shared_ptr<engine::nn::LayerNorm> self_attn_layer_norm_, final_layer_norm_;
  std::shared_ptr<engine::nn::Linear> fc1_, fc2_;
};

class DecoderLayer : public engine::nn::Module {
 public:
  DecoderLayer(const TransformerConfig& c, engine::Device device, engine::Rng& rng);
  engine::Tensor forward(const engine::Tensor& x, const engine::Tensor& memory, const engine::Tensor& src_lengths,
                         DropoutStream& drop) const;

 private:
  float dropout_;
  std::shared_ptr<MultiheadAttention> self_attn_, encoder_attn_;
  std::shared_ptr<engine::nn::LayerNorm> self_attn_layer_norm_, encoder_attn_layer_norm_, final_layer_norm_;
  std::shared_ptr<engine::nn::Linear> fc1_, fc2_;
};

class Transformer : public engine::nn::Module {
 public:
  Transformer(const TransformerConfig& c, engine::Device device, uint64_t seed);
  const TransformerConfig& config() const { return cfg_; }

  // src [B, S] and tgt_in [B, T] token ids (fp32, 0 = padding), src_lengths [B] -> logits [B T, V].
  engine::Tensor forward(const engine::Tensor& src, const engine::Tensor& src_lengths, const engine::Tensor& tgt_in,
                         DropoutStream& drop) const;
  engine::Tensor encode(const engine::Tensor& src, const engine::Tensor& src_lengths, DropoutStream& drop) const;
  // Decoder states [B, T, d] for the target prefix tgt_in.
  engine::Tensor decode(const engine::Tensor& tgt_in, const engine::Tensor& memory, const engine::Tensor& src_lengths,
                        DropoutStream& drop) const;
  // Logits over the vocabulary for decoder states [N, d] (the tied output projection).
  engine::Tensor project(const engine::Tensor& states) const;

 private:
  // sqrt(d) E[ids] + positions, then dropout: [B, T, d].
  engine::Tensor embed(const engine::Tensor& ids, DropoutStream& drop) const;

  TransformerConfig cfg_;
  std::shared_ptr<engine::nn::Embedding> embed_tokens_;
  std::vector<std::shared_ptr<EncoderLayer>> encoder_;
  std::vector<std::shared_ptr<DecoderLayer>> decoder_;
};

WorkloadSpec transformer_spec();

}  // namespace ts::workloads
