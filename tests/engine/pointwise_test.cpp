// The pointwise family (engine/ops/pointwise.cpp): relu, clipped relu, tanh, add and mul across
// layouts, GELU and dropout: values and finite-difference gradients, second order where the
// backward is differentiable (exp is checked with log_softmax, softmax_test.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "engine/autograd.h"
#include "engine/context.h"
#include "engine/gradcheck.h"
#include "engine/ops.h"
#include "on_every_device.h"
#include "test_util.h"

namespace ts::engine {
namespace {

using namespace testing;

class PointwiseOps : public OnDevice {};

TEST_P(PointwiseOps, Relu) {
  Tensor x = away_from_zero({2, 3, 4, 4}, 40);
  EXPECT_GRADCHECK(gradcheck([](const std::vector<Tensor>& t) { return ops::relu(t[0]); }, {x}));
  EXPECT_GRADCHECK(gradgradcheck([](const std::vector<Tensor>& t) { return ops::relu(t[0]); }, {x}));
  // Blocked, with padded channels (C = 10 in blocks of 8).
  Tensor xb = away_from_zero({2, 10, 3, 3}, 41);
  EXPECT_GRADCHECK(gradcheck(
      [](const std::vector<Tensor>& t) { return ops::relu(ops::to_layout(t[0], Layout::blocked(8))); }, {xb}));
}

TEST_P(PointwiseOps, ReluBackwardIsDifferentiable) {
  Tensor dy = rand_tensor({3, 5}, 42);
  Tensor y = away_from_zero({3, 5}, 43, false);
  EXPECT_GRADCHECK(gradcheck([&](const std::vector<Tensor>& t) { return ops::relu_backward(t[0], on(y)); }, {dy}));
  EXPECT_GRADCHECK(gradgradcheck(
      [&](const std::vector<Tensor>& t) { return ops::mul(ops::relu_backward(t[0], on(y)), t[0]); }, {dy}));
}

TEST_P(PointwiseOps, ClippedRelu) {
  const float c = 0.6f;
  Tensor x = away_from_kinks({2, 3, 4, 4}, 44, c);
  // The forward is the clip; every piece occurs.
  const auto xv = x.to_vector(), yv = ops::clipped_relu(on(x), c).to_vector();
  int below = 0, inside = 0, above = 0;
  for (size_t i = 0; i < xv.size(); ++i) {
    ASSERT_EQ(yv[i], std::min(std::max(xv[i], 0.0f), c)) << i;
    below += xv[i] < 0.0f;
    inside += xv[i] > 0.0f && xv[i] < c;
    above += xv[i] > c;
  }
  EXPECT_GT(below, 10);
  EXPECT_GT(inside, 10);
  EXPECT_GT(above, 10);
  EXPECT_GRADCHECK(gradcheck([c](const std::vector<Tensor>& t) { return ops::clipped_relu(t[0], c); }, {x}));
  EXPECT_GRADCHECK(gradgradcheck([c](const std::vector<Tensor>& t) { return ops::clipped_relu(t[0], c); }, {x}));
  // Blocked, with padded channels (C = 10 in blocks of 8): the padding stays zero.
  Tensor xb = away_from_kinks({2, 10, 3, 3}, 45, c);
  EXPECT_GRADCHECK(gradcheck(
      [c](const std::vector<Tensor>& t) { return ops::clipped_relu(ops::to_layout(t[0], Layout::blocked(8)), c); },
      {xb}));
  // At the kinks themselves no gradient passes (hardtanh's convention): y = 0 and y = c.
  const Tensor y = on(Tensor::from_vector({4}, {0.0f, 0.3f, c, -0.0f}));
  EXPECT_EQ(ops::clipped_relu_backward(on(Tensor::from_vector({4}, {1, 2, 3, 4})), y, c).to_vector(),
            (std::vector<float>{0, 2, 0, 0}));
  EXPECT_THROW(ops::clipped_relu(on(x), 0.0f), std::invalid_argument);
}

TEST_P(PointwiseOps, ClippedReluBackwardIsDifferentiable) {
  const float c = 20.0f;
  Tensor dy = rand_tensor({3, 5}, 46);
  Tensor y = ops::clipped_relu(on(away_from_kinks({3, 5}, 47, c, false)), c);
  EXPECT_GRADCHECK(
      gradcheck([&](const std::vector<Tensor>& t) { return ops::clipped_relu_backward(t[0], y, c); }, {dy}));
  EXPECT_GRADCHECK(gradgradcheck(
      [&](const std::vector<Tensor>& t) { return ops::mul(ops::clipped_relu_backward(t[0], y, c), t[0]); }, {dy}));
}

TEST_P(PointwiseOps, AddIncludingDifferentLayouts) {
  Tensor a = rand_tensor({2, 10, 3, 3}, 50);
  Tensor b = rand_tensor({2, 10, 3, 3}, 51);
  EXPECT_GRADCHECK(gradcheck([](const std::vector<Tensor>& t) { return ops::add(t[0], t[1]); }, {a, b}));
  EXPECT_GRADCHECK(gradcheck(
      [](const std::vector<Tensor>& t) { return ops::add(ops::to_layout(t[0], Layout::blocked(8)), t[1]); }, {a, b}));
  EXPECT_GRADCHECK(gradcheck(
      [](const std::vector<Tensor>& t) {
        return ops::add(ops::to_layout(t[0], Layout::channels_last()), ops::to_layout(t[1], Layout::blocked(16)));
      },
      {a, b}));
  EXPECT_GRADCHECK(
      gradgradcheck([](const std::vector<Tensor>& t) { return ops::mul(ops::add(t[0], t[1]), t[1]); }, {a, b}));
  EXPECT_THROW(ops::add(on(a), on(rand_tensor({2, 10, 3, 4}, 1))), std::invalid_argument);
}

// The CPU keeps the first operand's blocked layout (the GPU computes in plain NCHW).
TEST(PointwiseCpu, AddKeepsTheFirstOperandsLayout) {
  Tensor a = rand_tensor({2, 10, 3, 3}, 50);
  Tensor b = rand_tensor({2, 10, 3, 3}, 51);
  Tensor y = ops::add(ops::to_layout(a.detach(), Layout::blocked(8)), b.detach());
  EXPECT_EQ(y.layout(), Layout::blocked(8));
}

TEST_P(PointwiseOps, Mul) {
  Tensor a = rand_tensor({4, 6}, 52);
  Tensor b = rand_tensor({4, 6}, 53);
  EXPECT_GRADCHECK(gradcheck([](const std::vector<Tensor>& t) { return ops::mul(t[0], t[1]); }, {a, b}));
  EXPECT_GRADCHECK(gradgradcheck([](const std::vector<Tensor>& t) { return ops::mul(t[0], t[1]); }, {a, b}));
  EXPECT_GRADCHECK(gradgradcheck([](const std::vector<Tensor>& t) { return ops::mul(t[0], t[0]); }, {a}));
  Tensor c = rand_tensor({2, 9, 2, 2}, 54);
  Tensor d = rand_tensor({2, 9, 2, 2}, 55);
  EXPECT_GRADCHECK(gradcheck(
      [](const std::vector<Tensor>& t) { return ops::mul(ops::to_layout(t[0], Layout::blocked(8)), t[1]); }, {c, d}));
}

TEST_P(PointwiseOps, Tanh) {
  Tensor x = rand_tensor({2, 3, 4, 4}, 110, true, -2.0f, 2.0f);
  EXPECT_GRADCHECK(gradcheck([](const std::vector<Tensor>& t) { return ops::tanh(t[0]); }, {x}));
  Tensor xb = rand_tensor({1, 10, 3, 3}, 111, true, -2.0f, 2.0f);
  EXPECT_GRADCHECK(gradcheck(
      [](const std::vector<Tensor>& t) { return ops::tanh(ops::to_layout(t[0], Layout::blocked(8))); }, {xb}));
  // Its backward is first order only: a second backward fails loudly rather than drop a term.
  auto g = grad({ops::sum(ops::mul(ops::tanh(on(x)), on(x)))}, {x}, {}, /*create_graph=*/true);
  EXPECT_THROW(grad({ops::sum(g[0])}, {x}), std::logic_error);
}

TEST_P(PointwiseOps, Gelu) {
  Tensor x = Tensor::from_vector({4}, {-1.0f, 0.0f, 1.0f, 2.0f});
  {
    NoGradScope no_grad;
    const auto y = ops::gelu(on(x)).to_vector();
    for (size_t i = 0; i < 4; ++i) {
      const double v = x.to_vector()[i];
      EXPECT_NEAR(y[i], 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))), 1e-6);
    }
    EXPECT_NEAR(y[2], 0.841345, 1e-5);
  }
  Tensor xr = rand_tensor({3, 7}, 5, true, -3.0f, 3.0f);
  EXPECT_GRADCHECK(gradcheck([](const std::vector<Tensor>& t) { return ops::gelu(t[0]); }, {xr}));
}

