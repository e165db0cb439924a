// The conv family's op: 2-D convolution (groups, stride, padding, dilation), its backward
// pieces differentiable again (WGAN-GP's penalty differentiates through the critic's gradient).
#include <string>
#include <vector>

#include "engine/ops/internal.h"

namespace ts::engine::ops {

namespace {

struct Conv2dBackward : Node {
  Tensor x, w;  // x for the weights gradient, w for the data gradient
  Shape x_shape, w_shape;
  Layout x_layout, w_layout;
  Conv2dParams p;
  bool need_x, need_w, need_b, has_bias;
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    std::vector<Tensor> r(3);
    if (need_x && input_needed(0)) r[0] = ops::conv2d_backward_data(g[0], w, x_shape, x_layout, p);
    if ((need_w && input_needed(1)) || (need_b && input_needed(2))) {
      WeightGrads wg = ops::conv2d_backward_weights(x, g[0], w_shape, has_bias, p, w_layout);
      if (need_w) r[1] = wg.dw;
      if (need_b) r[2] = wg.dbias;
    }
    return r;
  }
  void release_saved() override {
    x = Tensor();
    w = Tensor();
  }
  std::string name() const override { return "Conv2dBackward"; }
};

// dx = conv_backward_data(dy, w) is bilinear in (dy, w), and <g, dx> = <conv(g, w), dy>:
// so d dy = conv(g, w) and d w = conv_backward_weights(g, dy).
struct Conv2dBackwardDataBackward : Node {
  Tensor dy, w;
  Shape w_shape;
  Layout w_layout;
  Conv2dParams p;
  bool need_dy, need_w;
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    std::vector<Tensor> r(2);
    if (need_dy) r[0] = ops::conv2d(g[0], w, Tensor(), p);
    if (need_w) r[1] = ops::conv2d_backward_weights(g[0], dy, w_shape, false, p, w_layout).dw;
    return r;
  }
  void release_saved() override { dy = w = Tensor(); }
  std::string name() const override { return "Conv2dBackwardDataBackward"; }
};

// dw = conv_backward_weights(x, dy) with <gw, dw> = <conv(x, gw), dy>, and db = sum dy with
// <gb, db> = <broadcast gb, dy>: so d dy = conv(x, gw, gb) and d x = conv_backward_data(dy, gw).
struct Conv2dBackwardWeightsBackward : Node {
  Tensor x, dy;
  Shape x_shape, w_shape;
  Layout x_layout;
  Conv2dParams p;
  bool need_x, need_dy;
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    const Tensor& gw = g[0];
    const Tensor gb = g.size() > 1 ? g[1] : Tensor();
    std::vector<Tensor> r(2);
    if (need_x && gw.defined()) r[0] = ops::conv2d_backward_data(dy, gw, x_shape, x_layout, p);
    if (need_dy && (gw.defined() || gb.defined())) {
      // Only the bias gradient reached us: a zero filter makes the conv a bias broadcast.
      const Tensor w = gw.defined() ? gw : Tensor::zeros(w_shape, x.device());
      r[1] = ops::conv2d(x, w, gb, p);
    }
    return r;
  }
  void release_saved() override { x = dy = Tensor(); }
  std::string name() const override { return "Conv2dBackwardWeightsBackward"; }
};

