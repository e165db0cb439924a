#pragma once
// RoIAlign's sampling (He et al. 2017) and RoIPool's windows, shared by cpu/roi.cpp and
// cuda/roi.cu: where a RoI's bins sample the feature map, the bilinear weights of each sample,
// and the cells each RoIPool bin covers. Both backends compute
// these with this code, in this order (the kernels without FMA contraction), so they read the
// same cells with the same weights.
#include <math.h>  // ceilf, floorf, roundf: on the host and in kernels

#include <cstdint>

#include "engine/numerics/host_device.h"

namespace ts::engine::numerics {

// One bilinear sample: four plane offsets (y * width + x) and their weights; all zero when the
// point lies more than one cell outside the map (the original kernel's rule).
struct BilinearSample {
  int32_t idx[4];
  float w[4];
};

TS_HD BilinearSample bilinear_sample(float y, float x, int64_t height, int64_t width) {
  BilinearSample s{{0, 0, 0, 0}, {0.0f, 0.0f, 0.0f, 0.0f}};
  if (!is_finite(y) || !is_finite(x) || y < -1.0f || y > static_cast<float>(height) || x < -1.0f ||
      x > static_cast<float>(width)) {
    return s;
  }
  y = y < 0.0f ? 0.0f : y;
  x = x < 0.0f ? 0.0f : x;
  auto y_low = static_cast<int64_t>(y), x_low = static_cast<int64_t>(x);
  int64_t y_high, x_high;
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
  s.idx[0] = static_cast<int32_t>(y_low * width + x_low);
  s.idx[1] = static_cast<int32_t>(y_low * width + x_high);
  s.idx[2] = static_cast<int32_t>(y_high * width + x_low);
  s.idx[3] = static_cast<int32_t>(y_high * width + x_high);
  s.w[0] = hy * hx;
  s.w[1] = hy * lx;
  s.w[2] = ly * hx;
  s.w[3] = ly * lx;
  return s;
}

// One RoI (a row batch, x1, y1, x2, y2 in image pixels) on the feature map: its corner, bin size,
// samples per bin side (sampling_ratio, or adaptive: ceil of the bin size, at least 1) and
// 1 / samples per bin. `aligned` is Detectron2's half-pixel offset; without it malformed RoIs
// are forced to 1 x 1 cells, as the original.
struct RoiBox {
  int64_t batch;
  float y0, x0, bin_h, bin_w;
  int64_t grid_h, grid_w;
  float inv_count;
};

TS_HD int64_t adaptive_grid(float bin) {
  if (!is_finite(bin)) return 1;
  const float c = ceilf(bin);
  return c < 1.0f ? 1 : (c > 2147483647.0f ? 2147483647 : static_cast<int64_t>(c));
}

TS_HD RoiBox roi_box(const float* roi, float spatial_scale, bool aligned, int64_t pooled_h, int64_t pooled_w,
                     int64_t sampling_ratio) {
  RoiBox b;
  b.batch = static_cast<int64_t>(roi[0]);
  const float offset = aligned ? 0.5f : 0.0f;
  b.x0 = roi[1] * spatial_scale - offset;
  b.y0 = roi[2] * spatial_scale - offset;
  float roi_w = roi[3] * spatial_scale - offset - b.x0, roi_h = roi[4] * spatial_scale - offset - b.y0;
  if (!aligned) {
    roi_w = roi_w < 1.0f ? 1.0f : roi_w;
    roi_h = roi_h < 1.0f ? 1.0f : roi_h;
  }
  b.bin_h = roi_h / static_cast<float>(pooled_h);
  b.bin_w = roi_w / static_cast<float>(pooled_w);
  b.grid_h = sampling_ratio > 0 ? sampling_ratio : adaptive_grid(b.bin_h);
  b.grid_w = sampling_ratio > 0 ? sampling_ratio : adaptive_grid(b.bin_w);
  const int64_t per_bin = b.grid_h * b.grid_w;
  b.inv_count = 1.0f / static_cast<float>(per_bin > 1 ? per_bin : 1);
  return b;
}

// The sample (iy, ix) of bin (ph, pw): its y and x on the feature map.
TS_HD float sample_y(const RoiBox& b, int64_t ph, int64_t iy) {
  return b.y0 + static_cast<float>(ph) * b.bin_h +
         (static_cast<float>(iy) + 0.5f) * b.bin_h / static_cast<float>(b.grid_h);
}
TS_HD float sample_x(const RoiBox& b, int64_t pw, int64_t ix) {
  return b.x0 + static_cast<float>(pw) * b.bin_w +
         (static_cast<float>(ix) + 0.5f) * b.bin_w / static_cast<float>(b.grid_w);
}

// RoIPool (Girshick 2015): a RoI rounded to whole cells as Fast R-CNN does (inclusive ranges, at
// least one cell), and the window of cells each bin takes its maximum over.
TS_HD int64_t roi_pool_cell(float v, float spatial_scale) {
  const float s = roundf(v * spatial_scale);
  if (!is_finite(s)) return 0;
  return static_cast<int64_t>(s < -1e9f ? -1e9f : (s > 1e9f ? 1e9f : s));
}

struct RoiPoolBox {
  int64_t y1, x1;      // the first cell
  float bin_h, bin_w;  // cells per bin
};

TS_HD RoiPoolBox roi_pool_box(const float* roi, float spatial_scale, int64_t pooled_h, int64_t pooled_w) {
  const int64_t x1 = roi_pool_cell(roi[1], spatial_scale), y1 = roi_pool_cell(roi[2], spatial_scale);
  const int64_t x2 = roi_pool_cell(roi[3], spatial_scale), y2 = roi_pool_cell(roi[4], spatial_scale);
  const int64_t rh = y2 - y1 + 1 > 1 ? y2 - y1 + 1 : 1, rw = x2 - x1 + 1 > 1 ? x2 - x1 + 1 : 1;
  return {y1, x1, static_cast<float>(rh) / static_cast<float>(pooled_h),
          static_cast<float>(rw) / static_cast<float>(pooled_w)};
}

// Bin p's cells along one side, [begin, end) within [0, size); empty when end <= begin.
struct CellRange {
  int64_t begin, end;
};

TS_HD CellRange roi_pool_range(int64_t p, float bin, int64_t first, int64_t size) {
  auto clamp = [size](int64_t v) { return v < 0 ? int64_t{0} : (v > size ? size : v); };
  return {clamp(static_cast<int64_t>(floorf(static_cast<float>(p) * bin)) + first),
          clamp(static_cast<int64_t>(ceilf(static_cast<float>(p + 1) * bin)) + first)};
}

// RoIPool's bin [hs, he) x [ws, we) of a plane `width` wide (not empty): the offset of its
// maximum, the first one in row order on ties (a NaN is never taken).
TS_HD int64_t roi_pool_argmax(const float* src, int64_t width, int64_t hs, int64_t he, int64_t ws, int64_t we) {
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
  return arg;
}

}  // namespace ts::engine::numerics
