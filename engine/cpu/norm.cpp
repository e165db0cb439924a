// The norm family on the CPU: batch normalisation on oneDNN, in whatever layout the input has;
// layer normalisation over the last dimension of a plain [M, D] as plain loops (statistics in
// double).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/cpu/cpu_common.h"
#include "engine/cpu/dnnl_common.h"
#include "engine/cpu/dnnl_primitives.h"

namespace ts::engine::cpu {

namespace {

// [N, C] is normalised as [N, C, 1, 1] (same memory).
Shape bn_shape(const Shape& s, const char* op) {
  if (s.size() == 4) return s;
  if (s.size() == 2) return {s[0], s[1], 1, 1};
  throw std::invalid_argument(std::string(op) + ": expected [N, C, H, W] or [N, C], got " + shape_str(s));
}

Layout bn_layout(const Tensor& x) { return x.dim() == 2 ? Layout::plain() : x.layout(); }

void check_channel_vec(const Tensor& t, int64_t c, const char* op, const char* what) {
  check_cpu(t, op);
  if (t.dim() != 1 || t.size(0) != c || !t.layout().is_plain()) {
    throw std::invalid_argument(std::string(op) + ": " + what + " " + shape_str(t.shape()) + " for " +
                                std::to_string(c) + " channels");
  }
}

// Training and evaluation (their keys differ).
struct BnForwardEntry {
  dnnl::batch_normalization_forward::primitive_desc pd;
  dnnl::batch_normalization_forward prim;
};

struct BnBwdEntry {
  dnnl::batch_normalization_backward::primitive_desc pd;
  dnnl::batch_normalization_backward prim;
};

md vec_md(int64_t c) { return md({c}, f32, tag::a); }

}  // namespace

namespace {

// Training batch norm, with a ReLU fused after it where `relu` (its mask: oneDNN's workspace).
BatchNormStats bn_train(CpuBackend::Impl& im, const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps,
                        bool relu) {
  const char* op = relu ? "batch_norm_relu" : "batch_norm";
  check_cpu(x, op);
  const Shape s = bn_shape(x.shape(), op);
  const int64_t c = s[1];
  check_channel_vec(gamma, c, op, "gamma");
  check_channel_vec(beta, c, op, "beta");
  const Layout l = bn_layout(x);
  auto e = im.get<BnForwardEntry>(
      Key("bn_train") << s << l << static_cast<int64_t>(eps * 1e9f) << static_cast<int64_t>(relu), [&] {
        auto pd = dnnl_pd::batch_norm_forward(im.eng, md_for(s, l), eps, true, false, relu);
        return std::make_shared<BnForwardEntry>(BnForwardEntry{pd, dnnl::batch_normalization_forward(pd)});
      });
  BatchNormStats r;
  r.y = Tensor::empty(x.shape(), x.device(), x.layout());
  r.mean = Tensor::empty({c}, x.device());
  r.var = Tensor::empty({c}, x.device());
  const md data = e->pd.src_desc();
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, memory(data, im.eng, x.data())},
                                       {DNNL_ARG_DST, memory(data, im.eng, r.y.data())},
                                       {DNNL_ARG_SCALE, memory(vec_md(c), im.eng, gamma.data())},
                                       {DNNL_ARG_SHIFT, memory(vec_md(c), im.eng, beta.data())},
                                       {DNNL_ARG_MEAN, memory(vec_md(c), im.eng, r.mean.data())},
                                       {DNNL_ARG_VARIANCE, memory(vec_md(c), im.eng, r.var.data())},
                                       {DNNL_ARG_SCRATCHPAD, im.scratchpad(e->pd.scratchpad_desc())}};
  if (relu) {  // kept for backward, as the activations are
    r.relu_mask = temp_buffer(e->pd.workspace_desc().get_size(), vocabulary::Category::activations);
    args.emplace(DNNL_ARG_WORKSPACE, memory(e->pd.workspace_desc(), im.eng, r.relu_mask.data()));
  }
  im.run(e->prim, args);
  return r;
}

