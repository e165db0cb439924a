#include "workloads/wgan/wgan.h"

#include <stdexcept>

#include "engine/autograd.h"
#include "engine/backend.h"
#include "engine/context.h"
#include "engine/ops.h"
#include "engine/random.h"
#include "workloads/data/scene_images.h"

namespace ts::workloads {

using engine::Device;
using engine::Rng;
using engine::Tensor;
namespace nn = engine::nn;
namespace ops = engine::ops;

WganConfig wgan_config(const std::string& preset) {
  WganConfig c;
  if (preset == "full") return c;  // the paper's 64x64 model, DIM 64
  if (preset == "small") {
    c.dim = 16;  // same topology at a quarter of the widths: 0.2-2 s per iteration on 2 cores
    c.batch = 8;
    return c;
  }
  if (preset == "tiny") {
    c.dim = 8;
    c.noise = 32;
    c.widths = {2, 2, 1};  // two blocks each: 16x16 images
    c.lr = 2e-4;
    c.batch = 16;
    return c;
  }
  throw std::invalid_argument("unknown wgan preset '" + preset + "' (tiny, small, full)");
}

namespace {

nn::Conv2dOptions conv3x3(int64_t in, int64_t out, bool bias) { return nn::conv_options(in, out, 3, 1, 1, bias); }
nn::Conv2dOptions conv1x1(int64_t in, int64_t out) { return nn::conv_options(in, out, 1, 1, 0, true); }

engine::Pool2dParams mean_pool() {
  engine::Pool2dParams p;
  p.kernel_h = p.kernel_w = 2;
  p.stride_h = p.stride_w = 2;
  return p;
}

}  // namespace

// ---------------------------------------------------------------- blocks

GeneratorBlock::GeneratorBlock(int64_t in, int64_t out, Device device, Rng& rng) : Module(device) {
  // The paper's code: shortcut without He init but with bias; conv1 without bias; conv2 with.
  shortcut_ = register_module("shortcut", std::make_shared<nn::Conv2d>(conv1x1(in, out), device, rng));
  bn1_ = register_module("bn1", std::make_shared<nn::BatchNorm2d>(in, device));
  conv1_ = register_module("conv1", std::make_shared<nn::Conv2d>(conv3x3(in, out, false), device, rng));
  bn2_ = register_module("bn2", std::make_shared<nn::BatchNorm2d>(out, device));
  conv2_ = register_module("conv2", std::make_shared<nn::Conv2d>(conv3x3(out, out, true), device, rng));
}

Tensor GeneratorBlock::forward(const Tensor& x) const {
  auto s = scope();
  // UpsampleConv = nearest 2x (the code's depth-to-space of four copies) then a conv.
  Tensor shortcut = shortcut_->forward(ops::upsample_nearest2d(x, 2));
  Tensor h = bn1_->forward_relu(x);
  h = conv1_->forward(ops::upsample_nearest2d(h, 2));
  h = conv2_->forward(bn2_->forward_relu(h));
  return ops::add(shortcut, h);
}

CriticBlock::CriticBlock(int64_t in, int64_t out, Device device, Rng& rng) : Module(device) {
  shortcut_ = register_module("shortcut", std::make_shared<nn::Conv2d>(conv1x1(in, out), device, rng));
  conv1_ = register_module("conv1", std::make_shared<nn::Conv2d>(conv3x3(in, in, false), device, rng));
  conv2_ = register_module("conv2", std::make_shared<nn::Conv2d>(conv3x3(in, out, true), device, rng));
}

Tensor CriticBlock::forward(const Tensor& x) const {
  auto s = scope();
  // MeanPoolConv for the shortcut, ConvMeanPool for the second conv; no normalisation in
  // the critic (batch norm would break the per-sample gradient penalty).
  Tensor shortcut = shortcut_->forward(ops::avg_pool2d(x, mean_pool()));
  Tensor h = conv1_->forward(ops::relu(x));
  h = ops::avg_pool2d(conv2_->forward(ops::relu(h)), mean_pool());
  return ops::add(shortcut, h);
}

// ---------------------------------------------------------------- networks

Generator::Generator(const WganConfig& cfg, Device device, Rng& rng) : Module(device), cfg_(cfg) {
  const int64_t first = cfg.widths.front() * cfg.dim;
  input_ = register_module("input", std::make_shared<nn::Linear>(cfg.noise, 4 * 4 * first, device, rng));
  for (int64_t b = 0; b < cfg.blocks(); ++b) {
    const auto i = static_cast<size_t>(b);
    blocks_.push_back(register_module(
        "res" + std::to_string(b + 1),
        std::make_shared<GeneratorBlock>(cfg.widths[i] * cfg.dim, cfg.widths[i + 1] * cfg.dim, device, rng)));
  }
  const int64_t last = cfg.widths.back() * cfg.dim;
  output_bn_ = register_module("output_bn", std::make_shared<nn::BatchNorm2d>(last, device));
  output_ = register_module("output", std::make_shared<nn::Conv2d>(conv3x3(last, 3, true), device, rng));
}

Tensor Generator::forward(const Tensor& z) const {
  auto s = scope();
  Tensor h = ops::reshape(input_->forward(z), {z.size(0), cfg_.widths.front() * cfg_.dim, 4, 4});
  for (const auto& b : blocks_) h = b->forward(h);
  h = output_->forward(output_bn_->forward_relu(h));
  return ops::tanh(h);
}

Critic::Critic(const WganConfig& cfg, Device device, Rng& rng) : Module(device), cfg_(cfg) {
  // The critic mirrors the generator's widths: dim at the image, widths.front() x dim at 4x4.
  const int64_t nb = cfg.blocks();
  auto width = [&](int64_t level) { return cfg.widths[static_cast<size_t>(nb - level)] * cfg.dim; };
  input_ = register_module("input", std::make_shared<nn::Conv2d>(conv3x3(3, width(0), true), device, rng));
  for (int64_t b = 0; b < nb; ++b) {
    blocks_.push_back(register_module("res" + std::to_string(b + 1),
                                      std::make_shared<CriticBlock>(width(b), width(b + 1), device, rng)));
  }
  output_ = register_module("output", std::make_shared<nn::Linear>(4 * 4 * width(nb), 1, device, rng));
}

Tensor Critic::forward(const Tensor& x) const {
  auto s = scope();
  Tensor h = input_->forward(x);
  for (const auto& b : blocks_) h = b->forward(h);
  return output_->forward(ops::flatten(h));
}

Wgan::Wgan(const WganConfig& cfg, Device device, uint64_t seed) : Module(device), cfg_(cfg) {
  if (cfg.widths.size() < 2 || cfg.dim < 1 || cfg.noise < 1 || cfg.critic_steps < 1) {
    throw std::invalid_argument("wgan: needs at least one block, positive dim, noise and critic steps");
  }
  Rng rng(seed);
  generator_ = register_module("generator", std::make_shared<Generator>(cfg, device, rng));
  critic_ = register_module("critic", std::make_shared<Critic>(cfg, device, rng));
}

// ---------------------------------------------------------------- the workload

namespace {

engine::optim::AdamOptions adam_options(const WganConfig& c) {
  engine::optim::AdamOptions o;
  o.lr.base_lr = c.lr;  // constant, as in the paper's 64x64 runs
  o.beta1 = c.beta1;
  o.beta2 = c.beta2;
  return o;
}

// Turns a network's parameters' requires_grad off for a scope: the generator step needs
// gradients through the critic, not of it.
class FrozenScope {
 public:
  explicit FrozenScope(std::vector<Tensor> params) : params_(std::move(params)) {
    for (auto& p : params_) p.set_requires_grad(false);
  }
  ~FrozenScope() {
    for (auto& p : params_) p.set_requires_grad(true);
  }
  FrozenScope(const FrozenScope&) = delete;
  FrozenScope& operator=(const FrozenScope&) = delete;

