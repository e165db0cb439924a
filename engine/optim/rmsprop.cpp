#include "engine/optim/rmsprop.h"

#include <stdexcept>
#include <string>

#include "engine/backend.h"
#include "engine/context.h"

namespace ts::engine::optim {

RmsProp::RmsProp(std::vector<Tensor> params, RmsPropOptions options) : params_(std::move(params)), options_(options) {
  if (!(options_.alpha >= 0 && options_.alpha < 1) || !(options_.eps > 0)) {
    throw std::invalid_argument("RmsProp: alpha must be in [0, 1) and eps positive");
  }
  square_avg_.reserve(params_.size());
  for (const Tensor& p : params_) {
    OwnerScope owner(&p.name(), 0);
    CategoryScope category(vocabulary::Category::optimizer_state);
    square_avg_.push_back(Tensor::zeros(p.shape(), p.device(), p.layout()));
  }
}

void RmsProp::step() {
  std::vector<Tensor> grads;
  grads.reserve(params_.size());
  for (const Tensor& p : params_) grads.push_back(p.grad());
  step(grads);
}

void RmsProp::step(const std::vector<Tensor>& grads, double lr_scale) {
  if (grads.size() != params_.size()) {
    throw std::invalid_argument("RmsProp::step: " + std::to_string(grads.size()) + " gradients for " +
                                std::to_string(params_.size()) + " parameters");
  }
  // Scaled in double before the one rounding to float: at scale 1 this is the schedule's rate exactly.
  const auto lr = static_cast<float>(options_.lr.at(step_.fetch_add(1, std::memory_order_relaxed)) * lr_scale);
  static const auto name = op_name("rmsprop_step");
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!grads[i].defined()) continue;
    // p, g and the square average read, p and the square average written.
    OpScope scope(name, {profiler::WorkClass::memory, 0, 5 * params_[i].numel() * static_cast<int64_t>(sizeof(float))});
    backend_of(params_[i])
        .rmsprop_step(params_[i], grads[i], square_avg_[i], lr, static_cast<float>(options_.alpha),
                      static_cast<float>(options_.eps), options_.eps_inside_sqrt);
  }
}

void RmsProp::zero_grad() {
  for (auto& p : params_) p.zero_grad();
}

}  // namespace ts::engine::optim
