#pragma once
// Inception-v3 (Szegedy et al. 2016, "Rethinking the Inception Architecture") with the
// auxiliary classifier, laid out as torchvision's Inception3: a stem of BasicConv2d
// (conv without bias, batch norm eps 0.001, ReLU), Mixed_5b..5d (InceptionA), Mixed_6a
// (InceptionB, grid reduction), Mixed_6b..6e (InceptionC, factorised 1x7/7x1), Mixed_7a
// (InceptionD), Mixed_7b..7c (InceptionE), AuxLogits on Mixed_6e's 17x17 grid, fc. Modules
// carry torchvision's names (Conv2d_1a_3x3.conv, Mixed_6e.branch7x7dbl_3.bn, AuxLogits.fc)
// so per-layer tables read like torchvision's model.
#include <memory>
#include <string>
#include <vector>

#include "engine/nn/layers.h"
#include "workloads/workload.h"

namespace ts::workloads {

struct InceptionConfig {
  int64_t image_size = 299;
  int64_t in_channels = 3;
  int64_t num_classes = 1000;
  // Multiplies every channel count of torchvision's model (1 = the published widths); the
  // topology (blocks, branches, kernels, strides) never changes.
  double width = 1.0;
  bool aux_logits = true;
  float aux_weight = 0.4f;  // training loss = CE(logits) + aux_weight * CE(aux logits)
  int64_t batch = 32;       // the preset's default images per iteration (--batch overrides)
};

// Throws std::invalid_argument for an unknown preset.
InceptionConfig inception_v3_config(const std::string& preset);

// The smallest square input the network takes: 75 without the aux head (Mixed_7a needs a 3x3
// grid), 299 with it (its 5x5/3 pool and 5x5 conv need Mixed_6e's grid to be 17x17).
int64_t inception_v3_min_image_size(bool aux_logits);

// Channel count c of torchvision's model scaled by `width` (at least 1).
int64_t inception_channels(int64_t c, double width);

// conv (no bias) + BatchNorm (eps 0.001) + ReLU; children `conv` and `bn` as in torchvision.
class BasicConv2d : public engine::nn::Module {
 public:
  BasicConv2d(int64_t in, int64_t out, int64_t kernel_h, int64_t kernel_w, int64_t stride, int64_t pad_h, int64_t pad_w,
              engine::Device device, engine::Rng& rng);
  engine::Tensor forward(const engine::Tensor& x) const;
  int64_t out_channels() const { return out_; }

 private:
  int64_t out_;
  std::shared_ptr<engine::nn::Conv2d> conv_;
  std::shared_ptr<engine::nn::BatchNorm2d> bn_;
};

// A block whose branches run side by side and are concatenated along channels.
class InceptionBlock : public engine::nn::Module {
 public:
  using Module::Module;
  virtual engine::Tensor forward(const engine::Tensor& x) const = 0;
  virtual int64_t out_channels() const = 0;

 protected:
  // Builds and registers a BasicConv2d; `width` scales its output channels.
  std::shared_ptr<BasicConv2d> conv(const std::string& name, int64_t in, int64_t out, int64_t kh, int64_t kw,
                                    int64_t stride, int64_t ph, int64_t pw, engine::Rng& rng);
  double width_ = 1.0;
};

class InceptionA : public InceptionBlock {  // Mixed_5b..5d: 35x35 grid
 public:
  InceptionA(int64_t in, int64_t pool_features, double width, engine::Device device, engine::Rng& rng);
  engine::Tensor forward(const engine::Tensor& x) const override;
  int64_t out_channels() const override;

 private:
  std::shared_ptr<BasicConv2d> b1x1_, b5x5_1_, b5x5_2_, b3dbl_1_, b3dbl_2_, b3dbl_3_, pool_;
};

class InceptionB : public InceptionBlock {  // Mixed_6a: 35x35 -> 17x17
 public:
  InceptionB(int64_t in, double width, engine::Device device, engine::Rng& rng);
  engine::Tensor forward(const engine::Tensor& x) const override;
  int64_t out_channels() const override;

 private:
  int64_t in_;
  std::shared_ptr<BasicConv2d> b3x3_, b3dbl_1_, b3dbl_2_, b3dbl_3_;
};

class InceptionC : public InceptionBlock {  // Mixed_6b..6e: 17x17 grid, factorised 7x7
 public:
  InceptionC(int64_t in, int64_t channels_7x7, double width, engine::Device device, engine::Rng& rng);
  engine::Tensor forward(const engine::Tensor& x) const override;
  int64_t out_channels() const override;

 private:
  std::shared_ptr<BasicConv2d> b1x1_, b7_1_, b7_2_, b7_3_, b7dbl_1_, b7dbl_2_, b7dbl_3_, b7dbl_4_, b7dbl_5_, pool_;
};

class InceptionD : public InceptionBlock {  // Mixed_7a: 17x17 -> 8x8
 public:
  InceptionD(int64_t in, double width, engine::Device device, engine::Rng& rng);
  engine::Tensor forward(const engine::Tensor& x) const override;
  int64_t out_channels() const override;

 private:
  int64_t in_;
  std::shared_ptr<BasicConv2d> b3_1_, b3_2_, b7x3_1_, b7x3_2_, b7x3_3_, b7x3_4_;
};

class InceptionE : public InceptionBlock {  // Mixed_7b..7c: 8x8 grid, expanded filter banks
 public:
  InceptionE(int64_t in, double width, engine::Device device, engine::Rng& rng);
  engine::Tensor forward(const engine::Tensor& x) const override;
  int64_t out_channels() const override;

 private:
  std::shared_ptr<BasicConv2d> b1x1_, b3_1_, b3_2a_, b3_2b_, b3dbl_1_, b3dbl_2_, b3dbl_3a_, b3dbl_3b_, pool_;
};

// The auxiliary classifier on Mixed_6e: avg pool 5x5/3, conv0 1x1, conv1 5x5, global
// average pool, fc.
class InceptionAux : public engine::nn::Module {
 public:
  InceptionAux(int64_t in, int64_t num_classes, double width, engine::Device device, engine::Rng& rng);
  engine::Tensor forward(const engine::Tensor& x) const;

 private:
  std::shared_ptr<BasicConv2d> conv0_, conv1_;
  std::shared_ptr<engine::nn::Linear> fc_;
};

struct InceptionOutputs {
  engine::Tensor logits;      // [N, classes]
  engine::Tensor aux_logits;  // [N, classes] in training mode with the aux head; undefined otherwise
};

class InceptionV3 : public engine::nn::Module {
 public:
  InceptionV3(const InceptionConfig& cfg, engine::Device device, uint64_t seed);
  InceptionOutputs forward(const engine::Tensor& x) const;
  const InceptionConfig& config() const { return cfg_; }

 private:
  InceptionConfig cfg_;
  std::vector<std::shared_ptr<BasicConv2d>> stem_a_, stem_b_;  // before / after the first max pool
  std::vector<std::shared_ptr<InceptionBlock>> mixed_5_6_;     // Mixed_5b .. Mixed_6e
  std::shared_ptr<InceptionAux> aux_;
  std::vector<std::shared_ptr<InceptionBlock>> mixed_7_;  // Mixed_7a .. Mixed_7c
  std::shared_ptr<engine::nn::Linear> fc_;
};

WorkloadSpec inception_v3_spec();

}  // namespace ts::workloads
