// The softmax family on the GPU: CPU-versus-GPU parity of the CUDA backend's methods (the same inputs
// through both backends, compared element by element with cuda_test_util.h's tolerances), and
// its argument checks. The family's test bodies run on the GPU too: ../softmax_test.cpp.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "cuda_test_util.h"
#include "engine/autograd.h"
#include "engine/gradcheck.h"
#include "engine/ops.h"
#include "engine/optim/rmsprop.h"
#include "../on_every_device.h"
#include "../test_util.h"

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

TEST_F(CudaSoftmax, Gradchecks) {
  const float c = 0.6f;
  Tensor x = away_from_kinks({2, 3, 4, 4}, 800, c);
  EXPECT_GRADCHECK(gradcheck(on_gpu([c](const std::vector<Tensor>& t) { return ops::clipped_relu(t[0], c); }), {x}));
  EXPECT_GRADCHECK(
      gradgradcheck(on_gpu([c](const std::vector<Tensor>& t) { return ops::clipped_relu(t[0], c); }), {x}));
  // Blocked, with padded channels (C = 10 in blocks of 8).
  Tensor xb = away_from_kinks({2, 10, 3, 3}, 801, c);
  EXPECT_GRADCHECK(gradcheck(on_gpu([c](const std::vector<Tensor>& t) {
                               return ops::clipped_relu(ops::to_layout(t[0], Layout::blocked(8)), c);
                             }),
                             {xb}));

  Tensor z = rand_tensor({5, 4}, 802, true, -2.0f, 2.0f);
  EXPECT_GRADCHECK(gradcheck(on_gpu([](const std::vector<Tensor>& t) { return ops::log_softmax(t[0]); }), {z}));
  EXPECT_GRADCHECK(gradcheck(on_gpu([](const std::vector<Tensor>& t) { return ops::exp(t[0]); }), {z}));
  // The policy entropy as the A3C loss builds it: -sum p log p.
  EXPECT_GRADCHECK(gradcheck(on_gpu([](const std::vector<Tensor>& t) {
                               const Tensor logp = ops::log_softmax(t[0]);
                               return ops::scale(ops::sum(ops::mul(ops::exp(logp), logp)), -1.0f);
                             }),
                             {z}));
  Tensor wide = rand_tensor({3, 40}, 803, true, -2.0f, 2.0f);  // rows past a warp's lanes
  EXPECT_GRADCHECK(gradcheck(on_gpu([](const std::vector<Tensor>& t) { return ops::log_softmax(t[0]); }), {wide}));
}

}  // namespace
}  // namespace ts::engine
