// The ctc family on the GPU: CPU-versus-GPU parity of the CUDA backend's methods (the same inputs
// through both backends, compared element by element with cuda_test_util.h's tolerances) and
// the GPU's own argument checks. The family's test bodies run on the GPU too: ../ctc_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "../test_util.h"
#include "cuda_test_util.h"
#include "engine/ops.h"

namespace ts::engine {
namespace {

using namespace testing;

using CudaCtc = CudaTest;

using Reduction = Backend::CtcReduction;

constexpr double kCtc = 1e-5;

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

TEST_F(CudaCtc, CtcLoss) {
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

}  // namespace
}  // namespace ts::engine
