// The loss family on the GPU: CPU-versus-GPU parity of the CUDA backend's methods (the same inputs
// through both backends, compared element by element with cuda_test_util.h's tolerances) and
// the GPU's own argument checks. The family's test bodies run on the GPU too: ../loss_test.cpp.
#include <gtest/gtest.h>

#include <string>

#include "../test_util.h"
#include "cuda_test_util.h"
#include "engine/ops.h"

namespace ts::engine {
namespace {

using namespace testing;

using CudaLoss = CudaTest;

TEST_F(CudaLoss, SoftmaxCrossEntropy) {
  std::vector<float> z = rand_tensor({6, 10}, 800, false, -3.0f, 3.0f).to_vector();
  z[0] = 1000.0f;  // stable log-sum-exp
  z[1] = -1000.0f;
  const Tensor logits = Tensor::from_vector({6, 10}, z);
  const Tensor labels = Tensor::from_vector({6}, {0, 9, 3, 3, 5, 1});
  const Tensor gl = copy_to(logits, gpu()), glab = copy_to(labels, gpu());
  const CrossEntropyResult r = cpu_be().softmax_cross_entropy_forward(logits, labels);
  const CrossEntropyResult gr = gpu_be().softmax_cross_entropy_forward(gl, glab);
  EXPECT_TRUE(close_to_cpu(gr.loss, r.loss, kReduce));
  EXPECT_TRUE(close_to_cpu(gr.probs, r.probs, kReduce));
  const Tensor dloss = Tensor::from_vector({1}, {0.7f});
  EXPECT_TRUE(close_to_cpu(gpu_be().softmax_cross_entropy_backward(copy_to(dloss, gpu()), gr.probs, glab),
                           cpu_be().softmax_cross_entropy_backward(dloss, r.probs, labels), kReduce));
  // A larger batch, as in training.
  const Tensor big = rnd({128, 1000}, 801, -5.0f, 5.0f);
  std::vector<float> lab(128);
  for (size_t i = 0; i < lab.size(); ++i) lab[i] = static_cast<float>((i * 37) % 1000);
  const Tensor blab = Tensor::from_vector({128}, lab);
  EXPECT_TRUE(close_to_cpu(gpu_be().softmax_cross_entropy_forward(copy_to(big, gpu()), copy_to(blab, gpu())).loss,
                           cpu_be().softmax_cross_entropy_forward(big, blab).loss, kReduce));
  // Bad labels: the CPU backend's error.
  try {
    gpu_be().softmax_cross_entropy_forward(gl, copy_to(Tensor::from_vector({6}, {0, 1, 2, 10, 4, 5}), gpu()));
    FAIL() << "expected invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("index 3"), std::string::npos) << e.what();
  }
  EXPECT_THROW(
      gpu_be().softmax_cross_entropy_forward(gl, copy_to(Tensor::from_vector({6}, {0, 1, 2, 3, 4, 0.5f}), gpu())),
      std::invalid_argument);
}

TEST_F(CudaLoss, NormPenalty) {
  std::vector<float> v = rnd({5, 37}, 20).to_vector();
  for (int k = 0; k < 37; ++k) v[static_cast<size_t>(2 * 37 + k)] = 0.0f;  // a zero row: norm 0, gradient 0
  const Tensor x = Tensor::from_vector({5, 37}, v);
  const Tensor gx = copy_to(x, gpu());
  for (float target : {1.0f, 0.0f}) {
    SCOPED_TRACE(target);
    const auto r = cpu_be().norm_penalty_forward(x, target);
    const auto gr = gpu_be().norm_penalty_forward(gx, target);
    EXPECT_TRUE(close_to_cpu(gr.loss, r.loss, kReduce));
    EXPECT_TRUE(close_to_cpu(gr.norms, r.norms, kReduce));
    const Tensor dloss = Tensor::from_vector({1}, {1.3f});
    EXPECT_TRUE(close_to_cpu(gpu_be().norm_penalty_backward(copy_to(dloss, gpu()), gx, gr.norms, target),
                             cpu_be().norm_penalty_backward(dloss, x, r.norms, target), kTranscendental));
  }
  EXPECT_THROW(gpu_be().norm_penalty_forward(copy_to(rnd({0, 3}, 1), gpu()), 1.0f), std::invalid_argument);
}

TEST_F(CudaLoss, SmoothL1) {
  const Tensor x = rnd({7, 4}, 60, -2.0f, 2.0f), t = rnd({7, 4}, 61, -2.0f, 2.0f), w = rnd({7, 4}, 62, 0.0f, 1.0f);
  const Tensor gx = copy_to(x, gpu()), gt = copy_to(t, gpu()), gw = copy_to(w, gpu());
  const Tensor dloss = Tensor::from_vector({1}, {0.8f});
  const Tensor gdloss = copy_to(dloss, gpu());
  for (float beta : {0.0f, 1.0f / 9.0f, 1.0f}) {
    for (bool weighted : {false, true}) {
      SCOPED_TRACE("beta " + std::to_string(beta) + (weighted ? " weighted" : ""));
      EXPECT_TRUE(close_to_cpu(gpu_be().smooth_l1_forward(gx, gt, weighted ? &gw : nullptr, beta, 0.25f),
                               cpu_be().smooth_l1_forward(x, t, weighted ? &w : nullptr, beta, 0.25f), kReduce));
      EXPECT_TRUE(close_to_cpu(gpu_be().smooth_l1_backward(gdloss, gx, gt, weighted ? &gw : nullptr, beta, 0.25f),
                               cpu_be().smooth_l1_backward(dloss, x, t, weighted ? &w : nullptr, beta, 0.25f), kExact));
    }
  }
  EXPECT_THROW(gpu_be().smooth_l1_forward(gx, copy_to(rnd({7, 3}, 1), gpu()), nullptr, 1.0f, 1.0f),
               std::invalid_argument);
}

TEST_F(CudaLoss, LabelSmoothedCrossEntropy) {
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

}  // namespace
}  // namespace ts::engine
