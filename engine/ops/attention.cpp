// The attention family's ops: scaled dot-product multi-head attention (the transformer's; key
// lengths mask the padding, optionally causal) and additive (Bahdanau) attention, fused into one
// op per decoder step (seq2seq). Both first order.
#include <string>
#include <vector>

#include "engine/ops/internal.h"

namespace ts::engine::ops {

namespace {

// Scores q k^T and the weighted sum probs v, each 2 B Tq Tk E (E = heads x head size): what a
// dense kernel computes, causal or not. Backward does twice that (dq, dk from the scores' gradient;
// dv and the probabilities' gradient).
int64_t attention_flops(const Tensor& q, const Tensor& k) { return 4 * q.size(0) * q.size(1) * k.size(1) * q.size(2); }

// Per query and key: the score v . tanh(q + k) (about 4 A) and the context's share (2 D).
int64_t additive_attention_flops(const Tensor& keys, const Tensor& values) {
  return keys.size(0) * keys.size(1) * (4 * keys.size(2) + 2 * values.size(2));
}

struct AttentionBackward : Node {
  Tensor q, k, v, probs;
  int64_t heads;
  float scale;
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    const Tensor dout = ops::to_layout(g[0], Layout::plain());
    Backend::AttentionGrads r =
        backend_of(q).attention_backward(dout, q.detach(), k.detach(), v.detach(), probs, heads, scale);
    add_op_work(compute_work(2 * attention_flops(q, k), bytes_of({&dout, &q, &k, &v, &probs, &r.dq, &r.dk, &r.dv})));
    mark_not_differentiable("attention_backward", {&dout, &q, &k, &v}, {&r.dq, &r.dk, &r.dv});
    return {r.dq, r.dk, r.dv};
  }
  void release_saved() override { q = k = v = probs = Tensor(); }
  std::string name() const override { return "AttentionBackward"; }
};

struct AdditiveAttentionBackward : Node {
  Tensor query, keys, values, v, probs;
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    const Tensor dcontext = ops::to_layout(g[0], Layout::plain());
    Backend::AdditiveAttentionGrads r = backend_of(query).additive_attention_backward(
        dcontext, query.detach(), keys.detach(), values.detach(), v.detach(), probs);
    add_op_work(memory_work({&dcontext, &query, &keys, &values, &v, &probs, &r.dquery, &r.dkeys, &r.dvalues, &r.dv},
                            2 * additive_attention_flops(keys, values)));
    mark_not_differentiable("additive_attention_backward", {&dcontext, &query, &keys, &values, &v},
                            {&r.dquery, &r.dkeys, &r.dvalues, &r.dv});
    return {r.dquery, r.dkeys, r.dvalues, r.dv};
  }
  void release_saved() override { query = keys = values = v = probs = Tensor(); }
  std::string name() const override { return "AdditiveAttentionBackward"; }
};

}  // namespace

Tensor attention(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, const Tensor& key_lengths, int64_t heads,
                 float scale, bool causal) {
  static const auto name = op_name("attention");
  check_defined(q_in, "attention", "q");
  check_defined(k_in, "attention", "k");
  check_defined(v_in, "attention", "v");
  check_same_device(q_in, k_in, "attention");
  check_same_device(q_in, v_in, "attention");
  if (q_in.dim() != 3 || k_in.dim() != 3 || v_in.shape() != k_in.shape() || q_in.size(0) != k_in.size(0) ||
      q_in.size(2) != k_in.size(2) || heads < 1 || q_in.size(2) % heads != 0) {
    fail("attention", "q [B, Tq, H dh], k and v [B, Tk, H dh] expected, got " + detail::shapes({&q_in, &k_in, &v_in}) +
                          " with " + std::to_string(heads) + " heads");
  }
  if (key_lengths.defined() && (key_lengths.dim() != 1 || key_lengths.size(0) != q_in.size(0))) {
    fail("attention", "key_lengths must be [B], got " + shape_str(key_lengths.shape()));
  }
  OpScope scope(name);
  const Tensor q = to_layout(q_in, Layout::plain()), k = to_layout(k_in, Layout::plain()),
               v = to_layout(v_in, Layout::plain());
  Backend::AttentionResult r =
      backend_of(q).attention_forward(q, k, v, key_lengths.defined() ? &key_lengths : nullptr, heads, scale, causal);
  scope.add_work(compute_work(attention_flops(q, k), bytes_of({&q, &k, &v, &r.probs, &r.out})));
  if (needs_grad({&q, &k, &v})) {
    auto n = std::make_shared<AttentionBackward>();
    n->q = q;
    n->k = k;
    n->v = v;
    n->probs = r.probs;
    n->heads = heads;
    n->scale = scale;
    connect(n, {&q, &k, &v}, {&r.out});
  }
  return r.out;
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
  scope.add_work(
      memory_work({&query, &keys, &values, &v, &r.probs, &r.context}, additive_attention_flops(keys, values)));
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
