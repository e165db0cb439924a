#include "test_util.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>

namespace ts::engine::testing {

std::vector<float> uniform(int64_t n, uint64_t seed, float lo, float hi) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = u(rng);
  return v;
}

Tensor rand_tensor(const Shape& shape, uint64_t seed, bool requires_grad, float lo, float hi) {
  Tensor t = Tensor::from_vector(shape, uniform(shape_numel(shape), seed, lo, hi));
  t.set_requires_grad(requires_grad);
  return t;
}

Tensor away_from_zero(const Shape& shape, uint64_t seed, bool requires_grad) {
  auto v = uniform(shape_numel(shape), seed, 0.1f, 1.0f);
  auto s = uniform(shape_numel(shape), seed + 1);
  for (size_t i = 0; i < v.size(); ++i) v[i] = s[i] < 0 ? -v[i] : v[i];
  Tensor t = Tensor::from_vector(shape, v);
  t.set_requires_grad(requires_grad);
  return t;
}

Tensor distinct_values(const Shape& shape, uint64_t seed, float gap, bool requires_grad) {
  const int64_t n = shape_numel(shape);
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = (static_cast<float>(i) - static_cast<float>(n) / 2) * gap;
  std::mt19937_64 rng(seed);
  std::shuffle(v.begin(), v.end(), rng);
  Tensor t = Tensor::from_vector(shape, v);
  t.set_requires_grad(requires_grad);
  return t;
}

std::vector<float> naive_conv2d(const std::vector<float>& x, const Shape& xs, const std::vector<float>& w,
                                const Shape& ws, const std::vector<float>* bias, const Conv2dParams& p, Shape* ys) {
  const int64_t n = xs[0], c = xs[1], h = xs[2], wd = xs[3];
  const int64_t o = ws[0], cg = ws[1], kh = ws[2], kw = ws[3];
  const int64_t g = p.groups, og = o / g;
  const int64_t oh = conv_out_size(h, kh, p.stride_h, p.pad_h, p.dilation_h);
  const int64_t ow = conv_out_size(wd, kw, p.stride_w, p.pad_w, p.dilation_w);
  if (cg * g != c) throw std::invalid_argument("naive_conv2d: groups");
  *ys = {n, o, oh, ow};
  std::vector<float> y(static_cast<size_t>(n * o * oh * ow));
  for (int64_t b = 0; b < n; ++b)
    for (int64_t oc = 0; oc < o; ++oc) {
      const int64_t grp = oc / og;
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          double acc = bias ? (*bias)[static_cast<size_t>(oc)] : 0.0;
          for (int64_t ic = 0; ic < cg; ++ic)
            for (int64_t u = 0; u < kh; ++u)
              for (int64_t v = 0; v < kw; ++v) {
                const int64_t hi = i * p.stride_h - p.pad_h + u * p.dilation_h;
                const int64_t wi = j * p.stride_w - p.pad_w + v * p.dilation_w;
                if (hi < 0 || hi >= h || wi < 0 || wi >= wd) continue;
                const int64_t cin = grp * cg + ic;
                acc += static_cast<double>(x[static_cast<size_t>(((b * c + cin) * h + hi) * wd + wi)]) *
                       w[static_cast<size_t>(((oc * cg + ic) * kh + u) * kw + v)];
              }
          y[static_cast<size_t>(((b * o + oc) * oh + i) * ow + j)] = static_cast<float>(acc);
        }
    }
  return y;
}

