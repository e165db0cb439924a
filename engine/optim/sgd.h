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

  void begin_step();
  void update(size_t i);
};

}  // namespace ts::engine::optim
