#pragma once
// An optimizer as a recipe: what a workload's optimizer is (its kind, hyper-parameters, schedule
// and gradient clipping), so that it can be built again over other tensors. A parameter server
// (distributed/ps/) builds one over each of its keys (a parameter, or a chunk of one) and updates the
// key with it whenever a gradient arrives, as the workload's own optimizer would update the
// whole parameter.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/optim/adam.h"
#include "engine/optim/rmsprop.h"
#include "engine/optim/sgd.h"
#include "engine/tensor.h"

namespace ts::engine::optim {

// An optimizer over a fixed list of tensors that is handed their gradients. One caller at a
// time per instance (sgd's and adam's state is unguarded; rmsprop's tolerates Hogwild callers).
class ShardOptimizer {
 public:
  virtual ~ShardOptimizer() = default;
  // One update of tensors[i] with grads[i] (same shapes; an undefined gradient leaves its tensor
  // alone), the schedule's learning rate of this step times `lr_scale`; then the step advances.
  virtual void step(const std::vector<Tensor>& grads, double lr_scale = 1.0) = 0;
  // The learning rate the next step() would use at lr_scale 1.
  virtual double current_lr() const = 0;
  virtual int64_t steps() const = 0;
};

struct OptimizerRecipe {
  std::string name;  // "sgd" | "adam" | "rmsprop"
  // Global-norm clipping the workload applies before its step (0: none). A parameter server
  // cannot see the global norm of the summed gradient: its workers clip their own gradient.
  double max_grad_norm = 0;
  std::function<std::unique_ptr<ShardOptimizer>(std::vector<Tensor>)> build;
};

OptimizerRecipe sgd_recipe(const SgdOptions& options, double max_grad_norm = 0);
OptimizerRecipe adam_recipe(const AdamOptions& options, double max_grad_norm = 0);
OptimizerRecipe rmsprop_recipe(const RmsPropOptions& options, double max_grad_norm = 0);

}  // namespace ts::engine::optim
