#pragma once
// ResNet-50 v1.5 (He et al. 2016; the stride-2 sits in the 3x3 convolution of the first
// bottleneck of a stage, as in torchvision and NVIDIA's v1.5). Modules are named as torchvision
// names them (conv1, bn1, layer1.0.conv1, layer1.0.downsample.0, fc) so per-layer tables read
// like the paper's architecture table.
#include <array>
#include <memory>

#include "engine/nn/layers.h"
#include "workloads/workload.h"

namespace ts::workloads {

struct ResNetConfig {
  int64_t image_size = 224;
  int64_t in_channels = 3;
  int64_t base_width = 64;  // channels of conv1 and layer1's bottleneck width
  int64_t num_classes = 1000;
  std::array<int64_t, 4> blocks = {3, 4, 6, 3};
  static constexpr int64_t expansion = 4;
  int64_t batch = 32;  // the preset's default images per iteration (--batch overrides)
};

ResNetConfig resnet50_config(const std::string& preset);  // throws std::invalid_argument for an unknown preset

class Bottleneck : public engine::nn::Module {
 public:
  Bottleneck(int64_t in_channels, int64_t width, int64_t stride, engine::Device device, engine::Rng& rng);
  engine::Tensor forward(const engine::Tensor& x) const;

 private:
  std::shared_ptr<engine::nn::Conv2d> conv1_, conv2_, conv3_, down_conv_;
  std::shared_ptr<engine::nn::BatchNorm2d> bn1_, bn2_, bn3_, down_bn_;
};

class ResNet : public engine::nn::Module {
 public:
  ResNet(const ResNetConfig& cfg, engine::Device device, uint64_t seed);
  engine::Tensor forward(const engine::Tensor& x) const;  // logits [N, classes]
  const ResNetConfig& config() const { return cfg_; }

 private:
  ResNetConfig cfg_;
  std::shared_ptr<engine::nn::Conv2d> conv1_;
  std::shared_ptr<engine::nn::BatchNorm2d> bn1_;
  std::vector<std::shared_ptr<Bottleneck>> blocks_;
  std::shared_ptr<engine::nn::Linear> fc_;
};

WorkloadSpec resnet50_spec();

}  // namespace ts::workloads
