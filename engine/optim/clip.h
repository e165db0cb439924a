#pragma once
// Gradient clipping by the global norm (Pascanu et al. 2013; PyTorch's clip_grad_norm_):
// when ||g|| over all parameters exceeds max_norm, every gradient is scaled by
// max_norm / (||g|| + 1e-6). Returns ||g|| before clipping.
#include <vector>

#include "engine/tensor.h"

namespace ts::engine::optim {

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm);

}  // namespace ts::engine::optim
