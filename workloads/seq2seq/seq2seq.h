#pragma once
// seq2seq: TF NMT's attention model for IWSLT15 English-Vietnamese as TBD ran it (Luong et al.
// 2017, github.com/tensorflow/nmt): a 2-layer 512-unit LSTM encoder, a 2-layer 512-unit LSTM
// decoder with Bahdanau (additive) attention wrapped around it as TF's AttentionWrapper does
// (input feeding: each step's LSTM input is [embedding; previous attentional output]; the top
// layer's output queries the attention; attentional output tanh(W_c [h; context])), embeddings of
// 512, vocabularies of 17,191 and 7,709 words, batches of 128 pairs in 5 length buckets,
// sentences up to 50 tokens, dropout 0.2 on every LSTM layer's input, Adam 0.001 with the
// gradient norm clipped at 5, every weight drawn from U(-0.1, 0.1). Modules are named
// encoder.embedding, encoder.lstm.0, decoder.attention.query_proj, decoder.attention_layer,
// decoder.output_proj, ... Details and the presets: docs/workloads.md, "## seq2seq".
#include <memory>
#include <string>
#include <vector>

#include "engine/nn/layers.h"
#include "engine/ops.h"
#include "workloads/dropout_stream.h"
#include "workloads/workload.h"

namespace ts::workloads {

struct Seq2SeqConfig {
  int64_t src_vocab = 17191;  // ids, specials included (TF NMT's vocab.en / vocab.vi line counts)
  int64_t tgt_vocab = 7709;
  int64_t embedding = 512;
  int64_t hidden = 512;     // LSTM units per layer, and the attentional output's size
  int64_t attention = 512;  // Bahdanau's units: the width of W_q, W_k and v
  int64_t layers = 2;       // per side
  float dropout = 0.2f;     // on every LSTM layer's input, training only
  float init_range = 0.1f;  // every weight U(-r, r)
  int64_t batch = 128;      // sentence pairs
  int64_t buckets = 5;      // length buckets of the batcher (TF NMT's num_buckets)
  int64_t max_length = 50;  // tokens per side in training
  double learning_rate = 0.001;
  double max_gradient_norm = 5.0;
  int64_t train_pairs = 133317, dev_pairs = 1553, test_pairs = 1268;  // synthetic corpus sizes
};

// Throws std::invalid_argument for an unknown preset.
Seq2SeqConfig seq2seq_config(const std::string& preset);

// The parameter count that follows from the configuration alone (tested against the model).
// With E embedding, H hidden, A attention units, L layers, V_s / V_t vocabularies:
//   (V_s + V_t) E                                embeddings
//   + 4H (E + H) + 8H + (L - 1) (8H^2 + 8H)      encoder LSTMs (two biases per layer, as PyTorch/cuDNN)
//   + 4H (E + 2H) + 8H + (L - 1) (8H^2 + 8H)     decoder LSTMs (layer 0 also reads the attentional output)
//   + 2 H A + A                                  attention: W_q, W_k, v
//   + 2 H^2                                      attention layer W_c [H, 2H], no bias
//   + H V_t                                      output projection, no bias
int64_t seq2seq_parameter_count(const Seq2SeqConfig& c);

// One LSTM layer (torch.nn.LSTMCell's parameters: weight_ih [4H, I], weight_hh [4H, H],
// bias_ih, bias_hh; gates i, f, g, o) over time-major input, through ops::lstm.
class LstmLayer : public engine::nn::Module {
 public:
  LstmLayer(int64_t input_size, int64_t hidden_size, engine::Device device, engine::Rng& rng);
  // x [T, B, I]; h0, c0 [B, H] (undefined: zeros); lengths [B] (undefined: all T).
  engine::ops::RnnOutput forward(const engine::Tensor& x, const engine::Tensor& h0, const engine::Tensor& c0,
                                 const engine::Tensor& lengths) const;
  // TF's LSTM cell: biases zero, and its forget_bias 1 added to the forget gate (here: bias_ih's
  // f block is 1, which is the same at initialisation).
  void reset_biases();
  int64_t hidden_size() const { return weight_hh_.size(1); }

