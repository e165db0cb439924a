#include "workloads/inception_v3/inception_v3.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "engine/context.h"
#include "engine/ops.h"
#include "workloads/data/image_data.h"
#include "workloads/image_classifier.h"

namespace ts::workloads {

using engine::Tensor;
namespace nn = engine::nn;
namespace ops = engine::ops;

namespace {

engine::Pool2dParams pool_params(int64_t kernel, int64_t stride, int64_t pad) {
  engine::Pool2dParams p;
  p.kernel_h = p.kernel_w = kernel;
  p.stride_h = p.stride_w = stride;
  p.pad_h = p.pad_w = pad;
  p.count_include_pad = true;  // F.avg_pool2d's default, which torchvision's blocks use
  return p;
}

Tensor max_pool_3x3_s2(const Tensor& x) { return ops::max_pool2d(x, pool_params(3, 2, 0)); }
Tensor avg_pool_3x3_s1(const Tensor& x) { return ops::avg_pool2d(x, pool_params(3, 1, 1)); }

int64_t valid(int64_t in, int64_t kernel, int64_t stride) { return in < kernel ? 0 : (in - kernel) / stride + 1; }

// Grid side after the stem and each reduction, for an input side s.
struct Grids {
  int64_t mixed_5, mixed_6, mixed_7;
};
Grids grids(int64_t s) {
  int64_t g = valid(s, 3, 2);  // Conv2d_1a_3x3, stride 2
  g = valid(g, 3, 1);          // Conv2d_2a_3x3 (2b keeps the size)
  g = valid(g, 3, 2);          // max pool
  g = valid(g, 3, 1);          // Conv2d_4a_3x3 (3b is 1x1)
  Grids r{};
  r.mixed_5 = valid(g, 3, 2);  // max pool
  r.mixed_6 = valid(r.mixed_5, 3, 2);
  r.mixed_7 = valid(r.mixed_6, 3, 2);
  return r;
}

}  // namespace

int64_t inception_channels(int64_t c, double width) {
  return std::max<int64_t>(1, static_cast<int64_t>(std::llround(static_cast<double>(c) * width)));
}

int64_t inception_v3_min_image_size(bool aux_logits) {
  for (int64_t s = 1;; ++s) {
    const Grids g = grids(s);
    // The aux head's 5x5/3 pool must leave a 5x5 map for its 5x5 conv1: a 17x17 grid.
    if (g.mixed_7 >= 1 && (!aux_logits || g.mixed_6 >= 17)) return s;
  }
}

InceptionConfig inception_v3_config(const std::string& preset) {
  InceptionConfig c;
  if (preset == "tiny") {
    c.image_size = 75;
    c.width = 0.125;
    c.num_classes = 10;
    c.aux_logits = false;  // the aux head would force a 299x299 input
    c.batch = 8;
  } else if (preset == "small") {
    c.width = 0.5;
    c.batch = 8;
  } else if (preset != "full") {
    throw std::invalid_argument("inception_v3 has no preset '" + preset + "' (tiny, small, full)");
  }
  return c;
}

// ---------------------------------------------------------------- BasicConv2d

BasicConv2d::BasicConv2d(int64_t in, int64_t out, int64_t kernel_h, int64_t kernel_w, int64_t stride, int64_t pad_h,
                         int64_t pad_w, engine::Device device, engine::Rng& rng)
    : Module(device), out_(out) {
  nn::Conv2dOptions o;
  o.in_channels = in;
  o.out_channels = out;
  o.kernel_h = kernel_h;
  o.kernel_w = kernel_w;
  o.params.stride_h = o.params.stride_w = stride;
  o.params.pad_h = pad_h;
  o.params.pad_w = pad_w;
  o.bias = false;
  conv_ = register_module("conv", std::make_shared<nn::Conv2d>(o, device, rng));
  bn_ = register_module("bn", std::make_shared<nn::BatchNorm2d>(out, device, 0.1f, 0.001f));
}

Tensor BasicConv2d::forward(const Tensor& x) const {
  auto s = scope();
  return bn_->forward_relu(conv_->forward(x));
}

std::shared_ptr<BasicConv2d> InceptionBlock::conv(const std::string& name, int64_t in, int64_t out, int64_t kh,
                                                  int64_t kw, int64_t stride, int64_t ph, int64_t pw,
                                                  engine::Rng& rng) {
  return register_module(
      name, std::make_shared<BasicConv2d>(in, inception_channels(out, width_), kh, kw, stride, ph, pw, device(), rng));
}

// ---------------------------------------------------------------- InceptionA

InceptionA::InceptionA(int64_t in, int64_t pool_features, double width, engine::Device device, engine::Rng& rng)
    : InceptionBlock(device) {
  width_ = width;
  b1x1_ = conv("branch1x1", in, 64, 1, 1, 1, 0, 0, rng);
  b5x5_1_ = conv("branch5x5_1", in, 48, 1, 1, 1, 0, 0, rng);
  b5x5_2_ = conv("branch5x5_2", b5x5_1_->out_channels(), 64, 5, 5, 1, 2, 2, rng);
  b3dbl_1_ = conv("branch3x3dbl_1", in, 64, 1, 1, 1, 0, 0, rng);
  b3dbl_2_ = conv("branch3x3dbl_2", b3dbl_1_->out_channels(), 96, 3, 3, 1, 1, 1, rng);
  b3dbl_3_ = conv("branch3x3dbl_3", b3dbl_2_->out_channels(), 96, 3, 3, 1, 1, 1, rng);
  pool_ = conv("branch_pool", in, pool_features, 1, 1, 1, 0, 0, rng);
}

int64_t InceptionA::out_channels() const {
  return b1x1_->out_channels() + b5x5_2_->out_channels() + b3dbl_3_->out_channels() + pool_->out_channels();
}

Tensor InceptionA::forward(const Tensor& x) const {
  auto s = scope();
  const Tensor a = b1x1_->forward(x);
  const Tensor b = b5x5_2_->forward(b5x5_1_->forward(x));
  const Tensor c = b3dbl_3_->forward(b3dbl_2_->forward(b3dbl_1_->forward(x)));
  const Tensor d = pool_->forward(avg_pool_3x3_s1(x));
  return ops::concat({a, b, c, d}, 1);
}

// ---------------------------------------------------------------- InceptionB

InceptionB::InceptionB(int64_t in, double width, engine::Device device, engine::Rng& rng)
    : InceptionBlock(device), in_(in) {
  width_ = width;
  b3x3_ = conv("branch3x3", in, 384, 3, 3, 2, 0, 0, rng);
  b3dbl_1_ = conv("branch3x3dbl_1", in, 64, 1, 1, 1, 0, 0, rng);
  b3dbl_2_ = conv("branch3x3dbl_2", b3dbl_1_->out_channels(), 96, 3, 3, 1, 1, 1, rng);
  b3dbl_3_ = conv("branch3x3dbl_3", b3dbl_2_->out_channels(), 96, 3, 3, 2, 0, 0, rng);
}

int64_t InceptionB::out_channels() const { return b3x3_->out_channels() + b3dbl_3_->out_channels() + in_; }

Tensor InceptionB::forward(const Tensor& x) const {
  auto s = scope();
  const Tensor a = b3x3_->forward(x);
  const Tensor b = b3dbl_3_->forward(b3dbl_2_->forward(b3dbl_1_->forward(x)));
  const Tensor c = max_pool_3x3_s2(x);
  return ops::concat({a, b, c}, 1);
}

// ---------------------------------------------------------------- InceptionC

InceptionC::InceptionC(int64_t in, int64_t c7, double width, engine::Device device, engine::Rng& rng)
    : InceptionBlock(device) {
  width_ = width;
  b1x1_ = conv("branch1x1", in, 192, 1, 1, 1, 0, 0, rng);
  b7_1_ = conv("branch7x7_1", in, c7, 1, 1, 1, 0, 0, rng);
  b7_2_ = conv("branch7x7_2", b7_1_->out_channels(), c7, 1, 7, 1, 0, 3, rng);
  b7_3_ = conv("branch7x7_3", b7_2_->out_channels(), 192, 7, 1, 1, 3, 0, rng);
  b7dbl_1_ = conv("branch7x7dbl_1", in, c7, 1, 1, 1, 0, 0, rng);
  b7dbl_2_ = conv("branch7x7dbl_2", b7dbl_1_->out_channels(), c7, 7, 1, 1, 3, 0, rng);
  b7dbl_3_ = conv("branch7x7dbl_3", b7dbl_2_->out_channels(), c7, 1, 7, 1, 0, 3, rng);
  b7dbl_4_ = conv("branch7x7dbl_4", b7dbl_3_->out_channels(), c7, 7, 1, 1, 3, 0, rng);
  b7dbl_5_ = conv("branch7x7dbl_5", b7dbl_4_->out_channels(), 192, 1, 7, 1, 0, 3, rng);
  pool_ = conv("branch_pool", in, 192, 1, 1, 1, 0, 0, rng);
}

int64_t InceptionC::out_channels() const {
  return b1x1_->out_channels() + b7_3_->out_channels() + b7dbl_5_->out_channels() + pool_->out_channels();
}

Tensor InceptionC::forward(const Tensor& x) const {
  auto s = scope();
  const Tensor a = b1x1_->forward(x);
  const Tensor b = b7_3_->forward(b7_2_->forward(b7_1_->forward(x)));
  Tensor c = b7dbl_2_->forward(b7dbl_1_->forward(x));
  c = b7dbl_5_->forward(b7dbl_4_->forward(b7dbl_3_->forward(c)));
  const Tensor d = pool_->forward(avg_pool_3x3_s1(x));
  return ops::concat({a, b, c, d}, 1);
}

// ---------------------------------------------------------------- InceptionD

InceptionD::InceptionD(int64_t in, double width, engine::Device device, engine::Rng& rng)
    : InceptionBlock(device), in_(in) {
  width_ = width;
  b3_1_ = conv("branch3x3_1", in, 192, 1, 1, 1, 0, 0, rng);
  b3_2_ = conv("branch3x3_2", b3_1_->out_channels(), 320, 3, 3, 2, 0, 0, rng);
  b7x3_1_ = conv("branch7x7x3_1", in, 192, 1, 1, 1, 0, 0, rng);
  b7x3_2_ = conv("branch7x7x3_2", b7x3_1_->out_channels(), 192, 1, 7, 1, 0, 3, rng);
  b7x3_3_ = conv("branch7x7x3_3", b7x3_2_->out_channels(), 192, 7, 1, 1, 3, 0, rng);
  b7x3_4_ = conv("branch7x7x3_4", b7x3_3_->out_channels(), 192, 3, 3, 2, 0, 0, rng);
}

int64_t InceptionD::out_channels() const { return b3_2_->out_channels() + b7x3_4_->out_channels() + in_; }

Tensor InceptionD::forward(const Tensor& x) const {
  auto s = scope();
  const Tensor a = b3_2_->forward(b3_1_->forward(x));
  const Tensor b = b7x3_4_->forward(b7x3_3_->forward(b7x3_2_->forward(b7x3_1_->forward(x))));
  const Tensor c = max_pool_3x3_s2(x);
  return ops::concat({a, b, c}, 1);
}

// ---------------------------------------------------------------- InceptionE

InceptionE::InceptionE(int64_t in, double width, engine::Device device, engine::Rng& rng) : InceptionBlock(device) {
  width_ = width;
  b1x1_ = conv("branch1x1", in, 320, 1, 1, 1, 0, 0, rng);
  b3_1_ = conv("branch3x3_1", in, 384, 1, 1, 1, 0, 0, rng);
  b3_2a_ = conv("branch3x3_2a", b3_1_->out_channels(), 384, 1, 3, 1, 0, 1, rng);
  b3_2b_ = conv("branch3x3_2b", b3_1_->out_channels(), 384, 3, 1, 1, 1, 0, rng);
  b3dbl_1_ = conv("branch3x3dbl_1", in, 448, 1, 1, 1, 0, 0, rng);
  b3dbl_2_ = conv("branch3x3dbl_2", b3dbl_1_->out_channels(), 384, 3, 3, 1, 1, 1, rng);
  b3dbl_3a_ = conv("branch3x3dbl_3a", b3dbl_2_->out_channels(), 384, 1, 3, 1, 0, 1, rng);
  b3dbl_3b_ = conv("branch3x3dbl_3b", b3dbl_2_->out_channels(), 384, 3, 1, 1, 1, 0, rng);
  pool_ = conv("branch_pool", in, 192, 1, 1, 1, 0, 0, rng);
}

int64_t InceptionE::out_channels() const {
  return b1x1_->out_channels() + b3_2a_->out_channels() + b3_2b_->out_channels() + b3dbl_3a_->out_channels() +
         b3dbl_3b_->out_channels() + pool_->out_channels();
}

Tensor InceptionE::forward(const Tensor& x) const {
  auto s = scope();
  const Tensor a = b1x1_->forward(x);
  const Tensor b1 = b3_1_->forward(x);
  const Tensor b = ops::concat({b3_2a_->forward(b1), b3_2b_->forward(b1)}, 1);
  const Tensor c1 = b3dbl_2_->forward(b3dbl_1_->forward(x));
  const Tensor c = ops::concat({b3dbl_3a_->forward(c1), b3dbl_3b_->forward(c1)}, 1);
  const Tensor d = pool_->forward(avg_pool_3x3_s1(x));
  return ops::concat({a, b, c, d}, 1);
}

// ---------------------------------------------------------------- InceptionAux

InceptionAux::InceptionAux(int64_t in, int64_t num_classes, double width, engine::Device device, engine::Rng& rng)
    : Module(device) {
  const int64_t c0 = inception_channels(128, width), c1 = inception_channels(768, width);
  conv0_ = register_module("conv0", std::make_shared<BasicConv2d>(in, c0, 1, 1, 1, 0, 0, device, rng));
  conv1_ = register_module("conv1", std::make_shared<BasicConv2d>(c0, c1, 5, 5, 1, 0, 0, device, rng));
  fc_ = register_module("fc", std::make_shared<nn::Linear>(c1, num_classes, device, rng));
}

Tensor InceptionAux::forward(const Tensor& x) const {
  Tensor y;
  {
    auto s = scope();
    y = ops::avg_pool2d(x, pool_params(5, 3, 0));
  }
  y = conv1_->forward(conv0_->forward(y));
  {
    auto s = scope();
    y = ops::global_avg_pool2d(y);  // torchvision's adaptive_avg_pool2d to 1x1
  }
  return fc_->forward(y);
}

// ---------------------------------------------------------------- InceptionV3

InceptionV3::InceptionV3(const InceptionConfig& cfg, engine::Device device, uint64_t seed) : Module(device), cfg_(cfg) {
  if (cfg.width <= 0) throw std::invalid_argument("inception_v3: width must be positive");
  const int64_t min_size = inception_v3_min_image_size(cfg.aux_logits);
  if (cfg.image_size < min_size) {
    throw std::invalid_argument("inception_v3: a " + std::to_string(cfg.image_size) + "x" +
                                std::to_string(cfg.image_size) + " input is too small; it needs at least " +
                                std::to_string(min_size) + (cfg.aux_logits ? " with the aux head" : ""));
  }
  engine::Rng rng(seed);
  const double w = cfg.width;
  auto basic = [&](const std::string& name, int64_t in, int64_t out, int64_t k, int64_t stride, int64_t pad) {
    return register_module(
        name, std::make_shared<BasicConv2d>(in, inception_channels(out, w), k, k, stride, pad, pad, device, rng));
  };
  stem_a_.push_back(basic("Conv2d_1a_3x3", cfg.in_channels, 32, 3, 2, 0));
  stem_a_.push_back(basic("Conv2d_2a_3x3", stem_a_.back()->out_channels(), 32, 3, 1, 0));
  stem_a_.push_back(basic("Conv2d_2b_3x3", stem_a_.back()->out_channels(), 64, 3, 1, 1));
  stem_b_.push_back(basic("Conv2d_3b_1x1", stem_a_.back()->out_channels(), 80, 1, 1, 0));
  stem_b_.push_back(basic("Conv2d_4a_3x3", stem_b_.back()->out_channels(), 192, 3, 1, 0));

  int64_t in = stem_b_.back()->out_channels();
  auto add = [&](std::vector<std::shared_ptr<InceptionBlock>>& to, const std::string& name,
                 std::shared_ptr<InceptionBlock> block) {
    to.push_back(register_module(name, std::move(block)));
    in = to.back()->out_channels();
  };
  add(mixed_5_6_, "Mixed_5b", std::make_shared<InceptionA>(in, 32, w, device, rng));
  add(mixed_5_6_, "Mixed_5c", std::make_shared<InceptionA>(in, 64, w, device, rng));
  add(mixed_5_6_, "Mixed_5d", std::make_shared<InceptionA>(in, 64, w, device, rng));
  add(mixed_5_6_, "Mixed_6a", std::make_shared<InceptionB>(in, w, device, rng));
  add(mixed_5_6_, "Mixed_6b", std::make_shared<InceptionC>(in, 128, w, device, rng));
  add(mixed_5_6_, "Mixed_6c", std::make_shared<InceptionC>(in, 160, w, device, rng));
  add(mixed_5_6_, "Mixed_6d", std::make_shared<InceptionC>(in, 160, w, device, rng));
  add(mixed_5_6_, "Mixed_6e", std::make_shared<InceptionC>(in, 192, w, device, rng));
  // Registered where torchvision registers it, so parameter order matches torchvision's.
  if (cfg.aux_logits)
    aux_ = register_module("AuxLogits", std::make_shared<InceptionAux>(in, cfg.num_classes, w, device, rng));
  add(mixed_7_, "Mixed_7a", std::make_shared<InceptionD>(in, w, device, rng));
  add(mixed_7_, "Mixed_7b", std::make_shared<InceptionE>(in, w, device, rng));
  add(mixed_7_, "Mixed_7c", std::make_shared<InceptionE>(in, w, device, rng));
  fc_ = register_module("fc", std::make_shared<nn::Linear>(in, cfg.num_classes, device, rng));
}

namespace {
// torchvision's parameterless top-level layers (maxpool1, maxpool2, avgpool) get a layer path
// of their own, so per-layer tables name them rather than folding them into the model root.
struct NamedLayer {
  explicit NamedLayer(std::string n) : path(std::move(n)), id(engine::op_name(path)) {}
  engine::OwnerScope scope() const { return engine::OwnerScope(&path, id); }
  std::string path;
  profiler::StringId id;
};
}  // namespace

InceptionOutputs InceptionV3::forward(const Tensor& x) const {
  static const NamedLayer maxpool1("maxpool1"), maxpool2("maxpool2"), avgpool("avgpool");
  Tensor y = x;
  for (const auto& c : stem_a_) y = c->forward(y);
  {
    auto s = maxpool1.scope();
    y = max_pool_3x3_s2(y);
  }
  for (const auto& c : stem_b_) y = c->forward(y);
  {
    auto s = maxpool2.scope();
    y = max_pool_3x3_s2(y);
  }
  for (const auto& b : mixed_5_6_) y = b->forward(y);
  InceptionOutputs out;
  if (aux_ && training()) out.aux_logits = aux_->forward(y);
  for (const auto& b : mixed_7_) y = b->forward(y);
  {
    // torchvision's dropout (p 0.5, training only) would follow; the engine has no dropout op yet.
    auto s = avgpool.scope();
    y = ops::global_avg_pool2d(y);
  }
  out.logits = fc_->forward(y);
  return out;
}

// ---------------------------------------------------------------- the workload

namespace {

PresetTable describe(const InceptionConfig& c) {
  PresetTable t = {
      {"architecture",
       "Inception-v3 (torchvision Inception3 layout: stem, Mixed_5b-5d A, 6a B, 6b-6e C, 7a D, 7b-7c E)"},
      {"image_size", std::to_string(c.image_size)},
      {"in_channels", std::to_string(c.in_channels)},
      {"width_multiplier", table_number(c.width)},
      {"stem_channels",
       std::to_string(inception_channels(32, c.width)) + "," + std::to_string(inception_channels(32, c.width)) + "," +
           std::to_string(inception_channels(64, c.width)) + "," + std::to_string(inception_channels(80, c.width)) +
           "," + std::to_string(inception_channels(192, c.width))},
      {"mixed_7c_channels", std::to_string(inception_channels(320, c.width) + 4 * inception_channels(384, c.width) +
                                           inception_channels(192, c.width))},
      {"batch_norm", "eps 0.001, momentum 0.1; convolutions without bias"},
      {"avg_pool_branches", "3x3 stride 1 pad 1, count_include_pad"},
      {"aux_logits", c.aux_logits ? "on: avg pool 5x5/3, conv0 1x1, conv1 5x5, global avg pool, fc" : "off"},
      {"loss", c.aux_logits
                   ? "CE(logits) + " + table_number(c.aux_weight) + " x CE(aux logits) in training; eval: logits only"
                   : "CE(logits)"},
      {"dropout",
       "omitted (torchvision: p 0.5 before fc, training only, no parameters): no dropout op in the engine yet"},
      {"transform_input", "off"},
      {"init", "conv Kaiming-normal fan_out, linear uniform +-1/sqrt(fan_in) (torchvision: truncated normal)"},
      {"num_classes", std::to_string(c.num_classes)},
      {"batch_size", std::to_string(c.batch)}};
  for (auto& row : default_optimizer_rows()) t.push_back(std::move(row));
  return t;
}

// `summary` writes the one-line text around the configuration's numbers.
Preset make_preset(const std::string& name, std::string (*summary)(const InceptionConfig&)) {
  const InceptionConfig c = inception_v3_config(name);
  return {name, summary(c), c.batch, describe(c)};
}

std::string input(const InceptionConfig& c) {
  return std::to_string(c.image_size) + "x" + std::to_string(c.image_size);
}
std::string classes(const InceptionConfig& c) { return std::to_string(c.num_classes) + " classes"; }
// The presets' width multipliers are 1/n.
std::string widths(const InceptionConfig& c) { return "x1/" + std::to_string(std::llround(1 / c.width)); }

}  // namespace

WorkloadSpec inception_v3_spec() {
  WorkloadSpec s;
  s.name = "inception_v3";
  s.domain = "image classification";
  s.units = {"images", "", "images", false};
  s.description =
      "Inception-v3 with the auxiliary classifier (torchvision layout), softmax cross-entropy, SGD with momentum";
  s.presets = {make_preset("tiny",
                           [](const InceptionConfig& c) {
                             return input(c) + " input, widths " + widths(c) + ", no aux head, " + classes(c) +
                                    ": tests";
                           }),
               make_preset("small",
                           [](const InceptionConfig& c) {
                             return "full topology with the aux head, widths " + widths(c) + ", " + input(c) + ", " +
                                    classes(c) + ": CPU benchmarking";
                           }),
               make_preset("full", [](const InceptionConfig& c) {
                 return input(c) + ", " + classes(c) + ", aux head: the published model (27,161,264 parameters)";
               })};
  s.check = [](const WorkloadConfig& wc) {
    data_shard(wc, "inception_v3");
    check_image_source(wc.data, inception_v3_config(wc.preset).num_classes);
  };
  s.build = [](const WorkloadConfig& wc) -> std::unique_ptr<Workload> {
    InceptionConfig cfg = inception_v3_config(wc.preset);
    const int64_t batch = *wc.batch;
    std::unique_ptr<ImageSource> data = make_image_source(wc.data, cfg.image_size, cfg.in_channels, cfg.num_classes,
                                                          wc.seed, wc.device, data_shard(wc, "inception_v3"));
    cfg.in_channels = data->channels();
    auto model = std::make_shared<InceptionV3>(cfg, wc.device, wc.seed);
    auto forward = [model](const Tensor& x) { return model->forward(x).logits; };
    auto train_forward = [model](const Tensor& x) {
      InceptionOutputs o = model->forward(x);
      return ImageClassifier::TrainOutputs{o.logits, o.aux_logits};
    };
    return std::make_unique<ImageClassifier>(model, forward, std::move(data), batch, default_lr_schedule(batch),
                                             train_forward, cfg.aux_weight);
  };
  return s;
}

}  // namespace ts::workloads
