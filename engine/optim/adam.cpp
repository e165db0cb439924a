#include "engine/optim/adam.h"

#include <stdexcept>
#include <string>

#include "engine/backend.h"
#include "engine/context.h"

namespace ts::engine::optim {

Adam::Adam(std::vector<Tensor> params, AdamOptions options)
    : params_(std::move(params)), m_(params_.size()), v_(params_.size()), options_(options) {}

void Adam::begin_step(double lr_scale) {
  // Scaled in double before the one rounding to float: at scale 1 this is step()'s rate exactly.
  step_lr_ = static_cast<float>(current_lr() * lr_scale);
  // Bias correction counts from 1 at the first update (every parameter updates each step here).
  step_count_ = ++step_;
}

void Adam::update(size_t i, const Tensor& g) {
  Tensor& p = params_[i];
  if (!g.defined()) return;
  if (!m_[i].defined()) {
    OwnerScope owner(&p.name(), 0);
    CategoryScope category(vocabulary::Category::optimizer_state);
    m_[i] = Tensor::zeros(p.shape(), p.device(), p.layout());
    v_[i] = Tensor::zeros(p.shape(), p.device(), p.layout());
  }
  // p, g and both moments read, p and both moments written.
  static const auto name = op_name("adam_step");
  OpScope scope(name, {profiler::WorkClass::memory, 0, 7 * p.numel() * static_cast<int64_t>(sizeof(float))});
  backend_of(p).adam_step(p, g, m_[i], v_[i], step_lr_, static_cast<float>(options_.beta1),
                          static_cast<float>(options_.beta2), static_cast<float>(options_.eps),
                          static_cast<float>(options_.weight_decay), step_count_);
}

void Adam::step() {
  begin_step();
  for (size_t i = 0; i < params_.size(); ++i) update(i, params_[i].grad());
}

void Adam::step(const std::vector<Tensor>& grads, double lr_scale) {
  if (grads.size() != params_.size()) {
    throw std::invalid_argument("Adam::step: " + std::to_string(grads.size()) + " gradients for " +
                                std::to_string(params_.size()) + " parameters");
  }
  begin_step(lr_scale);
  for (size_t i = 0; i < params_.size(); ++i) update(i, grads[i]);
}

SplitStep Adam::split_step() {
  return {params_, [this] { begin_step(); },
          [this](size_t i) {
            update(i, params_[i].grad());
            params_[i].zero_grad();
          }};
}

void Adam::zero_grad() {
  for (auto& p : params_) p.zero_grad();
}

}  // namespace ts::engine::optim
