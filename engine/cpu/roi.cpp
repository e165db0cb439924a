// The RoI family on the CPU (Faster R-CNN): RoIAlign and RoIPool, plain loops with OpenMP. The
// feature map is read channels-last (reordered into a scratch copy otherwise); results are
// plain. RoIAlign's sample positions and weights come from numerics/roi.h, as on the GPU.
// RoIPool's backward parallelises over channels, so no two threads add into one element.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/backend_checks.h"
#include "engine/cpu/cpu_common.h"
#include "engine/numerics/roi.h"

namespace ts::engine::cpu {

namespace {

using checks::check_pooled;

void check_rois(const Tensor& rois, int64_t batch, const char* op) {
  check_cpu(rois, op, "rois");
  checks::check_rois_shape(rois, op);
  checks::check_roi_batches(rois.data(), rois.size(0), batch, op);
}

// Where each RoIAlign bin samples, for one RoI: pooled_h * pooled_w * grid_h * grid_w samples
// in (ph, pw, iy, ix) order, and 1 / samples-per-bin.
struct RoiTable {
  int64_t batch = 0;
  int64_t per_bin = 1;
  float inv_count = 1.0f;
  std::vector<numerics::BilinearSample> samples;
};

std::vector<RoiTable> roi_align_tables(const Tensor& rois, int64_t height, int64_t width, int64_t pooled_h,
                                       int64_t pooled_w, float spatial_scale, int64_t sampling_ratio, bool aligned) {
  const int64_t n_rois = rois.size(0);
  std::vector<RoiTable> tables(static_cast<size_t>(n_rois));
  const float* r = rois.data();
#pragma omp parallel for schedule(dynamic) if (n_rois > 16)
  for (int64_t i = 0; i < n_rois; ++i) {
    const numerics::RoiBox box =
        numerics::roi_box(r + i * 5, spatial_scale, aligned, pooled_h, pooled_w, sampling_ratio);
    RoiTable& t = tables[static_cast<size_t>(i)];
    t.batch = box.batch;
    t.per_bin = box.grid_h * box.grid_w;
    t.inv_count = box.inv_count;
    t.samples.resize(static_cast<size_t>(pooled_h * pooled_w * t.per_bin));
    size_t k = 0;
    for (int64_t ph = 0; ph < pooled_h; ++ph) {
      for (int64_t pw = 0; pw < pooled_w; ++pw) {
        for (int64_t iy = 0; iy < box.grid_h; ++iy) {
          const float y = numerics::sample_y(box, ph, iy);
          for (int64_t ix = 0; ix < box.grid_w; ++ix) {
            t.samples[k++] = numerics::bilinear_sample(y, numerics::sample_x(box, pw, ix), height, width);
          }
        }
      }
    }
  }
  return tables;
}

}  // namespace

Tensor CpuBackend::roi_align_forward(const Tensor& x_in, const Tensor& rois_in, int64_t pooled_h, int64_t pooled_w,
                                     float spatial_scale, int64_t sampling_ratio, bool aligned) {
  const char* op = "roi_align";
  check_cpu(x_in, op, "input");
  if (x_in.dim() != 4) fail(op, "input must be [N, C, H, W], got " + shape_str(x_in.shape()));
  check_pooled(pooled_h, pooled_w, spatial_scale, op);
  const Tensor rois = plain(*this, rois_in);
  check_rois(rois, x_in.size(0), op);
  const int64_t n_rois = rois.size(0), channels = x_in.size(1), height = x_in.size(2), width = x_in.size(3);
  const auto tables = roi_align_tables(rois, height, width, pooled_h, pooled_w, spatial_scale, sampling_ratio, aligned);
  const int64_t plane = height * width;
  // [N, H * W, C]: the input itself when it is channels-last, else a scratch copy (workspace).
  Tensor x = x_in;
  if (x_in.layout().kind != Layout::Kind::channels_last) {
    x = Tensor::empty(x_in.shape(), x_in.device(), Layout::channels_last(), vocabulary::Category::workspace);
    copy(x_in, x);
  }
  Tensor y = Tensor::empty({n_rois, channels, pooled_h, pooled_w}, x.device());
  const float* px = x.data();
  float* py = y.data();
  const int64_t bins = pooled_h * pooled_w;
#pragma omp parallel if (n_rois * channels * bins > 4096)
  {
    std::vector<float> acc(static_cast<size_t>(bins * channels));
#pragma omp for schedule(dynamic)
    for (int64_t r = 0; r < n_rois; ++r) {
      const RoiTable& t = tables[static_cast<size_t>(r)];
      const float* image = px + t.batch * plane * channels;
      const numerics::BilinearSample* s = t.samples.data();
      for (int64_t b = 0; b < bins; ++b) {
        float* a = acc.data() + b * channels;
        std::fill(a, a + channels, 0.0f);
        for (int64_t k = 0; k < t.per_bin; ++k, ++s) {
          for (int q = 0; q < 4; ++q) {
            const float w = s->w[q] * t.inv_count;
            if (w == 0.0f) continue;
            const float* src = image + static_cast<int64_t>(s->idx[q]) * channels;
#pragma omp simd
            for (int64_t c = 0; c < channels; ++c) a[c] += w * src[c];
          }
        }
      }
      float* dst = py + r * channels * bins;
      for (int64_t c = 0; c < channels; ++c) {
        for (int64_t b = 0; b < bins; ++b) dst[c * bins + b] = acc[static_cast<size_t>(b * channels + c)];
      }
    }
  }
  return y;
}

Tensor CpuBackend::roi_align_backward(const Tensor& dy_in, const Tensor& rois_in, const Shape& x_shape,
                                      float spatial_scale, int64_t sampling_ratio, bool aligned) {
  const char* op = "roi_align_backward";
  check_cpu(dy_in, op, "dy");
  if (x_shape.size() != 4) fail(op, "x_shape must be [N, C, H, W], got " + shape_str(x_shape));
  const Tensor dy = plain(*this, dy_in);
  const Tensor rois = plain(*this, rois_in);
  check_rois(rois, x_shape[0], op);
  const int64_t n_rois = rois.size(0), channels = x_shape[1], height = x_shape[2], width = x_shape[3];
  if (dy.dim() != 4 || dy.size(0) != n_rois || dy.size(1) != channels) {
    fail(op, "dy " + shape_str(dy.shape()) + " does not match " + std::to_string(n_rois) + " rois and input " +
                 shape_str(x_shape));
  }
  check_pooled(dy.size(2), dy.size(3), spatial_scale, op);
  const int64_t pooled_h = dy.size(2), pooled_w = dy.size(3);
  const auto tables = roi_align_tables(rois, height, width, pooled_h, pooled_w, spatial_scale, sampling_ratio, aligned);
  Tensor dx = Tensor::zeros(x_shape, dy.device(), Layout::channels_last());
  const float* g = dy.data();
  float* pdx = dx.data();
  const int64_t bins = pooled_h * pooled_w, plane = height * width;
  // Each thread owns a range of channels for every RoI: no two threads add into one element.
  const int64_t chunk = std::max<int64_t>(16, (channels + 7) / 8);
  const int64_t chunks = (channels + chunk - 1) / chunk;
#pragma omp parallel if (n_rois * channels * bins > 4096)
  {
    std::vector<float> grad(static_cast<size_t>(bins * chunk));
#pragma omp for schedule(dynamic)
    for (int64_t ci = 0; ci < chunks; ++ci) {
      const int64_t c0 = ci * chunk, cw = std::min(chunk, channels - c0);
      for (int64_t r = 0; r < n_rois; ++r) {
        const RoiTable& t = tables[static_cast<size_t>(r)];
        // dy[r, c0:c0+cw, :] transposed to [bins, cw].
        const float* src = g + (r * channels + c0) * bins;
        for (int64_t c = 0; c < cw; ++c) {
          for (int64_t b = 0; b < bins; ++b) grad[static_cast<size_t>(b * cw + c)] = src[c * bins + b] * t.inv_count;
        }
        float* image = pdx + t.batch * plane * channels + c0;
        const numerics::BilinearSample* s = t.samples.data();
        for (int64_t b = 0; b < bins; ++b) {
          const float* gb = grad.data() + b * cw;
          for (int64_t k = 0; k < t.per_bin; ++k, ++s) {
            for (int q = 0; q < 4; ++q) {
              const float w = s->w[q];
              if (w == 0.0f) continue;
              float* dst = image + static_cast<int64_t>(s->idx[q]) * channels;
#pragma omp simd
              for (int64_t c = 0; c < cw; ++c) dst[c] += w * gb[c];
            }
          }
        }
      }
    }
  }
  return to_layout(dx, Layout::plain());
}

PoolResult CpuBackend::roi_pool_forward(const Tensor& x_in, const Tensor& rois_in, int64_t pooled_h, int64_t pooled_w,
                                        float spatial_scale) {
  const char* op = "roi_pool";
  check_cpu(x_in, op, "input");
  if (x_in.dim() != 4) fail(op, "input must be [N, C, H, W], got " + shape_str(x_in.shape()));
  check_pooled(pooled_h, pooled_w, spatial_scale, op);
  const Tensor x = plain(*this, x_in);
  const Tensor rois = plain(*this, rois_in);
  check_rois(rois, x.size(0), op);
  const int64_t n_rois = rois.size(0), channels = x.size(1), height = x.size(2), width = x.size(3);
  PoolResult res;
  res.y = Tensor::empty({n_rois, channels, pooled_h, pooled_w}, x.device());
  res.workspace = Tensor::empty({n_rois, channels, pooled_h, pooled_w}, x.device(), Layout::plain(),
                                vocabulary::Category::workspace);
  const float* px = x.data();
  const float* pr = rois.data();
  float* py = res.y.data();
  float* parg = res.workspace.data();
  const int64_t bins = pooled_h * pooled_w, plane = height * width;
#pragma omp parallel for schedule(dynamic) if (n_rois * channels * bins > 4096)
  for (int64_t r = 0; r < n_rois; ++r) {
    const float* roi = pr + r * 5;
    const auto n = static_cast<int64_t>(roi[0]);
    const numerics::RoiPoolBox box = numerics::roi_pool_box(roi, spatial_scale, pooled_h, pooled_w);
    for (int64_t ph = 0; ph < pooled_h; ++ph) {
      const auto [hs, he] = numerics::roi_pool_range(ph, box.bin_h, box.y1, height);
      for (int64_t pw = 0; pw < pooled_w; ++pw) {
        const auto [ws, we] = numerics::roi_pool_range(pw, box.bin_w, box.x1, width);
        const bool empty = he <= hs || we <= ws;
        for (int64_t c = 0; c < channels; ++c) {
          const float* src = px + (n * channels + c) * plane;
          const int64_t o = (r * channels + c) * bins + ph * pooled_w + pw;
          if (empty) {
            py[o] = 0.0f;
            parg[o] = -1.0f;
            continue;
          }
          const int64_t arg = numerics::roi_pool_argmax(src, width, hs, he, ws, we);
          py[o] = src[arg];
          parg[o] = static_cast<float>(arg);
        }
      }
    }
  }
  return res;
}

Tensor CpuBackend::roi_pool_backward(const Tensor& dy_in, const Tensor& argmax, const Tensor& rois_in,
                                     const Shape& x_shape) {
  const char* op = "roi_pool_backward";
  check_cpu(dy_in, op, "dy");
  check_cpu(argmax, op, "argmax");
  if (x_shape.size() != 4) fail(op, "x_shape must be [N, C, H, W], got " + shape_str(x_shape));
  const Tensor dy = plain(*this, dy_in);
  const Tensor rois = plain(*this, rois_in);
  check_rois(rois, x_shape[0], op);
  const int64_t n_rois = rois.size(0), channels = x_shape[1], plane = x_shape[2] * x_shape[3];
  if (dy.dim() != 4 || dy.size(0) != n_rois || dy.size(1) != channels || argmax.shape() != dy.shape()) {
    fail(op, "dy " + shape_str(dy.shape()) + " / argmax " + shape_str(argmax.shape()) + " do not match " +
                 std::to_string(n_rois) + " rois and input " + shape_str(x_shape));
  }
  const int64_t bins = dy.size(2) * dy.size(3);
  Tensor dx = Tensor::zeros(x_shape, dy.device());
  const float* g = dy.data();
  const float* parg = argmax.data();
  const float* pr = rois.data();
  float* pdx = dx.data();
#pragma omp parallel for schedule(static) if (n_rois * channels * bins > 4096)
  for (int64_t c = 0; c < channels; ++c) {
    for (int64_t r = 0; r < n_rois; ++r) {
      const auto n = static_cast<int64_t>(pr[r * 5]);
      float* dst = pdx + (n * channels + c) * plane;
      const int64_t o = (r * channels + c) * bins;
      for (int64_t b = 0; b < bins; ++b) {
        const auto a = static_cast<int64_t>(parg[o + b]);
        if (a >= 0 && a < plane) dst[a] += g[o + b];
      }
    }
  }
  return dx;
}

}  // namespace ts::engine::cpu
