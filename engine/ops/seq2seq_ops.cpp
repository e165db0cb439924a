// The ops of seq2seq's step-by-step decoder: split (one node for a sequence cut into steps) and
// additive (Bahdanau) attention, fused into one op per decoder step.
#include <stdexcept>
#include <string>

#include "engine/ops/internal.h"

namespace ts::engine::ops {

namespace {

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

struct AdditiveAttentionBackward : Node {
  Tensor query, keys, values, v, probs;
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    const Tensor dcontext = ops::to_layout(g[0], Layout::plain());
    Backend::AdditiveAttentionGrads r =
        backend_of(query).additive_attention_backward(dcontext, query.detach(), keys.detach(), values.detach(),
                                                      v.detach(), probs);
    mark_not_differentiable("additive_attention_backward", {&dcontext, &query, &keys, &values, &v},
                            {&r.dquery, &r.dkeys, &r.dvalues, &r.dv});
    return {r.dquery, r.dkeys, r.dvalues, r.dv};
  }
  void release_saved() override { query = keys = values = v = probs = Tensor(); }
  std::string name() const override { return "AdditiveAttentionBackward"; }
};

}  // namespace

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

Tensor additive_attention(const Tensor& query_in, const Tensor& keys_in, const Tensor& values_in, const Tensor& v_in,
                          const Tensor& lengths, Tensor* probs) {
  static const auto name = op_name("additive_attention");
  const char* op = "additive_attention";
  check_defined(query_in, op, "query");
  check_defined(keys_in, op, "keys");
  check_defined(values_in, op, "values");
  check_defined(v_in, op, "v");
  for (const Tensor* t : {&keys_in, &values_in, &v_in}) check_same_device(query_in, *t, op);
  if (query_in.dim() != 2 || keys_in.dim() != 3 || values_in.dim() != 3 || v_in.dim() != 1 ||
      keys_in.size(0) != query_in.size(0) || keys_in.size(2) != query_in.size(1) ||
      values_in.size(0) != query_in.size(0) || values_in.size(1) != keys_in.size(1) ||
      v_in.size(0) != query_in.size(1)) {
    fail(op, "query [B, A], keys [B, S, A], values [B, S, D] and v [A] expected, got " +
                 detail::shapes({&query_in, &keys_in, &values_in, &v_in}));
  }
  if (lengths.defined()) {
    if (lengths.dim() != 1 || lengths.size(0) != query_in.size(0)) {
      fail(op, "lengths must be [B], got " + shape_str(lengths.shape()));
    }
    check_same_device(query_in, lengths, op);
  }
  OpScope scope(name);
  const Tensor query = to_layout(query_in, Layout::plain()), keys = to_layout(keys_in, Layout::plain()),
               values = to_layout(values_in, Layout::plain()), v = to_layout(v_in, Layout::plain());
  const Tensor lens = lengths.defined() ? lengths.detach() : Tensor();
  Backend::AdditiveAttentionResult r =
      backend_of(query).additive_attention_forward(query, keys, values, v, lens.defined() ? &lens : nullptr);
  if (needs_grad({&query, &keys, &values, &v})) {
    auto n = std::make_shared<AdditiveAttentionBackward>();
    n->query = query;
    n->keys = keys;
    n->values = values;
    n->v = v;
    n->probs = r.probs;
    connect(n, {&query, &keys, &values, &v}, {&r.context});
  }
  if (probs) *probs = r.probs;
  return r.context;
}

}  // namespace ts::engine::ops
