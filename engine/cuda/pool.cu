// The pool family's kernels: max pooling (argmax kept for backward), average pooling (padding
// counted or not) and nearest upsampling; backward passes gather, so no atomics.
#include <cfloat>
#include <cmath>

#include "engine/cuda/kernel_grid.cuh"
#include "engine/cuda/pool_kernels.h"

namespace ts::engine::cuda::kernels {

namespace {

__global__ void max_pool_forward_kernel(const float* x, PoolGeom g, float* y, int32_t* argmax) {
  const int64_t total = g.planes * g.oh * g.ow;
  for (int64_t i = global_index(); i < total; i += grid_stride()) {
    const int ow = static_cast<int>(i % g.ow);
    const int oh = static_cast<int>((i / g.ow) % g.oh);
    const int64_t plane = i / (static_cast<int64_t>(g.ow) * g.oh);
    const float* xp = x + plane * g.h * g.w;
    const int h0 = oh * g.sh - g.ph, w0 = ow * g.sw - g.pw;
    float best = -FLT_MAX;
    int idx = -1;
    for (int u = 0; u < g.kh; ++u) {
      const int hi = h0 + u;
      if (hi < 0 || hi >= g.h) continue;
      for (int v = 0; v < g.kw; ++v) {
        const int wi = w0 + v;
        if (wi < 0 || wi >= g.w) continue;
        const float val = xp[hi * g.w + wi];
        if (idx < 0 || val > best) {  // the first maximum in scan order wins (as oneDNN and PyTorch)
          best = val;
          idx = hi * g.w + wi;
        }
      }
    }
    y[i] = idx >= 0 ? best : 0.0f;
    argmax[i] = idx;
  }
}

// The output rows (or columns) whose windows cover input position `pos`.
__device__ __forceinline__ void covering(int pos, int pad, int k, int stride, int out, int& first, int& last) {
  const int p = pos + pad;
  first = p < k ? 0 : (p - k) / stride + 1;
  last = min(p / stride, out - 1);
}

__global__ void max_pool_backward_kernel(const float* dy, const int32_t* argmax, PoolGeom g, float* dx) {
  const int64_t total = g.planes * g.h * g.w;
  for (int64_t i = global_index(); i < total; i += grid_stride()) {
    const int wi = static_cast<int>(i % g.w);
    const int hi = static_cast<int>((i / g.w) % g.h);
    const int64_t plane = i / (static_cast<int64_t>(g.w) * g.h);
    const int64_t obase = plane * g.oh * g.ow;
    const int target = hi * g.w + wi;
    int oh0, oh1, ow0, ow1;
    covering(hi, g.ph, g.kh, g.sh, g.oh, oh0, oh1);
    covering(wi, g.pw, g.kw, g.sw, g.ow, ow0, ow1);
    float acc = 0.0f;
    for (int oh = oh0; oh <= oh1; ++oh) {
      for (int ow = ow0; ow <= ow1; ++ow) {
        const int64_t o = obase + static_cast<int64_t>(oh) * g.ow + ow;
        if (argmax[o] == target) acc += dy[o];
      }
    }
    dx[i] = acc;
  }
}

// PyTorch's divisor: with count_include_pad the window clipped to the padded input, otherwise
// the number of real input elements in it (the naive reference in tests/engine uses the same).
__device__ __forceinline__ int pool_divisor(const PoolGeom& g, int oh, int ow, bool include_pad) {
  const int h0 = oh * g.sh - g.ph, w0 = ow * g.sw - g.pw;
  if (include_pad) {
    const int he = min(h0 + g.kh, g.h + g.ph), we = min(w0 + g.kw, g.w + g.pw);
    return (he - h0) * (we - w0);
  }
  const int hs = max(h0, 0), ws = max(w0, 0);
  const int he = min(h0 + g.kh, g.h), we = min(w0 + g.kw, g.w);
  return (he - hs) * (we - ws);
}

__global__ void avg_pool_forward_kernel(const float* x, PoolGeom g, bool include_pad, float* y) {
  const int64_t total = g.planes * g.oh * g.ow;
  for (int64_t i = global_index(); i < total; i += grid_stride()) {
    const int ow = static_cast<int>(i % g.ow);
    const int oh = static_cast<int>((i / g.ow) % g.oh);
    const int64_t plane = i / (static_cast<int64_t>(g.ow) * g.oh);
    const float* xp = x + plane * g.h * g.w;
    const int h0 = oh * g.sh - g.ph, w0 = ow * g.sw - g.pw;
    float acc = 0.0f;
    for (int u = 0; u < g.kh; ++u) {
      const int hi = h0 + u;
      if (hi < 0 || hi >= g.h) continue;
      for (int v = 0; v < g.kw; ++v) {
        const int wi = w0 + v;
        if (wi < 0 || wi >= g.w) continue;
        acc += xp[hi * g.w + wi];
      }
    }
    const int d = pool_divisor(g, oh, ow, include_pad);
    y[i] = d > 0 ? acc / static_cast<float>(d) : 0.0f;
  }
}

__global__ void avg_pool_backward_kernel(const float* dy, PoolGeom g, bool include_pad, float* dx) {
  const int64_t total = g.planes * g.h * g.w;
  for (int64_t i = global_index(); i < total; i += grid_stride()) {
    const int wi = static_cast<int>(i % g.w);
    const int hi = static_cast<int>((i / g.w) % g.h);
    const int64_t plane = i / (static_cast<int64_t>(g.w) * g.h);
    const int64_t obase = plane * g.oh * g.ow;
    int oh0, oh1, ow0, ow1;
    covering(hi, g.ph, g.kh, g.sh, g.oh, oh0, oh1);
    covering(wi, g.pw, g.kw, g.sw, g.ow, ow0, ow1);
    float acc = 0.0f;
    for (int oh = oh0; oh <= oh1; ++oh) {
      for (int ow = ow0; ow <= ow1; ++ow) {
        const int d = pool_divisor(g, oh, ow, include_pad);
        if (d > 0) acc += dy[obase + static_cast<int64_t>(oh) * g.ow + ow] / static_cast<float>(d);
      }
    }
    dx[i] = acc;
  }
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

}  // namespace

cudaError_t max_pool_forward(const float* x, const PoolGeom& g, float* y, int32_t* argmax, cudaStream_t s) {
  const int64_t total = g.planes * g.oh * g.ow;
  if (total <= 0) return cudaSuccess;
  max_pool_forward_kernel<<<blocks_for(total), kThreads, 0, s>>>(x, g, y, argmax);
  return cudaGetLastError();
}

cudaError_t max_pool_backward(const float* dy, const int32_t* argmax, const PoolGeom& g, float* dx, cudaStream_t s) {
  const int64_t total = g.planes * g.h * g.w;
  if (total <= 0) return cudaSuccess;
  max_pool_backward_kernel<<<blocks_for(total), kThreads, 0, s>>>(dy, argmax, g, dx);
  return cudaGetLastError();
}

cudaError_t avg_pool_forward(const float* x, const PoolGeom& g, bool count_include_pad, float* y, cudaStream_t s) {
  const int64_t total = g.planes * g.oh * g.ow;
  if (total <= 0) return cudaSuccess;
  avg_pool_forward_kernel<<<blocks_for(total), kThreads, 0, s>>>(x, g, count_include_pad, y);
  return cudaGetLastError();
}

cudaError_t avg_pool_backward(const float* dy, const PoolGeom& g, bool count_include_pad, float* dx, cudaStream_t s) {
  const int64_t total = g.planes * g.h * g.w;
  if (total <= 0) return cudaSuccess;
  avg_pool_backward_kernel<<<blocks_for(total), kThreads, 0, s>>>(dy, g, count_include_pad, dx);
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

}  // namespace ts::engine::cuda::kernels
