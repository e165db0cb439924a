#pragma once
// The CUDA backend: cuDNN for convolution and training-mode batch norm, cuBLAS for the fully
// connected GEMMs, our own kernels (cuda/<family>.cu) for everything else. One backend per device;
// all work is queued on that device's stream (device_context.h), so a method returns before
// the GPU has finished, and host reads (Tensor::to_vector) wait for it.
//
// Layouts: the library calls and most kernels work on plain NCHW. Inputs in another layout
// are reordered to plain first; results are plain, except that a gradient comes back in the
// layout of what it is the gradient of (as on the CPU) and element-wise ops keep their
// input's layout. to_layout/copy really reorder (channels-last and channel-blocked too), so
// nothing is ever silently relabelled.
#include <cstddef>
#include <memory>
#include <string>

#include "engine/autotune.h"
#include "engine/backend.h"

namespace ts::engine::cuda {

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  const char* name() const override { return "cuda"; }
  int device_index() const { return device_; }

  // --- the backend's own: memory and layout conversion (cuda_backend.cpp, cuda_backend.cu) ---
  void fill(const Tensor& t, float value) override;
  void copy(const Tensor& src, const Tensor& dst) override;
  Tensor to_layout(const Tensor& x, const Layout& layout) override;

  // --- layout family: cuda/layout.cpp ---
  Tensor concat(const std::vector<Tensor>& xs, int64_t dim) override;
  Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t length) override;
  Tensor index_select_rows(const Tensor& x, const Tensor& index) override;
  Tensor index_add_rows(const Tensor& src, const Tensor& index, int64_t rows) override;
  // Rank up to 8.
  Tensor permute(const Tensor& x, const std::vector<int64_t>& perm) override;

  // --- pointwise family: cuda/pointwise.cpp ---
  Tensor relu_forward(const Tensor& x) override;
  Tensor relu_backward(const Tensor& dy, const Tensor& y) override;
  Tensor add(const Tensor& a, const Tensor& b) override;
  Tensor mul(const Tensor& a, const Tensor& b) override;
  Tensor scale(const Tensor& x, float s) override;
  void add_inplace(const Tensor& acc, const Tensor& x, float alpha) override;
  Tensor tanh_forward(const Tensor& x) override;
  Tensor tanh_backward(const Tensor& dy, const Tensor& y) override;
  Tensor gelu_forward(const Tensor& x) override;
  Tensor gelu_backward(const Tensor& dy, const Tensor& x) override;
  // The mask is made on this device, with the CPU backend's hash: the same mask bit for bit.
  Tensor dropout_mask(const Shape& shape, float p, uint64_t seed) override;
  Tensor clipped_relu_forward(const Tensor& x, float ceiling) override;
  Tensor clipped_relu_backward(const Tensor& dy, const Tensor& y, float ceiling) override;
  Tensor exp_forward(const Tensor& x) override;

  // --- reduce family: cuda/reduce.cpp ---
  Tensor sum_all(const Tensor& x) override;
  Tensor sum_squares(const Tensor& x) override;

  // --- conv family: cuda/conv.cpp (cuDNN) ---
  Tensor conv2d_forward(const Tensor& x, const Tensor& w, const Tensor* bias, const Conv2dParams& p) override;
  Tensor conv2d_backward_data(const Tensor& dy, const Tensor& w, const Shape& x_shape, const Layout& x_layout,
                              const Conv2dParams& p) override;
  WeightGrads conv2d_backward_weights(const Tensor& x, const Tensor& dy, const Shape& w_shape, bool bias,
                                      const Conv2dParams& p, const Layout& w_layout) override;

  // --- norm family: cuda/norm.cpp (batch norm training on cuDNN) ---
  BatchNormStats batch_norm_forward_train(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps) override;
  Tensor batch_norm_forward_eval(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& running_mean,
                                 const Tensor& running_var, float eps) override;
  BatchNormGrads batch_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma, const Tensor& mean,
                                     const Tensor& var, float eps, bool use_global_stats) override;
  LayerNormResult layer_norm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps) override;
  BatchNormGrads layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma, const Tensor& mean,
                                     const Tensor& rstd) override;

  // --- pool family: cuda/pool.cpp ---
  // Max pooling's workspace holds, per output element, the int32 index (h * W + w within its
  // plane) of the input element that won, stored bit-for-bit in the fp32 tensor's storage:
  // backward receives no x, and the indices are the least that must be kept (half of
  // PyTorch's int64 indices).
  PoolResult max_pool2d_forward(const Tensor& x, const Pool2dParams& p) override;
  Tensor max_pool2d_backward(const Tensor& dy, const Tensor& workspace, const Shape& x_shape, const Layout& x_layout,
                             const Pool2dParams& p) override;
  Tensor avg_pool2d_forward(const Tensor& x, const Pool2dParams& p) override;
  Tensor avg_pool2d_backward(const Tensor& dy, const Shape& x_shape, const Layout& x_layout,
                             const Pool2dParams& p) override;
  Tensor upsample_nearest2d_forward(const Tensor& x, int64_t factor) override;
  Tensor upsample_nearest2d_backward(const Tensor& dy, int64_t factor) override;

  // --- linear family: cuda/linear.cpp (cuBLAS) ---
  Tensor linear_forward(const Tensor& x, const Tensor& w, const Tensor* bias) override;
  Tensor linear_backward_data(const Tensor& dy, const Tensor& w) override;
  WeightGrads linear_backward_weights(const Tensor& x, const Tensor& dy, bool bias) override;

  // --- softmax family: cuda/softmax.cpp ---
  Tensor log_softmax_forward(const Tensor& x) override;
  Tensor log_softmax_backward(const Tensor& dy, const Tensor& y) override;

  // --- loss family: cuda/loss.cpp ---
  CrossEntropyResult softmax_cross_entropy_forward(const Tensor& logits, const Tensor& labels) override;
  Tensor softmax_cross_entropy_backward(const Tensor& dloss, const Tensor& probs, const Tensor& labels) override;
  NormPenaltyResult norm_penalty_forward(const Tensor& x, float target) override;
  Tensor norm_penalty_backward(const Tensor& dloss, const Tensor& x, const Tensor& norms, float target) override;
  // Labels are checked on the host (a copy of N floats).
  SmoothedCrossEntropy label_smoothed_ce_forward(const Tensor& logits, const Tensor& labels, float eps,
                                                 int64_t ignore_index, float normalizer) override;
  Tensor label_smoothed_ce_backward(const Tensor& dloss, const Tensor& logits, const Tensor& lse, const Tensor& labels,
                                    float eps, int64_t ignore_index, float normalizer) override;
  Tensor smooth_l1_forward(const Tensor& x, const Tensor& target, const Tensor* weights, float beta,
                           float scale) override;
  Tensor smooth_l1_backward(const Tensor& dloss, const Tensor& x, const Tensor& target, const Tensor* weights,
                            float beta, float scale) override;

  // --- attention family: cuda/attention.cpp ---
  // Per-head GEMMs are batched cuBLAS calls over (batch, head); the masked softmax is ours.
  AttentionResult attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor* key_lengths,
                                    int64_t heads, float scale, bool causal) override;
  AttentionGrads attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& probs, int64_t heads, float scale) override;
  AdditiveAttentionResult additive_attention_forward(const Tensor& query, const Tensor& keys, const Tensor& values,
                                                     const Tensor& v, const Tensor* lengths) override;
  AdditiveAttentionGrads additive_attention_backward(const Tensor& dcontext, const Tensor& query, const Tensor& keys,
                                                     const Tensor& values, const Tensor& v,
                                                     const Tensor& probs) override;

  // --- rnn family: cuda/rnn.cpp: the CPU backend's algorithm (cpu/rnn.cpp) on cuBLAS with fused
  // gate kernels (rnn.cu); lengths are read on the host to plan the packed steps ---
  RnnForwardResult rnn_forward(const RnnArgs& a, bool training) override;
  RnnGrads rnn_backward(const RnnArgs& a, const Tensor& y, const Tensor& reserve, const Tensor& dy, const Tensor& dh_n,
                        const Tensor& dc_n, const RnnNeed& need) override;

  // --- ctc family: cuda/ctc.cpp ---
  // Our own log-space CTC (one block per sample, in double), checked against the CPU's; the
  // lengths and labels are checked on the host first.
  CtcResult ctc_loss_forward(const Tensor& logits, const Tensor& targets, const Tensor& input_lengths,
                             const Tensor& target_lengths, int64_t blank, CtcReduction reduction, bool zero_infinity,
                             bool want_grad) override;
  Tensor ctc_loss_backward(const Tensor& dloss, const Tensor& grad) override;

  // --- roi family: cuda/roi.cpp ---
  // RoIs are checked on the host first (a small copy that waits for the queued work), so a bad
  // batch index is the CPU backend's error, never an out-of-bounds access (row indices likewise,
  // layout.cpp). The backward scatters use atomic adds: their sums may differ from run to run in
  // the last bits.
  Tensor roi_align_forward(const Tensor& x, const Tensor& rois, int64_t pooled_h, int64_t pooled_w, float spatial_scale,
                           int64_t sampling_ratio, bool aligned) override;
  Tensor roi_align_backward(const Tensor& dy, const Tensor& rois, const Shape& x_shape, float spatial_scale,
                            int64_t sampling_ratio, bool aligned) override;
  PoolResult roi_pool_forward(const Tensor& x, const Tensor& rois, int64_t pooled_h, int64_t pooled_w,
                              float spatial_scale) override;
  Tensor roi_pool_backward(const Tensor& dy, const Tensor& argmax, const Tensor& rois, const Shape& x_shape) override;

  // --- optim family: cuda/optim.cpp ---
  void rmsprop_step(const Tensor& param, const Tensor& grad, const Tensor& square_avg, float lr, float alpha, float eps,
                    bool eps_inside_sqrt) override;
  void sgd_step(const Tensor& param, const Tensor& grad, const Tensor& momentum_buf, float lr, float momentum,
                float weight_decay, bool nesterov) override;
  void adam_step(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v, float lr, float beta1,
                 float beta2, float eps, float weight_decay, int64_t step) override;
  // --- introspection (tests, benchmarks) ---
  // cuDNN convolution plans (algorithm + workspace) chosen so far; a hit adds none.
  size_t cached_conv_plans() const;
  // How the plans made so far were chosen: searched, or from cuDNN's heuristics while autotuning
  // was off (engine/autotune.h); what engine::conv_plan_stats returns for this device.
  ConvPlanStats conv_plan_stats() const;
  // The algorithm chosen for these arguments, e.g. "fwd algo 1 (IMPLICIT_PRECOMP_GEMM), workspace
  // 0 B, math 0". which: 0 forward, 1 backward data, 2 backward weights.
  std::string conv_algo_info(const Shape& x_shape, const Shape& w_shape, const Conv2dParams& p, int which);
  // Drops every cached plan.
  void clear_cache();
  // Waits until everything queued on this device's stream has run.
  void synchronize();

  struct Impl;

 private:
  int device_;
  std::unique_ptr<Impl> impl_;
};

// The backend of cuda:`device`; std::runtime_error (with the reason) when the device is not
// usable. What backend_for returns for cuda devices.
CudaBackend& cuda_backend(int device);

// The most workspace a cuDNN convolution may take (the algorithm search skips those that
// need more).
inline constexpr size_t kMaxConvWorkspaceBytes = size_t{256} << 20;

}  // namespace ts::engine::cuda
