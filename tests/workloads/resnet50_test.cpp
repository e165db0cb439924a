#include <gtest/gtest.h>

#include <set>

#include "engine/ops.h"
#include "memprof/ledger.h"
#include "workloads/resnet50/resnet50.h"

using namespace ts;
using namespace ts::workloads;

namespace {
int64_t count_params(const std::string& preset) {
  ResNet m(resnet50_config(preset), engine::Device::meta(), 1);
  return m.parameter_count();
}
}  // namespace

TEST(ResNet50, FullPresetMatchesPublishedParameterCount) {
  // torchvision's resnet50: 25,557,032 parameters.
  EXPECT_EQ(count_params("full"), 25'557'032);
}

TEST(ResNet50, SmallKeepsTheFullTopology) { EXPECT_EQ(count_params("small"), 25'557'032); }

// The parameter count in closed form, written independently of the model code.
int64_t resnet50_formula(int64_t w, int64_t in_ch, int64_t classes) {
  int64_t n = in_ch * w * 49 + 2 * w;  // conv1 7x7, bn1
  const int64_t blocks[4] = {3, 4, 6, 3};
  int64_t in = w;
  for (int s = 0; s < 4; ++s) {
    const int64_t width = w << s, out = 4 * width;
    for (int64_t b = 0; b < blocks[s]; ++b) {
      n += in * width + 2 * width + 9 * width * width + 2 * width + width * out + 2 * out;
      if (b == 0) n += in * out + 2 * out;  // downsample conv + bn
      in = out;
    }
  }
  return n + in * classes + classes;  // fc
}

TEST(ResNet50, CountsFollowFromTheArchitecture) {
  EXPECT_EQ(resnet50_formula(64, 3, 1000), 25'557'032);
  EXPECT_EQ(count_params("tiny"), resnet50_formula(16, 3, 10));
  EXPECT_EQ(count_params("tiny"), 1'486'106);
}

TEST(ResNet50, ModulesAreNamedLikeTorchvision) {
  ResNet m(resnet50_config("full"), engine::Device::meta(), 1);
  std::set<std::string> names;
  for (const auto& [name, t] : m.named_parameters()) names.insert(name);
  for (const char* n :
       {"conv1.weight", "bn1.weight", "bn1.bias", "layer1.0.conv1.weight", "layer1.0.downsample.0.weight",
        "layer1.0.downsample.1.weight", "layer3.2.conv2.weight", "layer4.2.bn3.bias", "fc.weight", "fc.bias"}) {
    EXPECT_TRUE(names.contains(n)) << n;
  }
  EXPECT_FALSE(names.contains("layer1.1.downsample.0.weight"));
  // v1.5: the stride-2 sits in the 3x3 convolution of each stage's first block.
  for (const auto* mod : m.modules()) {
    if (mod->path() == "layer2.0.conv2") {
      EXPECT_EQ(static_cast<const engine::nn::Conv2d*>(mod)->options().params.stride_h, 2);
    }
    if (mod->path() == "layer2.0.conv1") {
      EXPECT_EQ(static_cast<const engine::nn::Conv2d*>(mod)->options().params.stride_h, 1);
    }
  }
}

TEST(ResNet50, WeightsCategoryIsFourBytesPerParameter) {
  auto& ledger = memprof::Ledger::global();
  ledger.clear();
  ResNet m(resnet50_config("tiny"), engine::Device::cpu(), 1);
  const auto snap = ledger.current();
  EXPECT_EQ(snap.bytes[static_cast<size_t>(vocabulary::Category::weights)], 4 * m.parameter_count());
  // Running statistics are not weights.
  EXPECT_GT(snap.bytes[static_cast<size_t>(vocabulary::Category::other)], 0);
}

TEST(ResNet50, ForwardGivesLogitsAndEveryParameterGetsAGradient) {
  ResNet m(resnet50_config("tiny"), engine::Device::cpu(), 3);
  engine::Rng rng(5);
  engine::Tensor x = engine::Tensor::empty({2, 3, 32, 32}, engine::Device::cpu());
  rng.fill_normal(x, 0, 1);
  const engine::Tensor labels = engine::Tensor::from_vector({2}, {1, 7});
  const engine::Tensor logits = m.forward(x);
  ASSERT_EQ(logits.shape(), (engine::Shape{2, 10}));
  engine::Tensor loss = engine::ops::softmax_cross_entropy(logits, labels);
  loss.backward();
  for (const auto& [name, p] : m.named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << name;
    EXPECT_EQ(p.grad().shape(), p.shape()) << name;
    EXPECT_EQ(p.grad().category(), vocabulary::Category::weight_grads) << name;
  }
}

TEST(ResNet50, UnknownPresetIsRejected) { EXPECT_THROW(resnet50_config("huge"), std::invalid_argument); }
