// The softmax family on the GPU: CPU-versus-GPU parity of the CUDA backend's methods (the same inputs
// through both backends, compared element by element with cuda_test_util.h's tolerances) and
// the GPU's own argument checks. The family's test bodies run on the GPU too: ../softmax_test.cpp.
#include <gtest/gtest.h>

#include <vector>

#include "../test_util.h"
#include "cuda_test_util.h"
#include "engine/ops.h"

namespace ts::engine {
namespace {

using namespace testing;

using CudaSoftmax = CudaTest;

TEST_F(CudaSoftmax, LogSoftmaxForwardBackward) {
  // Rows of one, fewer than a warp, several warps' worth, many rows, and none.
  const Shape shapes[] = {{1, 1}, {1, 6}, {5, 4}, {7, 33}, {3, 100}, {64, 18}, {2, 1000}, {0, 5}};
  uint64_t seed = 100;
  for (const Shape& s : shapes) {
    SCOPED_TRACE(shape_str(s));
    const Tensor x = rnd(s, seed++, -3.0f, 3.0f), dy = rnd(s, seed++);
    const Tensor y = cpu_be().log_softmax_forward(x);
    const Tensor gy = gpu_be().log_softmax_forward(up(x));
    EXPECT_TRUE(close_to_cpu(gy, y, kPointwise));
    EXPECT_TRUE(close_to_cpu(gpu_be().log_softmax_backward(up(dy), gy), cpu_be().log_softmax_backward(dy, y), kReduce));
  }
  // Large logits (the normaliser must not overflow) and a row where exp underflows to 0.
  const Tensor x = Tensor::from_vector({4, 4}, {1, 2, 3, 4, -5, 0, 5, 0.5f, 90, 100, 80, 95, 0, -1e4f, 3, -200});
  const Tensor y = cpu_be().log_softmax_forward(x);
  const Tensor gy = gpu_be().log_softmax_forward(up(x));
  EXPECT_TRUE(close_to_cpu(gy, y, kPointwise));
  const Tensor dy = rnd({4, 4}, 150);
  EXPECT_TRUE(close_to_cpu(gpu_be().log_softmax_backward(up(dy), gy), cpu_be().log_softmax_backward(dy, y), kReduce));
}

TEST_F(CudaSoftmax, LogSoftmaxAndExpBadArguments) {
  // Each refused on the GPU as on the CPU.
  const Tensor v1 = rnd({4}, 1), v3 = rnd({2, 3, 4}, 2), a = rnd({2, 3}, 3), b = rnd({3, 2}, 4);
  for (const Tensor* t : {&v1, &v3}) {
    EXPECT_THROW(cpu_be().log_softmax_forward(*t), std::invalid_argument);
    EXPECT_THROW(gpu_be().log_softmax_forward(up(*t)), std::invalid_argument);
  }
  EXPECT_THROW(cpu_be().log_softmax_backward(a, b), std::invalid_argument);
  EXPECT_THROW(gpu_be().log_softmax_backward(up(a), up(b)), std::invalid_argument);
  EXPECT_THROW(gpu_be().log_softmax_forward(a), std::invalid_argument);  // a CPU tensor
  EXPECT_THROW(gpu_be().log_softmax_backward(up(a), a), std::invalid_argument);
  const Tensor x4 = rnd({1, 10, 2, 2}, 5);
  EXPECT_THROW(cpu_be().exp_forward(cpu_be().to_layout(x4, Layout::blocked(8))), std::invalid_argument);
  EXPECT_THROW(gpu_be().exp_forward(gpu_be().to_layout(up(x4), Layout::blocked(8))), std::invalid_argument);
  EXPECT_THROW(gpu_be().exp_forward(x4), std::invalid_argument);
}

}  // namespace
}  // namespace ts::engine
