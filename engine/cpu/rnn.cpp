// Recurrent layers (LSTM, GRU) on the CPU, one layer and one direction, in the structure cuDNN
// and oneDNN use: the input projections of all steps are one sgemm ([T B, I] x W_ih^T); each
// step is one sgemm for h W_hh^T (oneDNN threads it) and a fused OpenMP gate kernel. Backward
// through time mirrors it (per step: the gate kernel, then one sgemm for dh_{t-1}); dx and the
// weight gradients are a few big sgemms over all steps at the end.
//
// Variable lengths: the batch is walked in order of decreasing length, so the sequences that
// have a real step at time t are a prefix of the state buffers; the per-step sgemm skips the
// finished ones, and every per-step row (the reserve, the gate gradients, the big sgemms'
// operands) is packed as PyTorch's PackedSequence packs it, so padding costs neither memory nor
// flops. Step s of sequence b is time t = s, or t = len_b - 1 - s when reversed.
//
// The reserve (category activations) holds one row per real step (sum of lengths rows), written
// in place over the input projection the big sgemm put there:
//   LSTM, 5H floats: the activated gates i, f, g, o and the cell state c_t  -> 20 bytes per (t, b, h)
//   GRU,  4H floats: the activated gates r, z, n and W_hn h_{t-1} + b_hn     -> 16 bytes per (t, b, h)
// Backward also reads y (4 bytes per (t, b, h), the layer's output, kept anyway) for h_{t-1}.
// Backward's transient workspace: the gate gradients of every step, 16 (LSTM) or 24 (GRU: the
// input and recurrent sides differ in n) bytes per (t, b, h), plus packed copies of x and h_{t-1}
// when lengths differ.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/fast_math.h"
#include "engine/cpu/gemm.h"
#include "engine/rnn_schedule.h"

