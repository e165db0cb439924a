// The pointwise family's ops: ReLU, clipped ReLU, tanh, GELU, exp, add, mul, scale and dropout
// (any layout, kept). ReLU's, add's, mul's and scale's backward pieces are differentiable again
// (WGAN-GP's second order).
#include <string>
#include <vector>

#include "engine/ops/internal.h"

namespace ts::engine::ops {

namespace {

struct ReluBackward : Node {
  Tensor y;
  explicit ReluBackward(Tensor y_) : y(std::move(y_)) {}
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override { return {ops::relu_backward(g[0], y)}; }
  void release_saved() override { y = Tensor(); }
  std::string name() const override { return "ReluBackward"; }
};

// relu_backward(dy, y) is linear in dy (and piecewise constant in y).
struct ReluBackwardBackward : Node {
  Tensor y;
  explicit ReluBackwardBackward(Tensor y_) : y(std::move(y_)) {}
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    return {ops::relu_backward(g[0], y), Tensor()};
  }
  void release_saved() override { y = Tensor(); }
  std::string name() const override { return "ReluBackwardBackward"; }
};

// tanh's backward uses the output; x is kept only so that a second backward through this
// one fails loudly (the second derivative would also need y with its history).
struct TanhBackward : Node {
  Tensor x, y;
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    Tensor dx = backend_of(y).tanh_backward(g[0], y);
    add_op_work(memory_work({&g[0], &y, &dx}));
    detail::mark_not_differentiable("tanh_backward", {&g[0], &x}, {&dx});
    return {dx};
  }
  void release_saved() override { x = y = Tensor(); }
  std::string name() const override { return "TanhBackward"; }
};

// clipped_relu_backward(dy, y) is linear in dy: its own backward applies the same mask.
struct ClippedReluBackward : Node {
  Tensor y;
  float ceiling;
  ClippedReluBackward(Tensor y_, float c) : y(std::move(y_)), ceiling(c) {}
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    return {ops::clipped_relu_backward(g[0], y, ceiling)};
  }
  void release_saved() override { y = Tensor(); }
  std::string name() const override { return "ClippedReluBackward"; }
};

struct ClippedReluBackwardBackward : Node {
  Tensor y;
  float ceiling;
  ClippedReluBackwardBackward(Tensor y_, float c) : y(std::move(y_)), ceiling(c) {}
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    return {ops::clipped_relu_backward(g[0], y, ceiling), Tensor()};
  }
  void release_saved() override { y = Tensor(); }
  std::string name() const override { return "ClippedReluBackwardBackward"; }
};

struct AddBackward : Node {
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override { return {g[0], g[0]}; }
  std::string name() const override { return "AddBackward"; }
};

struct MulBackward : Node {
  Tensor a, b;  // kept with their history so that the backward is differentiable
  bool need_a, need_b;
  MulBackward(Tensor a_, Tensor b_, bool na, bool nb) : a(std::move(a_)), b(std::move(b_)), need_a(na), need_b(nb) {}
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    return {need_a ? ops::mul(g[0], b) : Tensor(), need_b ? ops::mul(g[0], a) : Tensor()};
  }
  void release_saved() override {
    a = Tensor();
    b = Tensor();
  }
  std::string name() const override { return "MulBackward"; }
};

struct ScaleBackward : Node {
  float s;
  explicit ScaleBackward(float s_) : s(s_) {}
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override { return {ops::scale(g[0], s)}; }
  std::string name() const override { return "ScaleBackward"; }
};

void check_binary(const Tensor& a, const Tensor& b, const char* op) {
  check_defined(a, op, "a");
  check_defined(b, op, "b");
  check_same_device(a, b, op);
  if (a.shape() != b.shape()) fail(op, "shapes differ: " + detail::shapes({&a, &b}));
}

struct GeluBackward : Node {
  Tensor x;
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    const Tensor dy = ops::to_layout(g[0], Layout::plain());
    Tensor dx = backend_of(x).gelu_backward(dy, x.detach());
    add_op_work(memory_work({&dy, &x, &dx}));
    mark_not_differentiable("gelu_backward", {&dy, &x}, {&dx});
    return {dx};
  }
  void release_saved() override { x = Tensor(); }
  std::string name() const override { return "GeluBackward"; }
};

struct ExpBackward : Node {
  Tensor x, y;
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    const Tensor dy = to_layout(g[0], Layout::plain());
    Tensor dx = backend_of(y).mul(dy, y);  // d exp(x) = exp(x) dx
    add_op_work(memory_work({&dy, &y, &dx}));
    detail::mark_not_differentiable("exp_backward", {&dy, &x}, {&dx});
    return {dx};
  }
  void release_saved() override { x = y = Tensor(); }
  std::string name() const override { return "ExpBackward"; }
};

}  // namespace

Tensor relu(const Tensor& x) {
  static const auto name = op_name("relu");
  check_defined(x, "relu", "x");
  OpScope scope(name);
  Tensor y = backend_of(x).relu_forward(x);
  scope.add_work(memory_work({&x, &y}));
  if (needs_grad({&x})) connect(std::make_shared<ReluBackward>(y.detach()), {&x}, {&y});
  return y;
}

Tensor relu_backward(const Tensor& dy, const Tensor& y) {
  static const auto name = op_name("relu_backward");
  check_binary(dy, y, "relu_backward");
  OpScope scope(name);
  Tensor dx = backend_of(y).relu_backward(dy, y);
  scope.add_work(memory_work({&dy, &y, &dx}));
  if (needs_grad({&dy, &y})) connect(std::make_shared<ReluBackwardBackward>(y.detach()), {&dy, &y}, {&dx});
  return dx;
}

