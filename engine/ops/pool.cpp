// The pool family's ops: max and average pooling, global average pooling and nearest
// upsampling (WGAN-GP's generator); average pooling's and upsampling's backward pieces
// are differentiable again, max pooling's first order only.
#include <string>
#include <vector>

#include "engine/ops/internal.h"

namespace ts::engine::ops {

namespace {

struct MaxPoolBackward : Node {
  Tensor workspace;
  Shape x_shape;
  Layout x_layout;
  Pool2dParams p;
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    Tensor dx = backend_of(g[0]).max_pool2d_backward(g[0], workspace, x_shape, x_layout, p);
    add_op_work(memory_work({&g[0], &workspace, &dx}));
    mark_not_differentiable("max_pool2d_backward", {&g[0]}, {&dx});
    return {dx};
  }
  void release_saved() override { workspace = Tensor(); }
  std::string name() const override { return "MaxPool2dBackward"; }
};

struct AvgPoolBackward : Node {
  Shape x_shape;
  Layout x_layout;
  Pool2dParams p;
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    return {ops::avg_pool2d_backward(g[0], x_shape, x_layout, p)};
  }
  std::string name() const override { return "AvgPool2dBackward"; }
};

// avg_pool2d_backward is linear in dy and its adjoint is the forward pooling.
struct AvgPoolBackwardBackward : Node {
  Pool2dParams p;
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override { return {ops::avg_pool2d(g[0], p)}; }
  std::string name() const override { return "AvgPool2dBackwardBackward"; }
};

// Upsampling and its backward are adjoint linear maps: each one's backward is the other.
struct UpsampleNearestBackward : Node {
  int64_t factor;
  explicit UpsampleNearestBackward(int64_t f) : factor(f) {}
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    return {ops::upsample_nearest2d_backward(g[0], factor)};
  }
  std::string name() const override { return "UpsampleNearest2dBackward"; }
};

struct UpsampleNearestBackwardBackward : Node {
  int64_t factor;
  explicit UpsampleNearestBackwardBackward(int64_t f) : factor(f) {}
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    return {ops::upsample_nearest2d(g[0], factor)};
  }
  std::string name() const override { return "UpsampleNearest2dBackwardBackward"; }
};

void check_factor(int64_t factor, const char* op) {
  if (factor < 1) fail(op, "factor must be >= 1, got " + std::to_string(factor));
}

}  // namespace

Tensor max_pool2d(const Tensor& x, const Pool2dParams& p) {
  static const auto name = op_name("max_pool2d");
  check_4d(x, "max_pool2d", "input");
  OpScope scope(name);
  PoolResult r = backend_of(x).max_pool2d_forward(x, p);
  scope.add_work(memory_work({&x, &r.y, &r.workspace}));
  if (needs_grad({&x})) {
    auto n = std::make_shared<MaxPoolBackward>();
    n->workspace = r.workspace;
    n->x_shape = x.shape();
    n->x_layout = x.layout();
    n->p = p;
    connect(n, {&x}, {&r.y});
  }
  return r.y;
}

Tensor avg_pool2d(const Tensor& x, const Pool2dParams& p) {
  static const auto name = op_name("avg_pool2d");
  check_4d(x, "avg_pool2d", "input");
  OpScope scope(name);
  Tensor y = backend_of(x).avg_pool2d_forward(x, p);
  scope.add_work(memory_work({&x, &y}));
  if (needs_grad({&x})) {
    auto n = std::make_shared<AvgPoolBackward>();
    n->x_shape = x.shape();
    n->x_layout = x.layout();
    n->p = p;
    connect(n, {&x}, {&y});
  }
  return y;
}

Tensor avg_pool2d_backward(const Tensor& dy, const Shape& x_shape, const Layout& x_layout, const Pool2dParams& p) {
  static const auto name = op_name("avg_pool2d_backward");
  check_4d(dy, "avg_pool2d_backward", "dy");
  OpScope scope(name);
  Tensor dx = backend_of(dy).avg_pool2d_backward(dy, x_shape, x_layout, p);
  scope.add_work(memory_work({&dy, &dx}));
  if (needs_grad({&dy})) {
    auto n = std::make_shared<AvgPoolBackwardBackward>();
    n->p = p;
    connect(n, {&dy}, {&dx});
  }
  return dx;
}

Tensor global_avg_pool2d(const Tensor& x) {
  static const auto name = op_name("global_avg_pool2d");
  check_4d(x, "global_avg_pool2d", "input");
  OpScope scope(name);
  Pool2dParams p;
  p.kernel_h = x.size(2);
  p.kernel_w = x.size(3);
  p.stride_h = p.kernel_h;
  p.stride_w = p.kernel_w;
  // [N, C, 1, 1] in a blocked layout with C % block == 0 is already [N, C]: flatten's
  // to_layout is then a relabel, not a copy.
  return flatten(avg_pool2d(x, p));
}

Tensor upsample_nearest2d(const Tensor& x, int64_t factor) {
  static const auto name = op_name("upsample_nearest2d");
  check_4d(x, "upsample_nearest2d", "input");
  check_factor(factor, "upsample_nearest2d");
  OpScope scope(name);
  Tensor y = backend_of(x).upsample_nearest2d_forward(x, factor);
  scope.add_work(memory_work({&x, &y}));
  if (needs_grad({&x})) connect(std::make_shared<UpsampleNearestBackward>(factor), {&x}, {&y});
  return y;
}

Tensor upsample_nearest2d_backward(const Tensor& dy, int64_t factor) {
  static const auto name = op_name("upsample_nearest2d_backward");
  check_4d(dy, "upsample_nearest2d_backward", "dy");
  check_factor(factor, "upsample_nearest2d_backward");
  if (dy.size(2) % factor != 0 || dy.size(3) % factor != 0) {
    fail("upsample_nearest2d_backward", shape_str(dy.shape()) + " is not a multiple of " + std::to_string(factor));
  }
  OpScope scope(name);
  Tensor dx = backend_of(dy).upsample_nearest2d_backward(dy, factor);
  scope.add_work(memory_work({&dy, &dx}));
  if (needs_grad({&dy})) connect(std::make_shared<UpsampleNearestBackwardBackward>(factor), {&dy}, {&dx});
  return dx;
}

}  // namespace ts::engine::ops
