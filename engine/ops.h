#pragma once
// Differentiable ops. Each traces one op event (name, layer in scope, pass), calls the
// backend for its device and, when autograd records, connects a Node whose backward is
// written with these same ops (so backward pieces are ops themselves).
#include <vector>

#include "engine/backend.h"
#include "engine/tensor.h"

namespace ts::engine::ops {

// --- layout family (ops/layout.cpp) ---
Tensor to_layout(const Tensor& x, const Layout& layout);
Tensor reshape(const Tensor& x, const Shape& shape);  // plain result
Tensor flatten(const Tensor& x);                      // [N, ...] -> [N, prod(...)]
Tensor concat(const std::vector<Tensor>& xs, int64_t dim);
Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t length);
// Rows of x [N, K] at index [M] (fp32 integers, never need grad) -> [M, K]; backward
// scatter-adds. index_add_rows is its adjoint ([M, K] -> [rows, K]); both twice differentiable.
Tensor index_select_rows(const Tensor& x, const Tensor& index);
Tensor index_add_rows(const Tensor& src, const Tensor& index, int64_t rows);
// y.shape[i] = x.shape[perm[i]]; e.g. {0, 2, 3, 1}: NCHW -> NHWC. Plain result, twice differentiable.
Tensor permute(const Tensor& x, const std::vector<int64_t>& perm);
// x cut along `dim` into consecutive parts of `sizes` (which sum to x.size(dim)); plain results.
// One node for all parts: backward concatenates their gradients once (zeros for parts that got
// none), where a slice per part would build a full-size gradient per part. Twice differentiable.
std::vector<Tensor> split(const Tensor& x, int64_t dim, const std::vector<int64_t>& sizes);

// --- pointwise family (ops/pointwise.cpp) ---
Tensor relu(const Tensor& x);
Tensor relu_backward(const Tensor& dy, const Tensor& y);
Tensor add(const Tensor& a, const Tensor& b);  // layouts may differ; b is brought to a's layout
Tensor mul(const Tensor& a, const Tensor& b);
Tensor scale(const Tensor& x, float s);
// Its backward is not differentiable again (a second backward through it throws).
Tensor tanh(const Tensor& x);
// Clipped ReLU (Deep Speech 2): min(max(x, 0), ceiling) (hardtanh(x, 0, ceiling)); twice
// differentiable (its backward is linear in dy, with a mask from y).
Tensor clipped_relu(const Tensor& x, float ceiling);
Tensor clipped_relu_backward(const Tensor& dy, const Tensor& y, float ceiling);
// Element-wise exp (plain result); first order only.
Tensor exp(const Tensor& x);
Tensor gelu(const Tensor& x);  // exact: x Phi(x)
// Inverted dropout with a mask drawn from (seed, element index); identity when !training or p == 0.
Tensor dropout(const Tensor& x, float p, uint64_t seed, bool training = true);

// --- reduce family (ops/reduce.cpp) ---
Tensor sum(const Tensor& x);   // [1]
Tensor mean(const Tensor& x);  // [1]

// --- conv family (ops/conv.cpp) ---
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& bias /* may be undefined */, const Conv2dParams& p);
Tensor conv2d_backward_data(const Tensor& dy, const Tensor& w, const Shape& x_shape, const Layout& x_layout,
                            const Conv2dParams& p);
// dw in w_layout: the layout of the weights it is the gradient of.
WeightGrads conv2d_backward_weights(const Tensor& x, const Tensor& dy, const Shape& w_shape, bool bias,
                                    const Conv2dParams& p, const Layout& w_layout = Layout::plain());

// --- norm family (ops/norm.cpp) ---
// Batch norm: training mode updates running stats in place (momentum as PyTorch: new = (1-m)
// old + m batch, running_var uses the unbiased batch variance).
Tensor batch_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& running_mean,
                  const Tensor& running_var, bool training, float momentum, float eps);
