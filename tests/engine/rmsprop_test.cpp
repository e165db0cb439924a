// RMSProp: both epsilon forms against a hand-written reference, gradients from elsewhere (the
// asynchronous learners' form), and several threads updating the same parameters at once.
#include "engine/optim/rmsprop.h"

#include <gtest/gtest.h>

#include <cmath>
#include <thread>
#include <vector>

#include "engine/context.h"
#include "engine/ops.h"
#include "test_util.h"

using namespace ts::engine;
using namespace ts::engine::testing;

namespace {

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

}  // namespace

TEST(RmsProp, MatchesTheReferenceInBothEpsilonForms) {
  for (bool inside : {false, true}) {
    SCOPED_TRACE(inside ? "eps inside the root" : "eps outside");
    const std::vector<float> init = uniform(10, 7);
    Tensor p = Tensor::from_vector({2, 5}, init).set_requires_grad(true);
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
      ops::sum(ops::mul(p, Tensor::from_vector({2, 5}, c))).backward();
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

TEST(RmsProp, AppliesGradientsComputedElsewhere) {
  Tensor shared = Tensor::from_vector({4}, {1, 2, 3, 4});
  optim::RmsPropOptions o;
  o.lr.base_lr = 0.1;
  o.alpha = 0.5;
  o.eps = 0.1;
  o.eps_inside_sqrt = true;
  optim::RmsProp opt({shared}, o);
  opt.step({Tensor::from_vector({4}, {1, -1, 0, 2})});
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
TEST(RmsProp, SeveralThreadsUpdateSharedParametersAtOnce) {
  constexpr int kThreads = 4, kSteps = 200;
  constexpr int64_t kN = 1 << 16;
  Tensor shared = Tensor::zeros({kN}, Device::cpu());
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
      const Tensor g = Tensor::full({kN}, 1.0f, Device::cpu());
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
