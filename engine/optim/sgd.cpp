#include "engine/optim/sgd.h"

#include <stdexcept>
#include <string>

#include "engine/backend.h"
#include "engine/context.h"

namespace ts::engine::optim {

Sgd::Sgd(std::vector<Tensor> params, SgdOptions options)
    : params_(std::move(params)), momentum_(params_.size()), options_(options) {}

void Sgd::begin_step(double lr_scale) {
  // Scaled in double before the one rounding to float: at scale 1 this is step()'s rate exactly.
  step_lr_ = static_cast<float>(current_lr() * lr_scale);
  ++step_;
}

void Sgd::update(size_t i, const Tensor& g) {
  Tensor& p = params_[i];
  if (!g.defined()) return;
  if (!momentum_[i].defined()) {
    OwnerScope owner(&p.name(), 0);
    CategoryScope category(vocabulary::Category::optimizer_state);
    momentum_[i] = Tensor::zeros(p.shape(), p.device(), p.layout());
  }
  // p, g and the momentum read, p and the momentum written.
  static const auto name = op_name("sgd_step");
  OpScope scope(name, {profiler::WorkClass::memory, 0, 5 * p.numel() * static_cast<int64_t>(sizeof(float))});
  backend_of(p).sgd_step(p, g, momentum_[i], step_lr_, static_cast<float>(options_.momentum),
                         static_cast<float>(options_.weight_decay), options_.nesterov);
}

void Sgd::step() {
  begin_step();
  for (size_t i = 0; i < params_.size(); ++i) update(i, params_[i].grad());
}

void Sgd::step(const std::vector<Tensor>& grads, double lr_scale) {
  if (grads.size() != params_.size()) {
    throw std::invalid_argument("Sgd::step: " + std::to_string(grads.size()) + " gradients for " +
                                std::to_string(params_.size()) + " parameters");
  }
  begin_step(lr_scale);
  for (size_t i = 0; i < params_.size(); ++i) update(i, grads[i]);
}

SplitStep Sgd::split_step() {
  return {params_, [this] { begin_step(); },
          [this](size_t i) {
            update(i, params_[i].grad());
            params_[i].zero_grad();
          }};
}

void Sgd::zero_grad() {
  for (auto& p : params_) p.zero_grad();
}

}  // namespace ts::engine::optim