Tensor tanh(const Tensor& x) {
  static const auto name = op_name("tanh");
  check_defined(x, "tanh", "x");
  OpScope scope(name);
  Tensor y = backend_of(x).tanh_forward(x);
  scope.add_work(memory_work({&x, &y}));
  if (needs_grad({&x})) {
    auto n = std::make_shared<TanhBackward>();
    n->x = x;
    n->y = y.detach();
    connect(n, {&x}, {&y});
  }
  return y;
}

Tensor clipped_relu(const Tensor& x, float ceiling) {
  static const auto name = op_name("clipped_relu");
  check_defined(x, "clipped_relu", "x");
  if (!(ceiling > 0.0f)) fail("clipped_relu", "ceiling must be positive, got " + std::to_string(ceiling));
  OpScope scope(name);
  Tensor y = backend_of(x).clipped_relu_forward(x, ceiling);
  scope.add_work(memory_work({&x, &y}));
  if (needs_grad({&x})) connect(std::make_shared<ClippedReluBackward>(y.detach(), ceiling), {&x}, {&y});
  return y;
}

Tensor clipped_relu_backward(const Tensor& dy, const Tensor& y, float ceiling) {
  static const auto name = op_name("clipped_relu_backward");
  check_binary(dy, y, "clipped_relu_backward");
  OpScope scope(name);
  Tensor dx = backend_of(y).clipped_relu_backward(dy, y, ceiling);
  scope.add_work(memory_work({&dy, &y, &dx}));
  if (needs_grad({&dy, &y})) {
    connect(std::make_shared<ClippedReluBackwardBackward>(y.detach(), ceiling), {&dy, &y}, {&dx});
  }
  return dx;
}

Tensor add(const Tensor& a, const Tensor& b) {
  static const auto name = op_name("add");
  check_binary(a, b, "add");
  OpScope scope(name);
  const Tensor bb = to_layout(b, a.layout());
  Tensor y = backend_of(a).add(a, bb);
  scope.add_work(memory_work({&a, &bb, &y}));
  if (needs_grad({&a, &bb})) connect(std::make_shared<AddBackward>(), {&a, &bb}, {&y});
  return y;
}

Tensor mul(const Tensor& a, const Tensor& b) {
  static const auto name = op_name("mul");
  check_binary(a, b, "mul");
  OpScope scope(name);
  const Tensor bb = to_layout(b, a.layout());
  Tensor y = backend_of(a).mul(a, bb);
  scope.add_work(memory_work({&a, &bb, &y}));
  if (needs_grad({&a, &bb})) {
    const bool na = a.requires_grad(), nb = bb.requires_grad();
    // Each gradient needs only the other factor.
    connect(std::make_shared<MulBackward>(nb ? a : Tensor(), na ? bb : Tensor(), na, nb), {&a, &bb}, {&y});
  }
  return y;
}

Tensor scale(const Tensor& x, float s) {
  static const auto name = op_name("scale");
  check_defined(x, "scale", "x");
  OpScope scope(name);
  Tensor y = backend_of(x).scale(x, s);
  scope.add_work(memory_work({&x, &y}));
  if (needs_grad({&x})) connect(std::make_shared<ScaleBackward>(s), {&x}, {&y});
  return y;
}

Tensor gelu(const Tensor& x_in) {
  static const auto name = op_name("gelu");
  check_defined(x_in, "gelu", "x");
  OpScope scope(name);
  const Tensor x = to_layout(x_in, Layout::plain());
  Tensor y = backend_of(x).gelu_forward(x);
  scope.add_work(memory_work({&x, &y}));
  if (needs_grad({&x})) {
    auto n = std::make_shared<GeluBackward>();
    n->x = x;
    connect(n, {&x}, {&y});
  }
  return y;
}

Tensor dropout(const Tensor& x, float p, uint64_t seed, bool training) {
  static const auto name = op_name("dropout");
  check_defined(x, "dropout", "x");
  if (!(p >= 0.0f && p < 1.0f)) fail("dropout", "p must be in [0, 1), got " + std::to_string(p));
  if (!training || p == 0.0f) return x;
  OpScope scope(name);
  const Tensor xp = to_layout(x, Layout::plain());
  Tensor mask;
  {
    NoGradScope no_grad;
    mask = backend_of(xp).dropout_mask(xp.shape(), p, seed);
    if (!xp.device().is_cpu()) {
      Tensor m = Tensor::empty(mask.shape(), xp.device());
      backend_of(m).copy(mask, m);
      mask = m;
    }
  }
  scope.add_work(memory_work({&mask}));  // drawing the mask; the product is mul's
  // y = x * mask: mul's backward is the mask again, and is twice differentiable.
  return mul(xp, mask);
}

Tensor exp(const Tensor& x) {
  static const auto name = op_name("exp");
  detail::check_defined(x, "exp", "x");
  OpScope scope(name);
  const Tensor xp = to_layout(x, Layout::plain());
  Tensor y = backend_of(xp).exp_forward(xp);
  scope.add_work(memory_work({&xp, &y}));
  if (needs_grad({&xp})) {
    auto n = std::make_shared<ExpBackward>();
    n->x = xp;
    n->y = y.detach();
    connect(n, {&xp}, {&y});
  }
  return y;
}

}  // namespace ts::engine::ops
