// The loss family's ops: softmax cross-entropy, label-smoothed cross-entropy (the transformer's),
// smooth-L1 (Faster R-CNN's box regression) and WGAN-GP's gradient-norm penalty.
#include <string>
#include <vector>

#include "engine/ops/internal.h"

namespace ts::engine::ops {

namespace {

struct CrossEntropyBackward : Node {
  Tensor probs, labels;
  Tensor logits;  // only so that a second backward through this one fails loudly
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    Tensor dx = backend_of(probs).softmax_cross_entropy_backward(g[0], probs, labels);
    add_op_work(memory_work({&probs, &labels, &dx}));
    mark_not_differentiable("softmax_cross_entropy_backward", {&g[0], &logits}, {&dx});
    return {dx};
  }
  void release_saved() override { probs = labels = logits = Tensor(); }
  std::string name() const override { return "SoftmaxCrossEntropyBackward"; }
};

struct NormPenaltyBackward : Node {
  Tensor x, norms;  // x with its history: a second backward through this one must fail loudly
  float target;
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    Tensor dx = backend_of(x).norm_penalty_backward(g[0], x.detach(), norms, target);
    add_op_work(memory_work({&x, &norms, &dx}));
    mark_not_differentiable("norm_penalty_backward", {&g[0], &x}, {&dx});
    return {dx};
  }
  void release_saved() override { x = norms = Tensor(); }
  std::string name() const override { return "NormPenaltyBackward"; }
};

struct SmoothedCrossEntropyBackward : Node {
  Tensor logits, lse, labels;
  float eps, normalizer;
  int64_t ignore_index;
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    Tensor dx = backend_of(logits).label_smoothed_ce_backward(g[0], logits.detach(), lse, labels, eps, ignore_index,
                                                              normalizer);
    add_op_work(memory_work({&logits, &lse, &labels, &dx}));
    mark_not_differentiable("label_smoothed_cross_entropy_backward", {&g[0], &logits}, {&dx});
    return {dx};
  }
  void release_saved() override { logits = lse = labels = Tensor(); }
  std::string name() const override { return "LabelSmoothedCrossEntropyBackward"; }
};

struct SmoothL1Backward : Node {
  Tensor x, target, weights;  // x and target with history, so a second backward fails loudly
  float beta = 1, scale = 1;
  bool need_x = false, need_t = false;
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    Tensor dx = backend_of(x).smooth_l1_backward(g[0], x, target, weights.defined() ? &weights : nullptr, beta, scale);
    add_op_work(memory_work({&x, &target, &weights, &dx}));
    mark_not_differentiable("smooth_l1_backward", {&g[0], &x, &target}, {&dx});
    return {need_x ? dx : Tensor(), need_t ? ops::scale(dx, -1.0f) : Tensor()};
  }
  void release_saved() override { x = target = weights = Tensor(); }
  std::string name() const override { return "SmoothL1Backward"; }
};

}  // namespace

Tensor softmax_cross_entropy(const Tensor& logits, const Tensor& labels) {
  static const auto name = op_name("softmax_cross_entropy");
  check_defined(logits, "softmax_cross_entropy", "logits");
  check_defined(labels, "softmax_cross_entropy", "labels");
  check_same_device(logits, labels, "softmax_cross_entropy");
  if (logits.dim() != 2 || labels.dim() != 1 || labels.size(0) != logits.size(0)) {
    fail("softmax_cross_entropy", "expected logits [N, K] and labels [N], got " + detail::shapes({&logits, &labels}));
  }
  OpScope scope(name);
  CrossEntropyResult r = backend_of(logits).softmax_cross_entropy_forward(logits, labels);
  scope.add_work(memory_work({&logits, &labels, &r.probs, &r.loss}));
  if (needs_grad({&logits})) {
    auto n = std::make_shared<CrossEntropyBackward>();
    n->probs = r.probs;
    n->labels = labels.detach();
    n->logits = logits;
    connect(n, {&logits}, {&r.loss});
  }
  return r.loss;
}

