// Small networks end to end, through several op families at once: ResNet-like (conv, batch norm,
// residual add, pooling, linear, the loss) and WGAN-GP's gradient penalty through a critic's
// backward, against finite differences.
#include <gtest/gtest.h>

#include "engine/autograd.h"
#include "engine/gradcheck.h"
#include "engine/ops.h"
#include "on_every_device.h"
#include "test_util.h"

namespace ts::engine {
namespace {

using namespace testing;

class SmallNetworks : public OnDevice {};

// Conv, batch norm, a second conv added back (ResNet's residual), global pooling, linear and
// the loss: the parameters' gradients through every piece.
TEST_P(SmallNetworks, ConvBatchNormResidualLinear) {
  Tensor x = rand_tensor({2, 3, 8, 8}, 100, false);
  Tensor w1 = rand_tensor({8, 3, 3, 3}, 101, true, -0.4f, 0.4f);
  Tensor g1 = rand_tensor({8}, 102, true, 0.5f, 1.5f);
  Tensor b1 = rand_tensor({8}, 103, true, 0.5f, 1.0f);
  Tensor w2 = rand_tensor({8, 8, 3, 3}, 104, true, -0.2f, 0.2f);
  Tensor fc = rand_tensor({4, 8}, 105);
  Tensor labels = Tensor::from_vector({2}, {1, 3});
  auto f = [&](const std::vector<Tensor>& t) {
    Tensor h = ops::conv2d(on(x), t[0], Tensor(), conv_params(1, 1));
    h = ops::batch_norm(h, t[1], t[2], Tensor(), Tensor(), true, 0.1f, 1e-5f);
    Tensor h2 = ops::conv2d(h, t[3], Tensor(), conv_params(1, 1));
    h = ops::add(h, h2);
    h = ops::global_avg_pool2d(h);
    return ops::softmax_cross_entropy(ops::linear(h, t[4], Tensor()), on(labels));
  };
  GradcheckOptions o;
  o.max_elements_per_input = 16;
  EXPECT_GRADCHECK(gradcheck(f, {w1, g1, b1, w2, fc}, o));
}

// The whole gradient penalty of WGAN-GP on a small critic with every op the real critic uses
// (conv with and without bias, relu, mean-pool, residual add, linear): d penalty / d params
// goes through the critic's backward, checked against finite differences. The relu sits on
// the input, kept away from 0, so that no parameter step flips its pattern (relu'' = 0 would
// make finite differences measure kink crossings, not the gradient).
TEST_P(SmallNetworks, GradientPenaltyThroughCritic) {
  Tensor xhat = away_from_zero({2, 3, 8, 8}, 120, false);
  Tensor w1 = rand_tensor({4, 3, 3, 3}, 121, true, -0.5f, 0.5f);
  Tensor b1 = rand_tensor({4}, 122);
  Tensor w2 = rand_tensor({4, 4, 3, 3}, 123, true, -0.5f, 0.5f);
  Tensor ws = rand_tensor({4, 3, 1, 1}, 124, true, -0.5f, 0.5f);
  Tensor fc = rand_tensor({1, 64}, 125, true, -0.5f, 0.5f);
  Tensor fcb = rand_tensor({1}, 126);
  auto penalty = [&](const std::vector<Tensor>& t) {
    Tensor x = on(xhat).detach();
    x.set_requires_grad(true);
    const Pool2dParams pool = pool_params(2, 2, 0);
    Tensor h = ops::conv2d(ops::relu(x), t[0], t[1], conv_params(1, 1));
    h = ops::avg_pool2d(ops::conv2d(h, t[2], Tensor(), conv_params(1, 1)), pool);
    Tensor shortcut = ops::conv2d(ops::avg_pool2d(x, pool), t[3], Tensor(), conv_params(1, 0));
    Tensor d = ops::linear(ops::flatten(ops::add(shortcut, h)), t[4], t[5]);
    Tensor gx = grad({ops::sum(d)}, {x}, {}, /*create_graph=*/true)[0];
    return ops::scale(ops::norm_penalty(gx, 1.0f), 10.0f);
  };
  GradcheckOptions o;
  o.max_elements_per_input = 12;
  EXPECT_GRADCHECK(gradcheck(penalty, {w1, b1, w2, ws, fc, fcb}, o));
}

TS_ON_EVERY_DEVICE(SmallNetworks);

}  // namespace
}  // namespace ts::engine
