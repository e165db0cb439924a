// The conv family (engine/ops/conv.cpp): conv2d and its backward pieces against naive loops and
// finite differences (first and second order), in the shapes the image workloads use (3x3, 1x1,
// strided, 7x7, grouped, depthwise, dilated); on the CPU also the blocked layouts, the
// implementations oneDNN picks and its primitive cache.
#include <gtest/gtest.h>

#include "engine/autograd.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/gradcheck.h"
#include "engine/nn/layers.h"
#include "engine/ops.h"
#include "engine/optim/sgd.h"
#include "engine/packed_weights.h"
#include "engine/random.h"
#include "on_every_device.h"
#include "test_util.h"

namespace ts::engine {
namespace {

using namespace testing;

class ConvOps : public OnDevice {};
using cpu::cpu_backend;

struct ConvCase {
  const char* name;
  Shape x, w;
  Conv2dParams p;
  bool bias;
};

std::vector<ConvCase> conv_cases() {
  return {
      {"3x3_pad1", {2, 3, 6, 6}, {4, 3, 3, 3}, conv_params(1, 1), true},
      {"1x1", {2, 8, 5, 5}, {6, 8, 1, 1}, conv_params(1, 0), false},
      {"1x1_stride2", {2, 8, 6, 6}, {8, 8, 1, 1}, conv_params(2, 0), false},
      {"7x7_s2_p3", {1, 3, 11, 11}, {4, 3, 7, 7}, conv_params(2, 3), true},
      {"grouped", {2, 8, 5, 5}, {6, 4, 3, 3}, conv_params(1, 1, 1, 2), true},
      {"depthwise", {2, 8, 6, 6}, {8, 1, 3, 3}, conv_params(1, 1, 1, 8), false},
      {"dilated", {1, 4, 9, 9}, {4, 4, 3, 3}, conv_params(1, 2, 2), true},
      {"stride2_pad1_c16", {1, 16, 7, 7}, {8, 16, 3, 3}, conv_params(2, 1), true},
  };
}

// x, w and (with a bias) b of a case, drawn from `seed` on.
std::vector<Tensor> conv_inputs(const ConvCase& c, uint64_t& seed) {
  std::vector<Tensor> in{rand_tensor(c.x, seed++), rand_tensor(c.w, seed++, true, -0.5f, 0.5f)};
  if (c.bias) in.push_back(rand_tensor({c.w[0]}, seed++));
  return in;
}

GradFn conv_of(const Conv2dParams& p) {
  return [p](const std::vector<Tensor>& t) { return ops::conv2d(t[0], t[1], t.size() > 2 ? t[2] : Tensor(), p); };
}

TEST_P(ConvOps, Conv2dConfigs) {
  uint64_t seed = 10;
  for (const auto& c : conv_cases()) {
    SCOPED_TRACE(c.name);
    EXPECT_GRADCHECK(gradcheck(conv_of(c.p), conv_inputs(c, seed)));
  }
}

TEST(ConvCpu, Conv2dBlockedInputGradientKeepsLayout) {
  Tensor x = rand_tensor({2, 16, 5, 5}, 3);
  Tensor w = rand_tensor({8, 16, 3, 3}, 4, true, -0.3f, 0.3f);
  const auto p = conv_params(1, 1);
  // The conv sees a blocked input; gradients still flow back to the plain leaf.
  EXPECT_GRADCHECK(gradcheck(
      [p](const std::vector<Tensor>& t) {
        return ops::conv2d(ops::to_layout(t[0], Layout::blocked(8)), t[1], Tensor(), p);
      },
      {x, w}));
  // The data gradient has the layout of the input it belongs to.
  Tensor dy = Tensor::full({2, 8, 5, 5}, 1.0f, Device::cpu());
  for (Layout l : {Layout::plain(), Layout::blocked(8), Layout::channels_last()}) {
    Tensor dx = ops::conv2d_backward_data(dy, w.detach(), x.shape(), l, p);
    EXPECT_EQ(dx.layout(), l);
    EXPECT_EQ(dx.shape(), x.shape());
  }
}

// Second order (WGAN-GP's penalty differentiates through the critic's backward).
TEST_P(ConvOps, Conv2dDoubleBackward) {
  uint64_t seed = 30;
  for (const auto& c : conv_cases()) {
    SCOPED_TRACE(c.name);
    EXPECT_GRADCHECK(gradgradcheck(conv_of(c.p), conv_inputs(c, seed)));
  }
}

TEST_P(ConvOps, Conv2dBackwardPiecesAreDifferentiable) {
  const auto p = conv_params(2, 1);
  Tensor dy = rand_tensor({2, 4, 3, 3}, 40);
  Tensor w = rand_tensor({4, 3, 3, 3}, 41, true, -0.5f, 0.5f);
  Tensor x = rand_tensor({2, 3, 6, 6}, 42);
  const Shape xs = x.shape(), ws = w.shape();
  EXPECT_GRADCHECK(gradcheck(
      [p, xs](const std::vector<Tensor>& t) { return ops::conv2d_backward_data(t[0], t[1], xs, Layout::plain(), p); },
      {dy, w}));
  for (int which : {0, 1}) {  // the weights gradient, then the bias gradient
    SCOPED_TRACE(which);
    EXPECT_GRADCHECK(gradcheck(
        [p, ws, which](const std::vector<Tensor>& t) {
          WeightGrads r = ops::conv2d_backward_weights(t[0], t[1], ws, true, p);
          return which == 0 ? r.dw : r.dbias;
        },
        {x, dy}));
  }
}

TEST_P(ConvOps, Conv2dRejectsBadShapes) {
  Tensor x = rand_tensor({1, 3, 4, 4}, 5, false);
  Tensor w = rand_tensor({2, 4, 3, 3}, 6, false);
  EXPECT_THROW(ops::conv2d(on(x), on(w), Tensor(), conv_params(1, 1)), std::invalid_argument);
  Tensor w2 = rand_tensor({2, 3, 5, 5}, 6, false);
  EXPECT_THROW(ops::conv2d(on(x), on(w2), Tensor(), conv_params(1, 0)), std::invalid_argument);
  EXPECT_THROW(ops::conv2d(on(rand_tensor({3, 4, 4}, 1, false)), on(w), Tensor(), conv_params(1, 1)),
               std::invalid_argument);
}

TEST_P(ConvOps, ConvForwardMatchesNaive) {
  struct Case {
    Shape x, w;
    Conv2dParams p;
    bool bias;
  };
  const Case cases[] = {
      {{2, 3, 7, 7}, {5, 3, 3, 3}, conv_params(1, 1), true},
      {{1, 3, 15, 15}, {8, 3, 7, 7}, conv_params(2, 3), false},
      {{2, 16, 6, 6}, {16, 16, 1, 1}, conv_params(1, 0), true},
      {{2, 16, 9, 9}, {8, 16, 3, 3}, conv_params(2, 1), false},
      {{1, 8, 6, 6}, {8, 4, 3, 3}, conv_params(1, 1, 1, 2), true},
      {{1, 16, 6, 6}, {16, 1, 3, 3}, conv_params(1, 1, 1, 16), false},
      {{1, 8, 9, 9}, {8, 8, 3, 3}, conv_params(1, 2, 2), true},
  };
  uint64_t seed = 1;
  for (const auto& c : cases) {
    SCOPED_TRACE(shape_str(c.x) + " * " + shape_str(c.w));
    Tensor x = rand_tensor(c.x, seed++, false);
    Tensor w = rand_tensor(c.w, seed++, false);
    Tensor b = c.bias ? rand_tensor({c.w[0]}, seed++, false) : Tensor();
    Tensor y = ops::conv2d(on(x), on(w), on(b), c.p);
    const auto bv = c.bias ? b.to_vector() : std::vector<float>();
    Shape ys;
    const auto ref = naive_conv2d(x.to_vector(), c.x, w.to_vector(), c.w, c.bias ? &bv : nullptr, c.p, &ys);
    EXPECT_EQ(y.shape(), ys);
    EXPECT_LT(max_rel_diff(y.to_vector(), ref), 1e-4);
  }
}

// Whatever layout oneDNN picks for a conv's output on this machine (blocks of 8 on AVX2, 16 on
// AVX-512), the next conv gives the same values from every layout it may be handed: both block
// sizes, channels-last and plain are forced here, so each is checked on any ISA.
TEST(ConvCpu, BlockedConvEqualsPlain) {
  Tensor x = rand_tensor({2, 16, 8, 8}, 7, false);
  Tensor w = rand_tensor({16, 16, 3, 3}, 8, false, -0.2f, 0.2f);
  const auto p = conv_params(1, 1);
  Tensor y = ops::conv2d(x, w, Tensor(), p);
  EXPECT_EQ(y.shape(), (Shape{2, 16, 8, 8}));
  Shape ys;
  const auto ref = naive_conv2d(x.to_vector(), x.shape(), w.to_vector(), w.shape(), nullptr, p, &ys);
  EXPECT_LT(max_rel_diff(y.to_vector(), ref), 1e-4) << y.layout().str();
  const auto plain = ops::conv2d(ops::to_layout(y, Layout::plain()), w, Tensor(), p).to_vector();
  for (Layout l : {Layout::blocked(8), Layout::blocked(16), Layout::channels_last(), y.layout()}) {
    SCOPED_TRACE(l.str());
    Tensor yl = ops::to_layout(y, l);
    EXPECT_EQ(yl.layout(), l);
    EXPECT_LT(max_rel_diff(ops::conv2d(yl, w, Tensor(), p).to_vector(), plain), 1e-5);
  }
  // Padded channels (C=10 in blocks of 8 and of 16) through relu/add stay zero: sums agree with plain.
  for (int block : {8, 16}) {
    SCOPED_TRACE(block);
    Tensor a = ops::to_layout(rand_tensor({2, 10, 3, 3}, 9, false), Layout::blocked(block));
    Tensor r = ops::relu(ops::add(a, a));
    EXPECT_NEAR(ops::sum(r).item(), ops::sum(ops::to_layout(r, Layout::plain())).item(), 1e-4);
  }
}

TEST(ConvCpu, ConvImplementationsAreNotReference) {
  auto& be = cpu_backend();
  struct Case {
    Shape x, w;
    Conv2dParams p;
  };
  const Case cases[] = {
      {{16, 64, 56, 56}, {64, 64, 3, 3}, conv_params(1, 1)},
      {{16, 256, 56, 56}, {64, 256, 1, 1}, conv_params(1, 0)},
      {{16, 3, 224, 224}, {64, 3, 7, 7}, conv_params(2, 3)},
  };
  for (const auto& c : cases) {
    for (Layout l : {Layout::plain(), Layout::blocked(8)}) {
      if (c.x[1] == 3 && !l.is_plain()) continue;
      for (int which = 0; which < 3; ++which) {
        if (c.x[1] == 3 && which == 1) continue;  // the first conv needs no data gradient
        const std::string impl = be.conv_impl_info(c.x, l, c.w, false, c.p, which);
        SCOPED_TRACE(shape_str(c.x) + " " + l.str() + " pass " + std::to_string(which) + ": " + impl);
        EXPECT_EQ(impl.find("ref"), std::string::npos);
      }
    }
  }
}

TEST(ConvCpu, PrimitiveCacheIsReused) {
  auto& be = cpu_backend();
  Tensor x = rand_tensor({2, 8, 6, 6}, 11);
  Tensor w = rand_tensor({8, 8, 3, 3}, 12);
  Tensor b = rand_tensor({8}, 13);
  auto step = [&] {
    Tensor y = ops::relu(ops::conv2d(x, w, b, conv_params(1, 1)));
    Tensor m = ops::max_pool2d(y, {2, 2, 2, 2, 0, 0, false});
    Tensor loss = ops::sum(ops::linear(ops::flatten(m), rand_tensor({3, 72}, 14, false), Tensor()));
    loss.backward();
  };
  step();
  const size_t after_first = be.cached_primitives();
  step();
  step();
  EXPECT_EQ(be.cached_primitives(), after_first);
  x.zero_grad();
  Tensor x2 = rand_tensor({3, 8, 6, 6}, 15, false);
  ops::conv2d(x2, w, b, conv_params(1, 1));
  EXPECT_GT(be.cached_primitives(), after_first);
}

// Packed weights (engine/packed_weights.h): a convolution handed its weights in the layout
// conv_weights_layout names computes what it computes from plain weights, bit for bit (the same
// primitive reads the same values), and gives the weights gradient back in that layout.
TEST(ConvCpu, PackedWeightsGiveThePlainResults) {
  auto& be = cpu_backend();
  const ConvCase cases[] = {
      {"3x3", {2, 32, 8, 8}, {32, 32, 3, 3}, conv_params(1, 1), false},
      {"1x1_stride2", {2, 32, 8, 8}, {64, 32, 1, 1}, conv_params(2, 0), true},
  };
  uint64_t seed = 40;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const Layout packed = be.conv_weights_layout(c.w, c.p);
    // Every CPU these tests run on has AVX2 at least, where oneDNN's kernels block weights.
    ASSERT_EQ(packed.kind, Layout::Kind::weights_blocked) << packed.str();
    auto in = conv_inputs(c, seed);
    Tensor w_packed = ops::to_layout(in[1].detach(), packed);
    w_packed.set_requires_grad(true);
    const Tensor g =
        rand_tensor({c.x[0], c.w[0], c.p.stride_h == 1 ? c.x[2] : c.x[2] / 2, c.p.stride_w == 1 ? c.x[3] : c.x[3] / 2},
                    seed++, false);
    auto run = [&](const Tensor& w) {
      Tensor y = ops::conv2d(in[0], w, c.bias ? in[2] : Tensor(), c.p);
      ops::sum(ops::mul(y, g)).backward();
      return y;
    };
    const Tensor y_plain = run(in[1]);
    const Tensor dx_plain = in[0].grad(), dw_plain = in[1].grad();
    in[0].zero_grad();
    const Tensor y_packed = run(w_packed);
    EXPECT_EQ(w_packed.grad().layout(), packed);
    EXPECT_EQ(y_packed.to_vector(), y_plain.to_vector());
    EXPECT_EQ(in[0].grad().to_vector(), dx_plain.to_vector());
    EXPECT_EQ(w_packed.grad().to_vector(), dw_plain.to_vector());
  }
}

// Where weights are packed: only ungrouped convolutions whose channels fill whole blocks (a
// packed layout has no padding, so optimizers and gradient exchange may treat it as flat).
TEST(ConvCpu, WeightsArePackedOnlyWhereTheyFit) {
  auto& be = cpu_backend();
  EXPECT_TRUE(be.conv_weights_layout({64, 3, 7, 7}, conv_params(2, 3)).is_plain());
  EXPECT_TRUE(be.conv_weights_layout({32, 16, 3, 3}, conv_params(1, 1, 1, 2)).is_plain());
  EXPECT_THROW(storage_numel({30, 32, 3, 3}, Layout::weights_blocked(16)), std::logic_error);
  EXPECT_THROW(storage_numel({32, 32}, Layout::weights_blocked(8)), std::logic_error);
  EXPECT_EQ(storage_numel({32, 64, 3, 3}, Layout::weights_blocked(16)), 32 * 64 * 9);
}

// A Conv2d layer keeps its weights packed while packing is on, and holds the same values and
// trains to the same values as one built with it off: SGD with momentum over the packed storage
// is SGD over the values.
TEST(ConvCpu, PackedConvLayerTrainsAsPlain) {
  const bool was = packed_weights();
  auto build_and_train = [](bool packed) {
    set_packed_weights(packed);
    Rng rng(5);
    nn::Conv2d conv(nn::conv_options(16, 32, 3, 1, 1, true), Device::cpu(), rng);
    optim::SgdOptions o;
    o.lr.base_lr = 0.05;
    optim::Sgd sgd(conv.parameters(), o);
    const Tensor x = rand_tensor({2, 16, 6, 6}, 6, false);
    for (int step = 0; step < 3; ++step) {
      ops::sum(ops::mul(conv.forward(x), conv.forward(x))).backward();
      sgd.step();
      sgd.zero_grad();
    }
    return std::make_pair(conv.weight().layout(), conv.weight().to_vector());
  };
  const auto [plain_layout, plain_values] = build_and_train(false);
  const auto [packed_layout, packed_values] = build_and_train(true);
  set_packed_weights(was);
  EXPECT_TRUE(plain_layout.is_plain());
  EXPECT_EQ(packed_layout, cpu_backend().conv_weights_layout({32, 16, 3, 3}, conv_params(1, 1)));
  EXPECT_FALSE(packed_layout.is_plain());
  EXPECT_EQ(packed_values, plain_values);
}

TS_ON_EVERY_DEVICE(ConvOps);

}  // namespace
}  // namespace ts::engine
