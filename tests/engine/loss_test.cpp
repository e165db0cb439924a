// The loss family (engine/ops/loss.cpp): softmax cross-entropy, label-smoothed cross-entropy,
// smooth L1 and the gradient penalty's norm: known values and finite differences.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "engine/context.h"
#include "engine/gradcheck.h"
#include "engine/ops.h"
#include "on_every_device.h"
#include "test_util.h"

namespace ts::engine {
namespace {

using namespace testing;

class LossOps : public OnDevice {};

TEST_P(LossOps, SoftmaxCrossEntropy) {
  Tensor logits = rand_tensor({4, 5}, 95, true, -2.0f, 2.0f);
  Tensor labels = Tensor::from_vector({4}, {0, 3, 4, 1});
  EXPECT_GRADCHECK(
      gradcheck([&](const std::vector<Tensor>& t) { return ops::softmax_cross_entropy(t[0], on(labels)); }, {logits}));
}

TEST_P(LossOps, NormPenalty) {
  Tensor x = rand_tensor({3, 2, 2, 3}, 113);
  Tensor norms;
  {
    NoGradScope no_grad;
    const float loss = ops::norm_penalty(on(x), 1.0f, &norms).item();
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

TEST_P(LossOps, SoftmaxCrossEntropyValues) {
  Tensor logits = on(Tensor::from_vector({2, 3}, {1.0f, 2.0f, 3.0f, 1000.0f, 0.0f, -1000.0f}));
  Tensor labels = on(Tensor::from_vector({2}, {2, 1}));
  const double l0 = -std::log(std::exp(3.0) / (std::exp(1.0) + std::exp(2.0) + std::exp(3.0)));
  const double l1 = 1000.0;  // stable log-sum-exp: no overflow
  EXPECT_NEAR(ops::softmax_cross_entropy(logits, labels).item(), (l0 + l1) / 2, 1e-3);
  try {
    ops::softmax_cross_entropy(logits, on(Tensor::from_vector({2}, {0, 3})));
    FAIL() << "expected invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("3"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ops::softmax_cross_entropy(logits, on(Tensor::from_vector({2}, {0, -1}))), std::invalid_argument);
  EXPECT_THROW(ops::softmax_cross_entropy(logits, on(Tensor::from_vector({3}, {0, 1, 1}))), std::invalid_argument);
}

TEST_P(LossOps, LabelSmoothedCrossEntropy) {
  Tensor logits = rand_tensor({5, 7}, 20, true, -2.0f, 2.0f);
  Tensor labels = Tensor::from_vector({5}, {3, 0, 6, 0, 2});  // rows labelled 0 (padding) are ignored
  {
    NoGradScope no_grad;
    const float eps = 0.1f;
    const float loss = ops::label_smoothed_cross_entropy(on(logits), on(labels), eps, 0, 3.0f).item();
    const auto x = logits.to_vector();
    double expect = 0;
    for (int64_t i : {0, 2, 4}) {
      const int64_t y = static_cast<int64_t>(labels.to_vector()[static_cast<size_t>(i)]);
      double mx = -1e30, s = 0;
      for (int64_t c = 0; c < 7; ++c) mx = std::max<double>(mx, x[i * 7 + c]);
      for (int64_t c = 0; c < 7; ++c) s += std::exp(x[i * 7 + c] - mx);
      const double lse = mx + std::log(s);
      for (int64_t c = 0; c < 7; ++c) expect -= ((c == y ? 1 - eps : 0.0) + eps / 7) * (x[i * 7 + c] - lse);
    }
    EXPECT_NEAR(loss, expect / 3.0, 1e-5);
    // eps 0 and nothing ignored: the plain softmax cross-entropy.
    Tensor all = on(Tensor::from_vector({5}, {3, 1, 6, 4, 2}));
    EXPECT_NEAR(ops::label_smoothed_cross_entropy(on(logits), all, 0.0f, -1, 5.0f).item(),
                ops::softmax_cross_entropy(on(logits), all).item(), 1e-5);
  }
  EXPECT_GRADCHECK(gradcheck(
      [&](const std::vector<Tensor>& t) { return ops::label_smoothed_cross_entropy(t[0], on(labels), 0.1f, 0, 3.0f); },
      {logits}));
  EXPECT_THROW(
      ops::label_smoothed_cross_entropy(on(logits), on(Tensor::from_vector({5}, {1, 2, 3, 9, 1})), 0.1f, 0, 1.0f),
      std::invalid_argument);
}

TEST_P(LossOps, SmoothL1KnownValues) {
  const Tensor x = on(Tensor::from_vector({3}, {0.0f, 0.5f, -2.0f}));
  const Tensor t = Tensor::zeros({3}, device());
  // beta 1: 0, 0.5 * 0.25 = 0.125, 2 - 0.5 = 1.5.
  EXPECT_FLOAT_EQ(ops::smooth_l1_loss(x, t, Tensor(), 1.0f).item(), 1.625f);
  EXPECT_FLOAT_EQ(ops::smooth_l1_loss(x, t, Tensor(), 1.0f, 4.0f).item(), 1.625f / 4);
  // Weights mask elements: 2 * 0.125.
  EXPECT_FLOAT_EQ(ops::smooth_l1_loss(x, t, on(Tensor::from_vector({3}, {1, 2, 0})), 1.0f).item(), 0.25f);
  // beta 1/9 (the RPN's): 0.5 and 2 are in the linear zone: 0.5 - 1/18 + 2 - 1/18.
  EXPECT_NEAR(ops::smooth_l1_loss(x, t, Tensor(), 1.0f / 9).item(), 2.5 - 1.0 / 9, 1e-6);
  // beta 0 is L1.
  EXPECT_FLOAT_EQ(ops::smooth_l1_loss(x, t, Tensor(), 0.0f).item(), 2.5f);
}

TEST_P(LossOps, SmoothL1Gradients) {
  // |x - t| kept away from beta's kink and from 0.
  Tensor x = away_from_zero({4, 4}, 70);
  Tensor t = rand_tensor({4, 4}, 71, true, -0.05f, 0.05f);
  const Tensor w = rand_tensor({4, 4}, 72, false, 0.0f, 2.0f);
  for (float beta : {1.0f, 1.0f / 9, 0.0f}) {
    SCOPED_TRACE(beta);
    EXPECT_GRADCHECK(
        gradcheck([&](const std::vector<Tensor>& in) { return ops::smooth_l1_loss(in[0], in[1], on(w), beta, 3.0f); },
                  {x, t}, GradcheckOptions{.eps = 1e-3}));
  }
  Tensor wg = on(w).detach();
  wg.set_requires_grad(true);
  EXPECT_THROW(ops::smooth_l1_loss(on(x), on(t), wg, 1.0f), std::invalid_argument);
  EXPECT_THROW(ops::smooth_l1_loss(on(x), on(t), on(w), 1.0f, 0.0f), std::invalid_argument);
  EXPECT_THROW(ops::smooth_l1_loss(on(x), on(rand_tensor({16}, 1)), Tensor(), 1.0f), std::invalid_argument);
}

TS_ON_EVERY_DEVICE(LossOps);

}  // namespace
}  // namespace ts::engine
