// CPU-versus-GPU parity of the Backend methods (the ones ResNet-50 and the image workloads
// use; parity_extra_test.cpp and parity_seq_test.cpp have the rest): the same random inputs
// through both backends, forward and backward, compared element by element.
//
// Tolerances, max |gpu - cpu| / (1 + |cpu|), with TF32 off (CudaTest's Tf32Scope):
//   kExact     1e-6  copies, layouts, fill, relu, add/mul/scale, pooling, concat/slice, SGD:
//                    the same float operations in the same order (at most an FMA's rounding)
//   kReduce    1e-5  sums in another order or precision: sum_all, softmax cross-entropy,
//                    bias gradients, the eval-mode batch-norm gradient
//   kLibrary   1e-4  cuDNN convolution / batch norm and cuBLAS GEMM against oneDNN: other
//                    algorithms and summation orders (batch norm's variance is recovered
//                    from cuDNN's 1 / sqrt(var + eps))
//   kTf32      2e-2  convolution and GEMM with TF32 tensor cores (10-bit mantissa inputs)
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "../test_util.h"
#include "cuda_test_util.h"
#include "engine/context.h"
#include "engine/cuda/cuda_backend.h"

namespace ts::engine {
namespace {

using namespace testing;

constexpr double kExact = 1e-6;
constexpr double kReduce = 1e-5;
constexpr double kLibrary = 1e-4;
constexpr double kTf32 = 2e-2;

using CudaParity = CudaTest;

Tensor rnd(const Shape& s, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  return rand_tensor(s, seed, false, lo, hi);
}

// ---------------------------------------------------------------- memory and layout

TEST_F(CudaParity, FillCopyToLayout) {
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

// ---------------------------------------------------------------- element-wise

TEST_F(CudaParity, ElementWise) {
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

TEST_F(CudaParity, SumAll) {
  for (int64_t n : {int64_t{1}, int64_t{1000}, int64_t{1} << 20, (int64_t{1} << 22) + 3}) {
    SCOPED_TRACE(n);
    const Tensor x = rnd({n}, 20 + static_cast<uint64_t>(n));
    EXPECT_TRUE(close_to_cpu(gpu_be().sum_all(copy_to(x, gpu())), cpu_be().sum_all(x), kReduce));
  }
  const Tensor x = rnd({2, 10, 3, 3}, 21);
  EXPECT_TRUE(close_to_cpu(gpu_be().sum_all(gpu_be().to_layout(copy_to(x, gpu()), Layout::blocked(8))),
                           cpu_be().sum_all(x), kReduce));
}

// ---------------------------------------------------------------- convolution

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

TEST_F(CudaParity, Conv2dForwardAndBackward) {
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
      const WeightGrads wg = cpu_be().conv2d_backward_weights(x, dy, c.w, bias, c.p);
      const WeightGrads gwg = gpu_be().conv2d_backward_weights(gx, gdy, c.w, bias, c.p);
      EXPECT_TRUE(close_to_cpu(gwg.dw, wg.dw, kLibrary));
      EXPECT_EQ(gwg.dbias.defined(), bias);
      if (bias) {
        EXPECT_TRUE(close_to_cpu(gwg.dbias, wg.dbias, kReduce));
      }
    }
  }
}

TEST_F(CudaParity, Conv2dLayoutsAndPlanCache) {
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

TEST_F(CudaParity, Conv2dAndLinearWithTf32) {
  cuda::Tf32Scope tf32(true);
  EXPECT_TRUE(cuda::tf32_allowed());
  const Tensor x = rnd({8, 64, 28, 28}, 300), w = rnd({64, 64, 3, 3}, 301, -0.1f, 0.1f);
  const auto p = conv_params(1, 1);
  EXPECT_TRUE(close_to_cpu(gpu_be().conv2d_forward(copy_to(x, gpu()), copy_to(w, gpu()), nullptr, p),
                           cpu_be().conv2d_forward(x, w, nullptr, p), kTf32));
  const Tensor a = rnd({64, 512}, 302), lw = rnd({256, 512}, 303, -0.1f, 0.1f);
  EXPECT_TRUE(close_to_cpu(gpu_be().linear_forward(copy_to(a, gpu()), copy_to(lw, gpu()), nullptr),
                           cpu_be().linear_forward(a, lw, nullptr), kTf32));
}

// ---------------------------------------------------------------- batch norm

TEST_F(CudaParity, BatchNorm) {
  struct Case {
    Shape x;
    float eps;
  };
  const Case cases[] = {{{4, 6, 5, 5}, 1e-5f}, {{2, 3, 7, 1}, 1e-3f}, {{8, 5}, 1e-5f}, {{16, 64, 4, 4}, 1e-5f}};
  uint64_t seed = 400;
  for (const auto& cs : cases) {
    SCOPED_TRACE(shape_str(cs.x));
    const int64_t c = cs.x[1];
    const Tensor x = rnd(cs.x, seed++, -2.0f, 3.0f), g = rnd({c}, seed++, 0.5f, 1.5f), b = rnd({c}, seed++);
    const Tensor gx = copy_to(x, gpu()), gg = copy_to(g, gpu()), gbeta = copy_to(b, gpu());
    const BatchNormStats s = cpu_be().batch_norm_forward_train(x, g, b, cs.eps);
    const BatchNormStats gs = gpu_be().batch_norm_forward_train(gx, gg, gbeta, cs.eps);
    EXPECT_TRUE(close_to_cpu(gs.y, s.y, kLibrary));
    EXPECT_TRUE(close_to_cpu(gs.mean, s.mean, kLibrary));
    EXPECT_TRUE(close_to_cpu(gs.var, s.var, kLibrary));  // biased, as the contract says

    const Tensor rm = rnd({c}, seed++), rv = rnd({c}, seed++, 0.5f, 2.0f);
    const Tensor grm = copy_to(rm, gpu()), grv = copy_to(rv, gpu());
    EXPECT_TRUE(close_to_cpu(gpu_be().batch_norm_forward_eval(gx, gg, gbeta, grm, grv, cs.eps),
                             cpu_be().batch_norm_forward_eval(x, g, b, rm, rv, cs.eps), kLibrary));

    const Tensor dy = rnd(cs.x, seed++);
    const Tensor gdy = copy_to(dy, gpu());
    for (bool global : {false, true}) {
      SCOPED_TRACE(global ? "global stats" : "batch stats");
      const Tensor& m = global ? rm : s.mean;
      const Tensor& v = global ? rv : s.var;
      const Tensor& gm = global ? grm : gs.mean;
      const Tensor& gv = global ? grv : gs.var;
      const BatchNormGrads r = cpu_be().batch_norm_backward(dy, x, g, m, v, cs.eps, global);
      const BatchNormGrads gr = gpu_be().batch_norm_backward(gdy, gx, gg, gm, gv, cs.eps, global);
      EXPECT_TRUE(close_to_cpu(gr.dx, r.dx, kLibrary));
      EXPECT_TRUE(close_to_cpu(gr.dgamma, r.dgamma, kLibrary));
      EXPECT_TRUE(close_to_cpu(gr.dbeta, r.dbeta, kLibrary));
    }
  }
  // A blocked input: same values, dx in the input's layout.
  const Tensor x = rnd({2, 10, 3, 3}, 450), g = rnd({10}, 451, 0.5f, 1.5f), b = rnd({10}, 452);
  const Tensor gxb = gpu_be().to_layout(copy_to(x, gpu()), Layout::blocked(8));
  const BatchNormStats s = cpu_be().batch_norm_forward_train(x, g, b, 1e-5f);
  const BatchNormStats gs = gpu_be().batch_norm_forward_train(gxb, copy_to(g, gpu()), copy_to(b, gpu()), 1e-5f);
  EXPECT_TRUE(close_to_cpu(gs.y, s.y, kLibrary));
  const BatchNormGrads gr = gpu_be().batch_norm_backward(copy_to(rnd(x.shape(), 453), gpu()), gxb, copy_to(g, gpu()),
                                                         gs.mean, gs.var, 1e-5f, false);
  EXPECT_EQ(gr.dx.layout(), Layout::blocked(8));
}

// ---------------------------------------------------------------- pooling

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

TEST_F(CudaParity, Pooling) {
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
    EXPECT_EQ(gm.workspace.category(), memprof::Category::workspace);
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

// ---------------------------------------------------------------- linear

TEST_F(CudaParity, Linear) {
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

// ---------------------------------------------------------------- concat / slice

TEST_F(CudaParity, ConcatSlice) {
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

// ---------------------------------------------------------------- loss

TEST_F(CudaParity, SoftmaxCrossEntropy) {
  std::vector<float> z = rand_tensor({6, 10}, 800, false, -3.0f, 3.0f).to_vector();
  z[0] = 1000.0f;  // stable log-sum-exp
  z[1] = -1000.0f;
  const Tensor logits = Tensor::from_vector({6, 10}, z);
  const Tensor labels = Tensor::from_vector({6}, {0, 9, 3, 3, 5, 1});
  const Tensor gl = copy_to(logits, gpu()), glab = copy_to(labels, gpu());
  const CrossEntropyResult r = cpu_be().softmax_cross_entropy_forward(logits, labels);
  const CrossEntropyResult gr = gpu_be().softmax_cross_entropy_forward(gl, glab);
  EXPECT_TRUE(close_to_cpu(gr.loss, r.loss, kReduce));
  EXPECT_TRUE(close_to_cpu(gr.probs, r.probs, kReduce));
  const Tensor dloss = Tensor::from_vector({1}, {0.7f});
  EXPECT_TRUE(close_to_cpu(gpu_be().softmax_cross_entropy_backward(copy_to(dloss, gpu()), gr.probs, glab),
                           cpu_be().softmax_cross_entropy_backward(dloss, r.probs, labels), kReduce));
  // A larger batch, as in training.
  const Tensor big = rnd({128, 1000}, 801, -5.0f, 5.0f);
  std::vector<float> lab(128);
  for (size_t i = 0; i < lab.size(); ++i) lab[i] = static_cast<float>((i * 37) % 1000);
  const Tensor blab = Tensor::from_vector({128}, lab);
  EXPECT_TRUE(close_to_cpu(gpu_be().softmax_cross_entropy_forward(copy_to(big, gpu()), copy_to(blab, gpu())).loss,
                           cpu_be().softmax_cross_entropy_forward(big, blab).loss, kReduce));
  // Bad labels: the CPU backend's error.
  try {
    gpu_be().softmax_cross_entropy_forward(gl, copy_to(Tensor::from_vector({6}, {0, 1, 2, 10, 4, 5}), gpu()));
    FAIL() << "expected invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("index 3"), std::string::npos) << e.what();
  }
  EXPECT_THROW(
      gpu_be().softmax_cross_entropy_forward(gl, copy_to(Tensor::from_vector({6}, {0, 1, 2, 3, 4, 0.5f}), gpu())),
      std::invalid_argument);
}

// ---------------------------------------------------------------- optimizer

TEST_F(CudaParity, SgdStep) {
  const Tensor w0 = rnd({1000}, 900), g0 = rnd({1000}, 901), b0 = rnd({1000}, 902);
  for (int variant = 0; variant < 3; ++variant) {
    SCOPED_TRACE(variant);
    const bool momentum = variant > 0, nesterov = variant == 2;
    Tensor w = copy_to(w0, Device::cpu()), b = copy_to(b0, Device::cpu());
    Tensor gw = copy_to(w0, gpu()), gb = copy_to(b0, gpu());
    cpu_be().sgd_step(w, g0, momentum ? b : Tensor(), 0.1f, 0.9f, 1e-4f, nesterov);
    gpu_be().sgd_step(gw, copy_to(g0, gpu()), momentum ? gb : Tensor(), 0.1f, 0.9f, 1e-4f, nesterov);
    EXPECT_TRUE(close_to_cpu(gw, w, kExact));
    if (momentum) {
      EXPECT_TRUE(close_to_cpu(gb, b, kExact));
    }
  }
}

}  // namespace
}  // namespace ts::engine
