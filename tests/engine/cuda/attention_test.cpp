// The attention family on the GPU: CPU-versus-GPU parity of the CUDA backend's methods (the same inputs
// through both backends, compared element by element with cuda_test_util.h's tolerances) and
// the GPU's own argument checks. The family's test bodies run on the GPU too: ../attention_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "../test_util.h"
#include "cuda_test_util.h"
#include "engine/ops.h"

namespace ts::engine {
namespace {

using namespace testing;

using CudaAttention = CudaTest;

TEST_F(CudaAttention, Attention) {
  struct Case {
    int64_t b, tq, tk, heads, dh;
    bool lengths, causal;
  };
  const Case cases[] = {{2, 5, 7, 2, 4, true, false},
                        {3, 6, 6, 4, 8, false, true},
                        {2, 4, 4, 1, 3, true, true},
                        {4, 20, 25, 8, 16, true, false}};
  uint64_t seed = 20;
  for (const auto& c : cases) {
    SCOPED_TRACE("b " + std::to_string(c.b) + " tq " + std::to_string(c.tq) + " tk " + std::to_string(c.tk) +
                 " heads " + std::to_string(c.heads) + (c.causal ? " causal" : ""));
    const int64_t hd = c.heads * c.dh;
    const Tensor q = rnd({c.b, c.tq, hd}, seed++), k = rnd({c.b, c.tk, hd}, seed++), v = rnd({c.b, c.tk, hd}, seed++);
    std::vector<float> len(static_cast<size_t>(c.b));
    for (int64_t i = 0; i < c.b; ++i) len[static_cast<size_t>(i)] = static_cast<float>(i == 1 ? 0 : c.tk - i);
    const Tensor lengths = Tensor::from_vector({c.b}, len);
    const Tensor glen = up(lengths);
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.dh));
    const auto r = cpu_be().attention_forward(q, k, v, c.lengths ? &lengths : nullptr, c.heads, scale, c.causal);
    const auto gr =
        gpu_be().attention_forward(up(q), up(k), up(v), c.lengths ? &glen : nullptr, c.heads, scale, c.causal);
    EXPECT_TRUE(close_to_cpu(gr.probs, r.probs, kReduce));
    EXPECT_TRUE(close_to_cpu(gr.out, r.out, kLibrary));
    const Tensor dout = rnd(q.shape(), seed++);
    const auto d = cpu_be().attention_backward(dout, q, k, v, r.probs, c.heads, scale);
    const auto gd = gpu_be().attention_backward(up(dout), up(q), up(k), up(v), gr.probs, c.heads, scale);
    EXPECT_TRUE(close_to_cpu(gd.dq, d.dq, kLibrary));
    EXPECT_TRUE(close_to_cpu(gd.dk, d.dk, kLibrary));
    EXPECT_TRUE(close_to_cpu(gd.dv, d.dv, kLibrary));
  }
}

constexpr double kAttention = 2e-5;

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

TEST_F(CudaAttention, ForwardBackward) {
  const std::vector<AttentionCase> cases = {
      {1, 1, 1, 1, false, {}},
      {3, 5, 7, 4, true, {5, 2, 0}},
      {2, 6, 33, 17, true, {6, 1}},  // more units than a warp's lanes
      {4, 9, 64, 40, false, {}},
      {16, 37, 96, 130, true, mixed_lengths(16, 37)},  // keys and width past a block's threads
      {2, 3, 4, 5, true, {0, 0}},                      // no row has a key
      {2, 0, 5, 3, false, {}},                         // no keys at all
      {2, 0, 5, 3, true, {0, 0}},
      {0, 4, 3, 2, false, {}},        // no rows
      {3, 4, 0, 2, true, {4, 2, 3}},  // no attention units: uniform weights
      {3, 4, 5, 0, true, {4, 0, 2}},  // empty memory width
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
TEST_F(CudaAttention, UnderflowingProbabilities) {
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

TEST_F(CudaAttention, BadArgumentsAsOnTheCpu) {
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

}  // namespace
}  // namespace ts::engine
