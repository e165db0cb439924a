// The layout family on the GPU: concat, slice, permute and the row gather/scatter (kernels in
// layout.cu). Checks and messages follow the CPU backend's (cpu/layout.cpp), so an op fails the
// same way on either device.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/backend_checks.h"
#include "engine/cuda/cuda_common.h"
#include "engine/cuda/device_memory.h"
#include "engine/cuda/layout_kernels.h"

namespace ts::engine::cuda {

namespace {

// [outer, size(dim), inner] view of a plain tensor.
void split_at(const Shape& s, int64_t dim, int64_t& outer, int64_t& inner) {
  outer = 1;
  inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= s[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(dim) + 1; d < s.size(); ++d) inner *= s[d];
}

// Integer row indices stored as fp32, checked on the host against [0, rows).
void check_row_indices(const Tensor& index, int64_t rows, int device, const char* op) {
  const std::vector<float> v = to_host(index, device);
  checks::check_row_indices(v.data(), static_cast<int64_t>(v.size()), rows, op);
}

}  // namespace

Tensor CudaBackend::concat(const std::vector<Tensor>& xs, int64_t dim) {
  for (const auto& t : xs) check_on(t, device_, "concat", "input");
  const Shape out = checks::concat_shape(xs, dim);
  std::vector<Tensor> in;
  in.reserve(xs.size());
  for (const auto& t : xs) in.push_back(as_plain(*this, t));
  Env env(*impl_);
  Tensor y = Tensor::empty(out, xs[0].device());
  int64_t outer = 0, inner = 0;
  split_at(out, dim, outer, inner);
  const int64_t total = out[static_cast<size_t>(dim)];
  int64_t off = 0;
  for (const auto& t : in) {
    const int64_t len = t.size(dim);
    TS_CUDA_CHECK(kernels::copy_rows(y.data() + off * inner, total * inner, t.data(), len * inner, len * inner, outer,
                                     env.stream));
    off += len;
  }
  return y;
}

Tensor CudaBackend::slice(const Tensor& x_in, int64_t dim, int64_t start, int64_t length) {
  check_on(x_in, device_, "slice", "x");
  checks::check_slice(x_in.shape(), dim, start, length);
  const Tensor x = as_plain(*this, x_in);
  Shape out = x.shape();
  out[static_cast<size_t>(dim)] = length;
  Env env(*impl_);
  Tensor y = Tensor::empty(out, x.device());
  int64_t outer = 0, inner = 0;
  split_at(x.shape(), dim, outer, inner);
  TS_CUDA_CHECK(kernels::copy_rows(y.data(), length * inner, x.data() + start * inner, x.size(dim) * inner,
                                   length * inner, outer, env.stream));
  return y;
}

Tensor CudaBackend::index_select_rows(const Tensor& x_in, const Tensor& index_in) {
  const char* op = "index_select_rows";
  check_on(x_in, device_, op, "input");
  check_on(index_in, device_, op, "index");
  checks::check_select_rows(x_in, index_in);
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
  checks::check_add_rows(src_in, index_in, rows);
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

Tensor CudaBackend::permute(const Tensor& x_in, const std::vector<int64_t>& perm) {
  const char* op = "permute";
  check_on(x_in, device_, op, "input");
  checks::check_permutation(x_in.shape(), perm);
  const int64_t rank = x_in.dim();
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