std::vector<float> naive_pool2d(const std::vector<float>& x, const Shape& xs, const Pool2dParams& p, bool max,
                                Shape* ys) {
  const int64_t n = xs[0], c = xs[1], h = xs[2], w = xs[3];
  const int64_t oh = conv_out_size(h, p.kernel_h, p.stride_h, p.pad_h, 1);
  const int64_t ow = conv_out_size(w, p.kernel_w, p.stride_w, p.pad_w, 1);
  *ys = {n, c, oh, ow};
  std::vector<float> y(static_cast<size_t>(n * c * oh * ow));
  for (int64_t b = 0; b < n * c; ++b)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j) {
        double acc = max ? -std::numeric_limits<double>::infinity() : 0.0;
        int64_t count = 0;
        const int64_t h0 = i * p.stride_h - p.pad_h, w0 = j * p.stride_w - p.pad_w;
        for (int64_t u = 0; u < p.kernel_h; ++u)
          for (int64_t v = 0; v < p.kernel_w; ++v) {
            const int64_t hi = h0 + u, wi = w0 + v;
            if (hi < 0 || hi >= h || wi < 0 || wi >= w) continue;
            const double val = x[static_cast<size_t>((b * h + hi) * w + wi)];
            acc = max ? std::max(acc, val) : acc + val;
            ++count;
          }
        if (!max) {
          // PyTorch: with count_include_pad the divisor is the window clipped to the padded input.
          const int64_t he = std::min(h0 + p.kernel_h, h + p.pad_h), we = std::min(w0 + p.kernel_w, w + p.pad_w);
          const int64_t padded = (he - h0) * (we - w0);
          acc /= static_cast<double>(p.count_include_pad ? padded : count);
        }
        y[static_cast<size_t>((b * oh + i) * ow + j)] = static_cast<float>(acc);
      }
  return y;
}

std::vector<float> naive_linear(const std::vector<float>& x, int64_t n, int64_t in, const std::vector<float>& w,
                                int64_t o, const std::vector<float>* bias) {
  std::vector<float> y(static_cast<size_t>(n * o));
  for (int64_t b = 0; b < n; ++b)
    for (int64_t k = 0; k < o; ++k) {
      double acc = bias ? (*bias)[static_cast<size_t>(k)] : 0.0;
      for (int64_t i = 0; i < in; ++i) {
        acc += static_cast<double>(x[static_cast<size_t>(b * in + i)]) * w[static_cast<size_t>(k * in + i)];
      }
      y[static_cast<size_t>(b * o + k)] = static_cast<float>(acc);
    }
  return y;
}

double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return std::numeric_limits<double>::infinity();
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    m = std::max(m, std::abs(static_cast<double>(a[i]) - b[i]) / (1.0 + std::abs(static_cast<double>(b[i]))));
  }
  return m;
}

Conv2dParams conv_params(int64_t stride, int64_t pad, int64_t dil, int64_t groups) {
  Conv2dParams p;
  p.stride_h = p.stride_w = stride;
  p.pad_h = p.pad_w = pad;
  p.dilation_h = p.dilation_w = dil;
  p.groups = groups;
  return p;
}

Pool2dParams pool_params(int64_t k, int64_t s, int64_t pad, bool include_pad) {
  Pool2dParams p;
  p.kernel_h = p.kernel_w = k;
  p.stride_h = p.stride_w = s;
  p.pad_h = p.pad_w = pad;
  p.count_include_pad = include_pad;
  return p;
}

Tensor away_from_kinks(const Shape& shape, uint64_t seed, float ceiling, bool requires_grad) {
  std::vector<float> v = uniform(shape_numel(shape), seed, -1.0f, 2.0f * ceiling);
  for (float& e : v) {
    if (std::abs(e) < 0.05f) e = e < 0.0f ? -0.05f - 0.3f : 0.05f + 0.1f;
    if (std::abs(e - ceiling) < 0.05f) e = ceiling + (e < ceiling ? -0.1f : 0.1f);
  }
  Tensor t = Tensor::from_vector(shape, v);
  t.set_requires_grad(requires_grad);
  return t;
}

Tensor rois_of(const std::vector<std::vector<float>>& rows) {
  std::vector<float> v;
  for (const auto& r : rows) v.insert(v.end(), r.begin(), r.end());
  return Tensor::from_vector({static_cast<int64_t>(rows.size()), 5}, v);
}

}  // namespace ts::engine::testing