// The backward of either; `relu_mask` (the fused ReLU's workspace) defined iff the forward fused one.
BatchNormGrads bn_backward(CpuBackend& be, CpuBackend::Impl& im, const Tensor& dy_in, const Tensor& x,
                           const Tensor& gamma, const Tensor& mean, const Tensor& var, float eps, bool use_global_stats,
                           const Tensor& relu_mask) {
  const bool relu = relu_mask.defined();
  const char* op = relu ? "batch_norm_relu_backward" : "batch_norm_backward";
  check_cpu(dy_in, op);
  check_cpu(x, op);
  if (dy_in.shape() != x.shape()) {
    throw std::invalid_argument(std::string(op) + ": dy " + shape_str(dy_in.shape()) + " vs x " + shape_str(x.shape()));
  }
  const Shape s = bn_shape(x.shape(), op);
  const int64_t c = s[1];
  check_channel_vec(gamma, c, op, "gamma");
  check_channel_vec(mean, c, op, "mean");
  check_channel_vec(var, c, op, "var");
  const Tensor dy = dy_in.layout() == x.layout() ? dy_in : be.to_layout(dy_in, x.layout());
  const Layout l = bn_layout(x);
  auto e = im.get<BnBwdEntry>(
      Key("bn_bwd") << s << l << static_cast<int64_t>(eps * 1e9f) << static_cast<int64_t>(use_global_stats)
                    << static_cast<int64_t>(relu),
      [&] {
        const md data = md_for(s, l);
        auto hint = dnnl_pd::batch_norm_forward(im.eng, data, eps, true, use_global_stats, relu);
        const auto pd = dnnl_pd::batch_norm_backward(im.eng, data, eps, use_global_stats, hint, relu);
        return std::make_shared<BnBwdEntry>(BnBwdEntry{pd, dnnl::batch_normalization_backward(pd)});
      });
  if (relu && static_cast<size_t>(relu_mask.nbytes()) < e->pd.workspace_desc().get_size()) {
    throw std::invalid_argument(std::string(op) + ": the ReLU mask is not this shape's workspace");
  }
  BatchNormGrads r;
  r.dx = Tensor::empty(x.shape(), x.device(), x.layout());
  r.dgamma = Tensor::empty({c}, x.device());
  r.dbeta = Tensor::empty({c}, x.device());
  const md data = e->pd.src_desc();
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, memory(data, im.eng, x.data())},
                                       {DNNL_ARG_DIFF_DST, memory(data, im.eng, dy.data())},
                                       {DNNL_ARG_MEAN, memory(vec_md(c), im.eng, mean.data())},
                                       {DNNL_ARG_VARIANCE, memory(vec_md(c), im.eng, var.data())},
                                       {DNNL_ARG_SCALE, memory(vec_md(c), im.eng, gamma.data())},
                                       // oneDNN 2.6 asks for the shift too, though the gradients do not depend on it.
                                       {DNNL_ARG_SHIFT, memory(vec_md(c), im.eng, gamma.data())},
                                       {DNNL_ARG_DIFF_SRC, memory(data, im.eng, r.dx.data())},
                                       {DNNL_ARG_DIFF_SCALE, memory(vec_md(c), im.eng, r.dgamma.data())},
                                       {DNNL_ARG_DIFF_SHIFT, memory(vec_md(c), im.eng, r.dbeta.data())},
                                       {DNNL_ARG_SCRATCHPAD, im.scratchpad(e->pd.scratchpad_desc())}};
  if (relu) args.emplace(DNNL_ARG_WORKSPACE, memory(e->pd.workspace_desc(), im.eng, relu_mask.data()));
  im.run(e->prim, args);
  return r;
}

}  // namespace

BatchNormStats CpuBackend::batch_norm_forward_train(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                                    float eps) {
  return bn_train(*impl_, x, gamma, beta, eps, false);
}

BatchNormStats CpuBackend::batch_norm_relu_forward_train(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                                         float eps) {
  return bn_train(*impl_, x, gamma, beta, eps, true);
}

Tensor CpuBackend::batch_norm_forward_eval(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                           const Tensor& running_mean, const Tensor& running_var, float eps) {
  check_cpu(x, "batch_norm");
  const Shape s = bn_shape(x.shape(), "batch_norm");
  const int64_t c = s[1];
  check_channel_vec(gamma, c, "batch_norm", "gamma");
  check_channel_vec(beta, c, "batch_norm", "beta");
  check_channel_vec(running_mean, c, "batch_norm", "running_mean");
  check_channel_vec(running_var, c, "batch_norm", "running_var");
  auto& im = *impl_;
  const Layout l = bn_layout(x);
  auto e = im.get<BnForwardEntry>(Key("bn_eval") << s << l << static_cast<int64_t>(eps * 1e9f), [&] {
    auto pd = dnnl_pd::batch_norm_forward(im.eng, md_for(s, l), eps, false, true);
    return std::make_shared<BnForwardEntry>(BnForwardEntry{pd, dnnl::batch_normalization_forward(pd)});
  });
  Tensor y = Tensor::empty(x.shape(), x.device(), x.layout());
  const md data = e->pd.src_desc();
  im.run(e->prim, {{DNNL_ARG_SRC, memory(data, im.eng, x.data())},
                   {DNNL_ARG_DST, memory(data, im.eng, y.data())},
                   {DNNL_ARG_SCALE, memory(vec_md(c), im.eng, gamma.data())},
                   {DNNL_ARG_SHIFT, memory(vec_md(c), im.eng, beta.data())},
                   {DNNL_ARG_MEAN, memory(vec_md(c), im.eng, running_mean.data())},
                   {DNNL_ARG_VARIANCE, memory(vec_md(c), im.eng, running_var.data())},
                   {DNNL_ARG_SCRATCHPAD, im.scratchpad(e->pd.scratchpad_desc())}});
  return y;
}