namespace ts::engine::cpu {

namespace {

using RnnCell = Backend::RnnCell;

constexpr int64_t kParallelThreshold = 1 << 14;  // elements; below this a step runs on one thread

// --- the fused gate kernels, one sequence at one step (h = 0..H-1 vectorized). target_clones:
// the build targets plain x86-64, and AVX2 doubles the width where the machine has it. No FMA
// contraction in either clone (ISO C++ mode), so both give the same bits. ---

// g: the reserve row (on entry x W_ih^T; on exit i, f, g, o and c_t); gh: h W_hh^T; c, h: the
// running state, updated in place; y: the output row.
__attribute__((target_clones("avx2", "default"))) void lstm_forward_row(int64_t H, float* __restrict g,
                                                                        const float* __restrict gh,
                                                                        const float* __restrict bias,
                                                                        float* __restrict c, float* __restrict h,
                                                                        float* __restrict y) {
#pragma omp simd
  for (int64_t k = 0; k < H; ++k) {
    const float i = fast_sigmoid(g[k] + gh[k] + bias[k]);
    const float f = fast_sigmoid(g[H + k] + gh[H + k] + bias[H + k]);
    const float gg = fast_tanh(g[2 * H + k] + gh[2 * H + k] + bias[2 * H + k]);
    const float o = fast_sigmoid(g[3 * H + k] + gh[3 * H + k] + bias[3 * H + k]);
    const float cn = f * c[k] + i * gg;
    const float hn = o * fast_tanh(cn);
    g[k] = i;
    g[H + k] = f;
    g[2 * H + k] = gg;
    g[3 * H + k] = o;
    g[4 * H + k] = cn;
    c[k] = cn;
    h[k] = hn;
    y[k] = hn;
  }
}

// g: the reserve row (on entry x W_ih^T; on exit r, z, n and W_hn h + b_hn); gh: h W_hh^T;
// h: the running state, updated in place.
__attribute__((target_clones("avx2", "default"))) void gru_forward_row(int64_t H, float* __restrict g,
                                                                       const float* __restrict gh,
                                                                       const float* __restrict b_ih,
                                                                       const float* __restrict b_hh,
                                                                       float* __restrict h, float* __restrict y) {
#pragma omp simd
  for (int64_t k = 0; k < H; ++k) {
    const float r = fast_sigmoid((g[k] + b_ih[k]) + (gh[k] + b_hh[k]));
    const float z = fast_sigmoid((g[H + k] + b_ih[H + k]) + (gh[H + k] + b_hh[H + k]));
    const float hn = gh[2 * H + k] + b_hh[2 * H + k];
    const float n = fast_tanh(g[2 * H + k] + b_ih[2 * H + k] + r * hn);
    const float out = (1.0f - z) * n + z * h[k];
    g[k] = r;
    g[H + k] = z;
    g[2 * H + k] = n;
    g[3 * H + k] = hn;
    h[k] = out;
    y[k] = out;
  }
}

// g: the reserve row; c_prev: c_{t-1}; dy: the output's gradient; dh, dc: the recurrent
// gradients reaching this step (dc becomes dc_{t-1}; dh is overwritten by the sgemm after);
// dg: the gate pre-activation gradients, to the step's row and to the per-step buffer.
__attribute__((target_clones("avx2", "default"))) void lstm_backward_row(
    int64_t H, const float* __restrict g, const float* __restrict c_prev, const float* __restrict dy,
    const float* __restrict dh_in, float* __restrict dc, float* __restrict dg, float* __restrict dg_step) {
#pragma omp simd
  for (int64_t k = 0; k < H; ++k) {
    const float i = g[k], f = g[H + k], gg = g[2 * H + k], o = g[3 * H + k], c = g[4 * H + k];
    const float tc = fast_tanh(c);
    const float dh = dy[k] + dh_in[k];
    const float dct = dc[k] + dh * o * (1.0f - tc * tc);
    const float di = dct * gg * i * (1.0f - i);
    const float df = dct * c_prev[k] * f * (1.0f - f);
    const float dgg = dct * i * (1.0f - gg * gg);
    const float dout = dh * tc * o * (1.0f - o);
    dc[k] = dct * f;
    dg[k] = dg_step[k] = di;
    dg[H + k] = dg_step[H + k] = df;
    dg[2 * H + k] = dg_step[2 * H + k] = dgg;
    dg[3 * H + k] = dg_step[3 * H + k] = dout;
  }
}

// dgi: gradients of the input-side pre-activations (x W_ih^T + b_ih); dgh (and dg_step, the
// per-step copy): of the recurrent side (h W_hh^T + b_hh), which differs in n by the factor r.
// dh: in, the recurrent gradient reaching this step; out, its direct part z dh (the sgemm adds
// dgh W_hh).
__attribute__((target_clones("avx2", "default"))) void gru_backward_row(
    int64_t H, const float* __restrict g, const float* __restrict h_prev, const float* __restrict dy,
    float* __restrict dh, float* __restrict dgi, float* __restrict dgh, float* __restrict dg_step) {
#pragma omp simd
  for (int64_t k = 0; k < H; ++k) {
    const float r = g[k], z = g[H + k], n = g[2 * H + k], hn = g[3 * H + k];
    const float d = dy[k] + dh[k];
    const float dn = d * (1.0f - z) * (1.0f - n * n);
    const float dz = d * (h_prev[k] - n) * z * (1.0f - z);
    const float dr = dn * hn * r * (1.0f - r);
    const float dhn = dn * r;
    dgi[k] = dgh[k] = dg_step[k] = dr;
    dgi[H + k] = dgh[H + k] = dg_step[H + k] = dz;
    dgi[2 * H + k] = dn;
    dgh[2 * H + k] = dg_step[2 * H + k] = dhn;
    dh[k] = d * z;
  }
}

// ---------------------------------------------------------------- schedule helpers

using rnn::Dims;
using rnn::Schedule;
using rnn::time_of;

Tensor buffer(int64_t floats, vocabulary::Category category = vocabulary::Category::workspace) {
  return Tensor::empty({std::max<int64_t>(floats, 1)}, Device::cpu(), Layout::plain(), category);
}

// A [B, H] state in schedule order (zeros when undefined), or back.
void gather_rows(const Tensor& src, const Schedule& s, int64_t H, float* dst) {
  const auto B = static_cast<int64_t>(s.perm.size());
  for (int64_t j = 0; j < B; ++j) {
    if (src.defined()) {
      std::memcpy(dst + j * H, src.data() + s.perm[static_cast<size_t>(j)] * H, static_cast<size_t>(H) * sizeof(float));
    } else {
      std::fill(dst + j * H, dst + (j + 1) * H, 0.0f);
    }
  }
}
void scatter_rows(const float* src, const Schedule& s, int64_t H, const Tensor& dst) {
  const auto B = static_cast<int64_t>(s.perm.size());
  for (int64_t j = 0; j < B; ++j) {
    std::memcpy(dst.data() + s.perm[static_cast<size_t>(j)] * H, src + j * H, static_cast<size_t>(H) * sizeof(float));
  }
}

// Packed rows of a [T, B, D] tensor (x), or the tensor itself when the schedule is dense.
const float* packed(const float* src, const Schedule& s, int64_t B, int64_t D, Tensor& holder) {
  if (s.dense) return src;
  holder = buffer(s.rows() * D);
  float* dst = holder.data();
#pragma omp parallel for if (s.rows() * D > kParallelThreshold)
  for (int64_t t = 0; t < s.max_len; ++t) {
    for (int64_t j = 0; j < s.active[static_cast<size_t>(t)]; ++j) {
      std::memcpy(dst + (s.offset[static_cast<size_t>(t)] + j) * D, src + (t * B + s.perm[static_cast<size_t>(j)]) * D,
                  static_cast<size_t>(D) * sizeof(float));
    }
  }
  return dst;
}

std::vector<float> values_or_zeros(const Tensor& t, int64_t n) {
  if (!t.defined()) return std::vector<float>(static_cast<size_t>(n), 0.0f);
  return std::vector<float>(t.data(), t.data() + n);
}

// dst [cols, rows] = src [rows, cols]^T, in cache-sized tiles.
void transpose(const float* src, int64_t rows, int64_t cols, float* dst) {
  constexpr int64_t kTile = 32;
#pragma omp parallel for collapse(2) if (rows * cols > kParallelThreshold)
  for (int64_t r0 = 0; r0 < rows; r0 += kTile) {
    for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
      for (int64_t r = r0; r < std::min(r0 + kTile, rows); ++r) {
        for (int64_t c = c0; c < std::min(c0 + kTile, cols); ++c) dst[c * rows + r] = src[r * cols + c];
      }
    }
  }
}

// How the per-step sgemms read W_hh: with op(B) transposed ('T') or not ('N'), one of the two
// from a transposed copy made once per call (it costs about one step). Measured on 2 Zen 3 cores
// with oneDNN 2.6's sgemm, B = 16..128: while W_hh fits in the last-level cache (H = 512: 4 MB,
// a 1024 LSTM: 16 MB) the 'T' form is 5-30% faster per step, in both directions; once it
// outgrows it (Deep Speech 2's GRU, H = 1760: 37 MB) the 'N' form is 8-18% faster (sgemm streams
// an 'N' operand without a packing copy). Forward reads W_hh^T: 'T' is W_hh as stored; backward
// reads W_hh: 'N' is W_hh as stored.
bool w_hh_fits_cache(int64_t gh, int64_t h) {
  return gh * h * static_cast<int64_t>(sizeof(float)) <= (int64_t{16} << 20);
}

}  // namespace

