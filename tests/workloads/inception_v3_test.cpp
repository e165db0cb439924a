#include <gtest/gtest.h>

#include <map>
#include <set>

#include "engine/context.h"
#include "engine/ops.h"
#include "memprof/ledger.h"
#include "workloads/image_classifier.h"
#include "workloads/inception_v3/inception_v3.h"
#include "workloads/training_loop.h"

using namespace ts;
using namespace ts::workloads;

namespace {

int64_t count_params(InceptionConfig cfg) { return InceptionV3(cfg, engine::Device::meta(), 1).parameter_count(); }

// The parameter count in closed form, written from torchvision's layer list independently of
// the model code: every BasicConv2d is in*out*kh*kw weights plus 2*out batch-norm parameters.
struct Counter {
  double w;
  int64_t n = 0;
  int64_t ch(int64_t c) const { return std::max<int64_t>(1, std::llround(static_cast<double>(c) * w)); }
  // Adds a BasicConv2d from `in` to torchvision's `out` channels; returns the scaled out.
  int64_t conv(int64_t in, int64_t out, int64_t kh, int64_t kw) {
    out = ch(out);
    n += in * out * kh * kw + 2 * out;
    return out;
  }
  int64_t block_a(int64_t in, int64_t pool) {
    const int64_t a = conv(in, 64, 1, 1);
    const int64_t b = conv(conv(in, 48, 1, 1), 64, 5, 5);
    const int64_t c = conv(conv(conv(in, 64, 1, 1), 96, 3, 3), 96, 3, 3);
    return a + b + c + conv(in, pool, 1, 1);
  }
  int64_t block_b(int64_t in) { return conv(in, 384, 3, 3) + conv(conv(conv(in, 64, 1, 1), 96, 3, 3), 96, 3, 3) + in; }
  int64_t block_c(int64_t in, int64_t c7) {
    const int64_t a = conv(in, 192, 1, 1);
    const int64_t b = conv(conv(conv(in, c7, 1, 1), c7, 1, 7), 192, 7, 1);
    int64_t c = conv(in, c7, 1, 1);
    for (int i = 0; i < 3; ++i) c = conv(c, c7, i % 2 ? 1 : 7, i % 2 ? 7 : 1);
    c = conv(c, 192, 1, 7);
    return a + b + c + conv(in, 192, 1, 1);
  }
  int64_t block_d(int64_t in) {
    const int64_t a = conv(conv(in, 192, 1, 1), 320, 3, 3);
    const int64_t b = conv(conv(conv(conv(in, 192, 1, 1), 192, 1, 7), 192, 7, 1), 192, 3, 3);
    return a + b + in;
  }
  int64_t block_e(int64_t in) {
    const int64_t a = conv(in, 320, 1, 1);
    const int64_t b1 = conv(in, 384, 1, 1);
    const int64_t b = conv(b1, 384, 1, 3) + conv(b1, 384, 3, 1);
    const int64_t c1 = conv(conv(in, 448, 1, 1), 384, 3, 3);
    const int64_t c = conv(c1, 384, 1, 3) + conv(c1, 384, 3, 1);
    return a + b + c + conv(in, 192, 1, 1);
  }
};

int64_t inception_formula(double width, int64_t classes, bool aux) {
  Counter k{width};
  int64_t c = k.conv(3, 32, 3, 3);
  c = k.conv(c, 32, 3, 3);
  c = k.conv(c, 64, 3, 3);
  c = k.conv(c, 80, 1, 1);
  c = k.conv(c, 192, 3, 3);
  c = k.block_a(c, 32);
  c = k.block_a(c, 64);
  c = k.block_a(c, 64);
  c = k.block_b(c);
  for (int64_t c7 : {128, 160, 160, 192}) c = k.block_c(c, c7);
  if (aux) {
    const int64_t a = k.conv(k.conv(c, 128, 1, 1), 768, 5, 5);
    k.n += a * classes + classes;
  }
  c = k.block_d(c);
  c = k.block_e(c);
  c = k.block_e(c);
  return k.n + c * classes + classes;
}

}  // namespace

TEST(InceptionV3, FullPresetMatchesPublishedParameterCount) {
  // torchvision's inception_v3(aux_logits=True): 27,161,264 parameters.
  const InceptionConfig cfg = inception_v3_config("full");
  EXPECT_TRUE(cfg.aux_logits);
  EXPECT_EQ(cfg.image_size, 299);
  EXPECT_EQ(count_params(cfg), 27'161'264);
}

TEST(InceptionV3, FullWithoutAuxHeadMatchesPublishedParameterCount) {
  InceptionConfig cfg = inception_v3_config("full");
  cfg.aux_logits = false;
  EXPECT_EQ(count_params(cfg), 23'834'568);
}

