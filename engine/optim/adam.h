#pragma once
// Adam (Kingma & Ba 2015) in PyTorch's formulation: bias-corrected moments, L2 weight decay
// added to the gradient. Moment buffers are allocated lazily in the optimizer_state category.
#include <vector>

#include "engine/optim/lr_schedule.h"
#include "engine/optim/split_step.h"
#include "engine/tensor.h"

namespace ts::engine::optim {

struct AdamOptions {
  LrSchedule lr;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;
};

class Adam {
 public:
  Adam(std::vector<Tensor> params, AdamOptions options);
  // One update with the learning rate of the current step; then the step advances.
  void step();
  // The same update from gradients held elsewhere: grads[i] for params[i] (same shape; undefined:
  // skipped), the step's learning rate times `lr_scale` (a parameter server's shard of a
  // parameter, optimizer_recipe.h). The step advances as in step().
  void step(const std::vector<Tensor>& grads, double lr_scale = 1.0);
  // The same step cut per parameter (split_step.h); the gradients are dropped as they are used.
  SplitStep split_step();
  void zero_grad();
  double current_lr() const { return options_.lr.at(step_); }
  int64_t steps() const { return step_; }
  const AdamOptions& options() const { return options_; }

 private:
  std::vector<Tensor> params_;
  std::vector<Tensor> m_, v_;
  AdamOptions options_;
  int64_t step_ = 0;
  float step_lr_ = 0;       // what begin_step() fixed: the learning rate
  int64_t step_count_ = 0;  // and the bias correction's step (from 1)

  void begin_step(double lr_scale = 1.0);
  void update(size_t i, const Tensor& grad);
};

}  // namespace ts::engine::optim