// ---------------------------------------------------------------- forward

Backend::RnnForwardResult CpuBackend::rnn_forward(const RnnArgs& a, bool training) {
  const char* op = a.cell == RnnCell::lstm ? "lstm" : "gru";
  const Dims d = rnn::check_args(a, op, Device::cpu(), false);
  const Schedule sc = rnn::make_schedule(a.lengths.defined() ? a.lengths.data() : nullptr, d.T, d.B, op);
  const int64_t T = d.T, B = d.B, H = d.H, GH = d.gh(), S = d.stride(), P = sc.rows();

  RnnForwardResult r;
  r.y = Tensor::empty({T, B, H}, Device::cpu());
  r.h_n = Tensor::empty({B, H}, Device::cpu());
  if (d.lstm) r.c_n = Tensor::empty({B, H}, Device::cpu());
  // Inference needs the rows only for the step at hand, but they are what the big input sgemm
  // writes into: a workspace then, released on return.
  Tensor res = buffer(P * S, training ? vocabulary::Category::activations : vocabulary::Category::workspace);
  float* pres = res.data();
  float* py = r.y.data();
  {
    Tensor xp_holder;
    const float* xp = packed(a.x.data(), sc, B, d.I, xp_holder);
    sgemm(GemmSite::rnn_input, 'N', 'T', P, GH, d.I, 1.0f, xp, d.I, a.w_ih.data(), d.I, 0.0f, pres, S);
  }

  Tensor state = buffer(2 * B * H), gh = buffer(B * GH);
  float* hs = state.data();
  float* cs = hs + B * H;
  gather_rows(a.h0, sc, H, hs);
  if (d.lstm) gather_rows(a.c0, sc, H, cs);
  std::vector<float> bias_ih = values_or_zeros(a.b_ih, GH), bias_hh = values_or_zeros(a.b_hh, GH), bias_sum(bias_ih);
  for (int64_t k = 0; k < GH; ++k) bias_sum[static_cast<size_t>(k)] += bias_hh[static_cast<size_t>(k)];
  const float* w_hh = a.w_hh.data();
  float* pgh = gh.data();
  Tensor w_hh_t;  // [H, G H]: the 'N' form
  if (!w_hh_fits_cache(GH, H) && sc.max_len > 1) {
    w_hh_t = buffer(GH * H);
    transpose(w_hh, GH, H, w_hh_t.data());
  }

  for (int64_t s = 0; s < sc.max_len; ++s) {
    const int64_t n = sc.active[static_cast<size_t>(s)];
    if (w_hh_t.defined()) {
      sgemm(GemmSite::rnn_step, 'N', 'N', n, GH, H, 1.0f, hs, H, w_hh_t.data(), GH, 0.0f, pgh, GH);
    } else {
      sgemm(GemmSite::rnn_step, 'N', 'T', n, GH, H, 1.0f, hs, H, w_hh, H, 0.0f, pgh, GH);
    }
#pragma omp parallel for if (n * H * d.G > kParallelThreshold)
    for (int64_t j = 0; j < n; ++j) {
      const int64_t b = sc.perm[static_cast<size_t>(j)];
      const int64_t t = time_of(s, sc.len[static_cast<size_t>(b)], a.reverse);
      float* row = pres + (sc.offset[static_cast<size_t>(t)] + j) * S;
      if (d.lstm) {
        lstm_forward_row(H, row, pgh + j * GH, bias_sum.data(), cs + j * H, hs + j * H, py + (t * B + b) * H);
      } else {
        gru_forward_row(H, row, pgh + j * GH, bias_ih.data(), bias_hh.data(), hs + j * H, py + (t * B + b) * H);
      }
    }
  }
  // Padded steps output zeros.
  if (!sc.dense) {
#pragma omp parallel for if (T * B * H > kParallelThreshold)
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t b = 0; b < B; ++b) {
        if (t >= sc.len[static_cast<size_t>(b)]) std::fill(py + (t * B + b) * H, py + (t * B + b + 1) * H, 0.0f);
      }
    }
  }
  scatter_rows(hs, sc, H, r.h_n);
  if (d.lstm) scatter_rows(cs, sc, H, r.c_n);
  if (training) r.reserve = res;
  return r;
}

