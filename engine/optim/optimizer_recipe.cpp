#include "engine/optim/optimizer_recipe.h"

#include <utility>

namespace ts::engine::optim {

namespace {

// The engine's own optimizer over the shard's tensors: the server's update of a key then runs
// the very arithmetic (the same backend kernel, the same float learning rate and step count) that
// the workload's step runs on the whole parameter, element by element.
template <class Optimizer, class Options>
class Shard final : public ShardOptimizer {
 public:
  Shard(std::vector<Tensor> tensors, const Options& options) : opt_(std::move(tensors), options) {}
  void step(const std::vector<Tensor>& grads, double lr_scale) override { opt_.step(grads, lr_scale); }
  double current_lr() const override { return opt_.current_lr(); }
  int64_t steps() const override { return opt_.steps(); }

 private:
  Optimizer opt_;  // RmsProp can be neither copied nor moved: built in place
};

template <class Optimizer, class Options>
OptimizerRecipe make_recipe(std::string name, const Options& options, double max_grad_norm) {
  OptimizerRecipe r;
  r.name = std::move(name);
  r.max_grad_norm = max_grad_norm;
  // The options are copied into the recipe: it outlives the workload that described it.
  r.build = [options](std::vector<Tensor> tensors) -> std::unique_ptr<ShardOptimizer> {
    return std::make_unique<Shard<Optimizer, Options>>(std::move(tensors), options);
  };
  return r;
}

}  // namespace

OptimizerRecipe sgd_recipe(const SgdOptions& options, double max_grad_norm) {
  return make_recipe<Sgd>("sgd", options, max_grad_norm);
}

OptimizerRecipe adam_recipe(const AdamOptions& options, double max_grad_norm) {
  return make_recipe<Adam>("adam", options, max_grad_norm);
}

OptimizerRecipe rmsprop_recipe(const RmsPropOptions& options, double max_grad_norm) {
  return make_recipe<RmsProp>("rmsprop", options, max_grad_norm);
}

}  // namespace ts::engine::optim
