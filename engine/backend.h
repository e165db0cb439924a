#pragma once
// The kernels a device provides. Ops (ops.h) do autograd and tracing once, on top of this
// interface; each backend (cpu/ on oneDNN, cuda/ later) implements the kernels and never
// includes another backend. Integer inputs (class labels) travel as fp32 holding integers.
#include <utility>
#include <vector>

#include "engine/tensor.h"

namespace ts::engine {

struct Conv2dParams {
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0;
  int64_t dilation_h = 1, dilation_w = 1;  // 1 = no dilation (PyTorch's convention)
  int64_t groups = 1;
};

struct Pool2dParams {
  int64_t kernel_h = 1, kernel_w = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0;
  bool count_include_pad = false;  // average pooling only
};

// Output spatial size; throws std::invalid_argument when the window does not fit.
int64_t conv_out_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad, int64_t dilation);

struct BatchNormStats {
  Tensor y;
  Tensor mean;  // [C], batch mean
  Tensor var;   // [C], biased batch variance (what normalisation used)
  // batch_norm_relu_forward_train only: what its backward needs to apply the ReLU's gradient, in
  // the backend's own form (oneDNN's workspace on the CPU; y itself by default).
  Tensor relu_mask;
};

struct BatchNormGrads {
  Tensor dx, dgamma, dbeta;
};

struct PoolResult {
  Tensor y;
  Tensor workspace;  // max pooling: what backward needs (argmax), category workspace
};

struct WeightGrads {
  Tensor dw;
  Tensor dbias;  // undefined when there is no bias
};

struct CrossEntropyResult {
  Tensor loss;   // [1], mean over the batch
  Tensor probs;  // [N, K] softmax probabilities, saved for backward
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;

  // --- the backend's own: memory and layout conversion ---
  virtual void fill(const Tensor& t, float value) = 0;
  // dst = src (same logical shape; layouts may differ).
  virtual void copy(const Tensor& src, const Tensor& dst) = 0;
  virtual Tensor to_layout(const Tensor& x, const Layout& layout) = 0;

