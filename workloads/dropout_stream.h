#pragma once
// The dropout seeds of one forward pass (transformer, seq2seq): every dropout site draws a
// fresh mask from the next seed, so a pass is reproducible from its first seed.
#include <cstdint>

#include "engine/ops.h"
#include "engine/tensor.h"

namespace ts::workloads {

class DropoutStream {
 public:
  explicit DropoutStream(uint64_t seed) : next_(seed) {}
  engine::Tensor apply(const engine::Tensor& x, float p, bool training) {
    if (!training || p == 0.0f) return x;
    return engine::ops::dropout(x, p, next_++, true);
  }

 private:
  uint64_t next_;
};

}  // namespace ts::workloads
