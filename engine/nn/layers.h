#pragma once
// The building blocks the CNN workloads are made of. Initialisation follows torchvision:
// Kaiming-normal (fan_out, relu) for convolutions, ones/zeros for batch norm, and PyTorch's
// default uniform(+-1/sqrt(fan_in)) for linear layers.
#include "engine/backend.h"
#include "engine/nn/module.h"
#include "engine/random.h"

namespace ts::engine::nn {

struct Conv2dOptions {
  int64_t in_channels = 0, out_channels = 0;
  int64_t kernel_h = 1, kernel_w = 1;
  Conv2dParams params;
  bool bias = false;
};

class Conv2d : public Module {
 public:
  Conv2d(const Conv2dOptions& o, Device device, Rng& rng);
  Tensor forward(const Tensor& x) const;
  const Conv2dOptions& options() const { return o_; }
  const Tensor& weight() const { return weight_; }

 private:
  Conv2dOptions o_;
  Tensor weight_, bias_;
};

// Convenience: square kernel, stride, padding.
Conv2dOptions conv_options(int64_t in, int64_t out, int64_t kernel, int64_t stride = 1, int64_t padding = 0,
                           bool bias = false, int64_t groups = 1, int64_t dilation = 1);

class BatchNorm2d : public Module {
 public:
  BatchNorm2d(int64_t channels, Device device, float momentum = 0.1f, float eps = 1e-5f);
  Tensor forward(const Tensor& x) const;
  // relu(forward(x)), fused where the backend can (ops::batch_norm_relu): what conv-BN-ReLU runs.
  Tensor forward_relu(const Tensor& x) const;
  const Tensor& gamma() const { return gamma_; }

 private:
  float momentum_, eps_;
  Tensor gamma_, beta_, running_mean_, running_var_;
};

class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, Device device, Rng& rng, bool bias = true);
  Tensor forward(const Tensor& x) const;

 private:
  Tensor weight_, bias_;
};

// Layer normalisation over the last dimension (gamma ones, beta zeros), as torch.nn.LayerNorm.
class LayerNorm : public Module {
 public:
  LayerNorm(int64_t features, Device device, float eps = 1e-5f);
  Tensor forward(const Tensor& x) const;

 private:
  float eps_;
  Tensor gamma_, beta_;
};

// A lookup table [vocab, dim]: ids (fp32 integers, any shape) -> [..., dim]. Initialised
// N(0, dim^-0.5), as the Transformer implementations that share it with the output layer do.
class Embedding : public Module {
 public:
  Embedding(int64_t vocab, int64_t dim, Device device, Rng& rng);
  Tensor forward(const Tensor& ids) const;
  const Tensor& weight() const { return weight_; }

 private:
  Tensor weight_;
};

}  // namespace ts::engine::nn
