// The layout family on the GPU: CPU-versus-GPU parity of the CUDA backend's methods (the same inputs
// through both backends, compared element by element with cuda_test_util.h's tolerances) and
// the GPU's own argument checks. The family's test bodies run on the GPU too: ../layout_test.cpp.
#include <gtest/gtest.h>

#include "../test_util.h"
#include "cuda_test_util.h"
#include "engine/ops.h"

namespace ts::engine {
namespace {

using namespace testing;

using CudaLayout = CudaTest;

TEST_F(CudaLayout, FillCopyToLayout) {
  Tensor c = Tensor::empty({2, 3, 4, 5}, Device::cpu());
  Tensor g = Tensor::empty({2, 3, 4, 5}, gpu());
  cpu_be().fill(c, 2.5f);
  gpu_be().fill(g, 2.5f);
  EXPECT_TRUE(close_to_cpu(g, c, kExact));

  // Blocked with padded channels (C = 10 in blocks of 8): padding stays zero.
  Tensor gb = Tensor::empty({2, 10, 2, 2}, gpu(), Layout::blocked(8));
  gpu_be().fill(gb, 2.0f);
  EXPECT_EQ(gb.layout(), Layout::blocked(8));
  EXPECT_NEAR(gpu_be().sum_all(gb).item(), 2.0f * 80, 1e-4);
  for (float v : gb.to_vector()) EXPECT_EQ(v, 2.0f);

  const Tensor x = rnd({2, 10, 3, 3}, 1);
  const Tensor gx = copy_to(x, gpu());
  for (Layout l : {Layout::channels_last(), Layout::blocked(8), Layout::blocked(16)}) {
    SCOPED_TRACE(l.str());
    Tensor dst = Tensor::empty(x.shape(), gpu(), l);
    gpu_be().copy(gx, dst);
    EXPECT_EQ(dst.to_vector(), x.to_vector());
    Tensor y = gpu_be().to_layout(gx, l);
    EXPECT_EQ(y.layout(), l);
    EXPECT_EQ(y.to_vector(), x.to_vector());
    EXPECT_NEAR(gpu_be().sum_all(y).item(), cpu_be().sum_all(x).item(), 1e-4);
  }
  // A round trip through every layout gives back the same values.
  Tensor t = gpu_be().to_layout(gx, Layout::blocked(16));
  t = gpu_be().to_layout(t, Layout::channels_last());
  t = gpu_be().to_layout(t, Layout::blocked(8));
  t = gpu_be().to_layout(t, Layout::plain());
  EXPECT_EQ(t.to_vector(), x.to_vector());
  // Same layout: to_layout shares; copy between plain tensors copies.
  EXPECT_EQ(gpu_be().to_layout(gx, Layout::plain()).data(), gx.data());
  Tensor d = Tensor::empty(x.shape(), gpu());
  gpu_be().copy(gx, d);
  EXPECT_EQ(d.to_vector(), x.to_vector());
}

TEST_F(CudaLayout, ConcatSlice) {
  const Tensor a = rnd({2, 3, 4, 5}, 700);
  const Tensor ga = copy_to(a, gpu());
  for (int64_t dim = 0; dim < 4; ++dim) {
    SCOPED_TRACE(dim);
    Shape sb = a.shape();
    sb[static_cast<size_t>(dim)] = 2;
    const Tensor b = rnd(sb, 701 + static_cast<uint64_t>(dim));
    const Tensor gb = copy_to(b, gpu());
    EXPECT_TRUE(close_to_cpu(gpu_be().concat({ga, gb, ga}, dim), cpu_be().concat({a, b, a}, dim), kExact));
    EXPECT_TRUE(
        close_to_cpu(gpu_be().slice(ga, dim, 1, a.size(dim) - 1), cpu_be().slice(a, dim, 1, a.size(dim) - 1), kExact));
  }
  EXPECT_TRUE(close_to_cpu(gpu_be().concat({ga}, -1), cpu_be().concat({a}, -1), kExact));
  EXPECT_EQ(gpu_be().slice(ga, 1, 2, 0).shape(), (Shape{2, 0, 4, 5}));
  // Blocked inputs: plain result, same values.
  const Tensor gab = gpu_be().to_layout(ga, Layout::blocked(8));
  EXPECT_TRUE(close_to_cpu(gpu_be().concat({gab, ga}, 1), cpu_be().concat({a, a}, 1), kExact));
  EXPECT_TRUE(close_to_cpu(gpu_be().slice(gab, 1, 1, 2), cpu_be().slice(a, 1, 1, 2), kExact));
  const Tensor m = rnd({6, 9}, 710);
  EXPECT_TRUE(close_to_cpu(gpu_be().slice(copy_to(m, gpu()), 1, 3, 4), cpu_be().slice(m, 1, 3, 4), kExact));
  EXPECT_THROW(gpu_be().slice(ga, 1, 2, 5), std::invalid_argument);
  EXPECT_THROW(gpu_be().concat({ga, copy_to(rnd({2, 3, 4, 6}, 1), gpu())}, 1), std::invalid_argument);
}

TEST_F(CudaLayout, IndexRows) {
  const Tensor x = rnd({6, 3, 2}, 70);
  const Tensor index = Tensor::from_vector({5}, {4, 0, 4, 5, 1});  // repeated rows add up in index_add
  const Tensor gx = copy_to(x, gpu()), gi = copy_to(index, gpu());
  EXPECT_TRUE(close_to_cpu(gpu_be().index_select_rows(gx, gi), cpu_be().index_select_rows(x, index), kExact));
  const Tensor src = rnd({5, 3, 2}, 71);
  EXPECT_TRUE(close_to_cpu(gpu_be().index_add_rows(copy_to(src, gpu()), gi, 6), cpu_be().index_add_rows(src, index, 6),
                           kExact));
  EXPECT_EQ(gpu_be().index_select_rows(gx, copy_to(Tensor::from_vector({0}, {}), gpu())).shape(), (Shape{0, 3, 2}));
  EXPECT_THROW(gpu_be().index_select_rows(gx, copy_to(Tensor::from_vector({2}, {0, 6}), gpu())), std::invalid_argument);
  EXPECT_THROW(gpu_be().index_add_rows(copy_to(src, gpu()), gi, 5), std::invalid_argument);
}

TEST_F(CudaLayout, Permute) {
  const Tensor x4 = rnd({2, 3, 4, 5}, 80), x2 = rnd({7, 3}, 81), x5 = rnd({2, 1, 3, 2, 4}, 82);
  const std::pair<Tensor, std::vector<int64_t>> cases[] = {
      {x4, {0, 2, 3, 1}}, {x4, {3, 2, 1, 0}}, {x4, {0, 1, 2, 3}}, {x2, {1, 0}}, {x5, {4, 0, 3, 1, 2}}};
  for (const auto& [x, perm] : cases) {
    SCOPED_TRACE(shape_str(x.shape()));
    EXPECT_TRUE(close_to_cpu(gpu_be().permute(copy_to(x, gpu()), perm), cpu_be().permute(x, perm), kExact));
  }
  EXPECT_TRUE(close_to_cpu(gpu_be().permute(in_layout_gpu(x4, Layout::blocked(8)), {0, 2, 3, 1}),
                           cpu_be().permute(x4, {0, 2, 3, 1}), kExact));
  EXPECT_THROW(gpu_be().permute(copy_to(x4, gpu()), {0, 1, 1, 2}), std::invalid_argument);
}

}  // namespace
}  // namespace ts::engine
