// The reduce family on the GPU: CPU-versus-GPU parity of the CUDA backend's methods (the same inputs
// through both backends, compared element by element with cuda_test_util.h's tolerances) and
// the GPU's own argument checks. The family's test bodies run on the GPU too: ../reduce_test.cpp.
#include <gtest/gtest.h>

#include "../test_util.h"
#include "cuda_test_util.h"

namespace ts::engine {
namespace {

using namespace testing;

using CudaReduce = CudaTest;

TEST_F(CudaReduce, SumAll) {
  for (int64_t n : {int64_t{1}, int64_t{1000}, int64_t{1} << 20, (int64_t{1} << 22) + 3}) {
    SCOPED_TRACE(n);
    const Tensor x = rnd({n}, 20 + static_cast<uint64_t>(n));
    EXPECT_TRUE(close_to_cpu(gpu_be().sum_all(copy_to(x, gpu())), cpu_be().sum_all(x), kReduce));
  }
  const Tensor x = rnd({2, 10, 3, 3}, 21);
  EXPECT_TRUE(close_to_cpu(gpu_be().sum_all(gpu_be().to_layout(copy_to(x, gpu()), Layout::blocked(8))),
                           cpu_be().sum_all(x), kReduce));
}

}  // namespace
}  // namespace ts::engine