// 2 x (output elements) x (input channels per group) x (kernel area): one multiply-add each.
int64_t conv_flops(const Shape& y_shape, const Shape& w_shape) {
  return 2 * shape_numel(y_shape) * w_shape[1] * w_shape[2] * w_shape[3];
}

}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dParams& p) {
  static const auto name = op_name("conv2d");
  check_4d(x, "conv2d", "input");
  check_4d(w, "conv2d", "weight");
  check_same_device(x, w, "conv2d");
  if (p.groups < 1 || x.size(1) != w.size(1) * p.groups || w.size(0) % p.groups != 0) {
    fail("conv2d", "input " + shape_str(x.shape()) + " and weight " + shape_str(w.shape()) +
                       " do not match groups=" + std::to_string(p.groups));
  }
  if (bias.defined()) {
    check_same_device(x, bias, "conv2d");
    if (bias.dim() != 1 || bias.size(0) != w.size(0)) {
      fail("conv2d", "bias " + shape_str(bias.shape()) + " for weight " + shape_str(w.shape()));
    }
  }
  OpScope scope(name);
  Tensor y = backend_of(x).conv2d_forward(x, w, bias.defined() ? &bias : nullptr, p);
  scope.add_work(
      compute_work(conv_flops(y.shape(), w.shape()) + (bias.defined() ? y.numel() : 0), bytes_of({&x, &w, &bias, &y})));
  if (needs_grad({&x, &w, &bias})) {
    auto n = std::make_shared<Conv2dBackward>();
    n->need_x = x.requires_grad();
    n->need_w = w.requires_grad();
    n->need_b = bias.defined() && bias.requires_grad();
    n->has_bias = bias.defined();
    // Saved with their history: the backward pieces are differentiable (WGAN-GP's penalty).
    if (n->need_w || n->need_b) n->x = x;
    if (n->need_x) n->w = w;
    n->x_shape = x.shape();
    n->w_shape = w.shape();
    n->x_layout = x.layout();
    n->w_layout = w.layout();
    n->p = p;
    connect(n, {&x, &w, &bias}, {&y});
  }
  return y;
}

Tensor conv2d_backward_data(const Tensor& dy, const Tensor& w, const Shape& x_shape, const Layout& x_layout,
                            const Conv2dParams& p) {
  static const auto name = op_name("conv2d_backward_data");
  check_4d(dy, "conv2d_backward_data", "dy");
  check_4d(w, "conv2d_backward_data", "weight");
  check_same_device(dy, w, "conv2d_backward_data");
  OpScope scope(name);
  Tensor dx = backend_of(dy).conv2d_backward_data(dy, w, x_shape, x_layout, p);
  scope.add_work(compute_work(conv_flops(dy.shape(), w.shape()), bytes_of({&dy, &w, &dx})));
  if (needs_grad({&dy, &w})) {
    auto n = std::make_shared<Conv2dBackwardDataBackward>();
    n->need_dy = dy.requires_grad();
    n->need_w = w.requires_grad();
    if (n->need_dy) n->w = w;
    if (n->need_w) n->dy = dy;
    n->w_shape = w.shape();
    n->w_layout = w.layout();
    n->p = p;
    connect(n, {&dy, &w}, {&dx});
  }
  return dx;
}

WeightGrads conv2d_backward_weights(const Tensor& x, const Tensor& dy, const Shape& w_shape, bool bias,
                                    const Conv2dParams& p, const Layout& w_layout) {
  static const auto name = op_name("conv2d_backward_weights");
  check_4d(x, "conv2d_backward_weights", "input");
  check_4d(dy, "conv2d_backward_weights", "dy");
  check_same_device(x, dy, "conv2d_backward_weights");
  OpScope scope(name);
  WeightGrads r = backend_of(x).conv2d_backward_weights(x, dy, w_shape, bias, p, w_layout);
  scope.add_work(
      compute_work(conv_flops(dy.shape(), w_shape) + (bias ? dy.numel() : 0), bytes_of({&x, &dy, &r.dw, &r.dbias})));
  if (needs_grad({&x, &dy})) {
    auto n = std::make_shared<Conv2dBackwardWeightsBackward>();
    n->need_x = x.requires_grad();
    n->need_dy = dy.requires_grad();
    if (n->need_dy) n->x = x;
    if (n->need_x) n->dy = dy;
    n->x_shape = x.shape();
    n->x_layout = x.layout();
    n->w_shape = w_shape;
    n->p = p;
    std::vector<Tensor*> outs{&r.dw};
    if (r.dbias.defined()) outs.push_back(&r.dbias);
    connect(n, {&x, &dy}, outs);
  }
  return r;
}

}  // namespace ts::engine::ops
