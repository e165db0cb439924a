// The norm family (engine/ops/norm.cpp): batch norm (training, eval, running statistics, 4-d,
// 2-d and blocked) and layer norm, against references and finite differences.
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

class NormOps : public OnDevice {};

TEST_P(NormOps, BatchNormDoubleBackwardThrows) {
  Tensor x = rand_tensor({2, 3, 4, 4}, 5);
  Tensor g = rand_tensor({3}, 6, true, 0.5f, 1.5f);
  Tensor b = rand_tensor({3}, 7);
  Tensor y = ops::sum(ops::mul(ops::batch_norm(on(x), on(g), on(b), Tensor(), Tensor(), true, 0.1f, 1e-5f), on(x)));
  auto gx = grad({y}, {x}, {}, /*create_graph=*/true);
  ASSERT_TRUE(gx[0].requires_grad());
  EXPECT_THROW(grad({ops::sum(gx[0])}, {g}), std::logic_error);
}

TEST_P(NormOps, BatchNormTrain4d) {
  Tensor x = rand_tensor({3, 4, 3, 3}, 21);
  Tensor g = rand_tensor({4}, 22, true, 0.5f, 1.5f);
  Tensor b = rand_tensor({4}, 23);
  Tensor rm = Tensor::zeros({4}, device());
  Tensor rv = Tensor::full({4}, 1.0f, device());
  EXPECT_GRADCHECK(gradcheck(
      [&](const std::vector<Tensor>& t) { return ops::batch_norm(t[0], t[1], t[2], rm, rv, true, 0.1f, 1e-5f); },
      {x, g, b}));
}

TEST_P(NormOps, BatchNormTrainBlockedAnd2d) {
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

TEST_P(NormOps, BatchNormEval) {
  Tensor x = rand_tensor({2, 4, 3, 3}, 30);
  Tensor g = rand_tensor({4}, 31, true, 0.5f, 1.5f);
  Tensor b = rand_tensor({4}, 32);
  Tensor rm = on(rand_tensor({4}, 33, false));
  Tensor rv = on(rand_tensor({4}, 34, false, 0.5f, 2.0f));
  EXPECT_GRADCHECK(gradcheck(
      [&](const std::vector<Tensor>& t) { return ops::batch_norm(t[0], t[1], t[2], rm, rv, false, 0.1f, 1e-5f); },
      {x, g, b}));
}

TEST_P(NormOps, BatchNormEvalAndRunningStats) {
  const int64_t n = 3, c = 4, hw = 5;
  Tensor x = rand_tensor({n, c, hw, 1}, 30, false, -2.0f, 3.0f);
  Tensor g = rand_tensor({c}, 31, false, 0.5f, 1.5f);
  Tensor b = rand_tensor({c}, 32, false);
  Tensor rm = on(rand_tensor({c}, 33, false));
  Tensor rv = on(rand_tensor({c}, 34, false, 0.5f, 2.0f));
  const float eps = 1e-3f, momentum = 0.25f;
  const auto xv = x.to_vector(), gv = g.to_vector(), bv = b.to_vector(), rmv = rm.to_vector(), rvv = rv.to_vector();
  // Eval: (x - rm) / sqrt(rv + eps) * g + b.
  const auto y = ops::batch_norm(on(x), on(g), on(b), rm, rv, false, momentum, eps).to_vector();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < c; ++k)
      for (int64_t s = 0; s < hw; ++s) {
        const size_t j = static_cast<size_t>((i * c + k) * hw + s);
        const double ref = (xv[j] - rmv[k]) / std::sqrt(rvv[k] + eps) * gv[k] + bv[k];
        EXPECT_NEAR(y[j], ref, 1e-4);
      }
  // Eval in a blocked layout: same values.
  const auto yb =
      ops::batch_norm(ops::to_layout(on(x), Layout::blocked(8)), on(g), on(b), rm, rv, false, momentum, eps);
  if (device().is_cpu()) {  // the GPU computes in plain NCHW
    EXPECT_EQ(yb.layout(), Layout::blocked(8));
  }
  EXPECT_LT(max_rel_diff(yb.to_vector(), y), 1e-5);
  // Training: batch statistics, running stats updated (unbiased variance).
  const auto yt = ops::batch_norm(on(x), on(g), on(b), rm, rv, true, momentum, eps).to_vector();
  const auto rm2 = rm.to_vector(), rv2 = rv.to_vector();
  const double count = static_cast<double>(n * hw);
  for (int64_t k = 0; k < c; ++k) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t s = 0; s < hw; ++s) mean += xv[static_cast<size_t>((i * c + k) * hw + s)];
    mean /= count;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t s = 0; s < hw; ++s) var += std::pow(xv[static_cast<size_t>((i * c + k) * hw + s)] - mean, 2);
    var /= count;
    EXPECT_NEAR(rm2[k], (1 - momentum) * rmv[k] + momentum * mean, 1e-5);
    EXPECT_NEAR(rv2[k], (1 - momentum) * rvv[k] + momentum * var * count / (count - 1), 1e-4);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t s = 0; s < hw; ++s) {
        const size_t j = static_cast<size_t>((i * c + k) * hw + s);
        EXPECT_NEAR(yt[j], (xv[j] - mean) / std::sqrt(var + eps) * gv[k] + bv[k], 1e-4);
      }
  }
}

