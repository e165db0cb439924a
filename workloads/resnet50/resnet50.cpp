#include "workloads/resnet50/resnet50.h"

#include <stdexcept>

#include "engine/ops.h"
#include "workloads/data/image_data.h"
#include "workloads/image_classifier.h"

namespace ts::workloads {

using engine::Tensor;
namespace nn = engine::nn;
namespace ops = engine::ops;

ResNetConfig resnet50_config(const std::string& preset) {
  ResNetConfig c;
  if (preset == "tiny") {
    c.image_size = 32;
    c.base_width = 16;
    c.num_classes = 10;
    c.batch = 4;
  } else if (preset == "small") {
    c.image_size = 64;
    c.batch = 16;
  } else if (preset != "full") {
    throw std::invalid_argument("resnet50 has no preset '" + preset + "' (tiny, small, full)");
  }
  return c;
}

Bottleneck::Bottleneck(int64_t in_channels, int64_t width, int64_t stride, engine::Device device, engine::Rng& rng)
    : Module(device) {
  const int64_t out = width * ResNetConfig::expansion;
  conv1_ = register_module("conv1", std::make_shared<nn::Conv2d>(nn::conv_options(in_channels, width, 1), device, rng));
  bn1_ = register_module("bn1", std::make_shared<nn::BatchNorm2d>(width, device));
  conv2_ =
      register_module("conv2", std::make_shared<nn::Conv2d>(nn::conv_options(width, width, 3, stride, 1), device, rng));
  bn2_ = register_module("bn2", std::make_shared<nn::BatchNorm2d>(width, device));
  conv3_ = register_module("conv3", std::make_shared<nn::Conv2d>(nn::conv_options(width, out, 1), device, rng));
  bn3_ = register_module("bn3", std::make_shared<nn::BatchNorm2d>(out, device));
  if (stride != 1 || in_channels != out) {
    // torchvision's Sequential(conv, bn) is named downsample.0 / downsample.1.
    down_conv_ = register_module(
        "downsample.0", std::make_shared<nn::Conv2d>(nn::conv_options(in_channels, out, 1, stride), device, rng));
    down_bn_ = register_module("downsample.1", std::make_shared<nn::BatchNorm2d>(out, device));
  }
}

Tensor Bottleneck::forward(const Tensor& x) const {
  auto s = scope();
  Tensor y = bn1_->forward_relu(conv1_->forward(x));
  y = bn2_->forward_relu(conv2_->forward(y));
  y = bn3_->forward(conv3_->forward(y));
  const Tensor identity = down_conv_ ? down_bn_->forward(down_conv_->forward(x)) : x;
  return ops::relu(ops::add(y, identity));
}

ResNet::ResNet(const ResNetConfig& cfg, engine::Device device, uint64_t seed) : Module(device), cfg_(cfg) {
  engine::Rng rng(seed);
  conv1_ = register_module(
      "conv1", std::make_shared<nn::Conv2d>(nn::conv_options(cfg.in_channels, cfg.base_width, 7, 2, 3), device, rng));
  bn1_ = register_module("bn1", std::make_shared<nn::BatchNorm2d>(cfg.base_width, device));
  int64_t in = cfg.base_width;
  for (int stage = 0; stage < 4; ++stage) {
    const int64_t width = cfg.base_width << stage;
    for (int64_t b = 0; b < cfg.blocks[static_cast<size_t>(stage)]; ++b) {
      const int64_t stride = (stage > 0 && b == 0) ? 2 : 1;
      const std::string name = "layer" + std::to_string(stage + 1) + "." + std::to_string(b);
      blocks_.push_back(register_module(name, std::make_shared<Bottleneck>(in, width, stride, device, rng)));
      in = width * ResNetConfig::expansion;
    }
  }
  fc_ = register_module("fc", std::make_shared<nn::Linear>(in, cfg.num_classes, device, rng));
}

Tensor ResNet::forward(const Tensor& x) const {
  Tensor y;
  {
    auto s = scope();
    y = bn1_->forward_relu(conv1_->forward(x));
    engine::Pool2dParams pool;
    pool.kernel_h = pool.kernel_w = 3;
    pool.stride_h = pool.stride_w = 2;
    pool.pad_h = pool.pad_w = 1;
    y = ops::max_pool2d(y, pool);
  }
  for (const auto& b : blocks_) y = b->forward(y);
  {
    auto s = scope();
    y = ops::global_avg_pool2d(y);
  }
  return fc_->forward(y);
}

namespace {

PresetTable describe(const ResNetConfig& c) {
  PresetTable t = {{"architecture", "ResNet-50 v1.5"},
                   {"image_size", std::to_string(c.image_size)},
                   {"in_channels", std::to_string(c.in_channels)},
                   {"base_width", std::to_string(c.base_width)},
                   {"blocks", table_list(c.blocks)},
                   {"bottleneck_expansion", std::to_string(ResNetConfig::expansion)},
                   {"num_classes", std::to_string(c.num_classes)},
                   {"batch_size", std::to_string(c.batch)}};
  for (auto& row : default_optimizer_rows()) t.push_back(std::move(row));
  return t;
}

// `summary` writes the one-line text around the configuration's numbers.
Preset make_preset(const std::string& name, std::string (*summary)(const ResNetConfig&)) {
  const ResNetConfig c = resnet50_config(name);
  return {name, summary(c), c.batch, describe(c)};
}

std::string input(const ResNetConfig& c) { return std::to_string(c.image_size) + "x" + std::to_string(c.image_size); }
std::string classes(const ResNetConfig& c) { return std::to_string(c.num_classes) + " classes"; }

}  // namespace

WorkloadSpec resnet50_spec() {
  WorkloadSpec s;
  s.name = "resnet50";
  s.domain = "image classification";
  s.units = {"images", "", "images", false};
  s.description = "ResNet-50 v1.5 (torchvision layout), softmax cross-entropy, SGD with momentum";
  s.presets = {make_preset("tiny",
                           [](const ResNetConfig& c) {
                             return input(c) + " input, base width " + std::to_string(c.base_width) + ", " +
                                    classes(c) + ": tests";
                           }),
               make_preset("small",
                           [](const ResNetConfig& c) {
                             return "full topology and widths, " + input(c) + " input, " + classes(c) +
                                    ": CPU benchmarking";
                           }),
               make_preset("full", [](const ResNetConfig& c) {
                 return input(c) + ", " + classes(c) + ": the published model (25,557,032 parameters)";
               })};
  s.check = [](const WorkloadConfig& wc) {
    data_shard(wc, "resnet50");
    check_image_source(wc.data, resnet50_config(wc.preset).num_classes);
  };
  s.build = [](const WorkloadConfig& wc) -> std::unique_ptr<Workload> {
    ResNetConfig cfg = resnet50_config(wc.preset);
    const int64_t batch = *wc.batch;
    std::unique_ptr<ImageSource> data = make_image_source(wc.data, cfg.image_size, cfg.in_channels, cfg.num_classes,
                                                          wc.seed, wc.device, data_shard(wc, "resnet50"));
    cfg.in_channels = data->channels();
    auto model = std::make_shared<ResNet>(cfg, wc.device, wc.seed);
    auto forward = [model](const Tensor& x) { return model->forward(x); };
    return std::make_unique<ImageClassifier>(model, forward, std::move(data), batch, default_lr_schedule(batch));
  };
  return s;
}

}  // namespace ts::workloads
