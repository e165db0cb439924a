#pragma once
// Faster R-CNN (Ren et al. 2015) with a ResNet C4 backbone, as Detectron's "R-101-C4":
// conv1 .. layer3 ("conv1".."conv4", stride 16) shared by the RPN and the RoI head; the RPN
// (3x3 conv at the trunk's width, ReLU, 1x1 objectness with 2 logits per anchor, 1x1 box
// deltas; 9 anchors = 3 sizes x 3 ratios); proposals by NMS; RoIAlign (or RoIPool) 14x14 crops
// of the shared features through layer4 ("conv5", first block stride 2), global average pool,
// cls_score over the classes (background included) and class-specific bbox_pred. Batch norm is
// frozen everywhere (an affine with fixed statistics: the batch is one image).
//
// Modules are named so per-layer tables read backbone.layer3.5.conv2, rpn.conv,
// roi_head.layer4.0.conv1, roi_head.cls_score; RoI pooling runs as roi_head.pooler and the
// losses as loss.
#include <array>
#include <memory>
#include <string>
#include <vector>

#include "engine/nn/layers.h"
#include "engine/optim/sgd.h"
#include "workloads/data/detection_data.h"
#include "workloads/faster_rcnn/boxes.h"
#include "workloads/faster_rcnn/evaluation.h"
#include "workloads/workload.h"

namespace ts::workloads {

struct FasterRcnnConfig {
  // --- backbone: a ResNet trunk up to layer3 (C4), layer4 in the RoI head ---
  std::string backbone = "ResNet-101";
  std::array<int64_t, 3> blocks = {3, 4, 23};  // layer1..layer3
  int64_t head_blocks = 3;                     // layer4
  int64_t base_width = 64;                     // conv1's channels and layer1's bottleneck width
  bool stride_in_1x1 = true;                   // MSRA/Detectron ResNet: the stride-2 in the first 1x1
  int64_t freeze_at = 2;                       // 0 nothing, 1 conv1, 2 conv1 + layer1 (Detectron)
  float bn_eps = 1e-5f;
  int64_t in_channels = 3;
  int64_t num_classes = 21;  // background included
  // --- input ---
  int64_t short_side = 600, max_side = 1000;
  int64_t synthetic_width = 800;               // synthetic images are short_side x synthetic_width
  float min_object = 0.1f, max_object = 0.6f;  // synthetic object sides / shorter image side
  // --- anchors and RPN ---
  std::vector<float> anchor_sizes = {128, 256, 512};
  std::vector<float> anchor_ratios = {0.5f, 1.0f, 2.0f};
  int64_t feature_stride = 16;
  frcnn::AnchorTargetOptions rpn_targets;  // IoU 0.7 / 0.3, 256 per image, half positive
  frcnn::ProposalOptions train_proposals{12000, 2000, 0.7f, 16};
  frcnn::ProposalOptions test_proposals{6000, 300, 0.7f, 16};
  float rpn_beta = 1.0f / 9;
  // --- RoI head ---
  frcnn::RoiSampleOptions roi_samples;  // 128 per image, 25% foreground
  bool roi_pool = false;                // RoIPool (Fast R-CNN) instead of RoIAlign
  int64_t pooled_size = 14;
  int64_t sampling_ratio = 2;
  bool aligned = false;
  std::array<float, 4> box_weights = {10, 10, 5, 5};
  float head_beta = 1.0f;
  // --- test ---
  float score_threshold = 0.05f;
  float test_nms = 0.5f;
  int64_t detections_per_image = 100;
  // --- optimizer: SGD, lr = base_lr x batch / 16 after a linear warm-up ---
  double base_lr = 0.02;
  int64_t warmup = 500;
  double momentum = 0.9, weight_decay = 1e-4;
  int64_t default_batch = 1;
  // Images whose activations set the frozen batch-norm statistics (one forward each, when the
  // workload is built: before the first training or evaluation forward).
  int64_t calibration_images = 8;