// Batch norm then ReLU in one op: the same values, running statistics and gradients as the two
// ops, in plain and blocked layouts (the CPU fuses them in oneDNN; other backends compose them).
TEST_P(NormOps, BatchNormReluIsBatchNormThenRelu) {
  for (const Layout layout : {Layout::plain(), Layout::blocked(8)}) {
    SCOPED_TRACE(layout.str());
    Tensor x = rand_tensor({3, 10, 4, 4}, 40, true, -2.0f, 2.0f);
    Tensor g = rand_tensor({10}, 41, true, 0.5f, 1.5f);
    Tensor b = rand_tensor({10}, 42, true, -0.5f, 0.5f);
    const Tensor dy = rand_tensor({3, 10, 4, 4}, 43, false);
    std::vector<std::vector<float>> out[2];
    for (int fused = 0; fused < 2; ++fused) {
      Tensor rm = on(Tensor::zeros({10}, Device::cpu())), rv = on(Tensor::full({10}, 1.0f, Device::cpu()));
      const Tensor xd = ops::to_layout(on(x), layout);
      Tensor y = fused ? ops::batch_norm_relu(xd, on(g), on(b), rm, rv, true, 0.1f, 1e-5f)
                       : ops::relu(ops::batch_norm(xd, on(g), on(b), rm, rv, true, 0.1f, 1e-5f));
      const auto grads = grad({ops::sum(ops::mul(ops::to_layout(y, Layout::plain()), on(dy)))}, {x, g, b});
      out[fused] = {ops::to_layout(y, Layout::plain()).to_vector(),
                    rm.to_vector(),
                    rv.to_vector(),
                    grads[0].to_vector(),
                    grads[1].to_vector(),
                    grads[2].to_vector()};
    }
    for (size_t k = 0; k < out[0].size(); ++k) {
      SCOPED_TRACE(k);
      ASSERT_EQ(out[0][k].size(), out[1][k].size());
      for (size_t i = 0; i < out[0][k].size(); ++i) EXPECT_NEAR(out[1][k][i], out[0][k][i], 1e-4) << i;
    }
  }
}

// Against finite differences, on inputs whose normalised values keep clear of ReLU's kink: each
// channel's eight values are its mean +- 0.25, 0.75, 1.25, 1.75 (the smallest |z| is 0.22, far
// beyond what a step of 0.01 moves), beta 0.
TEST_P(NormOps, BatchNormReluGradients) {
  const int64_t n = 2, c = 3;
  std::vector<float> xv;
  const float offsets[8] = {-1.75f, 0.25f, 1.25f, -0.75f, 1.75f, -0.25f, 0.75f, -1.25f};
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t ch = 0; ch < c; ++ch) {
      for (int64_t k = 0; k < 4; ++k) xv.push_back(static_cast<float>(ch) + offsets[i * 4 + k]);
    }
  }
  Tensor x = Tensor::from_vector({n, c, 2, 2}, xv);
  x.set_requires_grad(true);
  Tensor g = rand_tensor({c}, 44, true, 0.5f, 1.5f);
  Tensor b = Tensor::zeros({c}, Device::cpu());
  b.set_requires_grad(true);
  EXPECT_GRADCHECK(gradcheck(
      [](const std::vector<Tensor>& t) {
        return ops::batch_norm_relu(t[0], t[1], t[2], Tensor(), Tensor(), true, 0.1f, 1e-5f);
      },
      {x, g, b}));
  // Its backward is first order, as batch norm's.
  Tensor y =
      ops::sum(ops::mul(ops::batch_norm_relu(on(x), on(g), on(b), Tensor(), Tensor(), true, 0.1f, 1e-5f), on(x)));
  auto gx = grad({y}, {x}, {}, /*create_graph=*/true);
  EXPECT_THROW(grad({ops::sum(gx[0])}, {g}), std::logic_error);
}

TEST_P(NormOps, LayerNorm) {
  Tensor x = rand_tensor({2, 3, 5}, 1, true, -2.0f, 2.0f);
  Tensor g = rand_tensor({5}, 2, true, 0.5f, 1.5f);
  Tensor b = rand_tensor({5}, 3);
  {
    NoGradScope no_grad;
    const auto y = ops::layer_norm(on(x), on(g), on(b), 1e-5f).to_vector();
    const auto xv = x.to_vector(), gv = g.to_vector(), bv = b.to_vector();
    for (int64_t r = 0; r < 6; ++r) {
      double m = 0, v = 0;
      for (int64_t k = 0; k < 5; ++k) m += xv[r * 5 + k] / 5.0;
      for (int64_t k = 0; k < 5; ++k) v += (xv[r * 5 + k] - m) * (xv[r * 5 + k] - m) / 5.0;
      for (int64_t k = 0; k < 5; ++k) {
        EXPECT_NEAR(y[r * 5 + k], (xv[r * 5 + k] - m) / std::sqrt(v + 1e-5) * gv[k] + bv[k], 1e-5);
      }
    }
  }
  EXPECT_GRADCHECK(
      gradcheck([](const std::vector<Tensor>& t) { return ops::layer_norm(t[0], t[1], t[2]); }, {x, g, b}));
  EXPECT_THROW(ops::layer_norm(on(x), on(rand_tensor({4}, 4)), on(b)), std::invalid_argument);
}

TS_ON_EVERY_DEVICE(NormOps);

}  // namespace
}  // namespace ts::engine