 private:
  std::vector<Tensor> params_;
};

class WganWorkload final : public Workload {
 public:
  // The model from `seed`; the data (real images, and the noise and interpolation weights the
  // steps draw) from the shard's streams (shard.h): `seed`'s own at world size 1.
  WganWorkload(const WganConfig& cfg, int64_t batch, uint64_t seed, Device device, DataShard shard = {})
      : cfg_(cfg),
        batch_(batch),
        device_(device),
        model_(std::make_shared<Wgan>(cfg, device, seed)),
        data_(cfg.image_size(), seed, device, shard),
        g_opt_(model_->generator().parameters(), adam_options(cfg)),
        c_opt_(model_->critic().parameters(), adam_options(cfg)),
        rng_(shard_seed(seed, shard) ^ 0x6a09e667f3bcc908ULL) {
    if (batch <= 0) throw std::invalid_argument("batch size must be positive");
  }

  nn::Module& model() override { return *model_; }
  int64_t batch_size() const override { return batch_; }
  double learning_rate() const override { return g_opt_.current_lr(); }

  // Data parallelism averages each network's gradients after its own backward: group 0 the
  // critic (critic steps), group 1 the generator (the generator step, whose backward also runs
  // through the critic, frozen: its parameters get no gradient there).
  std::vector<std::vector<Tensor>> gradient_groups() override {
    return {model_->critic().parameters(), model_->generator().parameters()};
  }
  static constexpr int kCriticGroup = 0, kGeneratorGroup = 1;
  // In gradient_groups()' order; neither step clips.
  std::vector<engine::optim::OptimizerRecipe> optimizer_recipes() override {
    return {engine::optim::adam_recipe(c_opt_.options()), engine::optim::adam_recipe(g_opt_.options())};
  }

