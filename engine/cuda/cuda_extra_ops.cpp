// Nearest upsampling, the row gather/scatter and permute on the GPU (kernels in
// kernels_extra.cu); the other families have files of their own. Argument checks and error
// messages follow the CPU backend's (cpu_backend.cpp, cpu_detection.cpp), so an op fails the
// same way on either device.
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/cuda/cuda_common.h"
#include "engine/cuda/device_memory.h"

namespace ts::engine::cuda {

namespace {

// A 4-D tensor's storage as [outer][H][W][vec]: plain (N C, H, W, 1), channels-last
// (N, H, W, C), channel-blocked (N C/b, H, W, b), as the CPU backend sees it.
struct SpatialView {
  int64_t outer, h, w, vec;
};

SpatialView spatial_view(const Tensor& t, const char* op) {
  if (t.dim() != 4) fail(op, "needs [N, C, H, W], got " + shape_str(t.shape()));
  const int64_t n = t.size(0), c = t.size(1), h = t.size(2), w = t.size(3);
  switch (t.layout().kind) {
    case Layout::Kind::plain:
      return {n * c, h, w, 1};
    case Layout::Kind::channels_last:
      return {n, h, w, c};
    case Layout::Kind::channel_blocked: {
      const int64_t b = t.layout().block;
      return {n * ((c + b - 1) / b), h, w, b};
    }
  }
  throw std::logic_error("unknown layout");
}

void check_factor(int64_t factor, const char* op) {
  if (factor < 1) fail(op, "factor must be >= 1, got " + std::to_string(factor));
}

// Integer row indices stored as fp32, checked on the host against [0, rows).
void check_row_indices(const Tensor& index, int64_t rows, int device, const char* op) {
  const std::vector<float> v = to_host(index, device);
  for (size_t i = 0; i < v.size(); ++i) {
    if (!(v[i] >= 0.0f) || v[i] >= static_cast<float>(rows) || v[i] != std::floor(v[i])) {
      fail(op, "index " + std::to_string(v[i]) + " at position " + std::to_string(i) + " is not a row in [0, " +
                   std::to_string(rows) + ")");
    }
  }
}

}  // namespace

// ---------------------------------------------------------------- nearest upsampling

Tensor CudaBackend::upsample_nearest2d_forward(const Tensor& x, int64_t f) {
  const char* op = "upsample_nearest2d";
  check_on(x, device_, op, "x");
  check_factor(f, op);
  const SpatialView v = spatial_view(x, op);
  Env env(*impl_);
  Tensor y = Tensor::empty({x.size(0), x.size(1), x.size(2) * f, x.size(3) * f}, x.device(), x.layout());
  TS_CUDA_CHECK(kernels::upsample_nearest_forward(x.data(), v.outer, v.h, v.w, v.vec, f, y.data(), env.stream));
  return y;
}

Tensor CudaBackend::upsample_nearest2d_backward(const Tensor& dy, int64_t f) {
  const char* op = "upsample_nearest2d_backward";
  check_on(dy, device_, op, "dy");
  check_factor(f, op);
  if (dy.dim() != 4 || dy.size(2) % f != 0 || dy.size(3) % f != 0) {
    fail(op, shape_str(dy.shape()) + " is not a multiple of the factor " + std::to_string(f));
  }
  Env env(*impl_);
  Tensor dx = Tensor::empty({dy.size(0), dy.size(1), dy.size(2) / f, dy.size(3) / f}, dy.device(), dy.layout());
  const SpatialView v = spatial_view(dx, op);
  TS_CUDA_CHECK(kernels::upsample_nearest_backward(dy.data(), v.outer, v.h, v.w, v.vec, f, dx.data(), env.stream));
  return dx;
}

// ---------------------------------------------------------------- rows: gather and scatter-add

Tensor CudaBackend::index_select_rows(const Tensor& x_in, const Tensor& index_in) {
  const char* op = "index_select_rows";
  check_on(x_in, device_, op, "input");
  check_on(index_in, device_, op, "index");
  if (x_in.dim() < 1 || index_in.dim() != 1) {
    fail(op, "expected input [N, ...] and index [M], got " + shape_str(x_in.shape()) + " and " +
                 shape_str(index_in.shape()));
  }
  const Tensor x = as_plain(*this, x_in), index = as_plain(*this, index_in);
  const int64_t rows = x.size(0), m = index.size(0);
  const int64_t k = rows > 0 ? x.numel() / rows : 0;
  check_row_indices(index, rows, device_, op);
  Shape out = x.shape();
  out[0] = m;
  Env env(*impl_);
  Tensor y = Tensor::empty(out, x.device());
  TS_CUDA_CHECK(kernels::index_select_rows(x.data(), index.data(), m, k, y.data(), env.stream));
  return y;
}

Tensor CudaBackend::index_add_rows(const Tensor& src_in, const Tensor& index_in, int64_t rows) {
  const char* op = "index_add_rows";
  check_on(src_in, device_, op, "src");
  check_on(index_in, device_, op, "index");
  if (src_in.dim() < 1 || index_in.dim() != 1 || index_in.size(0) != src_in.size(0) || rows < 0) {
    fail(op, "expected src [M, ...], index [M] and rows >= 0, got " + shape_str(src_in.shape()) + ", " +
                 shape_str(index_in.shape()) + ", " + std::to_string(rows));
  }
  const Tensor src = as_plain(*this, src_in), index = as_plain(*this, index_in);
  const int64_t m = src.size(0);
  const int64_t k = m > 0 ? src.numel() / m : 1;
  check_row_indices(index, rows, device_, op);
  Shape out = src.shape();
  out[0] = rows;
  Tensor y = Tensor::zeros(out, src.device());
  Env env(*impl_);
  TS_CUDA_CHECK(kernels::index_add_rows(src.data(), index.data(), m, k, y.data(), env.stream));
  return y;
}

// ---------------------------------------------------------------- permute

Tensor CudaBackend::permute(const Tensor& x_in, const std::vector<int64_t>& perm) {
  const char* op = "permute";
  check_on(x_in, device_, op, "input");
  const int64_t rank = x_in.dim();
  if (static_cast<int64_t>(perm.size()) != rank) {
    fail(op, "permutation of rank " + std::to_string(perm.size()) + " for " + shape_str(x_in.shape()));
  }
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (int64_t p : perm) {
    if (p < 0 || p >= rank || seen[static_cast<size_t>(p)]) fail(op, "not a permutation of the dimensions");
    seen[static_cast<size_t>(p)] = true;
  }
  if (rank > kernels::kMaxPermuteRank) {
    fail(op, "rank " + std::to_string(rank) + " is above the " + std::to_string(kernels::kMaxPermuteRank) +
                 " the CUDA kernel takes");
  }
  const Tensor x = as_plain(*this, x_in);
  kernels::PermuteGeom g;
  g.rank = static_cast<int>(rank);
  std::vector<int64_t> in_strides(static_cast<size_t>(rank), 1);
  for (int64_t d = rank - 2; d >= 0; --d) {
    in_strides[static_cast<size_t>(d)] = in_strides[static_cast<size_t>(d + 1)] * x.size(d + 1);
  }
  Shape out(static_cast<size_t>(rank));
  for (int64_t d = 0; d < rank; ++d) {
    const auto p = static_cast<size_t>(perm[static_cast<size_t>(d)]);
    out[static_cast<size_t>(d)] = x.shape()[p];
    g.out_shape[d] = x.shape()[p];
    g.src_strides[d] = in_strides[p];
  }
  Env env(*impl_);
  Tensor y = Tensor::empty(out, x.device());
  TS_CUDA_CHECK(kernels::permute(x.data(), g, y.numel(), y.data(), env.stream));
  return y;
}

}  // namespace ts::engine::cuda
