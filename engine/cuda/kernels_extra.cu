// Kernels of the later Backend methods: tanh, nearest upsampling, the gradient penalty, Adam,
// and the detection ops (RoIAlign, RoIPool, smooth-L1, row gather/scatter, permute). This file
// is compiled with --fmad=false (engine/CMakeLists.txt): the arithmetic is written in the CPU
// backend's order and rounds as it does, which keeps RoIAlign's sample positions (and so
// which cells are read) the same on both backends.
#include <cfloat>
#include <cmath>

#include "engine/cuda/kernel_grid.cuh"
#include "engine/cuda/kernels.h"

namespace ts::engine::cuda::kernels {

namespace {

constexpr int kSumBlocks = 1024;  // as in kernels.cu

__device__ double block_sum(double v, double* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) shared[threadIdx.x] += shared[threadIdx.x + s];
    __syncthreads();
  }
  const double r = shared[0];
  __syncthreads();
  return r;
}

int sum_blocks(int64_t n) {
  int64_t b = (n + int64_t{kThreads} * 4 - 1) / (int64_t{kThreads} * 4);
  if (b < 1) b = 1;
  if (b > kSumBlocks) b = kSumBlocks;
  return static_cast<int>(b);
}

// out[0] = (sum of count doubles) * scale, or / divisor when divisor > 0.
__global__ void finish_sum_kernel(const double* partials, int64_t count, double scale, double divisor, float* out) {
  __shared__ double shared[kThreads];
  double acc = 0.0;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) acc += partials[i];
  const double total = block_sum(acc, shared);
  if (threadIdx.x == 0) out[0] = static_cast<float>(divisor > 0.0 ? total / divisor : total * scale);
}

// ------------------------------------------------------------------ tanh, upsampling

__global__ void tanh_forward_kernel(const float* x, float* y, int64_t n) {
  for (int64_t i = global_index(); i < n; i += grid_stride()) y[i] = tanhf(x[i]);
}

__global__ void tanh_backward_kernel(const float* dy, const float* y, float* dx, int64_t n) {
  for (int64_t i = global_index(); i < n; i += grid_stride()) dx[i] = dy[i] * (1.0f - y[i] * y[i]);
}

__global__ void upsample_forward_kernel(const float* x, int64_t outer, int64_t h, int64_t w, int64_t vec, int64_t f,
                                        float* y) {
  const int64_t oh = h * f, ow = w * f;
  const int64_t total = outer * oh * ow * vec;
  for (int64_t i = global_index(); i < total; i += grid_stride()) {
    const int64_t k = i % vec;
    int64_t t = i / vec;
    const int64_t j = t % ow;
    t /= ow;
    const int64_t r = t % oh;
    const int64_t o = t / oh;
    y[i] = x[((o * h + r / f) * w + j / f) * vec + k];
  }
}

__global__ void upsample_backward_kernel(const float* dy, int64_t outer, int64_t h, int64_t w, int64_t vec, int64_t f,
                                         float* dx) {
  const int64_t oh = h * f, ow = w * f;
  const int64_t total = outer * h * w * vec;
  for (int64_t i = global_index(); i < total; i += grid_stride()) {
    const int64_t k = i % vec;
    int64_t t = i / vec;
    const int64_t j = t % w;
    t /= w;
    const int64_t r = t % h;
    const int64_t o = t / h;
    float acc = 0.0f;
    for (int64_t a = 0; a < f; ++a) {
      const float* row = dy + ((o * oh + r * f + a) * ow + j * f) * vec + k;
      for (int64_t b = 0; b < f; ++b) acc += row[b * vec];
    }
    dx[i] = acc;
  }
}

// ------------------------------------------------------------------ gradient penalty, Adam

__global__ void norm_rows_kernel(const float* x, int64_t d, float target, float* norms, double* terms) {
  __shared__ double shared[kThreads];
  const int64_t row = blockIdx.x;
  const float* p = x + row * d;
  double ss = 0.0;
  for (int64_t k = threadIdx.x; k < d; k += blockDim.x) ss += static_cast<double>(p[k]) * p[k];
  ss = block_sum(ss, shared);
  if (threadIdx.x == 0) {
    const double norm = sqrt(ss);
    norms[row] = static_cast<float>(norm);
    terms[row] = (norm - target) * (norm - target);
  }
}

__global__ void norm_penalty_backward_kernel(const float* dloss, const float* x, const float* norms, int64_t n,
                                             int64_t d, float target, float* dx) {
  const float g = dloss[0];
  const int64_t total = n * d;
  for (int64_t i = global_index(); i < total; i += grid_stride()) {
    const float nm = norms[i / d];
    // The norm's gradient is undefined at 0; 0 there, as on the CPU and in PyTorch.
    const float coef = nm > 0.0f ? g * 2.0f * (nm - target) / (static_cast<float>(n) * nm) : 0.0f;
    dx[i] = coef * x[i];
  }
}

