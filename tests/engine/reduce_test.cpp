// The reduce family (engine/ops/reduce.cpp): sum and mean, with scale, against finite differences.
#include <gtest/gtest.h>

#include "engine/gradcheck.h"
#include "engine/ops.h"
#include "on_every_device.h"
#include "test_util.h"

namespace ts::engine {
namespace {

using namespace testing;

class ReduceOps : public OnDevice {};

TEST_P(ReduceOps, ScaleSumMean) {
  Tensor a = rand_tensor({3, 4}, 56);
  EXPECT_GRADCHECK(gradcheck([](const std::vector<Tensor>& t) { return ops::scale(t[0], -2.5f); }, {a}));
  EXPECT_GRADCHECK(gradcheck([](const std::vector<Tensor>& t) { return ops::sum(t[0]); }, {a}));
  EXPECT_GRADCHECK(gradcheck([](const std::vector<Tensor>& t) { return ops::mean(t[0]); }, {a}));
  EXPECT_GRADCHECK(gradgradcheck(
      [](const std::vector<Tensor>& t) { return ops::scale(ops::mul(ops::sum(t[0]), ops::mean(t[0])), 0.5f); }, {a}));
  Tensor b = rand_tensor({2, 10, 2, 2}, 57);
  EXPECT_GRADCHECK(
      gradcheck([](const std::vector<Tensor>& t) { return ops::mean(ops::to_layout(t[0], Layout::blocked(8))); }, {b}));
  EXPECT_NEAR(ops::sum(ops::to_layout(on(b.detach()), Layout::blocked(8))).item(), ops::sum(on(b.detach())).item(),
              1e-4);
}

TS_ON_EVERY_DEVICE(ReduceOps);

}  // namespace
}  // namespace ts::engine
