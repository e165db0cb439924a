#pragma once
// The CPU backend: oneDNN primitives (created once per shape/layout/params and cached) plus
// OpenMP loops for the element-wise pieces, the loss and the optimizer step. oneDNN stays
// behind this header: callers see only the Backend interface and a few introspection hooks.
#include <cstddef>
#include <memory>
#include <string>

#include "engine/backend.h"

namespace ts::engine::cpu {

// Flushes denormals to zero on the calling thread and on every OpenMP worker. Idempotent;
// the backend calls it on construction.
void init_cpu_backend();

class CpuBackend final : public Backend {
 public:
  CpuBackend();
  ~CpuBackend() override;
  CpuBackend(const CpuBackend&) = delete;
  CpuBackend& operator=(const CpuBackend&) = delete;

  const char* name() const override { return "cpu"; }

  // --- the backend's own: memory and layout conversion (cpu_backend.cpp) ---
  void fill(const Tensor& t, float value) override;
  void copy(const Tensor& src, const Tensor& dst) override;
  Tensor to_layout(const Tensor& x, const Layout& layout) override;

  // --- layout family: cpu/layout.cpp ---
  Tensor concat(const std::vector<Tensor>& xs, int64_t dim) override;
  Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t length) override;
  Tensor index_select_rows(const Tensor& x, const Tensor& index) override;
  Tensor index_add_rows(const Tensor& src, const Tensor& index, int64_t rows) override;
  Tensor permute(const Tensor& x, const std::vector<int64_t>& perm) override;

  // --- pointwise family: cpu/pointwise.cpp ---
  Tensor relu_forward(const Tensor& x) override;
  Tensor relu_backward(const Tensor& dy, const Tensor& y) override;
  Tensor add(const Tensor& a, const Tensor& b) override;
  Tensor mul(const Tensor& a, const Tensor& b) override;
  Tensor scale(const Tensor& x, float s) override;
  void add_inplace(const Tensor& acc, const Tensor& x, float alpha) override;
  Tensor tanh_forward(const Tensor& x) override;
  Tensor tanh_backward(const Tensor& dy, const Tensor& y) override;
  Tensor clipped_relu_forward(const Tensor& x, float ceiling) override;
  Tensor clipped_relu_backward(const Tensor& dy, const Tensor& y, float ceiling) override;
  Tensor gelu_forward(const Tensor& x) override;
  Tensor gelu_backward(const Tensor& dy, const Tensor& x) override;
  Tensor dropout_mask(const Shape& shape, float p, uint64_t seed) override;
  Tensor exp_forward(const Tensor& x) override;

  // --- reduce family: cpu/reduce.cpp ---
  Tensor sum_all(const Tensor& x) override;
  Tensor sum_squares(const Tensor& x) override;

  // --- conv family: cpu/conv.cpp (oneDNN) ---
  Tensor conv2d_forward(const Tensor& x, const Tensor& w, const Tensor* bias, const Conv2dParams& p) override;
  Layout conv_weights_layout(const Shape& w_shape, const Conv2dParams& p) override;
  Tensor conv2d_backward_data(const Tensor& dy, const Tensor& w, const Shape& x_shape, const Layout& x_layout,
                              const Conv2dParams& p) override;
  WeightGrads conv2d_backward_weights(const Tensor& x, const Tensor& dy, const Shape& w_shape, bool bias,
                                      const Conv2dParams& p, const Layout& w_layout) override;