Tensor norm_penalty(const Tensor& x, float target, Tensor* norms) {
  static const auto name = op_name("norm_penalty");
  check_defined(x, "norm_penalty", "x");
  if (x.dim() < 1 || x.size(0) < 1) fail("norm_penalty", "needs [N, ...] with N >= 1, got " + shape_str(x.shape()));
  OpScope scope(name);
  const Tensor flat = x.dim() == 2 ? to_layout(x, Layout::plain()) : flatten(x);
  Backend::NormPenaltyResult r = backend_of(flat).norm_penalty_forward(flat, target);
  scope.add_work(memory_work({&flat, &r.norms, &r.loss}));
  if (needs_grad({&flat})) {
    auto n = std::make_shared<NormPenaltyBackward>();
    n->x = flat;
    n->norms = r.norms;
    n->target = target;
    connect(n, {&flat}, {&r.loss});
  }
  if (norms) *norms = r.norms;
  return r.loss;
}

Tensor label_smoothed_cross_entropy(const Tensor& logits_in, const Tensor& labels, float eps, int64_t ignore_index,
                                    float normalizer) {
  static const auto name = op_name("label_smoothed_cross_entropy");
  check_defined(logits_in, "label_smoothed_cross_entropy", "logits");
  check_defined(labels, "label_smoothed_cross_entropy", "labels");
  check_same_device(logits_in, labels, "label_smoothed_cross_entropy");
  if (logits_in.dim() != 2 || labels.dim() != 1 || labels.size(0) != logits_in.size(0)) {
    fail("label_smoothed_cross_entropy",
         "expected logits [N, V] and labels [N], got " + detail::shapes({&logits_in, &labels}));
  }
  if (!(eps >= 0.0f && eps < 1.0f)) fail("label_smoothed_cross_entropy", "eps must be in [0, 1)");
  if (!(normalizer > 0.0f)) fail("label_smoothed_cross_entropy", "normalizer must be positive");
  OpScope scope(name);
  const Tensor logits = to_layout(logits_in, Layout::plain());
  Backend::SmoothedCrossEntropy r =
      backend_of(logits).label_smoothed_ce_forward(logits, labels, eps, ignore_index, normalizer);
  scope.add_work(memory_work({&logits, &labels, &r.lse, &r.loss}));
  if (needs_grad({&logits})) {
    auto n = std::make_shared<SmoothedCrossEntropyBackward>();
    n->logits = logits;  // the probabilities are recomputed from it: no second [N, V] buffer
    n->lse = r.lse;
    n->labels = labels.detach();
    n->eps = eps;
    n->normalizer = normalizer;
    n->ignore_index = ignore_index;
    connect(n, {&logits}, {&r.loss});
  }
  return r.loss;
}

Tensor smooth_l1_loss(const Tensor& x, const Tensor& target, const Tensor& weights, float beta, float normalizer) {
  static const auto name = op_name("smooth_l1_loss");
  const char* op = "smooth_l1_loss";
  check_defined(x, op, "input");
  check_defined(target, op, "target");
  check_same_device(x, target, op);
  if (x.shape() != target.shape()) fail(op, "input and target differ: " + detail::shapes({&x, &target}));
  if (weights.defined()) {
    check_same_device(x, weights, op);
    if (weights.shape() != x.shape())
      fail(op, "weights " + shape_str(weights.shape()) + " for input " + shape_str(x.shape()));
    if (weights.requires_grad() && thread_context().grad_enabled) fail(op, "weights are constants and get no gradient");
  }
  if (!(beta >= 0.0f)) fail(op, "beta must be >= 0, got " + std::to_string(beta));
  if (!(normalizer > 0.0f)) fail(op, "normalizer must be positive, got " + std::to_string(normalizer));
  OpScope scope(name);
  const float s = 1.0f / normalizer;
  const Tensor w = weights.defined() ? weights.detach() : Tensor();
  Tensor y = backend_of(x).smooth_l1_forward(x, target, w.defined() ? &w : nullptr, beta, s);
  scope.add_work(memory_work({&x, &target, &w, &y}));
  if (needs_grad({&x, &target})) {
    auto n = std::make_shared<SmoothL1Backward>();
    n->x = x;
    n->target = target;
    n->weights = w;
    n->beta = beta;
    n->scale = s;
    n->need_x = x.requires_grad();
    n->need_t = target.requires_grad();
    connect(n, {&x, &target}, {&y});
  }
  return y;
}

}  // namespace ts::engine::ops
