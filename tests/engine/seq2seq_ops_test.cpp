// seq2seq's ops: additive (Bahdanau) attention against a double-precision loop, its masking and
// finite-difference gradients; split's parts, gradients (parts without one count as zeros) and
// second order; a decoder-like chain of length-1 LSTM steps through h0/c0.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "engine/autograd.h"
#include "engine/context.h"
#include "engine/gradcheck.h"
#include "engine/ops.h"
#include "test_util.h"

namespace ts::engine {
namespace {

using namespace testing;

// context [B, D] and probs [B, S] of additive attention, in double.
void naive_additive_attention(const Tensor& q, const Tensor& k, const Tensor& val, const Tensor& v,
                              const std::vector<int64_t>& lens, std::vector<double>& context,
                              std::vector<double>& probs) {
  const int64_t B = q.size(0), A = q.size(1), S = k.size(1), D = val.size(2);
  const auto qv = q.to_vector(), kv = k.to_vector(), vals = val.to_vector(), vv = v.to_vector();
  context.assign(static_cast<size_t>(B * D), 0.0);
  probs.assign(static_cast<size_t>(B * S), 0.0);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t n = lens[static_cast<size_t>(b)];
    std::vector<double> e(static_cast<size_t>(n));
    double mx = -1e300, sum = 0;
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t a = 0; a < A; ++a) {
        s += vv[a] * std::tanh(static_cast<double>(qv[b * A + a]) + kv[(b * S + j) * A + a]);
      }
      e[static_cast<size_t>(j)] = s;
      mx = std::max(mx, s);
    }
    for (int64_t j = 0; j < n; ++j) sum += std::exp(e[static_cast<size_t>(j)] - mx);
    for (int64_t j = 0; j < n; ++j) {
      const double p = std::exp(e[static_cast<size_t>(j)] - mx) / sum;
      probs[static_cast<size_t>(b * S + j)] = p;
      for (int64_t d = 0; d < D; ++d) context[static_cast<size_t>(b * D + d)] += p * vals[(b * S + j) * D + d];
    }
  }
}

TEST(AdditiveAttention, MatchesTheFormulaWithPaddedKeysHidden) {
  const int64_t B = 3, S = 5, A = 7, D = 4;
  Tensor q = rand_tensor({B, A}, 1), k = rand_tensor({B, S, A}, 2), val = rand_tensor({B, S, D}, 3),
         v = rand_tensor({A}, 4, true, -2.0f, 2.0f);
  const Tensor lens = Tensor::from_vector({B}, {5, 2, 0});   // a row with no key gives zeros
  NoGradScope no_grad;
  Tensor probs;
  const auto ctx = ops::additive_attention(q, k, val, v, lens, &probs).to_vector();
  std::vector<double> ref_ctx, ref_probs;
  naive_additive_attention(q, k, val, v, {5, 2, 0}, ref_ctx, ref_probs);
  ASSERT_EQ(ctx.size(), ref_ctx.size());
  for (size_t i = 0; i < ctx.size(); ++i) EXPECT_NEAR(ctx[i], ref_ctx[i], 2e-6) << i;
  const auto p = probs.to_vector();
  for (size_t i = 0; i < p.size(); ++i) EXPECT_NEAR(p[i], ref_probs[i], 2e-6) << i;
  EXPECT_EQ(p[1 * S + 2], 0.0f);   // hidden keys weigh nothing

  // Hidden keys and values change nothing: overwrite row 1's keys and values past its length.
  auto kv = k.to_vector(), vv = val.to_vector();
  for (int64_t j = 2; j < S; ++j) {
    for (int64_t a = 0; a < A; ++a) kv[(1 * S + j) * A + a] = 9.0f;
    for (int64_t d = 0; d < D; ++d) vv[(1 * S + j) * D + d] = -9.0f;
  }
  const auto ctx2 = ops::additive_attention(q, Tensor::from_vector(k.shape(), kv), Tensor::from_vector(val.shape(), vv),
                                            v, lens)
                        .to_vector();
  for (size_t i = 0; i < ctx.size(); ++i) EXPECT_EQ(ctx[i], ctx2[i]) << i;

  // Without lengths every key counts.
  const auto all = ops::additive_attention(q, k, val, v, Tensor()).to_vector();
  naive_additive_attention(q, k, val, v, {S, S, S}, ref_ctx, ref_probs);
  for (size_t i = 0; i < all.size(); ++i) EXPECT_NEAR(all[i], ref_ctx[i], 2e-6) << i;

  EXPECT_THROW(ops::additive_attention(q, k, val, rand_tensor({A + 1}, 5), lens), std::invalid_argument);
  EXPECT_THROW(ops::additive_attention(q, k, rand_tensor({B, S + 1, D}, 6), v, lens), std::invalid_argument);
  EXPECT_THROW(ops::additive_attention(q, k, val, v, Tensor::from_vector({B}, {6, 1, 1})), std::invalid_argument);
}

TEST(AdditiveAttention, GradientsMatchFiniteDifferences) {
  const int64_t B = 3, S = 4, A = 5, D = 3;
  Tensor q = rand_tensor({B, A}, 11), k = rand_tensor({B, S, A}, 12), val = rand_tensor({B, S, D}, 13),
         v = rand_tensor({A}, 14, true, -1.5f, 1.5f);
  const Tensor lens = Tensor::from_vector({B}, {4, 1, 3});
  GradcheckOptions o;
  o.eps = 3e-3;
  EXPECT_GRADCHECK(gradcheck(
      [&](const std::vector<Tensor>& t) { return ops::additive_attention(t[0], t[1], t[2], t[3], lens); },
      {q, k, val, v}, o));
  // Hidden keys and values get exactly zero gradient.
  const auto g = grad({ops::sum(ops::additive_attention(q, k, val, v, lens))}, {k, val});
  const auto dk = g[0].to_vector(), dval = g[1].to_vector();
  for (int64_t j = 1; j < S; ++j) {
    for (int64_t a = 0; a < A; ++a) EXPECT_EQ(dk[(1 * S + j) * A + a], 0.0f);
    for (int64_t d = 0; d < D; ++d) EXPECT_EQ(dval[(1 * S + j) * D + d], 0.0f);
  }
  // The backward is first order only: a second backward through it fails loudly.
  const auto g2 = grad({ops::sum(ops::additive_attention(q, k, val, v, lens))}, {q}, {}, true);
  EXPECT_THROW(grad({ops::sum(ops::mul(g2[0], g2[0]))}, {q}), std::logic_error);
}

