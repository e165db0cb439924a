// The sequence models' ops: layer norm, GELU, dropout, multi-head attention and the
// label-smoothed cross-entropy. Their backward pieces are first order (a second backward
// through them throws); the inputs are brought to the plain layout the kernels take.
#include "engine/ops/internal.h"

namespace ts::engine::ops {

namespace {

struct AttentionBackward : Node {
  Tensor q, k, v, probs;
  int64_t heads;
  float scale;
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    const Tensor dout = ops::to_layout(g[0], Layout::plain());
    Backend::AttentionGrads r =
        backend_of(q).attention_backward(dout, q.detach(), k.detach(), v.detach(), probs, heads, scale);
    mark_not_differentiable("attention_backward", {&dout, &q, &k, &v}, {&r.dq, &r.dk, &r.dv});
    return {r.dq, r.dk, r.dv};
  }
  void release_saved() override { q = k = v = probs = Tensor(); }
  std::string name() const override { return "AttentionBackward"; }
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
    fail("attention", "q [B, Tq, H dh], k and v [B, Tk, H dh] expected, got " +
                          detail::shapes({&q_in, &k_in, &v_in}) + " with " + std::to_string(heads) + " heads");
  }
  if (key_lengths.defined() && (key_lengths.dim() != 1 || key_lengths.size(0) != q_in.size(0))) {
    fail("attention", "key_lengths must be [B], got " + shape_str(key_lengths.shape()));
  }
  OpScope scope(name);
  const Tensor q = to_layout(q_in, Layout::plain()), k = to_layout(k_in, Layout::plain()),
               v = to_layout(v_in, Layout::plain());
  Backend::AttentionResult r =
      backend_of(q).attention_forward(q, k, v, key_lengths.defined() ? &key_lengths : nullptr, heads, scale, causal);
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

}  // namespace ts::engine::ops
