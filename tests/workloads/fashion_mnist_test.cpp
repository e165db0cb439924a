// The tiny ResNet-50 trained on real data: Fashion-MNIST (Debian's dataset-fashion-mnist)
// must reach at least 85% accuracy on its 10,000 test images after three epochs.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

#include "workloads/data/image_data.h"
#include "workloads/image_classifier.h"
#include "workloads/resnet50/resnet50.h"
#include "workloads/training_loop.h"

using namespace ts;
using namespace ts::workloads;

TEST(FashionMnist, TinyResNetReaches85PercentTestAccuracy) {
  if (!std::filesystem::exists(FashionMnist::kDebianDirectory)) {
    GTEST_FAIL() << "dataset-fashion-mnist is not installed: run scripts/setup";
  }
  ResNetConfig cfg = resnet50_config("tiny");
  cfg.in_channels = 1;
  constexpr int64_t kBatch = 128;
  constexpr int64_t kSteps = 3 * 60000 / kBatch;  // three epochs
  auto model = std::make_shared<ResNet>(cfg, engine::Device::cpu(), 1);
  auto data = std::make_unique<FashionMnist>(FashionMnist::kDebianDirectory, cfg.image_size, 1, engine::Device::cpu());
  engine::optim::LrSchedule lr;  // cosine decay to zero after a short warm-up
  lr.kind = engine::optim::LrSchedule::Kind::cosine;
  lr.base_lr = 0.05;
  lr.warmup_steps = 30;
  lr.total_steps = kSteps;
  ImageClassifier w(
      model, [model](const engine::Tensor& x) { return model->forward(x); }, std::move(data), kBatch, lr);
  LoopOptions o;
  o.warmup = 0;
  o.iterations = kSteps;
  o.on_iteration = [](const IterationResult& it) {
    if ((it.index + 1) % 100 == 0)
      std::fprintf(stderr, "fashion-mnist: step %lld loss %.3f\n", static_cast<long long>(it.index + 1), it.loss);
  };
  const LoopResult r = run_training(w, o);
  ASSERT_FALSE(r.failed) << r.error;
  const Quality q = w.evaluate(-1);
  std::fprintf(stderr, "fashion-mnist: test accuracy %.4f after three epochs\n", q.value);
  EXPECT_GE(q.value, 0.85);
}
