// The sequence models' ops against naive loops and finite differences: layer norm, GELU,
// dropout, multi-head attention with padding and causal masks, label-smoothed cross-entropy;
// gradient clipping and the inverse-square-root schedule.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "engine/autograd.h"
#include "engine/context.h"
#include "engine/gradcheck.h"
#include "engine/ops.h"
#include "engine/optim/clip.h"
#include "engine/optim/lr_schedule.h"
#include "test_util.h"

namespace ts::engine {
namespace {

using namespace testing;

TEST(SequenceOps, LayerNorm) {
  Tensor x = rand_tensor({2, 3, 5}, 1, true, -2.0f, 2.0f);
  Tensor g = rand_tensor({5}, 2, true, 0.5f, 1.5f);
  Tensor b = rand_tensor({5}, 3);
  {
    NoGradScope no_grad;
    const auto y = ops::layer_norm(x, g, b, 1e-5f).to_vector();
    const auto xv = x.to_vector(), gv = g.to_vector(), bv = b.to_vector();
    for (int64_t r = 0; r < 6; ++r) {
      double m = 0, v = 0;
      for (int64_t k = 0; k < 5; ++k) m += xv[r * 5 + k] / 5.0;
      for (int64_t k = 0; k < 5; ++k) v += (xv[r * 5 + k] - m) * (xv[r * 5 + k] - m) / 5.0;
      for (int64_t k = 0; k < 5; ++k) {
        EXPECT_NEAR(y[r * 5 + k], (xv[r * 5 + k] - m) / std::sqrt(v + 1e-5) * gv[k] + bv[k], 1e-5);
      }
    }
  }
  EXPECT_GRADCHECK(gradcheck([](const std::vector<Tensor>& t) { return ops::layer_norm(t[0], t[1], t[2]); }, {x, g, b}));
  EXPECT_THROW(ops::layer_norm(x, rand_tensor({4}, 4), b), std::invalid_argument);
}

TEST(SequenceOps, Gelu) {
  Tensor x = Tensor::from_vector({4}, {-1.0f, 0.0f, 1.0f, 2.0f});
  {
    NoGradScope no_grad;
    const auto y = ops::gelu(x).to_vector();
    for (size_t i = 0; i < 4; ++i) {
      const double v = x.to_vector()[i];
      EXPECT_NEAR(y[i], 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))), 1e-6);
    }
    EXPECT_NEAR(y[2], 0.841345, 1e-5);
  }
  Tensor xr = rand_tensor({3, 7}, 5, true, -3.0f, 3.0f);
  EXPECT_GRADCHECK(gradcheck([](const std::vector<Tensor>& t) { return ops::gelu(t[0]); }, {xr}));
}

TEST(SequenceOps, Dropout) {
  Tensor x = Tensor::full({100, 100}, 1.0f, Device::cpu());
  NoGradScope no_grad;
  const auto y = ops::dropout(x, 0.25f, 42).to_vector();
  int64_t kept = 0;
  for (float v : y) {
    ASSERT_TRUE(v == 0.0f || std::abs(v - 1.0f / 0.75f) < 1e-6) << v;
    kept += v != 0.0f;
  }
  EXPECT_NEAR(static_cast<double>(kept) / 10000.0, 0.75, 0.02);
  EXPECT_EQ(ops::dropout(x, 0.25f, 42).to_vector(), y);    // the same seed draws the same mask
  EXPECT_NE(ops::dropout(x, 0.25f, 43).to_vector(), y);
  EXPECT_TRUE(ops::dropout(x, 0.25f, 42, /*training=*/false).same(x));
  EXPECT_THROW(ops::dropout(x, 1.0f, 1), std::invalid_argument);
}

TEST(SequenceOps, DropoutGradient) {
  Tensor x = rand_tensor({4, 6}, 6);
  EXPECT_GRADCHECK(gradcheck([](const std::vector<Tensor>& t) { return ops::dropout(t[0], 0.5f, 7); }, {x}));
}

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
          for (int64_t d = 0; d < dh; ++d) dot += qv[(n * tq + i) * hd + h * dh + d] * kv[(n * tk + j) * hd + h * dh + d];
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

TEST(SequenceOps, AttentionValues) {
  Tensor q = rand_tensor({2, 4, 6}, 10, false), k = rand_tensor({2, 5, 6}, 11, false), v = rand_tensor({2, 5, 6}, 12, false);
  Tensor lens = Tensor::from_vector({2}, {5, 3});
  for (bool causal : {false, true}) {
    SCOPED_TRACE(causal);
    const auto y = ops::attention(q, k, v, lens, 3, 0.7f, causal).to_vector();
    const auto ref = naive_attention(q, k, v, {5, 3}, 3, 0.7f, causal);
    EXPECT_LT(max_rel_diff(y, ref), 1e-5);
  }
  const auto all = ops::attention(q, k, v, Tensor(), 2, 0.5f, false).to_vector();
  EXPECT_LT(max_rel_diff(all, naive_attention(q, k, v, {5, 5}, 2, 0.5f, false)), 1e-5);
  EXPECT_THROW(ops::attention(q, k, v, lens, 4, 1.0f, false), std::invalid_argument);   // 6 % 4 != 0
}