// relu(batch_norm(...)) in one pass over the data where the backend fuses them (training; oneDNN's
// fuse_norm_relu on the CPU): neither the normalised values nor a second read of them. Eval mode
// runs the two ops.
Tensor batch_norm_relu(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& running_mean,
                       const Tensor& running_var, bool training, float momentum, float eps);
// Layer norm over the last dimension (biased variance, eps inside the square root); first order.
Tensor layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps = 1e-5f);

// --- pool family (ops/pool.cpp) ---
Tensor max_pool2d(const Tensor& x, const Pool2dParams& p);
Tensor avg_pool2d(const Tensor& x, const Pool2dParams& p);
Tensor avg_pool2d_backward(const Tensor& dy, const Shape& x_shape, const Layout& x_layout, const Pool2dParams& p);
Tensor global_avg_pool2d(const Tensor& x);  // [N, C, H, W] -> [N, C] (plain)
// Nearest-neighbour upsampling by an integer factor (twice differentiable).
Tensor upsample_nearest2d(const Tensor& x, int64_t factor);
Tensor upsample_nearest2d_backward(const Tensor& dy, int64_t factor);

// --- linear family (ops/linear.cpp) ---
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& bias /* may be undefined */);

// --- softmax family (ops/softmax.cpp) ---
// Log-softmax over the last dimension of x [M, K] (plain result; A3C's policy); first order only.
Tensor log_softmax(const Tensor& x);

// --- loss family (ops/loss.cpp) ---
// Mean softmax cross-entropy; labels [N] hold class indices as fp32, never need grad.
Tensor softmax_cross_entropy(const Tensor& logits, const Tensor& labels);
// Label-smoothed cross-entropy over logits [N, V] and labels [N]; rows labelled ignore_index
// (padding) count for nothing; the sum over rows is divided by `normalizer` (e.g. the number
// of real target tokens).
Tensor label_smoothed_cross_entropy(const Tensor& logits, const Tensor& labels, float eps, int64_t ignore_index,
                                    float normalizer);
// WGAN-GP's gradient penalty: x [N, ...], mean_n (||x_n||_2 - target)^2 -> [1]; the
// per-sample norms go to `norms` when given. First order only (x is itself a gradient).
Tensor norm_penalty(const Tensor& x, float target, Tensor* norms = nullptr);
// sum_i w_i smooth_l1(x_i - t_i; beta) / normalizer -> [1]. weights (may be undefined: ones)
// are constants; x and target get gradients (first order only).
Tensor smooth_l1_loss(const Tensor& x, const Tensor& target, const Tensor& weights, float beta,
                      float normalizer = 1.0f);

// --- attention family (ops/attention.cpp) ---
// Multi-head scaled dot-product attention: q [B, Tq, H dh], k and v [B, Tk, H dh] ->
// [B, Tq, H dh]; key_lengths [B] (fp32, may be undefined) hides padded keys, causal hides j > i.
// First order only.
Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_lengths, int64_t heads,
                 float scale, bool causal);
// Additive (Bahdanau) attention for one decoder step: query [B, A] (W_q q), keys [B, S, A]
// (W_k m_j, projected once per batch), values [B, S, D] (the memory m), v [A]; lengths [B]
// (fp32 integers, never need grad; undefined: all S) hides keys j >= lengths[b].
// score_j = v . tanh(query_b + keys_bj); context [B, D] = sum_j softmax(score)_j values_bj.
// The weights [B, S] go to `probs` when given. query, keys, values and v get gradients; first
// order only.
Tensor additive_attention(const Tensor& query, const Tensor& keys, const Tensor& values, const Tensor& v,
                          const Tensor& lengths, Tensor* probs = nullptr);