  // A critic step's real images (labels undefined): what the next critic step draws.
  Batch next_batch() override { return Batch{data_.next_train(batch_), Tensor(), batch_}; }

  // One iteration = critic_steps critic updates, then one generator update (the paper's
  // Algorithm 1). Reported loss: the last critic loss, E[D(fake)] - E[D(real)] + lambda GP.
  // Its samples are the generator's (one batch per iteration), as GAN benchmarks count them;
  // the critic's real images are critic_steps times that.
  // The loss is read once, after the generator step: a read waits for the device, and one per
  // critic step would stall a GPU five times an iteration.
  StepResult step(Phases& phases) override {
    Tensor critic_loss;
    for (int64_t k = 0; k < cfg_.critic_steps; ++k) critic_loss = critic_step(phases);
    generator_step(phases);
    return {static_cast<double>(critic_loss.item()), batch_};
  }

  // Distance between the statistics of generated and held-out images (scene_images.h): it
  // falls as the generator learns the distribution. The generator samples with batch
  // statistics, as it does in training (and as the paper's code samples).
  Quality evaluate(int64_t batches) override {
    const int64_t nb = batches > 0 ? batches : 4;
    const int64_t s = cfg_.image_size();
    std::vector<float> real, fake;
    engine::NoGradScope no_grad;
    Rng rng(0x9b05688c2b3e6c1fULL);  // the same noise at every evaluation
    for (int64_t b = 0; b < nb; ++b) {
      const std::vector<float> r = data_.heldout(b, batch_).to_vector();
      real.insert(real.end(), r.begin(), r.end());
      const std::vector<float> f = model_->generator().forward(noise(rng, batch_)).to_vector();
      fake.insert(fake.end(), f.begin(), f.end());
    }
    const double d =
        statistics_distance(image_statistics(fake, nb * batch_, s), image_statistics(real, nb * batch_, s));
    return {"image_stat_distance", d, "", false};
  }

 private:
  Tensor noise(Rng& rng, int64_t n) const {
    engine::CategoryScope category(vocabulary::Category::inputs);
    Tensor z = Tensor::empty({n, cfg_.noise}, device_);
    rng.fill_normal(z, 0.0f, 1.0f);
    return z;
  }

