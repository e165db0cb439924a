// The autotuning switch (engine/autotune.h): on at start, scopes nest and put back what they
// found, it is one for the whole engine (a3c's learners see the loop's setting), and the CPU
// makes no convolution plans to count.
#include <gtest/gtest.h>

#include <thread>

#include "engine/autotune.h"
#include "engine/ops.h"
#include "test_util.h"

namespace ts::engine {
namespace {

TEST(Autotune, ScopesNestAndRestore) {
  EXPECT_TRUE(autotune());
  {
    AutotuneScope off(false);
    EXPECT_FALSE(autotune());
    {
      AutotuneScope on(true);
      EXPECT_TRUE(autotune());
      {
        AutotuneScope off_again(false);
        EXPECT_FALSE(autotune());
      }
      EXPECT_TRUE(autotune());
    }
    EXPECT_FALSE(autotune());
    set_autotune(true);  // a set inside a scope lasts until the scope ends
    EXPECT_TRUE(autotune());
  }
  EXPECT_TRUE(autotune());
}

TEST(Autotune, OneSettingForEveryThread) {
  AutotuneScope off(false);
  bool seen = true;
  std::thread([&] { seen = autotune(); }).join();
  EXPECT_FALSE(seen);
}

TEST(Autotune, CpuCountsNoConvolutionPlans) {
  AutotuneScope off(false);
  const Tensor x = testing::rand_tensor({2, 3, 8, 8}, 1, false), w = testing::rand_tensor({4, 3, 3, 3}, 2, false);
  const Tensor y = ops::conv2d(x, w, Tensor(), testing::conv_params(1, 1));
  EXPECT_EQ(y.shape(), (Shape{2, 4, 8, 8}));
  const ConvPlanStats s = conv_plan_stats(Device::cpu());
  EXPECT_EQ(s.searched + s.heuristic + s.searched_while_off + s.heuristic_while_off, 0);
}

}  // namespace
}  // namespace ts::engine
