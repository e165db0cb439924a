// The norm family's ops: batch normalisation (training statistics with running averages, or
// evaluation on the running ones; [N, C] or [N, C, H, W]) and layer normalisation over the last
// dimension. Their backward pieces are first order only.
#include <string>
#include <vector>

#include "engine/ops/internal.h"

namespace ts::engine::ops {

namespace {

struct BatchNormBackward : Node {
  Tensor x, gamma, mean, var;
  float eps = 0;
  bool global_stats = false;
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    BatchNormGrads r = backend_of(x).batch_norm_backward(g[0], x, gamma, mean, var, eps, global_stats);
    add_op_work(memory_work({&g[0], &x, &gamma, &r.dx, &r.dgamma, &r.dbeta}));
    mark_not_differentiable("batch_norm_backward", {&g[0], &x, &gamma}, {&r.dx, &r.dgamma, &r.dbeta});
    return {r.dx, r.dgamma, r.dbeta};
  }
  void release_saved() override { x = gamma = mean = var = Tensor(); }
  std::string name() const override { return "BatchNormBackward"; }
};

struct LayerNormBackward : Node {
  Tensor x, gamma, mean, rstd;   // x is the [M, D] view the kernel saw
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    const Tensor dy = ops::reshape(g[0], x.shape());
    BatchNormGrads r = backend_of(x).layer_norm_backward(dy, x.detach(), gamma.detach(), mean, rstd);
    add_op_work(memory_work({&dy, &x, &gamma, &r.dx, &r.dgamma, &r.dbeta}));
    mark_not_differentiable("layer_norm_backward", {&dy, &x, &gamma}, {&r.dx, &r.dgamma, &r.dbeta});
    return {r.dx, r.dgamma, r.dbeta};
  }
  void release_saved() override { x = gamma = mean = rstd = Tensor(); }
  std::string name() const override { return "LayerNormBackward"; }
};

}  // namespace

Tensor batch_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& running_mean,
                  const Tensor& running_var, bool training, float momentum, float eps) {
  static const auto name = op_name("batch_norm");
  check_defined(x, "batch_norm", "input");
  check_defined(gamma, "batch_norm", "gamma");
  check_defined(beta, "batch_norm", "beta");
  if (x.dim() != 4 && x.dim() != 2) fail("batch_norm", "input must be [N, C, H, W] or [N, C], got " + shape_str(x.shape()));
  const int64_t c = x.size(1);
  for (const Tensor* t : {&gamma, &beta, &running_mean, &running_var}) {
    if (!t->defined()) continue;
    check_same_device(x, *t, "batch_norm");
    if (t->dim() != 1 || t->size(0) != c) {
      fail("batch_norm", "per-channel tensor " + shape_str(t->shape()) + " for input " + shape_str(x.shape()));
    }
  }
  if (!training && (!running_mean.defined() || !running_var.defined())) {
    fail("batch_norm", "eval mode needs running_mean and running_var");
  }
  OpScope scope(name);
  Backend& be = backend_of(x);
  auto node = std::make_shared<BatchNormBackward>();
  node->eps = eps;
  Tensor y;
  if (training) {
    int64_t count = x.size(0);
    for (int64_t d = 2; d < x.dim(); ++d) count *= x.size(d);
    if (count < 2) fail("batch_norm", "training needs more than one value per channel, got " + shape_str(x.shape()));
    BatchNormStats s = be.batch_norm_forward_train(x, gamma, beta, eps);
    y = s.y;
    if (running_mean.defined() && running_var.defined()) {
      NoGradScope no_grad;
      const float unbias = static_cast<float>(count) / static_cast<float>(count - 1);
      be.add_inplace(running_mean, running_mean, -momentum);
      be.add_inplace(running_mean, s.mean, momentum);
      be.add_inplace(running_var, running_var, -momentum);
      be.add_inplace(running_var, s.var, momentum * unbias);
    }
    node->mean = s.mean;
    node->var = s.var;
  } else {
    y = be.batch_norm_forward_eval(x, gamma, beta, running_mean, running_var, eps);
    node->global_stats = true;
  }
  scope.add_work(memory_work({&x, &gamma, &beta, &y}));
  if (needs_grad({&x, &gamma, &beta})) {
    if (!training) {
      // Copies: the running stats change in place if a training step runs before backward.
      NoGradScope no_grad;
      node->mean = Tensor::empty({c}, x.device());
      node->var = Tensor::empty({c}, x.device());
      be.copy(running_mean, node->mean);
      be.copy(running_var, node->var);
    }
    node->x = x;   // with history: a second backward through BN's backward must fail loudly
    node->gamma = gamma;
    connect(node, {&x, &gamma, &beta}, {&y});
  }
  return y;
}

Tensor layer_norm(const Tensor& x_in, const Tensor& gamma, const Tensor& beta, float eps) {
  static const auto name = op_name("layer_norm");
  check_defined(x_in, "layer_norm", "x");
  check_defined(gamma, "layer_norm", "gamma");
  check_defined(beta, "layer_norm", "beta");
  check_same_device(x_in, gamma, "layer_norm");
  check_same_device(x_in, beta, "layer_norm");
  if (x_in.dim() < 1) fail("layer_norm", "needs at least one dimension");
  const int64_t d = x_in.size(-1);
  if (gamma.dim() != 1 || gamma.size(0) != d || beta.shape() != gamma.shape()) {
    fail("layer_norm", "gamma/beta " + detail::shapes({&gamma, &beta}) + " for input " + shape_str(x_in.shape()));
  }
  OpScope scope(name);
  const Tensor x = reshape(x_in, {x_in.numel() / std::max<int64_t>(d, 1), d});
  Backend::LayerNormResult r = backend_of(x).layer_norm_forward(x, gamma, beta, eps);
  scope.add_work(memory_work({&x, &gamma, &beta, &r.y}));
  if (needs_grad({&x, &gamma, &beta})) {
    auto n = std::make_shared<LayerNormBackward>();
    n->x = x;   // with history: a second backward through this one must fail loudly
    n->gamma = gamma;
    n->mean = r.mean;
    n->rstd = r.rstd;
    connect(n, {&x, &gamma, &beta}, {&r.y});
  }
  return x_in.dim() == 2 ? r.y : reshape(r.y, x_in.shape());
}

}  // namespace ts::engine::ops