  // Returns the step's loss, detached (its graph is freed with the step), not yet read.
  Tensor critic_step(Phases& phases) {
    Tensor real, z, eps;
    phases.data([&] {
      real = next_batch().inputs;
      z = noise(rng_, batch_);
      // One interpolation weight per sample, broadcast over its pixels.
      std::vector<float> e(static_cast<size_t>(real.numel()));
      const size_t per = e.size() / static_cast<size_t>(batch_);
      for (size_t n = 0; n < static_cast<size_t>(batch_); ++n) {
        const auto v = static_cast<float>(rng_.uniform());
        std::fill(e.begin() + static_cast<std::ptrdiff_t>(n * per),
                  e.begin() + static_cast<std::ptrdiff_t>((n + 1) * per), v);
      }
      eps = Tensor::from_vector(real.shape(), e, device_);
    });
    Tensor loss;
    phases.forward([&] {
      Critic& critic = model_->critic();
      Tensor fake;
      {
        engine::NoGradScope no_grad;  // the critic step does not train the generator
        fake = model_->generator().forward(z);
      }
      Tensor d_real = critic.forward(real);
      Tensor d_fake = critic.forward(fake);
      Tensor xhat;
      {
        engine::NoGradScope no_grad;
        xhat = ops::add(fake, ops::mul(ops::add(real, ops::scale(fake, -1.0f)), eps));
      }
      xhat.set_requires_grad(true);
      Tensor d_hat = critic.forward(xhat);
      // The penalty is a function of the critic's gradient: create_graph records that backward
      // so that the loss's backward differentiates through it (second order).
      Tensor gx = engine::grad({ops::sum(d_hat)}, {xhat}, {}, /*create_graph=*/true)[0];
      static const std::string loss_path = "loss";
      static const auto loss_id = engine::op_name(loss_path);
      engine::OwnerScope owner(&loss_path, loss_id);
      Tensor penalty = ops::norm_penalty(gx, 1.0f);
      loss =
          ops::add(ops::add(ops::mean(d_fake), ops::scale(ops::mean(d_real), -1.0f)), ops::scale(penalty, cfg_.lambda));
    });
    phases.backward([&] { loss.backward(); }, kCriticGroup);
    phases.optimizer([&] {
      c_opt_.step();
      c_opt_.zero_grad();
    });
    return loss.detach();
  }

  void generator_step(Phases& phases) {
    Tensor z, loss;
    phases.data([&] { z = noise(rng_, batch_); });
    FrozenScope frozen(model_->critic().parameters());
    phases.forward([&] {
      Tensor d_fake = model_->critic().forward(model_->generator().forward(z));
      loss = ops::scale(ops::mean(d_fake), -1.0f);
    });
    phases.backward([&] { loss.backward(); }, kGeneratorGroup);
    phases.optimizer([&] {
      g_opt_.step();
      g_opt_.zero_grad();
    });
  }

