#pragma once
// An optimizer step cut into per-parameter updates, for data parallelism's cross-barrier
// scheduling (ByteScheduler, Peng et al. 2019): the next forward updates each layer's parameters
// as soon as their averaged gradients are in (engine/nn/parameter_gate.h), instead of waiting
// for every gradient and the whole step.
// `begin` fixes the step (its learning rate and count) and advances the optimizer's step;
// `update(i)` then applies that step to parameters[i] from its gradient and drops the gradient
// (nothing without a gradient), at most once per step, from any one thread at a time per i.
// An optimizer whose step needs every gradient first (global-norm clipping) cannot be cut so.
#include <cstddef>
#include <functional>
#include <vector>

#include "engine/tensor.h"

namespace ts::engine::optim {

struct SplitStep {
  std::vector<Tensor> parameters;
  std::function<void()> begin;
  std::function<void(size_t)> update;
};

}  // namespace ts::engine::optim