  int64_t num_anchors() const { return static_cast<int64_t>(anchor_sizes.size() * anchor_ratios.size()); }
  int64_t trunk_channels() const { return base_width * 16; }  // layer3's output
  int64_t head_channels() const { return base_width * 32; }   // layer4's output
};

// Throws std::invalid_argument for an unknown preset.
FasterRcnnConfig faster_rcnn_config(const std::string& preset);

// Batch norm with fixed statistics and affine (torchvision's FrozenBatchNorm2d): weight, bias,
// running_mean and running_var are buffers, not parameters. No ImageNet checkpoint ships, so
// the statistics come from data once, before training (see FrozenBnCalibration).
class FrozenBatchNorm2d : public engine::nn::Module {
 public:
  FrozenBatchNorm2d(int64_t channels, engine::Device device, float eps = 1e-5f);
  engine::Tensor forward(const engine::Tensor& x) const;
  bool calibrated() const { return passes_ > 0; }

 private:
  float eps_;
  engine::Tensor weight_, bias_, mean_, var_;
  // Calibration: per-channel sums of the batch means and of E[x^2], one term per forward.
  mutable int64_t passes_ = 0;
  mutable std::vector<double> sum_mean_, sum_square_;
};

// While one is alive on this thread, every FrozenBatchNorm2d folds the per-channel mean and
// variance of each input it sees into its statistics (an equal-weight average over the
// forwards run in the scope) and normalises with the result. Several images' worth of
// statistics stand in for pretrained ones: activations start normalised, as in a pretrained
// network, and one image's quirks (a channel almost constant on it) do not blow up the next.
class FrozenBnCalibration {
 public:
  FrozenBnCalibration();
  ~FrozenBnCalibration();
  FrozenBnCalibration(const FrozenBnCalibration&) = delete;
  FrozenBnCalibration& operator=(const FrozenBnCalibration&) = delete;
  static bool active();

 private:
  bool saved_;
};

// ResNet bottleneck with frozen batch norm; children named as torchvision's (conv1, bn1, ...,
// downsample.0, downsample.1). workloads/resnet50's Bottleneck has trainable batch norm and the
// stride in the 3x3, so it does not fit here.
class DetectionBottleneck : public engine::nn::Module {
 public:
  DetectionBottleneck(int64_t in_channels, int64_t width, int64_t stride, bool stride_in_1x1, float bn_eps,
                      engine::Device device, engine::Rng& rng);
  engine::Tensor forward(const engine::Tensor& x) const;

 private:
  std::shared_ptr<engine::nn::Conv2d> conv1_, conv2_, conv3_, down_conv_;
  std::shared_ptr<FrozenBatchNorm2d> bn1_, bn2_, bn3_, down_bn_;
};

// conv1, bn1, max pool, layer1..layer3: stride 16, trunk_channels() out.
class ResNetC4 : public engine::nn::Module {
 public:
  ResNetC4(const FasterRcnnConfig& cfg, engine::Device device, engine::Rng& rng);
  engine::Tensor forward(const engine::Tensor& x) const;

 private:
  std::shared_ptr<engine::nn::Conv2d> conv1_;
  std::shared_ptr<FrozenBatchNorm2d> bn1_;
  std::vector<std::shared_ptr<DetectionBottleneck>> blocks_;
};

class RpnHead : public engine::nn::Module {
 public:
  RpnHead(int64_t channels, int64_t anchors, engine::Device device, engine::Rng& rng);
  struct Outputs {
    engine::Tensor objectness;  // [N, 2A, H, W]: channel 2a + k is anchor a's logit for k (0 bg, 1 fg)
    engine::Tensor deltas;      // [N, 4A, H, W]: channel 4a + j
  };
  Outputs forward(const engine::Tensor& features) const;

 private:
  std::shared_ptr<engine::nn::Conv2d> conv_, cls_logits_, bbox_pred_;
};

class RoiHead : public engine::nn::Module {
 public:
  RoiHead(const FasterRcnnConfig& cfg, engine::Device device, engine::Rng& rng);
  struct Outputs {
    engine::Tensor class_logits;  // [R, classes]
    engine::Tensor box_deltas;    // [R, 4 x classes]
  };
  Outputs forward(const engine::Tensor& pooled) const;

