// The optimizer family on the GPU: SGD with momentum, Adam and RMSProp, in place (kernels in
// optim.cu). Checks follow the CPU backend's (cpu/optim.cpp): the same arguments are refused.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/cuda/cuda_common.h"
#include "engine/cuda/optim_kernels.h"

namespace ts::engine::cuda {

void CudaBackend::sgd_step(const Tensor& param, const Tensor& grad_in, const Tensor& buf, float lr, float momentum,
                           float weight_decay, bool nesterov) {
  check_same(param, grad_in, device_, "sgd_step");
  const Tensor grad = in_layout(*this, grad_in, param.layout());
  if (buf.defined()) {
    check_same(param, buf, device_, "sgd_step");
    if (buf.layout() != param.layout())
      throw std::invalid_argument("sgd_step: momentum buffer layout differs from param");
  }
  Env env(*impl_);
  TS_CUDA_CHECK(kernels::sgd_step(param.data(), grad.data(), buf.defined() ? buf.data() : nullptr,
                                  param.storage_numel(), lr, momentum, weight_decay, nesterov, env.stream));
}

void CudaBackend::adam_step(const Tensor& param, const Tensor& grad_in, const Tensor& m, const Tensor& v, float lr,
                            float beta1, float beta2, float eps, float weight_decay, int64_t step) {
  const char* op = "adam_step";
  for (const Tensor* t : {&param, &grad_in, &m, &v}) check_on(*t, device_, op, "tensor");
  if (grad_in.shape() != param.shape() || m.shape() != param.shape() || v.shape() != param.shape()) {
    fail(op, "shapes differ: param " + shape_str(param.shape()) + ", grad " + shape_str(grad_in.shape()) + ", m " +
                 shape_str(m.shape()) + ", v " + shape_str(v.shape()));
  }
  if (m.layout() != param.layout() || v.layout() != param.layout()) {
    fail(op, "moment buffer layout differs from param");
  }
  if (step < 1) fail(op, "step counts from 1, got " + std::to_string(step));
  const Tensor grad = grad_in.layout() == param.layout() ? grad_in : to_layout(grad_in, param.layout());
  // The bias corrections as the CPU backend computes them (in double, then rounded).
  const float step_size = lr / static_cast<float>(1.0 - std::pow(static_cast<double>(beta1), step));
  const float bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(static_cast<double>(beta2), step)));
  Env env(*impl_);
  TS_CUDA_CHECK(kernels::adam_step(param.data(), grad.data(), m.data(), v.data(), param.storage_numel(), beta1, beta2,
                                   eps, weight_decay, step_size, bc2_sqrt, env.stream));
}

void CudaBackend::rmsprop_step(const Tensor& param, const Tensor& grad, const Tensor& square_avg, float lr, float alpha,
                               float eps, bool eps_inside_sqrt) {
  const char* op = "rmsprop_step";
  for (const Tensor* t : {&param, &grad, &square_avg}) {
    if (!usable_plain(*t, device_, -1)) fail(op, "needs plain tensors on cuda:" + std::to_string(device_));
  }
  if (grad.shape() != param.shape() || square_avg.shape() != param.shape()) {
    fail(op, "param " + shape_str(param.shape()) + ", grad " + shape_str(grad.shape()) + " and square_avg " +
                 shape_str(square_avg.shape()) + " differ");
  }
  // Concurrent callers (Hogwild learners) each queue one launch on the device's one stream:
  // the updates run one after another and none is lost.
  Env env(*impl_);
  TS_CUDA_CHECK(kernels::rmsprop_step(param.data(), grad.data(), square_avg.data(), param.numel(), lr, alpha, eps,
                                      eps_inside_sqrt, env.stream));
}

}  // namespace ts::engine::cuda
