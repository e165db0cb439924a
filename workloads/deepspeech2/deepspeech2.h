#pragma once
// Deep Speech 2 (Amodei et al. 2016), the roster's configuration (docs/design.md, "The workloads"): two 2-D
// convolutions over the spectrogram (32 channels; 11x41 stride 2x2, then 11x21 stride 1x2, time x frequency), each with
// batch norm and the clipped ReLU min(max(x, 0), 20); seven bidirectional GRU layers of 1760 units whose two directions
// are summed, with sequence-wise batch norm on the input of every recurrent layer but the first; one fully connected
// layer to the 29 characters; CTC; SGD with momentum. Modules read conv.0, bn.0, conv.1, bn.1, rnns.0 .. rnns.6 (each
// rnns.i.bn and rnns.i.gru, PyTorch's GRU parameter names) and fc. The choices and their sources: docs/workloads.md,
// "## deepspeech2".
#include <memory>
#include <string>
#include <vector>

#include "engine/nn/layers.h"
#include "engine/nn/recurrent.h"
#include "workloads/workload.h"

namespace ts::workloads {

struct DeepSpeech2Config {
  int64_t conv_channels = 32;
  // Kernels and strides as (time, frequency); padding is half the kernel, (k - 1) / 2, so the
  // output length along a dimension is ceil(n / stride).
  int64_t conv0_kernel_t = 11, conv0_kernel_f = 41, conv0_stride_t = 2, conv0_stride_f = 2;
  int64_t conv1_kernel_t = 11, conv1_kernel_f = 21, conv1_stride_t = 1, conv1_stride_f = 2;
  int64_t rnn_layers = 7;
  int64_t rnn_hidden = 1760;
  int64_t frequency_bins = 161;  // kSpectrogramBins
  int64_t classes = 29;          // kSpeechAlphabetSize: blank, space, apostrophe, a-z
  float relu_clip = 20.0f;
  int64_t batch = 32;  // utterances per iteration
  double lr = 3e-4;    // on the loss summed per utterance, averaged over the batch
  double momentum = 0.9;
  double lr_anneal = 1.1;      // lr divided by this after every epoch
  double max_grad_norm = 400;  // global gradient-norm clipping (0: none)
};

// Throws std::invalid_argument for an unknown preset.
DeepSpeech2Config deepspeech2_config(const std::string& preset);

// Output length of a convolution along one dimension with the half-kernel padding: ceil(n / stride).
int64_t deepspeech2_conv_out(int64_t n, int64_t stride);
// Frequency bins after both convolutions (161 -> 81 -> 41 for the full model).
int64_t deepspeech2_conv_bins(const DeepSpeech2Config& c);
// GRU input length from spectrogram frames: ceil(ceil(T / 2) / 1) for the full model.
int64_t deepspeech2_output_frames(const DeepSpeech2Config& c, int64_t frames);

// The parameter count that follows from the configuration alone (tested against the model):
// convolutions C kt0 kf0 + C^2 kt1 kf1 (no biases: batch norm follows) and 2 x 2C of batch norm;
// per recurrent layer l, two directions of 3H (I_l + H) + 6H with I_0 = C F', I_l = H after
// (the directions are summed), plus 2 I_l of sequence-wise batch norm for l >= 1; fc H K + K.
int64_t deepspeech2_parameter_count(const DeepSpeech2Config& c);

// One recurrent layer: sequence-wise batch norm of the input (over all T x B frames; not on
// the first layer, whose input the convolutions' batch norm has already normalised), then a
// bidirectional GRU with the directions summed.
class BatchRnn : public engine::nn::Module {
 public:
  BatchRnn(int64_t input_size, int64_t hidden, bool batch_norm, engine::Device device, engine::Rng& rng);
  // x [T, B, I] time-major, lengths [B] (fp32 frames) -> [T, B, H], zeros past each length.
  engine::Tensor forward(const engine::Tensor& x, const engine::Tensor& lengths) const;

 private:
  std::shared_ptr<engine::nn::BatchNorm2d> bn_;  // on [T B, I]: BatchNorm2d takes [N, C] too
  std::shared_ptr<engine::nn::Gru> gru_;
};

class DeepSpeech2 : public engine::nn::Module {
 public:
  DeepSpeech2(const DeepSpeech2Config& c, engine::Device device, uint64_t seed);
  const DeepSpeech2Config& config() const { return cfg_; }

  struct Output {
    engine::Tensor logits;          // [T', N, classes], time-major, unnormalised (CTC's log-softmax is fused)
    engine::Tensor output_lengths;  // [N] frames after the convolutions (fp32)
  };
  // features [N, 1, T, frequency_bins] (zeros past each utterance), input_lengths [N] frames.
  Output forward(const engine::Tensor& features, const engine::Tensor& input_lengths) const;

 private:
  // conv -> batch norm -> clipped ReLU, then the time steps past each utterance's own length
  // zeroed (so that the next convolution sees the zero padding an utterance alone would get).
  engine::Tensor conv_block(const engine::nn::Conv2d& conv, const engine::nn::BatchNorm2d& bn, const engine::Tensor& x,
                            const std::vector<int64_t>& lengths) const;

  DeepSpeech2Config cfg_;
  std::shared_ptr<engine::nn::Conv2d> conv0_, conv1_;
  std::shared_ptr<engine::nn::BatchNorm2d> bn0_, bn1_;
  std::vector<std::shared_ptr<BatchRnn>> rnns_;
  std::shared_ptr<engine::nn::Linear> fc_;
};

WorkloadSpec deepspeech2_spec();

}  // namespace ts::workloads
