// The detection kernels (Faster R-CNN): RoIAlign, RoIPool, smooth-L1, row gather/scatter and
// permute, as plain loops with OpenMP. Inputs in a blocked layout are reordered to plain first
// (RoIAlign's feature map to channels-last); every result is plain. Backward passes that
// scatter (RoI pooling, index_add) parallelise over channels or columns, so no two threads ever
// add into the same element.
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "engine/cpu/cpu_backend.h"

namespace ts::engine::cpu {

namespace {

[[noreturn]] void fail(const char* op, const std::string& msg) {
  throw std::invalid_argument(std::string(op) + ": " + msg);
}

void check_cpu(const Tensor& t, const char* op, const char* what) {
  if (!t.defined()) fail(op, std::string(what) + " is undefined");
  if (!t.device().is_cpu()) fail(op, std::string(what) + " is on " + t.device().str());
}

Tensor plain(CpuBackend& b, const Tensor& t) { return t.layout().is_plain() ? t : b.to_layout(t, Layout::plain()); }

// rois [R, 5] with integer batch indices in [0, batch).
void check_rois(const Tensor& rois, int64_t batch, const char* op) {
  check_cpu(rois, op, "rois");
  if (rois.dim() != 2 || rois.size(1) != 5) fail(op, "rois must be [R, 5], got " + shape_str(rois.shape()));
  const float* r = rois.data();
  for (int64_t i = 0; i < rois.size(0); ++i) {
    const float b = r[i * 5];
    if (!(b >= 0.0f) || b >= static_cast<float>(batch) || b != std::floor(b)) {
      fail(op, "roi " + std::to_string(i) + " has batch index " + std::to_string(b) + ", feature batch is " +
                   std::to_string(batch));
    }
  }
}

// One bilinear sample: four plane offsets and their weights (all zero outside the map).
struct Sample {
  int32_t idx[4];
  float w[4];
};

// Where each RoIAlign bin samples, for one RoI: pooled_h * pooled_w * grid_h * grid_w samples
// in (ph, pw, iy, ix) order, and 1 / samples-per-bin.
struct RoiTable {
  int64_t batch = 0;
  int64_t per_bin = 1;
  float inv_count = 1.0f;
  std::vector<Sample> samples;
};

Sample bilinear(float y, float x, int64_t height, int64_t width) {
  Sample s{{0, 0, 0, 0}, {0.0f, 0.0f, 0.0f, 0.0f}};
  // Points more than one cell outside the map contribute nothing (the original kernel's rule).
  if (!std::isfinite(y) || !std::isfinite(x) || y < -1.0f || y > static_cast<float>(height) || x < -1.0f ||
      x > static_cast<float>(width)) {
    return s;
  }
  y = std::max(y, 0.0f);
  x = std::max(x, 0.0f);
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

std::vector<RoiTable> roi_align_tables(const Tensor& rois, int64_t height, int64_t width, int64_t pooled_h,
                                       int64_t pooled_w, float spatial_scale, int64_t sampling_ratio, bool aligned) {
  const int64_t n_rois = rois.size(0);
  std::vector<RoiTable> tables(static_cast<size_t>(n_rois));
  const float* r = rois.data();
  const float offset = aligned ? 0.5f : 0.0f;
#pragma omp parallel for schedule(dynamic) if (n_rois > 16)
  for (int64_t i = 0; i < n_rois; ++i) {
    const float* roi = r + i * 5;
    RoiTable& t = tables[static_cast<size_t>(i)];
    t.batch = static_cast<int64_t>(roi[0]);
    const float x0 = roi[1] * spatial_scale - offset, y0 = roi[2] * spatial_scale - offset;
    float roi_w = roi[3] * spatial_scale - offset - x0, roi_h = roi[4] * spatial_scale - offset - y0;
    if (!aligned) {
      // The original forces malformed RoIs to 1x1 cells.
      roi_w = std::max(roi_w, 1.0f);
      roi_h = std::max(roi_h, 1.0f);
    }
    const float bin_h = roi_h / static_cast<float>(pooled_h), bin_w = roi_w / static_cast<float>(pooled_w);
    auto adaptive = [](float v) {
      return std::isfinite(v) ? std::max<int64_t>(1, static_cast<int64_t>(std::ceil(v))) : 1;
    };
    const int64_t grid_h = sampling_ratio > 0 ? sampling_ratio : adaptive(bin_h);
    const int64_t grid_w = sampling_ratio > 0 ? sampling_ratio : adaptive(bin_w);
    t.per_bin = grid_h * grid_w;
    t.inv_count = 1.0f / static_cast<float>(std::max<int64_t>(t.per_bin, 1));
    t.samples.resize(static_cast<size_t>(pooled_h * pooled_w * t.per_bin));
    size_t k = 0;
    for (int64_t ph = 0; ph < pooled_h; ++ph) {
      for (int64_t pw = 0; pw < pooled_w; ++pw) {
        for (int64_t iy = 0; iy < grid_h; ++iy) {
          const float y = y0 + static_cast<float>(ph) * bin_h +
                          (static_cast<float>(iy) + 0.5f) * bin_h / static_cast<float>(grid_h);
          for (int64_t ix = 0; ix < grid_w; ++ix) {
            const float x = x0 + static_cast<float>(pw) * bin_w +
                            (static_cast<float>(ix) + 0.5f) * bin_w / static_cast<float>(grid_w);
            t.samples[k++] = bilinear(y, x, height, width);
          }
        }
      }
    }
  }
  return tables;
}

void check_pooled(int64_t pooled_h, int64_t pooled_w, float spatial_scale, const char* op) {
  if (pooled_h < 1 || pooled_w < 1) fail(op, "pooled size must be positive");
  if (!(spatial_scale > 0.0f) || !std::isfinite(spatial_scale)) fail(op, "spatial_scale must be positive");
}

// Integer row index stored as fp32, checked against [0, rows).
int64_t row_index(float v, int64_t rows, int64_t i, const char* op) {
  if (!(v >= 0.0f) || v >= static_cast<float>(rows) || v != std::floor(v)) {
    fail(op, "index " + std::to_string(v) + " at position " + std::to_string(i) + " is not a row in [0, " +
                 std::to_string(rows) + ")");
  }
  return static_cast<int64_t>(v);
}

}  // namespace

// ---------------------------------------------------------------- RoIAlign

// Both directions work on the feature map in channels-last (a oneDNN reorder, none when it
// already is): each bilinear corner is then a contiguous run of C values, so the inner loops
// are vector FMAs over channels.

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
    x = Tensor::empty(x_in.shape(), x_in.device(), Layout::channels_last(), memprof::Category::workspace);
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
      const Sample* s = t.samples.data();
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
        const Sample* s = t.samples.data();
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

// ---------------------------------------------------------------- RoIPool

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
  res.workspace =
      Tensor::empty({n_rois, channels, pooled_h, pooled_w}, x.device(), Layout::plain(), memprof::Category::workspace);
  const float* px = x.data();
  const float* pr = rois.data();
  float* py = res.y.data();
  float* parg = res.workspace.data();
  const int64_t bins = pooled_h * pooled_w, plane = height * width;
#pragma omp parallel for schedule(dynamic) if (n_rois * channels * bins > 4096)
  for (int64_t r = 0; r < n_rois; ++r) {
    const float* roi = pr + r * 5;
    const auto n = static_cast<int64_t>(roi[0]);
    // Fast R-CNN's rounding: inclusive cell ranges, at least one cell.
    auto cell = [&](float v) {
      const float s = std::round(v * spatial_scale);
      return std::isfinite(s) ? static_cast<int64_t>(std::clamp(s, -1e9f, 1e9f)) : int64_t{0};
    };
    const int64_t x1 = cell(roi[1]), y1 = cell(roi[2]), x2 = cell(roi[3]), y2 = cell(roi[4]);
    const float bin_h = static_cast<float>(std::max<int64_t>(y2 - y1 + 1, 1)) / static_cast<float>(pooled_h);
    const float bin_w = static_cast<float>(std::max<int64_t>(x2 - x1 + 1, 1)) / static_cast<float>(pooled_w);
    for (int64_t ph = 0; ph < pooled_h; ++ph) {
      const int64_t hs =
          std::clamp(static_cast<int64_t>(std::floor(static_cast<float>(ph) * bin_h)) + y1, int64_t{0}, height);
      const int64_t he =
          std::clamp(static_cast<int64_t>(std::ceil(static_cast<float>(ph + 1) * bin_h)) + y1, int64_t{0}, height);
      for (int64_t pw = 0; pw < pooled_w; ++pw) {
        const int64_t ws =
            std::clamp(static_cast<int64_t>(std::floor(static_cast<float>(pw) * bin_w)) + x1, int64_t{0}, width);
        const int64_t we =
            std::clamp(static_cast<int64_t>(std::ceil(static_cast<float>(pw + 1) * bin_w)) + x1, int64_t{0}, width);
        const bool empty = he <= hs || we <= ws;
        for (int64_t c = 0; c < channels; ++c) {
          const float* src = px + (n * channels + c) * plane;
          const int64_t o = (r * channels + c) * bins + ph * pooled_w + pw;
          if (empty) {
            py[o] = 0.0f;
            parg[o] = -1.0f;
            continue;
          }
          float best = -std::numeric_limits<float>::infinity();
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

// ---------------------------------------------------------------- smooth L1

namespace {

void check_smooth_l1(const Tensor& x, const Tensor& target, const Tensor* weights, float beta, const char* op) {
  check_cpu(x, op, "input");
  check_cpu(target, op, "target");
  if (x.shape() != target.shape())
    fail(op, "input " + shape_str(x.shape()) + " and target " + shape_str(target.shape()));
  if (weights) {
    check_cpu(*weights, op, "weights");
    if (weights->shape() != x.shape())
      fail(op, "weights " + shape_str(weights->shape()) + " for input " + shape_str(x.shape()));
  }
  if (!(beta >= 0.0f)) fail(op, "beta must be >= 0");
}

}  // namespace

Tensor CpuBackend::smooth_l1_forward(const Tensor& x_in, const Tensor& target_in, const Tensor* weights_in, float beta,
                                     float scale) {
  const char* op = "smooth_l1";
  check_smooth_l1(x_in, target_in, weights_in, beta, op);
  const Tensor x = plain(*this, x_in), t = plain(*this, target_in);
  const Tensor w = weights_in ? plain(*this, *weights_in) : Tensor();
  const float* px = x.data();
  const float* pt = t.data();
  const float* pw = w.defined() ? w.data() : nullptr;
  const int64_t n = x.numel();
  const double half_beta = 0.5 * beta;
  double total = 0.0;
#pragma omp parallel for reduction(+ : total) if (n > (1 << 15))
  for (int64_t i = 0; i < n; ++i) {
    const double d = std::abs(static_cast<double>(px[i]) - pt[i]);
    const double l = d < beta ? 0.5 * d * d / beta : d - half_beta;
    total += pw ? pw[i] * l : l;
  }
  Tensor y = Tensor::empty({1}, x.device());
  y.data()[0] = static_cast<float>(total * scale);
  return y;
}

Tensor CpuBackend::smooth_l1_backward(const Tensor& dloss, const Tensor& x_in, const Tensor& target_in,
                                      const Tensor* weights_in, float beta, float scale) {
  const char* op = "smooth_l1_backward";
  check_smooth_l1(x_in, target_in, weights_in, beta, op);
  check_cpu(dloss, op, "dloss");
  if (dloss.numel() != 1) fail(op, "dloss must hold one value, got " + shape_str(dloss.shape()));
  const Tensor x = plain(*this, x_in), t = plain(*this, target_in);
  const Tensor w = weights_in ? plain(*this, *weights_in) : Tensor();
  const float g = dloss.item() * scale;
  const float* px = x.data();
  const float* pt = t.data();
  const float* pw = w.defined() ? w.data() : nullptr;
  Tensor dx = Tensor::empty(x.shape(), x.device());
  float* pd = dx.data();
  const int64_t n = x.numel();
#pragma omp parallel for if (n > (1 << 15))
  for (int64_t i = 0; i < n; ++i) {
    const float d = px[i] - pt[i];
    // d l / d d: d / beta inside the quadratic zone, sign(d) outside.
    const float dl = std::abs(d) < beta ? d / beta : static_cast<float>((d > 0.0f) - (d < 0.0f));
    pd[i] = g * (pw ? pw[i] : 1.0f) * dl;
  }
  return dx;
}

// ---------------------------------------------------------------- rows: gather and scatter-add

Tensor CpuBackend::index_select_rows(const Tensor& x_in, const Tensor& index_in) {
  const char* op = "index_select_rows";
  check_cpu(x_in, op, "input");
  check_cpu(index_in, op, "index");
  if (x_in.dim() < 1 || index_in.dim() != 1) {
    fail(op, "expected input [N, ...] and index [M], got " + shape_str(x_in.shape()) + " and " +
                 shape_str(index_in.shape()));
  }
  const Tensor x = plain(*this, x_in), index = plain(*this, index_in);
  const int64_t rows = x.size(0), m = index.size(0);
  const int64_t k = rows > 0 ? x.numel() / rows : 0;
  Shape out = x.shape();
  out[0] = m;
  Tensor y = Tensor::empty(out, x.device());
  const float* pi = index.data();
  const float* px = x.data();
  float* py = y.data();
  for (int64_t i = 0; i < m; ++i) {
    const int64_t r = row_index(pi[i], rows, i, op);
    std::copy(px + r * k, px + (r + 1) * k, py + i * k);
  }
  return y;
}

Tensor CpuBackend::index_add_rows(const Tensor& src_in, const Tensor& index_in, int64_t rows) {
  const char* op = "index_add_rows";
  check_cpu(src_in, op, "src");
  check_cpu(index_in, op, "index");
  if (src_in.dim() < 1 || index_in.dim() != 1 || index_in.size(0) != src_in.size(0) || rows < 0) {
    fail(op, "expected src [M, ...], index [M] and rows >= 0, got " + shape_str(src_in.shape()) + ", " +
                 shape_str(index_in.shape()) + ", " + std::to_string(rows));
  }
  const Tensor src = plain(*this, src_in), index = plain(*this, index_in);
  const int64_t m = src.size(0);
  const int64_t k = m > 0 ? src.numel() / m : 1;
  Shape out = src.shape();
  out[0] = rows;
  Tensor y = Tensor::zeros(out, src.device());
  const float* pi = index.data();
  const float* ps = src.data();
  float* py = y.data();
  for (int64_t i = 0; i < m; ++i) {
    const int64_t r = row_index(pi[i], rows, i, op);
    for (int64_t j = 0; j < k; ++j) py[r * k + j] += ps[i * k + j];
  }
  return y;
}

// ---------------------------------------------------------------- permute

Tensor CpuBackend::permute(const Tensor& x_in, const std::vector<int64_t>& perm) {
  const char* op = "permute";
  check_cpu(x_in, op, "input");
  const int64_t rank = x_in.dim();
  if (static_cast<int64_t>(perm.size()) != rank)
    fail(op, "permutation of rank " + std::to_string(perm.size()) + " for " + shape_str(x_in.shape()));
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (int64_t p : perm) {
    if (p < 0 || p >= rank || seen[static_cast<size_t>(p)]) fail(op, "not a permutation of the dimensions");
    seen[static_cast<size_t>(p)] = true;
  }
  const Tensor x = plain(*this, x_in);
  Shape out(static_cast<size_t>(rank));
  std::vector<int64_t> in_strides(static_cast<size_t>(rank), 1);
  for (int64_t d = rank - 2; d >= 0; --d)
    in_strides[static_cast<size_t>(d)] = in_strides[static_cast<size_t>(d + 1)] * x.size(d + 1);
  // Stride in x of each output dimension.
  std::vector<int64_t> src_strides(static_cast<size_t>(rank));
  for (int64_t d = 0; d < rank; ++d) {
    out[static_cast<size_t>(d)] = x.size(perm[static_cast<size_t>(d)]);
    src_strides[static_cast<size_t>(d)] = in_strides[static_cast<size_t>(perm[static_cast<size_t>(d)])];
  }
  Tensor y = Tensor::empty(out, x.device());
  const int64_t n = y.numel();
  if (n == 0) return y;
  const float* px = x.data();
  float* py = y.data();
  const int64_t inner = rank > 0 ? out.back() : 1;
  const int64_t inner_stride = rank > 0 ? src_strides.back() : 1;
  const int64_t outer = n / inner;
#pragma omp parallel for schedule(static) if (n > (1 << 15))
  for (int64_t o = 0; o < outer; ++o) {
    // Decompose the outer index over the output dims but the last.
    int64_t rem = o, src = 0;
    for (int64_t d = rank - 2; d >= 0; --d) {
      const int64_t sz = out[static_cast<size_t>(d)];
      src += (rem % sz) * src_strides[static_cast<size_t>(d)];
      rem /= sz;
    }
    float* dst = py + o * inner;
    for (int64_t i = 0; i < inner; ++i) dst[i] = px[src + i * inner_stride];
  }
  return y;
}

}  // namespace ts::engine::cpu
