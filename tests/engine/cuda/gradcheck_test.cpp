// The engine's finite-difference gradient checks (engine/gradcheck.h) run through the GPU:
// gradcheck takes plain CPU inputs, so each function copies its inputs to the GPU with a
// differentiable transfer (transfer), runs the ops there and copies the result back. The
// analytic gradients are then the CUDA backend's backward pieces; TF32 is off (CudaTest).
#include "engine/gradcheck.h"

#include <gtest/gtest.h>

#include <functional>

#include "../test_util.h"
#include "cuda_test_util.h"
#include "engine/autograd.h"
#include "engine/ops.h"

namespace ts::engine {
namespace {

using namespace testing;

using CudaGradcheck = CudaTest;

Pool2dParams pool_params(int64_t k, int64_t s, int64_t pad, bool include_pad = false) {
  Pool2dParams p;
  p.kernel_h = p.kernel_w = k;
  p.stride_h = p.stride_w = s;
  p.pad_h = p.pad_w = pad;
  p.count_include_pad = include_pad;
  return p;
}

TEST_F(CudaGradcheck, Conv2d) {
  struct Case {
    Shape x, w;
    Conv2dParams p;
    bool bias;
  };
  const Case cases[] = {
      {{2, 3, 6, 6}, {4, 3, 3, 3}, conv_params(1, 1), true},
      {{2, 8, 5, 5}, {6, 8, 1, 1}, conv_params(1, 0), false},
      {{1, 3, 11, 11}, {4, 3, 7, 7}, conv_params(2, 3), true},
      {{2, 8, 5, 5}, {6, 4, 3, 3}, conv_params(1, 1, 1, 2), true},
      {{2, 8, 6, 6}, {8, 1, 3, 3}, conv_params(1, 1, 1, 8), false},
      {{1, 4, 9, 9}, {4, 4, 3, 3}, conv_params(1, 2, 2), true},
  };
  uint64_t seed = 10;
  for (const auto& c : cases) {
    SCOPED_TRACE(shape_str(c.x) + " * " + shape_str(c.w));
    Tensor x = rand_tensor(c.x, seed++);
    Tensor w = rand_tensor(c.w, seed++, true, -0.5f, 0.5f);
    std::vector<Tensor> in{x, w};
    if (c.bias) in.push_back(rand_tensor({c.w[0]}, seed++));
    const Conv2dParams p = c.p;
    EXPECT_GRADCHECK(gradcheck(on_gpu([p](const std::vector<Tensor>& t) {
                                 return ops::conv2d(t[0], t[1], t.size() > 2 ? t[2] : Tensor(), p);
                               }),
                               in));
  }
  // Second order through the backward pieces (WGAN-GP's penalty needs it).
  Tensor x = rand_tensor({2, 3, 6, 6}, 40);
  Tensor w = rand_tensor({4, 3, 3, 3}, 41, true, -0.5f, 0.5f);
  Tensor b = rand_tensor({4}, 42);
  const auto p = conv_params(2, 1);
  EXPECT_GRADCHECK(
      gradgradcheck(on_gpu([p](const std::vector<Tensor>& t) { return ops::conv2d(t[0], t[1], t[2], p); }), {x, w, b}));
}

TEST_F(CudaGradcheck, BatchNorm) {
  Tensor x = rand_tensor({3, 4, 3, 3}, 21);
  Tensor g = rand_tensor({4}, 22, true, 0.5f, 1.5f);
  Tensor b = rand_tensor({4}, 23);
  Tensor rm = Tensor::zeros({4}, gpu());
  Tensor rv = Tensor::full({4}, 1.0f, gpu());
  EXPECT_GRADCHECK(gradcheck(on_gpu([&](const std::vector<Tensor>& t) {
                               return ops::batch_norm(t[0], t[1], t[2], rm, rv, true, 0.1f, 1e-5f);
                             }),
                             {x, g, b}));
  Tensor x2 = rand_tensor({6, 5}, 27);
  Tensor g2 = rand_tensor({5}, 28, true, 0.5f, 1.5f);
  Tensor b2 = rand_tensor({5}, 29);
  Tensor none;
  EXPECT_GRADCHECK(gradcheck(on_gpu([&](const std::vector<Tensor>& t) {
                               return ops::batch_norm(t[0], t[1], t[2], none, none, true, 0.1f, 1e-5f);
                             }),
                             {x2, g2, b2}));
  // Eval mode: the running statistics are constants.
  Tensor erm = copy_to(rand_tensor({4}, 33, false), gpu());
  Tensor erv = copy_to(rand_tensor({4}, 34, false, 0.5f, 2.0f), gpu());
  EXPECT_GRADCHECK(gradcheck(on_gpu([&](const std::vector<Tensor>& t) {
                               return ops::batch_norm(t[0], t[1], t[2], erm, erv, false, 0.1f, 1e-5f);
                             }),
                             {x, g, b}));
}

TEST_F(CudaGradcheck, ElementWise) {
  Tensor x = away_from_zero({2, 3, 4, 4}, 40);
  EXPECT_GRADCHECK(gradcheck(on_gpu([](const std::vector<Tensor>& t) { return ops::relu(t[0]); }), {x}));
  EXPECT_GRADCHECK(gradgradcheck(on_gpu([](const std::vector<Tensor>& t) { return ops::relu(t[0]); }), {x}));
  Tensor a = rand_tensor({2, 10, 3, 3}, 50), b = rand_tensor({2, 10, 3, 3}, 51);
  EXPECT_GRADCHECK(gradcheck(on_gpu([](const std::vector<Tensor>& t) { return ops::add(t[0], t[1]); }), {a, b}));
  EXPECT_GRADCHECK(gradcheck(on_gpu([](const std::vector<Tensor>& t) {
                               return ops::add(ops::to_layout(t[0], Layout::channels_last()),
                                               ops::to_layout(t[1], Layout::blocked(8)));
                             }),
                             {a, b}));
  EXPECT_GRADCHECK(gradgradcheck(on_gpu([](const std::vector<Tensor>& t) { return ops::mul(t[0], t[1]); }), {a, b}));
  EXPECT_GRADCHECK(gradcheck(
      on_gpu([](const std::vector<Tensor>& t) { return ops::scale(ops::mul(ops::sum(t[0]), ops::mean(t[0])), 0.5f); }),
      {a}));
  EXPECT_GRADCHECK(gradcheck(on_gpu([](const std::vector<Tensor>& t) { return ops::tanh(t[0]); }), {a}));
}

TEST_F(CudaGradcheck, Pooling) {
  Tensor x = distinct_values({2, 3, 6, 6}, 60);
  for (auto p : {pool_params(2, 2, 0), pool_params(3, 2, 1), pool_params(3, 1, 1)}) {
    EXPECT_GRADCHECK(gradcheck(on_gpu([p](const std::vector<Tensor>& t) { return ops::max_pool2d(t[0], p); }), {x}));
  }
  Tensor y = rand_tensor({2, 3, 6, 6}, 62);
  for (auto p : {pool_params(2, 2, 0), pool_params(3, 2, 1, false), pool_params(3, 2, 1, true)}) {
    EXPECT_GRADCHECK(gradcheck(on_gpu([p](const std::vector<Tensor>& t) { return ops::avg_pool2d(t[0], p); }), {y}));
    EXPECT_GRADCHECK(
        gradgradcheck(on_gpu([p](const std::vector<Tensor>& t) { return ops::avg_pool2d(t[0], p); }), {y}));
  }
  EXPECT_GRADCHECK(gradcheck(on_gpu([](const std::vector<Tensor>& t) { return ops::global_avg_pool2d(t[0]); }), {y}));
}

TEST_F(CudaGradcheck, LinearConcatSliceShape) {
  Tensor x = rand_tensor({4, 5}, 70), w = rand_tensor({3, 5}, 71), b = rand_tensor({3}, 72);
  EXPECT_GRADCHECK(
      gradcheck(on_gpu([](const std::vector<Tensor>& t) { return ops::linear(t[0], t[1], t[2]); }), {x, w, b}));
  EXPECT_GRADCHECK(
      gradgradcheck(on_gpu([](const std::vector<Tensor>& t) { return ops::linear(t[0], t[1], t[2]); }), {x, w, b}));
  Tensor c1 = rand_tensor({2, 3, 2, 2}, 80), c2 = rand_tensor({2, 5, 2, 2}, 81);
  EXPECT_GRADCHECK(gradcheck(on_gpu([](const std::vector<Tensor>& t) {
                               return ops::concat({t[0], t[1]}, 1);
                             }),
                             {c1, c2}));
  Tensor s = rand_tensor({2, 10, 3, 3}, 86);
  EXPECT_GRADCHECK(gradcheck(on_gpu([](const std::vector<Tensor>& t) { return ops::slice(t[0], 1, 2, 5); }), {s}));
  EXPECT_GRADCHECK(gradcheck(on_gpu([](const std::vector<Tensor>& t) { return ops::flatten(t[0]); }), {s}));
  EXPECT_GRADCHECK(
      gradcheck(on_gpu([](const std::vector<Tensor>& t) { return ops::to_layout(t[0], Layout::blocked(8)); }), {s}));
  EXPECT_GRADCHECK(
      gradcheck(on_gpu([](const std::vector<Tensor>& t) { return ops::upsample_nearest2d(t[0], 2); }), {s}));
  EXPECT_GRADCHECK(gradcheck(on_gpu([](const std::vector<Tensor>& t) {
                               return ops::permute(t[0], {0, 2, 3, 1});
                             }),
                             {s}));
}

TEST_F(CudaGradcheck, Losses) {
  Tensor logits = rand_tensor({4, 5}, 95, true, -2.0f, 2.0f);
  Tensor labels = Tensor::from_vector({4}, {0, 3, 4, 1});
  EXPECT_GRADCHECK(gradcheck(
      on_gpu([](const std::vector<Tensor>& t) { return ops::softmax_cross_entropy(t[0], t[1]); }), {logits, labels}));
  Tensor x = rand_tensor({4, 6}, 96);
  EXPECT_GRADCHECK(gradcheck(on_gpu([](const std::vector<Tensor>& t) { return ops::norm_penalty(t[0], 1.0f); }), {x}));
  Tensor p = rand_tensor({5, 4}, 97, true, -2.0f, 2.0f), q = rand_tensor({5, 4}, 98, true, -2.0f, 2.0f);
  EXPECT_GRADCHECK(gradcheck(
      on_gpu([](const std::vector<Tensor>& t) { return ops::smooth_l1_loss(t[0], t[1], Tensor(), 1.0f / 9.0f, 4.0f); }),
      {p, q}));
}

TEST_F(CudaGradcheck, Detection) {
  Tensor x = rand_tensor({2, 3, 8, 8}, 100);
  Tensor rois = Tensor::from_vector({3, 5}, {0, 1.3f, 2.1f, 12.7f, 11.2f, 1, 0, 0, 15, 15, 1, 4, 6, 9, 14});
  EXPECT_GRADCHECK(
      gradcheck(on_gpu([](const std::vector<Tensor>& t) { return ops::roi_align(t[0], t[1], 2, 2, 0.5f, 2, false); }),
                {x, rois}));
  Tensor xd = distinct_values({2, 3, 8, 8}, 101, 0.01f);
  EXPECT_GRADCHECK(gradcheck(on_gpu([](const std::vector<Tensor>& t) { return ops::roi_pool(t[0], t[1], 2, 2, 0.5f); }),
                             {xd, rois}));
  Tensor r = rand_tensor({6, 4}, 102);
  Tensor index = Tensor::from_vector({5}, {4, 0, 4, 5, 1});
  EXPECT_GRADCHECK(
      gradcheck(on_gpu([](const std::vector<Tensor>& t) { return ops::index_select_rows(t[0], t[1]); }), {r, index}));
  Tensor src = rand_tensor({5, 4}, 103);
  EXPECT_GRADCHECK(
      gradcheck(on_gpu([](const std::vector<Tensor>& t) { return ops::index_add_rows(t[0], t[1], 6); }), {src, index}));
}

// A small network end to end: conv, batch norm, relu, pooling, linear and the loss, all on
// the GPU, checked against finite differences.
TEST_F(CudaGradcheck, SmallNetwork) {
  Tensor x = rand_tensor({2, 3, 8, 8}, 110, false);
  Tensor w1 = rand_tensor({8, 3, 3, 3}, 111, true, -0.4f, 0.4f);
  Tensor g1 = rand_tensor({8}, 112, true, 0.5f, 1.5f);
  Tensor b1 = rand_tensor({8}, 113, true, 0.5f, 1.0f);
  Tensor fc = rand_tensor({4, 8}, 114);
  Tensor labels = Tensor::from_vector({2}, {1, 3});
  EXPECT_GRADCHECK(gradcheck(on_gpu([](const std::vector<Tensor>& t) {
                               Tensor h = ops::conv2d(t[0], t[1], Tensor(), conv_params(1, 1));
                               h = ops::relu(ops::batch_norm(h, t[2], t[3], Tensor(), Tensor(), true, 0.1f, 1e-5f));
                               h = ops::global_avg_pool2d(ops::max_pool2d(h, pool_params(2, 2, 0)));
                               return ops::softmax_cross_entropy(ops::linear(h, t[4], Tensor()), t[5]);
                             }),
                             {x, w1, g1, b1, fc, labels}));
}

}  // namespace
}  // namespace ts::engine
