// The linear family on the GPU: CPU-versus-GPU parity of the CUDA backend's methods (the same inputs
// through both backends, compared element by element with cuda_test_util.h's tolerances) and
// the GPU's own argument checks. The family's test bodies run on the GPU too: ../linear_test.cpp.
#include <gtest/gtest.h>

#include <string>

#include "../test_util.h"
#include "cuda_test_util.h"

namespace ts::engine {
namespace {

using namespace testing;

using CudaLinear = CudaTest;

TEST_F(CudaLinear, Linear) {
  struct Case {
    int64_t n, i, o;
  };
  uint64_t seed = 600;
  for (const Case c : {Case{5, 7, 4}, Case{64, 300, 10}, Case{1, 1, 1}, Case{128, 2048, 1000}}) {
    SCOPED_TRACE(std::to_string(c.n) + "x" + std::to_string(c.i) + "->" + std::to_string(c.o));
    const Tensor x = rnd({c.n, c.i}, seed++), w = rnd({c.o, c.i}, seed++, -0.1f, 0.1f), b = rnd({c.o}, seed++);
    const Tensor gx = copy_to(x, gpu()), gw = copy_to(w, gpu()), gbias = copy_to(b, gpu());
    EXPECT_TRUE(close_to_cpu(gpu_be().linear_forward(gx, gw, &gbias), cpu_be().linear_forward(x, w, &b), kLibrary));
    EXPECT_TRUE(
        close_to_cpu(gpu_be().linear_forward(gx, gw, nullptr), cpu_be().linear_forward(x, w, nullptr), kLibrary));
    const Tensor dy = rnd({c.n, c.o}, seed++);
    const Tensor gdy = copy_to(dy, gpu());
    EXPECT_TRUE(close_to_cpu(gpu_be().linear_backward_data(gdy, gw), cpu_be().linear_backward_data(dy, w), kLibrary));
    const WeightGrads r = cpu_be().linear_backward_weights(x, dy, true);
    const WeightGrads gr = gpu_be().linear_backward_weights(gx, gdy, true);
    EXPECT_TRUE(close_to_cpu(gr.dw, r.dw, kLibrary));
    EXPECT_TRUE(close_to_cpu(gr.dbias, r.dbias, kReduce));
    EXPECT_FALSE(gpu_be().linear_backward_weights(gx, gdy, false).dbias.defined());
  }
}

}  // namespace
}  // namespace ts::engine
