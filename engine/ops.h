#pragma once
// Differentiable ops. Each traces one op event (name, layer in scope, pass), calls the
// backend for its device and, when autograd records, connects a Node whose backward is
// written with these same ops (so backward pieces are ops themselves).
#include <vector>

#include "engine/backend.h"
#include "engine/tensor.h"

namespace ts::engine::ops {

// --- layout and shape ---
Tensor to_layout(const Tensor& x, const Layout& layout);
Tensor reshape(const Tensor& x, const Shape& shape);   // plain result
Tensor flatten(const Tensor& x);                       // [N, ...] -> [N, prod(...)]

// --- convolution and its backward pieces ---
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& bias /* may be undefined */, const Conv2dParams& p);
Tensor conv2d_backward_data(const Tensor& dy, const Tensor& w, const Shape& x_shape, const Layout& x_layout,
                            const Conv2dParams& p);
WeightGrads conv2d_backward_weights(const Tensor& x, const Tensor& dy, const Shape& w_shape, bool bias,
                                    const Conv2dParams& p);

// --- batch norm: training mode updates running stats in place (momentum as PyTorch: new = (1-m) old + m batch,
// running_var uses the unbiased batch variance) ---
Tensor batch_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& running_mean,
                  const Tensor& running_var, bool training, float momentum, float eps);

// --- element-wise ---
Tensor relu(const Tensor& x);
Tensor relu_backward(const Tensor& dy, const Tensor& y);
Tensor add(const Tensor& a, const Tensor& b);   // layouts may differ; b is brought to a's layout
Tensor mul(const Tensor& a, const Tensor& b);
Tensor scale(const Tensor& x, float s);
Tensor sum(const Tensor& x);                    // [1]
Tensor mean(const Tensor& x);                   // [1]
// Its backward is not differentiable again (a second backward through it throws).
Tensor tanh(const Tensor& x);

// --- pooling ---
Tensor max_pool2d(const Tensor& x, const Pool2dParams& p);
Tensor avg_pool2d(const Tensor& x, const Pool2dParams& p);
Tensor avg_pool2d_backward(const Tensor& dy, const Shape& x_shape, const Layout& x_layout, const Pool2dParams& p);
Tensor global_avg_pool2d(const Tensor& x);     // [N, C, H, W] -> [N, C] (plain)

// --- nearest-neighbour upsampling by an integer factor (twice differentiable) ---
Tensor upsample_nearest2d(const Tensor& x, int64_t factor);
Tensor upsample_nearest2d_backward(const Tensor& dy, int64_t factor);

// --- fully connected ---
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& bias /* may be undefined */);

// --- concatenation ---
Tensor concat(const std::vector<Tensor>& xs, int64_t dim);
Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t length);

// --- loss: mean softmax cross-entropy; labels [N] hold class indices as fp32, never need grad ---
Tensor softmax_cross_entropy(const Tensor& logits, const Tensor& labels);
// --- WGAN-GP's gradient penalty: x [N, ...], mean_n (||x_n||_2 - target)^2 -> [1]; the
// per-sample norms go to `norms` when given. First order only (x is itself a gradient). ---
Tensor norm_penalty(const Tensor& x, float target, Tensor* norms = nullptr);

}  // namespace ts::engine::ops
