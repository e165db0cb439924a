// The recurrent layers' kernels: row gathers and scatters for the packed layout, and the fused
// gate kernels of one step. One thread per (sequence, hidden unit); the order of operations is
// the CPU backend's (cpu/rnn.cpp), compiled with --fmad=false, so the two differ only by
// expf/tanhf against the CPU's vectorized approximations and by the GEMMs' summation order.
#include "engine/cuda/kernel_grid.cuh"
#include "engine/cuda/rnn_kernels.h"

namespace ts::engine::cuda::kernels {

namespace {

__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ __forceinline__ float bias_of(const float* b, int64_t i) { return b ? b[i] : 0.0f; }

__global__ void gather_rows_kernel(const float* src, const float* fallback, const int32_t* rows, int64_t n, int64_t d,
                                   float* dst) {
  for (int64_t i = global_index(); i < n * d; i += grid_stride()) {
    const int64_t r = i / d, k = i % d;
    const int32_t row = rows[r];
    const float* from = row >= 0 ? src : fallback;
    const int64_t at = row >= 0 ? row : -1 - static_cast<int64_t>(row);
    dst[i] = from ? from[at * d + k] : 0.0f;
  }
}

__global__ void scatter_rows_kernel(const float* src, const int32_t* rows, int64_t n, int64_t d, float* dst) {
  for (int64_t i = global_index(); i < n * d; i += grid_stride()) {
    const int64_t r = i / d, k = i % d;
    dst[static_cast<int64_t>(rows[r]) * d + k] = src[i];
  }
}

__global__ void lstm_forward_kernel(int64_t H, int64_t n, const RnnStepRows* steps, float* res, int64_t stride,
                                    const float* gh, const float* b_ih, const float* b_hh, float* c, float* h,
                                    float* y) {
  for (int64_t idx = global_index(); idx < n * H; idx += grid_stride()) {
    const int64_t j = idx / H, k = idx % H;
    const RnnStepRows e = steps[j];
    float* g = res + static_cast<int64_t>(e.res) * stride;
    const float* r = gh + j * 4 * H;
    // The CPU adds the two biases first (bias_sum), then (x W_ih^T + h W_hh^T) + bias.
    const float i = sigmoid((g[k] + r[k]) + (bias_of(b_ih, k) + bias_of(b_hh, k)));
    const float f = sigmoid((g[H + k] + r[H + k]) + (bias_of(b_ih, H + k) + bias_of(b_hh, H + k)));
    const float gg = tanhf((g[2 * H + k] + r[2 * H + k]) + (bias_of(b_ih, 2 * H + k) + bias_of(b_hh, 2 * H + k)));
    const float o = sigmoid((g[3 * H + k] + r[3 * H + k]) + (bias_of(b_ih, 3 * H + k) + bias_of(b_hh, 3 * H + k)));
    const float cn = f * c[idx] + i * gg;
    const float hn = o * tanhf(cn);
    g[k] = i;
    g[H + k] = f;
    g[2 * H + k] = gg;
    g[3 * H + k] = o;
    g[4 * H + k] = cn;
    c[idx] = cn;
    h[idx] = hn;
    y[static_cast<int64_t>(e.y) * H + k] = hn;
  }
}

__global__ void gru_forward_kernel(int64_t H, int64_t n, const RnnStepRows* steps, float* res, int64_t stride,
                                   const float* gh, const float* b_ih, const float* b_hh, float* h, float* y) {
  for (int64_t idx = global_index(); idx < n * H; idx += grid_stride()) {
    const int64_t j = idx / H, k = idx % H;
    const RnnStepRows e = steps[j];
    float* g = res + static_cast<int64_t>(e.res) * stride;
    const float* q = gh + j * 3 * H;
    const float r = sigmoid((g[k] + bias_of(b_ih, k)) + (q[k] + bias_of(b_hh, k)));
    const float z = sigmoid((g[H + k] + bias_of(b_ih, H + k)) + (q[H + k] + bias_of(b_hh, H + k)));
    const float hn = q[2 * H + k] + bias_of(b_hh, 2 * H + k);
    const float nn = tanhf(g[2 * H + k] + bias_of(b_ih, 2 * H + k) + r * hn);
    const float out = (1.0f - z) * nn + z * h[idx];
    g[k] = r;
    g[H + k] = z;
    g[2 * H + k] = nn;
    g[3 * H + k] = hn;
    h[idx] = out;
    y[static_cast<int64_t>(e.y) * H + k] = out;
  }
}

__global__ void lstm_backward_kernel(int64_t H, int64_t n, const RnnStepRows* steps, const float* res, int64_t stride,
                                     const float* c0, const float* dy, float* dh_io, float* dc, float* dg,
                                     float* dstep) {
  for (int64_t idx = global_index(); idx < n * H; idx += grid_stride()) {
    const int64_t j = idx / H, k = idx % H;
    const RnnStepRows e = steps[j];
    const float* g = res + static_cast<int64_t>(e.res) * stride;
    float c_prev = 0.0f;
    if (e.prev_res >= 0) {
      c_prev = res[static_cast<int64_t>(e.prev_res) * stride + 4 * H + k];
    } else if (c0) {
      c_prev = c0[(-1 - static_cast<int64_t>(e.prev_res)) * H + k];
    }
    const float i = g[k], f = g[H + k], gg = g[2 * H + k], o = g[3 * H + k], c = g[4 * H + k];
    const float tc = tanhf(c);
    const float dh = (dy ? dy[static_cast<int64_t>(e.y) * H + k] : 0.0f) + dh_io[idx];
    const float dct = dc[idx] + dh * o * (1.0f - tc * tc);
    const float di = dct * gg * i * (1.0f - i);
    const float df = dct * c_prev * f * (1.0f - f);
    const float dgg = dct * i * (1.0f - gg * gg);
    const float dout = dh * tc * o * (1.0f - o);
    dc[idx] = dct * f;
    float* row = dg + static_cast<int64_t>(e.res) * 4 * H;
    float* st = dstep + j * 4 * H;
    row[k] = st[k] = di;
    row[H + k] = st[H + k] = df;
    row[2 * H + k] = st[2 * H + k] = dgg;
    row[3 * H + k] = st[3 * H + k] = dout;
  }
}

__global__ void gru_backward_kernel(int64_t H, int64_t n, const RnnStepRows* steps, const float* res, int64_t stride,
                                    const float* y, const float* h0, const float* dy, float* dh, float* dgi, float* dgh,
                                    float* dstep) {
  for (int64_t idx = global_index(); idx < n * H; idx += grid_stride()) {
    const int64_t j = idx / H, k = idx % H;
    const RnnStepRows e = steps[j];
    const float* g = res + static_cast<int64_t>(e.res) * stride;
    float h_prev = 0.0f;
    if (e.prev_y >= 0) {
      h_prev = y[static_cast<int64_t>(e.prev_y) * H + k];
    } else if (h0) {
      h_prev = h0[(-1 - static_cast<int64_t>(e.prev_y)) * H + k];
    }
    const float r = g[k], z = g[H + k], nn = g[2 * H + k], hn = g[3 * H + k];
    const float d = (dy ? dy[static_cast<int64_t>(e.y) * H + k] : 0.0f) + dh[idx];
    const float dn = d * (1.0f - z) * (1.0f - nn * nn);
    const float dz = d * (h_prev - nn) * z * (1.0f - z);
    const float dr = dn * hn * r * (1.0f - r);
    const float dhn = dn * r;
    float* in = dgi + static_cast<int64_t>(e.res) * 3 * H;
    float* rec = dgh + static_cast<int64_t>(e.res) * 3 * H;
    float* st = dstep + j * 3 * H;
    in[k] = rec[k] = st[k] = dr;
    in[H + k] = rec[H + k] = st[H + k] = dz;
    in[2 * H + k] = dn;
    rec[2 * H + k] = st[2 * H + k] = dhn;
    dh[idx] = d * z;
  }
}

}  // namespace

cudaError_t rnn_gather_rows(const float* src, const float* fallback, const int32_t* rows, int64_t n, int64_t d,
                            float* dst, cudaStream_t s) {
  if (n * d <= 0) return cudaSuccess;
  gather_rows_kernel<<<blocks_for(n * d), kThreads, 0, s>>>(src, fallback, rows, n, d, dst);
  return cudaGetLastError();
}

cudaError_t rnn_scatter_rows(const float* src, const int32_t* rows, int64_t n, int64_t d, float* dst, cudaStream_t s) {
  if (n * d <= 0) return cudaSuccess;
  scatter_rows_kernel<<<blocks_for(n * d), kThreads, 0, s>>>(src, rows, n, d, dst);
  return cudaGetLastError();
}

cudaError_t lstm_forward_step(int64_t h_size, int64_t n, const RnnStepRows* steps, float* res, int64_t stride,
                              const float* gh, const float* b_ih, const float* b_hh, float* c, float* h, float* y,
                              cudaStream_t s) {
  if (n * h_size <= 0) return cudaSuccess;
  lstm_forward_kernel<<<blocks_for(n * h_size), kThreads, 0, s>>>(h_size, n, steps, res, stride, gh, b_ih, b_hh, c, h,
                                                                  y);
  return cudaGetLastError();
}

cudaError_t gru_forward_step(int64_t h_size, int64_t n, const RnnStepRows* steps, float* res, int64_t stride,
                             const float* gh, const float* b_ih, const float* b_hh, float* h, float* y,
                             cudaStream_t s) {
  if (n * h_size <= 0) return cudaSuccess;
  gru_forward_kernel<<<blocks_for(n * h_size), kThreads, 0, s>>>(h_size, n, steps, res, stride, gh, b_ih, b_hh, h, y);
  return cudaGetLastError();
}

cudaError_t lstm_backward_step(int64_t h_size, int64_t n, const RnnStepRows* steps, const float* res, int64_t stride,
                               const float* c0, const float* dy, float* dh, float* dc, float* dg, float* dstep,
                               cudaStream_t s) {
  if (n * h_size <= 0) return cudaSuccess;
  lstm_backward_kernel<<<blocks_for(n * h_size), kThreads, 0, s>>>(h_size, n, steps, res, stride, c0, dy, dh, dc, dg,
                                                                   dstep);
  return cudaGetLastError();
}

cudaError_t gru_backward_step(int64_t h_size, int64_t n, const RnnStepRows* steps, const float* res, int64_t stride,
                              const float* y, const float* h0, const float* dy, float* dh, float* dgi, float* dgh,
                              float* dstep, cudaStream_t s) {
  if (n * h_size <= 0) return cudaSuccess;
  gru_backward_kernel<<<blocks_for(n * h_size), kThreads, 0, s>>>(h_size, n, steps, res, stride, y, h0, dy, dh, dgi,
                                                                  dgh, dstep);
  return cudaGetLastError();
}

}  // namespace ts::engine::cuda::kernels
