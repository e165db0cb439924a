#pragma once
// Multi-layer, optionally bidirectional LSTM and GRU stacks (seq2seq's encoder and decoder,
// Deep Speech 2's recurrent layers), composed from ops::lstm / ops::gru one layer and one
// direction at a time. Parameters are named and shaped as PyTorch's nn.LSTM / nn.GRU name them
// (weight_ih_l0, weight_hh_l0, bias_ih_l0, bias_hh_l0, weight_ih_l0_reverse, ...), so parameter
// counts match PyTorch's and checkpoints map one to one; initialisation is PyTorch's,
// uniform(-1/sqrt(H), 1/sqrt(H)) for every weight and bias.
#include <vector>

#include "engine/backend.h"
#include "engine/nn/module.h"
#include "engine/random.h"

namespace ts::engine::nn {

struct RnnOptions {
  int64_t input_size = 0;
  int64_t hidden_size = 0;
  int64_t num_layers = 1;
  bool bias = true;
  bool bidirectional = false;
  // How a bidirectional layer joins its two directions: concat along features (PyTorch's, the
  // next layer's input is 2H) or sum (Deep Speech 2's, the next layer's input stays H).
  enum class Merge { concat, sum };
  Merge merge = Merge::concat;
  // Dropout on every layer's output but the last, in training mode (PyTorch's `dropout`).
  float dropout = 0.0f;
};

// The final states of every layer and direction, in PyTorch's order: l0, l0_reverse, l1, ...
// (h_n[k] is what PyTorch's h_n[k] holds, each [B, H]).
struct RnnStates {
  std::vector<Tensor> h, c;  // c: LSTM only
};

class Recurrent : public Module {
 public:
  struct Output {
    Tensor y;         // [T, B, H] or [T, B, 2H] (bidirectional, concat), zeros at padded steps
    RnnStates final;  // at each sequence's own last real step
  };
  // x [T, B, input_size] time-major; lengths [B] (fp32 integers, may be undefined = all T);
  // initial: empty vectors (zeros) or one [B, H] tensor per layer and direction, in the order
  // of RnnStates. dropout_seed picks the dropout masks (vary it per step).
  Output forward(const Tensor& x, const Tensor& lengths = Tensor(), const RnnStates& initial = {},
                 uint64_t dropout_seed = 0) const;

  const RnnOptions& options() const { return o_; }
  int64_t directions() const { return o_.bidirectional ? 2 : 1; }
  // Layer `layer`, direction `dir` (0 forward, 1 reverse): w_ih, w_hh, b_ih, b_hh (biases undefined without bias).
  struct Weights {
    Tensor w_ih, w_hh, b_ih, b_hh;
  };
  const Weights& weights(int64_t layer, int64_t dir) const;

 protected:
  Recurrent(Backend::RnnCell cell, const RnnOptions& o, Device device, Rng& rng);

 private:
  Backend::RnnCell cell_;
  RnnOptions o_;
  std::vector<Weights> w_;  // layer * directions + dir
};

// torch.nn.LSTM(input_size, hidden_size, num_layers, bias, dropout=, bidirectional=) with
// batch_first=False: gates (i, f, g, o), two biases per layer and direction.
class Lstm : public Recurrent {
 public:
  Lstm(const RnnOptions& o, Device device, Rng& rng) : Recurrent(Backend::RnnCell::lstm, o, device, rng) {}
};

// torch.nn.GRU: gates (r, z, n), b_hn inside the reset product. forward's initial.c must be empty.
class Gru : public Recurrent {
 public:
  Gru(const RnnOptions& o, Device device, Rng& rng) : Recurrent(Backend::RnnCell::gru, o, device, rng) {}
};

}  // namespace ts::engine::nn
