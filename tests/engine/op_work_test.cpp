// The work each op declares for the roofline (context.h's OpWork, docs/formulas.md "Roofline"):
// the FLOPs of convolutions and matrix products, the least bytes of memory-bound ops, autograd
// nodes that do their own work, the CPU backend's reorders as ops of their own, and a whole
// training step in which no op is left without a class.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "engine/autograd.h"
#include "engine/context.h"
#include "engine/ops.h"
#include "engine/optim/sgd.h"
#include "profiler/tracer.h"
#include "test_util.h"

namespace ts::engine {
namespace {

using namespace testing;
using profiler::WorkClass;

struct Traced {
  std::vector<profiler::Event> events;
  std::string name(const profiler::Event& e) const { return std::string(profiler::Tracer::global().str(e.name)); }
  // The op events of that name, in the order they started.
  std::vector<profiler::Event> ops(const std::string& op) const {
    std::vector<profiler::Event> out;
    for (const auto& e : events) {
      if (e.kind == profiler::EventKind::op && name(e) == op) out.push_back(e);
    }
    return out;
  }
  // The one op event of that name (a default event, and a failure, when there is not one).
  profiler::Event one(const std::string& op) const {
    const auto all = ops(op);
    EXPECT_EQ(all.size(), 1u) << op;
    return all.size() == 1 ? all[0] : profiler::Event{};
  }
};

template <class F>
Traced trace(F&& f) {
  auto& tracer = profiler::Tracer::global();
  tracer.clear();
  tracer.set_enabled(true);
  f();
  tracer.set_enabled(false);
  return Traced{tracer.drain()};
}

constexpr int64_t kF = sizeof(float);

TEST(OpWork, ConvolutionAndLinearCountTheirMultiplyAdds) {
  // x [2, 3, 8, 8] * w [4, 3, 3, 3], padding 1: y [2, 4, 8, 8], each of its 512 values 27
  // multiply-adds, and the bias once each.
  const Tensor x = rand_tensor({2, 3, 8, 8}, 1, false), w = rand_tensor({4, 3, 3, 3}, 2, false),
               b = rand_tensor({4}, 3, false);
  const Tensor a = rand_tensor({5, 7}, 4, false), fc = rand_tensor({3, 7}, 5, false), fb = rand_tensor({3}, 6, false);
  const Traced t = trace([&] {
    ops::conv2d(x, w, b, conv_params(1, 1));
    ops::linear(a, fc, fb);
  });
  const auto conv = t.one("conv2d");
  EXPECT_EQ(conv.work, WorkClass::compute);
  EXPECT_EQ(conv.flops, 2 * 512 * 27 + 512);
  EXPECT_EQ(conv.bytes, kF * (384 + 108 + 4 + 512));
  const auto lin = t.one("linear");
  EXPECT_EQ(lin.work, WorkClass::compute);
  EXPECT_EQ(lin.flops, 2 * 5 * 7 * 3 + 15);
  EXPECT_EQ(lin.bytes, kF * (35 + 21 + 3 + 15));
}

TEST(OpWork, BackwardPiecesAndNodesDeclareTheirOwnWork) {
  Tensor x = rand_tensor({2, 3, 6, 6}, 10), w = rand_tensor({5, 3, 3, 3}, 11);
  Tensor gamma = rand_tensor({5}, 12, true, 0.5f, 1.5f), beta = rand_tensor({5}, 13);
  const Traced t = trace([&] {
    Tensor y = ops::conv2d(x, w, Tensor(), conv_params(1, 0));  // y [2, 5, 4, 4]
    y = ops::relu(ops::batch_norm(y, gamma, beta, Tensor(), Tensor(), true, 0.1f, 1e-5f));
    backward({ops::sum(y)});
  });
  const int64_t y = 2 * 5 * 4 * 4, conv_flops = 2 * y * 27;
  EXPECT_EQ(t.one("conv2d_backward_data").flops, conv_flops);
  EXPECT_EQ(t.one("conv2d_backward_data").work, WorkClass::compute);
  EXPECT_EQ(t.one("conv2d_backward_weights").flops, conv_flops);
  // relu_backward reads dy and y and writes dx.
  EXPECT_EQ(t.one("relu_backward").work, WorkClass::memory);
  EXPECT_EQ(t.one("relu_backward").bytes, kF * 3 * y);
  // Batch norm's backward is the node's own kernel: dy, x, gamma read; dx, dgamma, dbeta written.
  const auto bn = t.one("BatchNormBackward");
  EXPECT_EQ(bn.work, WorkClass::memory);
  EXPECT_EQ(bn.bytes, kF * (y + y + 5 + y + 5 + 5));
  // The conv node only calls its pieces: no work of its own.
  EXPECT_EQ(t.one("Conv2dBackward").work, WorkClass::none);
  EXPECT_EQ(t.one("Conv2dBackward").bytes, 0);
}

// Any JIT convolution of oneDNN on x86 (AVX2 or AVX-512) computes in a blocked weight layout,
// so plain OIHW weights are reordered at every call: that reorder is an op of its own, nested
// in the convolution, so that the convolution's self time is the primitive's alone.
TEST(OpWork, PrimitiveReordersAreOpsNestedInTheirOp) {
  const Tensor x = rand_tensor({2, 16, 8, 8}, 20, false), w = rand_tensor({16, 16, 3, 3}, 21, false);
  const Traced t = trace([&] { ops::conv2d(x, w, Tensor(), conv_params(1, 1)); });
  const auto conv = t.one("conv2d");
  const auto reorders = t.ops("reorder");
  ASSERT_FALSE(reorders.empty());
  int64_t weight_reorders = 0;
  for (const auto& r : reorders) {
    EXPECT_EQ(r.work, WorkClass::reorder);
    EXPECT_GE(r.start_ns, conv.start_ns);
    EXPECT_LE(r.end_ns, conv.end_ns);
    // The weights' 2,304 floats read plain and written blocked (a block pads nothing at 16).
    if (r.bytes == 2 * kF * 16 * 16 * 9) ++weight_reorders;
  }
  EXPECT_GE(weight_reorders, 1);
}

// A training step with every kind of op a classifier has: each forward op and each optimizer
// step declares a class; the only ops without one are autograd nodes and the ops made of other
// ops (their work is in the ops nested in them), and views.
TEST(OpWork, EveryOpOfATrainingStepHasAClass) {
  Tensor x = rand_tensor({4, 3, 8, 8}, 30, false);
  Tensor w = rand_tensor({8, 3, 3, 3}, 31), gamma = rand_tensor({8}, 32, true, 0.5f, 1.5f), beta = rand_tensor({8}, 33);
  Tensor fc = rand_tensor({5, 8}, 34), fcb = rand_tensor({5}, 35);
  const Tensor labels = Tensor::from_vector({4}, {0, 1, 2, 4});
  optim::SgdOptions o;
  optim::Sgd sgd({w, gamma, beta, fc, fcb}, o);
  const Traced t = trace([&] {
    Tensor h = ops::conv2d(x, w, Tensor(), conv_params(1, 1));
    h = ops::relu(ops::batch_norm(h, gamma, beta, Tensor(), Tensor(), true, 0.1f, 1e-5f));
    h = ops::global_avg_pool2d(ops::max_pool2d(h, pool_params(2, 2, 0)));
    Tensor loss = ops::add(ops::softmax_cross_entropy(ops::linear(h, fc, fcb), labels),
                           ops::scale(ops::mean(ops::mul(fc, fc)), 1e-4f));
    backward({loss});
    sgd.step();
  });
  std::set<std::string> classless;
  std::multiset<int64_t> step_bytes;
  for (const auto& e : t.events) {
    if (e.kind != profiler::EventKind::op) continue;
    const std::string n = t.name(e);
    if (e.work == WorkClass::none) {
      classless.insert(n);
      EXPECT_EQ(e.flops + e.bytes, 0) << n;
    } else {
      EXPECT_GT(e.flops + e.bytes, 0) << n << " declared a class and no work";
    }
    if (n == "sgd_step") {
      EXPECT_EQ(e.work, WorkClass::memory);
      step_bytes.insert(e.bytes);
    }
  }
  for (const std::string& n : classless) {
    const bool node = n.size() > 8 && n.compare(n.size() - 8, 8, "Backward") == 0;
    EXPECT_TRUE(node || n == "mean" || n == "global_avg_pool2d" || n == "reshape") << n << " declares no work";
  }
  // One per parameter: p, g and the momentum read, p and the momentum written.
  EXPECT_EQ(step_bytes, (std::multiset<int64_t>{5 * kF * 216, 5 * kF * 8, 5 * kF * 8, 5 * kF * 40, 5 * kF * 5}));
}

}  // namespace
}  // namespace ts::engine
