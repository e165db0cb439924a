// WGAN-GP: parameter counts from the architecture, shapes, the synthetic scenes and their
// statistics, one iteration through the training loop, and convergence of the tiny preset.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <set>
#include <string>

#include "engine/context.h"
#include "engine/ops.h"
#include "workloads/data/scene_images.h"
#include "workloads/training_loop.h"
#include "workloads/wgan/wgan.h"

using namespace ts;
using namespace ts::workloads;

namespace {

// The counts in closed form from the paper's code (gan_64x64.py), independently of the model:
// a conv is in*out*k*k (+out with bias), batch norm 2*C, linear in*out+out.
int64_t generator_params(const WganConfig& c) {
  const int64_t first = c.widths.front() * c.dim;
  int64_t n = c.noise * 16 * first + 16 * first;
  for (size_t i = 0; i + 1 < c.widths.size(); ++i) {
    const int64_t in = c.widths[i] * c.dim, out = c.widths[i + 1] * c.dim;
    n += in * out + out;       // shortcut 1x1 with bias
    n += 2 * in + 2 * out;     // bn1, bn2
    n += in * out * 9;         // conv1, no bias
    n += out * out * 9 + out;  // conv2 with bias
  }
  const int64_t last = c.widths.back() * c.dim;
  return n + 2 * last + last * 3 * 9 + 3;
}

int64_t critic_params(const WganConfig& c) {
  int64_t n = 3 * c.widths.back() * c.dim * 9 + c.widths.back() * c.dim;
  for (size_t i = c.widths.size() - 1; i > 0; --i) {
    const int64_t in = c.widths[i] * c.dim, out = c.widths[i - 1] * c.dim;
    n += in * out + out;      // shortcut
    n += in * in * 9;         // conv1, no bias
    n += in * out * 9 + out;  // conv2 with bias
  }
  return n + 16 * c.widths.front() * c.dim + 1;
}

}  // namespace

TEST(Wgan, FullParameterCounts) {
  const WganConfig cfg = wgan_config("full");
  Wgan model(cfg, engine::Device::meta(), 1);
  EXPECT_EQ(model.generator().parameter_count(), 8'540'483);
  EXPECT_EQ(model.critic().parameter_count(), 7'488'001);
  EXPECT_EQ(generator_params(cfg), 8'540'483);
  EXPECT_EQ(critic_params(cfg), 7'488'001);
  EXPECT_EQ(model.parameter_count(), 8'540'483 + 7'488'001);
  for (const char* preset : {"tiny", "small"}) {
    SCOPED_TRACE(preset);
    const WganConfig c = wgan_config(preset);
    Wgan m(c, engine::Device::meta(), 1);
    EXPECT_EQ(m.generator().parameter_count(), generator_params(c));
    EXPECT_EQ(m.critic().parameter_count(), critic_params(c));
  }
  EXPECT_EQ(cfg.image_size(), 64);
  EXPECT_THROW(wgan_config("huge"), std::invalid_argument);
}

TEST(Wgan, NamesReadLikeThePapersCode) {
  Wgan model(wgan_config("full"), engine::Device::meta(), 1);
  std::set<std::string> names;
  for (const auto& [name, t] : model.named_parameters()) names.insert(name);
  for (const char* n :
       {"generator.input.weight", "generator.res1.shortcut.weight", "generator.res4.bn2.weight",
        "generator.output.bias", "critic.input.weight", "critic.res4.conv2.weight", "critic.output.weight"}) {
    EXPECT_TRUE(names.count(n)) << n;
  }
}

TEST(Wgan, TinyShapes) {
  const WganConfig cfg = wgan_config("tiny");
  Wgan model(cfg, engine::Device::cpu(), 3);
  engine::NoGradScope no_grad;
  engine::Tensor z = engine::Tensor::full({4, cfg.noise}, 0.5f, engine::Device::cpu());
  engine::Tensor img = model.generator().forward(z);
  ASSERT_EQ(img.shape(), (engine::Shape{4, 3, 16, 16}));
  for (float v : img.to_vector()) ASSERT_TRUE(v > -1.0f && v < 1.0f);
  EXPECT_EQ(model.critic().forward(img).shape(), (engine::Shape{4, 1}));
}