 private:
  engine::Tensor weight_ih_, weight_hh_, bias_ih_, bias_hh_;
};

// Bahdanau's additive attention (TF's BahdanauAttention, normalize=False): keys W_k m_j are
// projected once per batch, then per step score_j = v . tanh(W_q q + W_k m_j) over the real
// source positions and context = sum_j softmax(score)_j m_j (ops::additive_attention).
class BahdanauAttention : public engine::nn::Module {
 public:
  BahdanauAttention(int64_t query_size, int64_t memory_size, int64_t units, engine::Device device, engine::Rng& rng);
  engine::Tensor keys(const engine::Tensor& memory) const;  // [B, S, D] -> [B, S, A]
  // query [B, H] -> context [B, D]; the weights [B, S] go to `probs` when given.
  engine::Tensor forward(const engine::Tensor& query, const engine::Tensor& keys, const engine::Tensor& memory,
                         const engine::Tensor& lengths, engine::Tensor* probs = nullptr) const;

 private:
  std::shared_ptr<engine::nn::Linear> query_proj_, key_proj_;
  engine::Tensor v_;
};

// What the decoder attends to and starts from.
struct EncoderOutput {
  engine::Tensor memory;             // [B, S, H], zeros at padded positions
  engine::Tensor lengths;            // [B] source lengths
  std::vector<engine::Tensor> h, c;  // each layer's final state, [B, H]
};

class Encoder : public engine::nn::Module {
 public:
  Encoder(const Seq2SeqConfig& c, engine::Device device, engine::Rng& rng);
  // src [B, S] ids (fp32, 0 = padding), lengths [B].
  EncoderOutput forward(const engine::Tensor& src, const engine::Tensor& lengths, DropoutStream& drop) const;
  const std::vector<std::shared_ptr<LstmLayer>>& layers() const { return lstm_; }

 private:
  float dropout_;
  std::shared_ptr<engine::nn::Embedding> embedding_;
  std::vector<std::shared_ptr<LstmLayer>> lstm_;
};

// The decoder's recurrent state between steps.
struct DecoderState {
  std::vector<engine::Tensor> h, c;  // per layer, [B, H]
  engine::Tensor attentional;        // the previous step's attentional output [B, H] (zeros first)
  engine::Tensor keys, memory, lengths;
};

class Decoder : public engine::nn::Module {
 public:
  Decoder(const Seq2SeqConfig& c, engine::Device device, engine::Rng& rng);
  // The encoder's final states, zero attentional output, the keys projected once.
  DecoderState start(const EncoderOutput& enc) const;
  // ids [T, B] -> [T, B, E]
  engine::Tensor embed(const engine::Tensor& ids) const;
  // One step: the embedded previous target token [B, E] -> the attentional output [B, H]; `state`
  // advances. The attention weights [B, S] go to `probs` when given.
  engine::Tensor step(const engine::Tensor& embedded, DecoderState& state, DropoutStream& drop,
                      engine::Tensor* probs = nullptr) const;
  // Attentional outputs [N, H] -> logits [N, V_t].
  engine::Tensor project(const engine::Tensor& attentional) const;
  const std::vector<std::shared_ptr<LstmLayer>>& layers() const { return lstm_; }

 private:
  float dropout_;
  int64_t hidden_;
  std::shared_ptr<engine::nn::Embedding> embedding_;
  std::vector<std::shared_ptr<LstmLayer>> lstm_;
  std::shared_ptr<BahdanauAttention> attention_;
  std::shared_ptr<engine::nn::Linear> attention_layer_, output_proj_;
};

class Seq2Seq : public engine::nn::Module {
 public:
  Seq2Seq(const Seq2SeqConfig& c, engine::Device device, uint64_t seed);
  const Seq2SeqConfig& config() const { return cfg_; }
  const Encoder& encoder() const { return *encoder_; }
  const Decoder& decoder() const { return *decoder_; }

  // Teacher forcing: src [B, S], src_lengths [B], tgt_in [B, T] (BOS + target) -> logits [T B, V_t],
  // rows time-major (row t B + b is pair b's step t).
  engine::Tensor forward(const engine::Tensor& src, const engine::Tensor& src_lengths, const engine::Tensor& tgt_in,
                         DropoutStream& drop) const;
  // Greedy decoding (eval mode, no gradients): up to max_steps tokens per row, or until every row
  // has produced EOS. Returns the ids [B, steps] row-major and the step count.
  std::vector<float> greedy(const engine::Tensor& src, const engine::Tensor& src_lengths, int64_t max_steps,
                            int64_t* steps) const;

 private:
  Seq2SeqConfig cfg_;
  std::shared_ptr<Encoder> encoder_;
  std::shared_ptr<Decoder> decoder_;
};

WorkloadSpec seq2seq_spec();

}  // namespace ts::workloads
