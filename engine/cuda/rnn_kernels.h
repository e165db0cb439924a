#pragma once
// Internal to engine/cuda/: the recurrent layers' kernels (rnn.cu) for cuda/rnn.cpp.
// The schedule is the CPU backend's (engine/rnn_schedule.h): state rows j = 0..n-1 are the
// sequences still running at a step, and every per-step row is packed (row = offset[t] + j).
#include <cuda_runtime_api.h>

#include <cstdint>

namespace ts::engine::cuda::kernels {

// Where one real step of one sequence lives, made on the host per call. Steps are stored
// step-major (all j of step 0, then step 1, ...), so a step's entries are contiguous.
//   res:      its packed row (the reserve's row, and the gate gradients' row)
//   y:        its row t B + b of y and dy
//   prev_res: the packed row of the same sequence's previous step, or -1 - b at its first step
//   prev_y:   the y row of the previous step, or -1 - b at the first step
// (-1 - b: row b of the initial state, h0 or c0, or zeros when that is not given.)
struct RnnStepRows {
  int32_t res, y, prev_res, prev_y;
};

// dst[r] = src[rows[r]] for rows[r] >= 0, fallback[-1 - rows[r]] otherwise; a missing (null)
// source gives zeros. Rows of d floats; r < n.
cudaError_t rnn_gather_rows(const float* src, const float* fallback, const int32_t* rows, int64_t n, int64_t d,
                            float* dst, cudaStream_t s);
// dst[rows[r]] = src[r]; rows of d floats; r < n.
cudaError_t rnn_scatter_rows(const float* src, const int32_t* rows, int64_t n, int64_t d, float* dst, cudaStream_t s);

// One step's n sequences. res: the reserve, rows of `stride` floats, holding x W_ih^T on entry
// (LSTM: i, f, g, o, c_t and GRU: r, z, n, W_hn h + b_hn on exit); gh: h W_hh^T, [n, G H];
// biases may be null; c, h: the running state [n, H], updated; y: the output [T B, H].
cudaError_t lstm_forward_step(int64_t h_size, int64_t n, const RnnStepRows* steps, float* res, int64_t stride,
                              const float* gh, const float* b_ih, const float* b_hh, float* c, float* h, float* y,
                              cudaStream_t s);
cudaError_t gru_forward_step(int64_t h_size, int64_t n, const RnnStepRows* steps, float* res, int64_t stride,
                             const float* gh, const float* b_ih, const float* b_hh, float* h, float* y, cudaStream_t s);

// Backward through one step. dy (null: zeros) [T B, H]; dh, dc: the recurrent gradients
// reaching the step [n, H] (LSTM: dc becomes dc_{t-1} and dh is left for the GEMM to
// overwrite; GRU: dh becomes its direct part z dh, to which the GEMM adds); dg (LSTM) and dgi,
// dgh (GRU: the input and recurrent sides, which differ in n): the gate gradients, packed rows
// [P, G H]; dstep: the recurrent side's gradients of this step, [n, G H], for the GEMM.
cudaError_t lstm_backward_step(int64_t h_size, int64_t n, const RnnStepRows* steps, const float* res, int64_t stride,
                               const float* c0, const float* dy, float* dh, float* dc, float* dg, float* dstep,
                               cudaStream_t s);
cudaError_t gru_backward_step(int64_t h_size, int64_t n, const RnnStepRows* steps, const float* res, int64_t stride,
                              const float* y, const float* h0, const float* dy, float* dh, float* dgi, float* dgh,
                              float* dstep, cudaStream_t s);

}  // namespace ts::engine::cuda::kernels
