// The roi family on the GPU: CPU-versus-GPU parity of the CUDA backend's methods (the same inputs
// through both backends, compared element by element with cuda_test_util.h's tolerances) and
// the GPU's own argument checks. The family's test bodies run on the GPU too: ../roi_test.cpp.
#include <gtest/gtest.h>

#include <string>

#include "../test_util.h"
#include "cuda_test_util.h"
#include "engine/ops.h"

namespace ts::engine {
namespace {

using namespace testing;

using CudaRoi = CudaTest;

// RoIs of every kind: inside, degenerate, partly and far outside the map, both images.
Tensor test_rois() {
  return rois_of({{0, 1.3f, 2.1f, 15.7f, 11.2f},
                  {1, 0.0f, 0.0f, 19.0f, 23.0f},
                  {1, 5.0f, 5.0f, 5.0f, 5.0f},
                  {0, -6.0f, -3.0f, 7.5f, 9.0f},
                  {1, 12.0f, 14.0f, 40.0f, 50.0f},
                  {0, 30.0f, 30.0f, 44.0f, 48.0f}});
}

TEST_F(CudaRoi, RoiAlign) {
  const Tensor x = rnd({2, 4, 12, 10}, 40);
  const Tensor rois = test_rois();
  const Tensor gx = copy_to(x, gpu()), grois = copy_to(rois, gpu());
  for (int64_t ratio : {2, 0}) {
    for (bool aligned : {false, true}) {
      SCOPED_TRACE("ratio " + std::to_string(ratio) + (aligned ? " aligned" : ""));
      const Tensor y = cpu_be().roi_align_forward(x, rois, 3, 4, 0.5f, ratio, aligned);
      EXPECT_TRUE(close_to_cpu(gpu_be().roi_align_forward(gx, grois, 3, 4, 0.5f, ratio, aligned), y, kReduce));
      const Tensor dy = rnd(y.shape(), 41);
      EXPECT_TRUE(close_to_cpu(gpu_be().roi_align_backward(copy_to(dy, gpu()), grois, x.shape(), 0.5f, ratio, aligned),
                               cpu_be().roi_align_backward(dy, rois, x.shape(), 0.5f, ratio, aligned), kAtomic));
    }
  }
  // A blocked feature map is reordered first.
  EXPECT_TRUE(
      close_to_cpu(gpu_be().roi_align_forward(gpu_be().to_layout(gx, Layout::blocked(8)), grois, 2, 2, 0.5f, 2, false),
                   cpu_be().roi_align_forward(x, rois, 2, 2, 0.5f, 2, false), kReduce));
  // A batch index outside the feature batch: the CPU's error.
  EXPECT_THROW(gpu_be().roi_align_forward(gx, copy_to(rois_of({{2, 0, 0, 4, 4}}), gpu()), 2, 2, 1.0f, 2, false),
               std::invalid_argument);
}

TEST_F(CudaRoi, RoiPool) {
  const Tensor x = distinct_values({2, 3, 12, 10}, 50, 0.01f, false);
  const Tensor rois = test_rois();
  const Tensor gx = copy_to(x, gpu()), grois = copy_to(rois, gpu());
  for (float scale : {0.5f, 1.0f}) {
    SCOPED_TRACE(scale);
    const PoolResult r = cpu_be().roi_pool_forward(x, rois, 3, 2, scale);
    const PoolResult gr = gpu_be().roi_pool_forward(gx, grois, 3, 2, scale);
    EXPECT_TRUE(close_to_cpu(gr.y, r.y, kExact));
    EXPECT_TRUE(close_to_cpu(gr.workspace, r.workspace, kExact));  // argmax as fp32, the same contract
    EXPECT_EQ(gr.workspace.category(), vocabulary::Category::workspace);
    const Tensor dy = rnd(r.y.shape(), 51);
    EXPECT_TRUE(close_to_cpu(gpu_be().roi_pool_backward(copy_to(dy, gpu()), gr.workspace, grois, x.shape()),
                             cpu_be().roi_pool_backward(dy, r.workspace, rois, x.shape()), kAtomic));
  }
}

}  // namespace
}  // namespace ts::engine
