// CPU-versus-GPU parity of clipped ReLU (Deep Speech 2), log-softmax, exp and RMSProp (A3C) and
// additive attention (seq2seq), their argument checks, and gradient checks of the ops built on
// them through the GPU. Tolerances, max |gpu - cpu| / (1 + |cpu|), TF32 off:
//   bit for bit  clipped ReLU (comparisons and selects only) and RMSProp (the CPU's operations
//                in its order, no FMA contraction on either side, correctly rounded division
//                and square root on both); inputs avoid denormals, which the CPU flushes to 0
//   kPointwise   1e-6  exp and log-softmax forward: CUDA's expf is within 2 ulp, glibc's
//                within 1; log-softmax's normaliser is a double sum (other order) rounded once;
//                also the storage sums (double) of clipped outputs, which check padded channels
//   kReduce      1e-5  log-softmax backward: exp(y) (a few ulp apart) times the row sum of dy,
//                which reaches ~20 for rows of 1000
//   kAttention   2e-5  additive attention, forward and backward: float dot products over up to
//                130 units summed in another order (SIMD lanes against a warp's butterfly),
//                tanh from CUDA's tanhf against the CPU's polynomial (both within ~3e-7
//                relative), dv summed per row and then over rows instead of in one running sum.
//                The worst expected here is ~3e-6 (dv of the 16 x 37 case); a wrong index or
//                a missing term shows as 1e-2 or more.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "../test_util.h"
#include "cuda_test_util.h"
#include "engine/autograd.h"
#include "engine/gradcheck.h"
#include "engine/ops.h"
#include "engine/optim/rmsprop.h"

