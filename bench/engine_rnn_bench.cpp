// One recurrent layer, one direction, training step (forward that keeps what backward needs,
// then backward for every input and weight): our CPU kernels (engine/cpu/rnn.cpp) against
// oneDNN's RNN primitives (lstm_forward/lstm_backward, lbr_gru_forward/lbr_gru_backward, the
// GRU that matches PyTorch and cuDNN), at seq2seq's shape (T 50, B 128, I = H = 512) and
// Deep Speech 2's (B 32, I = H = 1760; T 50 here, as per-step cost does not depend on T).
// The oneDNN side is timed with the weight reorders a PyTorch-layout op would need around it
// (weights ldgoi -> the primitives' layouts, weight gradients back) and without them.
// GFLOPS counts the GEMM work, 3 x 2 T B G H (I + H) (forward; backward data and weights).
#include <benchmark/benchmark.h>

#include <oneapi/dnnl/dnnl.hpp>

#include <cstring>
#include <random>
#include <unordered_map>

#include "engine/cpu/cpu_backend.h"
#include "engine/tensor.h"

namespace {

using namespace ts::engine;

struct RnnShape {
  int64_t T, B, I, H;
};

const RnnShape kShapes[] = {
    {50, 128, 512, 512},   // seq2seq: 2-layer 512 LSTM, batch 128, sentences up to 50 tokens
    {50, 32, 1760, 1760},  // Deep Speech 2: GRU 1760, batch 32
};

Tensor random(const Shape& s, uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(static_cast<size_t>(shape_numel(s)));
  for (auto& x : v) x = u(rng);
  return Tensor::from_vector(s, v);
}

void set_counters(benchmark::State& state, const RnnShape& s, int64_t gates, double mean_len, bool fwd_only) {
  const double flops = (fwd_only ? 1.0 : 3.0) * 2.0 * mean_len * static_cast<double>(s.B * gates * s.H * (s.I + s.H));
  state.counters["GFLOPS"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// range(0): shape; range(1): 1 = variable lengths (uniform in [T/5, T], mean 0.6 T, as a
// translation batch has), 0 = all T; range(2): 1 = GRU, 0 = LSTM; range(3): 1 = forward only
// (training mode: what backward needs is kept), 0 = forward and backward.
void BM_Ours(benchmark::State& state) {
  const RnnShape& s = kShapes[state.range(0)];
  const bool variable = state.range(1) != 0, gru = state.range(2) != 0, fwd_only = state.range(3) != 0;
  const int64_t G = gru ? 3 : 4;
  auto& be = cpu::cpu_backend();
  Backend::RnnArgs a;
  a.cell = gru ? Backend::RnnCell::gru : Backend::RnnCell::lstm;
  a.x = random({s.T, s.B, s.I}, 1);
  a.w_ih = random({G * s.H, s.I}, 2, 0.05f);
  a.w_hh = random({G * s.H, s.H}, 3, 0.05f);
  a.b_ih = random({G * s.H}, 4, 0.05f);
  a.b_hh = random({G * s.H}, 5, 0.05f);
  a.h0 = random({s.B, s.H}, 6);
  if (!gru) a.c0 = random({s.B, s.H}, 7);
  double mean_len = static_cast<double>(s.T);
  if (variable) {
    std::vector<float> lens;
    std::mt19937_64 rng(8);
    double sum = 0;
    for (int64_t b = 0; b < s.B; ++b) {
      lens.push_back(
          static_cast<float>(s.T / 5 + static_cast<int64_t>(rng() % static_cast<uint64_t>(s.T - s.T / 5 + 1))));
      sum += lens.back();
    }
    a.lengths = Tensor::from_vector({s.B}, lens);
    mean_len = sum / static_cast<double>(s.B);
  }
  const Tensor dy = random({s.T, s.B, s.H}, 9), dh = random({s.B, s.H}, 10), dc = random({s.B, s.H}, 11);
  for (auto _ : state) {
    Backend::RnnForwardResult f = be.rnn_forward(a, true);
    if (fwd_only) continue;
    Backend::RnnGrads g = be.rnn_backward(a, f.y, f.reserve, dy, dh, gru ? Tensor() : dc, Backend::RnnNeed{});
    benchmark::DoNotOptimize(g.dw_hh.data());
  }
  set_counters(state, s, G, mean_len, fwd_only);
  state.SetLabel(variable ? "variable lengths" : "all T");
}

// oneDNN's primitives for the same step (all lengths T: oneDNN has no per-sequence lengths).
// range(1): 1 = with the weight reorders to and from PyTorch's layout; range(2): 1 = GRU;
// range(3): 1 = forward only.
void BM_Onednn(benchmark::State& state) {
  using namespace dnnl;
  using tag = memory::format_tag;
  using dt = memory::data_type;
  const RnnShape& s = kShapes[state.range(0)];
  const bool reorders = state.range(1) != 0, gru = state.range(2) != 0, fwd_only = state.range(3) != 0;
  const int64_t G = gru ? 3 : 4, T = s.T, N = s.B, I = s.I, H = s.H;
  engine eng(engine::kind::cpu, 0);
  stream strm(eng);
  auto md = [](const memory::dims& d, tag t) { return memory::desc(d, dt::f32, t); };
  const memory::desc src_layer = md({T, N, I}, tag::tnc), dst_layer = md({T, N, H}, tag::tnc);
  const memory::desc iter = md({1, 1, N, H}, tag::ldnc);
  const memory::desc w_layer_any = md({1, 1, I, G, H}, tag::any), w_iter_any = md({1, 1, H, G, H}, tag::any);
  // Four bias gates for both: the LSTM's, and lbr_gru's three plus b_hn (inside the reset product).
  const memory::desc bias = md({1, 1, 4, H}, tag::ldgo);
  const auto dir = rnn_direction::unidirectional_left2right;

  std::unordered_map<int, memory> fwd_args, bwd_args;
  auto mem = [&](const memory::desc& d) {
    memory m(d, eng);
    auto* p = static_cast<float*>(m.get_data_handle());
    std::mt19937_64 rng(static_cast<uint64_t>(d.get_size()));
    std::uniform_real_distribution<float> u(-0.05f, 0.05f);
    for (size_t i = 0; i < d.get_size() / sizeof(float); ++i) p[i] = u(rng);
    return m;
  };

  primitive fwd, bwd;
  memory::desc fwd_wl, fwd_wi, bwd_wl, bwd_wi, diff_wl, diff_wi, ws;
  std::string impl;
  if (gru) {
    lbr_gru_forward::desc fd(prop_kind::forward_training, dir, src_layer, iter, w_layer_any, w_iter_any, bias,
                             dst_layer, iter);
    lbr_gru_forward::primitive_desc fpd(fd, eng);
    lbr_gru_backward::desc bd(prop_kind::backward, dir, src_layer, iter, w_layer_any, w_iter_any, bias, dst_layer, iter,
                              src_layer, iter, w_layer_any, w_iter_any, bias, dst_layer, iter);
    lbr_gru_backward::primitive_desc bpd(bd, eng, fpd);
    fwd = lbr_gru_forward(fpd);
    bwd = lbr_gru_backward(bpd);
    fwd_wl = fpd.weights_layer_desc();
    fwd_wi = fpd.weights_iter_desc();
    bwd_wl = bpd.weights_layer_desc();
    bwd_wi = bpd.weights_iter_desc();
    diff_wl = bpd.diff_weights_layer_desc();
    diff_wi = bpd.diff_weights_iter_desc();
    ws = fpd.workspace_desc();
    impl = std::string(fpd.impl_info_str()) + " / " + bpd.impl_info_str();
  } else {
    lstm_forward::desc fd(prop_kind::forward_training, dir, src_layer, iter, iter, w_layer_any, w_iter_any, bias,
                          dst_layer, iter, iter);
    lstm_forward::primitive_desc fpd(fd, eng);
    lstm_backward::desc bd(prop_kind::backward, dir, src_layer, iter, iter, w_layer_any, w_iter_any, bias, dst_layer,
                           iter, iter, src_layer, iter, iter, w_layer_any, w_iter_any, bias, dst_layer, iter, iter);
    lstm_backward::primitive_desc bpd(bd, eng, fpd);
    fwd = lstm_forward(fpd);
    bwd = lstm_backward(bpd);
    fwd_wl = fpd.weights_layer_desc();
    fwd_wi = fpd.weights_iter_desc();
    bwd_wl = bpd.weights_layer_desc();
    bwd_wi = bpd.weights_iter_desc();
    diff_wl = bpd.diff_weights_layer_desc();
    diff_wi = bpd.diff_weights_iter_desc();
    ws = fpd.workspace_desc();
    impl = std::string(fpd.impl_info_str()) + " / " + bpd.impl_info_str();
  }
  // PyTorch's layout: w_ih [G H, I] is ldgoi.
  memory user_wl = mem(md({1, 1, I, G, H}, tag::ldgoi)), user_wi = mem(md({1, 1, H, G, H}, tag::ldgoi));
  memory user_dwl(md({1, 1, I, G, H}, tag::ldgoi), eng), user_dwi(md({1, 1, H, G, H}, tag::ldgoi), eng);
  memory f_wl(fwd_wl, eng), f_wi(fwd_wi, eng), b_wl(bwd_wl, eng), b_wi(bwd_wi, eng);
  memory d_wl(diff_wl, eng), d_wi(diff_wi, eng);
  reorder(user_wl, f_wl).execute(strm, user_wl, f_wl);
  reorder(user_wi, f_wi).execute(strm, user_wi, f_wi);
  reorder(user_wl, b_wl).execute(strm, user_wl, b_wl);
  reorder(user_wi, b_wi).execute(strm, user_wi, b_wi);
  strm.wait();
  memory x = mem(src_layer), h0 = mem(iter), c0 = mem(iter), b = mem(bias), y(dst_layer, eng), hn(iter, eng),
         cn(iter, eng), work(ws, eng);
  memory dy = mem(dst_layer), dhn = mem(iter), dcn = mem(iter), dx(src_layer, eng), dh0(iter, eng), dc0(iter, eng),
         db(bias, eng);
  fwd_args = {{DNNL_ARG_SRC_LAYER, x},       {DNNL_ARG_SRC_ITER, h0},   {DNNL_ARG_WEIGHTS_LAYER, f_wl},
              {DNNL_ARG_WEIGHTS_ITER, f_wi}, {DNNL_ARG_BIAS, b},        {DNNL_ARG_DST_LAYER, y},
              {DNNL_ARG_DST_ITER, hn},       {DNNL_ARG_WORKSPACE, work}};
  bwd_args = {{DNNL_ARG_SRC_LAYER, x},
              {DNNL_ARG_SRC_ITER, h0},
              {DNNL_ARG_WEIGHTS_LAYER, b_wl},
              {DNNL_ARG_WEIGHTS_ITER, b_wi},
              {DNNL_ARG_BIAS, b},
              {DNNL_ARG_DST_LAYER, y},
              {DNNL_ARG_DST_ITER, hn},
              {DNNL_ARG_WORKSPACE, work},
              {DNNL_ARG_DIFF_SRC_LAYER, dx},
              {DNNL_ARG_DIFF_SRC_ITER, dh0},
              {DNNL_ARG_DIFF_WEIGHTS_LAYER, d_wl},
              {DNNL_ARG_DIFF_WEIGHTS_ITER, d_wi},
              {DNNL_ARG_DIFF_BIAS, db},
              {DNNL_ARG_DIFF_DST_LAYER, dy},
              {DNNL_ARG_DIFF_DST_ITER, dhn}};
  if (!gru) {
    fwd_args.insert({{DNNL_ARG_SRC_ITER_C, c0}, {DNNL_ARG_DST_ITER_C, cn}});
    bwd_args.insert({{DNNL_ARG_SRC_ITER_C, c0},
                     {DNNL_ARG_DST_ITER_C, cn},
                     {DNNL_ARG_DIFF_SRC_ITER_C, dc0},
                     {DNNL_ARG_DIFF_DST_ITER_C, dcn}});
  }
  reorder to_fwd_l(user_wl, f_wl), to_fwd_i(user_wi, f_wi), to_bwd_l(user_wl, b_wl), to_bwd_i(user_wi, b_wi),
      from_dl(d_wl, user_dwl), from_di(d_wi, user_dwi);
  for (auto _ : state) {
    if (reorders) {
      to_fwd_l.execute(strm, user_wl, f_wl);
      to_fwd_i.execute(strm, user_wi, f_wi);
    }
    fwd.execute(strm, fwd_args);
    if (fwd_only) {
      strm.wait();
      continue;
    }
    if (reorders) {
      to_bwd_l.execute(strm, user_wl, b_wl);
      to_bwd_i.execute(strm, user_wi, b_wi);
    }
    // oneDNN accumulates into the weight gradients: they start at zero every step.
    std::memset(d_wl.get_data_handle(), 0, diff_wl.get_size());
    std::memset(d_wi.get_data_handle(), 0, diff_wi.get_size());
    std::memset(db.get_data_handle(), 0, bias.get_size());
    bwd.execute(strm, bwd_args);
    if (reorders) {
      from_dl.execute(strm, d_wl, user_dwl);
      from_di.execute(strm, d_wi, user_dwi);
    }
    strm.wait();
  }
  set_counters(state, s, G, static_cast<double>(T), fwd_only);
  state.SetLabel(impl + (reorders ? ", with weight reorders" : ", primitives only"));
}

}  // namespace

// Args: shape (0 seq2seq, 1 Deep Speech 2), variant (ours: variable lengths; oneDNN: weight
// reorders), cell (0 LSTM, 1 GRU), phase (0 forward + backward, 1 forward only).
BENCHMARK(BM_Ours)
    ->ArgsProduct({{0}, {0, 1}, {0, 1}, {0, 1}})
    ->ArgsProduct({{1}, {0}, {0, 1}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_Onednn)
    ->ArgsProduct({{0, 1}, {0, 1}, {0, 1}, {0}})
    ->ArgsProduct({{0, 1}, {0}, {0, 1}, {1}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

BENCHMARK_MAIN();
