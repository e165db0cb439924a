#pragma once
// RMSProp (Tieleman & Hinton 2012) with a learning-rate schedule, in either epsilon form:
// PyTorch's, d = sqrt(v) + eps, or the A3C paper's (and TensorFlow's), d = sqrt(v + eps).
// It also serves asynchronous learners (A3C): step(grads) applies gradients computed elsewhere
// (a learner's local copy of the network) to the shared parameters, and several threads may
// call it at once without a lock; the square averages are then shared by all of them, the
// paper's "shared RMSProp". Square averages are allocated up front (optimizer_state), so
// concurrent callers never race to create them.
#include <atomic>
#include <vector>

#include "engine/optim/lr_schedule.h"
#include "engine/tensor.h"

namespace ts::engine::optim {

struct RmsPropOptions {
  LrSchedule lr;
  double alpha = 0.99;  // decay of the square average
  double eps = 1e-8;
  bool eps_inside_sqrt = false;
};

class RmsProp {
 public:
  RmsProp(std::vector<Tensor> params, RmsPropOptions options);
  RmsProp(const RmsProp&) = delete;
  RmsProp& operator=(const RmsProp&) = delete;

  // One update of every parameter with its own gradient (parameters without one are skipped).
  void step();
  // One update with grads[i] for params[i] (same shapes; undefined: skipped). Thread-safe in
  // the Hogwild sense (see above). The learning rate is the schedule's at the number of steps
  // all callers have begun so far, times `lr_scale` (a parameter server's, optimizer_recipe.h).
  void step(const std::vector<Tensor>& grads, double lr_scale = 1.0);
  void zero_grad();
  double current_lr() const { return options_.lr.at(steps()); }
  int64_t steps() const { return step_.load(std::memory_order_relaxed); }
  const RmsPropOptions& options() const { return options_; }
  const std::vector<Tensor>& params() const { return params_; }
  const std::vector<Tensor>& square_averages() const { return square_avg_; }

 private:
  std::vector<Tensor> params_;
  std::vector<Tensor> square_avg_;
  RmsPropOptions options_;
  std::atomic<int64_t> step_{0};
};

}  // namespace ts::engine::optim
