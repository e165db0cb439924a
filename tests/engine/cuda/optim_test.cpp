// The optim family on the GPU: CPU-versus-GPU parity of the CUDA backend's methods (the same inputs
// through both backends, compared element by element with cuda_test_util.h's tolerances) and
// the GPU's own argument checks. The family's test bodies run on the GPU too: ../optim_test.cpp.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "../test_util.h"
#include "cuda_test_util.h"
#include "engine/ops.h"
#include "engine/optim/rmsprop.h"

namespace ts::engine {
namespace {

using namespace testing;

using CudaOptim = CudaTest;

TEST_F(CudaOptim, SgdStep) {
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

TEST_F(CudaOptim, AdamStep) {
  const Tensor w0 = rnd({1000}, 30), g0 = rnd({1000}, 31), m0 = rnd({1000}, 32, -0.1f, 0.1f),
               v0 = rnd({1000}, 33, 0.0f, 0.01f);
  for (int64_t step : {1, 7}) {
    SCOPED_TRACE(step);
    Tensor w = copy_to(w0, Device::cpu()), m = copy_to(m0, Device::cpu()), v = copy_to(v0, Device::cpu());
    Tensor gw = copy_to(w0, gpu()), gm = copy_to(m0, gpu()), gv = copy_to(v0, gpu());
    cpu_be().adam_step(w, g0, m, v, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, step);
    gpu_be().adam_step(gw, copy_to(g0, gpu()), gm, gv, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, step);
    EXPECT_TRUE(close_to_cpu(gw, w, kTranscendental));
    EXPECT_TRUE(close_to_cpu(gm, m, kExact));
    EXPECT_TRUE(close_to_cpu(gv, v, kExact));
  }
  Tensor gw = copy_to(w0, gpu());
  EXPECT_THROW(gpu_be().adam_step(gw, gw, gw, gw, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, 0), std::invalid_argument);
}

TEST_F(CudaOptim, RmsPropBothEpsilonFormsSeveralSteps) {
  struct Case {
    Shape shape;
    float lr, alpha, eps;
    bool zero_start;  // square_avg from zeros (as the optimizer starts) or from positive values
  };
  const Case cases[] = {{{1}, 0.01f, 0.99f, 1e-8f, true},
                        {{7}, 0.01f, 0.9f, 0.1f, true},
                        {{33, 17}, 7e-4f, 0.99f, 0.1f, false},
                        {{4, 3, 5, 5}, 0.05f, 0.9f, 1e-3f, false},
                        {{70001}, 1e-3f, 0.95f, 1e-2f, true}};
  constexpr int kSteps = 5;
  uint64_t seed = 300;
  for (const Case& c : cases) {
    const Tensor p0 = rnd(c.shape, seed++);
    const Tensor s0 = c.zero_start ? Tensor::zeros(c.shape, Device::cpu()) : rnd(c.shape, seed++, 0.0f, 0.5f);
    std::vector<Tensor> grads;
    for (int step = 0; step < kSteps; ++step) {
      std::vector<float> g = uniform(shape_numel(c.shape), seed++, -2.0f, 2.0f);
      if (step == 0) {
        for (size_t i = 0; i < g.size(); i += 5) g[i] = 0.0f;  // 0 / eps: no move
      }
      grads.push_back(Tensor::from_vector(c.shape, g));
    }
    std::vector<float> final_params[2];
    for (bool inside : {false, true}) {
      SCOPED_TRACE(shape_str(c.shape) + (inside ? " eps inside the root" : " eps outside") + " eps " +
                   std::to_string(c.eps));
      const Tensor p = Tensor::from_vector(c.shape, p0.to_vector()), s = Tensor::from_vector(c.shape, s0.to_vector());
      const Tensor gp = up(p0), gs = up(s0);
      for (int step = 0; step < kSteps; ++step) {
        SCOPED_TRACE("step " + std::to_string(step));
        const Tensor& g = grads[static_cast<size_t>(step)];
        cpu_be().rmsprop_step(p, g, s, c.lr, c.alpha, c.eps, inside);
        gpu_be().rmsprop_step(gp, up(g), gs, c.lr, c.alpha, c.eps, inside);
        ASSERT_TRUE(same_bits(gp, p));
        ASSERT_TRUE(same_bits(gs, s));
      }
      final_params[inside ? 1 : 0] = p.to_vector();
    }
    // With a large eps the two forms give different parameters, so the comparison tells them
    // apart (with 1e-8 the difference may sit below float resolution).
    if (c.eps >= 1e-3f) {
      EXPECT_NE(final_params[0], final_params[1]) << shape_str(c.shape);
    }
  }
}

// A3C's Hogwild: several threads step the same GPU parameters at once. Every launch goes on the
// device's one stream, so all updates land, one after another: with the same gradient each
// time, the result is the CPU's sequential steps, bit for bit.
TEST_F(CudaOptim, RmsPropFromSeveralThreadsLosesNoUpdate) {
  const Shape s{64, 33};
  const Tensor init = rnd(s, 400), g = rnd(s, 401, -2.0f, 2.0f);
  optim::RmsPropOptions o;
  o.lr.base_lr = 0.01;
  o.alpha = 0.99;
  o.eps = 0.1;
  o.eps_inside_sqrt = true;
  Tensor gp = up(init);
  optim::RmsProp opt({gp}, o);
  const Tensor gg = up(g);
  constexpr int kThreadCount = 4, kSteps = 8;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreadCount; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kSteps; ++i) opt.step({gg});
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(opt.steps(), kThreadCount * kSteps);
  Tensor p = Tensor::from_vector(s, init.to_vector());
  optim::RmsProp cpu_opt({p}, o);
  for (int i = 0; i < kThreadCount * kSteps; ++i) cpu_opt.step({g});
  EXPECT_TRUE(same_bits(gp, p));
  EXPECT_TRUE(same_bits(opt.square_averages()[0], cpu_opt.square_averages()[0]));
}

TEST_F(CudaOptim, RmsPropBadArguments) {
  const Tensor p = up(rnd({2, 3}, 1)), g = up(rnd({2, 3}, 2)), s = up(rnd({2, 3}, 3, 0.0f, 1.0f));
  EXPECT_THROW(gpu_be().rmsprop_step(p, up(rnd({3, 2}, 4)), s, 0.1f, 0.9f, 0.1f, false), std::invalid_argument);
  EXPECT_THROW(gpu_be().rmsprop_step(p, g, up(rnd({6}, 5)), 0.1f, 0.9f, 0.1f, true), std::invalid_argument);
  EXPECT_THROW(gpu_be().rmsprop_step(p, rnd({2, 3}, 2), s, 0.1f, 0.9f, 0.1f, false), std::invalid_argument);
  EXPECT_THROW(gpu_be().rmsprop_step(p, g, Tensor(), 0.1f, 0.9f, 0.1f, false), std::invalid_argument);
  // Not plain: refused, as on the CPU.
  const Tensor x = rnd({1, 10, 2, 2}, 6), xb = cpu_be().to_layout(x, Layout::blocked(8));
  EXPECT_THROW(cpu_be().rmsprop_step(xb, xb, xb, 0.1f, 0.9f, 0.1f, false), std::invalid_argument);
  const Tensor gxb = gpu_be().to_layout(up(x), Layout::blocked(8));
  EXPECT_THROW(gpu_be().rmsprop_step(gxb, gxb, gxb, 0.1f, 0.9f, 0.1f, false), std::invalid_argument);
}

}  // namespace
}  // namespace ts::engine
