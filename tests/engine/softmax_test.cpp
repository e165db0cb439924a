// The softmax family (engine/ops/softmax.cpp): log_softmax (A3C's policy) against a double-precision
// reference, finite differences, first order only, and the rows of exp(log_softmax) summing to one.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "engine/autograd.h"
#include "engine/gradcheck.h"
#include "engine/ops.h"
#include "on_every_device.h"
#include "test_util.h"

namespace ts::engine {
namespace {

using namespace testing;

class SoftmaxOps : public OnDevice {};

TEST_P(SoftmaxOps, LogSoftmaxMatchesAReference) {
  // Large logits too: the normaliser must not overflow.
  const Tensor x = Tensor::from_vector({3, 4}, {1, 2, 3, 4, -5, 0, 5, 0.5f, 90, 100, 80, 95});
  const std::vector<float> y = ops::log_softmax(on(x)).to_vector();
  const std::vector<float> xv = x.to_vector();
  for (int r = 0; r < 3; ++r) {
    double s = 0;
    for (int k = 0; k < 4; ++k) s += std::exp(static_cast<double>(xv[r * 4 + k]));
    for (int k = 0; k < 4; ++k) EXPECT_NEAR(y[r * 4 + k], xv[r * 4 + k] - std::log(s), 1e-5) << r << "," << k;
  }
  const std::vector<float> p = ops::exp(ops::log_softmax(on(x))).to_vector();
  for (int r = 0; r < 3; ++r) EXPECT_NEAR(p[r * 4] + p[r * 4 + 1] + p[r * 4 + 2] + p[r * 4 + 3], 1.0, 1e-6);
  EXPECT_THROW(ops::log_softmax(on(Tensor::from_vector({4}, {1, 2, 3, 4}))), std::invalid_argument);
}

TEST_P(SoftmaxOps, GradientsMatchFiniteDifferences) {
  Tensor x = rand_tensor({5, 4}, 301, true, -2.0f, 2.0f);
  EXPECT_GRADCHECK(gradcheck([](const std::vector<Tensor>& t) { return ops::log_softmax(t[0]); }, {x}));
  EXPECT_GRADCHECK(gradcheck([](const std::vector<Tensor>& t) { return ops::exp(t[0]); }, {x}));
  // The policy entropy as the A3C loss builds it: -sum p log p.
  EXPECT_GRADCHECK(gradcheck(
      [](const std::vector<Tensor>& t) {
        const Tensor logp = ops::log_softmax(t[0]);
        return ops::scale(ops::sum(ops::mul(ops::exp(logp), logp)), -1.0f);
      },
      {x}));
  Tensor wide = rand_tensor({3, 40}, 803, true, -2.0f, 2.0f);  // rows past a warp's lanes
  EXPECT_GRADCHECK(gradcheck([](const std::vector<Tensor>& t) { return ops::log_softmax(t[0]); }, {wide}));
  // exp on another layout comes back plain, with the right gradient.
  Tensor xb = rand_tensor({1, 10, 2, 2}, 302, true, -1.0f, 1.0f);
  EXPECT_GRADCHECK(
      gradcheck([](const std::vector<Tensor>& t) { return ops::exp(ops::to_layout(t[0], Layout::blocked(8))); }, {xb}));
}

TEST_P(SoftmaxOps, BackwardIsFirstOrderOnly) {
  Tensor x = rand_tensor({2, 3}, 303);
  auto g = grad({ops::sum(ops::mul(ops::log_softmax(on(x)), on(x)))}, {x}, {}, /*create_graph=*/true);
  EXPECT_THROW(grad({ops::sum(g[0])}, {x}), std::logic_error);
  auto h = grad({ops::sum(ops::exp(on(x)))}, {x}, {}, /*create_graph=*/true);
  EXPECT_THROW(grad({ops::sum(h[0])}, {x}), std::logic_error);
}

TS_ON_EVERY_DEVICE(SoftmaxOps);

}  // namespace
}  // namespace ts::engine