TEST(SequenceOps, AttentionGradient) {
  Tensor q = rand_tensor({2, 3, 4}, 13), k = rand_tensor({2, 4, 4}, 14), v = rand_tensor({2, 4, 4}, 15);
  Tensor lens = Tensor::from_vector({2}, {4, 2});
  for (bool causal : {false, true}) {
    SCOPED_TRACE(causal);
    EXPECT_GRADCHECK(gradcheck(
        [&](const std::vector<Tensor>& t) { return ops::attention(t[0], t[1], t[2], lens, 2, 0.8f, causal); }, {q, k, v}));
  }
}

TEST(SequenceOps, LabelSmoothedCrossEntropy) {
  Tensor logits = rand_tensor({5, 7}, 20, true, -2.0f, 2.0f);
  Tensor labels = Tensor::from_vector({5}, {3, 0, 6, 0, 2});   // rows labelled 0 (padding) are ignored
  {
    NoGradScope no_grad;
    const float eps = 0.1f;
    const float loss = ops::label_smoothed_cross_entropy(logits, labels, eps, 0, 3.0f).item();
    const auto x = logits.to_vector();
    double expect = 0;
    for (int64_t i : {0, 2, 4}) {
      const int64_t y = static_cast<int64_t>(labels.to_vector()[static_cast<size_t>(i)]);
      double mx = -1e30, s = 0;
      for (int64_t c = 0; c < 7; ++c) mx = std::max<double>(mx, x[i * 7 + c]);
      for (int64_t c = 0; c < 7; ++c) s += std::exp(x[i * 7 + c] - mx);
      const double lse = mx + std::log(s);
      for (int64_t c = 0; c < 7; ++c) expect -= ((c == y ? 1 - eps : 0.0) + eps / 7) * (x[i * 7 + c] - lse);
    }
    EXPECT_NEAR(loss, expect / 3.0, 1e-5);
    // eps 0 and nothing ignored: the plain softmax cross-entropy.
    Tensor all = Tensor::from_vector({5}, {3, 1, 6, 4, 2});
    EXPECT_NEAR(ops::label_smoothed_cross_entropy(logits, all, 0.0f, -1, 5.0f).item(),
                ops::softmax_cross_entropy(logits, all).item(), 1e-5);
  }
  EXPECT_GRADCHECK(gradcheck(
      [&](const std::vector<Tensor>& t) { return ops::label_smoothed_cross_entropy(t[0], labels, 0.1f, 0, 3.0f); },
      {logits}));
  EXPECT_THROW(ops::label_smoothed_cross_entropy(logits, Tensor::from_vector({5}, {1, 2, 3, 9, 1}), 0.1f, 0, 1.0f),
               std::invalid_argument);
}

TEST(SequenceOps, ClipGradNorm) {
  Tensor a = Tensor::from_vector({2}, {0, 0}), b = Tensor::from_vector({1}, {0});
  a.set_requires_grad(true);
  b.set_requires_grad(true);
  // grads (3, 0) and (4): norm 5.
  ops::sum(ops::add(ops::mul(a, Tensor::from_vector({2}, {3, 0})), ops::scale(a, 0.0f))).backward();
  ops::sum(ops::scale(b, 4.0f)).backward();
  EXPECT_NEAR(optim::clip_grad_norm({a, b}, 10.0), 5.0, 1e-6);   // under the limit: untouched
  EXPECT_NEAR(b.grad().item(), 4.0f, 1e-6);
  EXPECT_NEAR(optim::clip_grad_norm({a, b}, 1.0), 5.0, 1e-6);
  EXPECT_NEAR(a.grad().to_vector()[0], 0.6f, 1e-5);
  EXPECT_NEAR(b.grad().item(), 0.8f, 1e-5);
}

TEST(SequenceOps, InverseSqrtSchedule) {
  optim::LrSchedule s;
  s.kind = optim::LrSchedule::Kind::inverse_sqrt;
  s.base_lr = std::pow(512.0, -0.5);
  s.warmup_steps = 4000;
  EXPECT_NEAR(s.at(0), s.base_lr * std::pow(4000.0, -1.5), 1e-12);
  EXPECT_NEAR(s.at(3999), s.base_lr / std::sqrt(4000.0), 1e-12);   // the peak
  EXPECT_NEAR(s.at(15999), s.base_lr / std::sqrt(16000.0), 1e-12);
  EXPECT_GT(s.at(3999), s.at(3998));
  EXPECT_GT(s.at(3999), s.at(4000));
}

}  // namespace
}  // namespace ts::engine
