// The recurrent layers' ops (one layer, one direction): LSTM and GRU over time-major input with
// per-sequence lengths. One node per layer call; its backward is the backend's backward through
// time, first order only (a second backward through it throws).
#include <algorithm>
#include <stdexcept>
#include <string>

#include "engine/ops/internal.h"

namespace ts::engine::ops {

namespace {

// The rows of real steps (padding costs nothing: rnn_schedule.h) times one step's two GEMMs,
// 2 G H (I + H) per row; lengths on a device are not read (that would wait for it): every step
// counts then. Backward does twice that (the inputs' and the weights' gradients).
int64_t rnn_flops(const Backend::RnnArgs& a) {
  int64_t rows = a.x.size(0) * a.x.size(1);
  if (a.lengths.defined() && a.lengths.device().is_cpu()) {
    rows = 0;
    const float* len = a.lengths.data();
    for (int64_t b = 0; b < a.lengths.numel(); ++b)
      rows += std::clamp<int64_t>(static_cast<int64_t>(len[b]), 0, a.x.size(0));
  }
  return 2 * rows * a.w_hh.size(0) * (a.w_ih.size(1) + a.w_hh.size(1));
}

// Inputs in connect order: x, h0, c0, w_ih, w_hh, b_ih, b_hh (c0 undefined for the GRU).
struct RnnBackward : Node {
  Backend::RnnArgs args;  // with their history: a second backward must fail loudly, not drop terms
  Tensor y, reserve;      // y detached (it is this node's own output)
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    const bool lstm = args.cell == Backend::RnnCell::lstm;
    auto wanted = [&](size_t i, const Tensor& t) { return t.defined() && t.requires_grad() && input_needed(i); };
    Backend::RnnNeed need;
    need.dx = wanted(0, args.x);
    need.dh0 = wanted(1, args.h0);
    need.dc0 = wanted(2, args.c0);
    need.weights = wanted(3, args.w_ih) || wanted(4, args.w_hh) || wanted(5, args.b_ih) || wanted(6, args.b_hh);
    const Tensor dy = g[0].defined() ? ops::to_layout(g[0], Layout::plain()) : Tensor();
    const Tensor dh_n = g.size() > 1 && g[1].defined() ? ops::to_layout(g[1], Layout::plain()) : Tensor();
    const Tensor dc_n = lstm && g.size() > 2 && g[2].defined() ? ops::to_layout(g[2], Layout::plain()) : Tensor();
    Backend::RnnGrads r = backend_of(args.x).rnn_backward(args, y, reserve, dy, dh_n, dc_n, need);
    add_op_work(compute_work(2 * rnn_flops(args), bytes_of({&dy, &args.x, &args.w_ih, &args.w_hh, &y, &reserve, &r.dx,
                                                            &r.dw_ih, &r.dw_hh})));
    std::vector<Tensor*> outs;
    for (Tensor* t : {&r.dx, &r.dh0, &r.dc0, &r.dw_ih, &r.dw_hh, &r.db_ih, &r.db_hh}) {
      if (t->defined()) outs.push_back(t);
    }
    if (!outs.empty()) {
      mark_not_differentiable(
          lstm ? "lstm_backward" : "gru_backward",
          {&dy, &dh_n, &dc_n, &args.x, &args.h0, &args.c0, &args.w_ih, &args.w_hh, &args.b_ih, &args.b_hh}, outs);
    }
    return {need.dx ? r.dx : Tensor(),         need.dh0 ? r.dh0 : Tensor(),       need.dc0 ? r.dc0 : Tensor(),
            need.weights ? r.dw_ih : Tensor(), need.weights ? r.dw_hh : Tensor(), need.weights ? r.db_ih : Tensor(),
            need.weights ? r.db_hh : Tensor()};
  }
  void release_saved() override {
    const auto cell = args.cell;
    const bool reverse = args.reverse;
    args = Backend::RnnArgs();
    args.cell = cell;
    args.reverse = reverse;
    y = reserve = Tensor();
  }
  std::string name() const override { return args.cell == Backend::RnnCell::lstm ? "LstmBackward" : "GruBackward"; }
};

Tensor plain_or_undefined(const Tensor& t) { return t.defined() ? to_layout(t, Layout::plain()) : Tensor(); }

RnnOutput run(Backend::RnnCell cell, const Tensor& x_in, const Tensor& h0_in, const Tensor& c0_in, const Tensor& w_ih,
              const Tensor& w_hh, const Tensor& b_ih, const Tensor& b_hh, const Tensor& lengths, bool reverse) {
  const bool lstm = cell == Backend::RnnCell::lstm;
  const char* op = lstm ? "lstm" : "gru";
  static const auto lstm_name = op_name("lstm");
  static const auto gru_name = op_name("gru");
  check_defined(x_in, op, "x");
  check_defined(w_ih, op, "w_ih");
  check_defined(w_hh, op, "w_hh");
  const int64_t gates = lstm ? 4 : 3;
  if (x_in.dim() != 3 || w_ih.dim() != 2 || w_hh.dim() != 2 || w_hh.size(0) != gates * w_hh.size(1) ||
      w_ih.size(0) != w_hh.size(0) || w_ih.size(1) != x_in.size(2)) {
    fail(op, std::string("x [T, B, I], w_ih [") + std::to_string(gates) + " H, I] and w_hh [" + std::to_string(gates) +
                 " H, H] expected, got " + detail::shapes({&x_in, &w_ih, &w_hh}));
  }
  const int64_t batch = x_in.size(1), hidden = w_hh.size(1);
  for (const Tensor* t : {&w_ih, &w_hh, &b_ih, &b_hh, &h0_in, &c0_in}) {
    if (t->defined()) check_same_device(x_in, *t, op);
  }
  for (const Tensor* b : {&b_ih, &b_hh}) {
    if (b->defined() && (b->dim() != 1 || b->size(0) != w_hh.size(0))) {
      fail(op, "bias " + shape_str(b->shape()) + " for weights " + shape_str(w_hh.shape()));
    }
  }
  for (const Tensor* s : {&h0_in, &c0_in}) {
    if (s->defined() && s->shape() != Shape{batch, hidden}) {
      fail(op, "initial state " + shape_str(s->shape()) + " must be [B, H] = " + shape_str({batch, hidden}));
    }
  }
  if (lengths.defined()) {
    if (lengths.dim() != 1 || lengths.size(0) != batch)
      fail(op, "lengths must be [B], got " + shape_str(lengths.shape()));
    if (!lengths.device().is_cpu() && lengths.device() != x_in.device()) {
      fail(op, "lengths on " + lengths.device().str() + " for x on " + x_in.device().str());
    }
  }
  OpScope scope(lstm ? lstm_name : gru_name);
  Backend::RnnArgs a;
  a.cell = cell;
  a.x = to_layout(x_in, Layout::plain());
  a.h0 = plain_or_undefined(h0_in);
  a.c0 = lstm ? plain_or_undefined(c0_in) : Tensor();
  a.w_ih = to_layout(w_ih, Layout::plain());
  a.w_hh = to_layout(w_hh, Layout::plain());
  a.b_ih = b_ih;
  a.b_hh = b_hh;
  a.lengths = lengths.defined() ? lengths.detach() : Tensor();
  a.reverse = reverse;
  const bool grad = needs_grad({&a.x, &a.h0, &a.c0, &a.w_ih, &a.w_hh, &a.b_ih, &a.b_hh});
  Backend::RnnForwardResult r = backend_of(a.x).rnn_forward(a, grad);
  scope.add_work(compute_work(rnn_flops(a), bytes_of({&a.x, &a.w_ih, &a.w_hh, &r.y, &r.reserve})));
  RnnOutput out{r.y, r.h_n, r.c_n};
  if (grad) {
    auto n = std::make_shared<RnnBackward>();
    n->args = a;
    n->y = r.y.detach();
    n->reserve = r.reserve;
    std::vector<Tensor*> outs{&out.y, &out.h_n};
    if (lstm) outs.push_back(&out.c_n);
    connect(n, {&a.x, &a.h0, &a.c0, &a.w_ih, &a.w_hh, &a.b_ih, &a.b_hh}, outs);
  }
  return out;
}

}  // namespace

RnnOutput lstm(const Tensor& x, const Tensor& h0, const Tensor& c0, const Tensor& w_ih, const Tensor& w_hh,
               const Tensor& b_ih, const Tensor& b_hh, const Tensor& lengths, bool reverse) {
  return run(Backend::RnnCell::lstm, x, h0, c0, w_ih, w_hh, b_ih, b_hh, lengths, reverse);
}

RnnOutput gru(const Tensor& x, const Tensor& h0, const Tensor& w_ih, const Tensor& w_hh, const Tensor& b_ih,
              const Tensor& b_hh, const Tensor& lengths, bool reverse) {
  return run(Backend::RnnCell::gru, x, h0, Tensor(), w_ih, w_hh, b_ih, b_hh, lengths, reverse);
}

}  // namespace ts::engine::ops
