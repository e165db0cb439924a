// The linear family on the CPU: fully connected layers on oneDNN's sgemm, plain 2-D.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "engine/cpu/cpu_common.h"
#include "engine/cpu/dnnl_common.h"
#include "engine/cpu/gemm.h"

namespace ts::engine::cpu {

namespace {

void check_plain2d(const Tensor& t, const char* op, const char* what) {
  check_cpu(t, op);
  if (t.dim() != 2 || !t.layout().is_plain()) {
    throw std::invalid_argument(std::string(op) + ": " + what + " must be plain 2-D, got " + shape_str(t.shape()) +
                                " " + t.layout().str());
  }
}

}  // namespace

Tensor CpuBackend::linear_forward(const Tensor& x, const Tensor& w, const Tensor* bias) {
  check_plain2d(x, "linear", "x");
  check_plain2d(w, "linear", "w");
  const int64_t n = x.size(0), i = x.size(1), o = w.size(0);
  if (w.size(1) != i) {
    throw std::invalid_argument("linear: x " + shape_str(x.shape()) + " and w " + shape_str(w.shape()) +
                                " do not match");
  }
  const bool has_bias = bias && bias->defined();
  if (has_bias && (bias->dim() != 1 || bias->size(0) != o)) {
    throw std::invalid_argument("linear: bias " + shape_str(bias->shape()) + " for w " + shape_str(w.shape()));
  }
  Tensor y = Tensor::empty({n, o}, x.device());
  float* py = y.data();
  if (has_bias) {  // y starts as the bias in every row, and the GEMM adds to it (beta 1)
    const float* pb = bias->data();
#pragma omp parallel for if (n * o > (1 << 15))
    for (int64_t r = 0; r < n; ++r) std::copy(pb, pb + o, py + r * o);
  }
  // Linear layers run sgemm rather than inner-product primitives: see gemm.cpp.
  sgemm(GemmSite::linear_forward, 'N', 'T', n, o, i, 1.0f, x.data(), i, w.data(), i, has_bias ? 1.0f : 0.0f, py, o);
  return y;
}

Tensor CpuBackend::linear_backward_data(const Tensor& dy, const Tensor& w) {
  check_plain2d(dy, "linear_backward_data", "dy");
  check_plain2d(w, "linear_backward_data", "w");
  const int64_t n = dy.size(0), o = dy.size(1), i = w.size(1);
  if (w.size(0) != o) {
    throw std::invalid_argument("linear_backward_data: dy " + shape_str(dy.shape()) + " and w " + shape_str(w.shape()));
  }
  Tensor dx = Tensor::empty({n, i}, dy.device());
  sgemm(GemmSite::linear_backward_data, 'N', 'N', n, i, o, 1.0f, dy.data(), o, w.data(), i, 0.0f, dx.data(),
        i);  // dx = dy w
  return dx;
}

WeightGrads CpuBackend::linear_backward_weights(const Tensor& x, const Tensor& dy, bool bias) {
  check_plain2d(x, "linear_backward_weights", "x");
  check_plain2d(dy, "linear_backward_weights", "dy");
  const int64_t n = x.size(0), i = x.size(1), o = dy.size(1);
  if (dy.size(0) != n) {
    throw std::invalid_argument("linear_backward_weights: x " + shape_str(x.shape()) + " and dy " +
                                shape_str(dy.shape()));
  }
  WeightGrads r;
  r.dw = Tensor::empty({o, i}, x.device());
  // n == 0: the product over no rows is zero, which sgemm writes.
  sgemm(GemmSite::linear_backward_weights, 'T', 'N', o, i, n, 1.0f, dy.data(), o, x.data(), i, 0.0f, r.dw.data(),
        i);  // dw = dy^T x
  if (bias) {
    r.dbias = Tensor::empty({o}, x.device());
    const float* g = dy.data();
    float* db = r.dbias.data();
    // Column sums in blocks of 64 columns, each block's rows read contiguously.
    const int64_t blocks = (o + 63) / 64;
#pragma omp parallel for if (n * o > (1 << 15))
    for (int64_t blk = 0; blk < blocks; ++blk) {
      const int64_t c0 = blk * 64, c1 = std::min(o, c0 + 64);
      double acc[64] = {};
      for (int64_t row = 0; row < n; ++row) {
        for (int64_t c = c0; c < c1; ++c) acc[c - c0] += g[row * o + c];
      }
      for (int64_t c = c0; c < c1; ++c) db[c] = static_cast<float>(acc[c - c0]);
    }
  }
  return r;
}

}  // namespace ts::engine::cpu