namespace ts::engine {
namespace {

using namespace testing;

constexpr double kPointwise = 1e-6;
constexpr double kReduce = 1e-5;
constexpr double kAttention = 2e-5;

using CudaParityPointwise = CudaTest;
using CudaParityAdditiveAttention = CudaTest;

Tensor rnd(const Shape& s, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  return rand_tensor(s, seed, false, lo, hi);
}
Tensor up(const Tensor& t) { return copy_to(t, gpu()); }

// The same shape, layout and bits of every logical value (NaNs included), the GPU's on the GPU.
::testing::AssertionResult same_bits(const Tensor& g, const Tensor& c) {
  if (!g.defined() || !c.defined()) return ::testing::AssertionFailure() << "undefined result";
  if (g.device().type != DeviceType::cuda) return ::testing::AssertionFailure() << "result on " << g.device().str();
  if (g.shape() != c.shape() || !(g.layout() == c.layout())) {
    return ::testing::AssertionFailure() << shape_str(g.shape()) << " " << g.layout().str() << " vs cpu "
                                         << shape_str(c.shape()) << " " << c.layout().str();
  }
  const auto gv = g.to_vector(), cv = c.to_vector();
  for (size_t i = 0; i < gv.size(); ++i) {
    if (std::memcmp(&gv[i], &cv[i], sizeof(float)) != 0) {
      return ::testing::AssertionFailure() << "element " << i << " of " << shape_str(g.shape()) << ": gpu " << gv[i]
                                           << ", cpu " << cv[i];
    }
  }
  return ::testing::AssertionSuccess();
}

// What `f` throws as std::invalid_argument (its message), or a note that it did not.
std::string invalid_argument_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(no std::invalid_argument)";
}

// ---------------------------------------------------------------- clipped ReLU

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

TEST_F(CudaParityPointwise, ClippedReluForwardBackward) {
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

TEST_F(CudaParityPointwise, ClippedReluBadArguments) {
  const Tensor y = up(rnd({2, 3}, 5)), dy = up(rnd({3, 2}, 6));
  EXPECT_THROW(gpu_be().clipped_relu_backward(dy, y, 1.0f), std::invalid_argument);
  EXPECT_THROW(cpu_be().clipped_relu_backward(rnd({3, 2}, 6), rnd({2, 3}, 5), 1.0f), std::invalid_argument);
  EXPECT_THROW(gpu_be().clipped_relu_forward(rnd({2, 3}, 5), 1.0f), std::invalid_argument);  // a CPU tensor
  EXPECT_THROW(gpu_be().clipped_relu_backward(rnd({2, 3}, 6), y, 1.0f), std::invalid_argument);
  EXPECT_THROW(gpu_be().clipped_relu_forward(Tensor(), 1.0f), std::invalid_argument);
}

// ---------------------------------------------------------------- log-softmax, exp

TEST_F(CudaParityPointwise, LogSoftmaxForwardBackward) {
  // Rows of one, fewer than a warp, several warps' worth, many rows, and none.
  const Shape shapes[] = {{1, 1}, {1, 6}, {5, 4}, {7, 33}, {3, 100}, {64, 18}, {2, 1000}, {0, 5}};
  uint64_t seed = 100;
  for (const Shape& s : shapes) {
    SCOPED_TRACE(shape_str(s));
    const Tensor x = rnd(s, seed++, -3.0f, 3.0f), dy = rnd(s, seed++);
    const Tensor y = cpu_be().log_softmax_forward(x);
    const Tensor gy = gpu_be().log_softmax_forward(up(x));
    EXPECT_TRUE(close_to_cpu(gy, y, kPointwise));
    EXPECT_TRUE(close_to_cpu(gpu_be().log_softmax_backward(up(dy), gy), cpu_be().log_softmax_backward(dy, y), kReduce));
  }
  // Large logits (the normaliser must not overflow) and a row where exp underflows to 0.
  const Tensor x = Tensor::from_vector({4, 4}, {1, 2, 3, 4, -5, 0, 5, 0.5f, 90, 100, 80, 95, 0, -1e4f, 3, -200});
  const Tensor y = cpu_be().log_softmax_forward(x);
  const Tensor gy = gpu_be().log_softmax_forward(up(x));
  EXPECT_TRUE(close_to_cpu(gy, y, kPointwise));
  const Tensor dy = rnd({4, 4}, 150);
  EXPECT_TRUE(close_to_cpu(gpu_be().log_softmax_backward(up(dy), gy), cpu_be().log_softmax_backward(dy, y), kReduce));
}

TEST_F(CudaParityPointwise, Exp) {
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

TEST_F(CudaParityPointwise, LogSoftmaxAndExpBadArguments) {
  // Each refused on the GPU as on the CPU.
  const Tensor v1 = rnd({4}, 1), v3 = rnd({2, 3, 4}, 2), a = rnd({2, 3}, 3), b = rnd({3, 2}, 4);
  for (const Tensor* t : {&v1, &v3}) {
    EXPECT_THROW(cpu_be().log_softmax_forward(*t), std::invalid_argument);
    EXPECT_THROW(gpu_be().log_softmax_forward(up(*t)), std::invalid_argument);
  }
  EXPECT_THROW(cpu_be().log_softmax_backward(a, b), std::invalid_argument);
  EXPECT_THROW(gpu_be().log_softmax_backward(up(a), up(b)), std::invalid_argument);
  EXPECT_THROW(gpu_be().log_softmax_forward(a), std::invalid_argument);  // a CPU tensor
  EXPECT_THROW(gpu_be().log_softmax_backward(up(a), a), std::invalid_argument);
  const Tensor x4 = rnd({1, 10, 2, 2}, 5);
  EXPECT_THROW(cpu_be().exp_forward(cpu_be().to_layout(x4, Layout::blocked(8))), std::invalid_argument);
  EXPECT_THROW(gpu_be().exp_forward(gpu_be().to_layout(up(x4), Layout::blocked(8))), std::invalid_argument);
  EXPECT_THROW(gpu_be().exp_forward(x4), std::invalid_argument);
}

// ---------------------------------------------------------------- RMSProp

TEST_F(CudaParityPointwise, RmsPropBothEpsilonFormsSeveralSteps) {
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
TEST_F(CudaParityPointwise, RmsPropFromSeveralThreadsLosesNoUpdate) {
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

TEST_F(CudaParityPointwise, RmsPropBadArguments) {
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

// ---------------------------------------------------------------- additive attention

struct AttentionCase {
  int64_t b, s, a, d;
  bool with_lengths;
  std::vector<float> lengths;
};

std::string case_str(const AttentionCase& c) {
  std::string r = "B " + std::to_string(c.b) + " S " + std::to_string(c.s) + " A " + std::to_string(c.a) + " D " +
                  std::to_string(c.d) + " lengths";
  if (!c.with_lengths) return r + " none";
  for (float l : c.lengths) r += " " + std::to_string(static_cast<int>(l));
  return r;
}

std::vector<float> mixed_lengths(int64_t b, int64_t s) {
  std::vector<float> l(static_cast<size_t>(b));
  for (int64_t i = 0; i < b; ++i) l[static_cast<size_t>(i)] = static_cast<float>((i * 11) % (s + 1));
  l[1] = static_cast<float>(s);
  return l;  // 0 for row 0, all s for row 1, the rest scattered
}

// The keys row b uses: its length, or all S.
int64_t used(const AttentionCase& c, int64_t b) {
  return c.with_lengths ? static_cast<int64_t>(c.lengths[static_cast<size_t>(b)]) : c.s;
}

// Every element at positions j >= used(b) of a [B, S, W] tensor (W = 1 for [B, S]) is exactly 0.
void expect_zero_past_lengths(const AttentionCase& c, const Tensor& t, int64_t w, const char* what) {
  const auto v = t.to_vector();
  for (int64_t b = 0; b < c.b; ++b) {
    for (int64_t j = used(c, b); j < c.s; ++j) {
      for (int64_t k = 0; k < w; ++k) {
        ASSERT_EQ(v[static_cast<size_t>((b * c.s + j) * w + k)], 0.0f) << what << " row " << b << " key " << j;
      }
    }
  }
}

// Every element of the rows of a [B, W] tensor whose row has no key is exactly 0.
void expect_zero_rows_without_keys(const AttentionCase& c, const Tensor& t, int64_t w, const char* what) {
  const auto v = t.to_vector();
  for (int64_t b = 0; b < c.b; ++b) {
    if (used(c, b) != 0) continue;
    for (int64_t k = 0; k < w; ++k) ASSERT_EQ(v[static_cast<size_t>(b * w + k)], 0.0f) << what << " row " << b;
  }
}

TEST_F(CudaParityAdditiveAttention, ForwardBackward) {
  const std::vector<AttentionCase> cases = {
      {1, 1, 1, 1, false, {}},
      {3, 5, 7, 4, true, {5, 2, 0}},
      {2, 6, 33, 17, true, {6, 1}},                  // more units than a warp's lanes
      {4, 9, 64, 40, false, {}},
      {16, 37, 96, 130, true, mixed_lengths(16, 37)},  // keys and width past a block's threads
      {2, 3, 4, 5, true, {0, 0}},                    // no row has a key
      {2, 0, 5, 3, false, {}},                       // no keys at all
      {2, 0, 5, 3, true, {0, 0}},
      {0, 4, 3, 2, false, {}},                       // no rows
      {3, 4, 0, 2, true, {4, 2, 3}},                 // no attention units: uniform weights
      {3, 4, 5, 0, true, {4, 0, 2}},                 // empty memory width
  };
  uint64_t seed = 500;
  for (const AttentionCase& c : cases) {
    SCOPED_TRACE(case_str(c));
    const Tensor q = rnd({c.b, c.a}, seed++), k = rnd({c.b, c.s, c.a}, seed++), val = rnd({c.b, c.s, c.d}, seed++),
                 v = rnd({c.a}, seed++, -1.5f, 1.5f), dc = rnd({c.b, c.d}, seed++);
    const Tensor lens = c.with_lengths ? Tensor::from_vector({c.b}, c.lengths) : Tensor();
    const Tensor glens = c.with_lengths ? up(lens) : Tensor();
    const Tensor* lp = c.with_lengths ? &lens : nullptr;
    const Tensor* glp = c.with_lengths ? &glens : nullptr;
    const auto r = cpu_be().additive_attention_forward(q, k, val, v, lp);
    const auto gr = gpu_be().additive_attention_forward(up(q), up(k), up(val), up(v), glp);
    EXPECT_TRUE(close_to_cpu(gr.probs, r.probs, kAttention));
    EXPECT_TRUE(close_to_cpu(gr.context, r.context, kAttention));
    expect_zero_past_lengths(c, gr.probs, 1, "probs");
    expect_zero_rows_without_keys(c, gr.context, c.d, "context");

    const auto g = cpu_be().additive_attention_backward(dc, q, k, val, v, r.probs);
    const auto gg = gpu_be().additive_attention_backward(up(dc), up(q), up(k), up(val), up(v), gr.probs);
    EXPECT_TRUE(close_to_cpu(gg.dquery, g.dquery, kAttention));
    EXPECT_TRUE(close_to_cpu(gg.dkeys, g.dkeys, kAttention));
    EXPECT_TRUE(close_to_cpu(gg.dvalues, g.dvalues, kAttention));
    EXPECT_TRUE(close_to_cpu(gg.dv, g.dv, kAttention));
    expect_zero_past_lengths(c, gg.dkeys, c.a, "dkeys");
    expect_zero_past_lengths(c, gg.dvalues, c.d, "dvalues");
    expect_zero_rows_without_keys(c, gg.dquery, c.a, "dquery");
  }
}

// Probabilities that underflow to 0 inside the length: backward takes a row's keys up to its
// last nonzero probability (the CPU's rule), so a trailing one gets no gradient on either side.
TEST_F(CudaParityAdditiveAttention, UnderflowingProbabilities) {
  const int64_t B = 2, S = 4, A = 1, D = 3;
  const Tensor q = Tensor::zeros({B, A}, Device::cpu());
  const Tensor k = Tensor::from_vector({B, S, A}, {1, 1, 1, -1, 1, -1, 1, 1});  // scores +-76
  const Tensor v = Tensor::from_vector({A}, {100.0f});
  const Tensor val = rnd({B, S, D}, 600), dc = rnd({B, D}, 601);
  const auto r = cpu_be().additive_attention_forward(q, k, val, v, nullptr);
  const auto gr = gpu_be().additive_attention_forward(up(q), up(k), up(val), up(v), nullptr);
  EXPECT_TRUE(close_to_cpu(gr.probs, r.probs, kAttention));
  EXPECT_TRUE(close_to_cpu(gr.context, r.context, kAttention));
  const auto p = gr.probs.to_vector();
  EXPECT_EQ(p[3], 0.0f);
  EXPECT_EQ(p[5], 0.0f);
  const auto g = cpu_be().additive_attention_backward(dc, q, k, val, v, r.probs);
  const auto gg = gpu_be().additive_attention_backward(up(dc), up(q), up(k), up(val), up(v), gr.probs);
  EXPECT_TRUE(close_to_cpu(gg.dquery, g.dquery, kAttention));
  EXPECT_TRUE(close_to_cpu(gg.dkeys, g.dkeys, kAttention));
  EXPECT_TRUE(close_to_cpu(gg.dvalues, g.dvalues, kAttention));
  EXPECT_TRUE(close_to_cpu(gg.dv, g.dv, kAttention));
  const auto dval = gg.dvalues.to_vector();
  for (int64_t d = 0; d < D; ++d) EXPECT_EQ(dval[static_cast<size_t>(3 * D + d)], 0.0f);
}

TEST_F(CudaParityAdditiveAttention, BadArgumentsAsOnTheCpu) {
  const int64_t B = 3, S = 5, A = 4, D = 2;
  const Tensor q = rnd({B, A}, 700), k = rnd({B, S, A}, 701), val = rnd({B, S, D}, 702), v = rnd({A}, 703);
  const Tensor gq = up(q), gk = up(k), gval = up(val), gv = up(v);
  // Bad lengths: the CPU's message, word for word.
  for (float bad : {6.0f, -1.0f, 2.5f, std::numeric_limits<float>::quiet_NaN()}) {
    SCOPED_TRACE(bad);
    const Tensor lens = Tensor::from_vector({B}, {1, bad, 0}), glens = up(lens);
    const std::string cpu_msg = invalid_argument_of([&] { cpu_be().additive_attention_forward(q, k, val, v, &lens); });
    const std::string gpu_msg =
        invalid_argument_of([&] { gpu_be().additive_attention_forward(gq, gk, gval, gv, &glens); });
    EXPECT_NE(cpu_msg.find("lengths[1]"), std::string::npos) << cpu_msg;
    EXPECT_EQ(gpu_msg, cpu_msg);
  }
  // Wrong shapes: the same messages.
  auto forward_both = [&](const Tensor& q1, const Tensor& k1, const Tensor& val1, const Tensor& v1,
                          const Tensor* lens) {
    const std::string cpu_msg =
        invalid_argument_of([&] { cpu_be().additive_attention_forward(q1, k1, val1, v1, lens); });
    const Tensor glens = lens ? up(*lens) : Tensor();
    const std::string gpu_msg = invalid_argument_of(
        [&] { gpu_be().additive_attention_forward(up(q1), up(k1), up(val1), up(v1), lens ? &glens : nullptr); });
    EXPECT_NE(cpu_msg, "(no std::invalid_argument)");
    EXPECT_EQ(gpu_msg, cpu_msg);
  };
  forward_both(q, k, val, rnd({A + 1}, 704), nullptr);
  forward_both(q, k, rnd({B, S + 1, D}, 705), v, nullptr);
  forward_both(q, rnd({B + 1, S, A}, 706), val, v, nullptr);
  forward_both(rnd({B, A, 1}, 707), k, val, v, nullptr);
  const Tensor long_lens = Tensor::from_vector({B + 1}, {1, 1, 1, 1});
  forward_both(q, k, val, v, &long_lens);
  // Lengths not on the device, or nothing at all where a tensor belongs.
  const Tensor cpu_lens = Tensor::from_vector({B}, {1, 2, 3});
  EXPECT_THROW(gpu_be().additive_attention_forward(gq, gk, gval, gv, &cpu_lens), std::invalid_argument);
  EXPECT_THROW(gpu_be().additive_attention_forward(gq, gk, gval, Tensor(), nullptr), std::invalid_argument);
  EXPECT_THROW(gpu_be().additive_attention_forward(q, gk, gval, gv, nullptr), std::invalid_argument);

  const auto r = cpu_be().additive_attention_forward(q, k, val, v, nullptr);
  const auto gr = gpu_be().additive_attention_forward(gq, gk, gval, gv, nullptr);
  const Tensor dc = rnd({B, D}, 708);
  auto backward_both = [&](const Tensor& dc1, const Tensor& probs, const Tensor& gprobs) {
    const std::string cpu_msg =
        invalid_argument_of([&] { cpu_be().additive_attention_backward(dc1, q, k, val, v, probs); });
    const std::string gpu_msg =
        invalid_argument_of([&] { gpu_be().additive_attention_backward(up(dc1), gq, gk, gval, gv, gprobs); });
    EXPECT_NE(cpu_msg, "(no std::invalid_argument)");
    EXPECT_EQ(gpu_msg, cpu_msg);
  };
  const Tensor wide_probs = rnd({B, S + 1}, 709);
  backward_both(dc, wide_probs, up(wide_probs));
  backward_both(rnd({B, D + 1}, 710), r.probs, gr.probs);
  EXPECT_THROW(gpu_be().additive_attention_backward(dc, gq, gk, gval, gv, gr.probs), std::invalid_argument);
}

// ---------------------------------------------------------------- gradient checks through the GPU

// Clipped ReLU inputs 0.05 or more from both kinks (the finite-difference step is 0.01).
Tensor away_from_kinks(const Shape& shape, uint64_t seed, float ceiling) {
  std::vector<float> v = uniform(shape_numel(shape), seed, -1.0f, 2.0f * ceiling);
  for (float& e : v) {
    if (std::abs(e) < 0.05f) e = e < 0.0f ? -0.35f : 0.15f;
    if (std::abs(e - ceiling) < 0.05f) e = ceiling + (e < ceiling ? -0.1f : 0.1f);
  }
  Tensor t = Tensor::from_vector(shape, v);
  t.set_requires_grad(true);
  return t;
}

TEST_F(CudaParityPointwise, Gradchecks) {
  const float c = 0.6f;
  Tensor x = away_from_kinks({2, 3, 4, 4}, 800, c);
  EXPECT_GRADCHECK(gradcheck(on_gpu([c](const std::vector<Tensor>& t) { return ops::clipped_relu(t[0], c); }), {x}));
  EXPECT_GRADCHECK(
      gradgradcheck(on_gpu([c](const std::vector<Tensor>& t) { return ops::clipped_relu(t[0], c); }), {x}));
  // Blocked, with padded channels (C = 10 in blocks of 8).
  Tensor xb = away_from_kinks({2, 10, 3, 3}, 801, c);
  EXPECT_GRADCHECK(gradcheck(on_gpu([c](const std::vector<Tensor>& t) {
                               return ops::clipped_relu(ops::to_layout(t[0], Layout::blocked(8)), c);
                             }),
                             {xb}));

  Tensor z = rand_tensor({5, 4}, 802, true, -2.0f, 2.0f);
  EXPECT_GRADCHECK(gradcheck(on_gpu([](const std::vector<Tensor>& t) { return ops::log_softmax(t[0]); }), {z}));
  EXPECT_GRADCHECK(gradcheck(on_gpu([](const std::vector<Tensor>& t) { return ops::exp(t[0]); }), {z}));
  // The policy entropy as the A3C loss builds it: -sum p log p.
  EXPECT_GRADCHECK(gradcheck(on_gpu([](const std::vector<Tensor>& t) {
                               const Tensor logp = ops::log_softmax(t[0]);
                               return ops::scale(ops::sum(ops::mul(ops::exp(logp), logp)), -1.0f);
                             }),
                             {z}));
  Tensor wide = rand_tensor({3, 40}, 803, true, -2.0f, 2.0f);  // rows past a warp's lanes
  EXPECT_GRADCHECK(gradcheck(on_gpu([](const std::vector<Tensor>& t) { return ops::log_softmax(t[0]); }), {wide}));
}

TEST_F(CudaParityAdditiveAttention, Gradchecks) {
  const int64_t B = 3, S = 4, A = 5, D = 3;
  Tensor q = rand_tensor({B, A}, 900), k = rand_tensor({B, S, A}, 901), val = rand_tensor({B, S, D}, 902),
         v = rand_tensor({A}, 903, true, -1.5f, 1.5f);
  GradcheckOptions o;
  o.eps = 3e-3;
  for (const std::vector<float>& l : {std::vector<float>{4, 1, 3}, std::vector<float>{4, 0, 2}}) {
    SCOPED_TRACE(std::to_string(l[1]));
    const Tensor lens = Tensor::from_vector({B}, l);
    EXPECT_GRADCHECK(gradcheck(on_gpu([](const std::vector<Tensor>& t) {
                                 return ops::additive_attention(t[0], t[1], t[2], t[3], t[4]);
                               }),
                               {q, k, val, v, lens}, o));
  }
  EXPECT_GRADCHECK(gradcheck(on_gpu([](const std::vector<Tensor>& t) {
                               return ops::additive_attention(t[0], t[1], t[2], t[3], Tensor());
                             }),
                             {q, k, val, v}, o));
}

}  // namespace
}  // namespace ts::engine