// ------------------------------------------------------------------ RoIAlign

struct Sample {
  int idx[4];
  float w[4];
};

// One bilinear sample, written as the CPU backend's (cpu_detection.cpp) so both read the same
// cells with the same weights.
__device__ Sample bilinear(float y, float x, int height, int width) {
  Sample s{{0, 0, 0, 0}, {0.0f, 0.0f, 0.0f, 0.0f}};
  // Points more than one cell outside the map contribute nothing.
  if (!isfinite(y) || !isfinite(x) || y < -1.0f || y > static_cast<float>(height) || x < -1.0f ||
      x > static_cast<float>(width)) {
    return s;
  }
  y = fmaxf(y, 0.0f);
  x = fmaxf(x, 0.0f);
  int y_low = static_cast<int>(y), x_low = static_cast<int>(x);
  int y_high, x_high;
  if (y_low >= height - 1) {
    y_high = y_low = height - 1;
    y = static_cast<float>(y_low);
  } else {
    y_high = y_low + 1;
  }
  if (x_low >= width - 1) {
    x_high = x_low = width - 1;
    x = static_cast<float>(x_low);
  } else {
    x_high = x_low + 1;
  }
  const float ly = y - static_cast<float>(y_low), lx = x - static_cast<float>(x_low);
  const float hy = 1.0f - ly, hx = 1.0f - lx;
  s.idx[0] = y_low * width + x_low;
  s.idx[1] = y_low * width + x_high;
  s.idx[2] = y_high * width + x_low;
  s.idx[3] = y_high * width + x_high;
  s.w[0] = hy * hx;
  s.w[1] = hy * lx;
  s.w[2] = ly * hx;
  s.w[3] = ly * lx;
  return s;
}

struct RoiBox {
  int64_t batch;
  float y0, x0, bin_h, bin_w;
  int grid_h, grid_w;
  float inv_count;
};

__device__ RoiBox roi_box(const float* roi, const RoiGeom& g) {
  RoiBox b;
  b.batch = static_cast<int64_t>(roi[0]);
  const float offset = g.aligned ? 0.5f : 0.0f;
  b.x0 = roi[1] * g.spatial_scale - offset;
  b.y0 = roi[2] * g.spatial_scale - offset;
  float roi_w = roi[3] * g.spatial_scale - offset - b.x0, roi_h = roi[4] * g.spatial_scale - offset - b.y0;
  if (!g.aligned) {
    roi_w = fmaxf(roi_w, 1.0f);
    roi_h = fmaxf(roi_h, 1.0f);
  }
  b.bin_h = roi_h / static_cast<float>(g.pooled_h);
  b.bin_w = roi_w / static_cast<float>(g.pooled_w);
  // ceil of the bin size, at least 1 (and at most INT_MAX, where the CPU would not finish either).
  auto adaptive = [](float v) {
    if (!isfinite(v)) return 1;
    const float c = ceilf(v);
    return c < 1.0f ? 1 : (c > 2147483647.0f ? 2147483647 : static_cast<int>(c));
  };
  b.grid_h = g.sampling_ratio > 0 ? g.sampling_ratio : adaptive(b.bin_h);
  b.grid_w = g.sampling_ratio > 0 ? g.sampling_ratio : adaptive(b.bin_w);
  const int64_t per_bin = static_cast<int64_t>(b.grid_h) * b.grid_w;
  b.inv_count = 1.0f / static_cast<float>(per_bin > 1 ? per_bin : 1);
  return b;
}

