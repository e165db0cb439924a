#include <gtest/gtest.h>

#include <vector>

#include "engine/autograd.h"
#include "engine/context.h"
#include "engine/ops.h"

using namespace ts::engine;

namespace {
Tensor leaf(const std::vector<float>& v) {
  Tensor t = Tensor::from_vector({static_cast<int64_t>(v.size())}, v);
  t.set_requires_grad(true);
  return t;
}
}  // namespace

TEST(Autograd, HookFiresOnceWhenTheGradientIsFinal) {
  Tensor w = leaf({1, 2, 3});
  Tensor x = leaf({4, 5, 6});
  int fired = 0;
  std::vector<float> seen;
  w.add_grad_ready_hook([&](Tensor& t) {
    ++fired;
    seen = t.grad().to_vector();
  });
  // w is used twice: the hook must see the sum of both contributions.
  Tensor y = ops::sum(ops::add(ops::mul(w, x), ops::scale(w, 2.0f)));
  y.backward();
  EXPECT_EQ(fired, 1);
  EXPECT_EQ(seen, (std::vector<float>{6, 7, 8}));
  EXPECT_EQ(x.grad().to_vector(), (std::vector<float>{1, 2, 3}));
}

TEST(Autograd, ParameterGradientsAccumulateAcrossBackwardPasses) {
  Tensor w = leaf({1, 2});
  ops::sum(ops::scale(w, 3.0f)).backward();
  ops::sum(ops::scale(w, 3.0f)).backward();
  EXPECT_EQ(w.grad().to_vector(), (std::vector<float>{6, 6}));
  EXPECT_EQ(w.grad().category(), ts::vocabulary::Category::weight_grads);
  w.zero_grad();
  EXPECT_FALSE(w.grad().defined());
}

TEST(Autograd, GradLeavesDotGradAlone) {
  Tensor w = leaf({1, 2});
  const auto g = grad({ops::sum(ops::mul(w, w))}, {w});
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].to_vector(), (std::vector<float>{2, 4}));
  EXPECT_FALSE(w.grad().defined());
}

TEST(Autograd, SecondOrderThroughCreateGraph) {
  // d/dw sum((d/dw sum(w^3/3))^2) = d/dw sum(w^4) = 4 w^3
  Tensor w = leaf({1, 2});
  Tensor cube = ops::mul(ops::mul(w, w), w);
  const auto g = grad({ops::scale(ops::sum(cube), 1.0f / 3.0f)}, {w}, {}, /*create_graph=*/true);
  ASSERT_TRUE(g[0].requires_grad());
  ops::sum(ops::mul(g[0], g[0])).backward();
  const auto v = w.grad().to_vector();
  EXPECT_NEAR(v[0], 4.0f, 1e-5);
  EXPECT_NEAR(v[1], 32.0f, 1e-4);
}

TEST(Autograd, NoGradScopeRecordsNothing) {
  Tensor w = leaf({1, 2});
  NoGradScope no_grad;
  Tensor y = ops::scale(w, 2.0f);
  EXPECT_FALSE(y.requires_grad());
  EXPECT_THROW(y.backward(), std::invalid_argument);
}

TEST(Autograd, NonScalarRootNeedsASeed) {
  Tensor w = leaf({1, 2});
  Tensor y = ops::scale(w, 2.0f);
  EXPECT_THROW(y.backward(), std::invalid_argument);
  backward({y}, {Tensor::from_vector({2}, {1, 10})});
  EXPECT_EQ(w.grad().to_vector(), (std::vector<float>{2, 20}));
}

namespace {
// Records which inputs the running backward asked it for, and whether it ran at all.
struct ProbeNode : Node {
  std::vector<bool>* seen;
  int* runs;
  ProbeNode(std::vector<bool>* s, int* r) : seen(s), runs(r) {}
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    ++*runs;
    *seen = {input_needed(0), input_needed(1)};
    return {g[0], g[0]};
  }
  std::string name() const override { return "ProbeBackward"; }
};

Tensor probe(const Tensor& a, const Tensor& b, std::vector<bool>* seen, int* runs) {
  Tensor y = ops::add(a, b).detach();
  connect(std::make_shared<ProbeNode>(seen, runs), {&a, &b}, {&y});
  return y;
}
}  // namespace

// grad() of some inputs tells each node which of its inputs lead there (conv and linear then
// skip their weight gradients) and runs no node that leads nowhere; backward() wants all.
TEST(Autograd, GradAsksOnlyForTheInputsItNeeds) {
  Tensor x = leaf({1, 2}), w = leaf({3, 4}), v = leaf({5, 6});
  std::vector<bool> seen_top, seen_side;
  int runs_top = 0, runs_side = 0;
  Tensor side = probe(w, v, &seen_side, &runs_side);  // leads only to w and v
  Tensor top = probe(x, side, &seen_top, &runs_top);
  auto g = grad({ops::sum(top)}, {x});
  EXPECT_EQ(g[0].to_vector(), (std::vector<float>{1, 1}));
  EXPECT_EQ(seen_top, (std::vector<bool>{true, false}));
  EXPECT_EQ(runs_side, 0);
  ops::sum(top).backward();
  EXPECT_EQ(seen_top, (std::vector<bool>{true, true}));  // the masks of grad() are gone
  EXPECT_EQ(seen_side, (std::vector<bool>{true, true}));
  EXPECT_EQ(runs_side, 1);
}