// ---------------------------------------------------------------- backward

Backend::RnnGrads CpuBackend::rnn_backward(const RnnArgs& a, const Tensor& y, const Tensor& reserve, const Tensor& dy,
                                           const Tensor& dh_n, const Tensor& dc_n, const RnnNeed& need) {
  const char* op = a.cell == RnnCell::lstm ? "lstm_backward" : "gru_backward";
  const Dims d = rnn::check_args(a, op, Device::cpu(), false);
  const int64_t T = d.T, B = d.B, I = d.I, H = d.H, GH = d.gh(), S = d.stride();
  rnn::check_tensor(y, op, "y", {T, B, H}, Device::cpu());
  if (dy.defined()) rnn::check_tensor(dy, op, "dy", {T, B, H}, Device::cpu());
  if (dh_n.defined()) rnn::check_tensor(dh_n, op, "dh_n", {B, H}, Device::cpu());
  if (dc_n.defined()) rnn::check_tensor(dc_n, op, "dc_n", {B, H}, Device::cpu());
  const Schedule sc = rnn::make_schedule(a.lengths.defined() ? a.lengths.data() : nullptr, T, B, op);
  const int64_t P = sc.rows();
  if (!reserve.defined() || !reserve.device().is_cpu() || reserve.numel() < P * S) {
    throw std::invalid_argument(std::string(op) + ": the reserve of a training-mode forward is required");
  }

  // Gate gradients of every real step (packed rows): the LSTM's input and recurrent sides share
  // them; the GRU's differ in n (recurrent = r x input there), so it keeps both.
  Tensor dgi_t = buffer(P * GH), dgh_t = d.lstm ? dgi_t : buffer(P * GH);
  float* dgi = dgi_t.data();
  float* dgh = dgh_t.data();

  Tensor state = buffer(2 * B * H + B * GH);
  float* dhs = state.data();
  float* dcs = dhs + B * H;
  float* dstep = dcs + B * H;
  gather_rows(dh_n, sc, H, dhs);
  if (d.lstm) gather_rows(dc_n, sc, H, dcs);
  const std::vector<float> zeros(static_cast<size_t>(H), 0.0f);
  const float* pres = reserve.data();
  const float* py = y.data();
  const float* pdy = dy.defined() ? dy.data() : nullptr;
  const float* ph0 = a.h0.defined() ? a.h0.data() : nullptr;
  const float* pc0 = a.c0.defined() ? a.c0.data() : nullptr;
  const float* w_hh = a.w_hh.data();

  Tensor w_hh_t;  // [H, G H]: the 'T' form
  if (w_hh_fits_cache(GH, H) && sc.max_len > 1) {
    w_hh_t = buffer(GH * H);
    transpose(w_hh, GH, H, w_hh_t.data());
  }

  for (int64_t s = sc.max_len - 1; s >= 0; --s) {
    const int64_t n = sc.active[static_cast<size_t>(s)];
#pragma omp parallel for if (n * H * d.G > kParallelThreshold)
    for (int64_t j = 0; j < n; ++j) {
      const int64_t b = sc.perm[static_cast<size_t>(j)];
      const int64_t t = time_of(s, sc.len[static_cast<size_t>(b)], a.reverse);
      const int64_t tp = a.reverse ? t + 1 : t - 1;  // the previous step's time (when s > 0)
      const int64_t row = sc.offset[static_cast<size_t>(t)] + j;
      const float* g_out = pdy ? pdy + (t * B + b) * H : zeros.data();
      if (d.lstm) {
        const float* c_prev =
            s > 0 ? pres + (sc.offset[static_cast<size_t>(tp)] + j) * S + 4 * H : (pc0 ? pc0 + b * H : zeros.data());
        lstm_backward_row(H, pres + row * S, c_prev, g_out, dhs + j * H, dcs + j * H, dgi + row * GH, dstep + j * GH);
      } else {
        const float* h_prev = s > 0 ? py + (tp * B + b) * H : (ph0 ? ph0 + b * H : zeros.data());
        gru_backward_row(H, pres + row * S, h_prev, g_out, dhs + j * H, dgi + row * GH, dgh + row * GH, dstep + j * GH);
      }
    }
    // dh_{t-1} = dg W_hh (+ the GRU's direct z dh, already in place).
    if (w_hh_t.defined()) {
      sgemm(GemmSite::rnn_step_backward, 'N', 'T', n, H, GH, 1.0f, dstep, GH, w_hh_t.data(), GH, d.lstm ? 0.0f : 1.0f,
            dhs, H);
    } else {
      sgemm(GemmSite::rnn_step_backward, 'N', 'N', n, H, GH, 1.0f, dstep, GH, w_hh, H, d.lstm ? 0.0f : 1.0f, dhs, H);
    }
  }

  RnnGrads g;
  if (need.dh0) {
    g.dh0 = Tensor::empty({B, H}, Device::cpu());
    scatter_rows(dhs, sc, H, g.dh0);
  }
  if (need.dc0 && d.lstm) {
    g.dc0 = Tensor::empty({B, H}, Device::cpu());
    scatter_rows(dcs, sc, H, g.dc0);
  }
  if (need.dx) {
    g.dx = Tensor::empty({T, B, I}, Device::cpu());
    float* dx = g.dx.data();
    if (sc.dense) {
      sgemm(GemmSite::rnn_backward_data, 'N', 'N', P, I, GH, 1.0f, dgi, GH, a.w_ih.data(), I, 0.0f, dx, I);
    } else {
      Tensor dxp_t = buffer(P * I);
      float* dxp = dxp_t.data();
      sgemm(GemmSite::rnn_backward_data, 'N', 'N', P, I, GH, 1.0f, dgi, GH, a.w_ih.data(), I, 0.0f, dxp, I);
      // Unpack; padded steps get zeros.
#pragma omp parallel for if (T * B * I > kParallelThreshold)
      for (int64_t t = 0; t < T; ++t) {
        const int64_t n = t < sc.max_len ? sc.active[static_cast<size_t>(t)] : 0;
        for (int64_t j = 0; j < B; ++j) {
          float* dst = dx + (t * B + sc.perm[static_cast<size_t>(j)]) * I;
          if (j < n) {
            std::memcpy(dst, dxp + (sc.offset[static_cast<size_t>(t)] + j) * I, static_cast<size_t>(I) * sizeof(float));
          } else {
            std::fill(dst, dst + I, 0.0f);
          }
        }
      }
    }
  }
  if (need.weights) {
    g.dw_ih = Tensor::empty({GH, I}, Device::cpu());
    {
      Tensor xp_holder;
      const float* xp = packed(a.x.data(), sc, B, I, xp_holder);
      sgemm(GemmSite::rnn_backward_weights, 'T', 'N', GH, I, P, 1.0f, dgi, GH, xp, I, 0.0f, g.dw_ih.data(), I);
    }
    // dW_hh = sum over steps of dgh^T h_prev, h_prev being y at the neighbouring step or h0.
    g.dw_hh = Tensor::empty({GH, H}, Device::cpu());
    float* dw_hh = g.dw_hh.data();
    if (sc.dense) {
      // Packed rows are [T, B]: h_prev is y shifted by one step, and h0 at the first step.
      const int64_t k = std::max<int64_t>(T - 1, 0) * B;
      if (a.reverse) {
        sgemm(GemmSite::rnn_backward_weights, 'T', 'N', GH, H, k, 1.0f, dgh, GH, py + B * H, H, 0.0f, dw_hh, H);
        if (ph0 && T > 0)
          sgemm(GemmSite::rnn_backward_weights, 'T', 'N', GH, H, B, 1.0f, dgh + (T - 1) * B * GH, GH, ph0, H, 1.0f,
                dw_hh, H);
      } else {
        sgemm(GemmSite::rnn_backward_weights, 'T', 'N', GH, H, k, 1.0f, dgh + B * GH, GH, py, H, 0.0f, dw_hh, H);
        if (ph0 && T > 0)
          sgemm(GemmSite::rnn_backward_weights, 'T', 'N', GH, H, B, 1.0f, dgh, GH, ph0, H, 1.0f, dw_hh, H);
      }
    } else {
      Tensor hp_t = buffer(P * H);
      float* hp = hp_t.data();
#pragma omp parallel for if (P * H > kParallelThreshold)
      for (int64_t t = 0; t < sc.max_len; ++t) {
        for (int64_t j = 0; j < sc.active[static_cast<size_t>(t)]; ++j) {
          const int64_t b = sc.perm[static_cast<size_t>(j)], len = sc.len[static_cast<size_t>(b)];
          const bool first = a.reverse ? t == len - 1 : t == 0;
          const int64_t tp = a.reverse ? t + 1 : t - 1;
          const float* src = !first ? py + (tp * B + b) * H : (ph0 ? ph0 + b * H : zeros.data());
          std::memcpy(hp + (sc.offset[static_cast<size_t>(t)] + j) * H, src, static_cast<size_t>(H) * sizeof(float));
        }
      }
      sgemm(GemmSite::rnn_backward_weights, 'T', 'N', GH, H, P, 1.0f, dgh, GH, hp, H, 0.0f, dw_hh, H);
    }
    // Bias gradients: column sums of the gate gradients, as a sgemv with a ones vector.
    const std::vector<float> ones(static_cast<size_t>(std::max<int64_t>(P, 1)), 1.0f);
    auto column_sums = [&](const float* m) {
      Tensor out = Tensor::empty({GH}, Device::cpu());
      sgemm(GemmSite::rnn_backward_weights, 'T', 'N', GH, 1, P, 1.0f, m, GH, ones.data(), 1, 0.0f, out.data(), 1);
      return out;
    };
    if (a.b_ih.defined()) g.db_ih = column_sums(dgi);
    if (a.b_hh.defined()) {
      if (d.lstm && g.db_ih.defined()) {  // the same sum; a copy, since each bias accumulates its own
        g.db_hh = Tensor::empty({GH}, Device::cpu());
        std::memcpy(g.db_hh.data(), g.db_ih.data(), static_cast<size_t>(GH) * sizeof(float));
      } else {
        g.db_hh = column_sums(dgh);
      }
    }
  }
  return g;
}

}  // namespace ts::engine::cpu
