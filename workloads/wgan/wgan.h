#pragma once
// WGAN-GP (Gulrajani et al. 2017, "Improved Training of Wasserstein GANs") with the ResNet
// generator and critic of the paper's 64x64 experiments (gan_64x64.py, ResnetGenerator and
// ResnetDiscriminator): residual blocks that upsample (nearest, then conv) in the generator
// with batch norm, and mean-pool in the critic without normalisation; Adam (lr 1e-4, betas
// 0.0/0.9), lambda 10, five critic steps per generator step. The gradient penalty takes true
// second-order gradients through the critic. Module names follow the paper's code
// (generator.res1.conv1, critic.res4.shortcut, critic.output).
#include <memory>
#include <string>
#include <vector>

#include "engine/nn/layers.h"
#include "engine/optim/adam.h"
#include "workloads/workload.h"

namespace ts::workloads {

struct WganConfig {
  int64_t dim = 64;     // DIM of the paper's code: the narrowest width
  int64_t noise = 128;  // latent size
  // Width multipliers from the generator's 4x4 input to its last block (the critic mirrors
  // them): one residual block per step, each doubling (generator) or halving (critic) the
  // grid, so the image side is 4 * 2^(blocks).
  std::vector<int64_t> widths = {8, 8, 4, 2, 1};
  int64_t critic_steps = 5;
  float lambda = 10.0f;
  double lr = 1e-4, beta1 = 0.0, beta2 = 0.9;
  int64_t batch = 64;  // the preset's default images per critic step (--batch overrides)

  int64_t blocks() const { return static_cast<int64_t>(widths.size()) - 1; }
  int64_t image_size() const { return int64_t{4} << blocks(); }
};

// Throws std::invalid_argument for an unknown preset.
WganConfig wgan_config(const std::string& preset);

// Upsampling residual block: shortcut = conv1x1(up(x)); main = conv3x3(relu(bn2(conv3x3(up(relu(bn1(x))))))).
class GeneratorBlock : public engine::nn::Module {
 public:
  GeneratorBlock(int64_t in, int64_t out, engine::Device device, engine::Rng& rng);
  engine::Tensor forward(const engine::Tensor& x) const;

 private:
  std::shared_ptr<engine::nn::Conv2d> shortcut_, conv1_, conv2_;
  std::shared_ptr<engine::nn::BatchNorm2d> bn1_, bn2_;
};

// Mean-pooling residual block: shortcut = conv1x1(pool(x)); main = pool(conv3x3(relu(conv3x3(relu(x))))).
class CriticBlock : public engine::nn::Module {
 public:
  CriticBlock(int64_t in, int64_t out, engine::Device device, engine::Rng& rng);
  engine::Tensor forward(const engine::Tensor& x) const;

 private:
  std::shared_ptr<engine::nn::Conv2d> shortcut_, conv1_, conv2_;
};

class Generator : public engine::nn::Module {
 public:
  Generator(const WganConfig& cfg, engine::Device device, engine::Rng& rng);
  engine::Tensor forward(const engine::Tensor& z) const;  // [N, noise] -> [N, 3, S, S] in (-1, 1)

 private:
  WganConfig cfg_;
  std::shared_ptr<engine::nn::Linear> input_;
  std::vector<std::shared_ptr<GeneratorBlock>> blocks_;
  std::shared_ptr<engine::nn::BatchNorm2d> output_bn_;
  std::shared_ptr<engine::nn::Conv2d> output_;
};

class Critic : public engine::nn::Module {
 public:
  Critic(const WganConfig& cfg, engine::Device device, engine::Rng& rng);
  engine::Tensor forward(const engine::Tensor& x) const;  // [N, 3, S, S] -> [N, 1]

 private:
  WganConfig cfg_;
  std::shared_ptr<engine::nn::Conv2d> input_;
  std::vector<std::shared_ptr<CriticBlock>> blocks_;
  std::shared_ptr<engine::nn::Linear> output_;
};

// Both networks under one root, so that parameter counts, memory owners and per-layer tables
// cover the whole workload ("generator.res1.conv1", "critic.output").
class Wgan : public engine::nn::Module {
 public:
  Wgan(const WganConfig& cfg, engine::Device device, uint64_t seed);
  Generator& generator() const { return *generator_; }
  Critic& critic() const { return *critic_; }
  const WganConfig& config() const { return cfg_; }

 private:
  WganConfig cfg_;
  std::shared_ptr<Generator> generator_;
  std::shared_ptr<Critic> critic_;
};

WorkloadSpec wgan_spec();

}  // namespace ts::workloads
