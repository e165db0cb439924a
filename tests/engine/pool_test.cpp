// The pool family (engine/ops/pool.cpp): max, average and global average pooling and nearest
// upsampling, against naive loops and finite differences.
#include <gtest/gtest.h>

#include "engine/context.h"
#include "engine/gradcheck.h"
#include "engine/ops.h"
#include "on_every_device.h"
#include "test_util.h"

namespace ts::engine {
namespace {

using namespace testing;

class PoolOps : public OnDevice {};

TEST_P(PoolOps, MaxPool) {
  Tensor x = distinct_values({2, 3, 6, 6}, 60);
  for (auto p : {pool_params(2, 2, 0), pool_params(3, 2, 1), pool_params(3, 1, 1)}) {
    EXPECT_GRADCHECK(gradcheck([p](const std::vector<Tensor>& t) { return ops::max_pool2d(t[0], p); }, {x}));
  }
  Tensor xb = distinct_values({1, 10, 5, 5}, 61);
  EXPECT_GRADCHECK(gradcheck(
      [](const std::vector<Tensor>& t) {
        return ops::max_pool2d(ops::to_layout(t[0], Layout::blocked(8)), pool_params(3, 2, 1));
      },
      {xb}));
}

TEST_P(PoolOps, AvgPool) {
  Tensor x = rand_tensor({2, 3, 6, 6}, 62);
  for (auto p :
       {pool_params(2, 2, 0), pool_params(3, 2, 1, false), pool_params(3, 2, 1, true), pool_params(3, 1, 1, true)}) {
    EXPECT_GRADCHECK(gradcheck([p](const std::vector<Tensor>& t) { return ops::avg_pool2d(t[0], p); }, {x}));
    EXPECT_GRADCHECK(gradgradcheck([p](const std::vector<Tensor>& t) { return ops::avg_pool2d(t[0], p); }, {x}));
  }
  Tensor xb = rand_tensor({1, 10, 4, 4}, 65);
  EXPECT_GRADCHECK(gradgradcheck(
      [](const std::vector<Tensor>& t) {
        return ops::avg_pool2d(ops::to_layout(t[0], Layout::blocked(8)), pool_params(2, 2, 0));
      },
      {xb}));
}

TEST_P(PoolOps, GlobalAvgPool) {
  Tensor x = rand_tensor({2, 5, 3, 4}, 63);
  EXPECT_GRADCHECK(gradcheck([](const std::vector<Tensor>& t) { return ops::global_avg_pool2d(t[0]); }, {x}));
  Tensor xb = rand_tensor({2, 16, 3, 3}, 64);
  EXPECT_GRADCHECK(gradcheck(
      [](const std::vector<Tensor>& t) { return ops::global_avg_pool2d(ops::to_layout(t[0], Layout::blocked(8))); },
      {xb}));
  Tensor y = ops::global_avg_pool2d(ops::to_layout(on(xb.detach()), Layout::blocked(8)));
  EXPECT_EQ(y.shape(), (Shape{2, 16}));
  EXPECT_TRUE(y.layout().is_plain());
  const auto xv = xb.to_vector();
  const auto yv = y.to_vector();
  for (int64_t i = 0; i < 32; ++i) {
    double s = 0;
    for (int64_t k = 0; k < 9; ++k) s += xv[static_cast<size_t>(i * 9 + k)];
    EXPECT_NEAR(yv[static_cast<size_t>(i)], s / 9, 1e-5);
  }
}

TEST_P(PoolOps, UpsampleNearest) {
  Tensor x = rand_tensor({2, 3, 3, 4}, 112);
  for (int64_t f : {1, 2, 3}) {
    SCOPED_TRACE(f);
    EXPECT_GRADCHECK(gradcheck([f](const std::vector<Tensor>& t) { return ops::upsample_nearest2d(t[0], f); }, {x}));
    EXPECT_GRADCHECK(
        gradgradcheck([f](const std::vector<Tensor>& t) { return ops::upsample_nearest2d(t[0], f); }, {x}));
  }
  // Values: every output pixel is its source pixel, in every layout.
  const std::vector<float> v = x.to_vector();
  for (Layout l : {Layout::plain(), Layout::blocked(8), Layout::channels_last()}) {
    SCOPED_TRACE(l.str());
    NoGradScope no_grad;
    Tensor y = ops::upsample_nearest2d(ops::to_layout(on(x), l), 2);
    EXPECT_EQ(y.layout(), l);
    ASSERT_EQ(y.shape(), (Shape{2, 3, 6, 8}));
    const std::vector<float> out = y.to_vector();
    for (int64_t nc = 0; nc < 6; ++nc) {
      for (int64_t i = 0; i < 6; ++i) {
        for (int64_t j = 0; j < 8; ++j) ASSERT_EQ(out[(nc * 6 + i) * 8 + j], v[(nc * 3 + i / 2) * 4 + j / 2]);
      }
    }
  }
  EXPECT_THROW(ops::upsample_nearest2d(on(x), 0), std::invalid_argument);
  EXPECT_THROW(ops::upsample_nearest2d_backward(on(rand_tensor({1, 1, 3, 3}, 1)), 2), std::invalid_argument);
}

TEST_P(PoolOps, PoolForwardMatchesNaive) {
  Tensor x = rand_tensor({2, 3, 7, 7}, 20, false);
  const Pool2dParams cases[] = {
      {2, 2, 2, 2, 0, 0, false}, {3, 3, 2, 2, 1, 1, false}, {3, 3, 2, 2, 1, 1, true}, {3, 3, 1, 1, 1, 1, true}};
  for (const auto& p : cases) {
    for (bool is_max : {true, false}) {
      Shape ys;
      const auto ref = naive_pool2d(x.to_vector(), x.shape(), p, is_max, &ys);
      Tensor y = is_max ? ops::max_pool2d(on(x), p) : ops::avg_pool2d(on(x), p);
      EXPECT_EQ(y.shape(), ys);
      EXPECT_LT(max_rel_diff(y.to_vector(), ref), 1e-5) << "max=" << is_max << " k=" << p.kernel_h;
      Tensor yb = is_max ? ops::max_pool2d(ops::to_layout(on(x), Layout::blocked(8)), p)
                         : ops::avg_pool2d(ops::to_layout(on(x), Layout::blocked(8)), p);
      if (device().is_cpu()) {  // the GPU computes in plain NCHW
        EXPECT_EQ(yb.layout(), Layout::blocked(8));
      }
      EXPECT_LT(max_rel_diff(yb.to_vector(), ref), 1e-5);
    }
  }
}

TS_ON_EVERY_DEVICE(PoolOps);

}  // namespace
}  // namespace ts::engine
