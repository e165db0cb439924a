// CPU-versus-GPU parity of the sequence models' Backend methods and the CTC loss, and their
// gradient checks through the GPU. Tolerances, max |gpu - cpu| / (1 + |cpu|), TF32 off:
//   kExact     1e-6  the dropout mask (the same hash, bit for bit), the CTC backward's scaling
//   kReduce    1e-5  layer norm, label-smoothed cross-entropy, the sum of squares, the
//                    attention softmax: double sums in another order, expf/erff against libm
//   kLibrary   1e-4  attention (cuBLAS GEMMs against oneDNN's sgemm)
//   kCtc       1e-5  CTC loss and gradient (double log-space recursions, other libm)
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "../test_util.h"
#include "cuda_test_util.h"
#include "engine/autograd.h"
#include "engine/gradcheck.h"
#include "engine/ops.h"

namespace ts::engine {
namespace {

using namespace testing;
using Reduction = Backend::CtcReduction;

constexpr double kExact = 1e-6;
constexpr double kReduce = 1e-5;
constexpr double kLibrary = 1e-4;
constexpr double kCtc = 1e-5;

using CudaParitySeq = CudaTest;

Tensor rnd(const Shape& s, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  return rand_tensor(s, seed, false, lo, hi);
}
Tensor up(const Tensor& t) { return copy_to(t, gpu()); }

TEST_F(CudaParitySeq, LayerNorm) {
  for (const Shape& s : {Shape{7, 33}, Shape{64, 512}, Shape{1, 1}}) {
    SCOPED_TRACE(shape_str(s));
    const Tensor x = rnd(s, 1, -2.0f, 3.0f), g = rnd({s[1]}, 2, 0.5f, 1.5f), b = rnd({s[1]}, 3);
    const auto r = cpu_be().layer_norm_forward(x, g, b, 1e-5f);
    const auto gr = gpu_be().layer_norm_forward(up(x), up(g), up(b), 1e-5f);
    EXPECT_TRUE(close_to_cpu(gr.y, r.y, kReduce));
    EXPECT_TRUE(close_to_cpu(gr.mean, r.mean, kReduce));
    EXPECT_TRUE(close_to_cpu(gr.rstd, r.rstd, kReduce));
    const Tensor dy = rnd(s, 4);
    const BatchNormGrads d = cpu_be().layer_norm_backward(dy, x, g, r.mean, r.rstd);
    const BatchNormGrads gd = gpu_be().layer_norm_backward(up(dy), up(x), up(g), gr.mean, gr.rstd);
    EXPECT_TRUE(close_to_cpu(gd.dx, d.dx, kReduce));
    EXPECT_TRUE(close_to_cpu(gd.dgamma, d.dgamma, kReduce));
    EXPECT_TRUE(close_to_cpu(gd.dbeta, d.dbeta, kReduce));
  }
}

TEST_F(CudaParitySeq, GeluDropoutSumSquares) {
  const Tensor x = rnd({5, 301}, 10, -4.0f, 4.0f), dy = rnd({5, 301}, 11);
  EXPECT_TRUE(close_to_cpu(gpu_be().gelu_forward(up(x)), cpu_be().gelu_forward(x), kReduce));
  EXPECT_TRUE(close_to_cpu(gpu_be().gelu_backward(up(dy), up(x)), cpu_be().gelu_backward(dy, x), kReduce));
  for (float p : {0.0f, 0.1f, 0.5f}) {
    SCOPED_TRACE(p);
    const Tensor gm = gpu_be().dropout_mask({3, 1000}, p, 42);
    EXPECT_EQ(gm.device(), gpu());
    EXPECT_EQ(gm.to_vector(), cpu_be().dropout_mask({3, 1000}, p, 42).to_vector());  // bit for bit
  }
  EXPECT_THROW(gpu_be().dropout_mask({3}, 1.0f, 1), std::invalid_argument);
  EXPECT_TRUE(close_to_cpu(gpu_be().sum_squares(up(x)), cpu_be().sum_squares(x), kReduce));
  const Tensor xb = rnd({2, 10, 3, 3}, 12);
  EXPECT_TRUE(close_to_cpu(gpu_be().sum_squares(gpu_be().to_layout(up(xb), Layout::blocked(8))),
                           cpu_be().sum_squares(xb), kReduce));
}

TEST_F(CudaParitySeq, Attention) {
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

TEST_F(CudaParitySeq, LabelSmoothedCrossEntropy) {
  const Tensor logits = rnd({6, 50}, 30, -3.0f, 3.0f);
  const Tensor labels = Tensor::from_vector({6}, {3, 0, 49, 0, 17, 3});
  const int64_t ignore = 0;  // the padding id: rows 1 and 3 count for nothing
  const auto r = cpu_be().label_smoothed_ce_forward(logits, labels, 0.1f, ignore, 4.0f);
  const auto gr = gpu_be().label_smoothed_ce_forward(up(logits), up(labels), 0.1f, ignore, 4.0f);
  EXPECT_TRUE(close_to_cpu(gr.loss, r.loss, kReduce));
  EXPECT_TRUE(close_to_cpu(gr.lse, r.lse, kReduce));
  const Tensor dloss = Tensor::from_vector({1}, {1.5f});
  EXPECT_TRUE(
      close_to_cpu(gpu_be().label_smoothed_ce_backward(up(dloss), up(logits), gr.lse, up(labels), 0.1f, ignore, 4.0f),
                   cpu_be().label_smoothed_ce_backward(dloss, logits, r.lse, labels, 0.1f, ignore, 4.0f), kReduce));
  EXPECT_THROW(gpu_be().label_smoothed_ce_forward(up(logits), up(Tensor::from_vector({6}, {3, 0, 50, 0, 1, 1})), 0.1f,
                                                  ignore, 4.0f),
               std::invalid_argument);
}

// Logits [T, N, K] and N label sequences of every kind: ordinary, repeated labels (which need a
// blank between them), empty, and one that cannot fit its frames (infeasible).
struct CtcBatch {
  Tensor logits, targets, input_lengths, target_lengths;
};

CtcBatch ctc_batch(uint64_t seed) {
  const int64_t t = 12, n = 4, k = 6;
  CtcBatch b;
  b.logits = rand_tensor({t, n, k}, seed, true, -2.0f, 2.0f);
  b.targets = Tensor::from_vector({10}, {1, 2, 3, 4, 4, 4, 5, 2, 5, 1});
  b.input_lengths = Tensor::from_vector({n}, {12, 9, 5, 2});
  b.target_lengths = Tensor::from_vector({n}, {3, 4, 0, 3});  // the last: 3 labels in 2 frames
  return b;
}

TEST_F(CudaParitySeq, CtcLoss) {
  const CtcBatch b = ctc_batch(40);
  const Tensor z = b.logits.detach();
  for (Reduction red : {Reduction::mean, Reduction::sum}) {
    for (bool zero_inf : {true, false}) {
      SCOPED_TRACE(std::string(red == Reduction::mean ? "mean" : "sum") + (zero_inf ? " zero_infinity" : ""));
      const auto r = cpu_be().ctc_loss_forward(z, b.targets, b.input_lengths, b.target_lengths, 0, red, zero_inf, true);
      const auto gr = gpu_be().ctc_loss_forward(up(z), up(b.targets), up(b.input_lengths), up(b.target_lengths), 0, red,
                                                zero_inf, true);
      if (zero_inf) {
        EXPECT_TRUE(close_to_cpu(gr.loss, r.loss, kCtc));
        EXPECT_TRUE(close_to_cpu(gr.nll, r.nll, kCtc));
        EXPECT_TRUE(close_to_cpu(gr.grad, r.grad, kCtc));
        const Tensor dloss = Tensor::from_vector({1}, {0.6f});
        EXPECT_TRUE(close_to_cpu(gpu_be().ctc_loss_backward(up(dloss), gr.grad),
                                 cpu_be().ctc_loss_backward(dloss, r.grad), kExact));
      } else {
        // The infeasible sample: loss and its nll are +inf, its gradient NaN, as on the CPU.
        EXPECT_TRUE(std::isinf(gr.loss.item()));
        const auto nll = gr.nll.to_vector();
        EXPECT_TRUE(std::isinf(nll[3]));
        const auto g = gr.grad.to_vector();
        EXPECT_TRUE(std::isnan(g[static_cast<size_t>(3 * 6)]));  // frame 0 of sample 3
      }
    }
  }
  // Without the gradient, the same loss; bad input is the CPU's error.
  const auto r =
      cpu_be().ctc_loss_forward(z, b.targets, b.input_lengths, b.target_lengths, 0, Reduction::mean, true, false);
  const auto gr = gpu_be().ctc_loss_forward(up(z), up(b.targets), up(b.input_lengths), up(b.target_lengths), 0,
                                            Reduction::mean, true, false);
  EXPECT_FALSE(gr.grad.defined());
  EXPECT_TRUE(close_to_cpu(gr.loss, r.loss, kCtc));
  EXPECT_THROW(gpu_be().ctc_loss_forward(up(z), up(Tensor::from_vector({10}, {1, 2, 3, 4, 4, 4, 5, 2, 5, 0})),
                                         up(b.input_lengths), up(b.target_lengths), 0, Reduction::mean, true, false),
               std::invalid_argument);  // a blank inside the targets
}

// ---------------------------------------------------------------- gradient checks through the GPU

TEST_F(CudaParitySeq, Gradchecks) {
  Tensor x = rand_tensor({4, 6}, 50), g = rand_tensor({6}, 51, true, 0.5f, 1.5f), b = rand_tensor({6}, 52);
  EXPECT_GRADCHECK(
      gradcheck(on_gpu([](const std::vector<Tensor>& t) { return ops::layer_norm(t[0], t[1], t[2]); }), {x, g, b}));
  EXPECT_GRADCHECK(gradcheck(on_gpu([](const std::vector<Tensor>& t) { return ops::gelu(t[0]); }), {x}));
  EXPECT_GRADCHECK(gradcheck(on_gpu([](const std::vector<Tensor>& t) { return ops::dropout(t[0], 0.3f, 7); }), {x}));
  Tensor q = rand_tensor({2, 3, 4}, 53), k = rand_tensor({2, 5, 4}, 54), v = rand_tensor({2, 5, 4}, 55);
  Tensor lengths = Tensor::from_vector({2}, {5, 3});
  EXPECT_GRADCHECK(gradcheck(
      on_gpu([](const std::vector<Tensor>& t) { return ops::attention(t[0], t[1], t[2], t[3], 2, 0.5f, false); }),
      {q, k, v, lengths}));
  Tensor logits = rand_tensor({5, 7}, 56, true, -2.0f, 2.0f);
  Tensor labels = Tensor::from_vector({5}, {1, 0, 6, 3, 0});
  EXPECT_GRADCHECK(gradcheck(
      on_gpu([](const std::vector<Tensor>& t) { return ops::label_smoothed_cross_entropy(t[0], t[1], 0.1f, 0, 3.0f); }),
      {logits, labels}));
  const CtcBatch cb = ctc_batch(57);
  EXPECT_GRADCHECK(gradcheck(on_gpu([](const std::vector<Tensor>& t) {
                               ops::CtcLossOptions o;
                               o.zero_infinity = true;
                               return ops::ctc_loss(t[0], t[1], t[2], t[3], o);
                             }),
                             {cb.logits, cb.targets, cb.input_lengths, cb.target_lengths}));
}

}  // namespace
}  // namespace ts::engine
