#pragma once
// SGD with momentum (PyTorch's formulation), weight decay and a learning-rate schedule.
// Momentum buffers are allocated lazily in the optimizer_state category.
#include <vector>

#include "engine/optim/lr_schedule.h"
#include "engine/optim/split_step.h"
#include "engine/tensor.h"

namespace ts::engine::optim {

struct SgdOptions {
  LrSchedule lr;
  double momentum = 0.9;
  double weight_decay = 1e-4;
  bool nesterov = false;
};

class Sgd {
 public:
  Sgd(std::vector<Tensor> params, SgdOptions options);
  // One update with the learning rate of the current step; then the step advances.
  void step();
  // The same update from gradients held elsewhere: grads[i] for params[i] (same shape; undefined:
  // skipped), the step's learning rate times `lr_scale` (a parameter server's shard of a
  // parameter, optimizer_recipe.h). The step advances as in step().
  void step(const std::vector<Tensor>& grads, double lr_scale = 1.0);
  // The same step cut per parameter (split_step.h); the gradients are dropped as they are used.
  SplitStep split_step();
  // Drops the gradients (they are allocated again by the next backward).
  void zero_grad();
  double current_lr() const { return options_.lr.at(step_); }
  int64_t steps() const { return step_; }
  const SgdOptions& options() const { return options_; }

 private:
  std::vector<Tensor> params_;
  std::vector<Tensor> momentum_;
  SgdOptions options_;
  int64_t step_ = 0;
  float step_lr_ = 0;  // the learning rate begin_step() fixed

  void begin_step(double lr_scale = 1.0);
  void update(size_t i, const Tensor& grad);
};

}  // namespace ts::engine::optim
