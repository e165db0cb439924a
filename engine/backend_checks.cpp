#include "engine/backend_checks.h"

#include <cmath>
#include <stdexcept>
#include <string>

namespace ts::engine::checks {

namespace {

[[noreturn]] void fail(const char* op, const std::string& msg) {
  throw std::invalid_argument(std::string(op) + ": " + msg);
}

}  // namespace

Shape concat_shape(const std::vector<Tensor>& xs, int64_t& dim) {
  if (xs.empty()) fail("concat", "no inputs");
  const int64_t rank = xs[0].dim();
  if (dim < 0) dim += rank;
  if (dim < 0 || dim >= rank) fail("concat", "dim out of range for " + shape_str(xs[0].shape()));
  Shape out = xs[0].shape();
  out[static_cast<size_t>(dim)] = 0;
  for (const auto& t : xs) {
    bool ok = t.dim() == rank;
    for (int64_t d = 0; ok && d < rank; ++d) ok = d == dim || t.size(d) == xs[0].size(d);
    if (!ok) {
      fail("concat", "shape " + shape_str(t.shape()) + " does not match " + shape_str(xs[0].shape()) + " along dim " +
                         std::to_string(dim));
    }
    out[static_cast<size_t>(dim)] += t.size(dim);
  }
  return out;
}

void check_slice(const Shape& x, int64_t& dim, int64_t start, int64_t length) {
  const auto rank = static_cast<int64_t>(x.size());
  if (dim < 0) dim += rank;
  if (dim < 0 || dim >= rank || start < 0 || length < 0 || start + length > x[static_cast<size_t>(dim)]) {
    fail("slice", "dim " + std::to_string(dim) + " [" + std::to_string(start) + ", +" + std::to_string(length) +
                      ") out of range for " + shape_str(x));
  }
}

void check_permutation(const Shape& x, const std::vector<int64_t>& perm) {
  const auto rank = static_cast<int64_t>(x.size());
  if (static_cast<int64_t>(perm.size()) != rank) {
    fail("permute", "permutation of rank " + std::to_string(perm.size()) + " for " + shape_str(x));
  }
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (int64_t p : perm) {
    if (p < 0 || p >= rank || seen[static_cast<size_t>(p)]) fail("permute", "not a permutation of the dimensions");
    seen[static_cast<size_t>(p)] = true;
  }
}

void check_select_rows(const Tensor& x, const Tensor& index) {
  if (x.dim() < 1 || index.dim() != 1) {
    fail("index_select_rows",
         "expected input [N, ...] and index [M], got " + shape_str(x.shape()) + " and " + shape_str(index.shape()));
  }
}

void check_add_rows(const Tensor& src, const Tensor& index, int64_t rows) {
  if (src.dim() < 1 || index.dim() != 1 || index.size(0) != src.size(0) || rows < 0) {
    fail("index_add_rows", "expected src [M, ...], index [M] and rows >= 0, got " + shape_str(src.shape()) + ", " +
                               shape_str(index.shape()) + ", " + std::to_string(rows));
  }
}

void check_row_indices(const float* index, int64_t count, int64_t rows, const char* op) {
  for (int64_t i = 0; i < count; ++i) {
    const float v = index[i];
    if (!(v >= 0.0f) || v >= static_cast<float>(rows) || v != std::floor(v)) {
      fail(op, "index " + std::to_string(v) + " at position " + std::to_string(i) + " is not a row in [0, " +
                   std::to_string(rows) + ")");
    }
  }
}

AttentionDims attention_dims(const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads) {
  const AttentionDims d{q.size(0), q.size(1), k.size(1), q.size(2)};
  if (heads < 1 || d.hd % heads != 0 || k.size(0) != d.b || v.shape() != k.shape() || k.size(2) != d.hd) {
    fail("attention", "q " + shape_str(q.shape()) + ", k " + shape_str(k.shape()) + ", v " + shape_str(v.shape()) +
                          " with " + std::to_string(heads) + " heads");
  }
  return d;
}

void check_key_lengths(const Tensor& key_lengths, int64_t b) {
  if (key_lengths.size(0) != b) fail("attention", "key_lengths must be [B]");
}

void check_rois_shape(const Tensor& rois, const char* op) {
  if (rois.dim() != 2 || rois.size(1) != 5) fail(op, "rois must be [R, 5], got " + shape_str(rois.shape()));
}

void check_roi_batches(const float* rois, int64_t count, int64_t batch, const char* op) {
  for (int64_t i = 0; i < count; ++i) {
    const float b = rois[i * 5];
    if (!(b >= 0.0f) || b >= static_cast<float>(batch) || b != std::floor(b)) {
      fail(op, "roi " + std::to_string(i) + " has batch index " + std::to_string(b) + ", feature batch is " +
                   std::to_string(batch));
    }
  }
}

void check_pooled(int64_t pooled_h, int64_t pooled_w, float spatial_scale, const char* op) {
  if (pooled_h < 1 || pooled_w < 1) fail(op, "pooled size must be positive");
  if (!(spatial_scale > 0.0f) || !std::isfinite(spatial_scale)) fail(op, "spatial_scale must be positive");
}

}  // namespace ts::engine::checks