TEST(Wgan, SceneImagesAndTheirStatistics) {
  SceneImages data(32, 7, engine::Device::cpu());
  const int64_t n = 64;
  const std::vector<float> a = data.heldout(0, n).to_vector();
  const std::vector<float> b = data.heldout(1, n).to_vector();
  EXPECT_EQ(a, data.heldout(0, n).to_vector());  // deterministic
  EXPECT_NE(a, b);
  for (float v : a) ASSERT_TRUE(v >= -1.0f && v <= 1.0f);
  const ImageStatistics sa = image_statistics(a, n, 32), sb = image_statistics(b, n, 32);
  EXPECT_EQ(sa.grid, 8);
  // The sky: the top row of cells is bluer than the bottom one in every sample's mean.
  EXPECT_GT(sa.mean[2 * 64 + 0], sa.mean[2 * 64 + 56]);
  EXPECT_LT(sa.mean[0 * 64 + 0], sa.mean[0 * 64 + 56]);
  // Two samples of the distribution are close; a blank grey image set is far.
  const std::vector<float> grey(a.size(), 0.0f);
  const double same = statistics_distance(sa, sb), blank = statistics_distance(image_statistics(grey, n, 32), sa);
  EXPECT_LT(same, 0.1);
  EXPECT_GT(blank, 3 * same);
  EXPECT_NEAR(statistics_distance(sa, sa), 0.0, 1e-12);
  EXPECT_THROW(image_statistics(a, n + 1, 32), std::invalid_argument);
}

TEST(Wgan, OneIterationIsFiveCriticStepsAndAGeneratorStep) {
  const WorkloadSpec* spec = find_workload("wgan");
  ASSERT_NE(spec, nullptr);
  WorkloadConfig wc;
  wc.preset = "tiny";
  wc.batch = 4;
  auto w = spec->create(wc);
  const auto before = w->model().parameters();
  std::vector<std::vector<float>> values;
  for (const auto& p : before) values.push_back(p.to_vector());
  LoopOptions o;
  o.iterations = 1;
  o.warmup = 0;
  const LoopResult r = run_training(*w, o);
  ASSERT_FALSE(r.failed) << r.error;
  ASSERT_EQ(r.iterations.size(), 1u);
  EXPECT_EQ(r.iterations[0].samples, 4);  // the generator's batch: its samples, not the critic's 5 x 4 images
  EXPECT_TRUE(std::isfinite(r.iterations[0].loss));
  // Both networks moved, and no gradient is left behind. The critic's biases after its last
  // ReLU are exempt: D shifts by the same constant for real and fake samples, the loss's
  // gradient for them is exactly 0 (the penalty does not see them either).
  size_t moved = 0, expected = 0;
  const std::string last = "critic.res" + std::to_string(wgan_config("tiny").blocks());
  for (size_t i = 0; i < before.size(); ++i) {
    const std::string& name = before[i].name();
    const bool exempt = name == "critic.output.bias" || name == last + ".conv2.bias" || name == last + ".shortcut.bias";
    const bool m = before[i].to_vector() != values[i];
    if (!exempt) {
      ++expected;
      moved += m;
      EXPECT_TRUE(m) << name << " did not move";
    }
    EXPECT_FALSE(before[i].grad().defined()) << name;
    EXPECT_TRUE(before[i].requires_grad()) << name;
  }
  EXPECT_EQ(moved, expected);
  EXPECT_EQ(expected + 3, before.size());
  EXPECT_THROW(spec->check([] {
    WorkloadConfig c;
    c.data = "fashion-mnist";
    return c;
  }()),
               std::invalid_argument);
}

// The generator moves toward the data: the distance between the statistics of its images and
// the held-out scenes falls well below where it starts (a generator that does not learn stays
// near its start, a grey blur).
TEST(Wgan, TinyConverges) {
  const WorkloadSpec* spec = find_workload("wgan");
  WorkloadConfig wc;
  wc.preset = "tiny";
  wc.seed = 5;
  auto w = spec->create(wc);
  const double start = w->evaluate(4).value;
  LoopOptions o;
  o.iterations = 400;  // about 25 s on one thread; the distance halves by ~180 and keeps falling
  o.warmup = 0;
  const LoopResult r = run_training(*w, o);
  ASSERT_FALSE(r.failed) << r.error;
  const double end = w->evaluate(4).value;
  std::printf("wgan tiny: image-statistics distance %.4f -> %.4f after %lld iterations\n", start, end,
              static_cast<long long>(o.iterations));
  EXPECT_LT(end, 0.5 * start);
}