__device__ __forceinline__ float sample_y(const RoiBox& b, int ph, int iy) {
  return b.y0 + static_cast<float>(ph) * b.bin_h +
         (static_cast<float>(iy) + 0.5f) * b.bin_h / static_cast<float>(b.grid_h);
}
__device__ __forceinline__ float sample_x(const RoiBox& b, int pw, int ix) {
  return b.x0 + static_cast<float>(pw) * b.bin_w +
         (static_cast<float>(ix) + 0.5f) * b.bin_w / static_cast<float>(b.grid_w);
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
    const RoiBox b = roi_box(rois + r * 5, g);
    const float* src = x + (b.batch * g.channels + c) * plane;
    float acc = 0.0f;
    for (int iy = 0; iy < b.grid_h; ++iy) {
      const float yy = sample_y(b, ph, iy);
      for (int ix = 0; ix < b.grid_w; ++ix) {
        const Sample s = bilinear(yy, sample_x(b, pw, ix), g.height, g.width);
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
    const RoiBox b = roi_box(rois + r * 5, g);
    float* dst = dx + (b.batch * g.channels + c) * plane;
    const float gb = dy[i] * b.inv_count;
    for (int iy = 0; iy < b.grid_h; ++iy) {
      const float yy = sample_y(b, ph, iy);
      for (int ix = 0; ix < b.grid_w; ++ix) {
        const Sample s = bilinear(yy, sample_x(b, pw, ix), g.height, g.width);
        for (int q = 0; q < 4; ++q) atomicAdd(dst + s.idx[q], s.w[q] * gb);
      }
    }
  }
}

// ------------------------------------------------------------------ RoIPool

// Fast R-CNN's rounding of a coordinate to a cell, as the CPU backend.
__device__ __forceinline__ int64_t roi_cell(float v, float scale) {
  const float s = roundf(v * scale);
  return isfinite(s) ? static_cast<int64_t>(fminf(fmaxf(s, -1e9f), 1e9f)) : int64_t{0};
}

__device__ __forceinline__ int64_t clamp64(int64_t v, int64_t lo, int64_t hi) {
  return v < lo ? lo : (v > hi ? hi : v);
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
    const int64_t x1 = roi_cell(roi[1], g.spatial_scale), y1 = roi_cell(roi[2], g.spatial_scale);
    const int64_t x2 = roi_cell(roi[3], g.spatial_scale), y2 = roi_cell(roi[4], g.spatial_scale);
    const int64_t rh = y2 - y1 + 1 > 1 ? y2 - y1 + 1 : 1, rw = x2 - x1 + 1 > 1 ? x2 - x1 + 1 : 1;
    const float bin_h = static_cast<float>(rh) / static_cast<float>(g.pooled_h);
    const float bin_w = static_cast<float>(rw) / static_cast<float>(g.pooled_w);
    const int64_t hs = clamp64(static_cast<int64_t>(floorf(static_cast<float>(ph) * bin_h)) + y1, 0, height);
    const int64_t he = clamp64(static_cast<int64_t>(ceilf(static_cast<float>(ph + 1) * bin_h)) + y1, 0, height);
    const int64_t ws = clamp64(static_cast<int64_t>(floorf(static_cast<float>(pw) * bin_w)) + x1, 0, width);
    const int64_t we = clamp64(static_cast<int64_t>(ceilf(static_cast<float>(pw + 1) * bin_w)) + x1, 0, width);
    if (he <= hs || we <= ws) {
      y[i] = 0.0f;
      argmax[i] = -1.0f;
      continue;
    }
    const float* src = x + (n * g.channels + c) * plane;
    float best = -INFINITY;
    int64_t arg = hs * width + ws;
    for (int64_t h = hs; h < he; ++h) {
      for (int64_t w = ws; w < we; ++w) {
        const float v = src[h * width + w];
        if (v > best) {
          best = v;
          arg = h * width + w;
        }
      }
    }
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

// ------------------------------------------------------------------ smooth L1

__global__ void smooth_l1_partials_kernel(const float* x, const float* t, const float* w, int64_t n, double beta,
                                          double* partials) {
  __shared__ double shared[kThreads];
  const double half_beta = 0.5 * beta;
  double acc = 0.0;
  for (int64_t i = global_index(); i < n; i += grid_stride()) {
    const double d = fabs(static_cast<double>(x[i]) - t[i]);
    const double l = d < beta ? 0.5 * d * d / beta : d - half_beta;
    acc += w ? w[i] * l : l;
  }
  const double total = block_sum(acc, shared);
  if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

__global__ void smooth_l1_backward_kernel(const float* dloss, const float* x, const float* t, const float* w, int64_t n,
                                          float beta, float scale, float* dx) {
  const float g = dloss[0] * scale;
  for (int64_t i = global_index(); i < n; i += grid_stride()) {
    const float d = x[i] - t[i];
    const float dl = fabsf(d) < beta ? d / beta : static_cast<float>((d > 0.0f) - (d < 0.0f));
    dx[i] = g * (w ? w[i] : 1.0f) * dl;
  }
}

// ------------------------------------------------------------------ rows, permute

__global__ void index_select_rows_kernel(const float* x, const float* index, int64_t m, int64_t k, float* y) {
  const int64_t total = m * k;
  for (int64_t i = global_index(); i < total; i += grid_stride()) {
    const int64_t row = static_cast<int64_t>(index[i / k]);
    y[i] = x[row * k + i % k];
  }
}

__global__ void index_add_rows_kernel(const float* src, const float* index, int64_t m, int64_t k, float* y) {
  for (int64_t j = global_index(); j < k; j += grid_stride()) {
    for (int64_t i = 0; i < m; ++i) {
      const int64_t row = static_cast<int64_t>(index[i]);
      y[row * k + j] += src[i * k + j];
    }
  }
}

__global__ void permute_kernel(const float* x, PermuteGeom g, int64_t n, float* y) {
  for (int64_t i = global_index(); i < n; i += grid_stride()) {
    int64_t rem = i, src = 0;
    for (int d = g.rank - 1; d >= 0; --d) {
      const int64_t sz = g.out_shape[d];
      src += (rem % sz) * g.src_strides[d];
      rem /= sz;
    }
    y[i] = x[src];
  }
}

}  // namespace

// ------------------------------------------------------------------ launchers

cudaError_t tanh_forward(const float* x, float* y, int64_t n, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  tanh_forward_kernel<<<blocks_for(n), kThreads, 0, s>>>(x, y, n);
  return cudaGetLastError();
}

cudaError_t tanh_backward(const float* dy, const float* y, float* dx, int64_t n, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  tanh_backward_kernel<<<blocks_for(n), kThreads, 0, s>>>(dy, y, dx, n);
  return cudaGetLastError();
}

cudaError_t upsample_nearest_forward(const float* x, int64_t outer, int64_t h, int64_t w, int64_t vec, int64_t f,
                                     float* y, cudaStream_t s) {
  const int64_t total = outer * h * f * w * f * vec;
  if (total <= 0) return cudaSuccess;
  upsample_forward_kernel<<<blocks_for(total), kThreads, 0, s>>>(x, outer, h, w, vec, f, y);
  return cudaGetLastError();
}

cudaError_t upsample_nearest_backward(const float* dy, int64_t outer, int64_t h, int64_t w, int64_t vec, int64_t f,
                                      float* dx, cudaStream_t s) {
  const int64_t total = outer * h * w * vec;
  if (total <= 0) return cudaSuccess;
  upsample_backward_kernel<<<blocks_for(total), kThreads, 0, s>>>(dy, outer, h, w, vec, f, dx);
  return cudaGetLastError();
}

cudaError_t norm_penalty_forward(const float* x, int64_t n, int64_t d, float target, float* norms, double* terms,
                                 float* loss, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  norm_rows_kernel<<<static_cast<unsigned>(n), kThreads, 0, s>>>(x, d, target, norms, terms);
  cudaError_t rc = cudaGetLastError();
  if (rc != cudaSuccess) return rc;
  finish_sum_kernel<<<1, kThreads, 0, s>>>(terms, n, 1.0, static_cast<double>(n), loss);
  return cudaGetLastError();
}

cudaError_t norm_penalty_backward(const float* dloss, const float* x, const float* norms, int64_t n, int64_t d,
                                  float target, float* dx, cudaStream_t s) {
  const int64_t total = n * d;
  if (total <= 0) return cudaSuccess;
  norm_penalty_backward_kernel<<<blocks_for(total), kThreads, 0, s>>>(dloss, x, norms, n, d, target, dx);
  return cudaGetLastError();
}

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

cudaError_t smooth_l1_forward(const float* x, const float* t, const float* w, int64_t n, float beta, float scale,
                              double* partials, float* out, cudaStream_t s) {
  const int blocks = sum_blocks(n);
  smooth_l1_partials_kernel<<<blocks, kThreads, 0, s>>>(x, t, w, n < 0 ? 0 : n, static_cast<double>(beta), partials);
  cudaError_t rc = cudaGetLastError();
  if (rc != cudaSuccess) return rc;
  finish_sum_kernel<<<1, kThreads, 0, s>>>(partials, blocks, static_cast<double>(scale), 0.0, out);
  return cudaGetLastError();
}

cudaError_t smooth_l1_backward(const float* dloss, const float* x, const float* t, const float* w, int64_t n,
                               float beta, float scale, float* dx, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  smooth_l1_backward_kernel<<<blocks_for(n), kThreads, 0, s>>>(dloss, x, t, w, n, beta, scale, dx);
  return cudaGetLastError();
}

cudaError_t index_select_rows(const float* x, const float* index, int64_t m, int64_t k, float* y, cudaStream_t s) {
  const int64_t total = m * k;
  if (total <= 0) return cudaSuccess;
  index_select_rows_kernel<<<blocks_for(total), kThreads, 0, s>>>(x, index, m, k, y);
  return cudaGetLastError();
}

cudaError_t index_add_rows(const float* src, const float* index, int64_t m, int64_t k, float* y, cudaStream_t s) {
  if (m <= 0 || k <= 0) return cudaSuccess;
  index_add_rows_kernel<<<blocks_for(k), kThreads, 0, s>>>(src, index, m, k, y);
  return cudaGetLastError();
}

cudaError_t permute(const float* x, const PermuteGeom& g, int64_t n, float* y, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  permute_kernel<<<blocks_for(n), kThreads, 0, s>>>(x, g, n, y);
  return cudaGetLastError();
}

}  // namespace ts::engine::cuda::kernels
