// The linear family on the GPU: fully connected layers on cuBLAS. cuBLAS is column-major; a row-major [r, c] matrix is
// the column-major [c, r] matrix, its transpose, so with x [N, I], w [O, I], y [N, O] row-major:
//   y  = x w^T   <=>  y^T  (O x N) = w (O x I) x^T (I x N):  gemm(T, N, O, N, I, w, x)
//   dx = dy w    <=>  dx^T (I x N) = w^T (I x O) dy^T (O x N): gemm(N, N, I, N, O, w, dy)
//   dw = dy^T x  <=>  dw^T (I x O) = x^T (I x N) dy (N x O):   gemm(N, T, I, O, N, x, dy)
#include <stdexcept>

#include "engine/cuda/cuda_common.h"
#include "engine/cuda/pointwise_kernels.h"

namespace ts::engine::cuda {

namespace {

void check_2d(const Tensor& t, int device, const char* op, const char* what) {
  check_on(t, device, op, what);
  if (t.dim() != 2 || !t.layout().is_plain()) {
    throw std::invalid_argument(std::string(op) + ": " + what + " must be plain 2-D, got " + shape_str(t.shape()) +
                                " " + t.layout().str());
  }
}

// C (m x n, ld ldc) = op(A) op(B), column-major, fp32 (TF32 per the context's math mode).
void gemm(Env& env, cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n, int64_t k, const float* a,
          int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc, const char* op) {
  const float one = 1.0f, zero = 0.0f;
  std::lock_guard<std::mutex> lock(env.ctx.library_mutex());
  TS_CUBLAS_CHECK(cublasSgemm(env.ctx.cublas(), ta, tb, to_int(m, op, "rows"), to_int(n, op, "columns"),
                              to_int(k, op, "inner size"), &one, a, to_int(lda, op, "leading dimension"), b,
                              to_int(ldb, op, "leading dimension"), &zero, c, to_int(ldc, op, "leading dimension")));
}

}  // namespace

Tensor CudaBackend::linear_forward(const Tensor& x, const Tensor& w, const Tensor* bias) {
  const char* op = "linear";
  check_2d(x, device_, op, "x");
  check_2d(w, device_, op, "w");
  const int64_t n = x.size(0), i = x.size(1), o = w.size(0);
  if (w.size(1) != i) {
    throw std::invalid_argument("linear: x " + shape_str(x.shape()) + " and w " + shape_str(w.shape()) +
                                " do not match");
  }
  const bool has_bias = bias && bias->defined();
  if (has_bias) {
    check_on(*bias, device_, op, "bias");
    if (bias->dim() != 1 || bias->size(0) != o) {
      throw std::invalid_argument("linear: bias " + shape_str(bias->shape()) + " for w " + shape_str(w.shape()));
    }
  }
  Env env(*impl_);
  Tensor y = Tensor::empty({n, o}, x.device());
  if (n * o == 0) return y;
  if (i == 0) {
    TS_CUDA_CHECK(kernels::fill(y.data(), n * o, 0.0f, env.stream));
  } else {
    gemm(env, CUBLAS_OP_T, CUBLAS_OP_N, o, n, i, w.data(), i, x.data(), i, y.data(), o, op);
  }
  if (has_bias) TS_CUDA_CHECK(kernels::add_channel_bias(y.data(), bias->data(), n, o, 1, env.stream));
  return y;
}

Tensor CudaBackend::linear_backward_data(const Tensor& dy, const Tensor& w) {
  const char* op = "linear_backward_data";
  check_2d(dy, device_, op, "dy");
  check_2d(w, device_, op, "w");
  const int64_t n = dy.size(0), o = dy.size(1), i = w.size(1);
  if (w.size(0) != o) {
    throw std::invalid_argument("linear_backward_data: dy " + shape_str(dy.shape()) + " and w " + shape_str(w.shape()));
  }
  Env env(*impl_);
  Tensor dx = Tensor::empty({n, i}, dy.device());
  if (n * i == 0) return dx;
  if (o == 0) {
    TS_CUDA_CHECK(kernels::fill(dx.data(), n * i, 0.0f, env.stream));
  } else {
    gemm(env, CUBLAS_OP_N, CUBLAS_OP_N, i, n, o, w.data(), i, dy.data(), o, dx.data(), i, op);
  }
  return dx;
}

WeightGrads CudaBackend::linear_backward_weights(const Tensor& x, const Tensor& dy, bool bias) {
  const char* op = "linear_backward_weights";
  check_2d(x, device_, op, "x");
  check_2d(dy, device_, op, "dy");
  const int64_t n = x.size(0), i = x.size(1), o = dy.size(1);
  if (dy.size(0) != n) {
    throw std::invalid_argument("linear_backward_weights: x " + shape_str(x.shape()) + " and dy " +
                                shape_str(dy.shape()));
  }
  Env env(*impl_);
  WeightGrads r;
  r.dw = Tensor::empty({o, i}, x.device());
  if (o * i > 0) {
    if (n == 0) {
      TS_CUDA_CHECK(kernels::fill(r.dw.data(), o * i, 0.0f, env.stream));
    } else {
      gemm(env, CUBLAS_OP_N, CUBLAS_OP_T, i, o, n, x.data(), i, dy.data(), o, r.dw.data(), i, op);
    }
  }
  if (bias) {
    r.dbias = Tensor::empty({o}, x.device());
    TS_CUDA_CHECK(kernels::column_sums(dy.data(), n, o, r.dbias.data(), env.stream));
  }
  return r;
}

}  // namespace ts::engine::cuda
