// The linear family's op: the fully connected layer y = x w^T + b on [N, I]; its backward
// pieces (detail::linear_backward_data/weights, ops/internal.h) are differentiable again.
#include <algorithm>

#include "engine/ops/internal.h"

namespace ts::engine::ops {

namespace {

struct LinearBackward : Node {
  Tensor x, w;
  bool need_x, need_w, need_b, has_bias;
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    std::vector<Tensor> r(3);
    if (need_x && input_needed(0)) r[0] = detail::linear_backward_data(g[0], w);
    if ((need_w && input_needed(1)) || (need_b && input_needed(2))) {
      WeightGrads wg = detail::linear_backward_weights(x, g[0], has_bias);
      if (need_w) r[1] = wg.dw;
      if (need_b) r[2] = wg.dbias;
    }
    return r;
  }
  void release_saved() override { x = w = Tensor(); }
  std::string name() const override { return "LinearBackward"; }
};

struct LinearBackwardDataBackward : Node {
  Tensor dy, w;
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    // out = dy w: d dy = g w^T, d w = dy^T g.
    return {ops::linear(g[0], w, Tensor()), detail::linear_backward_weights(g[0], dy, false).dw};
  }
  void release_saved() override { dy = w = Tensor(); }
  std::string name() const override { return "LinearBackwardDataBackward"; }
};

struct LinearBackwardWeightsBackward : Node {
  Tensor x, dy;
  bool bias;
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    // dw = dy^T x, db = sum_n dy: d x = dy gdw, d dy = x gdw^T + gdb.
    const Tensor gdb = bias ? g[1] : Tensor();
    return {detail::linear_backward_data(dy, g[0]), ops::linear(x, g[0], gdb)};
  }
  void release_saved() override { x = dy = Tensor(); }
  std::string name() const override { return "LinearBackwardWeightsBackward"; }
};

void check_2d(const Tensor& t, const char* op, const char* what) {
  check_defined(t, op, what);
  if (t.dim() != 2) fail(op, std::string(what) + " must be 2-D, got " + shape_str(t.shape()));
}

}  // namespace

Tensor linear(const Tensor& x_in, const Tensor& w_in, const Tensor& bias) {
  static const auto name = op_name("linear");
  check_2d(x_in, "linear", "input");
  check_2d(w_in, "linear", "weight");
  check_same_device(x_in, w_in, "linear");
  if (x_in.size(1) != w_in.size(1))
    fail("linear", "input " + shape_str(x_in.shape()) + " and weight " + shape_str(w_in.shape()) + " do not match");
  if (bias.defined()) {
    check_same_device(x_in, bias, "linear");
    if (bias.dim() != 1 || bias.size(0) != w_in.size(0)) {
      fail("linear", "bias " + shape_str(bias.shape()) + " for weight " + shape_str(w_in.shape()));
    }
  }
  OpScope scope(name);
  const Tensor x = to_layout(x_in, Layout::plain());
  const Tensor w = to_layout(w_in, Layout::plain());
  Tensor y = backend_of(x).linear_forward(x, w, bias.defined() ? &bias : nullptr);
  scope.add_work(compute_work(2 * x.size(0) * x.size(1) * w.size(0) + (bias.defined() ? y.numel() : 0),
                              bytes_of({&x, &w, &bias, &y})));
  if (needs_grad({&x, &w, &bias})) {
    auto n = std::make_shared<LinearBackward>();
    n->need_x = x.requires_grad();
    n->need_w = w.requires_grad();
    n->need_b = bias.defined() && bias.requires_grad();
    n->has_bias = bias.defined();
    // Saved with history: the backward pieces are differentiable.
    if (n->need_w || n->need_b) n->x = x;
    if (n->need_x) n->w = w;
    connect(n, {&x, &w, &bias}, {&y});
  }
  return y;
}

namespace detail {

Tensor linear_backward_data(const Tensor& dy_in, const Tensor& w_in) {
  static const auto name = op_name("linear_backward_data");
  check_2d(dy_in, "linear_backward_data", "dy");
  check_2d(w_in, "linear_backward_data", "weight");
  if (dy_in.size(1) != w_in.size(0)) fail("linear_backward_data", "dy and weight: " + shapes({&dy_in, &w_in}));
  OpScope scope(name);
  const Tensor dy = to_layout(dy_in, Layout::plain());
  const Tensor w = to_layout(w_in, Layout::plain());
  Tensor dx = backend_of(dy).linear_backward_data(dy, w);
  scope.add_work(compute_work(2 * dy.size(0) * dy.size(1) * w.size(1), bytes_of({&dy, &w, &dx})));
  if (needs_grad({&dy, &w})) {
    auto n = std::make_shared<LinearBackwardDataBackward>();
    n->dy = dy;
    n->w = w;
    connect(n, {&dy, &w}, {&dx});
  }
  return dx;
}

WeightGrads linear_backward_weights(const Tensor& x_in, const Tensor& dy_in, bool bias) {
  static const auto name = op_name("linear_backward_weights");
  check_2d(x_in, "linear_backward_weights", "input");
  check_2d(dy_in, "linear_backward_weights", "dy");
  if (dy_in.size(0) != x_in.size(0)) fail("linear_backward_weights", "input and dy: " + shapes({&x_in, &dy_in}));
  OpScope scope(name);
  const Tensor x = to_layout(x_in, Layout::plain());
  const Tensor dy = to_layout(dy_in, Layout::plain());
  WeightGrads r = backend_of(x).linear_backward_weights(x, dy, bias);
  scope.add_work(compute_work(2 * x.size(0) * x.size(1) * dy.size(1) + (bias ? dy.numel() : 0),
                              bytes_of({&x, &dy, &r.dw, &r.dbias})));
  if (needs_grad({&x, &dy})) {
    auto n = std::make_shared<LinearBackwardWeightsBackward>();
    n->x = x;
    n->dy = dy;
    n->bias = bias;
    std::vector<Tensor*> outs{&r.dw};
    if (bias) outs.push_back(&r.dbias);
    connect(n, {&x, &dy}, outs);
  }
  return r;
}

}  // namespace detail

}  // namespace ts::engine::ops