BatchNormGrads CpuBackend::batch_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                                               const Tensor& mean, const Tensor& var, float eps,
                                               bool use_global_stats) {
  return bn_backward(*this, *impl_, dy, x, gamma, mean, var, eps, use_global_stats, Tensor());
}

BatchNormGrads CpuBackend::batch_norm_relu_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                                                    const Tensor& mean, const Tensor& var, float eps,
                                                    const Tensor& relu_mask) {
  if (!relu_mask.defined()) throw std::invalid_argument("batch_norm_relu_backward: no ReLU mask");
  return bn_backward(*this, *impl_, dy, x, gamma, mean, var, eps, false, relu_mask);
}

Backend::LayerNormResult CpuBackend::layer_norm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                                        float eps) {
  check_plain(x, "layer_norm", "x", 2);
  check_plain(gamma, "layer_norm", "gamma", 1);
  check_plain(beta, "layer_norm", "beta", 1);
  const int64_t m = x.size(0), d = x.size(1);
  if (gamma.size(0) != d || beta.size(0) != d) {
    throw std::invalid_argument("layer_norm: gamma/beta " + shape_str(gamma.shape()) + " for x " +
                                shape_str(x.shape()));
  }
  LayerNormResult r{Tensor::empty({m, d}, x.device()), Tensor::empty({m}, x.device()), Tensor::empty({m}, x.device())};
  const float *px = x.data(), *g = gamma.data(), *b = beta.data();
  float *py = r.y.data(), *pm = r.mean.data(), *pr = r.rstd.data();
#pragma omp parallel for if (m * d > kParallelThreshold)
  for (int64_t i = 0; i < m; ++i) {
    const float* row = px + i * d;
    double s = 0;
    for (int64_t k = 0; k < d; ++k) s += row[k];
    const double mean = s / static_cast<double>(d);
    double v = 0;
    for (int64_t k = 0; k < d; ++k) v += (row[k] - mean) * (row[k] - mean);
    const auto rstd = static_cast<float>(1.0 / std::sqrt(v / static_cast<double>(d) + eps));
    const auto mf = static_cast<float>(mean);
    pm[i] = mf;
    pr[i] = rstd;
    for (int64_t k = 0; k < d; ++k) py[i * d + k] = (row[k] - mf) * rstd * g[k] + b[k];
  }
  return r;
}

BatchNormGrads CpuBackend::layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                                               const Tensor& mean, const Tensor& rstd) {
  check_plain(dy, "layer_norm_backward", "dy", 2);
  check_plain(x, "layer_norm_backward", "x", 2);
  if (dy.shape() != x.shape()) throw std::invalid_argument("layer_norm_backward: dy and x shapes differ");
  const int64_t m = x.size(0), d = x.size(1);
  BatchNormGrads r{Tensor::empty({m, d}, x.device()), Tensor::zeros({d}, x.device()), Tensor::zeros({d}, x.device())};
  const float *pdy = dy.data(), *px = x.data(), *g = gamma.data(), *pm = mean.data(), *pr = rstd.data();
  float *pdx = r.dx.data(), *dg = r.dgamma.data(), *db = r.dbeta.data();
#pragma omp parallel if (m * d > kParallelThreshold)
  {
    // Per-thread partial sums for dgamma/dbeta, added under a lock at the end.
    std::vector<double> lg(static_cast<size_t>(d), 0.0), lb(static_cast<size_t>(d), 0.0);
#pragma omp for
    for (int64_t i = 0; i < m; ++i) {
      const float* row = px + i * d;
      const float* gy = pdy + i * d;
      double sum_dxh = 0, sum_dxh_xh = 0;
      for (int64_t k = 0; k < d; ++k) {
        const double xh = (row[k] - pm[i]) * pr[i];
        const double dxh = static_cast<double>(gy[k]) * g[k];
        sum_dxh += dxh;
        sum_dxh_xh += dxh * xh;
        lg[static_cast<size_t>(k)] += gy[k] * xh;
        lb[static_cast<size_t>(k)] += gy[k];
      }
      const double a = sum_dxh / static_cast<double>(d), c = sum_dxh_xh / static_cast<double>(d);
      for (int64_t k = 0; k < d; ++k) {
        const double xh = (row[k] - pm[i]) * pr[i];
        pdx[i * d + k] = static_cast<float>(pr[i] * (static_cast<double>(gy[k]) * g[k] - a - xh * c));
      }
    }
#pragma omp critical
    for (int64_t k = 0; k < d; ++k) {
      dg[k] += static_cast<float>(lg[static_cast<size_t>(k)]);
      db[k] += static_cast<float>(lb[static_cast<size_t>(k)]);
    }
  }
  return r;
}

}  // namespace ts::engine::cpu
