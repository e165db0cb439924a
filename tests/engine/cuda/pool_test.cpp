// The pool family on the GPU: CPU-versus-GPU parity of the CUDA backend's methods (the same inputs
// through both backends, compared element by element with cuda_test_util.h's tolerances) and
// the GPU's own argument checks. The family's test bodies run on the GPU too: ../pool_test.cpp.
#include <gtest/gtest.h>

#include <string>

#include "../test_util.h"
#include "cuda_test_util.h"
#include "engine/ops.h"

namespace ts::engine {
namespace {

using namespace testing;

using CudaPool = CudaTest;

Pool2dParams pool(int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph, int64_t pw, bool include_pad = false) {
  Pool2dParams p;
  p.kernel_h = kh;
  p.kernel_w = kw;
  p.stride_h = sh;
  p.stride_w = sw;
  p.pad_h = ph;
  p.pad_w = pw;
  p.count_include_pad = include_pad;
  return p;
}

TEST_F(CudaPool, Pooling) {
  const Tensor x = distinct_values({2, 3, 9, 9}, 500, 0.05f, false);
  const Tensor gx = copy_to(x, gpu());
  const Pool2dParams cases[] = {pool(2, 2, 2, 2, 0, 0),       pool(3, 3, 2, 2, 1, 1),       pool(3, 3, 1, 1, 1, 1),
                                pool(3, 3, 2, 2, 1, 1, true), pool(3, 3, 1, 1, 1, 1, true), pool(3, 2, 2, 1, 1, 1),
                                pool(3, 2, 2, 1, 1, 1, true), pool(9, 9, 9, 9, 0, 0)};
  uint64_t seed = 510;
  for (const auto& p : cases) {
    SCOPED_TRACE("k " + std::to_string(p.kernel_h) + "x" + std::to_string(p.kernel_w) + " s " +
                 std::to_string(p.stride_h) + "x" + std::to_string(p.stride_w) + " pad " + std::to_string(p.pad_h) +
                 " include_pad " + std::to_string(p.count_include_pad));
    const PoolResult m = cpu_be().max_pool2d_forward(x, p);
    const PoolResult gm = gpu_be().max_pool2d_forward(gx, p);
    EXPECT_TRUE(close_to_cpu(gm.y, m.y, kExact));
    EXPECT_EQ(gm.workspace.category(), vocabulary::Category::workspace);
    const Tensor dy = rnd(m.y.shape(), seed++);
    const Tensor gdy = copy_to(dy, gpu());
    EXPECT_TRUE(close_to_cpu(gpu_be().max_pool2d_backward(gdy, gm.workspace, x.shape(), Layout::plain(), p),
                             cpu_be().max_pool2d_backward(dy, m.workspace, x.shape(), Layout::plain(), p), kExact));
    const Tensor a = cpu_be().avg_pool2d_forward(x, p);
    EXPECT_TRUE(close_to_cpu(gpu_be().avg_pool2d_forward(gx, p), a, kExact));
    EXPECT_TRUE(close_to_cpu(gpu_be().avg_pool2d_backward(gdy, x.shape(), Layout::plain(), p),
                             cpu_be().avg_pool2d_backward(dy, x.shape(), Layout::plain(), p), kExact));
  }
  // Blocked input and gradient layouts.
  const auto p = pool(3, 3, 2, 2, 1, 1);
  const Tensor gxb = gpu_be().to_layout(gx, Layout::blocked(8));
  const PoolResult gm = gpu_be().max_pool2d_forward(gxb, p);
  EXPECT_TRUE(close_to_cpu(gm.y, cpu_be().max_pool2d_forward(x, p).y, kExact));
  const Tensor dx = gpu_be().max_pool2d_backward(copy_to(rnd(gm.y.shape(), 520), gpu()), gm.workspace, x.shape(),
                                                 Layout::blocked(8), p);
  EXPECT_EQ(dx.layout(), Layout::blocked(8));
  EXPECT_THROW(gpu_be().max_pool2d_forward(gx, pool(2, 2, 1, 1, 2, 2)), std::invalid_argument);
}

TEST_F(CudaPool, UpsampleNearest) {
  const Tensor x = rnd({2, 10, 3, 4}, 10);
  for (int64_t f : {1, 2, 3}) {
    for (Layout l : {Layout::plain(), Layout::channels_last(), Layout::blocked(8)}) {
      SCOPED_TRACE("factor " + std::to_string(f) + " " + l.str());
      const Tensor gy = gpu_be().upsample_nearest2d_forward(in_layout_gpu(x, l), f);
      EXPECT_EQ(gy.layout(), l);
      EXPECT_TRUE(close_to_cpu(gy, cpu_be().upsample_nearest2d_forward(x, f), kExact));
      const Tensor dy = rnd({2, 10, 3 * f, 4 * f}, 11 + static_cast<uint64_t>(f));
      const Tensor gdx = gpu_be().upsample_nearest2d_backward(in_layout_gpu(dy, l), f);
      EXPECT_EQ(gdx.layout(), l);
      EXPECT_TRUE(close_to_cpu(gdx, cpu_be().upsample_nearest2d_backward(dy, f), kExact));
    }
  }
  EXPECT_THROW(gpu_be().upsample_nearest2d_backward(copy_to(rnd({1, 1, 5, 4}, 1), gpu()), 2), std::invalid_argument);
  EXPECT_THROW(gpu_be().upsample_nearest2d_forward(copy_to(x, gpu()), 0), std::invalid_argument);
}

}  // namespace
}  // namespace ts::engine