// --- rnn family (ops/rnn.cpp) ---
// Recurrent layers, one layer and one direction (seq2seq, Deep Speech 2).
// x [T, B, I] time-major; weights in PyTorch's layout and gate order: LSTM w_ih [4H, I], w_hh
// [4H, H], gates (i, f, g, o); GRU w_ih [3H, I], w_hh [3H, H], gates (r, z, n) with
// n = tanh(W_in x + b_in + r (W_hn h + b_hn)) (torch.nn.GRU, cuDNN). Two biases b_ih, b_hh as
// PyTorch has them (LSTM adds them; either may be undefined = zeros). h0, c0 [B, H] may be
// undefined (zeros). lengths [B] (fp32 integers in [0, T], never need grad; undefined: all T):
// padding sits at the end; steps t >= lengths[b] keep the state and output zeros. reverse runs
// each sequence from its own last real step back to 0 (a bidirectional layer's backward half).
// Every input but lengths gets a gradient; first order only (a second backward throws).
struct RnnOutput {
  Tensor y;    // [T, B, H], zeros at padded steps
  Tensor h_n;  // [B, H]: the state after each sequence's own last real step (h0 where length is 0)
  Tensor c_n;  // [B, H]: the LSTM's cell state there; undefined for the GRU
};
RnnOutput lstm(const Tensor& x, const Tensor& h0, const Tensor& c0, const Tensor& w_ih, const Tensor& w_hh,
               const Tensor& b_ih, const Tensor& b_hh, const Tensor& lengths, bool reverse = false);
RnnOutput gru(const Tensor& x, const Tensor& h0, const Tensor& w_ih, const Tensor& w_hh, const Tensor& b_ih,
              const Tensor& b_hh, const Tensor& lengths, bool reverse = false);

// --- ctc family (ops/ctc.cpp): the loss, and the host-side decoding and error rate Deep Speech 2
// measures with ---
struct CtcLossOptions {
  int64_t blank = 0;
  Backend::CtcReduction reduction = Backend::CtcReduction::mean;  // PyTorch's 'mean' (see backend.h)
  bool zero_infinity = false;  // infeasible samples: loss 0 and gradient 0 instead of inf / NaN
};
// logits [T, N, K] (time-major, unnormalised: log-softmax is fused inside), targets [sum L_n]
// (concatenated label sequences), input_lengths [N], target_lengths [N]: fp32 integers that
// never need grad. -> [1]. Per-sample -log p [N] goes to `nll` when given. First order only.
Tensor ctc_loss(const Tensor& logits, const Tensor& targets, const Tensor& input_lengths, const Tensor& target_lengths,
                const CtcLossOptions& options = {}, Tensor* nll = nullptr);
// Greedy (best-path) decoding on the host: argmax per frame over each sample's first
// input_lengths[n] frames, repeats collapsed, blanks dropped. Not an op (no autograd, no event).
std::vector<std::vector<int64_t>> ctc_greedy_decode(const Tensor& logits, const Tensor& input_lengths,
                                                    int64_t blank = 0);
// Levenshtein distance with unit costs (substitution, insertion, deletion).
int64_t edit_distance(const std::vector<int64_t>& hypothesis, const std::vector<int64_t>& reference);
// Corpus-level error rate (CER when the labels are characters): sum of edit distances / sum of
// reference lengths; when every reference is empty, the edit count itself (divided by 1).
double error_rate(const std::vector<std::vector<int64_t>>& hypotheses,
                  const std::vector<std::vector<int64_t>>& references);

// --- roi family (ops/roi.cpp) ---
// RoI pooling (Faster R-CNN). rois [R, 5]: (batch index, x1, y1, x2, y2) in input-image pixels;
// they get no gradient (as in Faster R-CNN's approximate joint training). x in any layout;
// results plain.
// RoIAlign -> [R, C, pooled_h, pooled_w]; backward is first order only.
Tensor roi_align(const Tensor& x, const Tensor& rois, int64_t pooled_h, int64_t pooled_w, float spatial_scale,
                 int64_t sampling_ratio = 2, bool aligned = false);
// RoIPool (max per bin of the rounded RoI) -> [R, C, pooled_h, pooled_w]; first order only.
Tensor roi_pool(const Tensor& x, const Tensor& rois, int64_t pooled_h, int64_t pooled_w, float spatial_scale);

}  // namespace ts::engine::ops
