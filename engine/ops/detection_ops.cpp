// The detection ops (Faster R-CNN): roi_align, roi_pool, smooth_l1_loss, index_select_rows /
// index_add_rows and permute. RoI coordinates are data, not parameters: they get no gradient,
// which is Faster R-CNN's approximate joint training.
#include <string>

#include "engine/ops/internal.h"

namespace ts::engine::ops {

namespace {

void check_index(const Tensor& index, const Tensor& x, const char* op) {
  check_defined(index, op, "index");
  check_same_device(x, index, op);
  if (index.dim() != 1) fail(op, "index must be 1-D, got " + shape_str(index.shape()));
  if (index.requires_grad() && thread_context().grad_enabled) fail(op, "index cannot require grad");
}

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
