#include <gtest/gtest.h>

#include <filesystem>

#include "engine/context.h"
#include "workloads/data/image_data.h"

using namespace ts;
using namespace ts::workloads;

TEST(SyntheticImages, DeterministicShapesAndCategories) {
  SyntheticImages a(16, 3, 5, 42, engine::Device::cpu()), b(16, 3, 5, 42, engine::Device::cpu());
  const Batch x = a.next_train(4), y = b.next_train(4);
  EXPECT_EQ(x.inputs.shape(), (engine::Shape{4, 3, 16, 16}));
  EXPECT_EQ(x.inputs.category(), vocabulary::Category::inputs);
  EXPECT_EQ(x.inputs.to_vector(), y.inputs.to_vector());
  EXPECT_EQ(x.labels.to_vector(), y.labels.to_vector());
  for (float l : x.labels.to_vector()) {
    EXPECT_GE(l, 0);
    EXPECT_LT(l, 5);
  }
  // Held-out batches are fixed per index and differ from training draws.
  EXPECT_EQ(a.heldout(3, 4).inputs.to_vector(), b.heldout(3, 4).inputs.to_vector());
  EXPECT_NE(a.heldout(3, 4).inputs.to_vector(), a.next_train(4).inputs.to_vector());
}

// A batch's pixels are computed in parallel, its random draws serially: the same seed gives the
// same batch, bit for bit, on one thread and on several.
TEST(SyntheticImages, TheSameBatchOnAnyNumberOfThreads) {
  auto batch_on = [](int threads) {
    engine::OpThreadsScope scope(threads);
    SyntheticImages s(64, 3, 7, 9, engine::Device::cpu());
    (void)s.next_train(3);
    return s.next_train(6);
  };
  const Batch one = batch_on(1), several = batch_on(4);
  EXPECT_EQ(one.inputs.to_vector(), several.inputs.to_vector());
  EXPECT_EQ(one.labels.to_vector(), several.labels.to_vector());
}

TEST(FashionMnist, ReadsDebiansCopy) {
  if (!std::filesystem::exists(FashionMnist::kDebianDirectory)) {
    GTEST_FAIL() << "dataset-fashion-mnist is not installed: run scripts/setup";
  }
  FashionMnist f(FashionMnist::kDebianDirectory, 32, 1, engine::Device::cpu());
  EXPECT_EQ(f.train_size(), 60000);
  EXPECT_EQ(f.heldout_size(), 10000);
  const Batch b = f.heldout(0, 8);
  EXPECT_EQ(b.inputs.shape(), (engine::Shape{8, 1, 32, 32}));
  // The first test image of Fashion-MNIST is an ankle boot (class 9).
  EXPECT_EQ(b.labels.to_vector()[0], 9.0f);
  EXPECT_EQ(f.heldout(1250, 8).samples, 0);  // past the end
}

TEST(ImageSource, BadSpecsAreRejected) {
  EXPECT_THROW(make_image_source("imagenet", 32, 3, 10, 1, engine::Device::cpu()), std::invalid_argument);
  EXPECT_THROW(make_image_source("fashion-mnist:/nonexistent", 32, 3, 10, 1, engine::Device::cpu()),
               std::invalid_argument);
  EXPECT_THROW(make_image_source("fashion-mnist", 32, 3, 1000, 1, engine::Device::cpu()), std::invalid_argument);
}