  // --- layout family (engine/{ops,cpu,cuda}/layout.*): concatenation along a dimension and
  // its inverse, the row gather/scatter, permute ---
  virtual Tensor concat(const std::vector<Tensor>& xs, int64_t dim) = 0;
  virtual Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t length) = 0;
  // Rows of x [N, K] at index [M] -> [M, K]; index_add_rows is its adjoint: src [M, K] summed
  // into zeros [rows, K] at index (repeated indices add up).
  virtual Tensor index_select_rows(const Tensor& x, const Tensor& index) = 0;
  virtual Tensor index_add_rows(const Tensor& src, const Tensor& index, int64_t rows) = 0;
  // y.shape[i] = x.shape[perm[i]] (x plain, y plain).
  virtual Tensor permute(const Tensor& x, const std::vector<int64_t>& perm) = 0;

  // --- pointwise family: element-wise ops (any layout unless noted; inputs of a binary op
  // share shape and layout) ---
  virtual Tensor relu_forward(const Tensor& x) = 0;
  virtual Tensor relu_backward(const Tensor& dy, const Tensor& y) = 0;  // dy where y > 0
  virtual Tensor add(const Tensor& a, const Tensor& b) = 0;
  virtual Tensor mul(const Tensor& a, const Tensor& b) = 0;
  virtual Tensor scale(const Tensor& x, float s) = 0;
  virtual void add_inplace(const Tensor& acc, const Tensor& x, float alpha) = 0;  // acc += alpha * x
  virtual Tensor tanh_forward(const Tensor& x) = 0;                               // any layout, kept
  virtual Tensor tanh_backward(const Tensor& dy, const Tensor& y) = 0;            // dy (1 - y^2)
  // Clipped ReLU (Deep Speech 2's activation): y = min(max(x, 0), ceiling), any layout, kept;
  // backward dx = dy where 0 < y < ceiling (as hardtanh: no gradient at or beyond the clip).
  virtual Tensor clipped_relu_forward(const Tensor& x, float ceiling) = 0;
  virtual Tensor clipped_relu_backward(const Tensor& dy, const Tensor& y, float ceiling) = 0;
  // GELU, the exact form x Phi(x).
  virtual Tensor gelu_forward(const Tensor& x) = 0;
  virtual Tensor gelu_backward(const Tensor& dy, const Tensor& x) = 0;
  // Inverted-dropout mask: each element 1/(1-p) with probability 1-p, else 0, drawn from a
  // counter-based hash of (seed, element index) so that every backend draws the same mask.
  virtual Tensor dropout_mask(const Shape& shape, float p, uint64_t seed) = 0;
  virtual Tensor exp_forward(const Tensor& x) = 0;  // plain

  // --- reduce family ---
  virtual Tensor sum_all(const Tensor& x) = 0;  // [1]
  // sum of squares of the logical values (any layout) -> [1]: gradient clipping's norm.
  virtual Tensor sum_squares(const Tensor& x) = 0;

  // --- conv family: 2-D convolution (weights [O, I/groups, kh, kw], bias [O]) ---
  // Weights come plain or in conv_weights_layout's layout; dw comes back in w_layout.
  virtual Tensor conv2d_forward(const Tensor& x, const Tensor& w, const Tensor* bias, const Conv2dParams& p) = 0;
  virtual Tensor conv2d_backward_data(const Tensor& dy, const Tensor& w, const Shape& x_shape, const Layout& x_layout,
                                      const Conv2dParams& p) = 0;
  virtual WeightGrads conv2d_backward_weights(const Tensor& x, const Tensor& dy, const Shape& w_shape, bool bias,
                                              const Conv2dParams& p, const Layout& w_layout) = 0;
  // The layout a convolution's weights parameter is best kept in: the one its kernels read and
  // write, so that no call reorders them. Plain unless the backend's kernels want another.
  virtual Layout conv_weights_layout(const Shape& w_shape, const Conv2dParams& p) {
    (void)w_shape;
    (void)p;
    return Layout::plain();
  }

  // --- norm family: batch normalisation over N, H, W per channel (x 4-D [N,C,H,W] or 2-D
  // [N,C]); layer normalisation (plain) ---
  virtual BatchNormStats batch_norm_forward_train(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                                  float eps) = 0;
  virtual Tensor batch_norm_forward_eval(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                         const Tensor& running_mean, const Tensor& running_var, float eps) = 0;
  // use_global_stats: mean/var are running statistics (eval mode), treated as constants.
  virtual BatchNormGrads batch_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma, const Tensor& mean,
                                             const Tensor& var, float eps, bool use_global_stats = false) = 0;
  // Training batch norm followed by ReLU, y = max(BN(x), 0), and its backward (batch statistics):
  // one pass over the data where the backend fuses them (oneDNN's fuse_norm_relu); by default the
  // two kernels (backend.cpp), the mask being y.
  virtual BatchNormStats batch_norm_relu_forward_train(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                                       float eps);
  virtual BatchNormGrads batch_norm_relu_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                                                  const Tensor& mean, const Tensor& var, float eps,
                                                  const Tensor& relu_mask);
  // Over the last dimension of x [M, D]: y = (x - mean) rstd gamma + beta, rstd = 1/sqrt(var + eps)
  // with the biased variance; mean and rstd [M] are kept for backward.
  struct LayerNormResult {
    Tensor y, mean, rstd;
  };
  virtual LayerNormResult layer_norm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps) = 0;
  virtual BatchNormGrads layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma, const Tensor& mean,
                                             const Tensor& rstd) = 0;

  // --- pool family: pooling and nearest upsampling ---
  virtual PoolResult max_pool2d_forward(const Tensor& x, const Pool2dParams& p) = 0;
  virtual Tensor max_pool2d_backward(const Tensor& dy, const Tensor& workspace, const Shape& x_shape,
                                     const Layout& x_layout, const Pool2dParams& p) = 0;
  virtual Tensor avg_pool2d_forward(const Tensor& x, const Pool2dParams& p) = 0;
  virtual Tensor avg_pool2d_backward(const Tensor& dy, const Shape& x_shape, const Layout& x_layout,
                                     const Pool2dParams& p) = 0;
  // x [N, C, H, W] -> [N, C, f H, f W], each value repeated f x f times (any layout, kept).
  virtual Tensor upsample_nearest2d_forward(const Tensor& x, int64_t factor) = 0;
  // Its adjoint: each f x f window of dy summed.
  virtual Tensor upsample_nearest2d_backward(const Tensor& dy, int64_t factor) = 0;

  // --- linear family: fully connected, y[N, O] = x[N, I] w[O, I]^T + b[O] ---
  virtual Tensor linear_forward(const Tensor& x, const Tensor& w, const Tensor* bias) = 0;
  virtual Tensor linear_backward_data(const Tensor& dy, const Tensor& w) = 0;
  virtual WeightGrads linear_backward_weights(const Tensor& x, const Tensor& dy, bool bias) = 0;

  // --- softmax family ---
  // x [M, K] plain: y = x - log sum_k exp(x_k) per row; backward dx = dy - exp(y) sum_k dy_k.
  virtual Tensor log_softmax_forward(const Tensor& x) = 0;
  virtual Tensor log_softmax_backward(const Tensor& dy, const Tensor& y) = 0;

  // --- loss family: softmax cross-entropy over [N, K] logits with labels [N] (class indices
  // as fp32), the gradient penalty, label-smoothed cross-entropy, smooth-L1 ---
  virtual CrossEntropyResult softmax_cross_entropy_forward(const Tensor& logits, const Tensor& labels) = 0;
  virtual Tensor softmax_cross_entropy_backward(const Tensor& dloss, const Tensor& probs, const Tensor& labels) = 0;
  // x [N, D] plain: loss [1] = mean_n (||x_n|| - target)^2, norms [N] = ||x_n||.
  struct NormPenaltyResult {
    Tensor loss, norms;
  };
  virtual NormPenaltyResult norm_penalty_forward(const Tensor& x, float target) = 0;
  // dx_n = dloss * 2 (||x_n|| - target) / (N ||x_n||) x_n (zero where ||x_n|| = 0).
  virtual Tensor norm_penalty_backward(const Tensor& dloss, const Tensor& x, const Tensor& norms, float target) = 0;
  // Label-smoothed softmax cross-entropy: logits [N, V], labels [N] (fp32 ids). Rows labelled
  // ignore_index count for nothing; the others have target q = (1 - eps) onehot + eps / V and
  // loss [1] = sum_rows -sum_k q_k log p_k / normalizer. lse [N] (log-sum-exp) is kept for backward.
  struct SmoothedCrossEntropy {
    Tensor loss, lse;
  };
  virtual SmoothedCrossEntropy label_smoothed_ce_forward(const Tensor& logits, const Tensor& labels, float eps,
                                                         int64_t ignore_index, float normalizer) = 0;
  virtual Tensor label_smoothed_ce_backward(const Tensor& dloss, const Tensor& logits, const Tensor& lse,
                                            const Tensor& labels, float eps, int64_t ignore_index,
                                            float normalizer) = 0;
  // loss [1] = scale * sum_i w_i l(x_i - t_i), l(d) = 0.5 d^2 / beta if |d| < beta else |d| - 0.5 beta
  // (beta 0: L1). x, target and weights (nullptr: all ones) share a shape.
  virtual Tensor smooth_l1_forward(const Tensor& x, const Tensor& target, const Tensor* weights, float beta,
                                   float scale) = 0;
  // d loss / d x (shape of x); d loss / d target is its negation.
  virtual Tensor smooth_l1_backward(const Tensor& dloss, const Tensor& x, const Tensor& target, const Tensor* weights,
                                    float beta, float scale) = 0;

  // --- attention family (all plain) ---
  // Scaled dot-product attention for every head: q [B, Tq, H dh], k and v [B, Tk, H dh]; per
  // head h, out_h = softmax(scale q_h k_h^T + mask) v_h, where the mask hides keys j >=
  // key_lengths[b] (fp32 [B]; nullptr: none) and, when causal, keys j > i. probs [B, H, Tq, Tk]
  // are kept for backward. A row with every key hidden gives zeros.
  struct AttentionResult {
    Tensor out, probs;
  };
  virtual AttentionResult attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                            const Tensor* key_lengths, int64_t heads, float scale, bool causal) = 0;
  struct AttentionGrads {
    Tensor dq, dk, dv;
  };
  virtual AttentionGrads attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                                            const Tensor& probs, int64_t heads, float scale) = 0;
  // query [B, A] (the projected decoder state), keys [B, S, A] (the projected memory), values
  // [B, S, D] (the memory), v [A]; all plain. score_j = v . tanh(query + keys_j) for j <
  // lengths[b] (fp32 [B]; nullptr: all S), probs = softmax over those (0 elsewhere; a row with
  // no key gives probs and context 0), context [B, D] = sum_j probs_j values_j. Only probs
  // [B, S] is kept: backward recomputes the tanh rather than keep [B, S, A] per decoder step.
  struct AdditiveAttentionResult {
    Tensor context, probs;
  };
  virtual AdditiveAttentionResult additive_attention_forward(const Tensor& query, const Tensor& keys,
                                                             const Tensor& values, const Tensor& v,
                                                             const Tensor* lengths) = 0;
  struct AdditiveAttentionGrads {
    Tensor dquery, dkeys, dvalues, dv;
  };
  virtual AdditiveAttentionGrads additive_attention_backward(const Tensor& dcontext, const Tensor& query,
                                                             const Tensor& keys, const Tensor& values, const Tensor& v,
                                                             const Tensor& probs) = 0;

  // --- rnn family: recurrent layers (seq2seq's LSTM, Deep Speech 2's GRU), one layer, one
  // direction ---
  // cpu/rnn.cpp and cuda/rnn.cpp (one schedule, rnn_schedule.h). PyTorch's weight
  // layout and gate order: LSTM (i, f, g, o), GRU (r, z, n) with n = tanh(W_in x + b_in + r (W_hn
  // h + b_hn)) as torch.nn.GRU and cuDNN define it (oneDNN's lbr_gru). G = 4 (LSTM) or 3 (GRU).
  // All plain; results plain.
  enum class RnnCell { lstm, gru };
  struct RnnArgs {
    RnnCell cell = RnnCell::lstm;
    Tensor x;           // [T, B, I], time-major
    Tensor w_ih, w_hh;  // [G H, I], [G H, H]
    Tensor b_ih, b_hh;  // [G H]; undefined: zeros (LSTM adds both, as PyTorch)
    Tensor h0, c0;      // [B, H]; undefined: zeros; c0 LSTM only
    // [B] fp32 integers in [0, T] (undefined: all T), on x's device or the CPU (cuDNN wants them
    // on the host too); padding sits at the end. Steps t >=
    // lengths[b] keep the state and output zeros; `reverse` runs each sequence from its own last
    // real step (lengths[b] - 1) back to 0.
    Tensor lengths;
    bool reverse = false;
  };
  struct RnnForwardResult {
    Tensor y;         // [T, B, H], zeros at padded steps
    Tensor h_n, c_n;  // [B, H], the state after each sequence's own last step (c_n: LSTM only)
    // What backward needs, category activations, in the backend's own format (cuDNN's reserve
    // space on CUDA); undefined unless `training`.
    Tensor reserve;
  };
  virtual RnnForwardResult rnn_forward(const RnnArgs& a, bool training) = 0;
  struct RnnGrads {
    Tensor dx, dh0, dc0, dw_ih, dw_hh, db_ih, db_hh;  // undefined where not asked for or absent
  };
  struct RnnNeed {
    bool dx = true, dh0 = true, dc0 = true, weights = true;  // weights: w_ih, w_hh and the biases
  };
  // dy [T, B, H], dh_n and dc_n [B, H] (undefined: zeros); y and reserve from rnn_forward of
  // the same arguments.
  virtual RnnGrads rnn_backward(const RnnArgs& a, const Tensor& y, const Tensor& reserve, const Tensor& dy,
                                const Tensor& dh_n, const Tensor& dc_n, const RnnNeed& need) = 0;

  // --- ctc family: the CTC loss (Graves et al. 2006), Deep Speech 2's ---
  // logits [T, N, K] plain, time-major (log-softmax over K is applied inside, so the gradient
  // w.r.t. the logits is softmax - occupancy). targets [sum_n L_n]: the label sequences
  // concatenated; input_lengths [N] (frames used, <= T) and target_lengths [N] (L_n); all fp32
  // holding integers, labels in [0, K) and never `blank`. Per sample, nll_n = -log p(l_n | x_n)
  // (+inf when no alignment fits, e.g. T_n < L_n + repeats).
  // loss [1]: mean = mean_n nll_n / max(L_n, 1) (PyTorch's reduction='mean'); sum = sum_n nll_n.
  // zero_infinity: infeasible samples give nll 0 and gradient 0 (otherwise inf and NaN, as PyTorch).
  // want_grad: grad [T, N, K] = d loss / d logits (reduction weights included; 0 for t >= T_n),
  // computed with the loss in one pass, as cuDNN's CTC does; undefined otherwise.
  enum class CtcReduction { mean, sum };
  struct CtcResult {
    Tensor loss;  // [1]
    Tensor nll;   // [N]
    Tensor grad;  // [T, N, K] or undefined
  };
  virtual CtcResult ctc_loss_forward(const Tensor& logits, const Tensor& targets, const Tensor& input_lengths,
                                     const Tensor& target_lengths, int64_t blank, CtcReduction reduction,
                                     bool zero_infinity, bool want_grad) = 0;
  // dlogits = dloss[0] * grad (dloss [1] is read on the device, no host round trip).
  virtual Tensor ctc_loss_backward(const Tensor& dloss, const Tensor& grad) = 0;

  // --- roi family (Faster R-CNN): RoI pooling ---
  // rois [R, 5] plain: rows (batch index, x1, y1, x2, y2) in input-image pixels, mapped onto the
  // feature map by spatial_scale. x and dy plain; every result plain. Indices travel as fp32.
  // RoIAlign (He et al. 2017): bilinear samples, sampling_ratio per bin side (<= 0: adaptive,
  // ceil(roi size / pooled size)), averaged per bin; aligned = false is the original (no
  // half-pixel offset, RoIs at least 1x1 cell), true is Detectron2's. -> [R, C, pooled_h, pooled_w]
  virtual Tensor roi_align_forward(const Tensor& x, const Tensor& rois, int64_t pooled_h, int64_t pooled_w,
                                   float spatial_scale, int64_t sampling_ratio, bool aligned) = 0;
  // dx [N, C, H, W] (x_shape) from dy [R, C, pooled_h, pooled_w]; gradients of overlapping RoIs add.
  virtual Tensor roi_align_backward(const Tensor& dy, const Tensor& rois, const Shape& x_shape, float spatial_scale,
                                    int64_t sampling_ratio, bool aligned) = 0;
  // RoIPool (Girshick 2015): max over each bin of the rounded RoI; workspace [R, C, ph, pw]
  // holds the argmax as a flat h * W + w index (-1 for an empty bin, whose output is 0).
  virtual PoolResult roi_pool_forward(const Tensor& x, const Tensor& rois, int64_t pooled_h, int64_t pooled_w,
                                      float spatial_scale) = 0;
  virtual Tensor roi_pool_backward(const Tensor& dy, const Tensor& argmax, const Tensor& rois,
                                   const Shape& x_shape) = 0;

  // --- optim family: optimizer updates (in place, plain layout) ---
  // buf = momentum * buf + (grad + wd * param); param -= lr * (nesterov ? grad' + momentum * buf : buf)
  virtual void sgd_step(const Tensor& param, const Tensor& grad, const Tensor& momentum_buf, float lr, float momentum,
                        float weight_decay, bool nesterov) = 0;
  // Adam (Kingma & Ba; PyTorch's formulation, L2 weight decay added to the gradient), `step`
  // counting from 1: m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
  // param -= lr (m / (1 - b1^step)) / (sqrt(v / (1 - b2^step)) + eps).
  virtual void adam_step(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v, float lr,
                         float beta1, float beta2, float eps, float weight_decay, int64_t step) = 0;
  // square_avg = alpha square_avg + (1 - alpha) g^2; param -= lr g / d, d = sqrt(square_avg + eps)
  // (eps_inside_sqrt: the A3C paper's and TensorFlow's form) or sqrt(square_avg) + eps (PyTorch's).
  // Several threads may run it on the same param and square_avg at once (A3C's Hogwild updates).
  virtual void rmsprop_step(const Tensor& param, const Tensor& grad, const Tensor& square_avg, float lr, float alpha,
                            float eps, bool eps_inside_sqrt) = 0;
};

// The backend for a device; throws std::runtime_error for a device this build lacks.
Backend& backend_for(Device device);
inline Backend& backend_of(const Tensor& t) { return backend_for(t.device()); }

}  // namespace ts::engine
