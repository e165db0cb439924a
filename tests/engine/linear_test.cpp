// The linear family (engine/ops/linear.cpp): the fully connected layer against a naive loop and
// finite differences (first and second order).
#include <gtest/gtest.h>

#include "engine/gradcheck.h"
#include "engine/ops.h"
#include "on_every_device.h"
#include "test_util.h"

namespace ts::engine {
namespace {

using namespace testing;

class LinearOps : public OnDevice {};

TEST_P(LinearOps, Linear) {
  Tensor x = rand_tensor({4, 5}, 70);
  Tensor w = rand_tensor({3, 5}, 71);
  Tensor b = rand_tensor({3}, 72);
  EXPECT_GRADCHECK(gradcheck([](const std::vector<Tensor>& t) { return ops::linear(t[0], t[1], t[2]); }, {x, w, b}));
  EXPECT_GRADCHECK(gradcheck([](const std::vector<Tensor>& t) { return ops::linear(t[0], t[1], Tensor()); }, {x, w}));
  EXPECT_GRADCHECK(
      gradgradcheck([](const std::vector<Tensor>& t) { return ops::linear(t[0], t[1], t[2]); }, {x, w, b}));
  EXPECT_GRADCHECK(
      gradgradcheck([](const std::vector<Tensor>& t) { return ops::linear(t[0], t[1], Tensor()); }, {x, w}));
  // A WGAN-GP-like penalty: || d(sum(relu(linear)))/dx ||^2 differentiated w.r.t. w.
  Tensor xa = away_from_zero({4, 5}, 73);
  EXPECT_GRADCHECK(
      gradgradcheck([](const std::vector<Tensor>& t) { return ops::relu(ops::linear(t[0], t[1], t[2])); }, {xa, w, b}));
  EXPECT_THROW(ops::linear(on(x), on(rand_tensor({3, 4}, 1)), Tensor()), std::invalid_argument);
}

TEST_P(LinearOps, LinearMatchesNaive) {
  Tensor x = rand_tensor({5, 7}, 21, false);
  Tensor w = rand_tensor({4, 7}, 22, false);
  Tensor b = rand_tensor({4}, 23, false);
  const auto bv = b.to_vector();
  EXPECT_LT(max_rel_diff(ops::linear(on(x), on(w), on(b)).to_vector(),
                         naive_linear(x.to_vector(), 5, 7, w.to_vector(), 4, &bv)),
            1e-5);
  EXPECT_LT(max_rel_diff(ops::linear(on(x), on(w), Tensor()).to_vector(),
                         naive_linear(x.to_vector(), 5, 7, w.to_vector(), 4, nullptr)),
            1e-5);
}

TS_ON_EVERY_DEVICE(LinearOps);

}  // namespace
}  // namespace ts::engine
