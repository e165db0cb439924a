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
  int64_t dilation_h = 1, dilation_w = 1;   // 1 = no dilation (PyTorch's convention)
  int64_t groups = 1;
};

struct Pool2dParams {
  int64_t kernel_h = 1, kernel_w = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0;
  bool count_include_pad = false;   // average pooling only
};

// Output spatial size; throws std::invalid_argument when the window does not fit.
int64_t conv_out_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad, int64_t dilation);

struct BatchNormStats {
  Tensor y;
  Tensor mean;   // [C], batch mean
  Tensor var;    // [C], biased batch variance (what normalisation used)
};

struct BatchNormGrads {
  Tensor dx, dgamma, dbeta;
};

struct PoolResult {
  Tensor y;
  Tensor workspace;   // max pooling: what backward needs (argmax), category workspace
};

struct WeightGrads {
  Tensor dw;
  Tensor dbias;   // undefined when there is no bias
};

struct CrossEntropyResult {
  Tensor loss;    // [1], mean over the batch
  Tensor probs;   // [N, K] softmax probabilities, saved for backward
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;

  // --- memory and layout ---
  virtual void fill(const Tensor& t, float value) = 0;
  // dst = src (same logical shape; layouts may differ).
  virtual void copy(const Tensor& src, const Tensor& dst) = 0;
  virtual Tensor to_layout(const Tensor& x, const Layout& layout) = 0;

  // --- convolution (weights [O, I/groups, kh, kw] plain, bias [O]) ---
  virtual Tensor conv2d_forward(const Tensor& x, const Tensor& w, const Tensor* bias, const Conv2dParams& p) = 0;
  virtual Tensor conv2d_backward_data(const Tensor& dy, const Tensor& w, const Shape& x_shape, const Layout& x_layout,
                                      const Conv2dParams& p) = 0;
  virtual WeightGrads conv2d_backward_weights(const Tensor& x, const Tensor& dy, const Shape& w_shape, bool bias,
                                              const Conv2dParams& p) = 0;

  // --- batch normalisation over N, H, W per channel (x 4-D [N,C,H,W] or 2-D [N,C]) ---
  virtual BatchNormStats batch_norm_forward_train(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps) = 0;
  virtual Tensor batch_norm_forward_eval(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                         const Tensor& running_mean, const Tensor& running_var, float eps) = 0;
  // use_global_stats: mean/var are running statistics (eval mode), treated as constants.
  virtual BatchNormGrads batch_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma, const Tensor& mean,
                                             const Tensor& var, float eps, bool use_global_stats = false) = 0;

  // --- element-wise (any layout; inputs of a binary op share shape and layout) ---
  virtual Tensor relu_forward(const Tensor& x) = 0;
  virtual Tensor relu_backward(const Tensor& dy, const Tensor& y) = 0;  // dy where y > 0
  virtual Tensor add(const Tensor& a, const Tensor& b) = 0;
  virtual Tensor mul(const Tensor& a, const Tensor& b) = 0;
  virtual Tensor scale(const Tensor& x, float s) = 0;
  virtual void add_inplace(const Tensor& acc, const Tensor& x, float alpha) = 0;  // acc += alpha * x
  virtual Tensor sum_all(const Tensor& x) = 0;   // [1]

  // --- pooling ---
  virtual PoolResult max_pool2d_forward(const Tensor& x, const Pool2dParams& p) = 0;
  virtual Tensor max_pool2d_backward(const Tensor& dy, const Tensor& workspace, const Shape& x_shape,
                                     const Layout& x_layout, const Pool2dParams& p) = 0;
  virtual Tensor avg_pool2d_forward(const Tensor& x, const Pool2dParams& p) = 0;
  virtual Tensor avg_pool2d_backward(const Tensor& dy, const Shape& x_shape, const Layout& x_layout,
                                     const Pool2dParams& p) = 0;

  // --- fully connected: y[N, O] = x[N, I] w[O, I]^T + b[O] ---
  virtual Tensor linear_forward(const Tensor& x, const Tensor& w, const Tensor* bias) = 0;
  virtual Tensor linear_backward_data(const Tensor& dy, const Tensor& w) = 0;
  virtual WeightGrads linear_backward_weights(const Tensor& x, const Tensor& dy, bool bias) = 0;

  // --- concatenation along a dimension, and its inverse ---
  virtual Tensor concat(const std::vector<Tensor>& xs, int64_t dim) = 0;
  virtual Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t length) = 0;

  // --- softmax cross-entropy over [N, K] logits with labels [N] (class indices as fp32) ---
  virtual CrossEntropyResult softmax_cross_entropy_forward(const Tensor& logits, const Tensor& labels) = 0;
  virtual Tensor softmax_cross_entropy_backward(const Tensor& dloss, const Tensor& probs, const Tensor& labels) = 0;

  // --- tanh, nearest upsampling and the gradient penalty (WGAN-GP's generator and critic) ---
  virtual Tensor tanh_forward(const Tensor& x) = 0;                      // any layout, kept
  virtual Tensor tanh_backward(const Tensor& dy, const Tensor& y) = 0;   // dy (1 - y^2)
  // x [N, C, H, W] -> [N, C, f H, f W], each value repeated f x f times (any layout, kept).
  virtual Tensor upsample_nearest2d_forward(const Tensor& x, int64_t factor) = 0;
  // Its adjoint: each f x f window of dy summed.
  virtual Tensor upsample_nearest2d_backward(const Tensor& dy, int64_t factor) = 0;
  // x [N, D] plain: loss [1] = mean_n (||x_n|| - target)^2, norms [N] = ||x_n||.
  struct NormPenaltyResult {
    Tensor loss, norms;
  };
  virtual NormPenaltyResult norm_penalty_forward(const Tensor& x, float target) = 0;
  // dx_n = dloss * 2 (||x_n|| - target) / (N ||x_n||) x_n (zero where ||x_n|| = 0).
  virtual Tensor norm_penalty_backward(const Tensor& dloss, const Tensor& x, const Tensor& norms, float target) = 0;

  // --- optimizer updates (in place, plain layout) ---
  // buf = momentum * buf + (grad + wd * param); param -= lr * (nesterov ? grad' + momentum * buf : buf)
  virtual void sgd_step(const Tensor& param, const Tensor& grad, const Tensor& momentum_buf, float lr, float momentum,
                        float weight_decay, bool nesterov) = 0;
  // Adam (Kingma & Ba; PyTorch's formulation, L2 weight decay added to the gradient), `step`
  // counting from 1: m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
  // param -= lr (m / (1 - b1^step)) / (sqrt(v / (1 - b2^step)) + eps).
  virtual void adam_step(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v, float lr,
                         float beta1, float beta2, float eps, float weight_decay, int64_t step) = 0;
};

// The backend for a device; throws std::runtime_error for a device this build lacks.
Backend& backend_for(Device device);
inline Backend& backend_of(const Tensor& t) { return backend_for(t.device()); }

}  // namespace ts::engine
