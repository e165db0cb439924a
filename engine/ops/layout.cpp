// The layout family's ops: to_layout, reshape and flatten, concat, slice, split, permute and the
// row gather/scatter (index_select_rows / index_add_rows). Each moves or copies values without
// arithmetic, so each is differentiable again (its backward is another layout op).
#include <string>
#include <vector>

#include "engine/ops/internal.h"

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

struct ConcatBackward : Node {
  int64_t dim;
  std::vector<int64_t> sizes;
  std::vector<Layout> layouts;
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    std::vector<Tensor> r;
    int64_t off = 0;
    for (size_t k = 0; k < sizes.size(); ++k) {
      r.push_back(ops::to_layout(ops::slice(g[0], dim, off, sizes[k]), layouts[k]));
      off += sizes[k];
    }
    return r;
  }
  std::string name() const override { return "ConcatBackward"; }
};

struct SliceBackward : Node {
  Shape x_shape;
  Layout x_layout;
  int64_t dim, start;
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    const int64_t len = g[0].size(dim);
    const int64_t after = x_shape[static_cast<size_t>(dim)] - start - len;
    std::vector<Tensor> parts;
    auto zeros = [&](int64_t n) {
      Shape s = x_shape;
      s[static_cast<size_t>(dim)] = n;
      return Tensor::zeros(s, g[0].device());
    };
    if (start > 0) parts.push_back(zeros(start));
    parts.push_back(g[0]);
    if (after > 0) parts.push_back(zeros(after));
    Tensor full = parts.size() == 1 ? g[0] : ops::concat(parts, dim);
    return {ops::to_layout(full, x_layout)};
  }
  std::string name() const override { return "SliceBackward"; }
};

struct SplitBackward : Node {
  Shape x_shape;
  Layout x_layout;
  Device device = Device::cpu();
  int64_t dim = 0;
  std::vector<int64_t> sizes;
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    std::vector<Tensor> parts;
    parts.reserve(sizes.size());
    for (size_t k = 0; k < sizes.size(); ++k) {
      if (k < g.size() && g[k].defined()) {
        parts.push_back(ops::to_layout(g[k], Layout::plain()));
      } else {
        Shape s = x_shape;
        s[static_cast<size_t>(dim)] = sizes[k];
        parts.push_back(Tensor::zeros(s, device));
      }
    }
    const Tensor full = parts.size() == 1 ? parts[0] : ops::concat(parts, dim);
    return {ops::to_layout(full, x_layout)};
  }
  std::string name() const override { return "SplitBackward"; }
};

void check_index(const Tensor& index, const Tensor& x, const char* op) {
  check_defined(index, op, "index");
  check_same_device(x, index, op);
  if (index.dim() != 1) fail(op, "index must be 1-D, got " + shape_str(index.shape()));
  if (index.requires_grad() && thread_context().grad_enabled) fail(op, "index cannot require grad");
}

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

