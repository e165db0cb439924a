// The attention family (engine/ops/attention.cpp): multi-head attention with padding and causal
// masks, and additive (Bahdanau) attention, against double-precision loops and finite differences.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "engine/autograd.h"
#include "engine/context.h"
#include "engine/gradcheck.h"
#include "engine/ops.h"
#include "on_every_device.h"
#include "test_util.h"

namespace ts::engine {
namespace {

using namespace testing;

class AttentionOps : public OnDevice {};

// out[b, i, h] = sum_j softmax_j(scale q.k + mask) v, written out with plain loops.
std::vector<float> naive_attention(const Tensor& q, const Tensor& k, const Tensor& v, const std::vector<int64_t>& lens,
                                   int64_t heads, float scale, bool causal) {
  const int64_t b = q.size(0), tq = q.size(1), hd = q.size(2), tk = k.size(1), dh = hd / heads;
  const auto qv = q.to_vector(), kv = k.to_vector(), vv = v.to_vector();
  std::vector<float> out(static_cast<size_t>(b * tq * hd), 0.0f);
  for (int64_t n = 0; n < b; ++n) {
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t i = 0; i < tq; ++i) {
        std::vector<double> s(static_cast<size_t>(tk), -std::numeric_limits<double>::infinity());
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < tk; ++j) {
          if (j >= lens[static_cast<size_t>(n)] || (causal && j > i)) continue;
          double dot = 0;
          for (int64_t d = 0; d < dh; ++d)
            dot += qv[(n * tq + i) * hd + h * dh + d] * kv[(n * tk + j) * hd + h * dh + d];
          s[static_cast<size_t>(j)] = dot * scale;
          mx = std::max(mx, s[static_cast<size_t>(j)]);
        }
        double sum = 0;
        for (auto& e : s) sum += (e = std::isinf(e) ? 0.0 : std::exp(e - mx));
        for (int64_t d = 0; d < dh; ++d) {
          double acc = 0;
          for (int64_t j = 0; j < tk; ++j) acc += s[static_cast<size_t>(j)] / sum * vv[(n * tk + j) * hd + h * dh + d];
          out[static_cast<size_t>((n * tq + i) * hd + h * dh + d)] = static_cast<float>(acc);
        }
      }
    }
  }
  return out;
}

TEST_P(AttentionOps, AttentionValues) {
  Tensor q = on(rand_tensor({2, 4, 6}, 10, false)), k = on(rand_tensor({2, 5, 6}, 11, false)),
         v = on(rand_tensor({2, 5, 6}, 12, false));
  Tensor lens = on(Tensor::from_vector({2}, {5, 3}));
  for (bool causal : {false, true}) {
    SCOPED_TRACE(causal);
    const auto y = ops::attention(q, k, v, lens, 3, 0.7f, causal).to_vector();
    const auto ref = naive_attention(q, k, v, {5, 3}, 3, 0.7f, causal);
    EXPECT_LT(max_rel_diff(y, ref), 1e-5);
  }
  const auto all = ops::attention(q, k, v, Tensor(), 2, 0.5f, false).to_vector();
  EXPECT_LT(max_rel_diff(all, naive_attention(q, k, v, {5, 5}, 2, 0.5f, false)), 1e-5);
  EXPECT_THROW(ops::attention(q, k, v, lens, 4, 1.0f, false), std::invalid_argument);  // 6 % 4 != 0
}

TEST_P(AttentionOps, AttentionGradient) {
  Tensor q = rand_tensor({2, 3, 4}, 13), k = rand_tensor({2, 4, 4}, 14), v = rand_tensor({2, 4, 4}, 15);
  Tensor lens = Tensor::from_vector({2}, {4, 2});
  for (bool causal : {false, true}) {
    SCOPED_TRACE(causal);
    EXPECT_GRADCHECK(gradcheck(
        [&](const std::vector<Tensor>& t) { return ops::attention(t[0], t[1], t[2], on(lens), 2, 0.8f, causal); },
        {q, k, v}));
  }
}

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

