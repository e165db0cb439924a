// The pool family on the GPU: max and average pooling (max pooling keeps argmax indices for
// backward, which receives no x) and nearest upsampling, on our kernels (pool.cu). Checks and
// messages follow the CPU backend's (cpu/pool.cpp).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/cuda/cuda_common.h"
#include "engine/cuda/pool_kernels.h"

namespace ts::engine::cuda {

namespace {

kernels::PoolGeom pool_geom(const Shape& x, const Pool2dParams& p, const char* op) {
  if (x.size() != 4) throw std::invalid_argument(std::string(op) + ": expected a 4-D input, got " + shape_str(x));
  if (p.kernel_h < 1 || p.kernel_w < 1 || p.stride_h < 1 || p.stride_w < 1 || p.pad_h < 0 || p.pad_w < 0 ||
      p.pad_h * 2 > p.kernel_h || p.pad_w * 2 > p.kernel_w) {
    throw std::invalid_argument(std::string(op) +
                                ": bad kernel/stride/padding (padding must be at most half the kernel)");
  }
  kernels::PoolGeom g;
  g.planes = x[0] * x[1];
  g.h = to_int(x[2], op, "height");
  g.w = to_int(x[3], op, "width");
  g.oh = to_int(conv_out_size(x[2], p.kernel_h, p.stride_h, p.pad_h, 1), op, "output height");
  g.ow = to_int(conv_out_size(x[3], p.kernel_w, p.stride_w, p.pad_w, 1), op, "output width");
  g.kh = to_int(p.kernel_h, op, "kernel");
  g.kw = to_int(p.kernel_w, op, "kernel");
  g.sh = to_int(p.stride_h, op, "stride");
  g.sw = to_int(p.stride_w, op, "stride");
  g.ph = to_int(p.pad_h, op, "padding");
  g.pw = to_int(p.pad_w, op, "padding");
  to_int(static_cast<int64_t>(g.h) * g.w, op, "plane size");  // argmax indices are int32
  return g;
}

Shape pool_out_shape(const Shape& x, const kernels::PoolGeom& g) { return {x[0], x[1], g.oh, g.ow}; }

void check_dy(const Tensor& dy, const Shape& want, const char* op) {
  if (dy.shape() != want) {
    throw std::invalid_argument(std::string(op) + ": dy " + shape_str(dy.shape()) + " does not match output " +
                                shape_str(want));
  }
}

// A 4-D tensor's storage as [outer][H][W][vec]: plain (N C, H, W, 1), channels-last
// (N, H, W, C), channel-blocked (N C/b, H, W, b), as the CPU backend sees it.
struct SpatialView {
  int64_t outer, h, w, vec;
};

SpatialView spatial_view(const Tensor& t, const char* op) {
  if (t.dim() != 4) fail(op, "needs [N, C, H, W], got " + shape_str(t.shape()));
  const int64_t n = t.size(0), c = t.size(1), h = t.size(2), w = t.size(3);
  switch (t.layout().kind) {
    case Layout::Kind::plain: return {n * c, h, w, 1};
    case Layout::Kind::channels_last: return {n, h, w, c};
    case Layout::Kind::channel_blocked: {
      const int64_t b = t.layout().block;
      return {n * ((c + b - 1) / b), h, w, b};
    }
    case Layout::Kind::weights_blocked: break;  // weights are not images
  }
  throw std::invalid_argument(std::string(op) + ": no spatial view of a " + t.layout().str() + " tensor");
}

void check_factor(int64_t factor, const char* op) {
  if (factor < 1) fail(op, "factor must be >= 1, got " + std::to_string(factor));
}

}  // namespace

PoolResult CudaBackend::max_pool2d_forward(const Tensor& x_in, const Pool2dParams& p) {
  const char* op = "max_pool2d";
  check_on(x_in, device_, op, "input");
  const kernels::PoolGeom g = pool_geom(x_in.shape(), p, op);
  const Tensor x = as_plain(*this, x_in);
  Env env(*impl_);
  PoolResult r;
  r.y = Tensor::empty(pool_out_shape(x.shape(), g), x.device());
  // int32 indices in the fp32 tensor's storage (same size); see cuda_backend.h.
  r.workspace = Tensor::empty({r.y.numel()}, x.device(), Layout::plain(), vocabulary::Category::workspace);
  TS_CUDA_CHECK(
      kernels::max_pool_forward(x.data(), g, r.y.data(), reinterpret_cast<int32_t*>(r.workspace.data()), env.stream));
  return r;
}

Tensor CudaBackend::max_pool2d_backward(const Tensor& dy_in, const Tensor& workspace, const Shape& x_shape,
                                        const Layout& x_layout, const Pool2dParams& p) {
  const char* op = "max_pool2d_backward";
  check_on(dy_in, device_, op, "dy");
  check_on(workspace, device_, op, "workspace");
  const kernels::PoolGeom g = pool_geom(x_shape, p, op);
  check_dy(dy_in, pool_out_shape(x_shape, g), op);
  if (workspace.numel() < dy_in.numel()) {
    throw std::invalid_argument("max_pool2d_backward: workspace too small for " + shape_str(x_shape));
  }
  const Tensor dy = as_plain(*this, dy_in);
  Tensor dx;
  {
    Env env(*impl_);
    dx = Tensor::empty(x_shape, dy.device());
    TS_CUDA_CHECK(kernels::max_pool_backward(dy.data(), reinterpret_cast<const int32_t*>(workspace.data()), g,
                                             dx.data(), env.stream));
  }
  return x_layout.is_plain() ? dx : to_layout(dx, x_layout);
}

Tensor CudaBackend::avg_pool2d_forward(const Tensor& x_in, const Pool2dParams& p) {
  const char* op = "avg_pool2d";
  check_on(x_in, device_, op, "input");
  const kernels::PoolGeom g = pool_geom(x_in.shape(), p, op);
  const Tensor x = as_plain(*this, x_in);
  Env env(*impl_);
  Tensor y = Tensor::empty(pool_out_shape(x.shape(), g), x.device());
  TS_CUDA_CHECK(kernels::avg_pool_forward(x.data(), g, p.count_include_pad, y.data(), env.stream));
  return y;
}

Tensor CudaBackend::avg_pool2d_backward(const Tensor& dy_in, const Shape& x_shape, const Layout& x_layout,
                                        const Pool2dParams& p) {
  const char* op = "avg_pool2d_backward";
  check_on(dy_in, device_, op, "dy");
  const kernels::PoolGeom g = pool_geom(x_shape, p, op);
  check_dy(dy_in, pool_out_shape(x_shape, g), op);
  const Tensor dy = as_plain(*this, dy_in);
  Tensor dx;
  {
    Env env(*impl_);
    dx = Tensor::empty(x_shape, dy.device());
    TS_CUDA_CHECK(kernels::avg_pool_backward(dy.data(), g, p.count_include_pad, dx.data(), env.stream));
  }
  return x_layout.is_plain() ? dx : to_layout(dx, x_layout);
}

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

}  // namespace ts::engine::cuda