Tensor to_layout(const Tensor& x, const Layout& layout) {
  static const auto name = op_name("to_layout");
  check_defined(x, "to_layout", "x");
  if (x.layout() == layout) return x;
  if (layout.kind != Layout::Kind::plain && x.dim() != 4) {
    fail("to_layout", "layout " + layout.str() + " needs a 4-D tensor, got " + shape_str(x.shape()));
  }
  OpScope scope(name);
  Tensor y = backend_of(x).to_layout(x, layout);
  scope.add_work(reorder_work(bytes_of({&x, &y})));
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
  Tensor y = xp.detach().view(shape);  // a view: no work of its own (its time is the framework's)
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

Tensor concat(const std::vector<Tensor>& xs, int64_t dim) {
  static const auto name = op_name("concat");
  if (xs.empty()) fail("concat", "no inputs");
  for (const auto& t : xs) {
    check_defined(t, "concat", "input");
    check_same_device(xs[0], t, "concat");
  }
  const int64_t rank = xs[0].dim();
  const int64_t d = dim < 0 ? dim + rank : dim;
  if (d < 0 || d >= rank) fail("concat", "dim " + std::to_string(dim) + " for rank " + std::to_string(rank));
  for (const auto& t : xs) {
    bool ok = t.dim() == rank;
    for (int64_t k = 0; ok && k < rank; ++k) ok = k == d || t.size(k) == xs[0].size(k);
    if (!ok)
      fail("concat", "shapes " + shape_str(xs[0].shape()) + " and " + shape_str(t.shape()) + " differ outside dim " +
                         std::to_string(d));
  }
  OpScope scope(name);
  Tensor y = backend_of(xs[0]).concat(xs, d);
  scope.add_work(reorder_work(bytes_of(xs) + bytes_of({&y})));
  if (needs_grad(xs)) {
    auto n = std::make_shared<ConcatBackward>();
    n->dim = d;
    std::vector<const Tensor*> ins;
    for (const auto& t : xs) {
      n->sizes.push_back(t.size(d));
      n->layouts.push_back(t.layout());
      ins.push_back(&t);
    }
    connect(n, ins, {&y});
  }
  return y;
}

Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t length) {
  static const auto name = op_name("slice");
  check_defined(x, "slice", "input");
  const int64_t d = dim < 0 ? dim + x.dim() : dim;
  if (d < 0 || d >= x.dim() || start < 0 || length < 0 || start + length > x.size(d)) {
    fail("slice", "dim " + std::to_string(dim) + " start " + std::to_string(start) + " length " +
                      std::to_string(length) + " out of range for " + shape_str(x.shape()));
  }
  OpScope scope(name);
  Tensor y = backend_of(x).slice(x, d, start, length);
  scope.add_work(reorder_work(2 * bytes_of({&y})));  // the slice read, and written
  if (needs_grad({&x})) {
    auto n = std::make_shared<SliceBackward>();
    n->x_shape = x.shape();
    n->x_layout = x.layout();
    n->dim = d;
    n->start = start;
    connect(n, {&x}, {&y});
  }
  return y;
}

std::vector<Tensor> split(const Tensor& x_in, int64_t dim, const std::vector<int64_t>& sizes) {
  static const auto name = op_name("split");
  check_defined(x_in, "split", "input");
  const int64_t d = dim < 0 ? dim + x_in.dim() : dim;
  if (d < 0 || d >= x_in.dim()) fail("split", "dim " + std::to_string(dim) + " for " + shape_str(x_in.shape()));
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0) fail("split", "negative part size " + std::to_string(s));
    total += s;
  }
  if (sizes.empty() || total != x_in.size(d)) {
    fail("split", std::to_string(sizes.size()) + " parts of " + std::to_string(total) + " along dim " +
                      std::to_string(d) + " of " + shape_str(x_in.shape()));
  }
  OpScope scope(name);
  const Tensor x = to_layout(x_in, Layout::plain());
  std::vector<Tensor> parts;
  parts.reserve(sizes.size());
  int64_t start = 0;
  for (int64_t s : sizes) {
    parts.push_back(backend_of(x).slice(x, d, start, s));
    start += s;
  }
  scope.add_work(reorder_work(2 * bytes_of(parts)));
  if (needs_grad({&x})) {
    auto n = std::make_shared<SplitBackward>();
    n->x_shape = x.shape();
    n->x_layout = x.layout();
    n->dim = d;
    n->sizes = sizes;
    n->device = x.device();
    std::vector<Tensor*> outs;
    outs.reserve(parts.size());
    for (auto& p : parts) outs.push_back(&p);
    connect(n, {&x}, outs);
  }
  return parts;
}

Tensor index_select_rows(const Tensor& x, const Tensor& index) {
  static const auto name = op_name("index_select_rows");
  check_defined(x, "index_select_rows", "input");
  if (x.dim() < 1) fail("index_select_rows", "input needs at least one dimension");
  check_index(index, x, "index_select_rows");
  OpScope scope(name);
  Tensor y = backend_of(x).index_select_rows(x, index);
  scope.add_work(reorder_work(2 * bytes_of({&y}) + bytes_of({&index})));  // the rows read, and written
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
  scope.add_work(reorder_work(bytes_of({&src, &index, &y})));
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
  scope.add_work(reorder_work(bytes_of({&x, &y})));
  if (needs_grad({&x})) {
    auto n = std::make_shared<PermuteBackward>();
    n->inverse = std::move(inverse);
    connect(n, {&x}, {&y});
  }
  return y;
}

}  // namespace ts::engine::ops
