// The optim family (engine/optim/, the backends' optimizer steps): SGD, Adam and RMSProp (both
// epsilon forms, gradients from elsewhere, several threads at once) against double-precision
// references; gradient clipping and the inverse-square-root schedule.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>
#include <vector>

#include "engine/autograd.h"
#include "engine/context.h"
#include "engine/ops.h"
#include "engine/optim/clip.h"
#include "engine/optim/lr_schedule.h"
#include "engine/optim/rmsprop.h"
#include "on_every_device.h"
#include "test_util.h"

namespace ts::engine {
namespace {

using namespace testing;

class OptimOps : public OnDevice {};

TEST_P(OptimOps, SgdStep) {
  auto& be = backend_for(device());
  const std::vector<float> w0{1.0f, -2.0f, 0.5f}, g0{0.1f, 0.2f, -0.3f}, b0{0.5f, 0.0f, -1.0f};
  const float lr = 0.1f, mom = 0.9f, wd = 0.01f;
  for (bool nesterov : {false, true}) {
    Tensor w = Tensor::from_vector({3}, w0, device()), g = Tensor::from_vector({3}, g0, device()),
           b = Tensor::from_vector({3}, b0, device());
    be.sgd_step(w, g, b, lr, mom, wd, nesterov);
    const auto wv = w.to_vector(), bv = b.to_vector();
    for (size_t i = 0; i < 3; ++i) {
      const float gi = g0[i] + wd * w0[i];
      const float bi = mom * b0[i] + gi;
      EXPECT_NEAR(bv[i], bi, 1e-6);
      EXPECT_NEAR(wv[i], w0[i] - lr * (nesterov ? gi + mom * bi : bi), 1e-6);
    }
  }
  Tensor w = Tensor::from_vector({3}, w0, device()), g = Tensor::from_vector({3}, g0, device());
  be.sgd_step(w, g, Tensor(), lr, 0.0f, 0.0f, false);
  EXPECT_NEAR(w.to_vector()[1], w0[1] - lr * g0[1], 1e-6);
}

// Three Adam steps against the update written out in double precision.
TEST_P(OptimOps, AdamStep) {
  auto& be = backend_for(device());
  const std::vector<float> w0{1.0f, -2.0f, 0.5f, 0.0f};
  const std::vector<std::vector<float>> grads{
      {0.1f, 0.2f, -0.3f, 0.0f}, {0.2f, -0.1f, -0.3f, 1e-3f}, {-0.4f, 0.3f, 0.0f, 2.0f}};
  const double lr = 1e-2, b1 = 0.5, b2 = 0.9, eps = 1e-8, wd = 0.01;
  Tensor w = Tensor::from_vector({4}, w0, device());
  Tensor m = Tensor::zeros({4}, device()), v = Tensor::zeros({4}, device());
  std::vector<double> rw(w0.begin(), w0.end()), rm(4, 0.0), rv(4, 0.0);
  for (int64_t step = 1; step <= 3; ++step) {
    const auto& g0 = grads[static_cast<size_t>(step - 1)];
    be.adam_step(w, Tensor::from_vector({4}, g0, device()), m, v, static_cast<float>(lr), static_cast<float>(b1),
                 static_cast<float>(b2), static_cast<float>(eps), static_cast<float>(wd), step);
    for (size_t i = 0; i < 4; ++i) {
      const double g = g0[i] + wd * rw[i];
      rm[i] = b1 * rm[i] + (1 - b1) * g;
      rv[i] = b2 * rv[i] + (1 - b2) * g * g;
      const double mhat = rm[i] / (1 - std::pow(b1, static_cast<double>(step)));
      const double vhat = rv[i] / (1 - std::pow(b2, static_cast<double>(step)));
      rw[i] -= lr * mhat / (std::sqrt(vhat) + eps);
    }
  }
  const auto wv = w.to_vector(), mv = m.to_vector(), vv = v.to_vector();
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_NEAR(wv[i], rw[i], 1e-6) << i;
    EXPECT_NEAR(mv[i], rm[i], 1e-6) << i;
    EXPECT_NEAR(vv[i], rv[i], 1e-7) << i;
  }
  EXPECT_THROW(be.adam_step(w, w, m, v, 0.1f, 0.9f, 0.999f, 1e-8f, 0.0f, 0), std::invalid_argument);
}

// Three steps of RMSProp on one parameter, in double.
std::vector<double> reference(std::vector<double> p, const std::vector<std::vector<double>>& grads, double lr,
                              double alpha, double eps, bool inside) {
  std::vector<double> s(p.size(), 0.0);
  for (const auto& g : grads) {
    for (size_t i = 0; i < p.size(); ++i) {
      s[i] = alpha * s[i] + (1 - alpha) * g[i] * g[i];
      p[i] -= lr * g[i] / (inside ? std::sqrt(s[i] + eps) : std::sqrt(s[i]) + eps);
    }
  }
  return p;
}

TEST_P(OptimOps, MatchesTheReferenceInBothEpsilonForms) {
  for (bool inside : {false, true}) {
    SCOPED_TRACE(inside ? "eps inside the root" : "eps outside");
    const std::vector<float> init = uniform(10, 7);
    Tensor p = Tensor::from_vector({2, 5}, init, device()).set_requires_grad(true);
    optim::RmsPropOptions o;
    o.lr.base_lr = 0.01;
    o.alpha = 0.9;
    o.eps = inside ? 0.1 : 1e-8;
    o.eps_inside_sqrt = inside;
    optim::RmsProp opt({p}, o);
    std::vector<std::vector<double>> grads;
    for (int step = 0; step < 3; ++step) {
      // loss = sum(c * p): the gradient is c.
      const std::vector<float> c = uniform(10, 100 + static_cast<uint64_t>(step), -2.0f, 2.0f);
      ops::sum(ops::mul(p, Tensor::from_vector({2, 5}, c, device()))).backward();
      opt.step();
      opt.zero_grad();
      grads.emplace_back(c.begin(), c.end());
    }
    const auto want = reference(std::vector<double>(init.begin(), init.end()), grads, 0.01, 0.9, o.eps, inside);
    const auto got = p.to_vector();
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << i;
    EXPECT_EQ(opt.steps(), 3);
  }
}

TEST_P(OptimOps, AppliesGradientsComputedElsewhere) {
  Tensor shared = Tensor::from_vector({4}, {1, 2, 3, 4}, device());
  optim::RmsPropOptions o;
  o.lr.base_lr = 0.1;
  o.alpha = 0.5;
  o.eps = 0.1;
  o.eps_inside_sqrt = true;
  optim::RmsProp opt({shared}, o);
  opt.step({Tensor::from_vector({4}, {1, -1, 0, 2}, device())});
  const auto want = reference({1, 2, 3, 4}, {{1, -1, 0, 2}}, 0.1, 0.5, 0.1, true);
  const auto got = shared.to_vector();
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(got[i], want[i], 1e-6);
  EXPECT_NEAR(opt.square_averages()[0].to_vector()[3], 0.5 * 4, 1e-6);
  opt.step({Tensor()});  // an undefined gradient leaves its parameter alone
  EXPECT_EQ(shared.to_vector(), got);
  EXPECT_THROW(opt.step(std::vector<Tensor>{}), std::invalid_argument);
}

// Hogwild: threads apply gradients to the same parameters without a lock. With a constant
// gradient of one sign every update moves each element the same way, so whatever the
// interleaving the result lies between "every update applied" and "only one thread's".
TEST_P(OptimOps, SeveralThreadsUpdateSharedParametersAtOnce) {
  constexpr int kThreads = 4, kSteps = 200;
  constexpr int64_t kN = 1 << 16;
  Tensor shared = Tensor::zeros({kN}, device());
  optim::RmsPropOptions o;
  o.lr.base_lr = 1e-3;
  o.alpha = 0.99;
  o.eps = 0.1;
  o.eps_inside_sqrt = true;
  optim::RmsProp opt({shared}, o);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      set_op_threads(1);
      const Tensor g = Tensor::full({kN}, 1.0f, device());
      for (int s = 0; s < kSteps; ++s) opt.step({g});
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(opt.steps(), kThreads * kSteps);
  // One thread alone: p_k = -lr sum_j 1 / sqrt(s_j + eps), s_j = 1 - alpha^j; every update
  // moves p by at least lr / sqrt(1 + eps) and at most lr / sqrt(eps).
  const auto p = shared.to_vector();
  const double least = kSteps * 1e-3 / std::sqrt(1.1);
  const double most = kThreads * kSteps * 1e-3 / std::sqrt(0.1);
  for (int64_t i = 0; i < kN; i += 997) {
    EXPECT_LT(p[static_cast<size_t>(i)], -least) << i;
    EXPECT_GT(p[static_cast<size_t>(i)], -most) << i;
  }
}

TEST_P(OptimOps, ClipGradNorm) {
  Tensor a = Tensor::from_vector({2}, {0, 0}, device()), b = Tensor::from_vector({1}, {0}, device());
  a.set_requires_grad(true);
  b.set_requires_grad(true);
  // grads (3, 0) and (4): norm 5.
  ops::sum(ops::add(ops::mul(a, Tensor::from_vector({2}, {3, 0}, device())), ops::scale(a, 0.0f))).backward();
  ops::sum(ops::scale(b, 4.0f)).backward();
  EXPECT_NEAR(optim::clip_grad_norm({a, b}, 10.0), 5.0, 1e-6);  // under the limit: untouched
  EXPECT_NEAR(b.grad().item(), 4.0f, 1e-6);
  EXPECT_NEAR(optim::clip_grad_norm({a, b}, 1.0), 5.0, 1e-6);
  EXPECT_NEAR(a.grad().to_vector()[0], 0.6f, 1e-5);
  EXPECT_NEAR(b.grad().item(), 0.8f, 1e-5);
}

TEST(OptimCpu, InverseSqrtSchedule) {
  optim::LrSchedule s;
  s.kind = optim::LrSchedule::Kind::inverse_sqrt;
  s.base_lr = std::pow(512.0, -0.5);
  s.warmup_steps = 4000;
  EXPECT_NEAR(s.at(0), s.base_lr * std::pow(4000.0, -1.5), 1e-12);
  EXPECT_NEAR(s.at(3999), s.base_lr / std::sqrt(4000.0), 1e-12);  // the peak
  EXPECT_NEAR(s.at(15999), s.base_lr / std::sqrt(16000.0), 1e-12);
  EXPECT_GT(s.at(3999), s.at(3998));
  EXPECT_GT(s.at(3999), s.at(4000));
}

TS_ON_EVERY_DEVICE(OptimOps);

}  // namespace
}  // namespace ts::engine