TEST(InceptionV3, CountsFollowFromTheArchitecture) {
  EXPECT_EQ(inception_formula(1.0, 1000, true), 27'161'264);
  EXPECT_EQ(inception_formula(1.0, 1000, false), 23'834'568);
  for (const char* preset : {"tiny", "small"}) {
    const InceptionConfig cfg = inception_v3_config(preset);
    EXPECT_EQ(count_params(cfg), inception_formula(cfg.width, cfg.num_classes, cfg.aux_logits)) << preset;
  }
}

TEST(InceptionV3, ListShowsTheFullParameterCount) {
  // What `trainscope list` prints: each preset built through the registry on the meta device.
  const auto* spec = find_workload("inception_v3");
  ASSERT_NE(spec, nullptr);
  const auto names = workload_names();
  ASSERT_GE(names.size(), 2u);
  EXPECT_EQ(names[0], "resnet50");
  EXPECT_EQ(names[1], "inception_v3");
  for (const char* preset : {"tiny", "small", "full"}) ASSERT_NE(spec->preset(preset), nullptr) << preset;
  WorkloadConfig wc;
  wc.preset = "full";
  wc.device = engine::Device::meta();
  EXPECT_EQ(spec->create(wc)->model().parameter_count(), 27'161'264);
  bool has_size = false, has_aux = false;
  for (const auto& [k, v] : spec->preset("full")->table) {
    has_size |= k == "image_size" && v == "299";
    has_aux |= k == "aux_logits" && v.starts_with("on");
  }
  EXPECT_TRUE(has_size);
  EXPECT_TRUE(has_aux);
}

TEST(InceptionV3, ModulesAreNamedLikeTorchvision) {
  InceptionV3 m(inception_v3_config("full"), engine::Device::meta(), 1);
  std::set<std::string> names;
  for (const auto& [name, t] : m.named_parameters()) names.insert(name);
  for (const char* n :
       {"Conv2d_1a_3x3.conv.weight", "Conv2d_1a_3x3.bn.weight", "Conv2d_1a_3x3.bn.bias", "Conv2d_4a_3x3.conv.weight",
        "Mixed_5b.branch1x1.conv.weight", "Mixed_5b.branch5x5_2.bn.bias", "Mixed_5d.branch_pool.conv.weight",
        "Mixed_6a.branch3x3.conv.weight", "Mixed_6e.branch7x7dbl_3.conv.weight", "Mixed_6e.branch7x7_2.conv.weight",
        "Mixed_7a.branch7x7x3_4.conv.weight", "Mixed_7c.branch3x3dbl_3b.bn.weight", "AuxLogits.conv0.conv.weight",
        "AuxLogits.conv1.bn.bias", "AuxLogits.fc.weight", "fc.weight", "fc.bias"}) {
    EXPECT_TRUE(names.contains(n)) << n;
  }
  EXPECT_FALSE(names.contains("Conv2d_1a_3x3.conv.bias"));  // BasicConv2d's conv has no bias
  // Factorised convolutions: 1x7 then 7x1, with torchvision's shapes.
  std::map<std::string, engine::Shape> shapes;
  for (const auto& [name, t] : m.named_parameters()) shapes[name] = t.shape();
  EXPECT_EQ(shapes["Mixed_6b.branch7x7_2.conv.weight"], (engine::Shape{128, 128, 1, 7}));
  EXPECT_EQ(shapes["Mixed_6b.branch7x7_3.conv.weight"], (engine::Shape{192, 128, 7, 1}));
  EXPECT_EQ(shapes["Mixed_7b.branch3x3_1.conv.weight"], (engine::Shape{384, 1280, 1, 1}));
  EXPECT_EQ(shapes["AuxLogits.conv1.conv.weight"], (engine::Shape{768, 128, 5, 5}));
  EXPECT_EQ(shapes["fc.weight"], (engine::Shape{1000, 2048}));
  InceptionConfig no_aux = inception_v3_config("full");
  no_aux.aux_logits = false;
  for (const auto& [name, t] : InceptionV3(no_aux, engine::Device::meta(), 1).named_parameters()) {
    EXPECT_FALSE(name.starts_with("AuxLogits")) << name;
  }
}

TEST(InceptionV3, InputSizeLimitsAndUnknownPreset) {
  EXPECT_EQ(inception_v3_min_image_size(false), 75);
  EXPECT_EQ(inception_v3_min_image_size(true), 299);
  InceptionConfig cfg = inception_v3_config("full");
  cfg.image_size = 298;
  EXPECT_THROW(InceptionV3(cfg, engine::Device::meta(), 1), std::invalid_argument);
  cfg.aux_logits = false;
  cfg.image_size = 75;
  EXPECT_NO_THROW(InceptionV3(cfg, engine::Device::meta(), 1));
  cfg.image_size = 74;
  EXPECT_THROW(InceptionV3(cfg, engine::Device::meta(), 1), std::invalid_argument);
  EXPECT_THROW(inception_v3_config("huge"), std::invalid_argument);
}

