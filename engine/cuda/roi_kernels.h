#pragma once
// Internal to engine/cuda/: launchers of roi.cu. Each queues its work on `stream` and returns
// the launch's error for the caller's TS_CUDA_CHECK; pointers are device pointers.
#include <cuda_runtime_api.h>
#include <cstdint>

namespace ts::engine::cuda::kernels {

struct RoiGeom {
  int64_t rois = 0, channels = 0;
  int height = 0, width = 0, pooled_h = 0, pooled_w = 0;
  float spatial_scale = 1.0f;
  int sampling_ratio = 0;
  bool aligned = false;
};

// x [N, C, H, W] plain, rois [R, 5] -> y [R, C, ph, pw].
cudaError_t roi_align_forward(const float* x, const float* rois, const RoiGeom& g, float* y, cudaStream_t s);

// dx (zeroed by the caller) += the adjoint of roi_align_forward applied to dy (atomic adds).
cudaError_t roi_align_backward(const float* dy, const float* rois, const RoiGeom& g, float* dx, cudaStream_t s);

// y and argmax (flat h * W + w as fp32, -1 for an empty bin).
cudaError_t roi_pool_forward(const float* x, const float* rois, const RoiGeom& g, float* y, float* argmax,
                             cudaStream_t s);

// dx (zeroed by the caller) += dy at each argmax (atomic adds).
cudaError_t roi_pool_backward(const float* dy, const float* argmax, const float* rois, const RoiGeom& g, float* dx,
                              cudaStream_t s);

}  // namespace ts::engine::cuda::kernels