 private:
  std::vector<std::shared_ptr<DetectionBottleneck>> blocks_;
  std::shared_ptr<engine::nn::Linear> cls_score_, bbox_pred_;
};

class FasterRCNN : public engine::nn::Module {
 public:
  FasterRCNN(const FasterRcnnConfig& cfg, engine::Device device, uint64_t seed);

  struct Losses {
    engine::Tensor rpn_objectness, rpn_box, roi_class, roi_box, total;
    int64_t rpn_sampled = 0, rpn_positives = 0, rois = 0, roi_foreground = 0;
  };
  // One training forward: RPN targets and RoI samples drawn with `rng`.
  Losses forward_train(const engine::Tensor& images, const std::vector<ImageTargets>& targets, engine::Rng& rng) const;
  // Test-time detections per image (labels 1..classes-1), at most detections_per_image each.
  std::vector<std::vector<frcnn::Detection>> detect(const engine::Tensor& images,
                                                    const std::vector<ImageTargets>& images_info) const;

  const FasterRcnnConfig& config() const { return cfg_; }
  std::vector<engine::Tensor> trainable_parameters() const;
  const std::vector<Box>& cell_anchors() const { return cell_anchors_; }

 private:
  struct RpnPass;
  RpnPass run_rpn(const engine::Tensor& images) const;
  engine::Tensor pool(const engine::Tensor& features, const engine::Tensor& rois) const;

  FasterRcnnConfig cfg_;
  std::vector<Box> cell_anchors_;
  std::shared_ptr<ResNetC4> backbone_;
  std::shared_ptr<RpnHead> rpn_;
  std::shared_ptr<RoiHead> roi_head_;
};

class FasterRcnnWorkload : public Workload {
 public:
  FasterRcnnWorkload(std::shared_ptr<FasterRCNN> model, std::unique_ptr<DetectionSource> data, int64_t batch,
                     uint64_t seed);
  engine::nn::Module& model() override { return *model_; }
  int64_t batch_size() const override { return batch_; }
  Batch next_batch() override;
  engine::Tensor forward_loss(const Batch& batch) override;
  void optimizer_step() override { sgd_.step(); }
  void zero_grad() override { sgd_.zero_grad(); }
  std::optional<engine::optim::SplitStep> split_step() override { return sgd_.split_step(); }
  // Over every parameter (the one gradient group): the frozen ones never get a gradient, and an
  // undefined gradient leaves its tensor alone, as the step's Sgd (trainable ones only) does.
  std::vector<engine::optim::OptimizerRecipe> optimizer_recipes() override {
    return {engine::optim::sgd_recipe(sgd_.options())};
  }
  double learning_rate() const override { return sgd_.current_lr(); }
  // mAP@0.5 over `batches` held-out batches (< 0: the whole held-out set of a finite source).
  Quality evaluate(int64_t batches) override;

  const FasterRCNN::Losses& last_losses() const { return last_; }
  DetectionSource& data() { return *data_; }
  // Sets the frozen batch-norm statistics from `batch` and further training images,
  // config().calibration_images in all (done once, before the first forward: by the registry's
  // factory when it builds the workload, else by the first forward or evaluation).
  void calibrate(const Batch& batch);
  // The same from another source's training stream (its first batch, then further images):
  // with data parallelism the factory calibrates every rank on the unsharded stream, so that
  // the statistics, part of the model, do not depend on the rank.
  void calibrate_on(DetectionSource& images);
  bool calibrated() const { return calibrated_; }

 private:
  Batch batch_from(DetectionSource& source) const;
  void calibrate_from(const Batch& batch, DetectionSource& more);
  std::shared_ptr<FasterRCNN> model_;
  std::unique_ptr<DetectionSource> data_;
  int64_t batch_;
  engine::optim::Sgd sgd_;
  engine::Rng rng_;
  FasterRCNN::Losses last_;
  bool calibrated_ = false;
};

engine::optim::LrSchedule faster_rcnn_lr_schedule(const FasterRcnnConfig& cfg, int64_t batch);

WorkloadSpec faster_rcnn_spec();

}  // namespace ts::workloads
