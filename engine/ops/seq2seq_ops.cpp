// seq2seq's additive (Bahdanau) attention, fused into one op per decoder step (split:
// ops/layout.cpp).
#include <stdexcept>
#include <string>

#include "engine/ops/internal.h"

namespace ts::engine::ops {

namespace {

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
