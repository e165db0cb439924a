// Gradient checks (finite differences, engine/gradcheck.h) for every op in engine/ops.h, and
// second-order checks for the ops whose backward is differentiable.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/autograd.h"
#include "engine/context.h"
#include "engine/gradcheck.h"
#include "engine/ops.h"
#include "test_util.h"

namespace ts::engine {
namespace {

using namespace testing;

Pool2dParams pool_params(int64_t k, int64_t s, int64_t pad, bool include_pad = false) {
  Pool2dParams p;
  p.kernel_h = p.kernel_w = k;
  p.stride_h = p.stride_w = s;
  p.pad_h = p.pad_w = pad;
  p.count_include_pad = include_pad;
  return p;
}

// ---------------------------------------------------------------- conv

struct ConvCase {
  const char* name;
  Shape x, w;
  Conv2dParams p;
  bool bias;
};

std::vector<ConvCase> conv_cases() {
  return {
      {"3x3_pad1", {2, 3, 6, 6}, {4, 3, 3, 3}, conv_params(1, 1), true},
      {"1x1", {2, 8, 5, 5}, {6, 8, 1, 1}, conv_params(1, 0), false},
      {"1x1_stride2", {2, 8, 6, 6}, {8, 8, 1, 1}, conv_params(2, 0), false},
      {"7x7_s2_p3", {1, 3, 11, 11}, {4, 3, 7, 7}, conv_params(2, 3), true},
      {"grouped", {2, 8, 5, 5}, {6, 4, 3, 3}, conv_params(1, 1, 1, 2), true},
      {"depthwise", {2, 8, 6, 6}, {8, 1, 3, 3}, conv_params(1, 1, 1, 8), false},
      {"dilated", {1, 4, 9, 9}, {4, 4, 3, 3}, conv_params(1, 2, 2), true},
      {"stride2_pad1_c16", {1, 16, 7, 7}, {8, 16, 3, 3}, conv_params(2, 1), true},
  };
}

TEST(OpsGrad, Conv2dConfigs) {
  uint64_t seed = 10;
  for (const auto& c : conv_cases()) {
    SCOPED_TRACE(c.name);
    Tensor x = rand_tensor(c.x, seed++);
    Tensor w = rand_tensor(c.w, seed++, true, -0.5f, 0.5f);
    Tensor b = c.bias ? rand_tensor({c.w[0]}, seed++) : Tensor();
    const Conv2dParams p = c.p;
    std::vector<Tensor> in{x, w};
    if (c.bias) in.push_back(b);
    EXPECT_GRADCHECK(gradcheck(
        [p](const std::vector<Tensor>& t) { return ops::conv2d(t[0], t[1], t.size() > 2 ? t[2] : Tensor(), p); }, in));
  }
}

TEST(OpsGrad, Conv2dBlockedInputGradientKeepsLayout) {
  Tensor x = rand_tensor({2, 16, 5, 5}, 3);
  Tensor w = rand_tensor({8, 16, 3, 3}, 4, true, -0.3f, 0.3f);
  const auto p = conv_params(1, 1);
  // The conv sees a blocked input; gradients still flow back to the plain leaf.
  EXPECT_GRADCHECK(gradcheck(
      [p](const std::vector<Tensor>& t) {
        return ops::conv2d(ops::to_layout(t[0], Layout::blocked(8)), t[1], Tensor(), p);
      },
      {x, w}));
  // The data gradient has the layout of the input it belongs to.
  Tensor dy = Tensor::full({2, 8, 5, 5}, 1.0f, Device::cpu());
  for (Layout l : {Layout::plain(), Layout::blocked(8), Layout::channels_last()}) {
    Tensor dx = ops::conv2d_backward_data(dy, w.detach(), x.shape(), l, p);
    EXPECT_EQ(dx.layout(), l);
    EXPECT_EQ(dx.shape(), x.shape());
  }
}

// Second order (WGAN-GP's penalty differentiates through the critic's backward).
TEST(OpsGrad, Conv2dDoubleBackward) {
  uint64_t seed = 30;
  for (const auto& c : conv_cases()) {
    SCOPED_TRACE(c.name);
    Tensor x = rand_tensor(c.x, seed++);
    Tensor w = rand_tensor(c.w, seed++, true, -0.5f, 0.5f);
    Tensor b = c.bias ? rand_tensor({c.w[0]}, seed++) : Tensor();
    const Conv2dParams p = c.p;
    std::vector<Tensor> in{x, w};
    if (c.bias) in.push_back(b);
    EXPECT_GRADCHECK(gradgradcheck(
        [p](const std::vector<Tensor>& t) { return ops::conv2d(t[0], t[1], t.size() > 2 ? t[2] : Tensor(), p); }, in));
  }
}

TEST(OpsGrad, Conv2dBackwardPiecesAreDifferentiable) {
  const auto p = conv_params(2, 1);
  Tensor dy = rand_tensor({2, 4, 3, 3}, 40);
  Tensor w = rand_tensor({4, 3, 3, 3}, 41, true, -0.5f, 0.5f);
  Tensor x = rand_tensor({2, 3, 6, 6}, 42);
  const Shape xs = x.shape(), ws = w.shape();
  EXPECT_GRADCHECK(gradcheck(
      [p, xs](const std::vector<Tensor>& t) { return ops::conv2d_backward_data(t[0], t[1], xs, Layout::plain(), p); },
      {dy, w}));
  for (int which : {0, 1}) {   // the weights gradient, then the bias gradient
    SCOPED_TRACE(which);
    EXPECT_GRADCHECK(gradcheck(
        [p, ws, which](const std::vector<Tensor>& t) {
          WeightGrads r = ops::conv2d_backward_weights(t[0], t[1], ws, true, p);
          return which == 0 ? r.dw : r.dbias;
        },
        {x, dy}));
  }
}

TEST(OpsGrad, BatchNormDoubleBackwardThrows) {
  Tensor x = rand_tensor({2, 3, 4, 4}, 5);
  Tensor g = rand_tensor({3}, 6, true, 0.5f, 1.5f);
  Tensor b = rand_tensor({3}, 7);
  Tensor y = ops::sum(ops::mul(ops::batch_norm(x, g, b, Tensor(), Tensor(), true, 0.1f, 1e-5f), x));
  auto gx = grad({y}, {x}, {}, /*create_graph=*/true);
  ASSERT_TRUE(gx[0].requires_grad());
  EXPECT_THROW(grad({ops::sum(gx[0])}, {g}), std::logic_error);
}

TEST(OpsGrad, Conv2dRejectsBadShapes) {
  Tensor x = rand_tensor({1, 3, 4, 4}, 5, false);
  Tensor w = rand_tensor({2, 4, 3, 3}, 6, false);
  EXPECT_THROW(ops::conv2d(x, w, Tensor(), conv_params(1, 1)), std::invalid_argument);
  Tensor w2 = rand_tensor({2, 3, 5, 5}, 6, false);
  EXPECT_THROW(ops::conv2d(x, w2, Tensor(), conv_params(1, 0)), std::invalid_argument);
  EXPECT_THROW(ops::conv2d(rand_tensor({3, 4, 4}, 1, false), w, Tensor(), conv_params(1, 1)), std::invalid_argument);
}

// ---------------------------------------------------------------- batch norm

TEST(OpsGrad, BatchNormTrain4d) {
  Tensor x = rand_tensor({3, 4, 3, 3}, 21);
  Tensor g = rand_tensor({4}, 22, true, 0.5f, 1.5f);
  Tensor b = rand_tensor({4}, 23);
  Tensor rm = Tensor::zeros({4}, Device::cpu());
  Tensor rv = Tensor::full({4}, 1.0f, Device::cpu());
  EXPECT_GRADCHECK(gradcheck(
      [&](const std::vector<Tensor>& t) { return ops::batch_norm(t[0], t[1], t[2], rm, rv, true, 0.1f, 1e-5f); },
      {x, g, b}));
}

TEST(OpsGrad, BatchNormTrainBlockedAnd2d) {
  Tensor x = rand_tensor({2, 10, 3, 3}, 24);
  Tensor g = rand_tensor({10}, 25, true, 0.5f, 1.5f);
  Tensor b = rand_tensor({10}, 26);
  Tensor none;
  EXPECT_GRADCHECK(gradcheck(
      [&](const std::vector<Tensor>& t) {
        return ops::batch_norm(ops::to_layout(t[0], Layout::blocked(8)), t[1], t[2], none, none, true, 0.1f, 1e-5f);
      },
      {x, g, b}));
  Tensor x2 = rand_tensor({6, 5}, 27);
  Tensor g2 = rand_tensor({5}, 28, true, 0.5f, 1.5f);
  Tensor b2 = rand_tensor({5}, 29);
  EXPECT_GRADCHECK(gradcheck(
      [&](const std::vector<Tensor>& t) { return ops::batch_norm(t[0], t[1], t[2], none, none, true, 0.1f, 1e-5f); },
      {x2, g2, b2}));
}

TEST(OpsGrad, BatchNormEval) {
  Tensor x = rand_tensor({2, 4, 3, 3}, 30);
  Tensor g = rand_tensor({4}, 31, true, 0.5f, 1.5f);
  Tensor b = rand_tensor({4}, 32);
  Tensor rm = rand_tensor({4}, 33, false);
  Tensor rv = rand_tensor({4}, 34, false, 0.5f, 2.0f);
  EXPECT_GRADCHECK(gradcheck(
      [&](const std::vector<Tensor>& t) { return ops::batch_norm(t[0], t[1], t[2], rm, rv, false, 0.1f, 1e-5f); },
      {x, g, b}));
}

// ---------------------------------------------------------------- element-wise

TEST(OpsGrad, Relu) {
  Tensor x = away_from_zero({2, 3, 4, 4}, 40);
  EXPECT_GRADCHECK(gradcheck([](const std::vector<Tensor>& t) { return ops::relu(t[0]); }, {x}));
  EXPECT_GRADCHECK(gradgradcheck([](const std::vector<Tensor>& t) { return ops::relu(t[0]); }, {x}));
  // Blocked, with padded channels (C = 10 in blocks of 8).
  Tensor xb = away_from_zero({2, 10, 3, 3}, 41);
  EXPECT_GRADCHECK(gradcheck(
      [](const std::vector<Tensor>& t) { return ops::relu(ops::to_layout(t[0], Layout::blocked(8))); }, {xb}));
}

TEST(OpsGrad, ReluBackwardIsDifferentiable) {
  Tensor dy = rand_tensor({3, 5}, 42);
  Tensor y = away_from_zero({3, 5}, 43, false);
  EXPECT_GRADCHECK(gradcheck([&](const std::vector<Tensor>& t) { return ops::relu_backward(t[0], y); }, {dy}));
  EXPECT_GRADCHECK(gradgradcheck(
      [&](const std::vector<Tensor>& t) { return ops::mul(ops::relu_backward(t[0], y), t[0]); }, {dy}));
}

// Deep Speech 2's clipped ReLU, min(max(x, 0), c): values kept 0.05 away from both kinks
// (the finite-difference step is 0.01), so that the checks see the three pieces.
Tensor away_from_kinks(const Shape& shape, uint64_t seed, float ceiling, bool requires_grad = true) {
  std::vector<float> v = uniform(shape_numel(shape), seed, -1.0f, 2.0f * ceiling);
  for (float& e : v) {
    if (std::abs(e) < 0.05f) e = e < 0.0f ? -0.05f - 0.3f : 0.05f + 0.1f;
    if (std::abs(e - ceiling) < 0.05f) e = ceiling + (e < ceiling ? -0.1f : 0.1f);
  }
  Tensor t = Tensor::from_vector(shape, v);
  t.set_requires_grad(requires_grad);
  return t;
}

TEST(OpsGrad, ClippedRelu) {
  const float c = 0.6f;
  Tensor x = away_from_kinks({2, 3, 4, 4}, 44, c);
  // The forward is the clip; every piece occurs.
  const auto xv = x.to_vector(), yv = ops::clipped_relu(x, c).to_vector();
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
  const Tensor y = Tensor::from_vector({4}, {0.0f, 0.3f, c, -0.0f});
  EXPECT_EQ(ops::clipped_relu_backward(Tensor::from_vector({4}, {1, 2, 3, 4}), y, c).to_vector(),
            (std::vector<float>{0, 2, 0, 0}));
  EXPECT_THROW(ops::clipped_relu(x, 0.0f), std::invalid_argument);
}

TEST(OpsGrad, ClippedReluBackwardIsDifferentiable) {
  const float c = 20.0f;
  Tensor dy = rand_tensor({3, 5}, 46);
  Tensor y = ops::clipped_relu(away_from_kinks({3, 5}, 47, c, false), c);
  EXPECT_GRADCHECK(
      gradcheck([&](const std::vector<Tensor>& t) { return ops::clipped_relu_backward(t[0], y, c); }, {dy}));
  EXPECT_GRADCHECK(gradgradcheck(
      [&](const std::vector<Tensor>& t) { return ops::mul(ops::clipped_relu_backward(t[0], y, c), t[0]); }, {dy}));
}

TEST(OpsGrad, AddIncludingDifferentLayouts) {
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
  EXPECT_GRADCHECK(gradgradcheck(
      [](const std::vector<Tensor>& t) { return ops::mul(ops::add(t[0], t[1]), t[1]); }, {a, b}));
  Tensor y = ops::add(ops::to_layout(a.detach(), Layout::blocked(8)), b.detach());
  EXPECT_EQ(y.layout(), Layout::blocked(8));
  EXPECT_THROW(ops::add(a, rand_tensor({2, 10, 3, 4}, 1)), std::invalid_argument);
}

TEST(OpsGrad, Mul) {
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

TEST(OpsGrad, ScaleSumMean) {
  Tensor a = rand_tensor({3, 4}, 56);
  EXPECT_GRADCHECK(gradcheck([](const std::vector<Tensor>& t) { return ops::scale(t[0], -2.5f); }, {a}));
  EXPECT_GRADCHECK(gradcheck([](const std::vector<Tensor>& t) { return ops::sum(t[0]); }, {a}));
  EXPECT_GRADCHECK(gradcheck([](const std::vector<Tensor>& t) { return ops::mean(t[0]); }, {a}));
  EXPECT_GRADCHECK(gradgradcheck(
      [](const std::vector<Tensor>& t) { return ops::scale(ops::mul(ops::sum(t[0]), ops::mean(t[0])), 0.5f); }, {a}));
  Tensor b = rand_tensor({2, 10, 2, 2}, 57);
  EXPECT_GRADCHECK(gradcheck(
      [](const std::vector<Tensor>& t) { return ops::mean(ops::to_layout(t[0], Layout::blocked(8))); }, {b}));
  EXPECT_NEAR(ops::sum(ops::to_layout(b.detach(), Layout::blocked(8))).item(), ops::sum(b.detach()).item(), 1e-4);
}

// ---------------------------------------------------------------- pooling

TEST(OpsGrad, MaxPool) {
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

TEST(OpsGrad, AvgPool) {
  Tensor x = rand_tensor({2, 3, 6, 6}, 62);
  for (auto p : {pool_params(2, 2, 0), pool_params(3, 2, 1, false), pool_params(3, 2, 1, true),
                 pool_params(3, 1, 1, true)}) {
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

TEST(OpsGrad, GlobalAvgPool) {
  Tensor x = rand_tensor({2, 5, 3, 4}, 63);
  EXPECT_GRADCHECK(gradcheck([](const std::vector<Tensor>& t) { return ops::global_avg_pool2d(t[0]); }, {x}));
  Tensor xb = rand_tensor({2, 16, 3, 3}, 64);
  EXPECT_GRADCHECK(gradcheck(
      [](const std::vector<Tensor>& t) { return ops::global_avg_pool2d(ops::to_layout(t[0], Layout::blocked(8))); },
      {xb}));
  Tensor y = ops::global_avg_pool2d(ops::to_layout(xb.detach(), Layout::blocked(8)));
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

// ---------------------------------------------------------------- linear

TEST(OpsGrad, Linear) {
  Tensor x = rand_tensor({4, 5}, 70);
  Tensor w = rand_tensor({3, 5}, 71);
  Tensor b = rand_tensor({3}, 72);
  EXPECT_GRADCHECK(gradcheck([](const std::vector<Tensor>& t) { return ops::linear(t[0], t[1], t[2]); }, {x, w, b}));
  EXPECT_GRADCHECK(gradcheck([](const std::vector<Tensor>& t) { return ops::linear(t[0], t[1], Tensor()); }, {x, w}));
  EXPECT_GRADCHECK(gradgradcheck([](const std::vector<Tensor>& t) { return ops::linear(t[0], t[1], t[2]); }, {x, w, b}));
  EXPECT_GRADCHECK(
      gradgradcheck([](const std::vector<Tensor>& t) { return ops::linear(t[0], t[1], Tensor()); }, {x, w}));
  // A WGAN-GP-like penalty: || d(sum(relu(linear)))/dx ||^2 differentiated w.r.t. w.
  Tensor xa = away_from_zero({4, 5}, 73);
  EXPECT_GRADCHECK(gradgradcheck(
      [](const std::vector<Tensor>& t) { return ops::relu(ops::linear(t[0], t[1], t[2])); }, {xa, w, b}));
  EXPECT_THROW(ops::linear(x, rand_tensor({3, 4}, 1), Tensor()), std::invalid_argument);
}

// ---------------------------------------------------------------- concat / slice / shape

TEST(OpsGrad, ConcatChannelsAndBatch) {
  Tensor a = rand_tensor({2, 3, 2, 2}, 80);
  Tensor b = rand_tensor({2, 5, 2, 2}, 81);
  EXPECT_GRADCHECK(gradcheck([](const std::vector<Tensor>& t) { return ops::concat({t[0], t[1]}, 1); }, {a, b}));
  Tensor c = rand_tensor({1, 3, 2, 2}, 82);
  EXPECT_GRADCHECK(gradcheck([](const std::vector<Tensor>& t) { return ops::concat({t[0], t[1]}, 0); }, {a, c}));
  // Blocked inputs whose channel counts are multiples of the block stay blocked.
  Tensor d = rand_tensor({1, 8, 2, 2}, 83);
  Tensor e = rand_tensor({1, 16, 2, 2}, 84);
  auto blocked_concat = [](const std::vector<Tensor>& t) {
    return ops::concat({ops::to_layout(t[0], Layout::blocked(8)), ops::to_layout(t[1], Layout::blocked(8))}, 1);
  };
  EXPECT_GRADCHECK(gradcheck(blocked_concat, {d, e}));
  EXPECT_EQ(blocked_concat({d.detach(), e.detach()}).layout(), Layout::blocked(8));
  // Not multiples: falls back to plain, values still right.
  Tensor f = rand_tensor({1, 3, 2, 2}, 85);
  EXPECT_GRADCHECK(gradcheck(blocked_concat, {d, f}));
  EXPECT_GRADCHECK(gradgradcheck(
      [](const std::vector<Tensor>& t) { return ops::mul(ops::concat({t[0], t[1]}, 1), ops::concat({t[1], t[0]}, 1)); },
      {a, rand_tensor({2, 3, 2, 2}, 88)}));
}

TEST(OpsGrad, Slice) {
  Tensor x = rand_tensor({2, 10, 3, 3}, 86);
  EXPECT_GRADCHECK(gradcheck([](const std::vector<Tensor>& t) { return ops::slice(t[0], 1, 2, 5); }, {x}));
  EXPECT_GRADCHECK(gradcheck([](const std::vector<Tensor>& t) { return ops::slice(t[0], 0, 1, 1); }, {x}));
  EXPECT_GRADCHECK(gradcheck([](const std::vector<Tensor>& t) { return ops::slice(t[0], 3, 0, 2); }, {x}));
  Tensor xb = rand_tensor({1, 24, 2, 2}, 87);
  EXPECT_GRADCHECK(gradcheck(
      [](const std::vector<Tensor>& t) { return ops::slice(ops::to_layout(t[0], Layout::blocked(8)), 1, 8, 16); },
      {xb}));
  EXPECT_GRADCHECK(gradcheck(
      [](const std::vector<Tensor>& t) { return ops::slice(ops::to_layout(t[0], Layout::blocked(8)), 1, 3, 7); },
      {xb}));
  EXPECT_GRADCHECK(gradgradcheck(
      [](const std::vector<Tensor>& t) { return ops::mul(ops::slice(t[0], 1, 2, 5), ops::slice(t[0], 1, 4, 5)); }, {x}));
  EXPECT_THROW(ops::slice(x, 1, 8, 5), std::invalid_argument);
}

TEST(OpsGrad, FlattenReshapeToLayout) {
  Tensor x = rand_tensor({2, 10, 3, 3}, 90);
  EXPECT_GRADCHECK(gradcheck([](const std::vector<Tensor>& t) { return ops::flatten(t[0]); }, {x}));
  EXPECT_GRADCHECK(gradcheck([](const std::vector<Tensor>& t) { return ops::reshape(t[0], {5, 36}); }, {x}));
  EXPECT_GRADCHECK(gradcheck(
      [](const std::vector<Tensor>& t) { return ops::flatten(ops::to_layout(t[0], Layout::blocked(8))); }, {x}));
  for (Layout l : {Layout::blocked(8), Layout::blocked(16), Layout::channels_last()}) {
    EXPECT_GRADCHECK(gradcheck([l](const std::vector<Tensor>& t) { return ops::to_layout(t[0], l); }, {x}));
    EXPECT_GRADCHECK(gradgradcheck(
        [l](const std::vector<Tensor>& t) {
          Tensor y = ops::to_layout(t[0], l);
          return ops::mul(y, y);
        },
        {x}));
  }
  EXPECT_GRADCHECK(gradgradcheck(
      [](const std::vector<Tensor>& t) {
        Tensor y = ops::reshape(t[0], {18, 10});
        return ops::mul(y, y);
      },
      {x}));
  EXPECT_THROW(ops::reshape(x, {7, 7}), std::invalid_argument);
}

// ---------------------------------------------------------------- loss

TEST(OpsGrad, SoftmaxCrossEntropy) {
  Tensor logits = rand_tensor({4, 5}, 95, true, -2.0f, 2.0f);
  Tensor labels = Tensor::from_vector({4}, {0, 3, 4, 1});
  EXPECT_GRADCHECK(
      gradcheck([&](const std::vector<Tensor>& t) { return ops::softmax_cross_entropy(t[0], labels); }, {logits}));
}

// ---------------------------------------------------------------- a small network end to end

TEST(OpsGrad, SmallNetwork) {
  Tensor x = rand_tensor({2, 3, 8, 8}, 100, false);
  Tensor w1 = rand_tensor({8, 3, 3, 3}, 101, true, -0.4f, 0.4f);
  Tensor g1 = rand_tensor({8}, 102, true, 0.5f, 1.5f);
  Tensor b1 = rand_tensor({8}, 103, true, 0.5f, 1.0f);
  Tensor w2 = rand_tensor({8, 8, 3, 3}, 104, true, -0.2f, 0.2f);
  Tensor fc = rand_tensor({4, 8}, 105);
  Tensor labels = Tensor::from_vector({2}, {1, 3});
  auto f = [&](const std::vector<Tensor>& t) {
    Tensor h = ops::conv2d(x, t[0], Tensor(), conv_params(1, 1));
    h = ops::batch_norm(h, t[1], t[2], Tensor(), Tensor(), true, 0.1f, 1e-5f);
    Tensor h2 = ops::conv2d(h, t[3], Tensor(), conv_params(1, 1));
    h = ops::add(h, h2);
    h = ops::global_avg_pool2d(h);
    return ops::softmax_cross_entropy(ops::linear(h, t[4], Tensor()), labels);
  };
  GradcheckOptions o;
  o.max_elements_per_input = 16;
  EXPECT_GRADCHECK(gradcheck(f, {w1, g1, b1, w2, fc}, o));
}

// ---------------------------------------------------------------- WGAN-GP's pieces

TEST(OpsGrad, Tanh) {
  Tensor x = rand_tensor({2, 3, 4, 4}, 110, true, -2.0f, 2.0f);
  EXPECT_GRADCHECK(gradcheck([](const std::vector<Tensor>& t) { return ops::tanh(t[0]); }, {x}));
  Tensor xb = rand_tensor({1, 10, 3, 3}, 111, true, -2.0f, 2.0f);
  EXPECT_GRADCHECK(gradcheck(
      [](const std::vector<Tensor>& t) { return ops::tanh(ops::to_layout(t[0], Layout::blocked(8))); }, {xb}));
  // Its backward is first order only: a second backward fails loudly rather than drop a term.
  auto g = grad({ops::sum(ops::mul(ops::tanh(x), x))}, {x}, {}, /*create_graph=*/true);
  EXPECT_THROW(grad({ops::sum(g[0])}, {x}), std::logic_error);
}

TEST(OpsGrad, UpsampleNearest) {
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
    Tensor y = ops::upsample_nearest2d(ops::to_layout(x, l), 2);
    EXPECT_EQ(y.layout(), l);
    ASSERT_EQ(y.shape(), (Shape{2, 3, 6, 8}));
    const std::vector<float> out = y.to_vector();
    for (int64_t nc = 0; nc < 6; ++nc) {
      for (int64_t i = 0; i < 6; ++i) {
        for (int64_t j = 0; j < 8; ++j) ASSERT_EQ(out[(nc * 6 + i) * 8 + j], v[(nc * 3 + i / 2) * 4 + j / 2]);
      }
    }
  }
  EXPECT_THROW(ops::upsample_nearest2d(x, 0), std::invalid_argument);
  EXPECT_THROW(ops::upsample_nearest2d_backward(rand_tensor({1, 1, 3, 3}, 1), 2), std::invalid_argument);
}

TEST(OpsGrad, NormPenalty) {
  Tensor x = rand_tensor({3, 2, 2, 3}, 113);
  Tensor norms;
  {
    NoGradScope no_grad;
    const float loss = ops::norm_penalty(x, 1.0f, &norms).item();
    const std::vector<float> v = x.to_vector();
    double expect = 0;
    for (int64_t n = 0; n < 3; ++n) {
      double ss = 0;
      for (int64_t k = 0; k < 12; ++k) ss += static_cast<double>(v[n * 12 + k]) * v[n * 12 + k];
      EXPECT_NEAR(norms.to_vector()[static_cast<size_t>(n)], std::sqrt(ss), 1e-5);
      expect += (std::sqrt(ss) - 1.0) * (std::sqrt(ss) - 1.0) / 3.0;
    }
    EXPECT_NEAR(loss, expect, 1e-5);
  }
  EXPECT_GRADCHECK(gradcheck([](const std::vector<Tensor>& t) { return ops::norm_penalty(t[0], 1.0f); }, {x}));
  EXPECT_GRADCHECK(gradcheck([](const std::vector<Tensor>& t) { return ops::norm_penalty(t[0], 0.5f); }, {x}));
}

// The whole gradient penalty of WGAN-GP on a small critic with every op the real critic uses
// (conv with and without bias, relu, mean-pool, residual add, linear): d penalty / d params
// goes through the critic's backward, checked against finite differences. The relu sits on
// the input, kept away from 0, so that no parameter step flips its pattern (relu'' = 0 would
// make finite differences measure kink crossings, not the gradient).
TEST(OpsGrad, GradientPenaltyThroughCritic) {
  Tensor xhat = away_from_zero({2, 3, 8, 8}, 120, false);
  Tensor w1 = rand_tensor({4, 3, 3, 3}, 121, true, -0.5f, 0.5f);
  Tensor b1 = rand_tensor({4}, 122);
  Tensor w2 = rand_tensor({4, 4, 3, 3}, 123, true, -0.5f, 0.5f);
  Tensor ws = rand_tensor({4, 3, 1, 1}, 124, true, -0.5f, 0.5f);
  Tensor fc = rand_tensor({1, 64}, 125, true, -0.5f, 0.5f);
  Tensor fcb = rand_tensor({1}, 126);
  auto penalty = [&](const std::vector<Tensor>& t) {
    Tensor x = xhat.detach();
    x.set_requires_grad(true);
    const Pool2dParams pool = pool_params(2, 2, 0);
    Tensor h = ops::conv2d(ops::relu(x), t[0], t[1], conv_params(1, 1));
    h = ops::avg_pool2d(ops::conv2d(h, t[2], Tensor(), conv_params(1, 1)), pool);
    Tensor shortcut = ops::conv2d(ops::avg_pool2d(x, pool), t[3], Tensor(), conv_params(1, 0));
    Tensor d = ops::linear(ops::flatten(ops::add(shortcut, h)), t[4], t[5]);
    Tensor gx = grad({ops::sum(d)}, {x}, {}, /*create_graph=*/true)[0];
    return ops::scale(ops::norm_penalty(gx, 1.0f), 10.0f);
  };
  GradcheckOptions o;
  o.max_elements_per_input = 12;
  EXPECT_GRADCHECK(gradcheck(penalty, {w1, b1, w2, ws, fc, fcb}, o));
}

}  // namespace
}  // namespace ts::engine
