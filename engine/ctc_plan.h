#pragma once
// What the backends' CTC loss (cpu/ctc.cpp, cuda/ctc.cpp) share: the argument checks and the
// per-sample plan, read from the lengths and the targets on the host.
#include <cstdint>
#include <vector>

#include "engine/backend.h"

namespace ts::engine::ctc {

struct Plan {
  int64_t t_max = 0, n = 0, k = 0;  // logits [T, N, K]
  std::vector<int64_t> frames;      // T_n, per sample
  std::vector<int64_t> lengths;     // L_n
  std::vector<int64_t> offsets;     // sample n's first label in `labels`
  std::vector<int64_t> labels;      // the targets as class ids, none of them the blank
  int64_t max_length = 0;

  // Sample i's weight in the loss: 1 (sum), or 1 / (N max(L_i, 1)) (mean, PyTorch's).
  double weight(int64_t i, Backend::CtcReduction reduction) const;
};

// Checks the shapes and values of the arguments (their devices are the caller's to check) and
// plans the samples; std::invalid_argument "ctc_loss: ..." otherwise.
Plan plan(const Tensor& logits, const Tensor& targets, const Tensor& input_lengths, const Tensor& target_lengths,
          int64_t blank);

// Backward's shapes: dloss [1], grad [T, N, K]; std::invalid_argument otherwise.
void check_backward(const Tensor& dloss, const Tensor& grad);

}  // namespace ts::engine::ctc
