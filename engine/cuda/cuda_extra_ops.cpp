// Nearest upsampling on the GPU (kernels in kernels_extra.cu); the other families have files of
// their own. Argument checks and error messages follow the CPU backend's (cpu_backend.cpp), so
// an op fails the same way on either device.
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

// ---------------------------------------------------------------- permute

}  // namespace ts::engine::cuda
