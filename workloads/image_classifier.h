#pragma once
// The Workload for image classifiers (resnet50, inception_v3): a model, an image source,
// softmax cross-entropy and SGD with momentum.
#include <functional>
#include <memory>

#include "engine/optim/sgd.h"
#include "workloads/data/image_data.h"
#include "workloads/workload.h"

namespace ts::workloads {

// The classifiers' default recipe (Goyal et al.): lr 0.1 per 256 samples after a 5-step linear
// warm-up, SGD momentum 0.9, weight decay 1e-4; and the presets-table rows that state it.
engine::optim::LrSchedule default_lr_schedule(int64_t batch);
PresetTable default_optimizer_rows();

class ImageClassifier : public Workload {
 public:
  using Forward = std::function<engine::Tensor(const engine::Tensor&)>;
  // Logits for the training loss where a model has an auxiliary classifier (inception_v3):
  // loss = CE(logits) + aux_weight * CE(aux_logits); aux_logits may be undefined.
  struct TrainOutputs {
    engine::Tensor logits, aux_logits;
  };
  using TrainForward = std::function<TrainOutputs(const engine::Tensor&)>;

  // `forward` gives the logits evaluation uses; `train_forward`, when set, replaces it for the loss.
  ImageClassifier(std::shared_ptr<engine::nn::Module> model, Forward forward, std::unique_ptr<ImageSource> data,
                  int64_t batch, const engine::optim::LrSchedule& lr, TrainForward train_forward = {},
                  float aux_weight = 0.0f);

  engine::nn::Module& model() override { return *model_; }
  int64_t batch_size() const override { return batch_; }
  Batch next_batch() override { return data_->next_train(batch_); }
  engine::Tensor forward_loss(const Batch& batch) override;
  void optimizer_step() override { sgd_.step(); }
  void zero_grad() override { sgd_.zero_grad(); }
  std::optional<engine::optim::SplitStep> split_step() override { return sgd_.split_step(); }
  std::vector<engine::optim::OptimizerRecipe> optimizer_recipes() override {
    return {engine::optim::sgd_recipe(sgd_.options())};  // no clipping in optimizer_step()
  }
  double learning_rate() const override { return sgd_.current_lr(); }
  Quality evaluate(int64_t batches) override;  // batches < 0: the whole held-out set

  ImageSource& data() { return *data_; }
  engine::optim::Sgd& optimizer() { return sgd_; }

 private:
  std::shared_ptr<engine::nn::Module> model_;
  Forward forward_;
  TrainForward train_forward_;
  float aux_weight_;
  std::unique_ptr<ImageSource> data_;
  int64_t batch_;
  engine::optim::Sgd sgd_;
};

}  // namespace ts::workloads