TEST_P(PointwiseOps, Dropout) {
  Tensor x = Tensor::full({100, 100}, 1.0f, device());
  NoGradScope no_grad;
  const auto y = ops::dropout(x, 0.25f, 42).to_vector();
  int64_t kept = 0;
  for (float v : y) {
    ASSERT_TRUE(v == 0.0f || std::abs(v - 1.0f / 0.75f) < 1e-6) << v;
    kept += v != 0.0f;
  }
  EXPECT_NEAR(static_cast<double>(kept) / 10000.0, 0.75, 0.02);
  EXPECT_EQ(ops::dropout(x, 0.25f, 42).to_vector(), y);  // the same seed draws the same mask
  EXPECT_NE(ops::dropout(x, 0.25f, 43).to_vector(), y);
  EXPECT_TRUE(ops::dropout(x, 0.25f, 42, /*training=*/false).same(x));
  EXPECT_THROW(ops::dropout(x, 1.0f, 1), std::invalid_argument);
}

TEST_P(PointwiseOps, DropoutGradient) {
  Tensor x = rand_tensor({4, 6}, 6);
  EXPECT_GRADCHECK(gradcheck([](const std::vector<Tensor>& t) { return ops::dropout(t[0], 0.5f, 7); }, {x}));
}

TS_ON_EVERY_DEVICE(PointwiseOps);

}  // namespace
}  // namespace ts::engine
