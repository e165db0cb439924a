// The softmax family's op: log_softmax over rows, what A3C's policy loss is built from (log pi(a|s)
// for the policy gradient; pi = exp(log pi), the pointwise family's exp, for the entropy bonus).
// First order: its backward piece is a backend kernel recorded as not differentiable again.
#include <stdexcept>
#include <string>

#include "engine/ops/internal.h"

namespace ts::engine::ops {

namespace {

// Backward uses the output (detached: a node must not own its own output's history); x is kept
// only so that a second backward through this one fails loudly instead of missing a term.
struct LogSoftmaxBackward : Node {
  Tensor x, y;
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    const Tensor dy = to_layout(g[0], Layout::plain());
    Tensor dx = backend_of(y).log_softmax_backward(dy, y);
    add_op_work(memory_work({&dy, &y, &dx}));
    detail::mark_not_differentiable("log_softmax_backward", {&dy, &x}, {&dx});
    return {dx};
  }
  void release_saved() override { x = y = Tensor(); }
  std::string name() const override { return "LogSoftmaxBackward"; }
};

}  // namespace

Tensor log_softmax(const Tensor& x) {
  static const auto name = op_name("log_softmax");
  detail::check_defined(x, "log_softmax", "x");
  if (x.dim() != 2 || x.size(1) < 1)
    detail::fail("log_softmax", "x must be [M, K] with K >= 1, got " + shape_str(x.shape()));
  OpScope scope(name);
  const Tensor xp = to_layout(x, Layout::plain());
  Tensor y = backend_of(xp).log_softmax_forward(xp);
  scope.add_work(memory_work({&xp, &y}));
  if (needs_grad({&xp})) {
    auto n = std::make_shared<LogSoftmaxBackward>();
    n->x = xp;
    n->y = y.detach();
    connect(n, {&xp}, {&y});
  }
  return y;
}

}  // namespace ts::engine::ops
