// The norm family's ops: batch normalisation (training statistics with running averages, or
// evaluation on the running ones; [N, C] or [N, C, H, W]), the same followed by ReLU in one pass
// (batch_norm_relu: what conv-BN-ReLU networks run), and layer normalisation over the last
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

// Batch norm followed by ReLU, fused: the backward applies the ReLU's mask, then batch norm's.
struct BatchNormReluBackward : Node {
  Tensor x, gamma, mean, var, relu_mask;
  float eps = 0;
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    BatchNormGrads r = backend_of(x).batch_norm_relu_backward(g[0], x, gamma, mean, var, eps, relu_mask);
    add_op_work(memory_work({&g[0], &x, &gamma, &relu_mask, &r.dx, &r.dgamma, &r.dbeta}));
    mark_not_differentiable("batch_norm_relu_backward", {&g[0], &x, &gamma}, {&r.dx, &r.dgamma, &r.dbeta});
    return {r.dx, r.dgamma, r.dbeta};
  }
  void release_saved() override { x = gamma = mean = var = relu_mask = Tensor(); }
  std::string name() const override { return "BatchNormReluBackward"; }
};

struct LayerNormBackward : Node {
  Tensor x, gamma, mean, rstd;  // x is the [M, D] view the kernel saw
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

namespace {

void check_batch_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& running_mean,
                      const Tensor& running_var, bool training, const char* op) {
  check_defined(x, op, "input");
  check_defined(gamma, op, "gamma");
  check_defined(beta, op, "beta");
  if (x.dim() != 4 && x.dim() != 2) fail(op, "input must be [N, C, H, W] or [N, C], got " + shape_str(x.shape()));
  const int64_t c = x.size(1);
  for (const Tensor* t : {&gamma, &beta, &running_mean, &running_var}) {
    if (!t->defined()) continue;
    check_same_device(x, *t, op);
    if (t->dim() != 1 || t->size(0) != c) {
      fail(op, "per-channel tensor " + shape_str(t->shape()) + " for input " + shape_str(x.shape()));
    }
  }
  if (!training && (!running_mean.defined() || !running_var.defined())) {
    fail(op, "eval mode needs running_mean and running_var");
  }
  if (training) {
    int64_t count = x.size(0);
    for (int64_t d = 2; d < x.dim(); ++d) count *= x.size(d);
    if (count < 2) fail(op, "training needs more than one value per channel, got " + shape_str(x.shape()));
  }
}

// Training: the batch statistics fold into the running ones (PyTorch's momentum, the unbiased variance).
void update_running_stats(Backend& be, const Tensor& x, const BatchNormStats& s, const Tensor& running_mean,
                          const Tensor& running_var, float momentum) {
  if (!running_mean.defined() || !running_var.defined()) return;
  NoGradScope no_grad;
  const int64_t count = x.numel() / x.size(1);
  const float unbias = static_cast<float>(count) / static_cast<float>(count - 1);
  be.add_inplace(running_mean, running_mean, -momentum);
  be.add_inplace(running_mean, s.mean, momentum);
  be.add_inplace(running_var, running_var, -momentum);
  be.add_inplace(running_var, s.var, momentum * unbias);
}

}  // namespace

Tensor batch_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& running_mean,
                  const Tensor& running_var, bool training, float momentum, float eps) {
  static const auto name = op_name("batch_norm");
  check_batch_norm(x, gamma, beta, running_mean, running_var, training, "batch_norm");
  const int64_t c = x.size(1);
  OpScope scope(name);
  Backend& be = backend_of(x);
  auto node = std::make_shared<BatchNormBackward>();
  node->eps = eps;
  Tensor y;
  if (training) {
    BatchNormStats s = be.batch_norm_forward_train(x, gamma, beta, eps);
    y = s.y;
    update_running_stats(be, x, s, running_mean, running_var, momentum);
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
    node->x = x;  // with history: a second backward through BN's backward must fail loudly
    node->gamma = gamma;
    connect(node, {&x, &gamma, &beta}, {&y});
  }
  return y;
}

Tensor batch_norm_relu(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& running_mean,
                       const Tensor& running_var, bool training, float momentum, float eps) {
  static const auto name = op_name("batch_norm_relu");
  check_batch_norm(x, gamma, beta, running_mean, running_var, training, "batch_norm_relu");
  if (!training) return relu(batch_norm(x, gamma, beta, running_mean, running_var, false, momentum, eps));
  OpScope scope(name);
  Backend& be = backend_of(x);
  BatchNormStats s = be.batch_norm_relu_forward_train(x, gamma, beta, eps);
  update_running_stats(be, x, s, running_mean, running_var, momentum);
  scope.add_work(memory_work({&x, &gamma, &beta, &s.y}));
  if (needs_grad({&x, &gamma, &beta})) {
    auto node = std::make_shared<BatchNormReluBackward>();
    node->eps = eps;
    node->mean = s.mean;
    node->var = s.var;
    node->relu_mask = s.relu_mask;
    node->x = x;  // with history: a second backward through this one must fail loudly
    node->gamma = gamma;
    connect(node, {&x, &gamma, &beta}, {&s.y});
  }
  return s.y;
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
    n->x = x;  // with history: a second backward through this one must fail loudly
    n->gamma = gamma;
    n->mean = r.mean;
    n->rstd = r.rstd;
    connect(n, {&x, &gamma, &beta}, {&r.y});
  }
  return x_in.dim() == 2 ? r.y : reshape(r.y, x_in.shape());
}

}  // namespace ts::engine::ops
