// The rnn family on the GPU: CPU-versus-GPU parity of the CUDA backend's methods (the same inputs
// through both backends, compared element by element with cuda_test_util.h's tolerances) and
// the GPU's own argument checks. The family's test bodies run on the GPU too: ../rnn_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "../test_util.h"
#include "cuda_test_util.h"
#include "engine/ops.h"

namespace ts::engine {
namespace {

using namespace testing;

using CudaRnn = CudaTest;

using Cell = Backend::RnnCell;

constexpr double kTol = 1e-4;

struct Case {
  bool lstm, reverse, state, bias;
  std::vector<float> lengths;  // empty: every sequence runs T steps
  bool lengths_on_gpu;
};

Backend::RnnArgs make_args(const Case& c, int64_t T, int64_t B, int64_t I, int64_t H, uint64_t seed) {
  const int64_t G = c.lstm ? 4 : 3;
  Backend::RnnArgs a;
  a.cell = c.lstm ? Cell::lstm : Cell::gru;
  a.reverse = c.reverse;
  a.x = rand_tensor({T, B, I}, seed + 1, false);
  // Weights within 2 / sqrt(H) (PyTorch's default init is 1 / sqrt(H)): at +-0.6 with H = 160 the
  // GRU's backward through 20 steps was so ill-conditioned that on the CPU alone a change of one
  // part in 10^7 in w_hh moved dx by 1e-3, which is what the GPU (other summation orders) then
  // differed by (H100, 2026-11-28). Saturated and wide weights are RnnOps' WideAndSaturated case.
  const float bound = std::min(0.6f, 2.0f / std::sqrt(static_cast<float>(H)));
  a.w_ih = rand_tensor({G * H, I}, seed + 2, false, -bound, bound);
  a.w_hh = rand_tensor({G * H, H}, seed + 3, false, -bound, bound);
  if (c.bias) {
    a.b_ih = rand_tensor({G * H}, seed + 4, false);
    a.b_hh = rand_tensor({G * H}, seed + 5, false);
  }
  if (c.state) {
    a.h0 = rand_tensor({B, H}, seed + 6, false);
    if (c.lstm) a.c0 = rand_tensor({B, H}, seed + 7, false);
  }
  if (!c.lengths.empty()) a.lengths = Tensor::from_vector({B}, c.lengths);
  return a;
}

Backend::RnnArgs on_device(const Backend::RnnArgs& a, bool lengths_too) {
  Backend::RnnArgs g = a;
  for (Tensor* t : {&g.x, &g.h0, &g.c0, &g.w_ih, &g.w_hh, &g.b_ih, &g.b_hh}) *t = up(*t);
  if (lengths_too) g.lengths = up(a.lengths);
  return g;
}

void expect_parity(const Case& c, int64_t T, int64_t B, int64_t I, int64_t H, uint64_t seed) {
  SCOPED_TRACE(std::string(c.lstm ? "lstm" : "gru") + (c.reverse ? " reverse" : "") + (c.state ? " state" : "") +
               (c.bias ? " bias" : "") + (c.lengths.empty() ? " dense" : " lengths") +
               (c.lengths_on_gpu ? " (on the gpu)" : "") + " T=" + std::to_string(T) + " B=" + std::to_string(B) +
               " I=" + std::to_string(I) + " H=" + std::to_string(H));
  const Backend::RnnArgs a = make_args(c, T, B, I, H, seed);
  const Backend::RnnArgs ga = on_device(a, c.lengths_on_gpu);
  const auto r = cpu_be().rnn_forward(a, true);
  const auto gr = gpu_be().rnn_forward(ga, true);
  EXPECT_TRUE(close_to_cpu(gr.y, r.y, kTol));
  EXPECT_TRUE(close_to_cpu(gr.h_n, r.h_n, kTol));
  if (c.lstm) {
    EXPECT_TRUE(close_to_cpu(gr.c_n, r.c_n, kTol));
  }
  EXPECT_EQ(gr.c_n.defined(), c.lstm);
  // The same packed rows, the same gates (when no step runs, both hold one unwritten float).
  int64_t steps = T * B;
  if (!c.lengths.empty()) {
    steps = 0;
    for (float l : c.lengths) steps += static_cast<int64_t>(l);
  }
  if (steps > 0) {
    EXPECT_TRUE(close_to_cpu(gr.reserve, r.reserve, kTol));
  }

  // Inference keeps no reserve.
  EXPECT_FALSE(gpu_be().rnn_forward(ga, false).reserve.defined());

  const Tensor dy = rand_tensor({T, B, H}, seed + 20, false);
  const Tensor dh_n = rand_tensor({B, H}, seed + 21, false);
  const Tensor dc_n = c.lstm ? rand_tensor({B, H}, seed + 22, false) : Tensor();
  const Backend::RnnNeed need;
  const auto d = cpu_be().rnn_backward(a, r.y, r.reserve, dy, dh_n, dc_n, need);
  const auto gd = gpu_be().rnn_backward(ga, gr.y, gr.reserve, up(dy), up(dh_n), up(dc_n), need);
  EXPECT_TRUE(close_to_cpu(gd.dx, d.dx, kTol));
  EXPECT_TRUE(close_to_cpu(gd.dw_ih, d.dw_ih, kTol));
  EXPECT_TRUE(close_to_cpu(gd.dw_hh, d.dw_hh, kTol));
  EXPECT_TRUE(close_to_cpu(gd.dh0, d.dh0, kTol));
  if (c.lstm) {
    EXPECT_TRUE(close_to_cpu(gd.dc0, d.dc0, kTol));
  }
  if (c.bias) {
    EXPECT_TRUE(close_to_cpu(gd.db_ih, d.db_ih, kTol));
    EXPECT_TRUE(close_to_cpu(gd.db_hh, d.db_hh, kTol));
  }

  // Only dy given (no gradient reaches the final states), and only the weights wanted.
  Backend::RnnNeed weights_only;
  weights_only.dx = weights_only.dh0 = weights_only.dc0 = false;
  const auto w = cpu_be().rnn_backward(a, r.y, r.reserve, dy, Tensor(), Tensor(), weights_only);
  const auto gw = gpu_be().rnn_backward(ga, gr.y, gr.reserve, up(dy), Tensor(), Tensor(), weights_only);
  EXPECT_FALSE(gw.dx.defined());
  EXPECT_TRUE(close_to_cpu(gw.dw_ih, w.dw_ih, kTol));
  EXPECT_TRUE(close_to_cpu(gw.dw_hh, w.dw_hh, kTol));
}

TEST_F(CudaRnn, EveryOptionMatchesTheCpu) {
  const std::vector<float> lengths{5, 2, 0, 5, 3};
  uint64_t seed = 100;
  for (bool lstm : {true, false}) {
    for (bool reverse : {false, true}) {
      for (bool state : {false, true}) {
        expect_parity({lstm, reverse, state, state, {}, false}, 5, 5, 3, 7, seed += 50);
        expect_parity({lstm, reverse, state, !state, lengths, false}, 5, 5, 3, 7, seed += 50);
        expect_parity({lstm, reverse, state, true, lengths, true}, 5, 5, 3, 7, seed += 50);
      }
    }
  }
}

TEST_F(CudaRnn, LargerLayersMatchTheCpu) {
  // More threads than one block per step, and a batch whose lengths are all different.
  std::vector<float> lengths;
  for (int b = 0; b < 33; ++b) lengths.push_back(static_cast<float>(1 + (b * 7) % 20));
  expect_parity({true, false, true, true, lengths, true}, 20, 33, 40, 96, 7);
  expect_parity({false, true, true, true, lengths, true}, 20, 33, 40, 160, 8);
  expect_parity({true, true, false, true, {}, false}, 12, 64, 64, 128, 9);
}

TEST_F(CudaRnn, AllSequencesEmpty) {
  // No step runs: y is zeros, the final states are the initial ones, the weight gradients zero.
  expect_parity({true, false, true, true, {0, 0, 0}, true}, 4, 3, 2, 5, 11);
  expect_parity({false, true, true, true, {0, 0, 0}, false}, 4, 3, 2, 5, 12);
}

TEST_F(CudaRnn, BadArguments) {
  const Case c{true, false, true, true, {}, false};
  Backend::RnnArgs a = on_device(make_args(c, 3, 2, 2, 3, 300), false);
  Backend::RnnArgs bad = a;
  bad.lengths = up(Tensor::from_vector({2}, {4, 1}));  // longer than T = 3
  EXPECT_THROW(gpu_be().rnn_forward(bad, true), std::invalid_argument);
  bad = a;
  bad.lengths = Tensor::from_vector({2}, {1.5f, 1});  // on the CPU, not an integer
  EXPECT_THROW(gpu_be().rnn_forward(bad, true), std::invalid_argument);
  bad = a;
  bad.x = make_args(c, 3, 2, 2, 3, 300).x;  // on the CPU
  EXPECT_THROW(gpu_be().rnn_forward(bad, true), std::invalid_argument);
  bad = a;
  bad.w_hh = up(rand_tensor({12, 4}, 301, false));  // H from w_hh disagrees with w_ih and h0
  EXPECT_THROW(gpu_be().rnn_forward(bad, true), std::invalid_argument);
  const auto r = gpu_be().rnn_forward(a, false);
  EXPECT_THROW(gpu_be().rnn_backward(a, r.y, r.reserve, r.y, Tensor(), Tensor(), {}), std::invalid_argument);
}

}  // namespace
}  // namespace ts::engine
