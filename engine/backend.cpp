// What a backend may fuse, written once as the composition of its own methods: a backend that
// has a fused kernel overrides it (cpu/norm.cpp), the others compute the same in two passes.
#include "engine/backend.h"

namespace ts::engine {

BatchNormStats Backend::batch_norm_relu_forward_train(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                                      float eps) {
  BatchNormStats s = batch_norm_forward_train(x, gamma, beta, eps);
  s.y = relu_forward(s.y);
  s.relu_mask = s.y;
  return s;
}

BatchNormGrads Backend::batch_norm_relu_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                                                 const Tensor& mean, const Tensor& var, float eps,
                                                 const Tensor& relu_mask) {
  return batch_norm_backward(relu_backward(dy, relu_mask), x, gamma, mean, var, eps, false);
}

}  // namespace ts::engine