TEST(InceptionV3, TinyForwardGivesLogitsAndEveryParameterGetsAGradient) {
  const InceptionConfig cfg = inception_v3_config("tiny");
  InceptionV3 m(cfg, engine::Device::cpu(), 3);
  engine::Rng rng(5);
  engine::Tensor x = engine::Tensor::empty({2, 3, cfg.image_size, cfg.image_size}, engine::Device::cpu());
  rng.fill_normal(x, 0, 1);
  const InceptionOutputs out = m.forward(x);
  ASSERT_EQ(out.logits.shape(), (engine::Shape{2, 10}));
  EXPECT_FALSE(out.aux_logits.defined());  // tiny has no aux head
  engine::Tensor loss = engine::ops::softmax_cross_entropy(out.logits, engine::Tensor::from_vector({2}, {1, 7}));
  loss.backward();
  for (const auto& [name, p] : m.named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << name;
    EXPECT_EQ(p.grad().shape(), p.shape()) << name;
  }
}

TEST(InceptionV3, AuxHeadGivesLogitsInTrainingOnlyAndItsLossIsWeighted) {
  // The narrowest model that still has the aux head: 299x299 (Mixed_6e at 17x17), widths x1/16.
  InceptionConfig cfg;
  cfg.width = 1.0 / 16;
  cfg.num_classes = 5;
  auto model = std::make_shared<InceptionV3>(cfg, engine::Device::cpu(), 3);
  InceptionV3& m = *model;
  engine::Rng rng(5);
  engine::Tensor x = engine::Tensor::empty({2, 3, 299, 299}, engine::Device::cpu());
  rng.fill_normal(x, 0, 1);
  const engine::Tensor labels = engine::Tensor::from_vector({2}, {1, 3});
  const InceptionOutputs out = m.forward(x);
  ASSERT_EQ(out.logits.shape(), (engine::Shape{2, 5}));
  ASSERT_TRUE(out.aux_logits.defined());
  ASSERT_EQ(out.aux_logits.shape(), (engine::Shape{2, 5}));
  const double main_ce = engine::ops::softmax_cross_entropy(out.logits, labels).to_vector()[0];
  const double aux_ce = engine::ops::softmax_cross_entropy(out.aux_logits, labels).to_vector()[0];
  {
    m.train(false);
    engine::NoGradScope no_grad;
    EXPECT_FALSE(m.forward(x).aux_logits.defined());
    m.train(true);
  }
  // The workload's training loss is CE(main) + 0.4 CE(aux), and backward reaches the aux head.
  class Fixed : public ImageSource {
   public:
    int64_t channels() const override { return 3; }
    int64_t classes() const override { return 5; }
    int64_t image_size() const override { return 299; }
    std::string name() const override { return "fixed"; }
    Batch next_train(int64_t) override { return {}; }
    Batch heldout(int64_t, int64_t) override { return {}; }
    int64_t heldout_size() const override { return 0; }
    int64_t train_size() const override { return 0; }
  };
  ImageClassifier clf(
      model, [model](const engine::Tensor& in) { return model->forward(in).logits; }, std::make_unique<Fixed>(), 2,
      engine::optim::LrSchedule{},
      [model](const engine::Tensor& in) {
        InceptionOutputs o = model->forward(in);
        return ImageClassifier::TrainOutputs{o.logits, o.aux_logits};
      },
      cfg.aux_weight);
  Batch b{x, labels, 2};
  engine::Tensor loss = clf.forward_loss(b);
  // Batch norm in training mode sees the same batch, so the logits are the same as above.
  EXPECT_NEAR(loss.to_vector()[0], main_ce + 0.4 * aux_ce, 1e-4 * (1 + main_ce + aux_ce));
  clf.zero_grad();
  loss.backward();
  for (const auto& [name, p] : m.named_parameters()) {
    if (name.starts_with("AuxLogits")) {
      ASSERT_TRUE(p.grad().defined()) << name;
    }
  }
}

TEST(InceptionV3, TinyLossFallsAndHeldOutAccuracyRisesOnSyntheticData) {
  WorkloadConfig wc;
  wc.preset = "tiny";
  wc.seed = 7;
  wc.batch = 16;
  auto w = find_workload("inception_v3")->create(wc);
  const double before = w->evaluate(4).value;
  LoopOptions o;
  o.warmup = 0;
  o.iterations = 60;
  const LoopResult r = run_training(*w, o);
  ASSERT_FALSE(r.failed) << r.error;
  ASSERT_EQ(r.iterations.size(), 60u);
  double first = 0, last = 0;
  for (int i = 0; i < 5; ++i) first += r.iterations[static_cast<size_t>(i)].loss / 5;
  for (int i = 55; i < 60; ++i) last += r.iterations[static_cast<size_t>(i)].loss / 5;
  EXPECT_LT(last, 0.75 * first) << "first " << first << " last " << last;
  const double after = w->evaluate(4).value;
  EXPECT_GT(after, 0.3) << "before " << before;  // chance is 10%
  EXPECT_GT(after, before);
}
