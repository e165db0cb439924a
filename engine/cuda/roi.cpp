// The RoI family on the GPU: RoIAlign and RoIPool (kernels in roi.cu). Checks follow the CPU
// backend's (cpu/roi.cpp), so an op fails the same way on either device.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/backend_checks.h"
#include "engine/cuda/cuda_common.h"
#include "engine/cuda/roi_kernels.h"

namespace ts::engine::cuda {

namespace {

// rois [R, 5] with integer batch indices in [0, batch), checked on the host.
void check_rois(const Tensor& rois, int64_t batch, int device, const char* op) {
  check_on(rois, device, op, "rois");
  checks::check_rois_shape(rois, op);
  const std::vector<float> r = to_host(rois, device);
  checks::check_roi_batches(r.data(), rois.size(0), batch, op);
}

using checks::check_pooled;

kernels::RoiGeom roi_geom(int64_t n_rois, const Shape& x_shape, int64_t pooled_h, int64_t pooled_w, float spatial_scale,
                          int64_t sampling_ratio, bool aligned, const char* op) {
  kernels::RoiGeom g;
  g.rois = n_rois;
  g.channels = x_shape[1];
  g.height = to_int(x_shape[2], op, "height");
  g.width = to_int(x_shape[3], op, "width");
  to_int(x_shape[2] * x_shape[3], op, "plane size");
  g.pooled_h = to_int(pooled_h, op, "pooled height");
  g.pooled_w = to_int(pooled_w, op, "pooled width");
  g.spatial_scale = spatial_scale;
  g.sampling_ratio = sampling_ratio > 0 ? to_int(sampling_ratio, op, "sampling ratio") : 0;
  g.aligned = aligned;
  return g;
}

}  // namespace

Tensor CudaBackend::roi_align_forward(const Tensor& x_in, const Tensor& rois_in, int64_t pooled_h, int64_t pooled_w,
                                      float spatial_scale, int64_t sampling_ratio, bool aligned) {
  const char* op = "roi_align";
  check_on(x_in, device_, op, "input");
  if (x_in.dim() != 4) fail(op, "input must be [N, C, H, W], got " + shape_str(x_in.shape()));
  check_pooled(pooled_h, pooled_w, spatial_scale, op);
  check_on(rois_in, device_, op, "rois");
  const Tensor x = as_plain(*this, x_in);
  const Tensor rois = as_plain(*this, rois_in);
  check_rois(rois, x.size(0), device_, op);
  const auto g = roi_geom(rois.size(0), x.shape(), pooled_h, pooled_w, spatial_scale, sampling_ratio, aligned, op);
  Env env(*impl_);
  Tensor y = Tensor::empty({g.rois, g.channels, pooled_h, pooled_w}, x.device());
  TS_CUDA_CHECK(kernels::roi_align_forward(x.data(), rois.data(), g, y.data(), env.stream));
  return y;
}

Tensor CudaBackend::roi_align_backward(const Tensor& dy_in, const Tensor& rois_in, const Shape& x_shape,
                                       float spatial_scale, int64_t sampling_ratio, bool aligned) {
  const char* op = "roi_align_backward";
  check_on(dy_in, device_, op, "dy");
  check_on(rois_in, device_, op, "rois");
  if (x_shape.size() != 4) fail(op, "x_shape must be [N, C, H, W], got " + shape_str(x_shape));
  const Tensor dy = as_plain(*this, dy_in);
  const Tensor rois = as_plain(*this, rois_in);
  check_rois(rois, x_shape[0], device_, op);
  const int64_t n_rois = rois.size(0);
  if (dy.dim() != 4 || dy.size(0) != n_rois || dy.size(1) != x_shape[1]) {
    fail(op, "dy " + shape_str(dy.shape()) + " does not match " + std::to_string(n_rois) + " rois and input " +
                 shape_str(x_shape));
  }
  check_pooled(dy.size(2), dy.size(3), spatial_scale, op);
  const auto g = roi_geom(n_rois, x_shape, dy.size(2), dy.size(3), spatial_scale, sampling_ratio, aligned, op);
  Tensor dx = Tensor::zeros(x_shape, dy.device());
  Env env(*impl_);
  TS_CUDA_CHECK(kernels::roi_align_backward(dy.data(), rois.data(), g, dx.data(), env.stream));
  return dx;
}

PoolResult CudaBackend::roi_pool_forward(const Tensor& x_in, const Tensor& rois_in, int64_t pooled_h, int64_t pooled_w,
                                         float spatial_scale) {
  const char* op = "roi_pool";
  check_on(x_in, device_, op, "input");
  if (x_in.dim() != 4) fail(op, "input must be [N, C, H, W], got " + shape_str(x_in.shape()));
  check_pooled(pooled_h, pooled_w, spatial_scale, op);
  check_on(rois_in, device_, op, "rois");
  const Tensor x = as_plain(*this, x_in);
  const Tensor rois = as_plain(*this, rois_in);
  check_rois(rois, x.size(0), device_, op);
  const auto g = roi_geom(rois.size(0), x.shape(), pooled_h, pooled_w, spatial_scale, 0, false, op);
  Env env(*impl_);
  PoolResult res;
  res.y = Tensor::empty({g.rois, g.channels, pooled_h, pooled_w}, x.device());
  res.workspace = Tensor::empty({g.rois, g.channels, pooled_h, pooled_w}, x.device(), Layout::plain(),
                                vocabulary::Category::workspace);
  TS_CUDA_CHECK(kernels::roi_pool_forward(x.data(), rois.data(), g, res.y.data(), res.workspace.data(), env.stream));
  return res;
}

Tensor CudaBackend::roi_pool_backward(const Tensor& dy_in, const Tensor& argmax, const Tensor& rois_in,
                                      const Shape& x_shape) {
  const char* op = "roi_pool_backward";
  check_on(dy_in, device_, op, "dy");
  check_on(argmax, device_, op, "argmax");
  check_on(rois_in, device_, op, "rois");
  if (x_shape.size() != 4) fail(op, "x_shape must be [N, C, H, W], got " + shape_str(x_shape));
  const Tensor dy = as_plain(*this, dy_in);
  const Tensor rois = as_plain(*this, rois_in);
  check_rois(rois, x_shape[0], device_, op);
  const int64_t n_rois = rois.size(0);
  if (dy.dim() != 4 || dy.size(0) != n_rois || dy.size(1) != x_shape[1] || argmax.shape() != dy.shape()) {
    fail(op, "dy " + shape_str(dy.shape()) + " / argmax " + shape_str(argmax.shape()) + " do not match " +
                 std::to_string(n_rois) + " rois and input " + shape_str(x_shape));
  }
  const auto g = roi_geom(n_rois, x_shape, dy.size(2), dy.size(3), 1.0f, 0, false, op);
  const Tensor arg = as_plain(*this, argmax);
  Tensor dx = Tensor::zeros(x_shape, dy.device());
  Env env(*impl_);
  TS_CUDA_CHECK(kernels::roi_pool_backward(dy.data(), arg.data(), rois.data(), g, dx.data(), env.stream));
  return dx;
}

}  // namespace ts::engine::cuda