  WganConfig cfg_;
  int64_t batch_;
  Device device_;
  std::shared_ptr<Wgan> model_;
  SceneImages data_;
  engine::optim::Adam g_opt_, c_opt_;
  Rng rng_;
};

std::string join_widths(const WganConfig& c, bool critic) {
  std::string s;
  const auto n = c.widths.size();
  for (size_t i = 0; i < n; ++i) {
    if (!s.empty()) s += ",";
    s += std::to_string(c.widths[critic ? n - 1 - i : i] * c.dim);
  }
  return s;
}

std::string image_side(const WganConfig& c) {
  return std::to_string(c.image_size()) + "x" + std::to_string(c.image_size());
}

PresetTable describe(const WganConfig& c) {
  const engine::optim::AdamOptions adam = adam_options(c);
  return {
      {"architecture", "WGAN-GP ResNet generator and critic (Gulrajani et al. 2017, gan_64x64.py)"},
      {"image_size", image_side(c) + "x3, values in [-1, 1]"},
      {"dim", std::to_string(c.dim)},
      {"noise", std::to_string(c.noise) + " standard normal"},
      {"generator_channels", "linear -> 4x4x" + std::to_string(c.widths.front() * c.dim) + ", blocks to " +
                                 join_widths(c, false) + " (each up 2x), BN, ReLU, conv3x3 -> 3, tanh"},
      {"generator_block", "shortcut up2 + conv1x1 (bias); BN, ReLU, up2, conv3x3 (no bias), BN, ReLU, conv3x3 (bias)"},
      {"critic_channels", "conv3x3 3 -> " + std::to_string(c.widths.back() * c.dim) + ", blocks to " +
                              join_widths(c, true) + " (each mean-pool 2x), linear 4x4x" +
                              std::to_string(c.widths.front() * c.dim) + " -> 1"},
      {"critic_block", "shortcut mean-pool + conv1x1 (bias); ReLU, conv3x3 (no bias), ReLU, conv3x3 (bias), mean-pool"},
      {"normalisation", "batch norm (eps 1e-5) in the generator, none in the critic"},
      {"upsampling", "nearest 2x (equals the code's depth-to-space of 4 copies)"},
      {"init", "conv Kaiming-normal fan_out, linear uniform +-1/sqrt(fan_in) (the paper's code: He/Glorot uniform)"},
      {"loss", "critic: E[D(G(z))] - E[D(x)] + lambda E[(||grad D(x_hat)||_2 - 1)^2], x_hat = e x + (1 - e) G(z), "
               "e ~ U[0, 1] per sample; generator: -E[D(G(z))]"},
      {"lambda", table_number(c.lambda)},
      {"critic_steps", std::to_string(c.critic_steps) + " per generator step (one iteration)"},
      {"optimizer", "Adam lr " + table_number(adam.lr.base_lr) + ", betas " + table_number(adam.beta1) + "/" +
                        table_number(adam.beta2) + ", eps " + table_exponent(adam.eps) +
                        ", constant (separate for each network)"},
      {"samples_per_iteration", "batch x critic_steps real images"},
      {"data", "synthetic scenes (a sky gradient and a coloured disc); quality: image-statistics distance"},
      {"batch_size", std::to_string(c.batch)}};
}

// `summary` writes the one-line text around the configuration's numbers.
Preset make_preset(const std::string& name, std::string (*summary)(const WganConfig&)) {
  const WganConfig c = wgan_config(name);
  return {name, summary(c), c.batch, describe(c)};
}

}  // namespace

WorkloadSpec wgan_spec() {
  WorkloadSpec s;
  s.name = "wgan";
  s.domain = "image generation";
  s.units = {"generator samples", "", "images", false};
  const WganConfig full = wgan_config("full");
  s.description = "WGAN-GP with the ResNet generator and critic (" + image_side(full) +
                  "), gradient penalty through second-order gradients, " + std::to_string(full.critic_steps) +
                  " critic steps per generator step, Adam";
  s.presets = {make_preset("tiny",
                           [](const WganConfig& c) {
                             return image_side(c) + " images, two blocks per network, dim " + std::to_string(c.dim) +
                                    ": tests";
                           }),
               make_preset("small",
                           [](const WganConfig& c) {
                             return "the full topology (" + image_side(c) + ", four blocks per network) at dim " +
                                    std::to_string(c.dim) + ": CPU benchmarking";
                           }),
               make_preset("full", [](const WganConfig& c) {
                 return image_side(c) + ", dim " + std::to_string(c.dim) +
                        ": the paper's model (generator 8,540,483, critic 7,488,001 parameters)";
               })};
  s.check = [](const WorkloadConfig& wc) {
    data_shard(wc, "wgan");
    if (wc.data != "synthetic") {
      throw std::invalid_argument("wgan trains on its synthetic scenes only (--data synthetic), got '" + wc.data + "'");
    }
  };
  s.build = [](const WorkloadConfig& wc) -> std::unique_ptr<Workload> {
    const WganConfig cfg = wgan_config(wc.preset);
    const int64_t batch = *wc.batch;
    return std::make_unique<WganWorkload>(cfg, batch, wc.seed, wc.device, data_shard(wc, "wgan"));
  };
  return s;
}

}  // namespace ts::workloads