// B S A over the kernel's threshold for threading, where dv is summed from per-thread partial
// sums (4 threads here, whatever the machine or OMP_NUM_THREADS); the sum over the batch must
// still be right.
TEST(AdditiveAttention, LargeBatchGradientOfV) {
  OpThreadsScope threads(4);
  const int64_t B = 64, S = 12, A = 32, D = 8;
  Tensor q = rand_tensor({B, A}, 21, false), k = rand_tensor({B, S, A}, 22, false),
         val = rand_tensor({B, S, D}, 23, false), v = rand_tensor({A}, 24);
  std::vector<float> lv(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) lv[static_cast<size_t>(b)] = static_cast<float>(1 + b % S);
  const Tensor lens = Tensor::from_vector({B}, lv);
  GradcheckOptions o;
  o.eps = 3e-3;
  EXPECT_GRADCHECK(gradcheck(
      [&](const std::vector<Tensor>& t) { return ops::additive_attention(q, k, val, t[0], lens); }, {v}, o));
}

TEST(Split, PartsAndGradients) {
  Tensor x = rand_tensor({5, 3, 2}, 31);
  {
    NoGradScope no_grad;
    const auto parts = ops::split(x, 0, {2, 1, 2});
    ASSERT_EQ(parts.size(), 3u);
    const auto xv = x.to_vector();
    EXPECT_EQ(parts[1].shape(), (Shape{1, 3, 2}));
    const auto p2 = parts[2].to_vector();
    for (size_t i = 0; i < p2.size(); ++i) EXPECT_EQ(p2[i], xv[18 + i]);
    const auto cols = ops::split(x, 1, {1, 2});
    EXPECT_EQ(cols[1].shape(), (Shape{5, 2, 2}));
    EXPECT_EQ(cols[1].to_vector()[0], xv[2]);
  }
  // Every part used, some twice, one not at all (its gradient counts as zeros).
  auto f = [](const std::vector<Tensor>& t) {
    const auto p = ops::split(t[0], 0, {1, 2, 1, 1});
    return ops::concat({ops::mul(p[0], p[0]), ops::scale(p[1], 3.0f), p[3], p[0]}, 0);
  };
  EXPECT_GRADCHECK(gradcheck(f, {x}));
  EXPECT_GRADCHECK(gradgradcheck(f, {x}));
  const auto g = grad({ops::sum(ops::split(x, 0, {1, 2, 1, 1})[1])}, {x})[0].to_vector();
  for (size_t i = 0; i < g.size(); ++i) EXPECT_EQ(g[i], (i >= 6 && i < 18) ? 1.0f : 0.0f) << i;
  EXPECT_THROW(ops::split(x, 0, {2, 2}), std::invalid_argument);
  EXPECT_THROW(ops::split(x, 3, {5}), std::invalid_argument);
}

// seq2seq's decoder runs ops::lstm one step at a time, carrying h and c from step to step: the
// gradient must reach the first step's h0/c0 and the shared weights through every step.
TEST(Seq2SeqOps, LstmStepsChainThroughInitialStates) {
  const int64_t B = 2, I = 3, H = 4, steps = 3;
  Tensor x = rand_tensor({steps, B, I}, 41), h0 = rand_tensor({B, H}, 42), c0 = rand_tensor({B, H}, 43),
         w_ih = rand_tensor({4 * H, I}, 44, true, -0.5f, 0.5f), w_hh = rand_tensor({4 * H, H}, 45, true, -0.5f, 0.5f),
         b = rand_tensor({4 * H}, 46);
  auto stepwise = [&](const std::vector<Tensor>& t) {
    const auto xs = ops::split(t[0], 0, std::vector<int64_t>(steps, 1));
    Tensor h = t[1], c = t[2];
    std::vector<Tensor> ys;
    for (int64_t s = 0; s < steps; ++s) {
      const ops::RnnOutput r = ops::lstm(xs[static_cast<size_t>(s)], h, c, t[3], t[4], t[5], Tensor(), Tensor());
      h = r.h_n;
      c = r.c_n;
      ys.push_back(r.y);
    }
    ys.push_back(ops::reshape(c, {1, B, H}));
    return ops::concat(ys, 0);
  };
  EXPECT_GRADCHECK(gradcheck(stepwise, {x, h0, c0, w_ih, w_hh, b}));
  // And it is the same function as one call over the whole sequence.
  NoGradScope no_grad;
  const auto whole = ops::lstm(x, h0, c0, w_ih, w_hh, b, Tensor(), Tensor());
  const auto y = stepwise({x, h0, c0, w_ih, w_hh, b}).to_vector(), yw = whole.y.to_vector(), cw = whole.c_n.to_vector();
  for (size_t i = 0; i < yw.size(); ++i) EXPECT_NEAR(y[i], yw[i], 1e-6);
  for (size_t i = 0; i < cw.size(); ++i) EXPECT_NEAR(y[yw.size() + i], cw[i], 1e-6);
}

}  // namespace
}  // namespace ts::engine
