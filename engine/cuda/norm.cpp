// The norm family on the GPU: batch normalisation (training forward and backward on cuDNN,
// spatial mode; eval forward and the eval-mode gradient on our kernels) and layer normalisation
// (kernels in norm.cu). Checks and messages follow the CPU backend's (cpu/norm.cpp).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/cuda/cuda_common.h"
#include "engine/cuda/norm_kernels.h"

namespace ts::engine::cuda {

namespace {

struct BnDescs {
  TensorDesc x, param;
};

// [N, C, H, W] (or [N, C] as [N, C, 1, 1]) and the per-channel descriptor cuDNN derives.
void describe_bn(BnDescs& d, const Shape& s, const char* op) {
  set_nchw(d.x, s[0], s[1], s[2], s[3], op);
  TS_CUDNN_CHECK(cudnnDeriveBNTensorDescriptor(d.param.get(), d.x.get(), CUDNN_BATCHNORM_SPATIAL));
}

Tensor channel_temp(int64_t c, int device) { return workspace_tensor(c * static_cast<int64_t>(sizeof(float)), device); }

}  // namespace

BatchNormStats CudaBackend::batch_norm_forward_train(const Tensor& x_in, const Tensor& gamma, const Tensor& beta,
                                                     float eps) {
  const char* op = "batch_norm";
  check_on(x_in, device_, op, "input");
  const Shape s = nchw_shape(x_in.shape(), op);
  const int64_t c = s[1];
  check_channel_vec(gamma, device_, c, op, "gamma");
  check_channel_vec(beta, device_, c, op, "beta");
  const Tensor x = as_plain(*this, x_in);
  Env env(*impl_);
  BatchNormStats r;
  r.y = Tensor::empty(x.shape(), x.device());
  r.mean = Tensor::empty({c}, x.device());
  r.var = Tensor::empty({c}, x.device());
  if (x.numel() == 0) return r;
  BnDescs d;
  describe_bn(d, s, op);
  // cuDNN saves the batch mean and 1 / sqrt(var + eps); the contract wants the biased batch
  // variance, recovered from the latter (running statistics are the op layer's business, so
  // cuDNN's running-average outputs are not asked for).
  Tensor inv = channel_temp(c, device_);
  const float one = 1.0f, zero = 0.0f;
  {
    std::lock_guard<std::mutex> lock(env.ctx.library_mutex());
    TS_CUDNN_CHECK(cudnnBatchNormalizationForwardTraining(env.ctx.cudnn(), CUDNN_BATCHNORM_SPATIAL, &one, &zero,
                                                          d.x.get(), x.data(), d.x.get(), r.y.data(), d.param.get(),
                                                          gamma.data(), beta.data(), 1.0, nullptr, nullptr,
                                                          static_cast<double>(eps), r.mean.data(), inv.data()));
  }
  TS_CUDA_CHECK(kernels::var_from_inv_std(inv.data(), eps, r.var.data(), c, env.stream));
  return r;
}

Tensor CudaBackend::batch_norm_forward_eval(const Tensor& x_in, const Tensor& gamma, const Tensor& beta,
                                            const Tensor& running_mean, const Tensor& running_var, float eps) {
  const char* op = "batch_norm";
  check_on(x_in, device_, op, "input");
  const Shape s = nchw_shape(x_in.shape(), op);
  const int64_t c = s[1];
  check_channel_vec(gamma, device_, c, op, "gamma");
  check_channel_vec(beta, device_, c, op, "beta");
  check_channel_vec(running_mean, device_, c, op, "running_mean");
  check_channel_vec(running_var, device_, c, op, "running_var");
  const Tensor x = as_plain(*this, x_in);
  Env env(*impl_);
  Tensor y = Tensor::empty(x.shape(), x.device());
  Tensor inv = channel_temp(c, device_);
  TS_CUDA_CHECK(kernels::inv_std(running_var.data(), eps, inv.data(), c, env.stream));
  TS_CUDA_CHECK(kernels::bn_eval_forward(x.data(), gamma.data(), beta.data(), running_mean.data(), inv.data(), y.data(),
                                         s[0], c, s[2] * s[3], env.stream));
  return y;
}

BatchNormGrads CudaBackend::batch_norm_backward(const Tensor& dy_in, const Tensor& x_in, const Tensor& gamma,
                                                const Tensor& mean, const Tensor& var, float eps,
                                                bool use_global_stats) {
  const char* op = "batch_norm_backward";
  check_on(dy_in, device_, op, "dy");
  check_on(x_in, device_, op, "input");
  if (dy_in.shape() != x_in.shape()) {
    throw std::invalid_argument("batch_norm_backward: dy " + shape_str(dy_in.shape()) + " vs x " +
                                shape_str(x_in.shape()));
  }
  const Shape s = nchw_shape(x_in.shape(), op);
  const int64_t c = s[1], hw = s[2] * s[3];
  check_channel_vec(gamma, device_, c, op, "gamma");
  check_channel_vec(mean, device_, c, op, "mean");
  check_channel_vec(var, device_, c, op, "var");
  const Tensor x = as_plain(*this, x_in);
  const Tensor dy = as_plain(*this, dy_in);
  BatchNormGrads r;
  {
    Env env(*impl_);
    r.dx = Tensor::empty(x.shape(), x.device());
    r.dgamma = Tensor::empty({c}, x.device());
    r.dbeta = Tensor::empty({c}, x.device());
    Tensor inv = channel_temp(c, device_);
    TS_CUDA_CHECK(kernels::inv_std(var.data(), eps, inv.data(), c, env.stream));
    if (!use_global_stats) {
      if (x.numel() > 0) {
        BnDescs d;
        describe_bn(d, s, op);
        const float one = 1.0f, zero = 0.0f;
        std::lock_guard<std::mutex> lock(env.ctx.library_mutex());
        // mean and 1 / sqrt(var + eps) from the forward pass, as cuDNN's saved statistics.
        TS_CUDNN_CHECK(cudnnBatchNormalizationBackward(
            env.ctx.cudnn(), CUDNN_BATCHNORM_SPATIAL, &one, &zero, &one, &zero, d.x.get(), x.data(), d.x.get(),
            dy.data(), d.x.get(), r.dx.data(), d.param.get(), gamma.data(), r.dgamma.data(), r.dbeta.data(),
            static_cast<double>(eps), mean.data(), inv.data()));
      } else {
        TS_CUDA_CHECK(kernels::fill(r.dgamma.data(), c, 0.0f, env.stream));
        TS_CUDA_CHECK(kernels::fill(r.dbeta.data(), c, 0.0f, env.stream));
      }
    } else {
      // Eval mode: mean and var are constants, so y is affine in x:
      // dx = dy gamma inv_std, dgamma = sum dy (x - mean) inv_std, dbeta = sum dy.
      TS_CUDA_CHECK(
          kernels::bn_eval_backward_data(dy.data(), gamma.data(), inv.data(), r.dx.data(), s[0], c, hw, env.stream));
      Tensor partials =
          workspace_tensor(kernels::channel_partials(s[0], c, hw) * static_cast<int64_t>(sizeof(double)), device_);
      TS_CUDA_CHECK(kernels::channel_sums(dy.data(), x.data(), mean.data(), inv.data(), s[0], c, hw,
                                          reinterpret_cast<double*>(partials.data()), r.dbeta.data(), r.dgamma.data(),
                                          env.stream));
    }
  }
  if (!x_in.layout().is_plain()) r.dx = to_layout(r.dx, x_in.layout());
  return r;
}

Backend::LayerNormResult CudaBackend::layer_norm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                                         float eps) {
  check_plain(x, device_, "layer_norm", "x", 2);
  check_plain(gamma, device_, "layer_norm", "gamma", 1);
  check_plain(beta, device_, "layer_norm", "beta", 1);
  const int64_t m = x.size(0), d = x.size(1);
  if (gamma.size(0) != d || beta.size(0) != d) {
    throw std::invalid_argument("layer_norm: gamma/beta " + shape_str(gamma.shape()) + " for x " +
                                shape_str(x.shape()));
  }
  Env env(*impl_);
  LayerNormResult r{Tensor::empty({m, d}, x.device()), Tensor::empty({m}, x.device()), Tensor::empty({m}, x.device())};
  TS_CUDA_CHECK(kernels::layer_norm_forward(x.data(), gamma.data(), beta.data(), m, d, eps, r.y.data(), r.mean.data(),
                                            r.rstd.data(), env.stream));
  return r;
}

BatchNormGrads CudaBackend::layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                                                const Tensor& mean, const Tensor& rstd) {
  check_plain(dy, device_, "layer_norm_backward", "dy", 2);
  check_plain(x, device_, "layer_norm_backward", "x", 2);
  if (dy.shape() != x.shape()) throw std::invalid_argument("layer_norm_backward: dy and x shapes differ");
  const int64_t m = x.size(0), d = x.size(1);
  check_channel_vec(gamma, device_, d, "layer_norm_backward", "gamma");
  check_channel_vec(mean, device_, m, "layer_norm_backward", "mean");
  check_channel_vec(rstd, device_, m, "layer_norm_backward", "rstd");
  Env env(*impl_);
  BatchNormGrads r{Tensor::empty({m, d}, x.device()), Tensor::empty({d}, x.device()), Tensor::empty({d}, x.device())};
  TS_CUDA_CHECK(kernels::layer_norm_backward(dy.data(), x.data(), gamma.data(), mean.data(), rstd.data(), m, d,
                                             r.dx.data(), r.dgamma.data(), r.dbeta.data(), env.stream));
  return r;
}

}  // namespace ts::engine::cuda
