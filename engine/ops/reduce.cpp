// The reduction family's ops: sum and mean of every element (to a [1] tensor), and the scalar's
// expansion that is sum's backward (and whose backward is sum: twice differentiable).
#include <string>
#include <vector>

#include "engine/ops/internal.h"

namespace ts::engine::ops {

namespace {

struct SumBackward : Node {
  Shape shape;
  Layout layout;
  SumBackward(Shape s, Layout l) : shape(std::move(s)), layout(l) {}
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    return {detail::expand_scalar(g[0], shape, layout)};
  }
  std::string name() const override { return "SumBackward"; }
};

struct ExpandScalarBackward : Node {
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override { return {ops::sum(g[0])}; }
  std::string name() const override { return "ExpandScalarBackward"; }
};

}  // namespace

Tensor sum(const Tensor& x) {
  static const auto name = op_name("sum");
  check_defined(x, "sum", "x");
  OpScope scope(name);
  Tensor y = backend_of(x).sum_all(x);
  scope.add_work(memory_work({&x, &y}, x.numel()));
  if (needs_grad({&x})) connect(std::make_shared<SumBackward>(x.shape(), x.layout()), {&x}, {&y});
  return y;
}

Tensor mean(const Tensor& x) {
  static const auto name = op_name("mean");
  check_defined(x, "mean", "x");
  if (x.numel() == 0) fail("mean", "empty tensor " + shape_str(x.shape()));
  OpScope scope(name);
  return scale(sum(x), 1.0f / static_cast<float>(x.numel()));
}

namespace detail {

Tensor expand_scalar(const Tensor& g, const Shape& shape, const Layout& layout) {
  static const auto name = op_name("expand_scalar");
  check_defined(g, "expand_scalar", "g");
  if (g.numel() != 1) fail("expand_scalar", "needs a single value, got " + shape_str(g.shape()));
  OpScope scope(name);
  Tensor y = Tensor::empty(shape, g.device(), layout);
  backend_of(g).fill(y, g.item());
  scope.add_work(memory_work({&g, &y}));
  if (needs_grad({&g})) connect(std::make_shared<ExpandScalarBackward>(), {&g}, {&y});
  return y;
}

}  // namespace detail

}  // namespace ts::engine::ops
