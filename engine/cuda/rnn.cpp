// Recurrent layers (LSTM, GRU) on the GPU: the CPU backend's algorithm (cpu/rnn.cpp) with
// cuBLAS for the GEMMs and fused gate kernels (rnn.cu) for each step. Forward: one
// GEMM for the input projections of every real step, then per step one GEMM for h W_hh^T and
// one gate kernel; backward mirrors it, and dx and the weight gradients are a few big GEMMs
// at the end. The reserve and the packed layout are the CPU's, byte for byte in size, so the
// memory breakdown means the same on both backends.
//
// Why not cuDNN's RNN API: it would be faster for long sequences (it fuses steps and
// overlaps them), but its reserve space differs in size and content from the CPU's, and
// there is no GPU here to measure it against this. Measuring the two on the GPU is open
// (docs/gpu-machine.md); this version is the one whose parity with the CPU can be tested.
//
// The schedule (which sequences run at each step) is planned on the host: lengths on the
// device are copied back first (a small copy that waits for the queued work).
#include <cuda_runtime_api.h>

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/cuda/cuda_common.h"
#include "engine/cuda/device_memory.h"
#include "engine/cuda/rnn_kernels.h"
#include "engine/rnn_schedule.h"

namespace ts::engine::cuda {

namespace {

using kernels::RnnStepRows;

// Row-major C = op(A) op(B) + beta C, beta 0 or 1. cuBLAS is column-major and a row-major
// matrix is its transpose, so it computes C^T = op(B)^T op(A)^T.
void gemm(Env& env, char ta, char tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
          int64_t ldb, float beta, float* c, int64_t ldc, const char* op) {
  if (m == 0 || n == 0) return;
  if (k == 0) {  // an empty sum: C = beta C
    if (beta == 0.0f) {
      TS_CUDA_CHECK(cudaMemset2DAsync(c, static_cast<size_t>(ldc) * sizeof(float), 0,
                                      static_cast<size_t>(n) * sizeof(float), static_cast<size_t>(m), env.stream));
    }
    return;
  }
  const float one = 1.0f;
  auto flag = [](char t) { return t == 'T' ? CUBLAS_OP_T : CUBLAS_OP_N; };
  std::lock_guard<std::mutex> lock(env.ctx.library_mutex());
  TS_CUBLAS_CHECK(cublasSgemm(env.ctx.cublas(), flag(tb), flag(ta), to_int(n, op, "columns"), to_int(m, op, "rows"),
                              to_int(k, op, "inner size"), &one, b, to_int(ldb, op, "leading dimension"), a,
                              to_int(lda, op, "leading dimension"), &beta, c, to_int(ldc, op, "leading dimension")));
}

Tensor buffer(int64_t floats, int device, vocabulary::Category category = vocabulary::Category::workspace) {
  return Tensor::empty({std::max<int64_t>(floats, 1)}, cuda_device(device), Layout::plain(), category);
}

// The schedule and the row tables the kernels read, on the host and on the device.
struct Plan {
  rnn::Schedule sc;
  Tensor table;                        // on the device: the int32 arrays below, one after another
  const RnnStepRows* steps = nullptr;  // per real step, step-major: step s's are [offset[s], offset[s+1])
  const int32_t* src_row = nullptr;    // per packed row: its row t B + b in x, y, dx
  const int32_t* prev_y = nullptr;     // per packed row: the y row of its previous step, or -1 - b
  const int32_t* perm = nullptr;       // per state row j: the sequence b
};

std::vector<float> host_lengths(const Tensor& lengths) {
  if (!lengths.defined()) return {};
  if (lengths.device().is_cpu()) return std::vector<float>(lengths.data(), lengths.data() + lengths.numel());
  return lengths.to_vector();
}

Plan make_plan(const Backend::RnnArgs& a, const rnn::Dims& d, int device, const char* op) {
  Plan p;
  const std::vector<float> len = host_lengths(a.lengths);
  p.sc = rnn::make_schedule(a.lengths.defined() ? len.data() : nullptr, d.T, d.B, op);
  const rnn::Schedule& sc = p.sc;
  // Row numbers travel as int32: every row index is below T B.
  if (d.T * d.B >= std::numeric_limits<int32_t>::max()) {
    throw std::invalid_argument(std::string(op) + ": T B = " + std::to_string(d.T * d.B) + " rows are too many");
  }
  const int64_t P = sc.rows();
  std::vector<RnnStepRows> steps(static_cast<size_t>(P));
  std::vector<int32_t> src_row(static_cast<size_t>(P)), prev_y(static_cast<size_t>(P)), perm(static_cast<size_t>(d.B));
  for (int64_t j = 0; j < d.B; ++j)
    perm[static_cast<size_t>(j)] = static_cast<int32_t>(sc.perm[static_cast<size_t>(j)]);
  for (int64_t s = 0; s < sc.max_len; ++s) {
    for (int64_t j = 0; j < sc.active[static_cast<size_t>(s)]; ++j) {
      const int64_t b = sc.perm[static_cast<size_t>(j)];
      const int64_t t = rnn::time_of(s, sc.len[static_cast<size_t>(b)], a.reverse);
      const int64_t row = sc.offset[static_cast<size_t>(t)] + j;
      RnnStepRows e{};
      e.res = static_cast<int32_t>(row);
      e.y = static_cast<int32_t>(t * d.B + b);
      if (s > 0) {
        const int64_t tp = a.reverse ? t + 1 : t - 1;
        e.prev_res = static_cast<int32_t>(sc.offset[static_cast<size_t>(tp)] + j);
        e.prev_y = static_cast<int32_t>(tp * d.B + b);
      } else {
        e.prev_res = e.prev_y = static_cast<int32_t>(-1 - b);
      }
      steps[static_cast<size_t>(sc.offset[static_cast<size_t>(s)] + j)] = e;
      src_row[static_cast<size_t>(row)] = e.y;
      prev_y[static_cast<size_t>(row)] = e.prev_y;
    }
  }
  static_assert(sizeof(RnnStepRows) == 4 * sizeof(int32_t));
  std::vector<int32_t> host;
  host.reserve(static_cast<size_t>(6 * P + d.B));
  for (const RnnStepRows& e : steps) host.insert(host.end(), {e.res, e.y, e.prev_res, e.prev_y});
  host.insert(host.end(), src_row.begin(), src_row.end());
  host.insert(host.end(), prev_y.begin(), prev_y.end());
  host.insert(host.end(), perm.begin(), perm.end());
  p.table = buffer(static_cast<int64_t>(host.size()), device);
  if (!host.empty()) copy_to_device(p.table.data(), host.data(), host.size() * sizeof(int32_t), device);
  const auto* base = reinterpret_cast<const int32_t*>(p.table.data());
  p.steps = reinterpret_cast<const RnnStepRows*>(base);
  p.src_row = base + 4 * P;
  p.prev_y = base + 5 * P;
  p.perm = base + 6 * P;
  return p;
}

// x's rows in packed order (x itself when every length is T).
const float* packed(Env& env, const Plan& p, const Tensor& x, int64_t width, int device, Tensor& holder) {
  if (p.sc.dense) return x.data();
  holder = buffer(p.sc.rows() * width, device);
  TS_CUDA_CHECK(kernels::rnn_gather_rows(x.data(), nullptr, p.src_row, p.sc.rows(), width, holder.data(), env.stream));
  return holder.data();
}

const float* data_or_null(const Tensor& t) { return t.defined() ? t.data() : nullptr; }

}  // namespace

// ---------------------------------------------------------------- forward

Backend::RnnForwardResult CudaBackend::rnn_forward(const RnnArgs& a, bool training) {
  const bool lstm = a.cell == RnnCell::lstm;
  const char* op = lstm ? "lstm" : "gru";
  const rnn::Dims d = rnn::check_args(a, op, cuda_device(device_), true);
  Env env(*impl_);
  const Plan p = make_plan(a, d, device_, op);
  const int64_t T = d.T, B = d.B, H = d.H, GH = d.gh(), S = d.stride(), P = p.sc.rows();
  const Device dev = cuda_device(device_);

  RnnForwardResult r;
  r.y = Tensor::empty({T, B, H}, dev);
  r.h_n = Tensor::empty({B, H}, dev);
  if (lstm) r.c_n = Tensor::empty({B, H}, dev);
  if (!p.sc.dense && T * B * H > 0) {  // padded steps output zeros
    TS_CUDA_CHECK(cudaMemsetAsync(r.y.data(), 0, static_cast<size_t>(T * B * H) * sizeof(float), env.stream));
  }
  Tensor res = buffer(P * S, device_, training ? vocabulary::Category::activations : vocabulary::Category::workspace);
  {
    Tensor holder;
    const float* xp = packed(env, p, a.x, d.I, device_, holder);
    gemm(env, 'N', 'T', P, GH, d.I, xp, d.I, a.w_ih.data(), d.I, 0.0f, res.data(), S, op);
  }
  Tensor state = buffer(2 * B * H, device_), gh = buffer(B * GH, device_);
  float* hs = state.data();
  float* cs = hs + B * H;
  TS_CUDA_CHECK(kernels::rnn_gather_rows(data_or_null(a.h0), nullptr, p.perm, B, H, hs, env.stream));
  if (lstm) TS_CUDA_CHECK(kernels::rnn_gather_rows(data_or_null(a.c0), nullptr, p.perm, B, H, cs, env.stream));
  const float* b_ih = data_or_null(a.b_ih);
  const float* b_hh = data_or_null(a.b_hh);
  for (int64_t s = 0; s < p.sc.max_len; ++s) {
    const int64_t n = p.sc.active[static_cast<size_t>(s)];
    const RnnStepRows* steps = p.steps + p.sc.offset[static_cast<size_t>(s)];
    gemm(env, 'N', 'T', n, GH, H, hs, H, a.w_hh.data(), H, 0.0f, gh.data(), GH, op);
    if (lstm) {
      TS_CUDA_CHECK(kernels::lstm_forward_step(H, n, steps, res.data(), S, gh.data(), b_ih, b_hh, cs, hs, r.y.data(),
                                               env.stream));
    } else {
      TS_CUDA_CHECK(
          kernels::gru_forward_step(H, n, steps, res.data(), S, gh.data(), b_ih, b_hh, hs, r.y.data(), env.stream));
    }
  }
  TS_CUDA_CHECK(kernels::rnn_scatter_rows(hs, p.perm, B, H, r.h_n.data(), env.stream));
  if (lstm) TS_CUDA_CHECK(kernels::rnn_scatter_rows(cs, p.perm, B, H, r.c_n.data(), env.stream));
  if (training) r.reserve = res;
  return r;
}

// ---------------------------------------------------------------- backward

Backend::RnnGrads CudaBackend::rnn_backward(const RnnArgs& a, const Tensor& y, const Tensor& reserve, const Tensor& dy,
                                            const Tensor& dh_n, const Tensor& dc_n, const RnnNeed& need) {
  const bool lstm = a.cell == RnnCell::lstm;
  const char* op = lstm ? "lstm_backward" : "gru_backward";
  const Device dev = cuda_device(device_);
  const rnn::Dims d = rnn::check_args(a, op, dev, true);
  const int64_t T = d.T, B = d.B, I = d.I, H = d.H, GH = d.gh(), S = d.stride();
  rnn::check_tensor(y, op, "y", {T, B, H}, dev);
  if (dy.defined()) rnn::check_tensor(dy, op, "dy", {T, B, H}, dev);
  if (dh_n.defined()) rnn::check_tensor(dh_n, op, "dh_n", {B, H}, dev);
  if (dc_n.defined()) rnn::check_tensor(dc_n, op, "dc_n", {B, H}, dev);
  Env env(*impl_);
  const Plan p = make_plan(a, d, device_, op);
  const int64_t P = p.sc.rows();
  if (!reserve.defined() || reserve.device() != dev || reserve.numel() < P * S) {
    throw std::invalid_argument(std::string(op) + ": the reserve of a training-mode forward is required");
  }

  // Gate gradients of every real step (packed rows); the GRU keeps both sides (they differ in n).
  Tensor dgi_t = buffer(P * GH, device_), dgh_t = lstm ? dgi_t : buffer(P * GH, device_);
  Tensor state = buffer(2 * B * H + B * GH, device_);
  float* dhs = state.data();
  float* dcs = dhs + B * H;
  float* dstep = dcs + B * H;
  TS_CUDA_CHECK(kernels::rnn_gather_rows(data_or_null(dh_n), nullptr, p.perm, B, H, dhs, env.stream));
  if (lstm) TS_CUDA_CHECK(kernels::rnn_gather_rows(data_or_null(dc_n), nullptr, p.perm, B, H, dcs, env.stream));
  const float* pdy = data_or_null(dy);
  for (int64_t s = p.sc.max_len - 1; s >= 0; --s) {
    const int64_t n = p.sc.active[static_cast<size_t>(s)];
    const RnnStepRows* steps = p.steps + p.sc.offset[static_cast<size_t>(s)];
    if (lstm) {
      TS_CUDA_CHECK(kernels::lstm_backward_step(H, n, steps, reserve.data(), S, data_or_null(a.c0), pdy, dhs, dcs,
                                                dgi_t.data(), dstep, env.stream));
    } else {
      TS_CUDA_CHECK(kernels::gru_backward_step(H, n, steps, reserve.data(), S, y.data(), data_or_null(a.h0), pdy, dhs,
                                               dgi_t.data(), dgh_t.data(), dstep, env.stream));
    }
    // dh_{t-1} = dg W_hh (+ the GRU's direct z dh, already in place).
    gemm(env, 'N', 'N', n, H, GH, dstep, GH, a.w_hh.data(), H, lstm ? 0.0f : 1.0f, dhs, H, op);
  }

  RnnGrads g;
  if (need.dh0) {
    g.dh0 = Tensor::empty({B, H}, dev);
    TS_CUDA_CHECK(kernels::rnn_scatter_rows(dhs, p.perm, B, H, g.dh0.data(), env.stream));
  }
  if (need.dc0 && lstm) {
    g.dc0 = Tensor::empty({B, H}, dev);
    TS_CUDA_CHECK(kernels::rnn_scatter_rows(dcs, p.perm, B, H, g.dc0.data(), env.stream));
  }
  if (need.dx) {
    g.dx = Tensor::empty({T, B, I}, dev);
    if (p.sc.dense) {
      gemm(env, 'N', 'N', P, I, GH, dgi_t.data(), GH, a.w_ih.data(), I, 0.0f, g.dx.data(), I, op);
    } else {
      Tensor dxp = buffer(P * I, device_);
      gemm(env, 'N', 'N', P, I, GH, dgi_t.data(), GH, a.w_ih.data(), I, 0.0f, dxp.data(), I, op);
      if (T * B * I > 0) {  // padded steps get zeros
        TS_CUDA_CHECK(cudaMemsetAsync(g.dx.data(), 0, static_cast<size_t>(T * B * I) * sizeof(float), env.stream));
      }
      TS_CUDA_CHECK(kernels::rnn_scatter_rows(dxp.data(), p.src_row, P, I, g.dx.data(), env.stream));
    }
  }
  if (need.weights) {
    g.dw_ih = Tensor::empty({GH, I}, dev);
    {
      Tensor holder;
      const float* xp = packed(env, p, a.x, I, device_, holder);
      gemm(env, 'T', 'N', GH, I, P, dgi_t.data(), GH, xp, I, 0.0f, g.dw_ih.data(), I, op);
    }
    // dW_hh = sum over steps of dgh^T h_prev: h_prev is y at the neighbouring step, or h0.
    g.dw_hh = Tensor::empty({GH, H}, dev);
    {
      Tensor hp = buffer(P * H, device_);
      TS_CUDA_CHECK(kernels::rnn_gather_rows(y.data(), data_or_null(a.h0), p.prev_y, P, H, hp.data(), env.stream));
      gemm(env, 'T', 'N', GH, H, P, dgh_t.data(), GH, hp.data(), H, 0.0f, g.dw_hh.data(), H, op);
    }
    if (a.b_ih.defined()) {
      g.db_ih = Tensor::empty({GH}, dev);
      TS_CUDA_CHECK(kernels::column_sums(dgi_t.data(), P, GH, g.db_ih.data(), env.stream));
    }
    if (a.b_hh.defined()) {
      g.db_hh = Tensor::empty({GH}, dev);
      if (lstm && g.db_ih.defined()) {  // the same sum; a copy, since each bias accumulates its own
        TS_CUDA_CHECK(cudaMemcpyAsync(g.db_hh.data(), g.db_ih.data(), static_cast<size_t>(GH) * sizeof(float),
                                      cudaMemcpyDeviceToDevice, env.stream));
      } else {
        TS_CUDA_CHECK(kernels::column_sums(dgh_t.data(), P, GH, g.db_hh.data(), env.stream));
      }
    }
  }
  return g;
}

}  // namespace ts::engine::cuda
