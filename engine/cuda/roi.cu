// The RoI family's kernels: RoIAlign (its sampling from numerics/roi.h, as the CPU's) and
// RoIPool; backward passes add into dx with atomics.
#include <cfloat>
#include <cmath>

#include "engine/cuda/kernel_grid.cuh"
#include "engine/cuda/roi_kernels.h"
#include "engine/numerics/roi.h"

namespace ts::engine::cuda::kernels {

namespace {

// RoIAlign's sampling: numerics/roi.h, shared with the CPU backend.
__device__ __forceinline__ numerics::RoiBox roi_box(const float* roi, const RoiGeom& g) {
  return numerics::roi_box(roi, g.spatial_scale, g.aligned, g.pooled_h, g.pooled_w, g.sampling_ratio);
}

__global__ void roi_align_forward_kernel(const float* x, const float* rois, RoiGeom g, float* y) {
  const int64_t bins = static_cast<int64_t>(g.pooled_h) * g.pooled_w;
  const int64_t total = g.rois * g.channels * bins;
  const int64_t plane = static_cast<int64_t>(g.height) * g.width;
  for (int64_t i = global_index(); i < total; i += grid_stride()) {
    const int pw = static_cast<int>(i % g.pooled_w);
    const int ph = static_cast<int>((i / g.pooled_w) % g.pooled_h);
    const int64_t c = (i / bins) % g.channels;
    const int64_t r = i / (bins * g.channels);
    const numerics::RoiBox b = roi_box(rois + r * 5, g);
    const float* src = x + (b.batch * g.channels + c) * plane;
    float acc = 0.0f;
    for (int iy = 0; iy < b.grid_h; ++iy) {
      const float yy = numerics::sample_y(b, ph, iy);
      for (int ix = 0; ix < b.grid_w; ++ix) {
        const numerics::BilinearSample s =
            numerics::bilinear_sample(yy, numerics::sample_x(b, pw, ix), g.height, g.width);
        acc += s.w[0] * src[s.idx[0]] + s.w[1] * src[s.idx[1]] + s.w[2] * src[s.idx[2]] + s.w[3] * src[s.idx[3]];
      }
    }
    y[i] = acc * b.inv_count;
  }
}

__global__ void roi_align_backward_kernel(const float* dy, const float* rois, RoiGeom g, float* dx) {
  const int64_t bins = static_cast<int64_t>(g.pooled_h) * g.pooled_w;
  const int64_t total = g.rois * g.channels * bins;
  const int64_t plane = static_cast<int64_t>(g.height) * g.width;
  for (int64_t i = global_index(); i < total; i += grid_stride()) {
    const int pw = static_cast<int>(i % g.pooled_w);
    const int ph = static_cast<int>((i / g.pooled_w) % g.pooled_h);
    const int64_t c = (i / bins) % g.channels;
    const int64_t r = i / (bins * g.channels);
    const numerics::RoiBox b = roi_box(rois + r * 5, g);
    float* dst = dx + (b.batch * g.channels + c) * plane;
    const float gb = dy[i] * b.inv_count;
    for (int iy = 0; iy < b.grid_h; ++iy) {
      const float yy = numerics::sample_y(b, ph, iy);
      for (int ix = 0; ix < b.grid_w; ++ix) {
        const numerics::BilinearSample s =
            numerics::bilinear_sample(yy, numerics::sample_x(b, pw, ix), g.height, g.width);
        for (int q = 0; q < 4; ++q) atomicAdd(dst + s.idx[q], s.w[q] * gb);
      }
    }
  }
}

__global__ void roi_pool_forward_kernel(const float* x, const float* rois, RoiGeom g, float* y, float* argmax) {
  const int64_t bins = static_cast<int64_t>(g.pooled_h) * g.pooled_w;
  const int64_t total = g.rois * g.channels * bins;
  const int64_t height = g.height, width = g.width, plane = height * width;
  for (int64_t i = global_index(); i < total; i += grid_stride()) {
    const int pw = static_cast<int>(i % g.pooled_w);
    const int ph = static_cast<int>((i / g.pooled_w) % g.pooled_h);
    const int64_t c = (i / bins) % g.channels;
    const int64_t r = i / (bins * g.channels);
    const float* roi = rois + r * 5;
    const int64_t n = static_cast<int64_t>(roi[0]);
    const numerics::RoiPoolBox box = numerics::roi_pool_box(roi, g.spatial_scale, g.pooled_h, g.pooled_w);
    const auto [hs, he] = numerics::roi_pool_range(ph, box.bin_h, box.y1, height);
    const auto [ws, we] = numerics::roi_pool_range(pw, box.bin_w, box.x1, width);
    if (he <= hs || we <= ws) {
      y[i] = 0.0f;
      argmax[i] = -1.0f;
      continue;
    }
    const float* src = x + (n * g.channels + c) * plane;
    const int64_t arg = numerics::roi_pool_argmax(src, width, hs, he, ws, we);
    y[i] = src[arg];
    argmax[i] = static_cast<float>(arg);
  }
}

__global__ void roi_pool_backward_kernel(const float* dy, const float* argmax, const float* rois, RoiGeom g,
                                         float* dx) {
  const int64_t bins = static_cast<int64_t>(g.pooled_h) * g.pooled_w;
  const int64_t total = g.rois * g.channels * bins;
  const int64_t plane = static_cast<int64_t>(g.height) * g.width;
  for (int64_t i = global_index(); i < total; i += grid_stride()) {
    const int64_t c = (i / bins) % g.channels;
    const int64_t r = i / (bins * g.channels);
    const int64_t n = static_cast<int64_t>(rois[r * 5]);
    const int64_t a = static_cast<int64_t>(argmax[i]);
    if (a >= 0 && a < plane) atomicAdd(dx + (n * g.channels + c) * plane + a, dy[i]);
  }
}

}  // namespace

cudaError_t roi_align_forward(const float* x, const float* rois, const RoiGeom& g, float* y, cudaStream_t s) {
  const int64_t total = g.rois * g.channels * g.pooled_h * g.pooled_w;
  if (total <= 0) return cudaSuccess;
  roi_align_forward_kernel<<<blocks_for(total), kThreads, 0, s>>>(x, rois, g, y);
  return cudaGetLastError();
}

cudaError_t roi_align_backward(const float* dy, const float* rois, const RoiGeom& g, float* dx, cudaStream_t s) {
  const int64_t total = g.rois * g.channels * g.pooled_h * g.pooled_w;
  if (total <= 0) return cudaSuccess;
  roi_align_backward_kernel<<<blocks_for(total), kThreads, 0, s>>>(dy, rois, g, dx);
  return cudaGetLastError();
}

cudaError_t roi_pool_forward(const float* x, const float* rois, const RoiGeom& g, float* y, float* argmax,
                             cudaStream_t s) {
  const int64_t total = g.rois * g.channels * g.pooled_h * g.pooled_w;
  if (total <= 0) return cudaSuccess;
  roi_pool_forward_kernel<<<blocks_for(total), kThreads, 0, s>>>(x, rois, g, y, argmax);
  return cudaGetLastError();
}

cudaError_t roi_pool_backward(const float* dy, const float* argmax, const float* rois, const RoiGeom& g, float* dx,
                              cudaStream_t s) {
  const int64_t total = g.rois * g.channels * g.pooled_h * g.pooled_w;
  if (total <= 0) return cudaSuccess;
  roi_pool_backward_kernel<<<blocks_for(total), kThreads, 0, s>>>(dy, argmax, rois, g, dx);
  return cudaGetLastError();
}

}  // namespace ts::engine::cuda::kernels