TEST_P(AttentionOps, MatchesTheFormulaWithPaddedKeysHidden) {
  const int64_t B = 3, S = 5, A = 7, D = 4;
  Tensor q = on(rand_tensor({B, A}, 1)), k = on(rand_tensor({B, S, A}, 2)), val = on(rand_tensor({B, S, D}, 3)),
         v = on(rand_tensor({A}, 4, true, -2.0f, 2.0f));
  const Tensor lens = on(Tensor::from_vector({B}, {5, 2, 0}));  // a row with no key gives zeros
  NoGradScope no_grad;
  Tensor probs;
  const auto ctx = ops::additive_attention(q, k, val, v, lens, &probs).to_vector();
  std::vector<double> ref_ctx, ref_probs;
  naive_additive_attention(q, k, val, v, {5, 2, 0}, ref_ctx, ref_probs);
  ASSERT_EQ(ctx.size(), ref_ctx.size());
  for (size_t i = 0; i < ctx.size(); ++i) EXPECT_NEAR(ctx[i], ref_ctx[i], 2e-6) << i;
  const auto p = probs.to_vector();
  for (size_t i = 0; i < p.size(); ++i) EXPECT_NEAR(p[i], ref_probs[i], 2e-6) << i;
  EXPECT_EQ(p[1 * S + 2], 0.0f);  // hidden keys weigh nothing

  // Hidden keys and values change nothing: overwrite row 1's keys and values past its length.
  auto kv = k.to_vector(), vv = val.to_vector();
  for (int64_t j = 2; j < S; ++j) {
    for (int64_t a = 0; a < A; ++a) kv[(1 * S + j) * A + a] = 9.0f;
    for (int64_t d = 0; d < D; ++d) vv[(1 * S + j) * D + d] = -9.0f;
  }
  const auto ctx2 = ops::additive_attention(q, on(Tensor::from_vector(k.shape(), kv)),
                                            on(Tensor::from_vector(val.shape(), vv)), v, lens)
                        .to_vector();
  for (size_t i = 0; i < ctx.size(); ++i) EXPECT_EQ(ctx[i], ctx2[i]) << i;

  // Without lengths every key counts.
  const auto all = ops::additive_attention(q, k, val, v, Tensor()).to_vector();
  naive_additive_attention(q, k, val, v, {S, S, S}, ref_ctx, ref_probs);
  for (size_t i = 0; i < all.size(); ++i) EXPECT_NEAR(all[i], ref_ctx[i], 2e-6) << i;

  EXPECT_THROW(ops::additive_attention(q, k, val, on(rand_tensor({A + 1}, 5)), lens), std::invalid_argument);
  EXPECT_THROW(ops::additive_attention(q, k, on(rand_tensor({B, S + 1, D}, 6)), v, lens), std::invalid_argument);
  EXPECT_THROW(ops::additive_attention(q, k, val, v, on(Tensor::from_vector({B}, {6, 1, 1}))), std::invalid_argument);
}

TEST_P(AttentionOps, GradientsMatchFiniteDifferences) {
  const int64_t B = 3, S = 4, A = 5, D = 3;
  Tensor q = rand_tensor({B, A}, 11), k = rand_tensor({B, S, A}, 12), val = rand_tensor({B, S, D}, 13),
         v = rand_tensor({A}, 14, true, -1.5f, 1.5f);
  const Tensor lens = Tensor::from_vector({B}, {4, 1, 3});
  GradcheckOptions o;
  o.eps = 3e-3;
  EXPECT_GRADCHECK(
      gradcheck([&](const std::vector<Tensor>& t) { return ops::additive_attention(t[0], t[1], t[2], t[3], on(lens)); },
                {q, k, val, v}, o));
  // Hidden keys and values get exactly zero gradient.
  const auto g = grad({ops::sum(ops::additive_attention(on(q), on(k), on(val), on(v), on(lens)))}, {k, val});
  const auto dk = g[0].to_vector(), dval = g[1].to_vector();
  for (int64_t j = 1; j < S; ++j) {
    for (int64_t a = 0; a < A; ++a) EXPECT_EQ(dk[(1 * S + j) * A + a], 0.0f);
    for (int64_t d = 0; d < D; ++d) EXPECT_EQ(dval[(1 * S + j) * D + d], 0.0f);
  }
  // The backward is first order only: a second backward through it fails loudly.
  const auto g2 = grad({ops::sum(ops::additive_attention(on(q), on(k), on(val), on(v), on(lens)))}, {q}, {}, true);
  EXPECT_THROW(grad({ops::sum(ops::mul(g2[0], g2[0]))}, {q}), std::logic_error);
}

// B S A over the kernel's threshold for threading, where dv is summed from per-thread partial
// sums (4 threads here, whatever the machine or OMP_NUM_THREADS); the sum over the batch must
// still be right.
TEST_P(AttentionOps, LargeBatchGradientOfV) {
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
      [&](const std::vector<Tensor>& t) { return ops::additive_attention(on(q), on(k), on(val), t[0], on(lens)); }, {v},
      o));
}

TEST_P(AttentionOps, AdditiveGradientsWithEmptyRowsAndWithoutLengths) {
  const int64_t B = 3, S = 4, A = 5, D = 3;
  Tensor q = rand_tensor({B, A}, 900), k = rand_tensor({B, S, A}, 901), val = rand_tensor({B, S, D}, 902),
         v = rand_tensor({A}, 903, true, -1.5f, 1.5f);
  GradcheckOptions o;
  o.eps = 3e-3;
  for (const std::vector<float>& l : {std::vector<float>{4, 1, 3}, std::vector<float>{4, 0, 2}}) {
    SCOPED_TRACE(std::to_string(l[1]));
    const Tensor lens = Tensor::from_vector({B}, l);
    EXPECT_GRADCHECK(
        gradcheck([](const std::vector<Tensor>& t) { return ops::additive_attention(t[0], t[1], t[2], t[3], t[4]); },
                  {q, k, val, v, lens}, o));
  }
  EXPECT_GRADCHECK(
      gradcheck([](const std::vector<Tensor>& t) { return ops::additive_attention(t[0], t[1], t[2], t[3], Tensor()); },
                {q, k, val, v}, o));
}

TS_ON_EVERY_DEVICE(AttentionOps);

}  // namespace
}  // namespace ts::engine
