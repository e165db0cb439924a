#include "engine/nn/recurrent.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "engine/ops.h"

namespace ts::engine::nn {

Recurrent::Recurrent(Backend::RnnCell cell, const RnnOptions& o, Device device, Rng& rng)
    : Module(device), cell_(cell), o_(o) {
  const char* kind = cell == Backend::RnnCell::lstm ? "Lstm" : "Gru";
  if (o.input_size <= 0 || o.hidden_size <= 0 || o.num_layers <= 0) {
    throw std::invalid_argument(std::string(kind) + ": input_size, hidden_size and num_layers must be positive");
  }
  if (!(o.dropout >= 0.0f && o.dropout < 1.0f))
    throw std::invalid_argument(std::string(kind) + ": dropout must be in [0, 1)");
  const int64_t gates = cell == Backend::RnnCell::lstm ? 4 : 3, h = o.hidden_size;
  const int64_t layer_out = o.bidirectional && o.merge == RnnOptions::Merge::concat ? 2 * h : h;
  const auto bound = static_cast<float>(1.0 / std::sqrt(static_cast<double>(h)));
  auto param = [&](const std::string& name, const Shape& shape) {
    Tensor t = Tensor::empty(shape, device, Layout::plain(), vocabulary::Category::weights);
    rng.fill_uniform(t, -bound, bound);
    return register_parameter(name, t);
  };
  // PyTorch's registration order: per layer, per direction, w_ih, w_hh, b_ih, b_hh.
  for (int64_t l = 0; l < o.num_layers; ++l) {
    for (int64_t dir = 0; dir < directions(); ++dir) {
      const std::string sfx = "_l" + std::to_string(l) + (dir == 1 ? "_reverse" : "");
      Weights w;
      w.w_ih = param("weight_ih" + sfx, {gates * h, l == 0 ? o.input_size : layer_out});
      w.w_hh = param("weight_hh" + sfx, {gates * h, h});
      if (o.bias) {
        w.b_ih = param("bias_ih" + sfx, {gates * h});
        w.b_hh = param("bias_hh" + sfx, {gates * h});
      }
      w_.push_back(w);
    }
  }
}

const Recurrent::Weights& Recurrent::weights(int64_t layer, int64_t dir) const {
  if (layer < 0 || layer >= o_.num_layers || dir < 0 || dir >= directions()) {
    throw std::out_of_range("Recurrent::weights: no layer " + std::to_string(layer) + " direction " +
                            std::to_string(dir));
  }
  return w_[static_cast<size_t>(layer * directions() + dir)];
}

Recurrent::Output Recurrent::forward(const Tensor& x, const Tensor& lengths, const RnnStates& initial,
                                     uint64_t dropout_seed) const {
  const bool lstm = cell_ == Backend::RnnCell::lstm;
  const char* kind = lstm ? "Lstm" : "Gru";
  const auto count = static_cast<size_t>(o_.num_layers * directions());
  if (x.dim() != 3 || x.size(2) != o_.input_size) {
    throw std::invalid_argument(std::string(kind) + ": x must be [T, B, " + std::to_string(o_.input_size) + "], got " +
                                shape_str(x.shape()));
  }
  if (!initial.h.empty() && initial.h.size() != count) {
    throw std::invalid_argument(std::string(kind) + ": " + std::to_string(count) + " initial h states expected, got " +
                                std::to_string(initial.h.size()));
  }
  if (!initial.c.empty() && (!lstm || initial.c.size() != count)) {
    throw std::invalid_argument(std::string(kind) + (lstm ? ": " + std::to_string(count) + " initial c states expected"
                                                          : std::string(": a GRU has no cell state")));
  }
  auto s = scope();
  Output out;
  Tensor in = x;
  for (int64_t l = 0; l < o_.num_layers; ++l) {
    std::vector<Tensor> ys;
    for (int64_t dir = 0; dir < directions(); ++dir) {
      const size_t k = static_cast<size_t>(l * directions() + dir);
      const Weights& w = w_[k];
      const Tensor h0 = initial.h.empty() ? Tensor() : initial.h[k];
      ops::RnnOutput r = lstm ? ops::lstm(in, h0, initial.c.empty() ? Tensor() : initial.c[k], w.w_ih, w.w_hh, w.b_ih,
                                          w.b_hh, lengths, dir == 1)
                              : ops::gru(in, h0, w.w_ih, w.w_hh, w.b_ih, w.b_hh, lengths, dir == 1);
      ys.push_back(r.y);
      out.final.h.push_back(r.h_n);
      if (lstm) out.final.c.push_back(r.c_n);
    }
    Tensor y = ys[0];
    if (ys.size() == 2) y = o_.merge == RnnOptions::Merge::concat ? ops::concat(ys, 2) : ops::add(ys[0], ys[1]);
    if (o_.dropout > 0.0f && training() && l + 1 < o_.num_layers) {
      y = ops::dropout(y, o_.dropout, dropout_seed * 0x9E3779B97F4A7C15ULL + static_cast<uint64_t>(l));
    }
    in = y;
  }
  out.y = in;
  return out;
}

}  // namespace ts::engine::nn
