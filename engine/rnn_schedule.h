#pragma once
// What the backends' recurrent layers (cpu/rnn.cpp, cuda/rnn.cpp) share: the argument
// checks and the packed-step schedule. Both walk the batch in order of decreasing length, so
// the sequences with a real step at time t are rows [0, active[t]) of the state buffers, and
// pack every per-step row (the reserve, the gate gradients, the big GEMMs' operands) as
// PyTorch's PackedSequence packs it: row (t, j) = offset[t] + j. Padded steps then cost
// neither memory nor flops. Step s of sequence b is time t = s, or len_b - 1 - s when reversed.
#include <cstdint>
#include <vector>

#include "engine/backend.h"

namespace ts::engine::rnn {

struct Dims {
  int64_t T, B, I, H, G;
  bool lstm;
  int64_t gh() const { return G * H; }
  // Reserve floats per real step: LSTM i, f, g, o, c_t; GRU r, z, n, W_hn h_{t-1} + b_hn.
  int64_t stride() const { return lstm ? 5 * H : 4 * H; }
};

// t plain, of `shape`, on `device`; std::invalid_argument naming `op` and `what` otherwise.
void check_tensor(const Tensor& t, const char* op, const char* what, const Shape& shape, Device device);

// The shapes of a's tensors (x [T, B, I], w_ih [G H, I], w_hh [G H, H], biases [G H], states
// [B, H], lengths [B]), each plain and on `device` (lengths may also be on the CPU when
// `lengths_on_cpu_ok`); std::invalid_argument naming `op` otherwise.
Dims check_args(const Backend::RnnArgs& a, const char* op, Device device, bool lengths_on_cpu_ok);

struct Schedule {
  std::vector<int64_t> len;     // per sequence
  std::vector<int64_t> perm;    // row j of the state buffers is sequence perm[j]
  std::vector<int64_t> active;  // per t < max_len
  std::vector<int64_t> offset;  // per t <= max_len; offset[max_len] = rows = sum of lengths
  int64_t max_len = 0;
  bool dense = true;  // every length T: packed rows are x's own [T, B] rows
  int64_t rows() const { return offset.back(); }
};

// `lengths`: B host floats, or nullptr for every length T. Each must be an integer in [0, T].
Schedule make_schedule(const float* lengths, int64_t T, int64_t B, const char* op);

// Time index of a sequence of length `len` at processing step s.
inline int64_t time_of(int64_t s, int64_t len, bool reverse) { return reverse ? len - 1 - s : s; }

}  // namespace ts::engine::rnn