  // --- norm family: cpu/norm.cpp (batch norm on oneDNN) ---
  BatchNormStats batch_norm_forward_train(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps) override;
  Tensor batch_norm_forward_eval(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& running_mean,
                                 const Tensor& running_var, float eps) override;
  BatchNormGrads batch_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma, const Tensor& mean,
                                     const Tensor& var, float eps, bool use_global_stats) override;
  BatchNormStats batch_norm_relu_forward_train(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                               float eps) override;
  BatchNormGrads batch_norm_relu_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma, const Tensor& mean,
                                          const Tensor& var, float eps, const Tensor& relu_mask) override;
  LayerNormResult layer_norm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps) override;
  BatchNormGrads layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma, const Tensor& mean,
                                     const Tensor& rstd) override;

  // --- pool family: cpu/pool.cpp (pooling on oneDNN) ---
  PoolResult max_pool2d_forward(const Tensor& x, const Pool2dParams& p) override;
  Tensor max_pool2d_backward(const Tensor& dy, const Tensor& workspace, const Shape& x_shape, const Layout& x_layout,
                             const Pool2dParams& p) override;
  Tensor avg_pool2d_forward(const Tensor& x, const Pool2dParams& p) override;
  Tensor avg_pool2d_backward(const Tensor& dy, const Shape& x_shape, const Layout& x_layout,
                             const Pool2dParams& p) override;
  Tensor upsample_nearest2d_forward(const Tensor& x, int64_t factor) override;
  Tensor upsample_nearest2d_backward(const Tensor& dy, int64_t factor) override;

  // --- linear family: cpu/linear.cpp (oneDNN's sgemm) ---
  Tensor linear_forward(const Tensor& x, const Tensor& w, const Tensor* bias) override;
  Tensor linear_backward_data(const Tensor& dy, const Tensor& w) override;
  WeightGrads linear_backward_weights(const Tensor& x, const Tensor& dy, bool bias) override;

  // --- softmax family: cpu/softmax.cpp ---
  Tensor log_softmax_forward(const Tensor& x) override;
  Tensor log_softmax_backward(const Tensor& dy, const Tensor& y) override;

  // --- loss family: cpu/loss.cpp ---
  CrossEntropyResult softmax_cross_entropy_forward(const Tensor& logits, const Tensor& labels) override;
  Tensor softmax_cross_entropy_backward(const Tensor& dloss, const Tensor& probs, const Tensor& labels) override;
  NormPenaltyResult norm_penalty_forward(const Tensor& x, float target) override;
  Tensor norm_penalty_backward(const Tensor& dloss, const Tensor& x, const Tensor& norms, float target) override;
  SmoothedCrossEntropy label_smoothed_ce_forward(const Tensor& logits, const Tensor& labels, float eps,
                                                 int64_t ignore_index, float normalizer) override;
  Tensor label_smoothed_ce_backward(const Tensor& dloss, const Tensor& logits, const Tensor& lse, const Tensor& labels,
                                    float eps, int64_t ignore_index, float normalizer) override;
  Tensor smooth_l1_forward(const Tensor& x, const Tensor& target, const Tensor* weights, float beta,
                           float scale) override;
  Tensor smooth_l1_backward(const Tensor& dloss, const Tensor& x, const Tensor& target, const Tensor* weights,
                            float beta, float scale) override;

  // --- attention family: cpu/attention.cpp. Additive attention: OpenMP over the batch, the tanh
  // vectorized (fast_math.h) ---
  AttentionResult attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor* key_lengths,
                                    int64_t heads, float scale, bool causal) override;
  AttentionGrads attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& probs, int64_t heads, float scale) override;
  AdditiveAttentionResult additive_attention_forward(const Tensor& query, const Tensor& keys, const Tensor& values,
                                                     const Tensor& v, const Tensor* lengths) override;
  AdditiveAttentionGrads additive_attention_backward(const Tensor& dcontext, const Tensor& query, const Tensor& keys,
                                                     const Tensor& values, const Tensor& v,
                                                     const Tensor& probs) override;

  // --- rnn family: cpu/rnn.cpp. One sgemm for every step's input projection,
  // one sgemm per step for the recurrent one plus a fused OpenMP gate kernel; backward likewise,
  // with the weight gradients as a few big sgemms over all steps at the end ---
  RnnForwardResult rnn_forward(const RnnArgs& a, bool training) override;
  RnnGrads rnn_backward(const RnnArgs& a, const Tensor& y, const Tensor& reserve, const Tensor& dy, const Tensor& dh_n,
                        const Tensor& dc_n, const RnnNeed& need) override;

  // --- ctc family: cpu/ctc.cpp, log-space alpha/beta in double, OpenMP over the batch ---
  CtcResult ctc_loss_forward(const Tensor& logits, const Tensor& targets, const Tensor& input_lengths,
                             const Tensor& target_lengths, int64_t blank, CtcReduction reduction, bool zero_infinity,
                             bool want_grad) override;
  Tensor ctc_loss_backward(const Tensor& dloss, const Tensor& grad) override;

  // --- roi family: cpu/roi.cpp (plain C++ with OpenMP) ---
  Tensor roi_align_forward(const Tensor& x, const Tensor& rois, int64_t pooled_h, int64_t pooled_w, float spatial_scale,
                           int64_t sampling_ratio, bool aligned) override;
  Tensor roi_align_backward(const Tensor& dy, const Tensor& rois, const Shape& x_shape, float spatial_scale,
                            int64_t sampling_ratio, bool aligned) override;
  PoolResult roi_pool_forward(const Tensor& x, const Tensor& rois, int64_t pooled_h, int64_t pooled_w,
                              float spatial_scale) override;
  Tensor roi_pool_backward(const Tensor& dy, const Tensor& argmax, const Tensor& rois, const Shape& x_shape) override;

  // --- optim family: cpu/optim.cpp ---
  void sgd_step(const Tensor& param, const Tensor& grad, const Tensor& momentum_buf, float lr, float momentum,
                float weight_decay, bool nesterov) override;
  void adam_step(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v, float lr, float beta1,
                 float beta2, float eps, float weight_decay, int64_t step) override;
  void rmsprop_step(const Tensor& param, const Tensor& grad, const Tensor& square_avg, float lr, float alpha, float eps,
                    bool eps_inside_sqrt) override;
  // --- introspection (tests, benchmarks) ---
  // Primitives created so far (every cache miss creates one entry; hits create none).
  size_t cached_primitives() const;
  // oneDNN's implementation string of the convolution primitive these arguments select.
  // which: 0 forward, 1 backward data, 2 backward weights.
  std::string conv_impl_info(const Shape& x_shape, const Layout& x_layout, const Shape& w_shape, bool bias,
                             const Conv2dParams& p, int which);
  // The layout conv2d_forward gives its output for these arguments.
  Layout conv_output_layout(const Shape& x_shape, const Layout& x_layout, const Shape& w_shape, bool bias,
                            const Conv2dParams& p);
  // Drops every cached primitive (the counter keeps counting).
  void clear_cache();

  struct Impl;
  friend Impl& impl_of(CpuBackend& b);

 private:
  std::unique_ptr<Impl> impl_;
};

// The process-wide CPU backend (what backend_for(Device::cpu()) returns).
CpuBackend& cpu_backend();

}  // namespace ts::engine::cpu
