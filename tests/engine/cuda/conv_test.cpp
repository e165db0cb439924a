// The conv family on the GPU: CPU-versus-GPU parity of the CUDA backend's methods (the same inputs
// through both backends, compared element by element with cuda_test_util.h's tolerances) and
// the GPU's own argument checks. The family's test bodies run on the GPU too: ../conv_test.cpp.
#include <gtest/gtest.h>

#include <string>

#include "../test_util.h"
#include "cuda_test_util.h"
#include "engine/autotune.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/ops.h"

namespace ts::engine {
namespace {

using namespace testing;

using CudaConv = CudaTest;

struct ConvCase {
  const char* name;
  Shape x, w;
  Conv2dParams p;
};

std::vector<ConvCase> conv_cases() {
  return {
      {"3x3_pad1", {2, 3, 7, 7}, {5, 3, 3, 3}, conv_params(1, 1)},
      {"1x1", {2, 16, 6, 6}, {16, 16, 1, 1}, conv_params(1, 0)},
      {"1x1_stride2", {2, 8, 6, 6}, {8, 8, 1, 1}, conv_params(2, 0)},
      {"7x7_s2_p3", {1, 3, 15, 15}, {8, 3, 7, 7}, conv_params(2, 3)},
      {"stride2_pad1", {2, 16, 9, 9}, {8, 16, 3, 3}, conv_params(2, 1)},
      {"grouped", {1, 8, 6, 6}, {8, 4, 3, 3}, conv_params(1, 1, 1, 2)},
      {"depthwise", {1, 16, 6, 6}, {16, 1, 3, 3}, conv_params(1, 1, 1, 16)},
      {"dilated", {1, 8, 9, 9}, {8, 8, 3, 3}, conv_params(1, 2, 2)},
      {"resnet_3x3", {4, 32, 14, 14}, {64, 32, 3, 3}, conv_params(1, 1)},
      {"non_square",
       {2, 4, 9, 7},
       {6, 4, 3, 1},
       [] {
         Conv2dParams p = conv_params(1, 0);
         p.stride_h = 2;
         p.pad_h = 1;
         return p;
       }()},
  };
}

TEST_F(CudaConv, Conv2dForwardAndBackward) {
  uint64_t seed = 100;
  for (const auto& c : conv_cases()) {
    SCOPED_TRACE(c.name);
    const Tensor x = rnd(c.x, seed++), w = rnd(c.w, seed++, -0.5f, 0.5f), b = rnd({c.w[0]}, seed++);
    const Tensor gx = copy_to(x, gpu()), gw = copy_to(w, gpu()), gbias = copy_to(b, gpu());
    for (bool bias : {false, true}) {
      SCOPED_TRACE(bias ? "bias" : "no bias");
      const Tensor y = cpu_be().conv2d_forward(x, w, bias ? &b : nullptr, c.p);
      const Tensor gy = gpu_be().conv2d_forward(gx, gw, bias ? &gbias : nullptr, c.p);
      EXPECT_TRUE(gy.layout().is_plain());
      EXPECT_TRUE(close_to_cpu(gy, y, kLibrary));
      const Tensor dy = rnd(y.shape(), seed++);
      const Tensor gdy = copy_to(dy, gpu());
      const Tensor dx = cpu_be().conv2d_backward_data(dy, w, c.x, Layout::plain(), c.p);
      EXPECT_TRUE(close_to_cpu(gpu_be().conv2d_backward_data(gdy, gw, c.x, Layout::plain(), c.p), dx, kLibrary));
      const WeightGrads wg = cpu_be().conv2d_backward_weights(x, dy, c.w, bias, c.p, Layout::plain());
      const WeightGrads gwg = gpu_be().conv2d_backward_weights(gx, gdy, c.w, bias, c.p, Layout::plain());
      EXPECT_TRUE(close_to_cpu(gwg.dw, wg.dw, kLibrary));
      EXPECT_EQ(gwg.dbias.defined(), bias);
      if (bias) {
        EXPECT_TRUE(close_to_cpu(gwg.dbias, wg.dbias, kReduce));
      }
    }
  }
}

TEST_F(CudaConv, Conv2dLayoutsAndPlanCache) {
  auto& be = cuda::cuda_backend(0);
  const Tensor x = rnd({2, 16, 8, 8}, 200), w = rnd({16, 16, 3, 3}, 201, -0.2f, 0.2f);
  const auto p = conv_params(1, 1);
  const Tensor y = cpu_be().conv2d_forward(x, w, nullptr, p);
  const Tensor gw = copy_to(w, gpu());
  // A blocked input is reordered; the result is plain and the same.
  const Tensor gxb = gpu_be().to_layout(copy_to(x, gpu()), Layout::blocked(8));
  EXPECT_TRUE(close_to_cpu(gpu_be().conv2d_forward(gxb, gw, nullptr, p), y, kLibrary));
  // The data gradient comes back in the layout asked for.
  const Tensor gdy = copy_to(rnd(y.shape(), 202), gpu());
  for (Layout l : {Layout::plain(), Layout::blocked(8), Layout::channels_last()}) {
    const Tensor dx = gpu_be().conv2d_backward_data(gdy, gw, x.shape(), l, p);
    EXPECT_EQ(dx.layout(), l);
    EXPECT_EQ(dx.shape(), x.shape());
  }
  // Plans are chosen once per shape.
  const size_t before = be.cached_conv_plans();
  gpu_be().conv2d_forward(gxb, gw, nullptr, p);
  EXPECT_EQ(be.cached_conv_plans(), before);
  gpu_be().conv2d_forward(copy_to(rnd({3, 16, 8, 8}, 203), gpu()), gw, nullptr, p);
  EXPECT_EQ(be.cached_conv_plans(), before + 1);
  const std::string info = be.conv_algo_info({2, 16, 8, 8}, {16, 16, 3, 3}, p, 0);
  EXPECT_NE(info.find("fwd algo"), std::string::npos) << info;
  // Weights must be plain; bad geometry is an invalid_argument, as on the CPU.
  EXPECT_THROW(gpu_be().conv2d_forward(gxb, gpu_be().to_layout(gw, Layout::blocked(8)), nullptr, p),
               std::invalid_argument);
  EXPECT_THROW(gpu_be().conv2d_forward(copy_to(rnd({1, 3, 4, 4}, 1), gpu()), gw, nullptr, p), std::invalid_argument);
}

// With autotuning off (the training loop's timed iterations), a shape not seen before gets its
// plan from cuDNN's heuristics, runs nothing to choose it, and computes the same convolution; a
// cached plan is used as it is; with autotuning back on, the heuristic plan is searched anew.
TEST_F(CudaConv, HeuristicPlansWhileAutotuneIsOff) {
  auto& be = cuda::cuda_backend(0);
  // A shape no other test uses, so that its plans are new here.
  const Tensor x = rnd({3, 5, 11, 13}, 400), w = rnd({7, 5, 3, 3}, 401, -0.5f, 0.5f);
  const auto p = conv_params(1, 1);
  const Tensor gx = copy_to(x, gpu()), gw = copy_to(w, gpu());
  const Tensor y = cpu_be().conv2d_forward(x, w, nullptr, p);
  const Tensor dy = rnd(y.shape(), 402);
  const Tensor gdy = copy_to(dy, gpu());
  const ConvPlanStats before = conv_plan_stats(gpu());
  const size_t plans_before = be.cached_conv_plans();
  {
    AutotuneScope off(false);
    EXPECT_TRUE(close_to_cpu(gpu_be().conv2d_forward(gx, gw, nullptr, p), y, kLibrary));
    const ConvPlanStats s = conv_plan_stats(gpu());
    EXPECT_EQ(s.heuristic, before.heuristic + 1);
    EXPECT_EQ(s.heuristic_while_off, before.heuristic_while_off + 1);
    EXPECT_EQ(s.searched, before.searched);
    EXPECT_EQ(s.searched_while_off, before.searched_while_off);
    EXPECT_EQ(be.cached_conv_plans(), plans_before + 1);
    // Both backward passes too.
    EXPECT_TRUE(close_to_cpu(gpu_be().conv2d_backward_data(gdy, gw, x.shape(), Layout::plain(), p),
                             cpu_be().conv2d_backward_data(dy, w, x.shape(), Layout::plain(), p), kLibrary));
    EXPECT_TRUE(close_to_cpu(gpu_be().conv2d_backward_weights(gx, gdy, w.shape(), false, p, Layout::plain()).dw,
                             cpu_be().conv2d_backward_weights(x, dy, w.shape(), false, p, Layout::plain()).dw,
                             kLibrary));
    // Met again while off: the cached plan, nothing made.
    gpu_be().conv2d_forward(gx, gw, nullptr, p);
    const ConvPlanStats again = conv_plan_stats(gpu());
    EXPECT_EQ(again.heuristic, before.heuristic + 3);
    EXPECT_EQ(again.searched, before.searched);
    EXPECT_EQ(be.cached_conv_plans(), plans_before + 3);
  }
  // Autotuning on: the heuristic plan is searched and replaced, not added to.
  EXPECT_TRUE(close_to_cpu(gpu_be().conv2d_forward(gx, gw, nullptr, p), y, kLibrary));
  const ConvPlanStats after = conv_plan_stats(gpu());
  EXPECT_EQ(after.searched, before.searched + 1);
  EXPECT_EQ(after.searched_while_off, before.searched_while_off);
  EXPECT_EQ(after.heuristic, before.heuristic + 3);
  EXPECT_EQ(be.cached_conv_plans(), plans_before + 3);
}

TEST_F(CudaConv, Conv2dAndLinearWithTf32) {
  cuda::Tf32Scope tf32(true);
  EXPECT_TRUE(cuda::tf32_allowed());
  const Tensor x = rnd({8, 64, 28, 28}, 300), w = rnd({64, 64, 3, 3}, 301, -0.1f, 0.1f);
  const auto p = conv_params(1, 1);
  EXPECT_TRUE(close_to_cpu(gpu_be().conv2d_forward(copy_to(x, gpu()), copy_to(w, gpu()), nullptr, p),
                           cpu_be().conv2d_forward(x, w, nullptr, p), kTf32));
  {
    // cuDNN's heuristics' pick with TF32 allowed (the math type it names) for a new shape.
    AutotuneScope off(false);
    const Tensor x2 = rnd({4, 64, 27, 27}, 304);
    const int64_t heuristic = conv_plan_stats(gpu()).heuristic;
    EXPECT_TRUE(close_to_cpu(gpu_be().conv2d_forward(copy_to(x2, gpu()), copy_to(w, gpu()), nullptr, p),
                             cpu_be().conv2d_forward(x2, w, nullptr, p), kTf32));
    EXPECT_EQ(conv_plan_stats(gpu()).heuristic, heuristic + 1);
  }
  const Tensor a = rnd({64, 512}, 302), lw = rnd({256, 512}, 303, -0.1f, 0.1f);
  EXPECT_TRUE(close_to_cpu(gpu_be().linear_forward(copy_to(a, gpu()), copy_to(lw, gpu()), nullptr),
                           cpu_be().linear_forward(a, lw, nullptr), kTf32));
}

}  // namespace
}  // namespace ts::engine
