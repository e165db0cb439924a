#include "engine/nn/layers.h"

#include <cmath>
#include <stdexcept>

#include "engine/ops.h"
#include "engine/packed_weights.h"

namespace ts::engine::nn {

namespace {
Tensor parameter(const Shape& shape, Device device) {
  return Tensor::empty(shape, device, Layout::plain(), vocabulary::Category::weights);
}
void fill_constant(const Tensor& t, float v) {
  if (!t.device().is_meta()) backend_of(t).fill(t, v);
}
}  // namespace

Conv2dOptions conv_options(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t padding, bool bias,
                           int64_t groups, int64_t dilation) {
  Conv2dOptions o;
  o.in_channels = in;
  o.out_channels = out;
  o.kernel_h = o.kernel_w = kernel;
  o.params.stride_h = o.params.stride_w = stride;
  o.params.pad_h = o.params.pad_w = padding;
  o.params.groups = groups;
  o.params.dilation_h = o.params.dilation_w = dilation;
  o.bias = bias;
  return o;
}

Conv2d::Conv2d(const Conv2dOptions& o, Device device, Rng& rng) : Module(device), o_(o) {
  if (o.in_channels <= 0 || o.out_channels <= 0 || o.params.groups <= 0 || o.in_channels % o.params.groups ||
      o.out_channels % o.params.groups) {
    throw std::invalid_argument("Conv2d: channels " + std::to_string(o.in_channels) + "->" +
                                std::to_string(o.out_channels) + " do not divide into " +
                                std::to_string(o.params.groups) + " groups");
  }
  Tensor w = parameter({o.out_channels, o.in_channels / o.params.groups, o.kernel_h, o.kernel_w}, device);
  const double fan_out = static_cast<double>(o.out_channels / o.params.groups) * o.kernel_h * o.kernel_w;
  rng.fill_normal(w, 0.0f, static_cast<float>(std::sqrt(2.0 / fan_out)));
  if (packed_weights() && !device.is_meta()) {  // the same values, in the order the kernels read them
    Backend& be = backend_of(w);
    const Layout packed = be.conv_weights_layout(w.shape(), o.params);
    if (!packed.is_plain()) {
      Tensor p = Tensor::empty(w.shape(), device, packed, vocabulary::Category::weights);
      be.copy(w, p);
      w = p;
    }
  }
  weight_ = register_parameter("weight", w);
  if (o.bias) {
    Tensor b = parameter({o.out_channels}, device);
    fill_constant(b, 0.0f);
    bias_ = register_parameter("bias", b);
  }
}

Tensor Conv2d::forward(const Tensor& x) const {
  auto s = scope();
  return ops::conv2d(x, weight_, bias_, o_.params);
}

BatchNorm2d::BatchNorm2d(int64_t channels, Device device, float momentum, float eps)
    : Module(device), momentum_(momentum), eps_(eps) {
  Tensor g = parameter({channels}, device), b = parameter({channels}, device);
  fill_constant(g, 1.0f);
  fill_constant(b, 0.0f);
  gamma_ = register_parameter("weight", g);
  beta_ = register_parameter("bias", b);
  // Running statistics are state, not weights: they get no gradient and are not counted.
  Tensor rm = Tensor::empty({channels}, device, Layout::plain(), vocabulary::Category::other);
  Tensor rv = Tensor::empty({channels}, device, Layout::plain(), vocabulary::Category::other);
  fill_constant(rm, 0.0f);
  fill_constant(rv, 1.0f);
  running_mean_ = register_buffer("running_mean", rm);
  running_var_ = register_buffer("running_var", rv);
}

Tensor BatchNorm2d::forward(const Tensor& x) const {
  auto s = scope();
  return ops::batch_norm(x, gamma_, beta_, running_mean_, running_var_, training(), momentum_, eps_);
}

Tensor BatchNorm2d::forward_relu(const Tensor& x) const {
  auto s = scope();
  return ops::batch_norm_relu(x, gamma_, beta_, running_mean_, running_var_, training(), momentum_, eps_);
}

Linear::Linear(int64_t in_features, int64_t out_features, Device device, Rng& rng, bool bias) : Module(device) {
  const float bound = 1.0f / std::sqrt(static_cast<float>(in_features));
  Tensor w = parameter({out_features, in_features}, device);
  rng.fill_uniform(w, -bound, bound);
  weight_ = register_parameter("weight", w);
  if (bias) {
    Tensor b = parameter({out_features}, device);
    rng.fill_uniform(b, -bound, bound);
    bias_ = register_parameter("bias", b);
  }
}

Tensor Linear::forward(const Tensor& x) const {
  auto s = scope();
  return ops::linear(x, weight_, bias_);
}

LayerNorm::LayerNorm(int64_t features, Device device, float eps) : Module(device), eps_(eps) {
  Tensor g = parameter({features}, device), b = parameter({features}, device);
  fill_constant(g, 1.0f);
  fill_constant(b, 0.0f);
  gamma_ = register_parameter("weight", g);
  beta_ = register_parameter("bias", b);
}

Tensor LayerNorm::forward(const Tensor& x) const {
  auto s = scope();
  return ops::layer_norm(x, gamma_, beta_, eps_);
}

Embedding::Embedding(int64_t vocab, int64_t dim, Device device, Rng& rng) : Module(device) {
  Tensor w = parameter({vocab, dim}, device);
  rng.fill_normal(w, 0.0f, static_cast<float>(1.0 / std::sqrt(static_cast<double>(dim))));
  weight_ = register_parameter("weight", w);
}

Tensor Embedding::forward(const Tensor& ids) const {
  auto s = scope();
  Shape out = ids.shape();
  out.push_back(weight_.size(1));
  return ops::reshape(ops::index_select_rows(weight_, ops::reshape(ids, {ids.numel()})), out);
}

}  // namespace ts::engine::nn
