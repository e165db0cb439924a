// The detection ops (Faster R-CNN): roi_align, roi_pool, smooth_l1_loss, index_select_rows /
// index_add_rows and permute. RoI coordinates are data, not parameters: they get no gradient,
// which is Faster R-CNN's approximate joint training.
#include <string>

#include "engine/ops/internal.h"

namespace ts::engine::ops {

using detail::check_defined;
using detail::check_same_device;
using detail::fail;
using detail::mark_not_differentiable;

namespace {

void check_index(const Tensor& index, const Tensor& x, const char* op) {
  check_defined(index, op, "index");
  check_same_device(x, index, op);
  if (index.dim() != 1) fail(op, "index must be 1-D, got " + shape_str(index.shape()));
  if (index.requires_grad() && thread_context().grad_enabled) fail(op, "index cannot require grad");
}

// ---------------------------------------------------------------- RoIAlign / RoIPool

// ---------------------------------------------------------------- smooth L1

struct SmoothL1Backward : Node {
  Tensor x, target, weights;  // x and target with history, so a second backward fails loudly
  float beta = 1, scale = 1;
  bool need_x = false, need_t = false;
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    Tensor dx = backend_of(x).smooth_l1_backward(g[0], x, target, weights.defined() ? &weights : nullptr, beta, scale);
    mark_not_differentiable("smooth_l1_backward", {&g[0], &x, &target}, {&dx});
    return {need_x ? dx : Tensor(), need_t ? ops::scale(dx, -1.0f) : Tensor()};
  }
  void release_saved() override { x = target = weights = Tensor(); }
  std::string name() const override { return "SmoothL1Backward"; }
};

// ---------------------------------------------------------------- rows, permute

struct IndexSelectBackward : Node {
  Tensor index;
  int64_t rows = 0;
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    return {ops::index_add_rows(g[0], index, rows)};
  }
  void release_saved() override { index = Tensor(); }
  std::string name() const override { return "IndexSelectRowsBackward"; }
};

struct IndexAddBackward : Node {
  Tensor index;
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override { return {ops::index_select_rows(g[0], index)}; }
  void release_saved() override { index = Tensor(); }
  std::string name() const override { return "IndexAddRowsBackward"; }
};

struct PermuteBackward : Node {
  std::vector<int64_t> inverse;
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override { return {ops::permute(g[0], inverse)}; }
  std::string name() const override { return "PermuteBackward"; }
};

}  // namespace

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

Tensor index_select_rows(const Tensor& x, const Tensor& index) {
  static const auto name = op_name("index_select_rows");
  check_defined(x, "index_select_rows", "input");
  if (x.dim() < 1) fail("index_select_rows", "input needs at least one dimension");
  check_index(index, x, "index_select_rows");
  OpScope scope(name);
  Tensor y = backend_of(x).index_select_rows(x, index);
  if (needs_grad({&x})) {
    auto n = std::make_shared<IndexSelectBackward>();
    n->index = index.detach();
    n->rows = x.size(0);
    connect(n, {&x}, {&y});
  }
  return y;
}

Tensor index_add_rows(const Tensor& src, const Tensor& index, int64_t rows) {
  static const auto name = op_name("index_add_rows");
  check_defined(src, "index_add_rows", "src");
  if (src.dim() < 1) fail("index_add_rows", "src needs at least one dimension");
  check_index(index, src, "index_add_rows");
  if (index.size(0) != src.size(0)) fail("index_add_rows", "index and src differ: " + detail::shapes({&index, &src}));
  if (rows < 0) fail("index_add_rows", "rows must be >= 0");
  OpScope scope(name);
  Tensor y = backend_of(src).index_add_rows(src, index, rows);
  if (needs_grad({&src})) {
    auto n = std::make_shared<IndexAddBackward>();
    n->index = index.detach();
    connect(n, {&src}, {&y});
  }
  return y;
}

Tensor permute(const Tensor& x_in, const std::vector<int64_t>& perm) {
  static const auto name = op_name("permute");
  check_defined(x_in, "permute", "input");
  const auto rank = static_cast<size_t>(x_in.dim());
  std::vector<int64_t> inverse(rank, -1);
  bool ok = perm.size() == rank;
  for (size_t i = 0; ok && i < rank; ++i) {
    const int64_t p = perm[i];
    ok = p >= 0 && static_cast<size_t>(p) < rank && inverse[static_cast<size_t>(p)] < 0;
    if (ok) inverse[static_cast<size_t>(p)] = static_cast<int64_t>(i);
  }
  if (!ok)
    fail("permute", "not a permutation of the " + std::to_string(rank) + " dimensions of " + shape_str(x_in.shape()));
  OpScope scope(name);
  const Tensor x = to_layout(x_in, Layout::plain());
  Tensor y = backend_of(x).permute(x, perm);
  if (needs_grad({&x})) {
    auto n = std::make_shared<PermuteBackward>();
    n->inverse = std::move(inverse);
    connect(n, {&x}, {&y});
  }
  return y;
}

}  // namespace ts::engine::ops
