// Faster R-CNN's row gather/scatter and permute, as plain loops with OpenMP (RoIAlign and RoIPool:
// cpu/roi.cpp; smooth-L1: cpu/loss.cpp). Every result is plain; index_add parallelises over
// columns, so no two threads ever add into the same element.
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "engine/cpu/cpu_common.h"

namespace ts::engine::cpu {

namespace {

// Integer row index stored as fp32, checked against [0, rows).
int64_t row_index(float v, int64_t rows, int64_t i, const char* op) {
  if (!(v >= 0.0f) || v >= static_cast<float>(rows) || v != std::floor(v)) {
    fail(op, "index " + std::to_string(v) + " at position " + std::to_string(i) + " is not a row in [0, " +
                 std::to_string(rows) + ")");
  }
  return static_cast<int64_t>(v);
}

}  // namespace

// ---------------------------------------------------------------- RoIAlign

// Both directions work on the feature map in channels-last (a oneDNN reorder, none when it
// already is): each bilinear corner is then a contiguous run of C values, so the inner loops
// are vector FMAs over channels.

// ---------------------------------------------------------------- rows: gather and scatter-add

Tensor CpuBackend::index_select_rows(const Tensor& x_in, const Tensor& index_in) {
  const char* op = "index_select_rows";
  check_cpu(x_in, op, "input");
  check_cpu(index_in, op, "index");
  if (x_in.dim() < 1 || index_in.dim() != 1) {
    fail(op, "expected input [N, ...] and index [M], got " + shape_str(x_in.shape()) + " and " +
                 shape_str(index_in.shape()));
  }
  const Tensor x = plain(*this, x_in), index = plain(*this, index_in);
  const int64_t rows = x.size(0), m = index.size(0);
  const int64_t k = rows > 0 ? x.numel() / rows : 0;
  Shape out = x.shape();
  out[0] = m;
  Tensor y = Tensor::empty(out, x.device());
  const float* pi = index.data();
  const float* px = x.data();
  float* py = y.data();
  for (int64_t i = 0; i < m; ++i) {
    const int64_t r = row_index(pi[i], rows, i, op);
    std::copy(px + r * k, px + (r + 1) * k, py + i * k);
  }
  return y;
}

Tensor CpuBackend::index_add_rows(const Tensor& src_in, const Tensor& index_in, int64_t rows) {
  const char* op = "index_add_rows";
  check_cpu(src_in, op, "src");
  check_cpu(index_in, op, "index");
  if (src_in.dim() < 1 || index_in.dim() != 1 || index_in.size(0) != src_in.size(0) || rows < 0) {
    fail(op, "expected src [M, ...], index [M] and rows >= 0, got " + shape_str(src_in.shape()) + ", " +
                 shape_str(index_in.shape()) + ", " + std::to_string(rows));
  }
  const Tensor src = plain(*this, src_in), index = plain(*this, index_in);
  const int64_t m = src.size(0);
  const int64_t k = m > 0 ? src.numel() / m : 1;
  Shape out = src.shape();
  out[0] = rows;
  Tensor y = Tensor::zeros(out, src.device());
  const float* pi = index.data();
  const float* ps = src.data();
  float* py = y.data();
  for (int64_t i = 0; i < m; ++i) {
    const int64_t r = row_index(pi[i], rows, i, op);
    for (int64_t j = 0; j < k; ++j) py[r * k + j] += ps[i * k + j];
  }
  return y;
}

// ---------------------------------------------------------------- permute

Tensor CpuBackend::permute(const Tensor& x_in, const std::vector<int64_t>& perm) {
  const char* op = "permute";
  check_cpu(x_in, op, "input");
  const int64_t rank = x_in.dim();
  if (static_cast<int64_t>(perm.size()) != rank)
    fail(op, "permutation of rank " + std::to_string(perm.size()) + " for " + shape_str(x_in.shape()));
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (int64_t p : perm) {
    if (p < 0 || p >= rank || seen[static_cast<size_t>(p)]) fail(op, "not a permutation of the dimensions");
    seen[static_cast<size_t>(p)] = true;
  }
  const Tensor x = plain(*this, x_in);
  Shape out(static_cast<size_t>(rank));
  std::vector<int64_t> in_strides(static_cast<size_t>(rank), 1);
  for (int64_t d = rank - 2; d >= 0; --d)
    in_strides[static_cast<size_t>(d)] = in_strides[static_cast<size_t>(d + 1)] * x.size(d + 1);
  // Stride in x of each output dimension.
  std::vector<int64_t> src_strides(static_cast<size_t>(rank));
  for (int64_t d = 0; d < rank; ++d) {
    out[static_cast<size_t>(d)] = x.size(perm[static_cast<size_t>(d)]);
    src_strides[static_cast<size_t>(d)] = in_strides[static_cast<size_t>(perm[static_cast<size_t>(d)])];
  }
  Tensor y = Tensor::empty(out, x.device());
  const int64_t n = y.numel();
  if (n == 0) return y;
  const float* px = x.data();
  float* py = y.data();
  const int64_t inner = rank > 0 ? out.back() : 1;
  const int64_t inner_stride = rank > 0 ? src_strides.back() : 1;
  const int64_t outer = n / inner;
#pragma omp parallel for schedule(static) if (n > (1 << 15))
  for (int64_t o = 0; o < outer; ++o) {
    // Decompose the outer index over the output dims but the last.
    int64_t rem = o, src = 0;
    for (int64_t d = rank - 2; d >= 0; --d) {
      const int64_t sz = out[static_cast<size_t>(d)];
      src += (rem % sz) * src_strides[static_cast<size_t>(d)];
      rem /= sz;
    }
    float* dst = py + o * inner;
    for (int64_t i = 0; i < inner; ++i) dst[i] = px[src + i * inner_stride];
  }
  return y;
}

}  // namespace ts::engine::cpu
