// relu, clipped relu, add, mul, scale, sum, mean and the layout/shape ops (all twice
// differentiable), and tanh.
#include "engine/ops/internal.h"

#include <stdexcept>
#include <string>

namespace ts::engine::ops {

namespace {

struct ToLayoutBackward : Node {
  Layout from;
  explicit ToLayoutBackward(Layout f) : from(f) {}
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override { return {ops::to_layout(g[0], from)}; }
  std::string name() const override { return "ToLayoutBackward"; }
};

struct ReshapeBackward : Node {
  Shape in_shape;
  explicit ReshapeBackward(Shape s) : in_shape(std::move(s)) {}
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override { return {ops::reshape(g[0], in_shape)}; }
  std::string name() const override { return "ReshapeBackward"; }
};

}  // namespace

// ---------------------------------------------------------------- layout and shape

Tensor to_layout(const Tensor& x, const Layout& layout) {
  static const auto name = op_name("to_layout");
  check_defined(x, "to_layout", "x");
  if (x.layout() == layout) return x;
  if (layout.kind != Layout::Kind::plain && x.dim() != 4) {
    fail("to_layout", "layout " + layout.str() + " needs a 4-D tensor, got " + shape_str(x.shape()));
  }
  OpScope scope(name);
  Tensor y = backend_of(x).to_layout(x, layout);
  if (needs_grad({&x})) connect(std::make_shared<ToLayoutBackward>(x.layout()), {&x}, {&y});
  return y;
}

Tensor reshape(const Tensor& x, const Shape& shape) {
  static const auto name = op_name("reshape");
  check_defined(x, "reshape", "x");
  if (shape_numel(shape) != x.numel()) {
    fail("reshape", "cannot reshape " + shape_str(x.shape()) + " into " + shape_str(shape));
  }
  OpScope scope(name);
  const Tensor xp = to_layout(x, Layout::plain());
  Tensor y = xp.detach().view(shape);
  if (needs_grad({&xp})) connect(std::make_shared<ReshapeBackward>(x.shape()), {&xp}, {&y});
  return y;
}

Tensor flatten(const Tensor& x) {
  check_defined(x, "flatten", "x");
  if (x.dim() < 1) fail("flatten", "needs at least one dimension");
  int64_t rest = 1;
  for (int64_t d = 1; d < x.dim(); ++d) rest *= x.size(d);
  return reshape(x, {x.size(0), rest});
}

// ---------------------------------------------------------------- element-wise

namespace detail {

}  // namespace detail

}  // namespace ts::engine::ops

