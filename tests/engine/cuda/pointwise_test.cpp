// The pointwise family on the GPU: CPU-versus-GPU parity of the CUDA backend's methods (the same inputs
// through both backends, compared element by element with cuda_test_util.h's tolerances) and
// the GPU's own argument checks. The family's test bodies run on the GPU too: ../pointwise_test.cpp.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "../test_util.h"
#include "cuda_test_util.h"
#include "engine/ops.h"

namespace ts::engine {
namespace {

using namespace testing;

using CudaPointwise = CudaTest;

TEST_F(CudaPointwise, ElementWise) {
  const Tensor a = rnd({3, 5, 7, 2}, 10), b = rnd({3, 5, 7, 2}, 11);
  const Tensor ga = copy_to(a, gpu()), gb = copy_to(b, gpu());
  EXPECT_TRUE(close_to_cpu(gpu_be().relu_forward(ga), cpu_be().relu_forward(a), kExact));
  const Tensor y = cpu_be().relu_forward(a), gy = gpu_be().relu_forward(ga);
  EXPECT_TRUE(close_to_cpu(gpu_be().relu_backward(gb, gy), cpu_be().relu_backward(b, y), kExact));
  EXPECT_TRUE(close_to_cpu(gpu_be().add(ga, gb), cpu_be().add(a, b), kExact));
  EXPECT_TRUE(close_to_cpu(gpu_be().mul(ga, gb), cpu_be().mul(a, b), kExact));
  EXPECT_TRUE(close_to_cpu(gpu_be().scale(ga, -1.75f), cpu_be().scale(a, -1.75f), kExact));
  {
    Tensor acc = copy_to(a, Device::cpu()), gacc = copy_to(a, gpu());
    cpu_be().add_inplace(acc, b, 0.3f);
    gpu_be().add_inplace(gacc, gb, 0.3f);
    EXPECT_TRUE(close_to_cpu(gacc, acc, kExact));
    // acc and x the same tensor (batch norm's running statistics decay this way).
    cpu_be().add_inplace(acc, acc, -0.25f);
    gpu_be().add_inplace(gacc, gacc, -0.25f);
    EXPECT_TRUE(close_to_cpu(gacc, acc, kExact));
  }
  // Mixed layouts: b is brought to a's layout, the result keeps a's.
  const Tensor gab = gpu_be().to_layout(ga, Layout::blocked(8));
  const Tensor sum_b = gpu_be().add(gab, gb);
  EXPECT_EQ(sum_b.layout(), Layout::blocked(8));
  EXPECT_TRUE(close_to_cpu(sum_b, cpu_be().add(a, b), kExact));
  EXPECT_THROW(gpu_be().add(ga, copy_to(rnd({3, 5, 7, 3}, 1), gpu())), std::invalid_argument);
  // Inputs on the CPU are refused, not read through a host pointer.
  EXPECT_THROW(gpu_be().add(ga, b), std::invalid_argument);
}

TEST_F(CudaPointwise, Tanh) {
  const Tensor x = rnd({2, 10, 3, 3}, 1, -3.0f, 3.0f), dy = rnd({2, 10, 3, 3}, 2);
  for (Layout l : {Layout::plain(), Layout::blocked(8), Layout::channels_last()}) {
    SCOPED_TRACE(l.str());
    const Tensor y = cpu_be().tanh_forward(x);
    const Tensor gy = gpu_be().tanh_forward(in_layout_gpu(x, l));
    EXPECT_EQ(gy.layout(), l);
    EXPECT_TRUE(close_to_cpu(gy, y, kTranscendental));
    const Tensor gdx = gpu_be().tanh_backward(copy_to(dy, gpu()), gy);
    EXPECT_EQ(gdx.layout(), l);
    EXPECT_TRUE(close_to_cpu(gdx, cpu_be().tanh_backward(dy, y), kTranscendental));
  }
}

// Uniform in [-c, 2c) with every third value one of the edge cases: both zeros, the clip and
// its neighbours, the smallest normal floats, infinities and NaN.
Tensor clip_values(const Shape& shape, uint64_t seed, float c) {
  std::vector<float> v = uniform(shape_numel(shape), seed, -c, 2.0f * c);
  const float specials[] = {0.0f,
                            -0.0f,
                            c,
                            std::nextafter(c, 0.0f),
                            std::nextafter(c, 2.0f * c),
                            FLT_MIN,
                            -FLT_MIN,
                            1e-7f,
                            -1.0f,
                            2.0f * c,
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN()};
  const size_t count = sizeof(specials) / sizeof(specials[0]);
  for (size_t i = 0; i < v.size(); i += 3) v[i] = specials[(i / 3) % count];
  return Tensor::from_vector(shape, v);
}

TEST_F(CudaPointwise, ClippedReluForwardBackward) {
  const Shape shapes[] = {{1}, {7}, {3, 5, 7}, {2, 10, 3, 3}, {4, 3, 33, 65}, {300001}};
  uint64_t seed = 1;
  for (float c : {20.0f, 0.6f}) {
    for (const Shape& s : shapes) {
      std::vector<Layout> layouts{Layout::plain()};
      if (s.size() == 4) {
        layouts.push_back(Layout::channels_last());
        layouts.push_back(Layout::blocked(8));
        layouts.push_back(Layout::blocked(16));
      }
      const Tensor x = clip_values(s, seed++, c), dy = rnd(s, seed++);
      for (const Layout& l : layouts) {
        SCOPED_TRACE(shape_str(s) + " " + l.str() + " ceiling " + std::to_string(c));
        const Tensor xc = cpu_be().to_layout(x, l), xg = gpu_be().to_layout(up(x), l);
        const Tensor y = cpu_be().clipped_relu_forward(xc, c);
        const Tensor gy = gpu_be().clipped_relu_forward(xg, c);
        EXPECT_TRUE(same_bits(gy, y));  // layout kept, as on the CPU
        // Padded channels stay zero: the storage sums agree.
        EXPECT_TRUE(close_to_cpu(gpu_be().sum_all(gy), cpu_be().sum_all(y), kPointwise));
        // dy plain, y in its layout: the gradient comes back in y's layout.
        EXPECT_TRUE(same_bits(gpu_be().clipped_relu_backward(up(dy), gy, c), cpu_be().clipped_relu_backward(dy, y, c)));
      }
    }
  }
  // Backward on given outputs, the clips themselves included: no gradient at 0, at c or beyond.
  const float c = 0.6f;
  const Tensor y = Tensor::from_vector(
      {9}, {0.0f, -0.0f, 0.3f, c, std::nextafter(c, 0.0f), std::nextafter(c, 1.0f), FLT_MIN, -0.5f, 1.5f});
  const Tensor dy = Tensor::from_vector({9}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  const Tensor gdx = gpu_be().clipped_relu_backward(up(dy), up(y), c);
  EXPECT_TRUE(same_bits(gdx, cpu_be().clipped_relu_backward(dy, y, c)));
  EXPECT_EQ(gdx.to_vector(), (std::vector<float>{0, 0, 3, 0, 5, 0, 7, 0, 0}));
}

TEST_F(CudaPointwise, ClippedReluBadArguments) {
  const Tensor y = up(rnd({2, 3}, 5)), dy = up(rnd({3, 2}, 6));
  EXPECT_THROW(gpu_be().clipped_relu_backward(dy, y, 1.0f), std::invalid_argument);
  EXPECT_THROW(cpu_be().clipped_relu_backward(rnd({3, 2}, 6), rnd({2, 3}, 5), 1.0f), std::invalid_argument);
  EXPECT_THROW(gpu_be().clipped_relu_forward(rnd({2, 3}, 5), 1.0f), std::invalid_argument);  // a CPU tensor
  EXPECT_THROW(gpu_be().clipped_relu_backward(rnd({2, 3}, 6), y, 1.0f), std::invalid_argument);
  EXPECT_THROW(gpu_be().clipped_relu_forward(Tensor(), 1.0f), std::invalid_argument);
}

TEST_F(CudaPointwise, Exp) {
  uint64_t seed = 200;
  for (const Shape& s : {Shape{1}, Shape{5, 4}, Shape{2, 3, 4, 5}, Shape{100003}}) {
    SCOPED_TRACE(shape_str(s));
    const Tensor x = rnd(s, seed++, -20.0f, 20.0f);
    EXPECT_TRUE(close_to_cpu(gpu_be().exp_forward(up(x)), cpu_be().exp_forward(x), kPointwise));
  }
  // Near overflow, underflow to 0, and 0.
  const Tensor x = Tensor::from_vector({5}, {80.0f, 88.0f, -80.0f, -110.0f, 0.0f});
  EXPECT_TRUE(close_to_cpu(gpu_be().exp_forward(up(x)), cpu_be().exp_forward(x), kPointwise));
}

TEST_F(CudaPointwise, GeluDropoutSumSquares) {
  const Tensor x = rnd({5, 301}, 10, -4.0f, 4.0f), dy = rnd({5, 301}, 11);
  EXPECT_TRUE(close_to_cpu(gpu_be().gelu_forward(up(x)), cpu_be().gelu_forward(x), kReduce));
  EXPECT_TRUE(close_to_cpu(gpu_be().gelu_backward(up(dy), up(x)), cpu_be().gelu_backward(dy, x), kReduce));
  for (float p : {0.0f, 0.1f, 0.5f}) {
    SCOPED_TRACE(p);
    const Tensor gm = gpu_be().dropout_mask({3, 1000}, p, 42);
    EXPECT_EQ(gm.device(), gpu());
    EXPECT_EQ(gm.to_vector(), cpu_be().dropout_mask({3, 1000}, p, 42).to_vector());  // bit for bit
  }
  EXPECT_THROW(gpu_be().dropout_mask({3}, 1.0f, 1), std::invalid_argument);
  EXPECT_TRUE(close_to_cpu(gpu_be().sum_squares(up(x)), cpu_be().sum_squares(x), kReduce));
  const Tensor xb = rnd({2, 10, 3, 3}, 12);
  EXPECT_TRUE(close_to_cpu(gpu_be().sum_squares(gpu_be().to_layout(up(xb), Layout::blocked(8))),
                           cpu_be().sum_squares(xb), kReduce));
}

}  // namespace
}  // namespace ts::engine
